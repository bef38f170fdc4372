//! The local lab's whole demo on the real control plane (`make demo-real` in a short
//! configuration): tablet PVCs bound by csi-provisioner, the replicas made from a
//! VolumeSnapshot through `dataSourceRef`, the cold and online snapshots cut by the real
//! snapshot-controller and csi-snapshotter through vtsnap's btrfs driver (its cut slowed
//! by the lab's VolumeSnapshotClass, so the supervisor's `Start` lands inside the cold
//! cut), new replicas restored from them, GC deleting through the real stack. Real:
//! MariaDB, GTID replication, btrfs, the cgroup freezer, the node daemon on the real API.
//! Fake: vtctld and mysqlctld (docs/design.md §7). Needs root, Podman and the lab's image.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use vtsnap_lab::control_plane::Choice;
use vtsnap_lab::demo::{assert_demo_held, run_demo};
use vtsnap_lab::shard::{Lab, LabOptions};
use vtsnap_lab::timeline::Timeline;
use vtsnap_testkit::real_kube::KUBECONFIG_ENV;

const CUT_DELAY: Duration = Duration::from_secs(8);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_holds_on_the_real_control_plane_and_csi_stack() {
    let kubeconfig = std::env::var_os(KUBECONFIG_ENV)
        .unwrap_or_else(|| panic!("{KUBECONFIG_ENV} is not set (make test-real sets it)"));
    let timeline = Timeline::new(false);
    let mut lab = Lab::start(
        LabOptions {
            volume_bytes: 1 << 30,
            seed_rows: 5_000,
            supervisor_restart: Some(Duration::from_secs(1)),
            cut_delay: CUT_DELAY,
            control_plane: Choice::Real {
                kubeconfig: kubeconfig.into(),
            },
            ..LabOptions::default()
        },
        timeline.clone(),
    )
    .await;
    let r = run_demo(&lab).await;
    lab.stop_node().await;
    let tl = timeline.render();
    assert_demo_held(&r, CUT_DELAY, &tl);
    let version = r.summary()["kube_version"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert!(version.starts_with("v1."), "kube_version {version:?}\n{tl}");
    // The cuts and the bindings were the real controllers' (the watch saw them).
    for want in [
        "cut and readyToUse",
        "bound to pvc-",
        "by csi-provisioner from VolumeSnapshot",
    ] {
        assert!(tl.contains(want), "the timeline lacks {want:?}:\n{tl}");
    }
}
