//! A real Vitess shard on this machine: etcd as the topology, vtctld, optionally VTOrc,
//! and tablets of mysqlctld and vttablet (MySQL 9.7), each daemon in its own container of
//! the Vitess image (`scripts/build-images.sh`), as vitess-operator runs them in a tablet
//! Pod's `mysqld` and `vttablet` containers: the tablet's volume at `/vt/vtdataroot`, the
//! shared socket directory at `/vt/socket`. Everything is on 127.0.0.1.
//!
//! The binaries, etcd among them, come from `e2e/local-cluster/build-vitess.sh` (Go
//! module `vitess.io/vitess`).
//!
//! Facts this rests on (Vitess v0.24.4): the daemons refuse UID 0 (the image's user is
//! `vitess`, 999); `mysql90.cnf` sets `skip_replica_start`; mysqld binds every interface
//! unless a file in `EXTRA_MY_CNF` sets `bind-address`.

pub mod container;
pub mod pods;
mod tablet;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use container::{Access, Bind, Container};
pub use tablet::{
    BackupRestore, NewTablet, Placement, TabletRole, VitessTablet, mysqlctld_flags, vttablet_flags,
};
use vtsnap_core::naming::TabletAlias;
use vtsnap_core::vtctld::client::{CallLimits, VtctldClient};

pub const IMAGE: &str = "localhost/vtsnap-vitess:24";
pub const CELL: &str = "zone1";
pub const KEYSPACE: &str = "commerce";
pub const SHARD: &str = "-";
/// The database of keyspace `commerce` (Vitess's `vt_<keyspace>`).
pub const DATABASE: &str = "vt_commerce";
pub(crate) const TOPO_ROOT: &str = "/vitess/global";

/// A lean my.cnf for a 2-core test machine (defaults take 2.1 GB for three tablets).
pub const LEAN_CNF: &str = "bind-address = 127.0.0.1
performance_schema = OFF
innodb_buffer_pool_size = 32M
innodb_redo_log_capacity = 16M
";

/// A cloned tablet's my.cnf keeps its source's `port` (mysqlctld reads an existing my.cnf
/// and ignores `--mysql-port`). Every Pod has its own network and the same port, so that
/// is right on Kubernetes; here every tablet shares the host's network, where the source
/// still holds that port, so the test kit gives the clone its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortOfClone {
    Keep,
    Rewrite,
}

/// The keyspace's durability policy (`vtctldclient CreateKeyspace --durability-policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    None,
    SemiSync,
}

impl Durability {
    fn flag(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::SemiSync => "semi_sync",
        }
    }
}

/// Whether VTOrc watches the shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Orchestrator {
    Off,
    VtOrc,
}

/// Whether the tablets can give and take a MySQL CLONE (`--restore-with-clone`).
///
/// mysqlctld has no `--mysql-clone-enabled` (only vttablet and vtbackup do), so a
/// mysqlctld-managed tablet gets what `Mysqld.Init` would add by hand: the plugin in its
/// my.cnf (Vitess's `config/mycnf/clone.cnf`) and the `vt_clone` user with
/// `BACKUP_ADMIN` (`config/init_clone.sql`) in its init script
/// (go/vt/mysqlctl/mysqld.go, go/vt/mysqlctl/clone.go in Vitess v0.24.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloneSupport {
    Off,
    On,
}

#[derive(Debug, Clone)]
pub struct VitessOptions {
    /// Tablet UIDs; the first becomes the primary.
    pub uids: Vec<u32>,
    pub durability: Durability,
    pub vtorc: Orchestrator,
    /// Where the tablets' volumes live (each `<root>/<uid>` is one tablet's PVC; its
    /// vtdataroot is `<root>/<uid>/vtdataroot`). A btrfs mount in tests that snapshot.
    pub volumes: PathBuf,
    pub clone: CloneSupport,
    /// Lines appended to [`LEAN_CNF`] (a benchmark's larger buffer pool and redo log).
    pub extra_cnf: String,
    /// How often VTOrc reads the topology: a new tablet waits up to this long to be found
    /// (and its replication started). Vitess's default is 15 s.
    pub vtorc_refresh: Duration,
    /// Where vtctld and the vttablets keep backups.
    pub backups: BackupStorage,
}

/// Where Vitess keeps the lab's backups.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum BackupStorage {
    /// The `file` storage at `/vt/backups` (the shard's shared folder `backups/`).
    #[default]
    File,
    /// Vitess's `s3` storage on an S3-compatible server at `endpoint`, path-style
    /// (`go/vt/mysqlctl/s3backupstorage/s3.go`'s flags).
    S3 {
        endpoint: String,
        bucket: String,
        root: String,
    },
}

impl BackupStorage {
    /// `flags` with the file storage's flags replaced by this storage's.
    pub fn apply(&self, flags: &mut Vec<String>) {
        let Self::S3 {
            endpoint,
            bucket,
            root,
        } = self
        else {
            return;
        };
        flags.retain(|f| {
            f != "--backup-storage-implementation=file"
                && !f.starts_with("--file-backup-storage-root=")
        });
        flags.extend([
            "--backup-storage-implementation=s3".into(),
            format!("--s3-backup-aws-endpoint={endpoint}"),
            "--s3-backup-aws-region=us-east-1".into(),
            format!("--s3-backup-storage-bucket={bucket}"),
            format!("--s3-backup-storage-root={root}"),
            "--s3-backup-force-path-style".into(),
        ]);
    }

    /// The environment Vitess's S3 client reads its credentials from (the test server
    /// takes any).
    pub fn env(&self) -> Vec<(&'static str, String)> {
        match self {
            Self::File => Vec::new(),
            Self::S3 { .. } => vec![
                ("AWS_ACCESS_KEY_ID", crate::s3::ACCESS_KEY_ID.into()),
                ("AWS_SECRET_ACCESS_KEY", crate::s3::SECRET_ACCESS_KEY.into()),
            ],
        }
    }
}

impl VitessOptions {
    /// Three-tablet defaults: `uids`, no durability policy, no VTOrc, no CLONE, lean.
    pub fn new(uids: Vec<u32>, volumes: PathBuf) -> Self {
        Self {
            uids,
            durability: Durability::None,
            vtorc: Orchestrator::Off,
            volumes,
            clone: CloneSupport::Off,
            extra_cnf: String::new(),
            vtorc_refresh: VTORC_REFRESH,
            backups: BackupStorage::File,
        }
    }
}

/// VTOrc's topology refresh in the tests: a new tablet is found within 5 s.
pub const VTORC_REFRESH: Duration = Duration::from_secs(5);

/// Where in the tablets' containers the shared files are.
pub(crate) const LAB_DIR: &str = "/vt/lab";
/// The init script of a tablet when CLONE is on: Vitess's `init_db.sql` then
/// `init_clone.sql`, as Vitess's own clone tests join them.
pub(crate) const INIT_DB_WITH_CLONE: &str = "init_db_clone.sql";

pub(crate) fn binary_dir() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::env::var_os("VTSNAP_TOOLS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/tools"))
}

/// A free TCP port on 127.0.0.1, never one this process handed out before.
///
/// The kernel may give the same ephemeral port to two `bind(0)` calls once the first
/// listener is closed; two daemons given one port then race for it, and a probe of the
/// loser's port reaches the winner (a vttablet's gRPC port answering with another's
/// HTTP server). Each test binary is one process, so one set covers its tests.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<BTreeSet<u16>> = std::sync::Mutex::new(BTreeSet::new());
    let mut given = GIVEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or_else(|e| panic!("no free port: {e}"));
        if given.insert(port) {
            return port;
        }
    }
}

/// Whether mysqlctld has finished initializing or starting mysqld: it opens its gRPC
/// socket only after `init_db.sql` has run (go/cmd/mysqlctld/cli/mysqlctld.go). mysqld
/// answers on its own socket earlier, while the script's users do not exist yet, and a
/// client of a missing user meets MySQL's decoy account, whose random plugin
/// (`sha256_password`) Vitess's client cannot speak. A kubelet's socket paths are
/// longer than `sun_path`: core's connector reaches them through their directory.
pub async fn mysqlctld_serving(socket: &Path) -> bool {
    let limit = Duration::from_secs(2);
    matches!(
        tokio::time::timeout(limit, vtsnap_core::unixsock::connect(socket)).await,
        Ok(Ok(_))
    )
}

/// Makes `dir` (and its parents below `volumes`) owned by the image's user.
pub fn give_to_vitess(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let out = std::process::Command::new("chown")
        .args(["-R", "999:999"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "chown {}: {:?}", dir.display(), out);
}

/// etcd on the host, killed when dropped.
#[derive(Debug)]
struct Etcd {
    child: std::process::Child,
    _dir: tempfile::TempDir,
    client: String,
}

impl Etcd {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (client, peer) = (free_port(), free_port());
        let client = format!("127.0.0.1:{client}");
        let peer = format!("http://127.0.0.1:{peer}");
        let etcd = binary_dir().join("vitess/etcd");
        assert!(
            etcd.exists(),
            "{} is missing: run `make vitess`",
            etcd.display()
        );
        let child = std::process::Command::new(&etcd)
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .args(["--listen-client-urls", &format!("http://{client}")])
            .args(["--advertise-client-urls", &format!("http://{client}")])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &format!("default={peer}")])
            .args(["--log-level", "error"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", etcd.display()));
        Self {
            child,
            _dir: dir,
            client,
        }
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The topology flags every daemon gets.
pub(crate) fn topo_flags(etcd: &str) -> Vec<String> {
    vec![
        "--topo-implementation".into(),
        "etcd2".into(),
        "--topo-global-server-address".into(),
        etcd.into(),
        "--topo-global-root".into(),
        TOPO_ROOT.into(),
    ]
}

/// vtctld's flags: the topology, its gRPC services, the file backup storage.
pub fn vtctld_flags(etcd: &str, (web_port, grpc_port): (u16, u16)) -> Vec<String> {
    let mut flags = topo_flags(etcd);
    flags.extend([
        "--service-map=grpc-vtctl,grpc-vtctld".into(),
        "--backup-storage-implementation=file".into(),
        "--file-backup-storage-root=/vt/backups".into(),
        format!("--port={web_port}"),
        format!("--grpc-port={grpc_port}"),
    ]);
    flags
}

/// VTOrc's flags: the topology and cell, its instances polled every second (a test waits
/// on it), the topology read every `refresh`.
pub fn vtorc_flags(etcd: &str, refresh: Duration) -> Vec<String> {
    let mut flags = topo_flags(etcd);
    flags.extend(
        [
            "--cell",
            CELL,
            "--instance-poll-time",
            "1s",
            "--recovery-poll-duration",
            "1s",
        ]
        .map(str::to_owned),
    );
    flags.push(format!(
        "--topo-information-refresh-duration={}ms",
        refresh.as_millis()
    ));
    flags
}

/// Waits until vtctld lists `want` tablets of the shard; panics after `limit` with what
/// `context` says.
pub(crate) async fn wait_listed(
    client: &VtctldClient,
    want: usize,
    limit: Duration,
    context: impl Fn() -> String,
) {
    let start = Instant::now();
    loop {
        let listed = client
            .get_tablets(KEYSPACE, SHARD)
            .await
            .map(|ts| ts.len())
            .unwrap_or(0);
        if listed == want {
            return;
        }
        assert!(
            start.elapsed() < limit,
            "only {listed} of {want} tablets in the topology after {limit:?}\n{}",
            context()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A running shard. Dropping it removes every container, then stops etcd.
#[derive(Debug)]
pub struct VitessShard {
    pub opts: VitessOptions,
    /// vtctld's gRPC address (`127.0.0.1:<port>`).
    pub vtctld_grpc: String,
    pub tablets: Vec<VitessTablet>,
    vtorc: Option<Container>,
    vtctld: Container,
    /// The lean my.cnf (`EXTRA_MY_CNF`) and the file backup storage.
    shared: tempfile::TempDir,
    etcd: Etcd,
}

/// Unique container names per process and shard.
fn prefix() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "vtsnap-vt-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

impl VitessShard {
    /// etcd, vtctld, the keyspace, every tablet (mysqlctld initializes each mysqld), a
    /// `PlannedReparentShard` to the first UID, VTOrc if asked for; returns once every
    /// replica replicates from the primary.
    pub async fn start(opts: VitessOptions) -> Self {
        Self::start_placed(opts, BTreeMap::new()).await
    }

    /// [`Self::start`] with some tablets' volume and socket directory where kubelet would
    /// have them for their Pod (UID → placement); the others under `volumes`.
    pub async fn start_placed(opts: VitessOptions, placed: BTreeMap<u32, Placement>) -> Self {
        let etcd = Etcd::start();
        let prefix = prefix();
        let shared = tempfile::Builder::new()
            .prefix("vtsnap-vitess-")
            .tempdir_in("/var/tmp")
            .unwrap();
        let mut cnf = format!("{LEAN_CNF}{}\n", opts.extra_cnf);
        if opts.clone == CloneSupport::On {
            cnf.push_str("plugin-load-add = mysql_clone.so\n");
            let config = binary_dir().join("vitess/config");
            let mut init = String::new();
            for f in ["init_db.sql", "init_clone.sql"] {
                let p = config.join(f);
                init.push_str(
                    &std::fs::read_to_string(&p)
                        .unwrap_or_else(|e| panic!("{}: {e}: run `make vitess`", p.display())),
                );
                init.push('\n');
            }
            std::fs::write(shared.path().join(INIT_DB_WITH_CLONE), init).unwrap();
        }
        std::fs::write(shared.path().join("lean.cnf"), cnf).unwrap();
        give_to_vitess(&shared.path().join("backups"));
        std::fs::set_permissions(
            shared.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();

        let grpc = free_port();
        let web = free_port();
        let mut cmd = vec!["vtctld".to_owned()];
        cmd.extend(vtctld_flags(&etcd.client, (web, grpc)));
        opts.backups.apply(&mut cmd);
        cmd.extend(["--log-format".into(), "text".into()]);
        let vtctld = Container::run(
            &format!("{prefix}-vtctld"),
            IMAGE,
            &[Bind {
                host: shared.path().join("backups"),
                at: "/vt/backups",
                access: Access::ReadWrite,
            }],
            &opts.backups.env(),
            &cmd,
        );
        let mut shard = Self {
            vtctld_grpc: format!("127.0.0.1:{grpc}"),
            opts: opts.clone(),
            tablets: Vec::new(),
            vtorc: None,
            vtctld,
            shared,
            etcd,
        };
        shard
            .ctl(&[
                "AddCellInfo",
                "--root",
                &format!("/vitess/{CELL}"),
                "--server-address",
                &shard.etcd.client.clone(),
                CELL,
            ])
            .await;
        shard
            .ctl(&[
                "CreateKeyspace",
                &format!("--durability-policy={}", opts.durability.flag()),
                KEYSPACE,
            ])
            .await;
        for (i, uid) in opts.uids.iter().enumerate() {
            let name = format!("{prefix}-t{i}");
            let t = match placed.get(uid) {
                Some(at) => VitessTablet::start_mysqlctld_at(
                    *uid,
                    &name,
                    at,
                    shard.shared.path(),
                    &shard.etcd.client,
                    (PortOfClone::Keep, opts.clone, &opts.backups),
                ),
                None => shard.tablet_container_set(*uid, &name),
            };
            shard.tablets.push(t);
        }
        for t in &shard.tablets {
            t.wait_for_mysqld(Duration::from_secs(180)).await;
        }
        for t in &mut shard.tablets {
            t.start_vttablet();
        }
        for t in &mut shard.tablets {
            t.wait_vttablet_listening(Duration::from_secs(120)).await;
        }
        shard.wait_listed(Duration::from_secs(120)).await;
        let primary = shard.tablets[0].alias.to_string();
        shard
            .ctl(&[
                "PlannedReparentShard",
                &format!("{KEYSPACE}/{SHARD}"),
                "--new-primary",
                &primary,
            ])
            .await;
        if opts.vtorc == Orchestrator::VtOrc {
            shard.start_vtorc(&prefix);
        }
        for t in &shard.tablets[1..] {
            t.wait_replicating(&shard.vtctld_grpc, Duration::from_secs(120))
                .await;
        }
        shard
    }

    fn tablet_container_set(&self, uid: u32, name: &str) -> VitessTablet {
        self.tablet_container_set_with(uid, name, PortOfClone::Keep)
    }

    fn tablet_container_set_with(&self, uid: u32, name: &str, port: PortOfClone) -> VitessTablet {
        VitessTablet::start_mysqlctld(
            uid,
            name,
            &self.opts.volumes,
            self.shared.path(),
            &self.etcd.client,
            (port, self.opts.clone, &self.opts.backups),
        )
    }

    fn start_vtorc(&mut self, prefix: &str) {
        let mut cmd = vec!["vtorc".to_owned()];
        cmd.extend(vtorc_flags(&self.etcd.client, self.opts.vtorc_refresh));
        cmd.extend([
            "--log-format".into(),
            "text".into(),
            format!("--port={}", free_port()),
        ]);
        self.vtorc = Some(Container::run(
            &format!("{prefix}-vtorc"),
            IMAGE,
            &[],
            &[],
            &cmd,
        ));
    }

    /// A client of the real vtctld.
    pub fn client(&self) -> VtctldClient {
        VtctldClient::new(
            &self.vtctld_grpc,
            CallLimits {
                timeout: Duration::from_secs(30),
                read_attempts: 3,
            },
        )
        .unwrap()
    }

    /// `vtctldclient --server <vtctld> <args…>`; panics with its output when it fails.
    pub async fn ctl(&self, args: &[&str]) -> String {
        let out = self.ctl_output(args).await;
        assert!(
            out.status.success(),
            "vtctldclient {args:?}: {}{}\nvtctld: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.vtctld.logs(30)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `vtctldclient` against vtctld, its whole output (success or not).
    pub async fn ctl_output(&self, args: &[&str]) -> std::process::Output {
        let server = format!("--server={}", self.vtctld_grpc);
        let mut cmd = vec!["vtctldclient", server.as_str()];
        cmd.extend_from_slice(args);
        // vtctld answers only once it has read the topology: retry "unavailable" briefly.
        let start = Instant::now();
        loop {
            let out = self.vtctld.exec(&cmd).await;
            let err = String::from_utf8_lossy(&out.stderr);
            if out.status.success()
                || !(err.contains("Unavailable") || err.contains("connection refused"))
                || start.elapsed() > Duration::from_secs(60)
            {
                return out;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    async fn wait_listed(&self, limit: Duration) {
        wait_listed(&self.client(), self.tablets.len(), limit, || {
            self.tablets
                .iter()
                .map(|t| t.logs(15))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .await;
    }

    pub fn tablet(&self, alias: &TabletAlias) -> &VitessTablet {
        self.tablets
            .iter()
            .find(|t| &t.alias == alias)
            .unwrap_or_else(|| panic!("no tablet {alias}"))
    }

    pub fn tablet_by_uid(&self, uid: u32) -> &VitessTablet {
        self.tablets
            .iter()
            .find(|t| t.uid == uid)
            .unwrap_or_else(|| panic!("no tablet {uid}"))
    }

    pub fn primary(&self) -> &VitessTablet {
        &self.tablets[0]
    }

    /// Where the lean my.cnf and the backups are (mounted into every tablet).
    pub fn shared_dir(&self) -> &Path {
        self.shared.path()
    }

    /// etcd's client address (`127.0.0.1:<port>`).
    pub fn topo(&self) -> &str {
        &self.etcd.client
    }

    /// Adds a tablet whose volume is already at `<volumes>/<uid>` (e.g. a clone): its
    /// mysqlctld starts the mysqld there, its vttablet joins as a replica.
    pub async fn add_tablet(&mut self, uid: u32) -> &VitessTablet {
        self.add_mysqld(uid).await;
        self.serve(uid)
    }

    /// The first half of [`Self::add_tablet`]: the tablet's mysqld only, up and answering;
    /// nothing knows the tablet yet (it is not in the topology).
    pub async fn add_mysqld(&mut self, uid: u32) -> &VitessTablet {
        let name = format!("{}-add{uid}", prefix());
        let t = self.tablet_container_set_with(uid, &name, PortOfClone::Rewrite);
        self.push_started(t).await
    }

    /// [`Self::add_mysqld`] for a volume (a clone) at `at`.
    pub async fn add_mysqld_at(&mut self, uid: u32, at: &Placement) -> &VitessTablet {
        let name = format!("{}-add{uid}", prefix());
        let t = VitessTablet::start_mysqlctld_at(
            uid,
            &name,
            at,
            self.shared.path(),
            &self.etcd.client,
            (PortOfClone::Rewrite, self.opts.clone, &self.opts.backups),
        );
        self.push_started(t).await
    }

    async fn push_started(&mut self, t: VitessTablet) -> &VitessTablet {
        t.wait_for_mysqld(Duration::from_secs(180)).await;
        self.tablets.push(t);
        self.tablets.last().unwrap()
    }

    /// The second half: its vttablet.
    pub fn serve(&mut self, uid: u32) -> &VitessTablet {
        let t = self
            .tablets
            .iter_mut()
            .find(|t| t.uid == uid)
            .unwrap_or_else(|| panic!("no tablet {uid}"));
        t.start_vttablet();
        t
    }

    /// A new tablet on an empty volume at `<volumes>/<uid>`: mysqlctld initializes its
    /// mysqld, then its vttablet gets the data as `how` says (a restore or a CLONE, after
    /// which vttablet starts replication from the primary itself). Returns once the
    /// vttablet container runs; the caller waits for what it measures.
    pub async fn add_empty_tablet(&mut self, uid: u32, how: NewTablet) -> &VitessTablet {
        let name = format!("{}-new{uid}", prefix());
        let t = self.tablet_container_set_with(uid, &name, PortOfClone::Keep);
        t.wait_for_mysqld(Duration::from_secs(180)).await;
        self.tablets.push(t);
        let t = self.tablets.last_mut().unwrap();
        t.start_vttablet_as(how);
        t
    }

    /// Removes tablet `uid`: its containers, then its record in the topology.
    pub async fn remove_tablet(&mut self, uid: u32) {
        let Some(at) = self.tablets.iter().position(|t| t.uid == uid) else {
            panic!("no tablet {uid}");
        };
        let alias = self.tablets.remove(at).alias.to_string();
        self.ctl(&["DeleteTablets", &alias]).await;
    }

    /// Names of every container this process started (for leftover checks).
    pub fn started_by_this_process() -> Vec<String> {
        Container::started_by_this_process()
    }

    pub fn vtorc_running(&self) -> bool {
        self.vtorc.as_ref().is_some_and(Container::running)
    }

    /// Stops VTOrc (it is removed).
    pub fn stop_vtorc(&mut self) {
        self.vtorc = None;
    }
}

impl Drop for VitessShard {
    fn drop(&mut self) {
        self.vtorc = None;
        self.tablets.clear();
    }
}
