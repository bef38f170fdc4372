//! What the hold is for: a supervisor calls `Start` a second after the cold `Shutdown`
//! (as the volume-snapshot RFC saw). With the hold (mysqld's container frozen) that Start
//! fails and the cut is of a stopped server; with the hold switched off by the test flag,
//! mysqld is running again at the cut and the "cold" image is a crash image.
//! Fakes: Kubernetes API, vtctld, mysqlctld, CSI driver. Needs root, Podman and btrfs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use vtsnap_lab::demo::{SnapshotReport, snapshot_report};
use vtsnap_lab::shard::{LEFTOVER_LIMIT, Lab, LabOptions, drop_and_check_nothing_left};
use vtsnap_lab::timeline::Timeline;

/// What the target's mysqlctld and mysqld did: enough to tell a failed run's story.
fn story(lab: &Lab, r: &SnapshotReport, tl: &str) -> String {
    let (_, t) = lab.tablet_by_alias(&r.target);
    let log = std::fs::read_to_string(
        t.mount
            .join("vtdataroot")
            .join(t.alias.uid.tablet_dir_name())
            .join("error.log"),
    )
    .unwrap_or_default();
    let events: Vec<&str> = log
        .lines()
        .filter(|l| {
            [
                "Starting MariaDB",
                "ready for connections",
                "Shutdown complete",
                "lock",
                "Aborting",
            ]
            .iter()
            .any(|w| l.contains(w))
        })
        .collect();
    format!(
        "{r:?}\nmysqlctld of {}: calls {:?}, timings {:?}\nits mysqld's error.log:\n  {}\ntimeline:\n{tl}",
        r.target,
        t.ctl.calls(),
        t.ctl.timings(),
        events.join("\n  ")
    )
}

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
    let held_story = story(&lab, &held, &tl);
    let unheld_story = story(&lab, &unheld, &tl);

    assert!(
        held.image_without_running_mysqld,
        "held: mysqld must be down at the cut: {held_story}"
    );
    assert!(
        !held.supervisor_starts.is_empty() && held.supervisor_starts.iter().all(|started| !started),
        "held: the supervisor's Start must fail (recorded: {:?}): {held_story}",
        held.supervisor_starts
    );

    // A second mariadbd on the same datadir waits on the Aria lock and takes over at the
    // next Shutdown: mysqld back with nobody asking, and a Shutdown that never sees it down.
    for (r, s) in [(&held, &held_story), (&unheld, &unheld_story)] {
        assert!(
            !s.contains("Can't lock aria control file"),
            "{}: two mysqld ran on one datadir: {s}",
            r.snapshot
        );
    }
    assert!(
        !unheld.supervisor_starts.is_empty(),
        "without the hold the supervisor must have called Start after the Shutdown; \
         none was recorded (did mysqlctld's Shutdown ever see mysqld down?): {unheld_story}"
    );
    assert!(
        unheld.supervisor_starts.iter().any(|started| *started),
        "without the hold the supervisor's Start must restart mysqld (recorded: {:?}): {unheld_story}",
        unheld.supervisor_starts
    );
    assert!(
        !unheld.image_without_running_mysqld,
        "without the hold the cut must catch the restarted mysqld: {unheld_story}"
    );
    // Nothing of the lab remains: containers, their conmon processes, mounts, loop devices.
    drop_and_check_nothing_left(lab, LEFTOVER_LIMIT)
        .await
        .unwrap_or_else(|left| panic!("the lab left behind:\n  {}", left.join("\n  ")));
}
