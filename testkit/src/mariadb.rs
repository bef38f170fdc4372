//! A real MariaDB server in a container, running a Vitess tablet directory of a host volume.
//!
//! The host's vtdataroot directory is bind-mounted at `/vt/vtdataroot`, so every path in
//! my.cnf is the path a vitess-operator pod sees. The container has no network
//! (`--network none`); clients talk over the unix socket from inside it.
//!
//! The image is built locally by `scripts/build-images.sh` (no registry). Where Docker
//! and the internet exist, `VTSNAP_TEST_DB_IMAGE=mysql:8.0` switches to a real MySQL 8
//! (flavor taken from the image name, or `VTSNAP_TEST_DB_FLAVOR=mariadb|mysql80`).
//! testcontainers finds the engine through `DOCKER_HOST` (the Podman API socket here).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use testcontainers::core::{ExecCommand, Mount};
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, GenericImage, ImageExt};
use vtsnap_core::naming::TabletUid;

use crate::layout::{Flavor, MOUNT, SOCKET};

/// Marks the background load's shell, so that only it is stopped.
const LOAD_MARK: &str = "vtsnap-test-load";

pub const DEFAULT_IMAGE: &str = "localhost/vtsnap-mariadb:test";

fn image_and_flavor() -> (String, String, Flavor) {
    let image = std::env::var("VTSNAP_TEST_DB_IMAGE").unwrap_or_else(|_| DEFAULT_IMAGE.to_owned());
    let flavor = match std::env::var("VTSNAP_TEST_DB_FLAVOR").ok().as_deref() {
        Some("mysql80") => Flavor::MySql80,
        Some(_) => Flavor::MariaDb,
        None if image.starts_with("mysql") => Flavor::MySql80,
        None => Flavor::MariaDb,
    };
    let (name, tag) = match image.rsplit_once(':') {
        Some((n, t)) if !t.contains('/') => (n.to_owned(), t.to_owned()),
        _ => (image.clone(), "latest".to_owned()),
    };
    (name, tag, flavor)
}

/// The flavor the fixture will run, for building a matching my.cnf.
pub fn flavor() -> Flavor {
    image_and_flavor().2
}

struct Commands {
    server: &'static str,
    init: String,
    client: &'static str,
    admin: &'static str,
}

fn commands(flavor: Flavor, mycnf: &str) -> Commands {
    match flavor {
        Flavor::MariaDb => Commands {
            server: "mariadbd",
            init: format!(
                "mariadb-install-db --defaults-file={mycnf} --user=root --skip-test-db >/dev/null"
            ),
            client: "mariadb",
            admin: "mariadb-admin",
        },
        Flavor::MySql80 => Commands {
            server: "mysqld",
            init: format!("mysqld --defaults-file={mycnf} --initialize-insecure --user=root"),
            client: "mysql",
            admin: "mysqladmin",
        },
    }
}

/// The supervisor loop (PID 1 of a supervised container): starts `server`, then serves
/// `stop-request` and `start-request` files in `request_dir`. It starts a server only when
/// the one it started has exited: "does not answer yet" is not "not running" — a second
/// mariadbd on the same datadir waits on its Aria lock (30 s) and takes over as soon as
/// the first one is shut down, so mysqld would come back with nobody asking.
/// An `exit-request` kills the server (SIGKILL) and ends the loop, and with it the
/// container: what a real mysqlctld's exit does to its mysqld container.
/// `admin` is the admin client with its connection options (`shutdown` is appended).
pub fn supervisor_script(server: &str, admin: &str, request_dir: &str) -> String {
    format!(
        "pid=; \
         running() {{ [ -n \"$pid\" ] && kill -0 \"$pid\" 2>/dev/null; }}; \
         start() {{ {server} >/dev/null 2>&1 & pid=$!; }}; \
         stop() {{ if running; then {admin} shutdown >/dev/null 2>&1 || kill -TERM \"$pid\"; wait \"$pid\"; fi; pid=; }}; \
         start; \
         while :; do \
           if [ -e {request_dir}/exit-request ]; then rm -f {request_dir}/exit-request; running && kill -KILL \"$pid\"; exit 1; fi; \
           if [ -e {request_dir}/stop-request ]; then rm -f {request_dir}/stop-request; stop; fi; \
           if [ -e {request_dir}/start-request ]; then rm -f {request_dir}/start-request; running || start; fi; \
           sleep 0.05; \
         done"
    )
}

/// The account [`pod_mysqld_command`] creates on every start (the Pod's OS user is 999,
/// not root, so root's unix-socket login is not open to a client in the Pod). Test-only.
pub const POD_ADMIN_USER: &str = "vt_admin";
pub const POD_ADMIN_PASSWORD: &str = "vt_admin";

/// The `mysqld` container's command in a tablet Pod run by a real kubelet from
/// [`DEFAULT_IMAGE`] (MariaDB), as the Pod's user (999, not root): initialize an empty data
/// directory, then [`supervisor_script`] serving request files in `/vt/socket`, where the
/// test's [`crate::fake_mysqlctld::FakeMysqlctld`] writes them (a FAKE of mysqlctld, which
/// cannot run here). Every start runs an init file (in `vt-root`, never in a snapshot)
/// that makes [`POD_ADMIN_USER`] for clients (local, and the replicas' connections), out
/// of the binlog so that no tablet gets a GTID of its own. A shutdown by the admin client
/// as root is refused to a non-root OS user, so the supervisor's SIGTERM (a clean
/// shutdown too) does it.
pub fn pod_mysqld_command(uid: TabletUid) -> Vec<String> {
    let mycnf = format!("{MOUNT}/{}/my.cnf", uid.tablet_dir_name());
    let datadir = format!("{MOUNT}/{}/data", uid.tablet_dir_name());
    let init = "/vt/socket/init.sql";
    let (u, p) = (POD_ADMIN_USER, POD_ADMIN_PASSWORD);
    let sql = [
        "SET sql_log_bin=0;".to_owned(),
        format!("CREATE USER IF NOT EXISTS '{u}'@'%' IDENTIFIED BY '{p}';"),
        format!("GRANT ALL ON *.* TO '{u}'@'%' WITH GRANT OPTION;"),
        format!("CREATE USER IF NOT EXISTS '{u}'@'localhost' IDENTIFIED BY '{p}';"),
        format!("GRANT ALL ON *.* TO '{u}'@'localhost' WITH GRANT OPTION;"),
    ];
    let lines: Vec<String> = sql.iter().map(|l| format!("\"{l}\"")).collect();
    let script = format!(
        "set -e; printf '%s\\n' {lines} > {init}; \
         [ -d {datadir}/mysql ] || mariadb-install-db --defaults-file={mycnf} --skip-test-db >/dev/null; \
         set +e; {supervisor}",
        lines = lines.join(" "),
        supervisor = supervisor_script(
            &format!("mariadbd --defaults-file={mycnf} --init-file={init}"),
            &format!("mariadb-admin --socket={SOCKET} -u{u} -p{p}"),
            "/vt/socket",
        ),
    );
    vec!["/bin/sh".into(), "-c".into(), script]
}

/// A running server on one tablet directory. Removed (killed) on drop.
pub struct MariaDb {
    container: ContainerAsync<GenericImage>,
    flavor: Flavor,
    host_tablet_dir: PathBuf,
}

impl std::fmt::Debug for MariaDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MariaDb")
            .field("id", &self.container.id())
            .finish()
    }
}

impl MariaDb {
    /// Starts a server on tablet `uid` of the host directory `vtdataroot` (which must hold
    /// `vt_<uid>/my.cnf`), initializing the data directory first if it is empty.
    pub async fn start(vtdataroot: &Path, uid: TabletUid) -> Self {
        let (name, tag, flavor) = image_and_flavor();
        let mycnf = format!("{MOUNT}/{}/my.cnf", uid.tablet_dir_name());
        let datadir = format!("{MOUNT}/{}/data", uid.tablet_dir_name());
        let c = commands(flavor, &mycnf);
        let script = format!(
            "set -e; mkdir -p /vt/socket; [ -d {datadir}/mysql ] || {init}; \
             exec {server} --defaults-file={mycnf} --user=root",
            init = c.init,
            server = c.server,
        );
        Self::launch((name, tag, flavor), vtdataroot, None, &script, uid, false).await
    }

    /// Starts a server the way a vitess-operator mysqld container runs it: PID 1 is a
    /// supervisor (standing in for mysqlctld's executor) that starts mysqld, and later
    /// starts or stops it when asked through request files in the socket directory. The
    /// host's `socket_dir` is the pod's `/vt/socket` (mysql.sock, mysqlctl.sock). Returns
    /// once mysqld answers.
    pub async fn start_supervised(vtdataroot: &Path, socket_dir: &Path, uid: TabletUid) -> Self {
        Self::start_supervised_with(vtdataroot, socket_dir, uid, false, "").await
    }

    /// [`Self::start_supervised`] on the host's network (for replication between tablets
    /// over loopback: give each tablet its own port) with extra mysqld arguments.
    pub async fn start_supervised_with(
        vtdataroot: &Path,
        socket_dir: &Path,
        uid: TabletUid,
        host_network: bool,
        server_args: &str,
    ) -> Self {
        let (name, tag, flavor) = image_and_flavor();
        let mycnf = format!("{MOUNT}/{}/my.cnf", uid.tablet_dir_name());
        let datadir = format!("{MOUNT}/{}/data", uid.tablet_dir_name());
        let c = commands(flavor, &mycnf);
        let script = format!(
            "set -e; [ -d {datadir}/mysql ] || {init}; set +e; {supervisor}",
            init = c.init,
            supervisor = supervisor_script(
                &format!(
                    "{} --defaults-file={mycnf} --user=root {server_args}",
                    c.server
                ),
                &format!("{} --socket={SOCKET} -uroot", c.admin),
                "/vt/socket",
            ),
        );
        Self::launch(
            (name, tag, flavor),
            vtdataroot,
            Some(socket_dir),
            &script,
            uid,
            host_network,
        )
        .await
    }

    /// A container of the database image that only waits, on the host's network, with
    /// host directories bind-mounted (`(host, container)`): for client tools such as
    /// `mariadb-backup` and `mariadb-dump`, run with [`Self::sh`].
    pub async fn toolbox(mounts: &[(&Path, &str)]) -> Self {
        let (name, tag, flavor) = image_and_flavor();
        let mut req = GenericImage::new(name, tag)
            .with_host_config_modifier(|hc| hc.network_mode = Some("host".to_owned()))
            .with_cmd(["sleep", "infinity"]);
        for (host, inside) in mounts {
            req = req.with_mount(Mount::bind_mount(host.to_string_lossy(), *inside));
        }
        let container = req
            .start()
            .await
            .unwrap_or_else(|e| panic!("cannot start the toolbox container: {e}"));
        record_started(container.id());
        Self {
            container,
            flavor,
            host_tablet_dir: PathBuf::new(),
        }
    }

    /// Runs `script` as PID 1 in a container without network, with the host's vtdataroot
    /// (and optionally a socket directory) bind-mounted as in a tablet pod; waits for mysqld.
    async fn launch(
        (name, tag, flavor): (String, String, Flavor),
        vtdataroot: &Path,
        socket_dir: Option<&Path>,
        script: &str,
        uid: TabletUid,
        host_network: bool,
    ) -> Self {
        let mode = if host_network { "host" } else { "none" };
        let mut req = GenericImage::new(name, tag)
            // Podman's compat API treats `with_network("none")` as a network to create;
            // the network mode is what we mean.
            .with_host_config_modifier(move |hc| hc.network_mode = Some(mode.to_owned()))
            .with_mount(Mount::bind_mount(vtdataroot.to_string_lossy(), MOUNT))
            .with_cmd(["sh", "-c", script])
            .with_startup_timeout(Duration::from_secs(120));
        if let Some(d) = socket_dir {
            req = req.with_mount(Mount::bind_mount(d.to_string_lossy(), "/vt/socket"));
        }
        let container = req
            .start()
            .await
            .unwrap_or_else(|e| panic!("cannot start the database container: {e}"));
        record_started(container.id());
        let db = Self {
            container,
            flavor,
            host_tablet_dir: vtdataroot.join(uid.tablet_dir_name()),
        };
        db.wait_ready().await;
        db
    }

    pub fn id(&self) -> &str {
        self.container.id()
    }

    /// Every container this process started, removed or not: what a lab's leftover check
    /// ([`crate::leftovers`]) looks for.
    pub fn started_by_this_process() -> Vec<String> {
        STARTED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    fn error_log(&self) -> String {
        std::fs::read_to_string(self.host_tablet_dir.join("error.log")).unwrap_or_default()
    }

    async fn wait_ready(&self) {
        let c = commands(self.flavor, "");
        for _ in 0..600 {
            let (code, _, _) = self
                .sh(&format!("{} --socket={SOCKET} -uroot ping", c.admin))
                .await;
            if code == 0 {
                return;
            }
            if !self.container.is_running().await.unwrap_or(false) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "database did not become ready; error.log:\n{}",
            self.error_log()
        );
    }

    /// Runs a shell command in the container: (exit code, stdout, stderr).
    pub async fn sh(&self, cmd: &str) -> (i64, String, String) {
        // The exit status travels as the last stdout line: reading it needs only `&mut`
        // borrows of the exec result, which keeps this future `Send`.
        const MARK: &str = "__vtsnap_exit=";
        let wrapped = format!("( {cmd} ); echo \"{MARK}$?\"");
        let mut res = self
            .container
            .exec(ExecCommand::new(["sh", "-c", wrapped.as_str()]))
            .await
            .unwrap_or_else(|e| panic!("exec {cmd:?}: {e}"));
        let out =
            String::from_utf8_lossy(&res.stdout_to_vec().await.unwrap_or_default()).into_owned();
        let err =
            String::from_utf8_lossy(&res.stderr_to_vec().await.unwrap_or_default()).into_owned();
        let (body, code) = match out.rfind(MARK) {
            Some(at) => (
                out[..at].to_owned(),
                out[at + MARK.len()..].trim().parse().unwrap_or(-1),
            ),
            // No mark: the shell was killed (e.g. the container stopped under it).
            None => (out, 137),
        };
        (code, body, err)
    }

    /// Runs SQL as root; returns rows of tab-separated columns. Panics on SQL errors.
    pub async fn query(&self, sql: &str) -> Vec<Vec<String>> {
        self.try_query(sql)
            .await
            .unwrap_or_else(|err| panic!("SQL failed: {sql}\n{err}"))
    }

    /// [`Self::query`], with the client's error message instead of a panic.
    pub async fn try_query(&self, sql: &str) -> Result<Vec<Vec<String>>, String> {
        let out = self.client("-N -B", sql).await?;
        Ok(out
            .lines()
            .map(|l| l.split('\t').map(str::to_owned).collect())
            .collect())
    }

    /// `SHOW SLAVE STATUS` as column → value (empty when the server is no replica): read in
    /// the client's vertical form, so that no column is found by its position.
    pub async fn replica_status(&self) -> Result<BTreeMap<String, String>, String> {
        let out = self.client("-E", "SHOW SLAVE STATUS").await?;
        Ok(out
            .lines()
            .filter_map(|l| l.split_once(": "))
            .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
            .collect())
    }

    /// Runs `sql` as root with the client's output `flags`: its stdout, or its error.
    async fn client(&self, flags: &str, sql: &str) -> Result<String, String> {
        let c = commands(self.flavor, "");
        let quoted = sql.replace('\'', "'\\''");
        let (code, out, err) = self
            .sh(&format!(
                "{} --socket={SOCKET} -uroot {flags} -e '{quoted}'",
                c.client
            ))
            .await;
        if code != 0 {
            return Err(err.trim().to_owned());
        }
        Ok(out)
    }

    /// The first column of the first row.
    pub async fn value(&self, sql: &str) -> String {
        self.query(sql)
            .await
            .into_iter()
            .next()
            .and_then(|r| r.into_iter().next())
            .unwrap_or_default()
    }

    /// Starts a client in the background that inserts rows into `table` (one transaction
    /// per row, values counting up from `from`) until [`Self::stop_load`] or shutdown.
    pub async fn start_load(&self, table: &str, from: u64) {
        self.start_load_script(&format!(
            "i={from}; while :; do echo \"INSERT INTO {table} (v, pad) VALUES ($i, md5($i));\"; i=$((i+1)); done"
        ))
        .await;
    }

    /// Starts a client in the background that runs the SQL which the shell loop `generator`
    /// prints, until [`Self::stop_load`] or shutdown.
    pub async fn start_load_script(&self, generator: &str) {
        let c = commands(self.flavor, "");
        // The marker is how stop_load finds the loop.
        let script = format!(
            ": {LOAD_MARK}; {generator} | {} --socket={SOCKET} -uroot",
            c.client
        );
        let quoted = script.replace('\'', "'\\''");
        let (code, _, err) = self
            .sh(&format!(
                "nohup sh -c '{quoted}' >/dev/null 2>/tmp/load.err & echo $! >/tmp/load.pid"
            ))
            .await;
        assert_eq!(code, 0, "cannot start load: {err}");
    }

    /// Stops the load and waits until its connection is gone from the server, so that
    /// what is read afterwards is final.
    pub async fn stop_load(&self) {
        let c = commands(self.flavor, "");
        // `[v]tsnap…` matches the loop's command line but not this shell's own.
        let pattern = format!("[{}]{}", &LOAD_MARK[..1], &LOAD_MARK[1..]);
        self.sh(&format!(
            "pkill -f '{pattern}'; pkill -x {}; true",
            c.client
        ))
        .await;
        let others = "SELECT ID FROM information_schema.PROCESSLIST \
                      WHERE ID <> CONNECTION_ID() AND USER = 'root' AND COMMAND <> 'Killed'";
        for i in 0..600 {
            let ids = self.query(others).await;
            if ids.is_empty() {
                return;
            }
            // A client that is gone but whose connection lingers: end it from the server.
            if i > 0 && i % 20 == 0 {
                for id in ids {
                    let _ = self.try_query(&format!("KILL CONNECTION {}", id[0])).await;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "the load's connection did not go away: {:?}",
            self.query("SHOW FULL PROCESSLIST").await
        );
    }

    /// Removes the container (killing the server) and waits until it is gone.
    pub async fn remove(self) {
        let _ = self.container.rm().await;
    }

    /// A clean shutdown (what mysqlctld's Shutdown does); waits until the server is gone.
    pub async fn shutdown(self) {
        let c = commands(self.flavor, "");
        // The server is the container's PID 1, so the exec may be cut off (137) when the
        // container ends: the container stopping is what counts.
        let (code, _, err) = self
            .sh(&format!("{} --socket={SOCKET} -uroot shutdown", c.admin))
            .await;
        for _ in 0..1200 {
            if !self.container.is_running().await.unwrap_or(false) {
                // The server's own word, not the container's exit status (Podman's compat
                // API does not always report it).
                let log = self.error_log();
                let last_start = log.rfind("Starting").unwrap_or(0);
                assert!(
                    log[last_start..].contains("Shutdown complete"),
                    "server did not shut down cleanly; error.log:\n{log}"
                );
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("server did not stop after shutdown (exec exit {code}: {err})");
    }
}

static STARTED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

fn record_started(id: &str) {
    STARTED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(id.to_owned());
}

/// A MariaDB server under its container's supervisor, laid out as vitess-operator lays
/// out tablet `uid`, in a fresh directory under `/var/tmp`: what the fake mysqlctld
/// serves. Removed (container, then directory) when dropped.
#[derive(Debug)]
pub struct SupervisedTablet {
    pub uid: TabletUid,
    pub db: MariaDb,
    /// The Pod's `/vt/socket` on the host.
    pub socket_dir: PathBuf,
    /// `<vtdataroot>/vt_<uid>` on the host.
    pub tablet_dir: PathBuf,
    _dir: tempfile::TempDir,
}

impl SupervisedTablet {
    pub async fn start(prefix: &str, uid: u32) -> Self {
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in("/var/tmp")
            .unwrap();
        let root = dir.path().join("vtdataroot");
        let socket_dir = dir.path().join("socket");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&socket_dir).unwrap();
        let layout = crate::layout::TabletLayout {
            flavor: flavor(),
            ..crate::layout::TabletLayout::mariadb(uid)
        };
        layout.write_skeleton(&root).unwrap();
        let uid = TabletUid::new(uid);
        let db = MariaDb::start_supervised(&root, &socket_dir, uid).await;
        Self {
            uid,
            db,
            tablet_dir: root.join(uid.tablet_dir_name()),
            socket_dir,
            _dir: dir,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::process::{Child, Command};
    use std::time::{Duration, Instant};

    use super::{TabletUid, pod_mysqld_command, supervisor_script};

    /// Waits for an event the test has caused; the limit only turns a hang into a failure.
    fn until(what: &str, cond: impl Fn() -> bool) {
        let start = Instant::now();
        while !cond() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "timed out waiting until {what}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn servers(dir: &Path) -> Vec<i32> {
        std::fs::read_to_string(dir.join("servers"))
            .unwrap_or_default()
            .lines()
            .map(|l| l.trim().parse().unwrap())
            .collect()
    }

    fn alive(pid: i32) -> bool {
        Command::new("kill")
            .args(["-0", &pid.to_string()])
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap()
            .success()
    }

    fn consumed(dir: &Path, request: &str) {
        std::fs::write(dir.join(request), b"").unwrap();
        until(&format!("the supervisor took the {request}"), || {
            !dir.join(request).exists()
        });
    }

    struct Supervisor(Child);

    impl Drop for Supervisor {
        fn drop(&mut self) {
            // Its own process group: the supervisor and every server it started.
            let _ = Command::new("kill")
                .args(["-s", "KILL", "--", &format!("-{}", self.0.id())])
                .stderr(std::process::Stdio::null())
                .status();
            let _ = self.0.wait();
        }
    }

    /// The lab's flake: a `Start` while mysqld was still starting (not answering yet)
    /// started a second mariadbd on the same datadir, which took over after the next
    /// `Shutdown`. A server that never answers stands for the one still starting.
    #[test]
    fn a_start_request_while_the_server_is_starting_starts_no_second_server() {
        use std::os::unix::process::CommandExt;
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        let server = format!(
            "sh -c 'echo $$ >> {}/servers; exec sleep 1000'",
            dir.display()
        );
        // An admin client that cannot reach the server: stop falls back to SIGTERM.
        let script = supervisor_script(&server, "false", &dir.display().to_string());
        let _sup = Supervisor(
            Command::new("sh")
                .args(["-c", &script])
                .process_group(0)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        );
        until("the first server started", || servers(dir).len() == 1);
        let first = servers(dir)[0];

        consumed(dir, "start-request");
        // Taken after the start request's turn of the loop: that turn is complete.
        consumed(dir, "stop-request");
        consumed(dir, "start-request");
        until("a server started after the stop", || {
            servers(dir).last() != Some(&first)
        });

        let started = servers(dir);
        assert!(
            !alive(first),
            "the stop request stopped the server the supervisor started first (servers started: {started:?})"
        );
        assert_eq!(
            started.iter().filter(|p| alive(**p)).count(),
            1,
            "one server runs (servers started: {started:?})"
        );
    }

    /// mysqlctld's exit takes mysqld with it: an exit request kills the server (no clean
    /// shutdown) and ends the supervisor, as PID 1 ending ends a container.
    #[test]
    fn an_exit_request_kills_the_server_and_ends_the_supervisor() {
        use std::os::unix::process::CommandExt;
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        let server = format!(
            "sh -c 'echo $$ >> {}/servers; exec sleep 1000'",
            dir.display()
        );
        // An admin client that always succeeds: a clean stop would not kill the server.
        let script = supervisor_script(&server, "true", &dir.display().to_string());
        let sup = std::cell::RefCell::new(Supervisor(
            Command::new("sh")
                .args(["-c", &script])
                .process_group(0)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        ));
        until("the server started", || servers(dir).len() == 1);
        let server = servers(dir)[0];

        std::fs::write(dir.join("exit-request"), b"").unwrap();
        until("the supervisor ended", || {
            sup.borrow_mut().0.try_wait().unwrap().is_some()
        });
        until("the server is gone", || !alive(server));
        assert!(
            !dir.join("exit-request").exists(),
            "a restarted container must not exit again at once"
        );
        assert_eq!(servers(dir).len(), 1, "nothing started another server");
    }

    /// The Pod's script is valid shell and writes the init file the server is started with.
    #[test]
    fn the_pod_script_parses_and_writes_its_init_file() {
        let uid: TabletUid = "2548885007".parse().unwrap();
        let cmd = pod_mysqld_command(uid);
        let script = &cmd[2];
        let out = std::process::Command::new("sh")
            .args(["-n", "-c", script])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // the printf part alone, run into a temporary file
        let d = tempfile::tempdir().unwrap();
        let printf = script
            .split("; ")
            .find(|p| p.starts_with("printf"))
            .unwrap()
            .replace(
                "/vt/socket/init.sql",
                &d.path().join("init.sql").display().to_string(),
            );
        let ok = std::process::Command::new("sh")
            .args(["-c", &printf])
            .status()
            .unwrap();
        assert!(ok.success());
        let init = std::fs::read_to_string(d.path().join("init.sql")).unwrap();
        assert!(init.starts_with("SET sql_log_bin=0;\n"), "{init}");
        assert!(
            init.contains("CREATE USER IF NOT EXISTS 'vt_admin'@'%' IDENTIFIED BY 'vt_admin';\n")
        );
        assert!(script.contains("--init-file=/vt/socket/init.sql"));
    }
}
