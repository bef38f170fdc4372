//! What vtsnap did not write is refused: a layout, a position or a source claim it never
//! writes; and times that cannot be are found.

use serde_json::json;

use super::tests::complete;
use super::*;

fn read_with(f: impl FnOnce(&mut Value)) -> Result<VolumeSnapshot, ReadError> {
    let mut o = complete();
    f(&mut o);
    VolumeSnapshot::read(&o)
}

const UUID: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";

#[test]
fn only_the_layout_vtsnap_writes_is_read() {
    for bad in ["2", "", "1 ", "v1"] {
        let e = read_with(|o| o["metadata"]["annotations"][ANN_LAYOUT] = json!(bad)).unwrap_err();
        assert!(matches!(e, ReadError::Layout { .. }), "{bad:?}: {e}");
        assert_eq!(e.field(), ANN_LAYOUT);
        assert!(e.to_string().contains("only 1"), "{e}");
    }
    let s = read_with(|o| {
        o["metadata"]["annotations"]
            .as_object_mut()
            .unwrap()
            .remove(ANN_LAYOUT);
    })
    .unwrap();
    assert_eq!(s.layout, None);
}

#[test]
fn a_position_must_be_a_gtid_set_of_the_recorded_flavor() {
    for key in [ANN_GTID_EXECUTED, ANN_GTID_LOWER_BOUND] {
        for bad in [
            "garbage",
            "MariaDB/0-1",
            "FilePos/binlog.000001:4",
            "MariaDB/x-1-2",
        ] {
            let e = read_with(|o| o["metadata"]["annotations"][key] = json!(bad)).unwrap_err();
            assert!(matches!(e, ReadError::Gtid { .. }), "{key} {bad:?}: {e}");
            assert_eq!(e.field(), key);
        }
        // A MySQL position on a snapshot that records MariaDB.
        let mysql = format!("MySQL56/{UUID}:1-5");
        let e = read_with(|o| o["metadata"]["annotations"][key] = json!(mysql)).unwrap_err();
        assert!(matches!(e, ReadError::GtidFlavor { .. }), "{e}");
        assert!(
            e.to_string()
                .contains("is a MySQL56 position, but vtsnap.io/mysql-flavor is mariadb"),
            "{e}"
        );
        // Recorded as MySQL, it reads.
        let s = read_with(|o| {
            o["metadata"]["annotations"][ANN_GTID_EXECUTED] = json!(mysql);
            o["metadata"]["annotations"][key] = json!(mysql);
            o["metadata"]["annotations"][ANN_MYSQL_FLAVOR] = json!("mysql");
        })
        .unwrap();
        assert!(s.gtid_executed.is_some() || s.gtid_lower_bound.is_some());
        // A flavor vtsnap does not know cannot be checked against: the set itself is.
        let s = read_with(|o| {
            o["metadata"]["annotations"][key] = json!(mysql);
            o["metadata"]["annotations"][ANN_MYSQL_FLAVOR] = json!("percona");
        })
        .unwrap();
        assert_eq!(s.mysql_flavor.as_deref(), Some("percona"));
    }
}

#[test]
fn the_source_claim_is_read_and_must_agree_with_the_annotation() {
    let e = read_with(|o| o["spec"]["source"]["persistentVolumeClaimName"] = json!("pvc-9"))
        .unwrap_err();
    assert!(matches!(e, ReadError::Contradiction { .. }), "{e}");
    assert_eq!(e.field(), SOURCE_CLAIM);
    assert!(
        e.to_string()
            .contains("\"pvc-9\" differs from vtsnap.io/source-pvc \"pvc-1\""),
        "{e}"
    );
    for bad in [json!(""), json!(7)] {
        let e = read_with(|o| o["spec"]["source"]["persistentVolumeClaimName"] = bad.clone())
            .unwrap_err();
        assert!(matches!(e, ReadError::Malformed { .. }), "{bad}: {e}");
    }
    let s = read_with(|o| {
        o.as_object_mut().unwrap().remove("spec");
    })
    .unwrap();
    assert_eq!(s.source_claim, None);
    // Without the annotation, the claim alone is read.
    let s = read_with(|o| {
        o["metadata"]["annotations"]
            .as_object_mut()
            .unwrap()
            .remove(ANN_SOURCE_PVC);
    })
    .unwrap();
    assert_eq!(s.source_claim.as_deref(), Some("pvc-1"));
}

#[test]
fn a_snapshot_name_with_control_characters_is_escaped_in_errors() {
    let e = read_with(|o| {
        o["metadata"]["name"] = json!("s\u{1b}[2J");
        o["metadata"]["annotations"][ANN_LAYOUT] = json!("9");
    })
    .unwrap_err();
    let text = e.to_string();
    assert!(!text.contains('\u{1b}'), "{text:?}");
    assert!(text.contains("vitess/s\\u{1b}[2J"), "{text}");
}

/// `complete()` with its four times set (`None`: removed).
fn timed(
    created: &str,
    taken: Option<&str>,
    cut: Option<&str>,
    ready: Option<&str>,
) -> VolumeSnapshot {
    read_with(|o| {
        o["metadata"]["creationTimestamp"] = json!(created);
        let ann = o["metadata"]["annotations"].as_object_mut().unwrap();
        for (k, v) in [(ANN_CUT_TIME, cut), (ANN_READY_TIME, ready)] {
            match v {
                Some(v) => ann.insert(k.into(), json!(v)),
                None => ann.remove(k),
            };
        }
        match taken {
            Some(t) => o["status"]["creationTime"] = json!(t),
            None => {
                o["status"].as_object_mut().unwrap().remove("creationTime");
            }
        }
    })
    .unwrap()
}

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

#[test]
fn a_time_in_the_future_beyond_the_clock_skew_is_impossible() {
    let s = timed(
        "2026-12-01T12:00:00Z",
        Some("2026-12-01T12:00:01Z"),
        Some("2026-12-01T12:00:02Z"),
        Some("2026-12-01T12:10:00Z"),
    );
    assert_eq!(s.times().len(), 4);
    // Exactly the skew ahead is clock skew.
    assert_eq!(s.impossible_time(ts("2026-12-01T12:05:00Z")), None);
    let now = ts("2026-12-01T12:04:59Z");
    assert_eq!(
        s.impossible_time(now),
        Some(TimeProblem::InTheFuture {
            field: ANN_READY_TIME,
            at: ts("2026-12-01T12:10:00Z"),
            now
        })
    );
    // A cut a day ahead (and nothing else recorded but the creation).
    let s = timed(
        "2026-12-01T12:00:00Z",
        None,
        Some("2026-12-02T12:00:00Z"),
        None,
    );
    let p = s.impossible_time(ts("2026-12-01T13:00:00Z")).unwrap();
    assert_eq!(
        p.to_string(),
        "vtsnap.io/cut-time 2026-12-02T12:00:00Z is in the future (now is 2026-12-01T13:00:00Z)"
    );
    // Each field is checked, the creation and the snapshotter's time too.
    let s = timed("2026-12-02T12:00:00Z", None, None, None);
    assert!(matches!(
        s.impossible_time(ts("2026-12-01T13:00:00Z")),
        Some(TimeProblem::InTheFuture { field: CREATED, .. })
    ));
    let s = timed(
        "2026-12-01T12:00:00Z",
        Some("2026-12-02T12:00:00Z"),
        None,
        None,
    );
    assert!(matches!(
        s.impossible_time(ts("2026-12-01T13:00:00Z")),
        Some(TimeProblem::InTheFuture {
            field: STATUS_CREATION_TIME,
            ..
        })
    ));
}

#[test]
fn a_time_before_one_that_must_precede_it_is_impossible() {
    let now = ts("2026-12-02T00:00:00Z");
    // The cut exactly the skew before the creation: clock skew; one second more is not.
    let ok = timed(
        "2026-12-01T12:05:00Z",
        None,
        Some("2026-12-01T12:00:00Z"),
        None,
    );
    assert_eq!(ok.impossible_time(now), None);
    let bad = timed(
        "2026-12-01T12:05:01Z",
        None,
        Some("2026-12-01T12:00:00Z"),
        None,
    );
    assert_eq!(
        bad.impossible_time(now),
        Some(TimeProblem::OutOfOrder {
            field: ANN_CUT_TIME,
            at: ts("2026-12-01T12:00:00Z"),
            earlier: CREATED,
            earlier_at: ts("2026-12-01T12:05:01Z"),
        })
    );
    // Ready before the cut; the snapshotter's time before the creation.
    let bad = timed(
        "2026-12-01T12:00:00Z",
        None,
        Some("2026-12-01T13:00:00Z"),
        Some("2026-12-01T12:30:00Z"),
    );
    assert!(matches!(
        bad.impossible_time(now),
        Some(TimeProblem::OutOfOrder {
            field: ANN_READY_TIME,
            earlier: ANN_CUT_TIME,
            ..
        })
    ));
    let bad = timed(
        "2026-12-01T12:00:00Z",
        Some("2026-11-01T12:00:00Z"),
        None,
        None,
    );
    let p = bad.impossible_time(now).unwrap();
    assert_eq!(
        p.to_string(),
        "status.creationTime 2026-11-01T12:00:00Z is before metadata.creationTimestamp 2026-12-01T12:00:00Z"
    );
    // The fixture's own times are fine.
    assert_eq!(complete_read().impossible_time(now), None);
}

fn complete_read() -> VolumeSnapshot {
    VolumeSnapshot::read(&complete()).unwrap()
}

/// Round three: an unreadable record counts as none and never strands its snapshot (the
/// GC, the webhook, `status` and a new drill all read the snapshot); a readable one
/// counts only for the snapshot it names, after its cut.
#[test]
fn a_drill_record_binds_to_its_snapshot_and_an_unreadable_one_counts_as_none() {
    use crate::snapshot::{ANN_DRILL, Discounted, DrillResult};
    let now: Timestamp = "2026-12-04T12:00:00Z".parse().unwrap();
    let with_uid = |o: &mut Value, record: &str| {
        o["metadata"]["uid"] = json!("snap-uid-1");
        o["metadata"]["annotations"][ANN_DRILL] = json!(record);
    };
    let s = read_with(|o| {
        with_uid(
            o,
            r#"{"result":"failed","at":"2026-12-03T10:00:00Z","snapshotUid":"snap-uid-1","cut":"2026-11-29T13:05:10Z","reason":"table shop.t1 is corrupt"}"#,
        );
    })
    .unwrap();
    assert_eq!(s.uid.as_deref(), Some("snap-uid-1"));
    let d = s.drill(now).unwrap().unwrap();
    assert_eq!(d.result, DrillResult::Failed);
    assert_eq!(d.reason.as_deref(), Some("table shop.t1 is corrupt"));
    assert_eq!(s.counted_drill(now), Some(d));
    // What a decider keeps judges the same way.
    let seen = s.drill_seen().unwrap();
    assert_eq!(seen.standing(now), Ok(d));
    assert!(!seen.passed(now));
    // Made for another snapshot, or the round-three record dated 2020 with no binding.
    for (record, want) in [
        (
            r#"{"result":"passed","at":"2026-12-01T00:00:00Z","snapshotUid":"another","cut":"2026-11-29T13:05:10Z"}"#,
            "another snapshot",
        ),
        (
            r#"{"result":"passed","at":"2020-01-01T00:00:00Z"}"#,
            "missing field `snapshotUid`",
        ),
        ("passed", "is not a drill record"),
        (
            r#"{"result":"failed","at":"2026-12-03T10:00:00Z"}"#,
            "missing field",
        ),
    ] {
        let s = read_with(|o| with_uid(o, record)).unwrap();
        let why = s.drill(now).unwrap().unwrap_err();
        assert!(why.to_string().contains(want), "{record}: {why}");
        assert!(s.counted_drill(now).is_none());
    }
    // A snapshot without a UID (a dump that left it out) binds no record.
    let s = read_with(|o| {
        o["metadata"]["annotations"][ANN_DRILL] = json!(
            r#"{"result":"passed","at":"2026-12-01T00:00:00Z","snapshotUid":"snap-uid-1","cut":"2026-11-29T13:05:10Z"}"#
        );
    })
    .unwrap();
    assert_eq!(s.drill(now), Some(Err(Discounted::SnapshotUnbound)));
    // No record at all.
    assert_eq!(read_with(|_| {}).unwrap().drill(now), None);
    // Not a string is still a malformed annotation map entry, as for every annotation.
    let e = read_with(|o| o["metadata"]["annotations"][ANN_DRILL] = json!(true)).unwrap_err();
    assert!(matches!(e, ReadError::Malformed { .. }), "{e}");
    for bad in [json!(7), json!("")] {
        let e = read_with(|o| o["metadata"]["uid"] = bad.clone()).unwrap_err();
        assert_eq!(e.field(), "metadata.uid", "{bad}");
    }
}

/// The archive job's window record reads like a drill record: bound to its snapshot,
/// an unreadable one counts as none and never makes the snapshot unreadable.
#[test]
fn a_window_record_binds_to_its_snapshot_and_an_unreadable_one_counts_as_none() {
    use crate::pitr::record::{ANN_PITR_WINDOW, WindowDiscounted};
    let now: Timestamp = "2026-12-04T12:00:00Z".parse().unwrap();
    let with = |record: &str| {
        let record = record.to_owned();
        read_with(move |o| {
            o["metadata"]["uid"] = json!("snap-uid-1");
            o["metadata"]["annotations"][ANN_PITR_WINDOW] = json!(record);
        })
        .unwrap()
    };
    let s = with(
        r#"{"spans":[{"from":"2026-11-29T13:05:10Z","to":"2026-12-04T11:58:00Z"}],"checked":"2026-12-04T11:59:00Z","snapshotUid":"snap-uid-1","cut":"2026-11-29T13:05:10Z"}"#,
    );
    let w = s.pitr_window(now).unwrap().unwrap();
    assert_eq!(w.end(), Some("2026-12-04T11:58:00Z".parse().unwrap()));
    let s = with(
        r#"{"spans":[],"checked":"2026-12-04T11:59:00Z","snapshotUid":"another","cut":"2026-11-29T13:05:10Z"}"#,
    );
    assert_eq!(
        s.pitr_window(now),
        Some(Err(WindowDiscounted::OtherSnapshot))
    );
    let s = with("{}");
    let why = s.pitr_window(now).unwrap().unwrap_err();
    assert!(why.to_string().contains("is not a window record"), "{why}");
    assert_eq!(read_with(|_| {}).unwrap().pitr_window(now), None);
    let e = read_with(|o| o["metadata"]["annotations"][ANN_PITR_WINDOW] = json!(1)).unwrap_err();
    assert!(matches!(e, ReadError::Malformed { .. }), "{e}");
}
