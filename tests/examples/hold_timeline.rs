//! Measures the node helper's hold timeline on a real MariaDB tablet container: clean stop
//! through mysqlctld, cgroup freeze, thaw, `Start` until mysqld answers — and the daemon's
//! release latency after a fence lease is deleted or expires. Prints a Markdown table of
//! medians. Needs root, Podman's API socket (DOCKER_HOST) and the test image.
//!
//! `cargo run --release -p vtsnap-lab --example hold_timeline [-- RUNS]`

// A measurement program: a failed unwrap ends it with a message, which is what we want.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use serde_json::json;
use vtsnap_core::fence::*;
use vtsnap_node::cgroup::{Cgroup, Roots};
use vtsnap_node::daemon::{self, DaemonConfig};
use vtsnap_node::mysqlctl::{MysqlCtl, wait_for_mysqld};
use vtsnap_testkit::fake_kube::FakeKube;
use vtsnap_testkit::fake_mysqlctld::FakeMysqlctld;
use vtsnap_testkit::fake_vtctld::FakeVtctld;
use vtsnap_testkit::fixtures::shard;
use vtsnap_testkit::layout::TabletLayout;
use vtsnap_testkit::mariadb::{self, MariaDb};

fn median(mut v: Vec<Duration>) -> String {
    v.sort();
    format!("{:.0} ms", v[v.len() / 2].as_secs_f64() * 1e3)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5);
    let dir = tempfile::Builder::new()
        .prefix("vtsnap-timeline-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let pod_uid = "6f1d2c3b-0000-4000-8000-00000000beef";
    let vols = dir
        .path()
        .join("kubelet/pods")
        .join(pod_uid)
        .join("volumes");
    let socket_dir = vols.join("kubernetes.io~empty-dir/vt-root/socket");
    let root = vols.join("kubernetes.io~csi/pv-1/mount/vtdataroot");
    std::fs::create_dir_all(&socket_dir).unwrap();
    std::fs::create_dir_all(&root).unwrap();
    let fixture = shard().replicas(3).primary(1);
    let vtctld = FakeVtctld::new();
    fixture.install(&FakeKube::new(), &vtctld);
    let vt = vtctld.serve().await;
    let alias = fixture.alias(2);
    TabletLayout {
        flavor: mariadb::flavor(),
        ..TabletLayout::mariadb(alias.uid.get())
    }
    .write_skeleton(&root)
    .unwrap();
    let db = MariaDb::start_supervised(&root, &socket_dir, alias.uid).await;
    let fake = FakeMysqlctld::new(&socket_dir, &root.join(alias.uid.tablet_dir_name()));
    let _serving = fake.serve().await;
    let ctl = MysqlCtl::new(&socket_dir.join("mysqlctl.sock")).unwrap();
    let sock = fake.mysql_socket();
    let cg = Cgroup::containing(&Roots::default(), db.id())
        .unwrap()
        .unwrap()
        .1;

    let (mut stop, mut freeze, mut thaw, mut start, mut window) =
        (vec![], vec![], vec![], vec![], vec![]);
    for _ in 0..runs {
        let t0 = Instant::now();
        ctl.shutdown(Duration::from_secs(300)).await.unwrap();
        let t1 = Instant::now();
        cg.freeze().unwrap();
        let t2 = Instant::now();
        cg.thaw().unwrap();
        let t3 = Instant::now();
        ctl.start(Duration::from_secs(300)).await.unwrap();
        wait_for_mysqld(&sock, Duration::from_secs(300))
            .await
            .unwrap();
        let t4 = Instant::now();
        stop.push(t1 - t0);
        freeze.push(t2 - t1);
        thaw.push(t3 - t2);
        start.push(t4 - t3);
        window.push(t4 - t0);
    }

    // Release latency of the daemon: lease deleted, and lease expired, to thawed.
    let kube = FakeKube::new();
    kube.put_json("", "pods", json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "tablet", "namespace": "vitess", "uid": pod_uid},
        "spec": {"nodeName": "node-a", "containers": [{"name": "mysqld", "image": "x"}]},
        "status": {"containerStatuses": [{"name": "mysqld", "image": "x", "imageID": "", "ready": true, "restartCount": 0,
                    "containerID": format!("podman://{}", db.id())}]}
    }));
    let cfg = DaemonConfig {
        node: "node-a".into(),
        kubelet_dir: dir.path().join("kubelet"),
        roots: Roots::default(),
        // The tests run on the host: its `/` is the node root.
        host_root: "/".into(),
        state_dir: dir.path().join("state"),
        resync: Duration::from_secs(30),
        listen: None,
        start_timeout: Duration::from_secs(300),
        shutdown_timeout: Duration::from_secs(300),
    };
    let h = daemon::start(cfg, kube.client()).await.unwrap();
    let lease = |duration: u32| {
        let now = k8s_openapi::jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%S.%6fZ")
            .to_string();
        kube.put_json("coordination.k8s.io", "leases", json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "fence", "namespace": "vitess", "labels": {LABEL_NODE: "node-a"}, "annotations": {
                ANN_TARGET_POD: "tablet", ANN_TARGET_POD_UID: pod_uid, ANN_TABLET_ALIAS: alias.to_string(),
                ANN_ORIGINAL_TYPE: "replica", ANN_VTCTLD: vt.endpoint(), ANN_MODE: "cold", ANN_REQUEST: "hold", ANN_MAX_HOLD: "600"}},
            "spec": {"leaseDurationSeconds": duration, "renewTime": now}
        }));
    };
    let wait = |f: &dyn Fn() -> bool| {
        let start = Instant::now();
        while !f() {
            assert!(start.elapsed() < Duration::from_secs(120), "timed out");
            std::thread::sleep(Duration::from_millis(5));
        }
        Instant::now()
    };
    let (mut on_delete, mut on_expiry) = (vec![], vec![]);
    for _ in 0..runs {
        lease(600);
        wait(&|| cg.is_frozen().unwrap());
        let t = Instant::now();
        kube.remove("coordination.k8s.io", "leases", "vitess", "fence");
        on_delete.push(wait(&|| !cg.is_frozen().unwrap()) - t);
        wait_for_mysqld(&sock, Duration::from_secs(300))
            .await
            .unwrap();

        lease(2);
        let renewed = Instant::now();
        wait(&|| cg.is_frozen().unwrap());
        let thawed = wait(&|| !cg.is_frozen().unwrap());
        // Latency past the moment the lease expired (2 s after the renewal).
        on_expiry.push(thawed.saturating_duration_since(renewed + Duration::from_secs(2)));
        wait_for_mysqld(&sock, Duration::from_secs(300))
            .await
            .unwrap();
        while kube
            .get_json("coordination.k8s.io", "leases", "vitess", "fence")
            .is_some()
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    h.stop().await;

    println!("| step (median of {runs}) | time |");
    println!("|---|---|");
    println!(
        "| stop: mysqlctld Shutdown{{wait_for_mysqld}} | {} |",
        median(stop)
    );
    println!(
        "| hold: freeze the mysqld container's cgroup | {} |",
        median(freeze)
    );
    println!("| thaw | {} |", median(thaw));
    println!(
        "| start: mysqlctld Start until mysqld answers | {} |",
        median(start)
    );
    println!(
        "| node part of the cold fence window (stop → answering again, no cut) | {} |",
        median(window)
    );
    println!(
        "| daemon: lease deleted → thawed (watch event) | {} |",
        median(on_delete)
    );
    println!(
        "| daemon: lease expired → thawed (woken at the expiry) | {} |",
        median(on_expiry)
    );
    db.remove().await;
}
