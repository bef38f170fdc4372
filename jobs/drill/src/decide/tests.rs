//! The drill's decider, without a client: which snapshot, and why not.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};
use vtsnap_core::config::Config;
use vtsnap_core::shard::ShardRef;
use vtsnap_core::snapshot::VolumeSnapshot;
use vtsnap_core::snapshot::choice::{ShardState, TabletVersion};
use vtsnap_testkit::operator_objects::{OperatorShard, operator_shard, pvc_template};

use crate::decide::objects::{Owner, Settings};
use crate::decide::{Plan, Refusal, plan};
use crate::observe::{Observed, TabletPod, TabletPvc};

fn now() -> Timestamp {
    "2026-12-03T12:00:00Z".parse().unwrap()
}

fn hours_ago(h: i64) -> Timestamp {
    now().checked_sub(SignedDuration::from_hours(h)).unwrap()
}

fn settings() -> Settings {
    Settings {
        mysqld_resources: json!({"requests": {"cpu": "500m", "memory": "1Gi"}}),
        ..Settings::with_images("vtsnap/vtsnap-restore:1", "vtsnap/vtsnap-drill:1")
    }
}

fn key(s: &OperatorShard) -> ShardRef {
    ShardRef {
        namespace: s.namespace.clone(),
        cluster: s.cluster.clone(),
        keyspace: s.keyspace.clone(),
        shard: s.shard.clone(),
    }
}

fn snapshot(
    name: &str,
    age_h: i64,
    f: impl FnOnce(&mut Value),
) -> Result<VolumeSnapshot, vtsnap_core::snapshot::ReadError> {
    let shard = operator_shard();
    let mut o = shard.snapshot(name, hours_ago(age_h)).object();
    // Taken of the shard's second replica, as the snapshot job records it.
    let source = shard.tablet("replica", 2);
    o["spec"]["source"]["persistentVolumeClaimName"] = json!(source.name);
    o["metadata"]["annotations"]["vtsnap.io/source-pvc"] = json!(source.name);
    o["metadata"]["annotations"]["vtsnap.io/source-tablet"] = json!(source.alias.to_string());
    o["metadata"]["labels"]["vtsnap.io/tablet-uid"] = json!(source.alias.uid.to_string());
    f(&mut o);
    VolumeSnapshot::read(&o)
}

/// The shard's first replica's data PVC, of class `topolvm`.
fn tablet_pvc() -> Value {
    let mut pvc = operator_shard()
        .tablet("replica", 1)
        .pvc(&pvc_template("100Gi"));
    pvc["spec"]["storageClassName"] = json!("topolvm");
    pvc
}

/// The shard's first replica's Pod, its mysqld of image `vitess/lite:v21`.
fn tablet_pod() -> Value {
    let mut pod = operator_shard().tablet("replica", 1).pod();
    pod["spec"]["containers"][1]["image"] = json!("vitess/lite:v21");
    pod
}

fn observed(extra: &str) -> Observed {
    let shard = operator_shard();
    let cfg = Config::from_yaml(&format!(
        "clusters:\n- name: example\n  namespace: vitess\n{}",
        if extra.is_empty() {
            "  restore: {enabled: true}\n"
        } else {
            extra
        }
    ))
    .unwrap();
    Observed {
        shard: key(&shard),
        restore: cfg.resolve("example", "commerce", "-").unwrap().restore,
        snapshots: vec![
            snapshot("s-old", 30, |_| {}),
            snapshot("s-new", 2, |_| {}),
            snapshot("s-mid", 10, |_| {}),
        ],
        state: ShardState {
            key: key(&shard),
            primary: Some("zone1-0000000101".into()),
            tablets: vec![TabletVersion {
                alias: "zone1-0000000101".into(),
                version: Some("8.0.36".into()),
            }],
            refreshed_at: now(),
            error: None,
        },
        tablet_pvc: Some(TabletPvc::read(&tablet_pvc())),
        tablet_pod: Some(TabletPod::read(&tablet_pod())),
        leftovers: Vec::new(),
        named: None,
        purged: Err("not read in this test".into()),
    }
}

fn drilled(p: &Plan) -> (&str, &Value, &Value) {
    match p {
        Plan::Drill {
            snapshot, pvc, pod, ..
        } => (snapshot.as_str(), pvc, pod),
        Plan::Nothing { refusal } => panic!("refused: {}", refusal.words()),
    }
}

fn refusal(p: Plan) -> Refusal {
    match p {
        Plan::Nothing { refusal } => refusal,
        Plan::Drill { snapshot, .. } => panic!("drills {snapshot}"),
    }
}

#[test]
fn the_drill_restores_what_a_new_tablet_would_get() {
    let o = observed("");
    let owner = Owner {
        name: "drill-job".into(),
        uid: "job-uid".into(),
        namespace: None,
    };
    let p = plan(&o, &settings(), Some(&owner), now());
    let (snap, pvc, pod) = drilled(&p);
    assert_eq!(snap, "s-new");
    assert_eq!(pvc["spec"]["dataSourceRef"]["name"], "s-new");
    assert_eq!(pvc["spec"]["storageClassName"], "topolvm");
    // The tablets' request (100Gi) is more than the snapshot's 64Gi.
    assert_eq!(
        pvc["spec"]["resources"]["requests"]["storage"],
        (100u128 << 30).to_string()
    );
    assert_eq!(pvc["metadata"]["namespace"], "vitess");
    assert_eq!(pod["spec"]["containers"][0]["image"], "vitess/lite:v21");
    assert_eq!(
        pod["spec"]["securityContext"],
        json!({"fsGroup": 999, "runAsUser": 999})
    );
    assert_eq!(pod["metadata"]["ownerReferences"][0]["uid"], "job-uid");
    assert_eq!(pvc["metadata"]["ownerReferences"][0]["uid"], "job-uid");
    let Plan::Drill { name, .. } = &p else {
        unreachable!()
    };
    assert!(
        name.starts_with("vtsnap-drill-example-commerce-x-x-20261203120000-"),
        "{name}"
    );
    // The mysqld position the checker expects is the snapshot's (a file from this annotation).
    assert_eq!(
        pod["metadata"]["annotations"][crate::decide::objects::ANN_POSITION],
        "MySQL56/3e11fa47-71ca-11e1-9e33-c80aa9429562:1-100"
    );
    let args = pod["spec"]["containers"][1]["args"].to_string();
    // The sample rotates by day.
    assert!(
        args.contains(&format!("\"{}\"", now().as_second() / 86_400)),
        "{args}"
    );
}

#[test]
fn the_rule_is_the_webhooks_and_a_drill_needs_no_drill() {
    // The newest is marked unusable: the next one is drilled, as the webhook would offer.
    let mut o = observed("  restore: {enabled: true, requireDrill: true}\n");
    o.snapshots[1] = snapshot("s-new", 2, |s| {
        s["metadata"]["annotations"]["vtsnap.io/unusable"] = json!("binlogs purged");
    });
    let p = plan(&o, &settings(), None, now());
    assert_eq!(
        drilled(&p).0,
        "s-mid",
        "requireDrill does not stop the drill that would satisfy it"
    );
    // Too old for restore.maxSnapshotAge (24h): nothing, and each reason is named.
    let mut o = observed("  restore: {enabled: true, maxSnapshotAge: 1h}\n");
    o.snapshots.truncate(1);
    let r = refusal(plan(&o, &settings(), None, now()));
    assert!(r.words().contains("s-old: too old (30h)"), "{}", r.words());
}

#[test]
fn node_local_restores_pin_the_drill_to_the_source_node() {
    let o = observed(
        "  restore: {enabled: true, nodeLocal: true, nodeLabel: topology.topolvm.io/node}\n",
    );
    let p = plan(&o, &settings(), None, now());
    let (_, _, pod) = drilled(&p);
    assert_eq!(
        pod["spec"]["nodeSelector"],
        json!({"topology.topolvm.io/node": "node-2"})
    );
}

#[test]
fn a_named_snapshot_is_drilled_if_ready_whatever_its_age() {
    let mut o = observed("  restore: {enabled: true, maxSnapshotAge: 1h}\n");
    o.named = Some("s-old".into());
    assert_eq!(drilled(&plan(&o, &settings(), None, now())).0, "s-old");
    o.named = Some("elsewhere".into());
    let r = refusal(plan(&o, &settings(), None, now()));
    assert!(matches!(r, Refusal::NamedSnapshot { .. }), "{r:?}");
    let mut o = observed("");
    o.snapshots.push(snapshot("s-cut", 1, |s| {
        s["status"]["readyToUse"] = json!(false);
        s["metadata"]["labels"]["vtsnap.io/phase"] = json!("cut");
    }));
    o.named = Some("s-cut".into());
    assert_eq!(
        refusal(plan(&o, &settings(), None, now())).words(),
        "snapshot \"s-cut\": is not ready"
    );
}

/// A tablet Pod whose securityContext does not read: the drill Pod would not build, so
/// nothing is drilled, and the refusal names the field.
#[test]
fn a_tablet_security_context_that_does_not_read_is_refused() {
    let mut o = observed("");
    let mut pod = tablet_pod();
    pod["spec"]["securityContext"] = json!({"fsGroup": "not a number"});
    o.tablet_pod = Some(TabletPod::read(&pod));
    let r = refusal(plan(&o, &settings(), None, now()));
    assert!(matches!(r, Refusal::TabletPodUnreadable { .. }), "{r:?}");
    assert!(
        r.words()
            .starts_with("the tablet Pod: spec.securityContext "),
        "{}",
        r.words()
    );
    // One that is not an object is no security context: the drill's own is used.
    pod["spec"]["securityContext"] = json!("none");
    o.tablet_pod = Some(TabletPod::read(&pod));
    let p = plan(&o, &settings(), None, now());
    let (_, _, drill_pod) = drilled(&p);
    assert_eq!(drill_pod["spec"]["securityContext"]["runAsUser"], 999);
}

#[test]
fn a_drill_under_way_or_a_shard_without_what_it_needs_is_refused() {
    let mut o = observed("");
    o.leftovers = vec!["PersistentVolumeClaim/vtsnap-drill-x".into()];
    assert!(matches!(
        refusal(plan(&o, &settings(), None, now())),
        Refusal::DrillUnderWay { .. }
    ));
    let mut o = observed("");
    o.tablet_pod = None;
    assert_eq!(
        refusal(plan(&o, &settings(), None, now())),
        Refusal::NoTabletImage
    );
    let mut o = observed("");
    let mut pod = tablet_pod();
    pod["spec"]["containers"][1]["name"] = json!("other");
    o.tablet_pod = Some(TabletPod::read(&pod));
    assert_eq!(
        refusal(plan(&o, &settings(), None, now())),
        Refusal::NoTabletImage
    );
    let mut o = observed("");
    o.tablet_pvc = None;
    assert!(matches!(
        refusal(plan(&o, &settings(), None, now())),
        Refusal::NoTabletPvc { .. }
    ));
    let mut o = observed("");
    let mut pvc = tablet_pvc();
    pvc["spec"]["resources"]["requests"]["storage"] = json!("lots");
    o.tablet_pvc = Some(TabletPvc::read(&pvc));
    assert!(matches!(
        refusal(plan(&o, &settings(), None, now())),
        Refusal::NoTabletPvc { .. }
    ));
    let mut o = observed("");
    o.state.primary = None;
    assert!(matches!(
        refusal(plan(&o, &settings(), None, now())),
        Refusal::ShardSeries { .. }
    ));
    let mut o = observed("");
    o.snapshots.clear();
    assert_eq!(
        refusal(plan(&o, &settings(), None, now())).words(),
        "the shard has no snapshot"
    );
}

#[test]
fn catch_up_is_judged_from_what_the_primary_purged() {
    use vtsnap_core::coverage::{Coverage, GtidSet, Purged, Text};
    use vtsnap_core::snapshot::GtidFlavor;
    let purged = |set: &str| {
        Ok(Purged::Mysql56(
            GtidSet::parse(GtidFlavor::Mysql56, set, Text::Server).unwrap(),
        ))
    };
    // The snapshots record 3e11fa47-…:1-100, except s-old at 1-40.
    let mut o = observed("");
    o.snapshots[0] = snapshot("s-old", 30, |s| {
        s["metadata"]["annotations"]["vtsnap.io/gtid-executed"] =
            json!("MySQL56/3e11fa47-71ca-11e1-9e33-c80aa9429562:1-40");
    });
    o.purged = purged("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-50");
    assert_eq!(crate::decide::catch_up(&o, "s-new"), Coverage::Covered);
    assert!(matches!(
        crate::decide::catch_up(&o, "s-old"),
        Coverage::NotCovered { .. }
    ));
    o.purged = purged("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-150");
    assert!(matches!(
        crate::decide::catch_up(&o, "s-new"),
        Coverage::NotCovered { .. }
    ));
    o.purged = Err("vtctld: unavailable".into());
    assert!(matches!(
        crate::decide::catch_up(&o, "s-new"),
        Coverage::Unknown { .. }
    ));
    assert!(matches!(
        crate::decide::catch_up(&o, "nope"),
        Coverage::Unknown { .. }
    ));
}
