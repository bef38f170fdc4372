use std::collections::BTreeMap;

use serde_json::json;

use super::*;
use crate::shard::ShardRef;
use crate::snapshot::{ANN_GTID_EXECUTED, NewSnapshot, build};

/// What `build` writes, then what the API server and the snapshot job add.
pub(super) fn complete() -> Value {
    let shard = ShardRef {
        cluster: "example".into(),
        namespace: "vitess".into(),
        keyspace: "commerce".into(),
        shard: "-80".parse().unwrap(),
    };
    let none = BTreeMap::new();
    let mut o = build(&NewSnapshot {
        shard: &shard,
        name: "example-commerce-x-80-20261129130509".into(),
        class: None,
        source_pvc: "pvc-1",
        source_tablet: "zone1-0000000101",
        source_uid: 101,
        source_node: "node-2",
        mode: "cold",
        gtid: (ANN_GTID_EXECUTED, "MariaDB/0-1-100"),
        mysql_version: "10.11.18",
        mysql_flavor: "mariadb",
        extra_labels: &none,
        extra_annotations: &none,
        owner: Some(("example", "uid-1")),
    });
    let m = &mut o["metadata"];
    m["creationTimestamp"] = json!("2026-11-29T13:05:09Z");
    m["labels"][LABEL_PHASE] = json!("ready");
    m["annotations"][ANN_CUT_TIME] = json!("2026-11-29T13:05:10.5Z");
    m["annotations"][ANN_READY_TIME] = json!("2026-11-29T13:06:00Z");
    o["status"] = json!({"boundVolumeSnapshotContentName": "c", "creationTime": "2026-11-29T13:05:10Z",
                         "readyToUse": true, "restoreSize": "10Gi"});
    o
}

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

#[test]
fn reads_every_field_build_writes() {
    let s = VolumeSnapshot::read(&complete()).unwrap();
    assert_eq!(
        s,
        VolumeSnapshot {
            namespace: "vitess".into(),
            name: "example-commerce-x-80-20261129130509".into(),
            created: Some(ts("2026-11-29T13:05:09Z")),
            cluster: "example".into(),
            keyspace: "commerce".into(),
            shard: "-80".parse().unwrap(),
            tablet_uid: Some(TabletUid::new(101)),
            mode: Some(Mode::Cold),
            phase: Some(Phase::Ready),
            gtid_executed: Some("MariaDB/0-1-100".into()),
            gtid_lower_bound: None,
            mysql_version: Some("10.11.18".into()),
            mysql_flavor: Some("mariadb".into()),
            source_tablet: Some(TabletAlias::new("zone1", 101)),
            source_pvc: Some("pvc-1".into()),
            source_claim: Some("pvc-1".into()),
            source_node: Some("node-2".into()),
            layout: Some(Layout::V1),
            cut_time: Some(ts("2026-11-29T13:05:10.5Z")),
            ready_time: Some(ts("2026-11-29T13:06:00Z")),
            status: SnapshotStatus {
                bound_content: Some("c".into()),
                creation_time: Some("2026-11-29T13:05:10Z".into()),
                ready_to_use: true,
                restore_size: Some("10Gi".into()),
                error: None,
            },
            cluster_owners: vec!["uid-1".into()],
            unusable: None,
            drill_record: None,
            pitr_window: None,
            uid: None,
            reprovisioned: Default::default(),
        }
    );
    assert!(VolumeSnapshot::is_vtsnaps(&complete()));
}

#[test]
fn absent_optional_fields_are_none() {
    let o = json!({"metadata": {"name": "s", "namespace": "vitess", "labels": {
        LABEL_CLUSTER: "example", LABEL_KEYSPACE: "commerce", LABEL_SHARD: "x-x"}}});
    let s = VolumeSnapshot::read(&o).unwrap();
    assert_eq!(s.shard, "-".parse().unwrap());
    assert_eq!(
        (s.created, s.tablet_uid, s.mode, s.phase),
        (None, None, None, None)
    );
    assert_eq!(
        (
            s.gtid_executed,
            s.gtid_lower_bound,
            s.mysql_version,
            s.mysql_flavor
        ),
        (None, None, None, None)
    );
    assert_eq!(
        (s.source_tablet, s.source_pvc, s.source_node),
        (None, None, None)
    );
    assert_eq!((s.cut_time, s.ready_time), (None, None));
    assert_eq!(s.status, SnapshotStatus::default());
    assert!(s.cluster_owners.is_empty());
    assert!(!VolumeSnapshot::is_vtsnaps(&o));
}

#[test]
fn other_owners_are_not_cluster_owners() {
    let mut o = complete();
    o["metadata"]["ownerReferences"] = json!([{"kind": "Job", "name": "j"}]);
    assert!(VolumeSnapshot::read(&o).unwrap().cluster_owners.is_empty());
}

#[test]
fn a_missing_identity_is_an_error_naming_the_field() {
    for key in [LABEL_CLUSTER, LABEL_KEYSPACE, LABEL_SHARD] {
        let mut o = complete();
        o["metadata"]["labels"].as_object_mut().unwrap().remove(key);
        let e = VolumeSnapshot::read(&o).unwrap_err();
        assert!(matches!(e, ReadError::Missing { .. }), "{key}: {e}");
        assert_eq!(e.field(), key);
        assert!(
            e.to_string()
                .contains("vitess/example-commerce-x-80-20261129130509"),
            "{e}"
        );
    }
    let mut o = complete();
    o["metadata"]["name"] = json!(null);
    assert!(matches!(VolumeSnapshot::read(&o), Err(ReadError::NoName)));
    let mut o = complete();
    o["metadata"]["namespace"] = json!(null);
    let e = VolumeSnapshot::read(&o).unwrap_err();
    assert_eq!(
        (e.field(), e.to_string().contains("example-commerce")),
        (NAMESPACE, true)
    );
}

/// Sets `metadata[section][key]` (or `metadata[key]` when `section` is empty).
fn with(section: &str, key: &str, v: Value) -> Value {
    let mut o = complete();
    if section.is_empty() {
        o["metadata"][key] = v;
    } else {
        o["metadata"][section][key] = v;
    }
    o
}

type IsVariant = fn(&ReadError) -> bool;

#[test]
fn each_malformed_field_is_its_own_named_error() {
    let cases: Vec<(Value, &str, IsVariant)> = vec![
        (
            with("labels", LABEL_SHARD, json!("-80")),
            LABEL_SHARD,
            |e| {
                matches!(
                    e,
                    ReadError::Shard {
                        source: SafeNameError::EmptyBound(_),
                        ..
                    }
                )
            },
        ),
        (
            with("labels", LABEL_SHARD, json!("x-8G")),
            LABEL_SHARD,
            |e| matches!(e, ReadError::Shard { .. }),
        ),
        (
            with("labels", LABEL_CLUSTER, json!("")),
            LABEL_CLUSTER,
            |e| matches!(e, ReadError::Malformed { .. }),
        ),
        (
            with("labels", LABEL_TABLET_UID, json!("1o1")),
            LABEL_TABLET_UID,
            |e| {
                matches!(
                    e,
                    ReadError::TabletUid {
                        source: TabletUidError::NotDecimal(_),
                        ..
                    }
                )
            },
        ),
        (
            with("labels", LABEL_MODE, json!("warm")),
            LABEL_MODE,
            |e| matches!(e, ReadError::Mode { value, .. } if value == "warm"),
        ),
        (
            with("labels", LABEL_PHASE, json!("Ready")),
            LABEL_PHASE,
            |e| matches!(e, ReadError::Phase { value, .. } if value == "Ready"),
        ),
        (
            with("", "creationTimestamp", json!("yesterday")),
            CREATED,
            |e| matches!(e, ReadError::Time { value, .. } if value == "yesterday"),
        ),
        (
            with("", "creationTimestamp", json!(1_790_000_000)),
            CREATED,
            |e| matches!(e, ReadError::Malformed { .. }),
        ),
        (
            with("annotations", ANN_CUT_TIME, json!("2026-13-01T00:00:00Z")),
            ANN_CUT_TIME,
            |e| matches!(e, ReadError::Time { .. }),
        ),
        (
            with("annotations", ANN_READY_TIME, json!("")),
            ANN_READY_TIME,
            |e| matches!(e, ReadError::Time { .. }),
        ),
        (
            with("annotations", ANN_SOURCE_TABLET, json!("0000000101")),
            ANN_SOURCE_TABLET,
            |e| matches!(e, ReadError::TabletAlias { .. }),
        ),
        (
            with("annotations", ANN_GTID_EXECUTED, json!(100)),
            ANN_GTID_EXECUTED,
            |e| matches!(e, ReadError::Malformed { .. }),
        ),
        (
            with("", "labels", json!(["not", "a", "map"])),
            LABELS,
            |e| matches!(e, ReadError::Malformed { .. }),
        ),
        (with("", "annotations", json!("nope")), ANNOTATIONS, |e| {
            matches!(e, ReadError::Malformed { .. })
        }),
        (
            with("", "ownerReferences", json!({"kind": "VitessCluster"})),
            OWNERS,
            |e| matches!(e, ReadError::Malformed { .. }),
        ),
        (
            with(
                "",
                "ownerReferences",
                json!([{"kind": "VitessCluster", "name": "example"}]),
            ),
            OWNERS,
            |e| matches!(e, ReadError::Malformed { .. }),
        ),
    ];
    for (o, field, is_variant) in cases {
        let e = VolumeSnapshot::read(&o).unwrap_err();
        assert_eq!(e.field(), field, "{e}");
        assert!(is_variant(&e), "{field}: {e:?}");
        let text = e.to_string();
        assert!(
            text.contains("VolumeSnapshot vitess/example-commerce-x-80-20261129130509")
                && text.contains(field),
            "{text}"
        );
    }
}

/// "Ready" decides what the GC may delete: a status field of the wrong type is an error
/// naming it, never "not ready".
#[test]
fn a_status_of_the_wrong_shape_is_an_error_not_unready() {
    let with = |field: &str, v: Value| {
        let mut o = complete();
        o["status"][field] = v;
        o
    };
    let mut not_an_object = complete();
    not_an_object["status"] = json!("ready");
    let cases = [
        (with("readyToUse", json!("true")), READY_TO_USE),
        (with("readyToUse", json!(1)), READY_TO_USE),
        (
            with("boundVolumeSnapshotContentName", json!(7)),
            BOUND_CONTENT,
        ),
        (
            with("boundVolumeSnapshotContentName", json!("")),
            BOUND_CONTENT,
        ),
        (with("creationTime", json!(0)), STATUS_CREATION_TIME),
        (
            with("creationTime", json!("yesterday")),
            STATUS_CREATION_TIME,
        ),
        (with("error", json!("boom")), STATUS_ERROR),
        (not_an_object, STATUS),
    ];
    for (o, field) in cases {
        let e = VolumeSnapshot::read(&o).unwrap_err();
        assert_eq!(e.field(), field, "{e}");
        assert!(e.to_string().contains(field), "{e}");
    }
    // Booleans, nulls and absent fields read as before.
    for (field, v, ready) in [
        ("readyToUse", json!(true), true),
        ("readyToUse", json!(false), false),
        ("readyToUse", json!(null), false),
        ("error", json!(null), true),
        ("error", json!({"message": "retrying"}), false),
    ] {
        let s = VolumeSnapshot::read(&with(field, v)).unwrap();
        assert_eq!(s.status.is_ready(), ready, "{field}");
    }
    let mut no_status = complete();
    no_status.as_object_mut().unwrap().remove("status");
    assert!(!VolumeSnapshot::read(&no_status).unwrap().status.is_ready());
}
