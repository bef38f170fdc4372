//! The lab's end-to-end flow in a short configuration (fakes: Kubernetes API, vtctld,
//! mysqlctld, CSI driver; real: MariaDB, GTID replication, btrfs, cgroup freezer and every
//! vtsnap program's logic). Needs root, Podman and btrfs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use vtsnap_lab::demo::{assert_demo_held, run_demo};
use vtsnap_lab::shard::{LEFTOVER_LIMIT, Lab, LabOptions, drop_and_check_nothing_left};
use vtsnap_lab::timeline::Timeline;

/// Longer than the supervisor's delay plus the fake mysqlctld's Start timeout, so that its
/// Start has failed (held) or succeeded (not held) well before the cut.
const CUT_DELAY: Duration = Duration::from_secs(8);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cold_and_online_snapshots_provision_replicas_that_match_and_gc_keeps_the_newest() {
    let timeline = Timeline::new(false);
    let mut lab = Lab::start(
        LabOptions {
            volume_bytes: 4 << 30,
            seed_rows: 5_000,
            supervisor_restart: Some(Duration::from_secs(1)),
            cut_delay: CUT_DELAY,
            upload_delay: Duration::from_secs(1),
            ..LabOptions::default()
        },
        timeline.clone(),
    )
    .await;
    let r = run_demo(&lab).await;
    lab.stop_node().await;
    assert_demo_held(&r, CUT_DELAY, &timeline.render());
    assert!(
        r.summary().get("kube_version").is_none(),
        "the in-memory API has no version"
    );
    // Nothing of the lab remains: containers, their conmon processes, mounts, loop devices.
    drop_and_check_nothing_left(lab, LEFTOVER_LIMIT)
        .await
        .unwrap_or_else(|left| panic!("the lab left behind:\n  {}", left.join("\n  ")));
}
