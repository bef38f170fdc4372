//! The crash-consistency soak, short: two online snapshots of a replica applying
//! multi-statement transactions, each recovered, checked against its own binlog position,
//! caught up and compared with the primary. `make soak-lab SOAK=2h` is the long version.
//! Fakes: Kubernetes API, vtctld, mysqlctld, CSI driver. Needs root, Podman and btrfs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use vtsnap_lab::shard::{LEFTOVER_LIMIT, Lab, LabOptions, drop_and_check_nothing_left};
use vtsnap_lab::soak::{ACCOUNTS, OPENING_BALANCE, run_soak};
use vtsnap_lab::timeline::Timeline;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn online_snapshots_under_transactions_recover_consistent_with_their_gtid_position() {
    let timeline = Timeline::new(false);
    let mut lab = Lab::start(
        LabOptions {
            volume_bytes: 4 << 30,
            seed_rows: 1_000,
            cut_delay: Duration::from_millis(500),
            upload_delay: Duration::from_millis(300),
            ..LabOptions::default()
        },
        timeline.clone(),
    )
    .await;
    let report = run_soak(&lab, Duration::ZERO, 2, 2).await;
    lab.stop_node().await;
    let tl = timeline.render();
    assert_eq!(report.rounds.len(), 2);
    for r in &report.rounds {
        assert!(
            r.ledger_rows > 0,
            "round {}: the snapshot caught no transfer\n{tl}",
            r.round
        );
        assert_eq!(
            r.total_balance,
            ACCOUNTS * OPENING_BALANCE,
            "round {}: money lost\n{tl}",
            r.round
        );
        assert_eq!(
            r.ledger_rows, r.binlog_transactions,
            "round {}: data and gtid_binlog_pos disagree\n{tl}",
            r.round
        );
        assert!(r.ok(), "round {r:?}\n{tl}");
    }
    assert!(report.all_ok());
    // Nothing of the lab remains: containers, their conmon processes, mounts, loop devices.
    drop_and_check_nothing_left(lab, LEFTOVER_LIMIT)
        .await
        .unwrap_or_else(|left| panic!("the lab left behind:\n  {}", left.join("\n  ")));
}
