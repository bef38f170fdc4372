//! The lab's shard: one primary and two replicas, real MariaDB servers in containers, each
//! on its own btrfs subvolume mounted where kubelet would mount the tablet's PVC, with GTID
//! replication over loopback. Around them, the fakes for what cannot run here: vtctld, a
//! mysqlctld per tablet (with a supervisor that calls `Start` a few seconds after a
//! shutdown), and — on the in-memory control plane — the Kubernetes API and the CSI driver
//! (see [`crate::control_plane`]). The real node daemon serves the node.
//!
//! Setup seeds the primary (without binlog), stops it cleanly, and makes each replica from a
//! copy of its volume moved to the replica's UID by `vtsnap-restore` — so even the lab's own
//! replicas are provisioned the way vtsnap provisions them (on the real control plane: a
//! VolumeSnapshot and PVCs with `dataSourceRef`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use vtsnap_core::naming::TabletAlias;
use vtsnap_node::cgroup::Roots;
use vtsnap_node::daemon::{self, DaemonConfig, TestHooks};
use vtsnap_testkit::btrfs::BtrfsVolume;
use vtsnap_testkit::fake_mysqlctld::{FakeMysqlctld, Serving};
use vtsnap_testkit::fake_vtctld::FakeVtctld;
use vtsnap_testkit::fixtures::{ShardFixture, shard};
use vtsnap_testkit::grpc::Running;
use vtsnap_testkit::layout::TabletLayout;
use vtsnap_testkit::leftovers::Footprint;
use vtsnap_testkit::mariadb::MariaDb;

use crate::backend::LabBackend;
use crate::control_plane::{Choice, ControlPlane};
use crate::resources;
use crate::timeline::Timeline;

pub const DATABASE: &str = "vt_commerce";
/// How long the fake mysqlctld's `Start` waits for mysqld: a supervisor's `Start` that
/// meets a held (frozen) mysqld fails after this long.
pub const MYSQLCTLD_START_TIMEOUT: Duration = Duration::from_secs(5);

/// How the lab is built.
#[derive(Debug, Clone)]
pub struct LabOptions {
    /// Size of the sparse btrfs image (the in-memory control plane's volumes live on it).
    pub volume_bytes: u64,
    /// Rows of `vt_commerce.t` seeded before the replicas are made.
    pub seed_rows: u64,
    /// Bytes of padding per seeded row (≈ row size).
    pub row_bytes: u32,
    /// The supervisor's `Start` after each `Shutdown` (`None`: no supervisor).
    pub supervisor_restart: Option<Duration>,
    /// From VolumeSnapshot creation to the cut.
    pub cut_delay: Duration,
    /// From the cut to `readyToUse` (the "upload"; in memory only: the btrfs driver is
    /// ready at the cut).
    pub upload_delay: Duration,
    /// Tests only: the node daemon stops mysqld but does not freeze it.
    pub skip_hold_for_tests: bool,
    /// Extra mysqld arguments for every tablet (e.g. a larger buffer pool).
    pub server_args: String,
    /// The in-memory API and fake CSI, or a real cluster.
    pub control_plane: Choice,
}

impl Default for LabOptions {
    fn default() -> Self {
        Self {
            volume_bytes: 8 << 30,
            seed_rows: 20_000,
            row_bytes: 200,
            supervisor_restart: Some(Duration::from_secs(2)),
            cut_delay: Duration::from_secs(1),
            upload_delay: Duration::from_secs(2),
            skip_hold_for_tests: false,
            server_args: String::new(),
            control_plane: Choice::InMemory,
        }
    }
}

/// One running tablet.
#[derive(Debug)]
pub struct Tablet {
    pub alias: TabletAlias,
    pub pod: String,
    pub port: u16,
    pub db: Arc<MariaDb>,
    pub ctl: FakeMysqlctld,
    /// The PVC's volume where kubelet mounts it; the tablet's vtdataroot is `<mount>/vtdataroot`.
    pub mount: PathBuf,
    /// The pod's `/vt/socket` (mysql.sock, mysqlctl.sock).
    pub socket_dir: PathBuf,
    _serving: Serving,
}

/// The running lab. Dropping it removes the containers, then the control plane's mounts
/// and namespace, then unmounts the lab's own volume.
#[derive(Debug)]
pub struct Lab {
    pub timeline: Timeline,
    pub opts: LabOptions,
    /// Tablet number (1 = primary) → tablet. Dropped before the volumes.
    pub tablets: BTreeMap<usize, Tablet>,
    pub cp: ControlPlane,
    pub vtctld: FakeVtctld,
    pub backend: LabBackend,
    pub fixture: ShardFixture,
    /// Where kubelet would keep the pods' volumes.
    kubelet: PathBuf,
    node: Option<daemon::Handle>,
    vt: Running,
    _state: tempfile::TempDir,
    /// The lab's own btrfs (the in-memory control plane's volumes).
    pub vol: Option<BtrfsVolume>,
}

impl Lab {
    /// What this lab owns on the host: every container this process started (tablets,
    /// provisioned replicas, tool containers), and its directories (the btrfs image and
    /// mount, the kubelet and state dirs). Checked after the lab is dropped.
    pub fn footprint(&self) -> Footprint {
        let mut dirs = vec![self.kubelet.clone(), self._state.path().to_path_buf()];
        if let Some(parent) = self.vol.as_ref().and_then(|v| v.path().parent()) {
            dirs.push(parent.to_path_buf());
        }
        Footprint::new(MariaDb::started_by_this_process(), dirs)
    }
}

/// How long a dropped lab may take to be gone: Podman keeps an exec session's conmon 5 s
/// (`exit_command_delay`), and container removal runs after the drop.
pub const LEFTOVER_LIMIT: Duration = Duration::from_secs(30);

/// Drops `lab` and fails, naming each, if any container, process, mount or loop device of
/// it is still on the host after `limit` (Podman keeps an exec's conmon a few seconds).
pub async fn drop_and_check_nothing_left(lab: Lab, limit: Duration) -> Result<(), Vec<String>> {
    let fp = lab.footprint();
    drop(lab);
    fp.gone_within(limit).await
}

pub use vtsnap_testkit::vitess::free_port;

/// Where kubelet mounts pod `pod_uid`'s volumes.
pub fn pod_volumes(kubelet: &Path, pod_uid: &str) -> PathBuf {
    kubelet.join("pods").join(pod_uid).join("volumes")
}

/// The pod's `/vt/socket` (an emptyDir) on the host.
pub fn socket_dir(kubelet: &Path, pod_uid: &str) -> PathBuf {
    pod_volumes(kubelet, pod_uid).join("kubernetes.io~empty-dir/vt-root/socket")
}

/// Waits until `cond` holds, polling; panics naming `what` after `limit`.
pub async fn until<F: std::future::Future<Output = bool>>(
    what: &str,
    limit: Duration,
    mut cond: impl FnMut() -> F,
) {
    let start = Instant::now();
    while !cond().await {
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

impl Lab {
    pub async fn start(opts: LabOptions, timeline: Timeline) -> Self {
        // In memory, the lab's own btrfs holds the volumes; a real cluster's CSI driver
        // has its own.
        let (cp, vol) = match &opts.control_plane {
            Choice::InMemory => {
                let vol = BtrfsVolume::create(opts.volume_bytes);
                resources::mount(vol.path());
                timeline.mark(format!(
                    "lab: btrfs on a loop device at {} ({} GiB sparse)",
                    vol.path().display(),
                    opts.volume_bytes >> 30
                ));
                let cp = ControlPlane::in_memory(
                    vol.path(),
                    opts.cut_delay,
                    opts.upload_delay,
                    timeline.clone(),
                );
                (cp, Some(vol))
            }
            Choice::Real { kubeconfig } => (
                ControlPlane::real(kubeconfig, opts.cut_delay, timeline.clone()).await,
                None,
            ),
        };
        let kubelet = cp.kubelet_dir(vol.as_ref().map(BtrfsVolume::path));
        let fixture = shard().replicas(3).primary(1).on_node(cp.node());
        let vtctld = FakeVtctld::new();
        cp.install(&fixture, &vtctld).await;
        let vt = vtctld.serve().await;
        let backend = LabBackend::default();
        vtctld.set_backend(Arc::new(backend.clone()));

        // Every tablet's PVC is mounted where kubelet mounts it for its Pod.
        let mut mounts = BTreeMap::new();
        for n in 1..=3 {
            let t = fixture.tablet(n);
            let uid = cp.pod_uid(&t.pod).await;
            std::fs::create_dir_all(socket_dir(&kubelet, &uid)).unwrap();
            let mount = pod_volumes(&kubelet, &uid).join(format!("kubernetes.io~csi/pv-{n}/mount"));
            mounts.insert(n, (uid, mount));
        }
        cp.primary_volume(&fixture, &mounts[&1].1).await;

        // Seed the primary with no binlog, stop it cleanly, copy it for the replicas.
        let primary = fixture.tablet(1);
        let root = mounts[&1].1.join("vtdataroot");
        std::fs::create_dir(&root).unwrap();
        TabletLayout {
            port: free_port(),
            bind_loopback: true,
            ..TabletLayout::mariadb(primary.alias.uid.get())
        }
        .write_skeleton(&root)
        .unwrap();
        let seed_start = Instant::now();
        {
            let db = MariaDb::start(&root, primary.alias.uid).await;
            resources::container(db.id());
            seed(&db, opts.seed_rows, opts.row_bytes).await;
            db.shutdown().await;
        }
        timeline.mark(format!(
            "lab: primary {} seeded with {} rows of ~{} B in {:.1}s",
            primary.alias,
            opts.seed_rows,
            opts.row_bytes,
            seed_start.elapsed().as_secs_f64()
        ));
        let replica_mounts: BTreeMap<usize, PathBuf> = [2, 3]
            .into_iter()
            .map(|n| (n, mounts[&n].1.clone()))
            .collect();
        cp.replica_volumes(&fixture, &mounts[&1].1, &replica_mounts)
            .await;
        for (n, mount) in &replica_mounts {
            let t = fixture.tablet(*n);
            let out = vtsnap_restore::run(&vtsnap_restore::Options {
                vtdataroot: mount.join("vtdataroot"),
                tablet_uid: t.alias.uid,
                server_id: None,
                dry_run: false,
            })
            .unwrap_or_else(|e| panic!("vtsnap-restore for replica {}: {e}", t.alias));
            timeline.mark(format!(
                "lab: replica {} made from a copy of the primary's volume (vtsnap-restore: {})",
                t.alias,
                out.action.as_str()
            ));
        }

        let mut lab = Self {
            timeline,
            opts,
            tablets: BTreeMap::new(),
            cp,
            vtctld,
            backend,
            fixture,
            kubelet,
            node: None,
            vt,
            _state: tempfile::tempdir().unwrap(),
            vol,
        };
        for (n, (uid, mount)) in &mounts {
            lab.start_tablet(*n, uid, mount).await;
        }
        let primary_port = lab.tablets[&1].port;
        let p = lab.primary();
        p.query("SET GLOBAL read_only = 0").await;
        for n in [2, 3] {
            lab.replicate(&lab.tablets[&n].db, primary_port, "").await;
        }
        lab.timeline
            .mark("lab: 1 primary + 2 replicas replicating with GTID");

        lab.start_node(lab.opts.skip_hold_for_tests).await;
        lab
    }

    /// Starts tablet `n` on its volume (the mysqld container, its mysqlctld, its pod's
    /// container status). The port is given on the command line: the replicas' my.cnf
    /// came from the primary's.
    async fn start_tablet(&mut self, n: usize, pod_uid: &str, mount: &Path) {
        let t = self.fixture.tablet(n);
        let socket_dir = socket_dir(&self.kubelet, pod_uid);
        let port = free_port();
        let args = format!("--port={port} {}", self.opts.server_args);
        let db = Arc::new(
            MariaDb::start_supervised_with(
                &mount.join("vtdataroot"),
                &socket_dir,
                t.alias.uid,
                true,
                &args,
            )
            .await,
        );
        resources::container(db.id());
        let mut ctl = FakeMysqlctld::new(
            &socket_dir,
            &mount.join("vtdataroot").join(t.alias.uid.tablet_dir_name()),
        )
        .with_start_timeout(MYSQLCTLD_START_TIMEOUT);
        if let Some(d) = self.opts.supervisor_restart {
            ctl = ctl.with_supervisor(d);
        }
        let serving = ctl.serve().await;
        self.cp.set_mysqld_container(&t.pod, db.id()).await;
        self.backend.insert(t.alias.clone(), &db);
        self.tablets.insert(
            n,
            Tablet {
                alias: t.alias,
                pod: t.pod,
                port,
                db,
                ctl,
                mount: mount.to_path_buf(),
                socket_dir,
                _serving: serving,
            },
        );
    }

    /// Points `db` at the primary with GTID auto-positioning from `slave_pos` (if given) and
    /// starts replication.
    pub async fn replicate(&self, db: &MariaDb, primary_port: u16, slave_pos: &str) {
        if !slave_pos.is_empty() {
            db.query(&format!("SET GLOBAL gtid_slave_pos = \"{slave_pos}\""))
                .await;
        }
        db.query(&format!(
            "CHANGE MASTER TO MASTER_HOST=\"127.0.0.1\", MASTER_PORT={primary_port}, MASTER_USER=\"repl\", \
             MASTER_PASSWORD=\"repl\", MASTER_USE_GTID=slave_pos"
        ))
        .await;
        db.query("START SLAVE").await;
    }

    pub fn primary(&self) -> Arc<MariaDb> {
        self.tablets[&1].db.clone()
    }

    pub fn primary_port(&self) -> u16 {
        self.tablets[&1].port
    }

    /// The tablet (number and tablet) with this alias (`zone1-0000000101`), e.g. a
    /// snapshot's target; panics naming it if the lab has no such tablet.
    pub fn tablet_by_alias(&self, alias: &str) -> (usize, &Tablet) {
        self.tablets
            .iter()
            .find(|(_, t)| t.alias.to_string() == alias)
            .map(|(n, t)| (*n, t))
            .unwrap_or_else(|| panic!("{alias} is not a lab tablet"))
    }

    pub fn vtctld_endpoint(&self) -> String {
        self.vt.endpoint()
    }

    /// The config every program reads, for this lab's shard, plus `extra` policy lines
    /// (indented for the cluster level).
    pub fn config(&self, extra: &str) -> String {
        // The class goes on the keyspace level, so that `extra` may set other snapshot
        // fields at the cluster level (the merge is field by field).
        let class = self.cp.snapshot_class().map_or_else(String::new, |c| {
            format!(
                "  keyspaces:\n    commerce:\n      snapshot: {{volumeSnapshotClassName: {c}}}\n"
            )
        });
        format!(
            "clusters:\n- name: example\n  namespace: {}\n  vtctld: \"{}\"\n{class}{extra}",
            self.cp.namespace(),
            self.vtctld_endpoint()
        )
    }

    /// Starts the real node daemon for the lab's node (`skip_hold`: the test flag).
    pub async fn start_node(&mut self, skip_hold: bool) {
        self.stop_node().await;
        let node = daemon::start_for_tests(
            DaemonConfig {
                node: self.cp.node().into(),
                kubelet_dir: self.kubelet.clone(),
                roots: Roots::default(),
                // The tests run on the host: its `/` is the node root.
                host_root: "/".into(),
                state_dir: self._state.path().to_path_buf(),
                resync: Duration::from_secs(30),
                listen: None,
                start_timeout: Duration::from_secs(120),
                shutdown_timeout: Duration::from_secs(120),
            },
            self.cp.client(),
            TestHooks { skip_hold },
        )
        .await
        .unwrap_or_else(|e| panic!("node daemon: {e}"));
        self.node = Some(node);
        self.timeline.mark(format!(
            "lab: vtsnap-node serving {}{}",
            self.cp.node(),
            if skip_hold {
                " (TEST FLAG: hold switched off)"
            } else {
                ""
            }
        ));
    }

    /// Stops the node daemon (what the lab does before it goes away).
    pub async fn stop_node(&mut self) {
        if let Some(n) = self.node.take() {
            n.stop().await;
        }
    }
}

/// A write load for [`MariaDb::start_load_script`]: single-row transactions into
/// `vt_commerce.t`, at most about `per_second` of them a second (a pause every tenth).
pub fn inserts_load(per_second: u32) -> String {
    let every = (per_second / 10).max(1);
    format!(
        "i=100000000; while :; do echo \"INSERT INTO {DATABASE}.t (v, pad) VALUES ($i, md5($i));\"; \
         i=$((i+1)); [ $((i % {every})) -eq 0 ] && sleep 0.1; done"
    )
}

/// `CHECKSUM TABLE` of every table of the lab's database, in name order.
pub async fn checksums(db: &MariaDb) -> Vec<String> {
    let tables = db
        .query(&format!(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = \"{DATABASE}\" ORDER BY table_name"
        ))
        .await;
    let mut out = Vec::new();
    for t in tables {
        let sum = db
            .query(&format!("CHECKSUM TABLE {DATABASE}.{}", t[0]))
            .await;
        out.push(format!("{}={}", t[0], sum[0][1]));
    }
    out
}

/// Creates the replication user, the database and its table, and `rows` rows of about
/// `row_bytes` each, all without binlog (the replicas are clones of this state).
async fn seed(db: &MariaDb, rows: u64, row_bytes: u32) {
    db.query(
        "SET SESSION sql_log_bin = 0; \
         CREATE USER \"repl\"@\"127.0.0.1\" IDENTIFIED BY \"repl\"; \
         GRANT REPLICATION SLAVE ON *.* TO \"repl\"@\"127.0.0.1\"",
    )
    .await;
    db.query(&format!(
        "SET SESSION sql_log_bin = 0; CREATE DATABASE {DATABASE}; \
         CREATE TABLE {DATABASE}.t (id BIGINT AUTO_INCREMENT PRIMARY KEY, v BIGINT NOT NULL, \
         pad VARCHAR(8000) NOT NULL) ENGINE=InnoDB"
    ))
    .await;
    let repeat = row_bytes.div_ceil(32).max(1);
    let batch = 50_000u64;
    let mut done = 0;
    while done < rows {
        let n = batch.min(rows - done);
        db.query(&format!(
            "SET SESSION sql_log_bin = 0; SET SESSION max_recursive_iterations = {n}; \
             INSERT INTO {DATABASE}.t (v, pad) WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL \
             SELECT n + 1 FROM s WHERE n < {n}) SELECT n + {done}, REPEAT(md5(n + {done}), {repeat}) FROM s"
        ))
        .await;
        done += n;
    }
}
