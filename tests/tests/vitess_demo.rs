//! `make demo`'s story on real Vitess (Vitess 24, MySQL 9.7), as a test: vtsnap's own
//! programs through the real vtctld and mysqlctld, the real node helper holding the real
//! mysqld container, VTOrc watching; in-memory Kubernetes API and CSI driver (btrfs).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use vtsnap_lab::timeline::Timeline;
use vtsnap_lab::vitess_demo::run_vitess_demo;
use vtsnap_lab::vitess_lab::VitessLab;

#[tokio::test]
async fn the_demo_on_real_vitess_restores_both_snapshots_exactly_and_in_sync() {
    let mut lab = VitessLab::start(Timeline::new(false)).await;
    let r = run_vitess_demo(&mut lab).await;
    let line = r.summary();
    eprintln!("{}\n{line}", lab.timeline.render());
    // the cold cut: the GTID the run recorded is exactly what its snapshot holds
    assert_eq!(r.cold.recorded_gtid, r.cold.restored_gtid, "{line}");
    // online: the recorded position is a lower bound of what the snapshot holds
    assert!(!r.online.recorded_gtid.is_empty(), "{line}");
    for s in [&r.cold, &r.online] {
        assert_eq!(
            s.drill.result,
            vtsnap_core::snapshot::DrillResult::Passed,
            "the {} snapshot's drill on MySQL 9.7: {:?}",
            s.mode,
            s.drill
        );
        assert!(s.checksum_match, "{} tablet's checksum: {line}", s.mode);
        assert!(s.server_uuid_new, "{} tablet's server_uuid: {line}", s.mode);
        assert!(
            s.writes_during_run > 0,
            "{} run stalled the primary: {line}",
            s.mode
        );
    }
    assert_eq!(r.gc_exit_code, 0, "{line}");
    assert_eq!(r.snapshots_kept.len(), 1, "retention maxCount 1: {line}");
    assert_eq!(r.snapshots_deleted.len(), 1, "{line}");
    assert!(r.ok());
    assert_eq!(line["checksum_match"], true);
}
