//! The step, undo and outcome names of the JSON line and the metrics' labels: spelled out,
//! and the same in both (the metrics use `as_str`, the JSON line serde).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use vtsnap_snapshot::run::{Outcome, Step, Undo};

#[test]
fn names_are_the_documented_ones_in_the_json_line_and_the_metrics() {
    let steps = [
        (Step::CheckOnlinePreconditions, "check-online-preconditions"),
        (Step::Fence, "fence"),
        (Step::ProbeLayout, "probe-layout"),
        (Step::Drain, "drain"),
        (Step::StopReplication, "stop-replication"),
        (Step::RecordPosition, "record-position"),
        (Step::StopMysqld, "stop-mysqld"),
        (Step::HoldMysqld, "hold-mysqld"),
        (Step::Fsfreeze, "fsfreeze"),
        (Step::CreateSnapshot, "create-snapshot"),
        (Step::WaitForCut, "wait-for-cut"),
        (Step::WaitForReady, "wait-for-ready"),
    ];
    for (s, name) in steps {
        assert_eq!(s.as_str(), name);
        assert_eq!(serde_json::to_value(s).unwrap(), json!(name));
    }
    let undos = [
        (Undo::ReleaseNode, "release-node"),
        (Undo::StartReplication, "start-replication"),
        (Undo::RestoreType, "restore-type"),
        (Undo::Unfence, "unfence"),
    ];
    for (u, name) in undos {
        assert_eq!(u.as_str(), name);
        assert_eq!(serde_json::to_value(u).unwrap(), json!(name));
    }
    let outcomes = [
        (Outcome::Done, "done"),
        (Outcome::Failed, "failed"),
        (
            Outcome::FailedUnfenceIncomplete,
            "failed-unfence-incomplete",
        ),
        (Outcome::Usage, "usage"),
        (Outcome::Refused, "refused"),
    ];
    for (o, name) in outcomes {
        assert_eq!(o.as_str(), name);
        assert_eq!(serde_json::to_value(o).unwrap(), json!(name));
    }
}
