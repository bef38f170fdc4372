//! What the hold is for: a supervisor calls `Start` a second after the cold `Shutdown`
//! (as the volume-snapshot RFC saw). With the hold (mysqld's container frozen) that Start
//! fails and the cut is of a stopped server; with the hold switched off by the test flag,
//! mysqld is running again at the cut and the "cold" image is a crash image.
//! Fakes: Kubernetes API, vtctld, mysqlctld, CSI driver. Needs root, Podman and btrfs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use vtsnap_lab::demo::snapshot_report;
use vtsnap_lab::shard::{Lab, LabOptions};
use vtsnap_lab::timeline::Timeline;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hold_defeats_a_supervisor_restart_and_switching_it_off_shows_the_difference() {
    let timeline = Timeline::new(false);
    let mut lab = Lab::start(
        LabOptions {
            volume_bytes: 2 << 30,
            seed_rows: 1_000,
            supervisor_restart: Some(Duration::from_secs(1)),
            // Supervisor (1 s) + Start timeout (5 s) end well before the cut.
            cut_delay: Duration::from_secs(8),
            upload_delay: Duration::from_millis(200),
            ..LabOptions::default()
        },
        timeline.clone(),
    )
    .await;

    let held = snapshot_report(&lab, false, 0).await;
    lab.start_node(true).await;
    let unheld = snapshot_report(&lab, false, 0).await;
    lab.stop_node().await;
    let tl = timeline.render();

    assert!(held.image_without_running_mysqld, "held: {held:?}\n{tl}");
    assert!(
        !held.supervisor_starts.is_empty() && held.supervisor_starts.iter().all(|started| !started),
        "held: the supervisor's Start must fail: {:?}\n{tl}",
        held.supervisor_starts
    );

    assert!(
        !unheld.image_without_running_mysqld,
        "without the hold the cut must catch the restarted mysqld: {unheld:?}\n{tl}"
    );
    assert!(
        unheld.supervisor_starts.iter().any(|started| *started),
        "without the hold the supervisor restarts mysqld: {:?}\n{tl}",
        unheld.supervisor_starts
    );
}
