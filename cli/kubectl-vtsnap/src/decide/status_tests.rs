//! The status of a protected shard has no problem; each way a shard is unprotected is
//! named, and such shards come first.
#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};

use vtsnap_gc::decide::{CoverageState, ShardCoverage};

use super::*;
use crate::observe::read::{StatusObjects, status_seen};

/// The objects as the API gives them, read as `observe` reads them.
fn read(objects: &StatusObjects) -> Seen {
    status_seen(objects, Vec::new())
}

fn status_of(config: &Config, objects: &StatusObjects) -> Status {
    status(config, &read(objects), now())
}

fn now() -> Timestamp {
    "2026-12-01T12:00:00Z".parse().unwrap()
}

fn config() -> Config {
    Config::from_yaml("clusters:\n- name: example\n  namespace: vitess\n").unwrap()
}

fn snapshot(name: &str, shard: &str, created: &str, phase: &str) -> Value {
    json!({"kind": "VolumeSnapshot", "metadata": {"name": name, "namespace": "vitess",
        "creationTimestamp": created, "labels": {
        "app.kubernetes.io/managed-by": "vtsnap", "vtsnap.io/cluster": "example",
        "vtsnap.io/keyspace": "commerce", "vtsnap.io/shard": shard, "vtsnap.io/phase": phase,
        "vtsnap.io/mode": "cold"}}, "spec": {"source": {"persistentVolumeClaimName": "p"}}})
}

fn cron(shard: &str) -> Value {
    json!({"metadata": {"name": format!("vtsnap-snap-example-commerce-{shard}"), "namespace": "vtsnap",
        "labels": {"vtsnap.io/cluster": "example", "vtsnap.io/keyspace": "commerce", "vtsnap.io/shard": shard}},
        "spec": {"schedule": "0 */6 * * *"}})
}

fn job(shard: &str, name: &str, condition: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": "vtsnap", "creationTimestamp": "2026-12-01T11:00:00Z",
        "labels": {"vtsnap.io/cluster": "example", "vtsnap.io/keyspace": "commerce", "vtsnap.io/shard": shard}},
        "status": {"conditions": [{"type": condition, "status": "True"}]}})
}

#[test]
fn a_protected_shard_has_no_problem_and_an_unprotected_one_comes_first() {
    let seen = StatusObjects {
        snapshots: vec![
            snapshot("a-1", "x-80", "2026-12-01T10:00:00Z", "ready"),
            snapshot("a-2", "x-80", "2026-12-01T11:00:00Z", "cut"),
            snapshot("b-1", "80-x", "2026-12-01T10:00:00Z", "failed"),
        ],
        cronjobs: vec![cron("x-80"), cron("80-x")],
        jobs: vec![job("x-80", "j-1", "Complete"), job("80-x", "j-2", "Failed")],
        ..StatusObjects::default()
    };
    let st = status_of(&config(), &seen);
    assert_eq!(st.shards.len(), 2);
    let (bad, good) = (&st.shards[0], &st.shards[1]);
    assert_eq!(good.shard.shard.to_string(), "-80");
    assert!(good.problems.is_empty(), "{good:?}");
    let newest = good.newest.as_ref().unwrap();
    assert_eq!((newest.name.as_str(), newest.age_seconds), ("a-1", 7200));
    assert_eq!(good.last_run.as_ref().unwrap().result, "succeeded");
    assert_eq!(bad.shard.shard.to_string(), "80-");
    assert_eq!(
        bad.problems,
        ["no ready snapshot", "the last snapshot Job j-2 failed"]
    );
}

#[test]
fn an_expired_fence_a_missing_cronjob_and_an_old_snapshot_are_named() {
    let seen = StatusObjects {
        snapshots: vec![snapshot("a-1", "x-80", "2026-11-20T10:00:00Z", "ready")],
        leases: vec![
            json!({"metadata": {"name": lease_name("example", "commerce", "x-80"), "namespace": "vitess"},
            "spec": {"holderIdentity": "job-7", "acquireTime": "2026-12-01T11:00:00Z",
                     "renewTime": "2026-12-01T11:00:00Z", "leaseDurationSeconds": 30}}),
        ],
        tablet_pods: vec![json!({"spec": {"nodeName": "n1"}})],
        ..StatusObjects::default()
    };
    let st = status_of(&config(), &seen);
    let p = &st.shards[0].problems;
    assert!(
        p.iter().any(|x| x.contains("past restore.maxSnapshotAge")),
        "{p:?}"
    );
    assert!(p.iter().any(|x| x == "no snapshot CronJob"), "{p:?}");
    assert!(
        p.iter().any(|x| x.contains("held by job-7 expired")),
        "{p:?}"
    );
    assert_eq!(
        st.nodes,
        [NodeStatus {
            node: "n1".into(),
            tablets: 1,
            helper_ready: false
        }]
    );
}

#[test]
fn objects_of_clusters_not_configured_are_left_out() {
    let mut other = snapshot("o-1", "x-80", "2026-12-01T10:00:00Z", "ready");
    other["metadata"]["labels"]["vtsnap.io/cluster"] = json!("other");
    let seen = StatusObjects {
        snapshots: vec![other],
        ..StatusObjects::default()
    };
    assert!(status_of(&config(), &seen).shards.is_empty());
}

#[test]
fn a_shard_none_of_whose_snapshots_can_catch_up_is_a_problem() {
    let coverage = |state| ShardCoverage {
        namespace: "vitess".into(),
        cluster: "example".into(),
        keyspace: "commerce".into(),
        shard: "-80".into(),
        state,
    };
    let seen = |state| Seen {
        coverage: vec![coverage(state)],
        ..read(&StatusObjects {
            snapshots: vec![snapshot("a-1", "x-80", "2026-12-01T10:00:00Z", "ready")],
            cronjobs: vec![cron("x-80")],
            ..StatusObjects::default()
        })
    };
    let none = seen(CoverageState::Known {
        newest_covered: None,
        headroom_seconds: None,
        not_covered: vec!["a-1".into()],
        warning: None,
    });
    let st = status(&config(), &none, now());
    assert_eq!(st.shards[0].coverage, Coverage::NoneCovered);
    assert!(st.shards[0].problems[0].contains("can catch up"), "{st:?}");
    let short = seen(CoverageState::Known {
        newest_covered: Some("a-1".into()),
        headroom_seconds: Some(600),
        not_covered: vec![],
        warning: Some("headroom 10m is below the snapshot interval".into()),
    });
    let st = status(&config(), &short, now());
    assert_eq!(
        st.shards[0].problems,
        ["headroom 10m is below the snapshot interval"]
    );
    // Unknown coverage is shown, not a problem in itself.
    let unknown = seen(CoverageState::Unknown {
        why: "no vtctld".into(),
    });
    let st = status(&config(), &unknown, now());
    assert!(st.shards[0].problems.is_empty(), "{st:?}");
    assert_eq!(
        st.shards[0].coverage,
        Coverage::Unknown {
            why: "no vtctld".into()
        }
    );
}

#[test]
fn the_next_run_follows_the_schedule_its_time_zone_and_suspension() {
    let with = |f: &dyn Fn(&mut Value)| {
        let mut c = cron("x-80");
        f(&mut c);
        let seen = StatusObjects {
            snapshots: vec![snapshot("a-1", "x-80", "2026-12-01T10:00:00Z", "ready")],
            cronjobs: vec![c],
            ..StatusObjects::default()
        };
        status_of(&config(), &seen).shards[0].next_run.clone()
    };
    // "0 */6 * * *" at 12:00:00 → 18:00.
    assert_eq!(
        with(&|_| {}),
        NextRun::At {
            time: "2026-12-01T18:00:00Z".into(),
            in_seconds: 6 * 3600
        }
    );
    assert_eq!(
        with(&|c| c["spec"]["suspend"] = json!(true)),
        NextRun::Never
    );
    assert_eq!(
        with(&|c| c["spec"]["schedule"] = json!("0 0 30 2 *")),
        NextRun::Never
    );
    assert!(matches!(
        with(&|c| c["spec"]["timeZone"] = json!("Mars/Olympus")),
        NextRun::Unknown { why } if why.contains("Mars/Olympus")
    ));
    assert!(matches!(
        with(&|c| c["spec"]["schedule"] = json!("61 * * * *")),
        NextRun::Unknown { why } if why.contains("minute")
    ));
    // A named zone, from the system's database: 06:00 in Berlin is 05:00 UTC in December
    // (the 18:00 and 00:00 runs there come first: 17:00 and 23:00 UTC).
    assert_eq!(
        with(&|c| c["spec"]["timeZone"] = json!("Europe/Berlin")),
        NextRun::At {
            time: "2026-12-01T17:00:00Z".into(),
            in_seconds: 5 * 3600
        }
    );
    assert!(matches!(
        with(&|c| c["spec"]["timeZone"] = json!("UTC")),
        NextRun::At {
            in_seconds: 21_600,
            ..
        }
    ));
}

#[test]
fn a_node_helper_counts_only_when_its_ready_condition_is_true() {
    let helper = |conditions: Value| json!({"metadata": {"name": "h"}, "spec": {"nodeName": "n1"}, "status": {"conditions": conditions}});
    let nodes = |h: Value| {
        let seen = StatusObjects {
            tablet_pods: vec![json!({"spec": {"nodeName": "n1"}})],
            node_helpers: vec![h],
            ..StatusObjects::default()
        };
        status_of(&config(), &seen).nodes[0].helper_ready
    };
    assert!(nodes(helper(json!([{"type": "Ready", "status": "True"}]))));
    // Scheduled but not Ready; no conditions at all.
    assert!(!nodes(helper(json!([
        {"type": "PodScheduled", "status": "True"},
        {"type": "Ready", "status": "False"}
    ]))));
    assert!(!nodes(helper(json!([]))));
}

#[test]
fn a_live_fence_is_shown_until_its_expiry_and_only_its_own_namespace_counts() {
    let lease = |ns: &str, renewed: &str| {
        json!({"metadata": {"name": lease_name("example", "commerce", "x-80"), "namespace": ns},
            "spec": {"holderIdentity": "job-8", "acquireTime": "2026-12-01T11:59:00Z",
                     "renewTime": renewed, "leaseDurationSeconds": 30}})
    };
    let fence = |leases: Vec<Value>| {
        let seen = StatusObjects {
            snapshots: vec![snapshot("a-1", "x-80", "2026-12-01T10:00:00Z", "ready")],
            cronjobs: vec![cron("x-80")],
            leases,
            ..StatusObjects::default()
        };
        status_of(&config(), &seen).shards[0].clone()
    };
    let live = fence(vec![lease("vitess", "2026-12-01T11:59:50Z")]);
    let f = live.fence.clone().unwrap();
    assert_eq!(
        (f.expires.as_str(), f.expired),
        ("2026-12-01T12:00:20Z", false)
    );
    assert!(live.problems.is_empty(), "{live:?}");
    // The same name in another namespace is another cluster's fence.
    assert_eq!(
        fence(vec![lease("elsewhere", "2026-12-01T11:59:50Z")]).fence,
        None
    );
}

#[test]
fn a_fence_expiring_now_is_not_yet_expired_and_restores_stay_with_their_shard() {
    let lease = json!({"metadata": {"name": lease_name("example", "commerce", "x-80"), "namespace": "vitess"},
        "spec": {"holderIdentity": "job-9", "acquireTime": "2026-12-01T11:59:00Z",
                 "renewTime": "2026-12-01T11:59:30Z", "leaseDurationSeconds": 30}});
    let restoring = |shard: &str| {
        json!({"metadata": {"name": format!("t-{shard}"), "namespace": "vitess",
            "labels": {"planetscale.com/component": "vttablet", "planetscale.com/cluster": "example",
                       "planetscale.com/keyspace": "commerce", "planetscale.com/shard": shard},
            "annotations": {"vtsnap.io/restored-from": "a-1"}},
            "status": {"phase": "Pending"}})
    };
    let seen = StatusObjects {
        snapshots: vec![
            snapshot("a-1", "x-80", "2026-12-01T10:00:00Z", "ready"),
            snapshot("b-1", "80-x", "2026-12-01T10:00:00Z", "ready"),
        ],
        cronjobs: vec![cron("x-80"), cron("80-x")],
        leases: vec![lease],
        tablet_pvcs: vec![restoring("x-80")],
        ..StatusObjects::default()
    };
    let st = status_of(&config(), &seen);
    let by = |shard: &str| {
        st.shards
            .iter()
            .find(|s| s.shard.shard.to_string() == shard)
            .unwrap()
    };
    assert!(!by("-80").fence.as_ref().unwrap().expired);
    assert_eq!(by("-80").restores.len(), 1);
    assert_eq!(by("-80").restores[0].phase, "Pending");
    assert!(by("80-").restores.is_empty(), "{st:?}");
}

#[test]
fn coverage_stays_with_its_shard() {
    let seen = Seen {
        coverage: vec![ShardCoverage {
            namespace: "vitess".into(),
            cluster: "example".into(),
            keyspace: "commerce".into(),
            shard: "-80".into(),
            state: CoverageState::Known {
                newest_covered: None,
                headroom_seconds: None,
                not_covered: vec!["a-1".into()],
                warning: None,
            },
        }],
        ..read(&StatusObjects {
            snapshots: vec![
                snapshot("a-1", "x-80", "2026-12-01T10:00:00Z", "ready"),
                snapshot("b-1", "80-x", "2026-12-01T10:00:00Z", "ready"),
            ],
            cronjobs: vec![cron("x-80"), cron("80-x")],
            ..StatusObjects::default()
        })
    };
    let st = status(&config(), &seen, now());
    let by = |shard: &str| {
        st.shards
            .iter()
            .find(|s| s.shard.shard.to_string() == shard)
            .unwrap()
    };
    assert_eq!(by("-80").coverage, Coverage::NoneCovered);
    assert!(
        matches!(by("80-").coverage, Coverage::Unknown { .. }),
        "{st:?}"
    );
    assert!(by("80-").problems.is_empty(), "{st:?}");
}

/// The shard's latest drill, whichever snapshot it was of; a failed one is a problem.
#[test]
fn the_last_drill_is_shown_and_a_failed_one_is_a_problem() {
    // The record names its snapshot (UID and cut), as the drill writes it.
    let with_drill = |name: &str, created: &str, drill: &str| {
        let mut s = snapshot(name, "x-80", created, "ready");
        let bound = drill.replacen(
            '{',
            &format!(r#"{{"snapshotUid":"uid-{name}","cut":"{created}","#),
            1,
        );
        s["metadata"]["uid"] = json!(format!("uid-{name}"));
        s["status"] = json!({"creationTime": created});
        s["metadata"]["annotations"] = json!({"vtsnap.io/drill": bound});
        s
    };
    let passed = r#"{"result":"passed","at":"2026-12-01T09:00:00Z","rto":{"pvcBoundMs":1000,"restoreMs":500,"mysqldReadyMs":2000}}"#;
    let failed = r#"{"result":"failed","at":"2026-12-01T11:30:00Z","reason":"table shop.orders: corrupt\u001b[2J"}"#;
    let seen = |snaps| {
        read(&StatusObjects {
            snapshots: snaps,
            cronjobs: vec![cron("x-80")],
            ..StatusObjects::default()
        })
    };
    let st = status(
        &config(),
        &seen(vec![
            with_drill("a-1", "2026-12-01T08:00:00Z", passed),
            snapshot("a-2", "x-80", "2026-12-01T10:00:00Z", "ready"),
        ]),
        now(),
    );
    let d = st.shards[0].last_drill.as_ref().unwrap();
    assert_eq!(
        (d.snapshot.as_str(), d.result, d.age_seconds, d.rto_ms),
        ("a-1", "passed", 3 * 3600, Some(3500))
    );
    assert!(
        st.shards[0].problems.is_empty(),
        "{:?}",
        st.shards[0].problems
    );
    // A later failed drill of an older snapshot is the last drill.
    let st = status(
        &config(),
        &seen(vec![
            with_drill("a-1", "2026-12-01T08:00:00Z", passed),
            with_drill("a-0", "2026-12-01T07:00:00Z", failed),
        ]),
        now(),
    );
    let d = st.shards[0].last_drill.as_ref().unwrap();
    assert_eq!((d.snapshot.as_str(), d.result), ("a-0", "failed"));
    assert_eq!(
        st.shards[0].problems,
        ["the last restore drill (a-0) failed: table shop.orders: corrupt\\u{1b}[2J"]
    );
    // Round three, item 3: a passed record dated 2099 does not hide a failure an hour
    // old (the GC and the webhook give it no weight either), nor does a record copied
    // from another snapshot.
    let future = passed.replace("2026-12-01T09:00:00Z", "2099-01-01T00:00:00Z");
    let mut copied = with_drill("a-2", "2026-12-01T10:00:00Z", passed);
    copied["metadata"]["uid"] = json!("uid-another");
    let st = status(
        &config(),
        &seen(vec![
            with_drill("a-1", "2026-12-01T08:00:00Z", &future),
            with_drill("a-0", "2026-12-01T07:00:00Z", failed),
            copied,
        ]),
        now(),
    );
    let d = st.shards[0].last_drill.as_ref().unwrap();
    assert_eq!((d.snapshot.as_str(), d.result), ("a-0", "failed"), "{d:?}");
    assert!(d.age_seconds >= 0, "{d:?}");
    // No drill: nothing shown, no problem.
    let st = status(
        &config(),
        &seen(vec![snapshot(
            "a-1",
            "x-80",
            "2026-12-01T08:00:00Z",
            "ready",
        )]),
        now(),
    );
    assert!(st.shards[0].last_drill.is_none());
}

/// Review round three, item 4: `example` in `ns-a` and `ns-b`; the one CronJob (ns-a's
/// record) was shown as ns-b's schedule too.
#[test]
fn a_cronjob_is_its_recorded_namespace_s_shard_s_only() {
    let twins = Config::from_yaml(
        "clusters:\n- name: example\n  namespace: ns-a\n- name: example\n  namespace: ns-b\n",
    )
    .unwrap();
    let in_ns = |ns: &str| {
        let mut s = snapshot(&format!("s-{ns}"), "x-x", "2026-12-01T10:00:00Z", "ready");
        s["metadata"]["namespace"] = json!(ns);
        s
    };
    let mut ours = cron("x-x");
    ours["metadata"]["annotations"] =
        json!({"vtsnap.io/schedule-shard": "ns-a/example/commerce/-"});
    let seen = StatusObjects {
        snapshots: vec![in_ns("ns-a"), in_ns("ns-b")],
        cronjobs: vec![ours.clone()],
        ..StatusObjects::default()
    };
    let st = status_of(&twins, &seen);
    let schedule_of = |ns: &str| {
        st.shards
            .iter()
            .find(|s| s.shard.namespace == ns)
            .unwrap()
            .schedule
            .clone()
    };
    assert_eq!(schedule_of("ns-a").as_deref(), Some("0 */6 * * *"));
    assert_eq!(schedule_of("ns-b"), None, "{st:?}");
    // A CronJob without a record (the chart's) is nobody's when its cluster's name is in
    // two namespaces, and its cluster's when in one.
    let seen = StatusObjects {
        cronjobs: vec![cron("x-x")],
        ..seen
    };
    let st = status_of(&twins, &seen);
    assert!(st.shards.iter().all(|s| s.schedule.is_none()), "{st:?}");
    let mut one = seen.clone();
    one.snapshots.truncate(1);
    one.snapshots[0]["metadata"]["namespace"] = json!("vitess");
    let st = status_of(&config(), &one);
    assert_eq!(st.shards[0].schedule.as_deref(), Some("0 */6 * * *"));
    // A record that names another shard than the labels: nobody's.
    ours["metadata"]["annotations"]["vtsnap.io/schedule-shard"] =
        json!("vitess/example/commerce/-80");
    one.cronjobs = vec![ours];
    let st = status_of(&config(), &one);
    assert_eq!(st.shards[0].schedule, None);
}

/// Audit item 2: a tablet restored from a snapshot again after vtsnap re-provisioned it
/// once is a problem of its shard (the GC leaves it to a person); another tablet
/// restored from the same snapshot is not.
#[test]
fn a_tablet_restored_after_it_was_reprovisioned_is_a_problem() {
    let mut marked = snapshot("a-1", "x-80", "2026-12-01T08:00:00Z", "ready");
    marked["metadata"]["annotations"] =
        json!({"vtsnap.io/reprovisioned-0000000104": "tablet zone1-0000000104 could not catch up"});
    let restored = |uid: &str| {
        json!({"metadata": {"name": format!("t-{uid}"), "namespace": "vitess",
            "labels": {"planetscale.com/component": "vttablet", "planetscale.com/cluster": "example",
                       "planetscale.com/keyspace": "commerce", "planetscale.com/shard": "x-80",
                       "planetscale.com/tablet-uid": uid},
            "annotations": {"vtsnap.io/restored-from": "a-2"}},
            "status": {"phase": "Bound"}})
    };
    // The same tablet UID in another namespace, cluster, keyspace or shard is not the
    // recorded tablet.
    let elsewhere = |at: &str, value: &str| {
        let mut p = restored("104");
        p["metadata"]["annotations"]["vtsnap.io/restored-from"] = json!(format!("from-{at}"));
        if at == "namespace" {
            p["metadata"]["namespace"] = json!(value);
        } else {
            p["metadata"]["labels"][format!("planetscale.com/{at}")] = json!(value);
        }
        p
    };
    let seen = StatusObjects {
        snapshots: vec![
            marked,
            snapshot("a-2", "x-80", "2026-12-01T10:00:00Z", "ready"),
        ],
        cronjobs: vec![cron("x-80")],
        tablet_pvcs: vec![
            restored("104"),
            restored("105"),
            elsewhere("namespace", "other"),
            elsewhere("cluster", "other"),
            elsewhere("keyspace", "customer"),
            elsewhere("shard", "80-x"),
        ],
        ..StatusObjects::default()
    };
    let st = status_of(&config(), &seen);
    let all: Vec<&String> = st
        .shards
        .iter()
        .flat_map(|s| &s.problems)
        .filter(|p| p.contains("re-provisioned it once"))
        .collect();
    assert_eq!(
        all,
        [
            "tablet 104 was restored from snapshot a-2 after vtsnap re-provisioned it once: it is not re-provisioned again; check its replication"
        ],
        "{st:?}"
    );
}

/// A record that names the tablet's PVC by UID: the very PVC it names is a
/// re-provisioning not carried out yet (no problem); a newer PVC of the tablet, restored
/// again, is.
#[test]
fn a_reprovisioning_record_names_the_pvc_it_was_to_replace() {
    let record = |pvc_uid: &str| {
        json!(format!(
            r#"{{"pvcUid":"{pvc_uid}","at":"2026-12-01T09:00:00Z","why":"could not catch up"}}"#
        ))
    };
    let mut marked = snapshot("a-1", "x-80", "2026-12-01T08:00:00Z", "ready");
    marked["metadata"]["annotations"] = json!({
        "vtsnap.io/reprovisioned-0000000106": record("uid-106-old"),
        "vtsnap.io/reprovisioned-0000000107": record("uid-107-old"),
    });
    let pvc = |tablet: &str, uid: &str| {
        json!({"metadata": {"name": format!("t-{tablet}"), "namespace": "vitess", "uid": uid,
            "labels": {"planetscale.com/component": "vttablet", "planetscale.com/cluster": "example",
                       "planetscale.com/keyspace": "commerce", "planetscale.com/shard": "x-80",
                       "planetscale.com/tablet-uid": tablet},
            "annotations": {"vtsnap.io/restored-from": "a-2"}},
            "status": {"phase": "Bound"}})
    };
    let seen = StatusObjects {
        snapshots: vec![
            marked,
            snapshot("a-2", "x-80", "2026-12-01T10:00:00Z", "ready"),
        ],
        cronjobs: vec![cron("x-80")],
        tablet_pvcs: vec![pvc("106", "uid-106-old"), pvc("107", "uid-107-new")],
        ..StatusObjects::default()
    };
    let st = status_of(&config(), &seen);
    let all: Vec<&String> = st
        .shards
        .iter()
        .flat_map(|s| &s.problems)
        .filter(|p| p.contains("re-provisioned it once"))
        .collect();
    assert_eq!(all.len(), 1, "{all:?}");
    assert!(all[0].starts_with("tablet 107 "), "{all:?}");
}

/// Round three, item 13: a snapshot whose `vtsnap.io/drill` does not read is still shown
/// (newest, ready), with no last drill; it was dropped silently before.
#[test]
fn a_snapshot_with_an_unreadable_drill_record_is_still_shown() {
    let mut s = snapshot("a-1", "x-80", "2026-12-01T10:00:00Z", "ready");
    s["metadata"]["annotations"] = json!({"vtsnap.io/drill": "{\"result\":"});
    let seen = StatusObjects {
        snapshots: vec![s],
        cronjobs: vec![cron("x-80")],
        ..StatusObjects::default()
    };
    let st = status_of(&config(), &seen);
    assert_eq!(
        st.shards[0].newest.as_ref().map(|n| n.name.as_str()),
        Some("a-1"),
        "{st:?}"
    );
    assert!(st.shards[0].last_drill.is_none());
}

/// The binlog archive's window, as its job recorded it on the newest snapshot: shown with
/// how far back it ends and when it was read; a record copied onto another snapshot, or
/// read "in the future", is not shown (docs/pitr.md §3).
#[test]
fn the_recoverable_window_is_the_newest_record_that_counts() {
    let bound = |name: &str, uid: &str, checked: &str, end: &str| {
        let mut s = snapshot(name, "x-80", "2026-12-01T06:00:00Z", "ready");
        s["metadata"]["uid"] = json!(uid);
        s["status"] = json!({"readyToUse": true, "creationTime": "2026-12-01T06:00:00Z"});
        let record = json!({"spans": [
            {"from": "2026-11-30T00:00:00Z", "to": "2026-11-30T02:00:00Z"},
            {"from": "2026-11-30T06:00:00Z", "to": end}],
            "checked": checked, "snapshotUid": "uid-a", "cut": "2026-12-01T06:00:00Z"});
        s["metadata"]["annotations"] = json!({"vtsnap.io/pitr-window": record.to_string()});
        s
    };
    let seen = StatusObjects {
        snapshots: vec![
            bound(
                "a-1",
                "uid-a",
                "2026-12-01T11:55:00Z",
                "2026-12-01T11:50:00Z",
            ),
            // Copied from a-1: another UID, so it is not a-2's.
            bound(
                "a-2",
                "uid-b",
                "2026-12-01T11:59:00Z",
                "2026-12-01T11:58:00Z",
            ),
        ],
        cronjobs: vec![cron("x-80")],
        ..StatusObjects::default()
    };
    let st = status_of(&config(), &seen);
    let r = st.shards[0].recoverable.as_ref().unwrap();
    assert_eq!(r.snapshot, "a-1");
    assert_eq!(r.spans.len(), 2);
    assert_eq!(r.end_age_seconds, Some(600));
    assert_eq!(r.checked_age_seconds, 300);
    let json = serde_json::to_value(&st.shards[0]).unwrap();
    assert_eq!(json["recoverable"]["checked_age_seconds"], 300);
    assert_eq!(
        json["recoverable"]["spans"][1]["to"],
        "2026-12-01T11:50:00Z"
    );
    // Read ten minutes ahead of this clock: not a reading yet.
    let seen = StatusObjects {
        snapshots: vec![bound(
            "a-1",
            "uid-a",
            "2026-12-01T12:10:00Z",
            "2026-12-01T11:50:00Z",
        )],
        ..StatusObjects::default()
    };
    assert_eq!(status_of(&config(), &seen).shards[0].recoverable, None);
    // No record: nothing shown, and no key in JSON.
    let seen = StatusObjects {
        snapshots: vec![snapshot("a-1", "x-80", "2026-12-01T10:00:00Z", "ready")],
        ..StatusObjects::default()
    };
    let st = status_of(&config(), &seen);
    assert_eq!(st.shards[0].recoverable, None);
    assert!(
        serde_json::to_value(&st.shards[0])
            .unwrap()
            .get("recoverable")
            .is_none()
    );
}

/// With `pitr.enabled`, a shard whose archive job has recorded no window, or has not read
/// the archive for two runs of its schedule, has a problem; one read on time, a suspended
/// archive, or a shard without pitr has none.
#[test]
fn an_archive_that_stopped_reading_is_a_problem_of_its_shard() {
    let with_record = |checked: &str| {
        let mut s = snapshot("a-1", "x-80", "2026-12-01T06:00:00Z", "ready");
        s["metadata"]["uid"] = json!("uid-a");
        s["status"] = json!({"readyToUse": true, "creationTime": "2026-12-01T06:00:00Z"});
        let record = json!({"spans": [{"from": "2026-12-01T06:00:00Z", "to": "2026-12-01T09:00:00Z"}],
            "checked": checked, "snapshotUid": "uid-a", "cut": "2026-12-01T06:00:00Z"});
        s["metadata"]["annotations"] = json!({"vtsnap.io/pitr-window": record.to_string()});
        StatusObjects {
            snapshots: vec![s],
            cronjobs: vec![cron("x-80")],
            ..StatusObjects::default()
        }
    };
    let pitr = |policy: &str| {
        Config::from_yaml(&format!(
            "clusters:\n- name: example\n  namespace: vitess\n  pitr: {policy}\n"
        ))
        .unwrap()
    };
    let on = pitr("{enabled: true}");
    let archive_problems = |config: &Config, objects: &StatusObjects| -> Vec<String> {
        status_of(config, objects).shards[0]
            .problems
            .iter()
            .filter(|p| p.contains("archive"))
            .cloned()
            .collect()
    };
    // Now is 12:00. Read at 11:31: the runs at 11:45 and 12:00 are due, then ten minutes:
    // not late yet. At 11:29: 11:30 and 11:45 have passed, and 11:55: late.
    assert_eq!(
        archive_problems(&on, &with_record("2026-12-01T11:31:00Z")),
        Vec::<String>::new()
    );
    let late = archive_problems(&on, &with_record("2026-12-01T11:29:00Z"));
    assert_eq!(late.len(), 1, "{late:?}");
    assert!(
        late[0].starts_with(
            "the binlog archive was last read 31m ago, more than two runs of \"*/15 * * * *\""
        ),
        "{late:?}"
    );
    // Exactly at the bound: read at 10:49:59, the runs at 10:50 and 11:50 are due, and
    // ten minutes after the second is now: not late yet.
    let at_50 = pitr("{enabled: true, schedule: \"50 * * * *\"}");
    assert!(archive_problems(&at_50, &with_record("2026-12-01T10:49:59Z")).is_empty());
    assert_eq!(
        archive_problems(&at_50, &with_record("2026-12-01T09:49:59Z")).len(),
        1
    );
    let hourly = pitr("{enabled: true, schedule: \"0 * * * *\"}");
    assert_eq!(
        archive_problems(&hourly, &with_record("2026-12-01T10:00:00Z")),
        Vec::<String>::new(),
        "11:00 and 12:00 due, plus ten minutes"
    );
    assert_eq!(
        archive_problems(&hourly, &with_record("2026-12-01T09:59:59Z")).len(),
        1,
        "10:00 and 11:00 passed, and 11:10"
    );
    // No record at all, with the archive on.
    let none = StatusObjects {
        snapshots: vec![snapshot("a-1", "x-80", "2026-12-01T06:00:00Z", "ready")],
        cronjobs: vec![cron("x-80")],
        ..StatusObjects::default()
    };
    let p = archive_problems(&on, &none);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].contains("no recoverable window is recorded"), "{p:?}");
    // Suspended, or not enabled: no problem either way.
    for quiet in [pitr("{enabled: true, suspend: true}"), config()] {
        assert!(archive_problems(&quiet, &none).is_empty());
        assert!(archive_problems(&quiet, &with_record("2026-12-01T06:00:00Z")).is_empty());
    }
}
