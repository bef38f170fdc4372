//! The lab on real Vitess: a Vitess 24 shard on MySQL 9.7 (etcd, vtctld, VTOrc, three
//! tablets of mysqlctld and vttablet in containers of the Vitess image), each tablet's
//! volume a btrfs subvolume where kubelet mounts its Pod's PVC and its socket directory
//! where kubelet has the Pod's `/vt/socket`. Around it: the in-memory Kubernetes API and
//! CSI driver (see [`crate::control_plane`]), whose tablet Pods name the real `mysqld`
//! containers, and the real node helper. vtsnap's programs act on it through the real
//! vtctld and mysqlctld.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use vtsnap_node::cgroup::Roots;
use vtsnap_node::daemon::{self, DaemonConfig, TestHooks};
use vtsnap_testkit::btrfs::BtrfsVolume;
use vtsnap_testkit::fake_vtctld::FakeVtctld;
use vtsnap_testkit::fixtures::{ShardFixture, shard};
use vtsnap_testkit::leftovers::Footprint;
use vtsnap_testkit::vitess::{
    CloneSupport, Container, DATABASE, Durability, Orchestrator, Placement, TabletRole,
    VitessOptions, VitessShard, VitessTablet,
};

use crate::control_plane::ControlPlane;
use crate::resources;
use crate::shard::{pod_volumes, socket_dir};
use crate::timeline::Timeline;

/// How long the lab waits for any one event before it fails, naming it.
pub const LIMIT: Duration = Duration::from_secs(180);

/// Waits until `cond` holds; panics naming `what` after [`LIMIT`].
pub async fn until(what: &str, mut cond: impl AsyncFnMut() -> bool) {
    let start = Instant::now();
    while !cond().await {
        assert!(start.elapsed() < LIMIT, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The lab's disk, CSI driver and tablets.
#[derive(Debug, Clone)]
pub struct LabSpec {
    /// The btrfs image's size (sparse: only what is written takes disk).
    pub disk_bytes: u64,
    /// The in-memory CSI driver's time from a VolumeSnapshot's creation to its cut, and
    /// from the cut to `readyToUse`.
    pub cut: Duration,
    pub upload: Duration,
    pub clone: CloneSupport,
    /// my.cnf lines for every tablet beyond the lean defaults.
    pub extra_cnf: String,
    /// VTOrc's topology refresh (how soon it finds a new tablet).
    pub vtorc_refresh: Duration,
}

impl LabSpec {
    /// `make demo`'s: 8 GiB, a cut after 500 ms, ready a second later, lean tablets.
    pub fn demo() -> Self {
        Self {
            disk_bytes: 8 << 30,
            cut: Duration::from_millis(500),
            upload: Duration::from_secs(1),
            clone: CloneSupport::Off,
            extra_cnf: String::new(),
            vtorc_refresh: vtsnap_testkit::vitess::VTORC_REFRESH,
        }
    }
}

/// The running lab. Dropped: the node helper, the shard's containers, the control plane,
/// then the btrfs volume.
#[derive(Debug)]
pub struct VitessLab {
    pub timeline: Timeline,
    pub shard: VitessShard,
    pub cp: ControlPlane,
    pub fixture: ShardFixture,
    node: Option<daemon::Handle>,
    _state: tempfile::TempDir,
    pub vol: BtrfsVolume,
}

impl VitessLab {
    /// Starts the shard on kubelet's paths of the fixture's Pods (a primary and two
    /// replicas, reparented by `PlannedReparentShard`, VTOrc watching), tells the API
    /// which container is each Pod's `mysqld`, starts the node helper and creates the
    /// keyspace's table.
    pub async fn start(timeline: Timeline) -> Self {
        Self::start_with(timeline, LabSpec::demo()).await
    }

    /// [`Self::start`] on a disk, a CSI driver and tablets as `spec` says.
    pub async fn start_with(timeline: Timeline, spec: LabSpec) -> Self {
        let vol = BtrfsVolume::create(spec.disk_bytes);
        resources::mount(vol.path());
        let cp = ControlPlane::in_memory(vol.path(), spec.cut, spec.upload, timeline.clone());
        let fixture = shard().replicas(3).primary(1).on_node(cp.node());
        // The fixture's vtctld is not used: the config names the real one.
        cp.install(&fixture, &FakeVtctld::new()).await;
        let kubelet = cp.kubelet_dir(Some(vol.path()));
        let mut placed = BTreeMap::new();
        let mut mounts = BTreeMap::new();
        for n in 1..=3 {
            let t = fixture.tablet(n);
            let uid = cp.pod_uid(&t.pod).await;
            let mount = pod_volumes(&kubelet, &uid).join(format!("kubernetes.io~csi/pv-{n}/mount"));
            placed.insert(
                t.alias.uid.get(),
                Placement {
                    volume: mount.clone(),
                    socket_dir: socket_dir(&kubelet, &uid),
                },
            );
            mounts.insert(n, mount);
        }
        cp.primary_volume(&fixture, &mounts[&1]).await;
        let replicas: BTreeMap<usize, PathBuf> = [2, 3]
            .into_iter()
            .map(|n| (n, mounts[&n].clone()))
            .collect();
        cp.replica_volumes(&fixture, &mounts[&1], &replicas).await;

        let started = Instant::now();
        let shard = VitessShard::start_placed(
            VitessOptions {
                uids: (1..=3).map(|n| fixture.tablet(n).alias.uid.get()).collect(),
                durability: Durability::None,
                vtorc: Orchestrator::VtOrc,
                volumes: vol.path().join("unplaced"),
                clone: spec.clone,
                extra_cnf: spec.extra_cnf,
                vtorc_refresh: spec.vtorc_refresh,
                backups: vtsnap_testkit::vitess::BackupStorage::File,
            },
            placed,
        )
        .await;
        for name in VitessShard::started_by_this_process() {
            resources::container(&name);
        }
        timeline.mark(format!(
            "lab: Vitess 24 shard on MySQL 9.7 serving in {:.1}s: etcd, vtctld, VTOrc, \
             primary {} and replicas {} and {} (mysqlctld + vttablet each)",
            started.elapsed().as_secs_f64(),
            fixture.tablet(1).alias,
            fixture.tablet(2).alias,
            fixture.tablet(3).alias
        ));
        for n in 1..=3 {
            let id = shard
                .tablet(&fixture.tablet(n).alias)
                .container(TabletRole::Mysqld)
                .map(vtsnap_testkit::vitess::Container::id)
                .unwrap_or_default();
            cp.set_mysqld_container(&fixture.tablet(n).pod, &id).await;
        }
        let state = tempfile::tempdir().unwrap();
        let node = daemon::start_for_tests(
            DaemonConfig {
                node: cp.node().into(),
                kubelet_dir: kubelet,
                roots: Roots::default(),
                // The lab runs on the host: its `/` is the node root.
                host_root: "/".into(),
                state_dir: state.path().to_path_buf(),
                resync: Duration::from_secs(30),
                listen: None,
                start_timeout: Duration::from_secs(120),
                shutdown_timeout: Duration::from_secs(120),
            },
            cp.client(),
            TestHooks { skip_hold: false },
        )
        .await
        .unwrap_or_else(|e| panic!("node daemon: {e}"));
        timeline.mark(format!("lab: vtsnap-node serving {}", cp.node()));
        shard
            .primary()
            .must_sql(&format!(
                "CREATE DATABASE IF NOT EXISTS {DATABASE}; \
                 CREATE TABLE IF NOT EXISTS {DATABASE}.t \
                 (id BIGINT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(200))"
            ))
            .await;
        Self {
            timeline,
            shard,
            cp,
            fixture,
            node: Some(node),
            _state: state,
            vol,
        }
    }

    /// The config every program reads, for this lab's shard, plus `extra` lines at the
    /// cluster level.
    pub fn config(&self, extra: &str) -> String {
        let class = self.cp.snapshot_class().map_or_else(String::new, |c| {
            format!(
                "  keyspaces:\n    commerce:\n      snapshot: {{volumeSnapshotClassName: {c}}}\n"
            )
        });
        format!(
            "clusters:\n- name: example\n  namespace: {}\n  vtctld: \"{}\"\n{class}{extra}",
            self.cp.namespace(),
            self.shard.vtctld_grpc
        )
    }

    pub fn tablet_by_alias(&self, alias: &str) -> &VitessTablet {
        self.shard
            .tablets
            .iter()
            .find(|t| t.alias.to_string() == alias)
            .unwrap_or_else(|| panic!("{alias} is not a lab tablet"))
    }
}

impl VitessLab {
    /// What this lab owns on the host: its containers, the btrfs image and its mount, the
    /// node helper's state. Checked after the lab is dropped.
    pub fn footprint(&self) -> Footprint {
        let mut dirs = vec![self._state.path().to_path_buf()];
        if let Some(parent) = self.vol.path().parent() {
            dirs.push(parent.to_path_buf());
        }
        Footprint::new(Container::ids_started_by_this_process(), dirs)
    }
}

/// Drops `lab` and fails, naming each, if any container, process, mount or loop device of
/// it is still on the host after `limit`.
pub async fn drop_and_check_nothing_left(
    lab: VitessLab,
    limit: Duration,
) -> Result<(), Vec<String>> {
    let fp = lab.footprint();
    drop(lab);
    fp.gone_within(limit).await
}

impl Drop for VitessLab {
    fn drop(&mut self) {
        // The node helper first: it must not act on containers that are going away.
        self.node = None;
    }
}

/// What the load does when an insert fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnFailure {
    /// Fail the lab: nothing should stop the primary.
    Panic,
    /// Count it and try again for up to [`LIMIT`] (a benchmark records what happened).
    Retry,
}

/// Inserts into the primary until stopped (each a client in the primary's container).
#[derive(Debug)]
pub struct Load {
    stop: Arc<AtomicBool>,
    pub rows: Arc<AtomicU64>,
    failures: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Load {
    pub fn start(shard: &VitessShard) -> Self {
        Self::start_paced(shard, Duration::ZERO, OnFailure::Panic)
    }

    /// [`Self::start`], pausing `pause` after each insert; a failed insert panics or is
    /// counted and tried again, as `on_failure` says.
    pub fn start_paced(shard: &VitessShard, pause: Duration, on_failure: OnFailure) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let rows = Arc::new(AtomicU64::new(0));
        let container = shard
            .primary()
            .container(TabletRole::Mysqld)
            .map(|c| c.name().to_owned())
            .unwrap_or_default();
        let failures = Arc::new(AtomicU64::new(0));
        let (s, r, f) = (stop.clone(), rows.clone(), failures.clone());
        let task = tokio::spawn(async move {
            let mut failing: Option<Instant> = None;
            let insert = format!("INSERT INTO {DATABASE}.t (v) VALUES (REPEAT('x', 180))");
            while !s.load(Ordering::SeqCst) {
                let out = tokio::process::Command::new("podman")
                    .args([
                        "exec",
                        &container,
                        "mysql",
                        "--no-defaults",
                        "-S",
                        "/vt/socket/mysql.sock",
                        "-u",
                        "vt_dba",
                        "-e",
                        &insert,
                    ])
                    .output()
                    .await;
                match out {
                    Ok(o) if o.status.success() => {
                        r.fetch_add(1, Ordering::SeqCst);
                        if !pause.is_zero() {
                            tokio::time::sleep(pause).await;
                        }
                    }
                    other => {
                        let since = *failing.get_or_insert_with(Instant::now);
                        if on_failure == OnFailure::Panic || since.elapsed() > LIMIT {
                            panic!("the load's insert failed: {other:?}");
                        }
                        f.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    }
                }
                failing = None;
            }
        });
        Self {
            stop,
            rows,
            failures,
            task,
        }
    }

    /// Inserts that failed and were tried again ([`OnFailure::Retry`]).
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::SeqCst)
    }

    /// Waits until `n` more rows were written than now.
    pub async fn until_more(&self, n: u64) {
        let from = self.rows.load(Ordering::SeqCst);
        until(&format!("the load writes {n} more rows"), async || {
            self.rows.load(Ordering::SeqCst) >= from + n
        })
        .await;
    }

    pub async fn stop(self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.task.await;
        self.rows.load(Ordering::SeqCst)
    }
}
