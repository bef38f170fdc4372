//! The lab's end-to-end flow in a short configuration (fakes: Kubernetes API, vtctld,
//! mysqlctld, CSI driver; real: MariaDB, GTID replication, btrfs, cgroup freezer and every
//! vtsnap program's logic). Needs root, Podman and btrfs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use vtsnap_lab::demo::run_demo;
use vtsnap_lab::shard::{Lab, LabOptions};
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
    let tl = timeline.render();

    // Both replicas caught up to the primary's data.
    assert!(r.cold.checksum_match, "cold replica differs\n{tl}");
    assert!(r.online.checksum_match, "online replica differs\n{tl}");

    // The cold replica starts exactly where the snapshot says; the online one at or after
    // its recorded lower bound (one domain here: compare sequence numbers).
    assert!(!r.cold.recorded_gtid.is_empty(), "{tl}");
    assert_eq!(r.cold.restored_gtid, r.cold.recorded_gtid, "{tl}");
    let seq = |g: &str| g.rsplit('-').next().unwrap().parse::<u64>().unwrap();
    assert!(
        seq(&r.online.restored_gtid) >= seq(&r.online.recorded_gtid),
        "online: restored {} before the recorded lower bound {}\n{tl}",
        r.online.restored_gtid,
        r.online.recorded_gtid
    );

    // The cold image is of a stopped mysqld: the supervisor's Start inside the cut was
    // defeated by the hold.
    assert!(
        r.cold.image_without_running_mysqld,
        "cold image has a running mysqld\n{tl}"
    );
    assert!(
        !r.cold.supervisor_starts.is_empty()
            && r.cold.supervisor_starts.iter().all(|started| !started),
        "the supervisor's Start should have failed while held: {:?}\n{tl}",
        r.cold.supervisor_starts
    );

    // The fence window covers the cut and is bounded by shutdown + start + cut + slack.
    let shutdown = r.cold.mysqld_shutdown_ms.expect("Shutdown timing");
    let start = r.cold.mysqld_start_ms.expect("release Start timing");
    let cut = u64::try_from(CUT_DELAY.as_millis()).unwrap();
    let slack = 5_000;
    assert!(
        r.cold.fence_window_ms >= cut && r.cold.fence_window_ms <= shutdown + start + cut + slack,
        "fence window {} ms outside [{cut}, {shutdown} + {start} + {cut} + {slack}]\n{tl}",
        r.cold.fence_window_ms
    );
    assert_eq!(
        r.online.fence_window_ms, 0,
        "an online snapshot never fences"
    );

    // Retention maxCount 1: the online snapshot (newest ready) stays, the cold one goes,
    // and its btrfs snapshot with it.
    assert_eq!(r.gc_exit_code, 0);
    assert_eq!(r.snapshots_kept, vec![r.online.snapshot.clone()], "{tl}");
    assert_eq!(r.snapshots_deleted, vec![r.cold.snapshot.clone()], "{tl}");
    assert_eq!(r.volumes_left, vec![r.online.snapshot.clone()], "{tl}");

    // The summary line carries what the README promises.
    let s = r.summary();
    for k in [
        "fence_window_ms",
        "cut_latency_ms",
        "provisioning_ms",
        "catch_up_ms",
        "checksum_match",
        "snapshots_kept",
        "snapshots_deleted",
    ] {
        assert!(s.get(k).is_some(), "summary lacks {k}: {s}");
    }
}
