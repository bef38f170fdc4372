//! vtsnap's own programs on a real Vitess shard (Vitess 24, MySQL 9.7): `vtsnap-snapshot
//! run` takes a cold snapshot through the real vtctld, and the real node helper stops the
//! tablet's mysqld through the real mysqlctld and holds its container frozen, with VTOrc
//! watching. The Kubernetes API and the CSI driver are the lab's in-memory ones (btrfs);
//! the tablets' volumes and sockets are where kubelet would mount them for their Pods.
//!
//! It checks what the cut is for: the GTID the run records is exactly what the snapshot
//! holds (a clone's `gtid_executed`), the tablet is back as a REPLICA and replicating, and
//! the primary kept writing through the fence.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use vtsnap_core::config::Config;
use vtsnap_core::naming::TabletUid;
use vtsnap_core::shard::ShardName;
use vtsnap_core::vtctld::TabletType;
use vtsnap_core::vtctld::messages::replicationdata::STATE_RUNNING;
use vtsnap_lab::control_plane::ControlPlane;
use vtsnap_lab::demo::run_options;
use vtsnap_lab::shard::{pod_volumes, socket_dir};
use vtsnap_lab::timeline::Timeline;
use vtsnap_node::cgroup::Roots;
use vtsnap_node::daemon::{self, DaemonConfig, TestHooks};
use vtsnap_testkit::btrfs::{BtrfsVolume, btrfs};
use vtsnap_testkit::fake_vtctld::FakeVtctld;
use vtsnap_testkit::fixtures::shard;
use vtsnap_testkit::vitess::{
    DATABASE, Durability, Orchestrator, Placement, TabletRole, VitessOptions, VitessShard,
};

const LIMIT: Duration = Duration::from_secs(120);

async fn until(what: &str, mut cond: impl AsyncFnMut() -> bool) {
    let start = Instant::now();
    while !cond().await {
        assert!(start.elapsed() < LIMIT, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_cold_snapshot_by_vtsnap_on_real_vitess_records_exactly_what_it_holds() {
    let vol = BtrfsVolume::create(8 << 30);
    let timeline = Timeline::new(false);
    let cp = ControlPlane::in_memory(
        vol.path(),
        Duration::from_millis(500),
        Duration::from_secs(1),
        timeline.clone(),
    );
    let fixture = shard().replicas(3).primary(1).on_node(cp.node());
    // The fake vtctld only receives the fixture's tablets; nobody calls it.
    cp.install(&fixture, &FakeVtctld::new()).await;
    let kubelet = cp.kubelet_dir(Some(vol.path()));

    // Each Pod's PVC where kubelet mounts it, and its /vt/socket.
    let mut placed = BTreeMap::new();
    let mut mounts = BTreeMap::new();
    for n in 1..=3 {
        let t = fixture.tablet(n);
        let uid = cp.pod_uid(&t.pod).await;
        let mount = pod_volumes(&kubelet, &uid).join(format!("kubernetes.io~csi/pv-{n}/mount"));
        mounts.insert(n, mount);
        placed.insert(
            t.alias.uid.get(),
            Placement {
                volume: mounts[&n].clone(),
                socket_dir: socket_dir(&kubelet, &uid),
            },
        );
    }
    cp.primary_volume(&fixture, &mounts[&1]).await;
    let replicas: BTreeMap<usize, _> = [2, 3]
        .into_iter()
        .map(|n| (n, mounts[&n].clone()))
        .collect();
    cp.replica_volumes(&fixture, &mounts[&1], &replicas).await;

    let uids: Vec<u32> = (1..=3).map(|n| fixture.tablet(n).alias.uid.get()).collect();
    let shard = VitessShard::start_placed(
        VitessOptions {
            uids,
            durability: Durability::None,
            vtorc: Orchestrator::VtOrc,
            volumes: vol.path().join("unused"),
        },
        placed,
    )
    .await;
    for n in 1..=3 {
        let t = shard.tablet(&fixture.tablet(n).alias);
        let id = t.container(TabletRole::Mysqld).unwrap().id();
        cp.set_mysqld_container(&fixture.tablet(n).pod, &id).await;
    }
    let state = tempfile::tempdir().unwrap();
    let _node = daemon::start_for_tests(
        DaemonConfig {
            node: cp.node().into(),
            kubelet_dir: kubelet.clone(),
            roots: Roots::default(),
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
    .unwrap();

    let p = shard.primary();
    p.must_sql(&format!(
        "CREATE DATABASE IF NOT EXISTS {DATABASE}; \
         CREATE TABLE IF NOT EXISTS {DATABASE}.t (id BIGINT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(64))"
    ))
    .await;
    // Writes on the primary all along: the cut must land at an exact, recorded point.
    let stop = Arc::new(AtomicBool::new(false));
    let rows = Arc::new(AtomicU64::new(0));
    let container = p.container(TabletRole::Mysqld).unwrap().name().to_owned();
    let load = {
        let (stop, rows) = (stop.clone(), rows.clone());
        tokio::spawn(async move {
            let insert = format!("INSERT INTO {DATABASE}.t (v) VALUES ('load')");
            while !stop.load(Ordering::SeqCst) {
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
                    .await
                    .unwrap();
                assert!(out.status.success(), "{out:?}");
                rows.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    until("the load writes", async || rows.load(Ordering::SeqCst) > 5).await;

    let class = cp.snapshot_class().map_or_else(String::new, |c| {
        format!("  keyspaces:\n    commerce:\n      snapshot: {{volumeSnapshotClassName: {c}}}\n")
    });
    let config = Config::from_yaml(&format!(
        "clusters:\n- name: example\n  namespace: {}\n  vtctld: \"{}\"\n{class}",
        cp.namespace(),
        shard.vtctld_grpc
    ))
    .unwrap();
    let before = rows.load(Ordering::SeqCst);
    let summary = vtsnap_snapshot::run::run(
        &config,
        &ShardName::new("example", "commerce", "-"),
        &run_options(),
        cp.client(),
    )
    .await;
    let during = rows.load(Ordering::SeqCst) - before;
    assert_eq!(
        summary.exit_code,
        0,
        "{}",
        serde_json::to_string(&summary).unwrap()
    );
    assert!(during > 0, "the primary wrote nothing during the run");
    let target = summary.target.clone().unwrap();
    let gtid = summary.gtid.clone().unwrap();

    // The tablet is back and replicating (VTOrc may also have helped: either is fine).
    let alias = shard
        .tablets
        .iter()
        .find(|t| t.alias.to_string() == target)
        .unwrap()
        .alias
        .clone();
    until(
        "the snapshotted tablet replicates as a REPLICA",
        async || {
            let c = shard.client();
            let typed = c
                .get_tablet(&alias)
                .await
                .is_ok_and(|t| t.r#type == TabletType::Replica as i32);
            let running = c
                .get_full_status(&alias)
                .await
                .ok()
                .and_then(|f| f.replication_status)
                .is_some_and(|s| s.io_state == STATE_RUNNING && s.sql_state == STATE_RUNNING);
            typed && running
        },
    )
    .await;
    stop.store(true, Ordering::SeqCst);
    load.await.unwrap();

    // The snapshot holds exactly the recorded GTID set: a clone of it, moved to a new UID
    // by vtsnap-restore, started by mysqlctld (nothing replicates it: not in the topology).
    let name = summary.snapshot.clone().unwrap();
    let image = cp.snapshot_images().await.remove(&name).unwrap();
    let clone_root = vol.path().join("restored");
    std::fs::create_dir_all(&clone_root).unwrap();
    let clone = clone_root.join("volume");
    btrfs(&["-q", "subvolume", "snapshot"], &[&image, &clone]).unwrap();
    const NEW: u32 = 2_000_000_001;
    vtsnap_restore::run(&vtsnap_restore::Options {
        vtdataroot: clone.join("vtdataroot"),
        tablet_uid: TabletUid::new(NEW),
        server_id: None,
        dry_run: false,
    })
    .unwrap();
    let mut shard = shard;
    let sockets = tempfile::tempdir_in("/var/tmp").unwrap();
    let executed = shard
        .add_mysqld_at(
            NEW,
            &Placement {
                volume: clone,
                socket_dir: sockets.path().to_path_buf(),
            },
        )
        .await
        .gtid_executed()
        .await;
    let set = |s: &str| s.trim_start_matches("MySQL56/").replace(['\n', ' '], "");
    assert_eq!(
        set(&executed),
        set(&gtid),
        "the recorded GTID is what the snapshot holds"
    );
}
