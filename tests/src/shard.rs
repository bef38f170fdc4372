//! The lab's shard: one primary and two replicas, real MariaDB servers in containers, each
//! on its own btrfs subvolume mounted where kubelet would mount the tablet's PVC, with GTID
//! replication over loopback. Around them, the fakes for what cannot run here: the
//! Kubernetes API, vtctld, a mysqlctld per tablet (with a supervisor that calls `Start`
//! a few seconds after a shutdown) and the CSI driver. The real node daemon serves the node.
//!
//! Setup seeds the primary (without binlog), stops it cleanly, and makes each replica from a
//! btrfs clone of it moved to the replica's UID by `vtsnap-restore` — so even the lab's own
//! replicas are provisioned the way vtsnap provisions them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use vtsnap_core::naming::TabletAlias;
use vtsnap_node::cgroup::Roots;
use vtsnap_node::daemon::{self, DaemonConfig, TestHooks};
use vtsnap_testkit::btrfs::BtrfsVolume;
use vtsnap_testkit::fake_kube::FakeKube;
use vtsnap_testkit::fake_mysqlctld::{FakeMysqlctld, Serving};
use vtsnap_testkit::fake_vtctld::FakeVtctld;
use vtsnap_testkit::fixtures::{ShardFixture, shard};
use vtsnap_testkit::grpc::Running;
use vtsnap_testkit::layout::TabletLayout;
use vtsnap_testkit::mariadb::MariaDb;

use crate::backend::LabBackend;
use crate::csi::FakeCsi;
use crate::resources;
use crate::timeline::Timeline;
use vtsnap_testkit::btrfs::btrfs;

pub const DATABASE: &str = "vt_commerce";
pub const NODE: &str = "node-a";
/// How long the fake mysqlctld's `Start` waits for mysqld: a supervisor's `Start` that
/// meets a held (frozen) mysqld fails after this long.
pub const MYSQLCTLD_START_TIMEOUT: Duration = Duration::from_secs(5);

/// How the lab is built.
#[derive(Debug, Clone)]
pub struct LabOptions {
    /// Size of the sparse btrfs image.
    pub volume_bytes: u64,
    /// Rows of `vt_commerce.t` seeded before the replicas are made.
    pub seed_rows: u64,
    /// Bytes of padding per seeded row (≈ row size).
    pub row_bytes: u32,
    /// The supervisor's `Start` after each `Shutdown` (`None`: no supervisor).
    pub supervisor_restart: Option<Duration>,
    /// From VolumeSnapshot creation to the cut.
    pub cut_delay: Duration,
    /// From the cut to `readyToUse` (the "upload").
    pub upload_delay: Duration,
    /// Tests only: the node daemon stops mysqld but does not freeze it.
    pub skip_hold_for_tests: bool,
    /// Extra mysqld arguments for every tablet (e.g. a larger buffer pool).
    pub server_args: String,
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
    /// The PVC's subvolume; the tablet's vtdataroot is `<mount>/vtdataroot`.
    pub mount: PathBuf,
    /// The pod's `/vt/socket` (mysql.sock, mysqlctl.sock).
    pub socket_dir: PathBuf,
    _serving: Serving,
}

/// The running lab. Dropping it removes the containers, then unmounts the volume.
#[derive(Debug)]
pub struct Lab {
    pub timeline: Timeline,
    pub opts: LabOptions,
    /// Tablet number (1 = primary) → tablet. Dropped before the volume.
    pub tablets: BTreeMap<usize, Tablet>,
    pub kube: FakeKube,
    pub vtctld: FakeVtctld,
    pub backend: LabBackend,
    pub fixture: ShardFixture,
    pub csi: FakeCsi,
    node: Option<daemon::Handle>,
    vt: Running,
    _state: tempfile::TempDir,
    pub vol: BtrfsVolume,
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("no free port: {e}"))
}

fn must(r: Result<(), String>) {
    if let Err(e) = r {
        panic!("{e}");
    }
}

/// Where kubelet mounts pod `pod_uid`'s volumes.
fn pod_volumes(kubelet: &Path, pod_uid: &str) -> PathBuf {
    kubelet.join("pods").join(pod_uid).join("volumes")
}

/// The pod's `/vt/socket` (an emptyDir) on the host.
fn socket_dir(kubelet: &Path, n: usize) -> PathBuf {
    pod_volumes(kubelet, &pod_uid(n)).join("kubernetes.io~empty-dir/vt-root/socket")
}

fn pod_uid(n: usize) -> String {
    format!("00000000-0000-4000-8000-{n:012}")
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
        let vol = BtrfsVolume::create(opts.volume_bytes);
        resources::mount(vol.path());
        timeline.mark(format!(
            "lab: btrfs on a loop device at {} ({} GiB sparse)",
            vol.path().display(),
            opts.volume_bytes >> 30
        ));
        let kubelet = vol.path().join("kubelet");
        let fixture = shard().replicas(3).primary(1);
        let kube = FakeKube::new();
        let vtctld = FakeVtctld::new();
        fixture.install(&kube, &vtctld);
        let vt = vtctld.serve().await;
        let backend = LabBackend::default();
        vtctld.set_backend(Arc::new(backend.clone()));
        let csi = FakeCsi::start(
            &kube,
            vol.path(),
            opts.cut_delay,
            opts.upload_delay,
            timeline.clone(),
        );

        // Every tablet's PVC is a subvolume where kubelet mounts it.
        let mut mounts = BTreeMap::new();
        for n in 1..=3 {
            let t = fixture.tablet(n);
            let mount =
                pod_volumes(&kubelet, &pod_uid(n)).join(format!("kubernetes.io~csi/pv-{n}/mount"));
            std::fs::create_dir_all(socket_dir(&kubelet, n)).unwrap();
            std::fs::create_dir_all(mount.parent().unwrap()).unwrap();
            if n == 1 {
                must(btrfs(&["-q", "subvolume", "create"], &[&mount]));
            }
            csi.register_pvc(&t.pod, &mount);
            mounts.insert(n, mount);
        }

        // Seed the primary with no binlog, stop it cleanly, clone it for the replicas.
        let primary = fixture.tablet(1);
        let root = mounts[&1].join("vtdataroot");
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
        for n in [2, 3] {
            let t = fixture.tablet(n);
            must(btrfs(
                &["-q", "subvolume", "snapshot"],
                &[&mounts[&1], &mounts[&n]],
            ));
            let out = vtsnap_restore::run(&vtsnap_restore::Options {
                vtdataroot: mounts[&n].join("vtdataroot"),
                tablet_uid: t.alias.uid,
                server_id: None,
                dry_run: false,
            })
            .unwrap_or_else(|e| panic!("vtsnap-restore for replica {}: {e}", t.alias));
            timeline.mark(format!(
                "lab: replica {} made from a clone of the primary (vtsnap-restore: {})",
                t.alias,
                out.action.as_str()
            ));
        }

        let mut lab = Self {
            timeline,
            opts,
            tablets: BTreeMap::new(),
            kube,
            vtctld,
            backend,
            fixture,
            csi,
            node: None,
            vt,
            _state: tempfile::tempdir().unwrap(),
            vol,
        };
        for n in 1..=3 {
            lab.start_tablet(n, &mounts[&n]).await;
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

    /// Starts tablet `n` on its volume (the mysqld container, its mysqlctld, its pod). The
    /// port is given on the command line: the replicas' my.cnf came from the primary's.
    async fn start_tablet(&mut self, n: usize, mount: &Path) {
        let t = self.fixture.tablet(n);
        let socket_dir = socket_dir(&self.vol.path().join("kubelet"), n);
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
        let mut pod = self.kube.get_json("", "pods", "vitess", &t.pod).unwrap();
        pod["metadata"]["uid"] = json!(pod_uid(n));
        pod["spec"]["nodeName"] = json!(NODE);
        pod["status"]["containerStatuses"] = json!([{"name": "mysqld", "image": "vtsnap-mariadb", "imageID": "",
            "ready": true, "restartCount": 0, "containerID": format!("podman://{}", db.id())}]);
        self.kube.remove("", "pods", "vitess", &t.pod);
        self.kube.put_json("", "pods", pod);
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
        format!(
            "clusters:\n- name: example\n  namespace: vitess\n  vtctld: \"{}\"\n{extra}",
            self.vtctld_endpoint()
        )
    }

    /// Starts the real node daemon for the lab's node (`skip_hold`: the test flag).
    pub async fn start_node(&mut self, skip_hold: bool) {
        self.stop_node().await;
        let node = daemon::start_for_tests(
            DaemonConfig {
                node: NODE.into(),
                kubelet_dir: self.vol.path().join("kubelet"),
                roots: Roots::default(),
                state_dir: self._state.path().to_path_buf(),
                interval: Duration::from_millis(100),
                listen: None,
                start_timeout: Duration::from_secs(120),
                shutdown_timeout: Duration::from_secs(120),
            },
            self.kube.client(),
            TestHooks { skip_hold },
        )
        .await
        .unwrap_or_else(|e| panic!("node daemon: {e}"));
        self.node = Some(node);
        self.timeline.mark(format!(
            "lab: vtsnap-node serving {NODE}{}",
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
