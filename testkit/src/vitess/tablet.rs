//! One real tablet: a `mysqld` container running mysqlctld (which runs mysqld) and a
//! `vttablet` container, sharing the tablet's volume and socket directory as the
//! operator's tablet Pod does (flags in the operator's shape, Vitess 24's dashed names:
//! vitess-operator's pkg/operator/vttablet/flags.go and datastore.go).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use vtsnap_core::naming::TabletAlias;
use vtsnap_core::vtctld::client::{CallLimits, VtctldClient};
use vtsnap_core::vtctld::messages::replicationdata::STATE_RUNNING;

use super::container::{Access, Bind, Container};
use super::{
    CELL, CloneSupport, DATABASE, IMAGE, INIT_DB_WITH_CLONE, KEYSPACE, LAB_DIR, PortOfClone, SHARD,
    free_port, give_to_vitess, topo_flags,
};

/// Which container of the tablet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TabletRole {
    Mysqld,
    Vttablet,
}

/// Where a tablet's PVC and its Pod's `/vt/socket` are on the host.
#[derive(Debug, Clone)]
pub struct Placement {
    /// The PVC's volume (its vtdataroot is `<volume>/vtdataroot`).
    pub volume: PathBuf,
    pub socket_dir: PathBuf,
}

#[derive(Debug)]
pub struct VitessTablet {
    pub uid: u32,
    pub alias: TabletAlias,
    /// The tablet's PVC (`<volumes>/<uid>`); its vtdataroot is `<volume>/vtdataroot`.
    pub volume: PathBuf,
    /// The Pod's `/vt/socket` (mysql.sock, mysqlctl.sock) on the host.
    pub socket_dir: PathBuf,
    pub mysql_port: u16,
    pub grpc_port: u16,
    pub web_port: u16,
    etcd: String,
    shared: PathBuf,
    clone: CloneSupport,
    /// Where its vttablet keeps backups (the shard's).
    backups: super::BackupStorage,
    name: String,
    /// vttablet first: dropped before mysqld.
    vttablet: Option<Container>,
    mysqld: Option<Container>,
    _sockets: Option<tempfile::TempDir>,
}

impl VitessTablet {
    pub(super) fn start_mysqlctld(
        uid: u32,
        name: &str,
        volumes: &Path,
        shared: &Path,
        etcd: &str,
        (port, clone, backups): (PortOfClone, CloneSupport, &super::BackupStorage),
    ) -> Self {
        let sockets = tempfile::Builder::new()
            .prefix("vtsnap-vt-socket-")
            .tempdir_in("/var/tmp")
            .unwrap();
        let at = Placement {
            volume: volumes.join(uid.to_string()),
            socket_dir: sockets.path().to_path_buf(),
        };
        let mut t = Self::start_mysqlctld_at(uid, name, &at, shared, etcd, (port, clone, backups));
        t._sockets = Some(sockets);
        t
    }

    pub(super) fn start_mysqlctld_at(
        uid: u32,
        name: &str,
        at: &Placement,
        shared: &Path,
        etcd: &str,
        (port, clone, backups): (PortOfClone, CloneSupport, &super::BackupStorage),
    ) -> Self {
        give_to_vitess(&at.volume.join("vtdataroot"));
        give_to_vitess(&at.socket_dir);
        let mut t = Self {
            uid,
            alias: format!("{CELL}-{uid:010}").parse().unwrap(),
            volume: at.volume.clone(),
            socket_dir: at.socket_dir.clone(),
            mysql_port: free_port(),
            grpc_port: free_port(),
            web_port: free_port(),
            etcd: etcd.to_owned(),
            shared: shared.to_path_buf(),
            clone,
            backups: backups.clone(),
            name: name.to_owned(),
            vttablet: None,
            mysqld: None,
            _sockets: None,
        };
        if port == PortOfClone::Rewrite {
            t.rewrite_port();
        }
        t.start_mysqld_container();
        t
    }

    /// Gives an existing my.cnf this tablet's port (see [`PortOfClone`]).
    fn rewrite_port(&self) {
        let path = self.tablet_dir().join("my.cnf");
        let cnf =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let out: Vec<String> = cnf
            .lines()
            .map(|l| match l.split_once('=') {
                Some((k, _)) if k.trim() == "port" => format!("port = {}", self.mysql_port),
                _ => l.to_owned(),
            })
            .collect();
        std::fs::write(&path, out.join("\n") + "\n").unwrap();
    }

    fn binds(&self) -> Vec<Bind> {
        vec![
            Bind {
                host: self.volume.join("vtdataroot"),
                at: "/vt/vtdataroot",
                access: Access::ReadWrite,
            },
            Bind {
                host: self.socket_dir.clone(),
                at: "/vt/socket",
                access: Access::ReadWrite,
            },
            Bind {
                host: self.shared.clone(),
                at: LAB_DIR,
                access: Access::ReadOnly,
            },
            Bind {
                host: self.shared.join("backups"),
                at: "/vt/backups",
                access: Access::ReadWrite,
            },
        ]
    }

    /// The operator's `mysqld` container: mysqlctld, which initializes or starts mysqld.
    pub fn start_mysqld_container(&mut self) {
        let init_db = match self.clone {
            CloneSupport::Off => "/vt/config/init_db.sql".to_owned(),
            CloneSupport::On => format!("{LAB_DIR}/{INIT_DB_WITH_CLONE}"),
        };
        let mut cmd = vec!["mysqlctld".to_owned()];
        cmd.extend(mysqlctld_flags(self.uid, &init_db));
        cmd.extend([
            format!("--mysql-port={}", self.mysql_port),
            "--log-format=text".into(),
        ]);
        self.mysqld = Some(Container::run(
            &format!("{}-mysqld", self.name),
            IMAGE,
            &self.binds(),
            &[("EXTRA_MY_CNF", "/vt/lab/lean.cnf".to_owned())],
            &cmd,
        ));
    }

    /// The operator's `vttablet` container.
    pub fn start_vttablet(&mut self) {
        self.start_vttablet_as(NewTablet::StartEmpty);
    }

    /// The `vttablet` container, its data coming as `how` says.
    pub fn start_vttablet_as(&mut self, how: NewTablet) {
        let mut cmd = vec!["vttablet".to_owned()];
        cmd.extend(vttablet_flags(
            &self.etcd,
            &self.alias,
            "127.0.0.1",
            (self.web_port, self.grpc_port),
        ));
        cmd.extend(how.flags());
        self.backups.apply(&mut cmd);
        if self.clone == CloneSupport::On {
            cmd.extend(CLONE_FLAGS.map(str::to_owned));
        }
        cmd.extend([
            "--health-check-interval=2s".into(),
            "--log-format=text".into(),
        ]);
        self.vttablet = Some(Container::run(
            &format!("{}-vttablet", self.name),
            IMAGE,
            &self.binds(),
            &self.backups.env(),
            &cmd,
        ));
    }

    /// Waits until its vttablet (started to serve its own volume) answers gRPC on its
    /// port. A port found free can be taken, before vttablet binds it, as the local port
    /// of some outgoing connection or the listener of another process on this host;
    /// vttablet then exits, and here it is started again on new ports (on Kubernetes
    /// each Pod has its own ports). An open port alone proves nothing: whoever holds it
    /// must answer the HTTP/2 preface, as a gRPC server does.
    pub async fn wait_vttablet_listening(&mut self, limit: Duration) {
        let start = Instant::now();
        loop {
            let addr = format!("127.0.0.1:{}", self.grpc_port);
            let running = self.vttablet.as_ref().is_some_and(Container::running);
            if running && speaks_http2(&addr).await {
                return;
            }
            assert!(
                start.elapsed() < limit,
                "the vttablet of {} did not listen on {addr} within {limit:?}:\n{}",
                self.alias,
                self.logs(30)
            );
            if !running {
                self.grpc_port = free_port();
                self.web_port = free_port();
                self.vttablet = None;
                self.start_vttablet();
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The tablet's directory (`vt_<uid %010d>`) on the host.
    pub fn tablet_dir(&self) -> PathBuf {
        self.volume
            .join("vtdataroot")
            .join(format!("vt_{:010}", self.uid))
    }

    /// The mysqlctld socket on the host (what vtsnap-node dials).
    pub fn mysqlctl_socket(&self) -> PathBuf {
        self.socket_dir.join("mysqlctl.sock")
    }

    pub fn container(&self, role: TabletRole) -> Option<&Container> {
        match role {
            TabletRole::Mysqld => self.mysqld.as_ref(),
            TabletRole::Vttablet => self.vttablet.as_ref(),
        }
    }

    /// Removes one of its containers (as a Pod's container dying for good would).
    pub fn remove(&mut self, role: TabletRole) {
        match role {
            TabletRole::Mysqld => self.mysqld = None,
            TabletRole::Vttablet => self.vttablet = None,
        }
    }

    /// Runs SQL as `vt_dba` over the socket; tab-separated rows, or the client's error.
    pub async fn sql(&self, query: &str) -> Result<String, String> {
        let c = self
            .mysqld
            .as_ref()
            .ok_or_else(|| format!("{}: no mysqld container", self.alias))?;
        let out = c
            .exec(&[
                "mysql",
                "--no-defaults",
                "-S",
                "/vt/socket/mysql.sock",
                "-u",
                "vt_dba",
                "-N",
                "-B",
                "-e",
                query,
            ])
            .await;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
        }
    }

    /// `sql` that must succeed.
    pub async fn must_sql(&self, query: &str) -> String {
        self.sql(query)
            .await
            .unwrap_or_else(|e| panic!("{}: {query}: {e}", self.alias))
    }

    /// `@@global.gtid_executed` on one line: the server breaks a set of several sources
    /// after each comma, and `mysql -B` prints that newline as the two characters `\n`.
    pub async fn gtid_executed(&self) -> String {
        self.must_sql("SELECT @@global.gtid_executed")
            .await
            .replace("\\n", "")
            .replace('\n', "")
    }

    /// Waits until mysqlctld has initialized (or started) mysqld and mysqld answers.
    pub(super) async fn wait_for_mysqld(&self, limit: Duration) {
        let start = Instant::now();
        while !super::mysqlctld_serving(&self.mysqlctl_socket()).await
            || self.sql("SELECT 1").await.is_err()
        {
            assert!(
                start.elapsed() < limit,
                "mysqld of {} did not answer within {limit:?}:\n{}\n--- error.log:\n{}",
                self.alias,
                self.logs(30),
                self.error_log(30)
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Waits until vtctld reports its replication IO and SQL threads running.
    pub async fn wait_replicating(&self, vtctld: &str, limit: Duration) {
        let client = VtctldClient::new(vtctld, CallLimits::default()).unwrap();
        let start = Instant::now();
        loop {
            let status = client.get_full_status(&self.alias).await;
            let running = status
                .as_ref()
                .ok()
                .and_then(|f| f.replication_status.as_ref())
                .is_some_and(|s| s.io_state == STATE_RUNNING && s.sql_state == STATE_RUNNING);
            if running {
                return;
            }
            assert!(
                start.elapsed() < limit,
                "{} not replicating after {limit:?}: {status:?}\n{}",
                self.alias,
                self.logs(20)
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// The last `lines` lines of mysqld's error log.
    pub fn error_log(&self, lines: usize) -> String {
        let log = std::fs::read_to_string(self.tablet_dir().join("error.log")).unwrap_or_default();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// The last lines of both containers' output.
    pub fn logs(&self, lines: usize) -> String {
        let mut s = String::new();
        for (role, c) in [("mysqld", &self.mysqld), ("vttablet", &self.vttablet)] {
            if let Some(c) = c {
                s.push_str(&format!("--- {} {role}:\n{}\n", self.alias, c.logs(lines)));
            }
        }
        s
    }
}

/// mysqlctld's flags as vitess-operator gives them (pkg/operator/vttablet/flags.go,
/// Vitess 24's dashed names); `init_db` is the init script's path in the container.
pub fn mysqlctld_flags(uid: u32, init_db: &str) -> Vec<String> {
    vec![
        format!("--tablet-uid={uid}"),
        "--socket-file=/vt/socket/mysqlctl.sock".into(),
        "--mysql-socket=/vt/socket/mysql.sock".into(),
        "--db-dba-user=vt_dba".into(),
        format!("--init-db-sql-file={init_db}"),
        "--db-charset=utf8mb4".into(),
        "--wait-time=2h".into(),
    ]
}

/// vttablet's flags as vitess-operator gives them (pkg/operator/vttablet/flags.go and
/// datastore.go), without the backup and health-check flags.
pub fn vttablet_flags(
    etcd: &str,
    alias: &TabletAlias,
    hostname: &str,
    (web_port, grpc_port): (u16, u16),
) -> Vec<String> {
    let mut flags = topo_flags(etcd);
    flags.extend([
        format!("--tablet-path={alias}"),
        format!("--tablet-hostname={hostname}"),
        format!("--init-keyspace={KEYSPACE}"),
        format!("--init-shard={SHARD}"),
        "--init-tablet-type=replica".into(),
        format!("--port={web_port}"),
        format!("--grpc-port={grpc_port}"),
        "--service-map=grpc-queryservice,grpc-tabletmanager,grpc-updatestream".into(),
        // the local-datastore flags (datastore.go)
        "--mysqlctl-socket=/vt/socket/mysqlctl.sock".into(),
        "--mycnf-socket-file=/vt/socket/mysql.sock".into(),
        "--db-charset=utf8mb4".into(),
        "--db-app-user=vt_app".into(),
        "--db-dba-user=vt_dba".into(),
        "--db-repl-user=vt_repl".into(),
        "--db-filtered-user=vt_filtered".into(),
        format!("--init-db-name-override={DATABASE}"),
        "--enforce-strict-trans-tables".into(),
        // its replication lag (and "not running") decides the tablet's serving state,
        // so /healthz, the operator's readiness probe, fails without replication
        "--enable-replication-reporter".into(),
    ]);
    flags
}

/// What vttablet does about backups at start (the file backup storage at `/vt/backups`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackupRestore {
    /// `--restore-from-backup` and, finding no backup, start empty: how a shard's first
    /// tablets start here (the operator would have them wait for vtbackup's initial one).
    StartEmpty,
    /// The operator's flags when the cluster has a backup location
    /// (pkg/operator/vttablet/backup.go, constants.go): restore, and wait for a backup
    /// every 10 s while there is none. A tablet whose volume already holds data skips
    /// the restore.
    WaitForBackup,
}

impl BackupRestore {
    pub fn flags(self) -> Vec<String> {
        let mut flags: Vec<String> = vec![
            "--restore-from-backup".into(),
            "--backup-storage-implementation=file".into(),
            "--file-backup-storage-root=/vt/backups".into(),
        ];
        if self == Self::WaitForBackup {
            flags.extend([
                "--restore-concurrency=10".into(),
                "--wait-for-backup-interval=10s".into(),
                "--backup-engine-implementation=builtin".into(),
            ]);
        }
        flags
    }
}

/// vttablet's flags for giving and taking a CLONE: the default user of
/// `init_clone.sql`, without TLS (the lab's mysqlds have no certificates; Vitess's
/// default is to require it). go/vt/dbconfigs/dbconfigs.go, go/vt/mysqlctl/mysqld.go.
const CLONE_FLAGS: [&str; 3] = [
    "--mysql-clone-enabled",
    "--db-clone-user=vt_clone",
    "--db-clone-use-ssl=false",
];

/// Where a tablet's vttablet gets its data from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewTablet {
    /// Its own volume, or nothing: [`BackupRestore::StartEmpty`].
    StartEmpty,
    /// The newest builtin backup in the file backup storage: the operator's flags
    /// ([`BackupRestore::WaitForBackup`]).
    FromBackup,
    /// A MySQL CLONE of the shard's primary (`--restore-with-clone
    /// --clone-from-primary`, Vitess 24): needs [`CloneSupport::On`].
    CloneFromPrimary,
}

impl NewTablet {
    fn flags(self) -> Vec<String> {
        match self {
            Self::StartEmpty => BackupRestore::StartEmpty.flags(),
            Self::FromBackup => BackupRestore::WaitForBackup.flags(),
            Self::CloneFromPrimary => vec![
                "--restore-with-clone".into(),
                "--clone-from-primary".into(),
                "--backup-storage-implementation=file".into(),
                "--file-backup-storage-root=/vt/backups".into(),
            ],
        }
    }
}

/// Whether the server at `addr` answers the HTTP/2 client preface with a SETTINGS frame
/// (RFC 9113 §3.4: the server's preface is a SETTINGS frame, type 0x4).
async fn speaks_http2(addr: &str) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let probe = async {
        let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
        s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
            .await
            .ok()?;
        let mut header = [0_u8; 9];
        s.read_exact(&mut header).await.ok()?;
        Some(header[3] == 0x4)
    };
    tokio::time::timeout(Duration::from_secs(2), probe)
        .await
        .ok()
        .flatten()
        .unwrap_or(false)
}
