//! What the webhook makes of the restore rule's choice for a new tablet PVC — the patch,
//! the codes, the Event — on objects shaped as vitess-operator makes them
//! (`vtsnap_testkit::operator_objects`), and the fixtures the other decision tests share.
//! The rule's own cases are core's (`vtsnap_core::snapshot::choice`'s tests). Tablet Pods
//! are in `tests_pod`, vtbackup objects in `tests_vtbackup`.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};
use vtsnap_core::config::Config;
use vtsnap_core::shard::ShardRef;
use vtsnap_core::snapshot::choice::{ShardState, TabletVersion};
use vtsnap_core::snapshot::{
    ANN_CUT_TIME, ANN_SOURCE_PVC, ANN_SOURCE_TABLET, ANN_UNUSABLE, LABEL_TABLET_UID, SnapshotRead,
};
use vtsnap_testkit::operator_objects::{
    OperatorShard, VtsnapSnapshot, operator_shard, pvc_template,
};

use super::*;
use crate::inventory::Dump;
use crate::observe::{FirstPoolUnknown, Kind, NewObject, PvcRead, PvcTemplate};
use crate::patch::apply;
use vtsnap_core::restored::{ANN_RESTORE_NODE, ANN_RESTORE_REASON, ANN_RESTORED_FROM};

const NOW: &str = "2026-12-01T12:00:00Z";

pub(super) fn now() -> Timestamp {
    NOW.parse().unwrap()
}

pub(super) fn hours_ago(h: f64) -> Timestamp {
    let secs = (h * 3600.0) as i64;
    now()
        .checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(secs))
        .unwrap()
}

const BASE: &str = "clusters:\n- name: example\n  namespace: vitess\n";

pub(super) fn config(extra: &str) -> Config {
    Config::from_yaml(&format!("{BASE}{extra}")).unwrap_or_else(|e| panic!("{e}"))
}

pub(super) fn enabled() -> Config {
    config("  restore: {enabled: true}\n")
}

pub(super) fn settings() -> Settings {
    Settings {
        restore_image: Some("vtsnap/vtsnap-restore:0.1.0".into()),
        shard_state_max_age: Duration::from_secs(300),
    }
}

/// A snapshot cut `age_h` hours ago, otherwise as the test kit's [`VtsnapSnapshot`].
pub(super) struct Snap {
    pub(super) name: String,
    pub(super) shard: OperatorShard,
    pub(super) age_h: f64,
    pub(super) ready: bool,
    pub(super) phase: &'static str,
    pub(super) version: &'static str,
    pub(super) flavor: &'static str,
    pub(super) size: Option<&'static str>,
    pub(super) node: &'static str,
    pub(super) unusable: Option<&'static str>,
    pub(super) drill: Option<String>,
}

pub(super) fn snap(name: &str, age_h: f64) -> Snap {
    Snap {
        name: name.into(),
        shard: operator_shard(),
        age_h,
        ready: true,
        phase: "ready",
        version: "8.0.36",
        flavor: "mysql",
        size: Some("64Gi"),
        node: "node-2",
        unusable: None,
        drill: None,
    }
}

impl Snap {
    /// Taken of the PVC of the shard's second replica, as the snapshot job records it.
    pub(super) fn object(&self) -> Value {
        let source = self.shard.tablet("replica", 2);
        let mut o = VtsnapSnapshot {
            ready: self.ready,
            phase: self.phase,
            version: self.version.into(),
            flavor: self.flavor,
            size: self.size.map(str::to_owned),
            node: self.node.into(),
            unusable: self.unusable.map(str::to_owned),
            drill: self.drill.clone(),
            ..self.shard.snapshot(&self.name, hours_ago(self.age_h))
        }
        .object();
        o["spec"]["source"]["persistentVolumeClaimName"] = json!(source.name);
        let ann = &mut o["metadata"]["annotations"];
        ann[ANN_SOURCE_PVC] = json!(source.name);
        ann[ANN_SOURCE_TABLET] = json!(source.alias.to_string());
        o["metadata"]["labels"][LABEL_TABLET_UID] = json!(source.alias.uid.to_string());
        o
    }
}

pub(super) fn healthy_state(shard: &OperatorShard, versions: &[&str]) -> ShardState {
    ShardState {
        key: key(shard),
        primary: Some("zone1-0000000101".into()),
        tablets: versions
            .iter()
            .enumerate()
            .map(|(i, v)| TabletVersion {
                alias: format!("zone1-{:010}", 101 + i),
                version: Some((*v).to_owned()),
            })
            .collect(),
        refreshed_at: hours_ago(0.01),
        error: None,
    }
}

pub(super) fn key(s: &OperatorShard) -> ShardRef {
    ShardRef {
        namespace: s.namespace.clone(),
        cluster: s.cluster.clone(),
        keyspace: s.keyspace.clone(),
        shard: s.shard.clone(),
    }
}

pub(super) fn inventory(snaps: &[Snap]) -> Dump {
    let mut d = Dump::default();
    for s in snaps {
        d.add(s.object());
    }
    d.set_shard_state(healthy_state(
        &operator_shard(),
        &["8.0.36", "8.0.36", "8.0.39"],
    ));
    d
}

/// The review of the creation of `obj` in `vitess`, observed.
pub(super) fn review_of(kind: Kind, obj: &Value) -> Review {
    Review {
        operation: Operation::Create,
        namespace: "vitess".into(),
        object: Some(NewObject::read(kind, obj, "vitess")),
    }
}

pub(super) fn decide_pvc(cfg: &Config, inv: &Dump, pvc: &Value) -> Decision {
    decide(
        &review_of(Kind::PersistentVolumeClaim, pvc),
        cfg,
        &settings(),
        inv,
        now(),
    )
}

pub(super) fn new_pvc(size: &str) -> Value {
    operator_shard()
        .tablet("replica", 4)
        .pvc(&pvc_template(size))
}

pub(super) fn codes(d: &Decision) -> Vec<Code> {
    d.notes.iter().map(|n| n.code).collect()
}

pub(super) fn restored_from(d: &Decision, obj: &Value) -> Option<String> {
    let after = apply(obj, &d.patch).unwrap();
    after["spec"]["dataSourceRef"]["name"]
        .as_str()
        .map(str::to_owned)
}

#[test]
fn each_code_is_named_as_its_serialized_form() {
    use strum::VariantArray as _;
    for code in Code::VARIANTS {
        assert_eq!(serde_json::to_value(code).unwrap(), json!(code.as_str()));
    }
    assert_eq!(Code::NotVtsnaps.as_str(), "not-vtsnaps");
}

#[test]
fn a_new_tablet_pvc_starts_from_the_newest_usable_snapshot() {
    let inv = inventory(&[snap("s-old", 30.0), snap("s-new", 2.0), snap("s-mid", 10.0)]);
    let pvc = new_pvc("100Gi");
    let d = decide_pvc(&enabled(), &inv, &pvc);
    assert_eq!(codes(&d), [Code::RestoredFromSnapshot], "{d:#?}");
    let after = apply(&pvc, &d.patch).unwrap();
    let source =
        json!({"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "s-new"});
    assert_eq!(after["spec"]["dataSourceRef"], source);
    assert_eq!(after["spec"]["dataSource"], source);
    let ann = &after["metadata"]["annotations"];
    assert_eq!(ann[ANN_RESTORED_FROM], "s-new");
    let reason = ann[ANN_RESTORE_REASON].as_str().unwrap();
    assert!(
        reason.contains("mysql 8.0") && reason.contains("68719476736 bytes"),
        "{reason}"
    );
    assert!(ann.get(ANN_RESTORE_NODE).is_none(), "not node-local");
    // Everything else is as the operator made it.
    assert_eq!(after["metadata"]["labels"], pvc["metadata"]["labels"]);
    assert_eq!(after["spec"]["resources"], pvc["spec"]["resources"]);
    let ev = d.event.unwrap();
    assert_eq!((ev.reason, ev.warning), ("RestoreInjected", false));
    assert!(ev.message.contains("s-new"));
}

/// Each rule, broken by a snapshot newer than a good one: what the rejection says.
fn rule_cases() -> Vec<(&'static str, Snap, &'static str)> {
    vec![
        (
            "other series",
            Snap {
                version: "8.4.3",
                ..snap("s-bad", 1.0)
            },
            "mysql 8.4, the shard runs mysql 8.0",
        ),
        (
            "other flavor",
            Snap {
                version: "10.11.18-MariaDB",
                flavor: "mariadb",
                ..snap("s-bad", 1.0)
            },
            "mariadb 10.11, the shard runs mysql 8.0",
        ),
        (
            "flavor contradicts version",
            Snap {
                flavor: "mariadb",
                ..snap("s-bad", 1.0)
            },
            "flavor mariadb with version \"8.0.36\", which is not a mariadb version",
        ),
        ("too old", snap("s-bad", 48.0), "too old (48h)"),
        (
            "too small",
            Snap {
                size: Some("101Gi"),
                ..snap("s-bad", 1.0)
            },
            "needs 108447924224 bytes, the PVC asks for 107374182400",
        ),
        (
            "no restoreSize",
            Snap {
                size: None,
                ..snap("s-bad", 1.0)
            },
            "no restoreSize",
        ),
        (
            "unreadable restoreSize",
            Snap {
                size: Some("lots"),
                ..snap("s-bad", 1.0)
            },
            "restoreSize unreadable",
        ),
        (
            "not ready",
            Snap {
                ready: false,
                phase: "cut",
                ..snap("s-bad", 1.0)
            },
            "not ready",
        ),
        (
            "failed",
            Snap {
                phase: "failed",
                ..snap("s-bad", 1.0)
            },
            "failed",
        ),
        (
            "marked unusable",
            Snap {
                unusable: Some("binlog purged"),
                ..snap("s-bad", 1.0)
            },
            "marked unusable: \"binlog purged\"",
        ),
    ]
}

/// One rule at a time: the snapshot that breaks it is passed over for an older good one,
/// and alone it leaves the PVC as created, with an Event that says why.
#[test]
fn every_injection_rule_passes_over_the_snapshot_that_breaks_it() {
    let other_shard = {
        let mut s = snap("s-bad", 1.0);
        s.shard = operator_shard().named("commerce", "-80");
        s
    };
    for (what, bad, _) in rule_cases() {
        let pvc = new_pvc("100Gi");
        // With an older good one: that one is taken.
        let inv = inventory(&[bad, snap("s-good", 20.0)]);
        let d = decide_pvc(&enabled(), &inv, &pvc);
        assert_eq!(
            restored_from(&d, &pvc).as_deref(),
            Some("s-good"),
            "{what}: {d:#?}"
        );
    }
    for (what, bad, words) in rule_cases() {
        let pvc = new_pvc("100Gi");
        let d = decide_pvc(&enabled(), &inventory(&[bad]), &pvc);
        assert!(d.patch.is_empty(), "{what}: {d:#?}");
        assert_eq!(codes(&d), [Code::NoUsableSnapshot], "{what}");
        let msg = &d.notes[0].message;
        assert!(msg.contains(&format!("s-bad: {words}")), "{what}: {msg}");
        let ev = d.event.as_ref().unwrap();
        assert_eq!(ev.reason, "RestoreSkipped", "{what}");
        assert!(ev.message.contains("provisioned normally"), "{what}");
    }
    // Another shard's snapshot is not this shard's.
    let d = decide_pvc(&enabled(), &inventory(&[other_shard]), &new_pvc("100Gi"));
    assert_eq!(codes(&d), [Code::NoUsableSnapshot]);
    assert!(
        d.notes[0].message.contains("has no snapshot"),
        "{:?}",
        d.notes
    );
}

#[test]
fn an_unreadable_snapshot_is_passed_over_and_named() {
    let mut bad = snap("s-bad", 1.0).object();
    bad["metadata"]["annotations"][ANN_CUT_TIME] = json!("yesterday");
    let mut inv = inventory(&[snap("s-good", 5.0)]);
    inv.add(bad);
    let d = decide_pvc(&enabled(), &inv, &new_pvc("100Gi"));
    assert_eq!(
        restored_from(&d, &new_pvc("100Gi")).as_deref(),
        Some("s-good")
    );
    let mut inv = inventory(&[]);
    let mut bad = snap("s-bad", 1.0).object();
    bad["metadata"]["annotations"][ANN_CUT_TIME] = json!("yesterday");
    inv.add(bad);
    let d = decide_pvc(&enabled(), &inv, &new_pvc("100Gi"));
    assert_eq!(codes(&d), [Code::NoUsableSnapshot]);
    assert!(
        d.notes[0]
            .message
            .contains("unreadable (VolumeSnapshot vitess/s-bad"),
        "{:?}",
        d.notes
    );
}

#[test]
fn the_policy_and_the_pvc_itself_can_keep_it_as_created() {
    let inv = inventory(&[snap("s", 1.0)]);
    let pvc = new_pvc("100Gi");
    let d = decide_pvc(&config(""), &inv, &pvc);
    assert_eq!(
        (codes(&d), d.patch.len(), d.event.is_some()),
        (vec![Code::RestoreDisabled], 0, false)
    );
    let d = decide_pvc(
        &config("  restore: {enabled: true, pools: [rdonly]}\n"),
        &inv,
        &pvc,
    );
    assert_eq!(codes(&d), [Code::PoolNotOptedIn]);
    let rdonly = operator_shard()
        .tablet("rdonly", 1)
        .pvc(&pvc_template("100Gi"));
    let d = decide_pvc(
        &config("  restore: {enabled: true, pools: [rdonly]}\n"),
        &inv,
        &rdonly,
    );
    assert_eq!(codes(&d), [Code::RestoredFromSnapshot]);
    // A shard-level opt-out.
    let d = decide_pvc(
        &config(
            "  restore: {enabled: true}\n  keyspaces:\n    commerce:\n      shards:\n        \"-\": {restore: {enabled: false}}\n",
        ),
        &inv,
        &pvc,
    );
    assert_eq!(codes(&d), [Code::RestoreDisabled]);
    // The pool's template already restores from something.
    let mut with_source = pvc.clone();
    with_source["spec"]["dataSourceRef"] =
        json!({"kind": "VolumeSnapshot", "name": "mine", "apiGroup": "snapshot.storage.k8s.io"});
    let d = decide_pvc(&enabled(), &inv, &with_source);
    assert_eq!((codes(&d), d.patch.len()), (vec![Code::HasDataSource], 0));
    let mut with_null = pvc.clone();
    with_null["spec"]["dataSource"] = Value::Null;
    assert_eq!(
        codes(&decide_pvc(&enabled(), &inv, &with_null)),
        [Code::RestoredFromSnapshot]
    );
    // An unreadable size.
    let d = decide_pvc(&enabled(), &inv, &new_pvc("much"));
    assert_eq!(codes(&d), [Code::SizeUnreadable]);
    let mut no_size = pvc.clone();
    no_size["spec"]["resources"] = json!({});
    assert_eq!(
        codes(&decide_pvc(&enabled(), &inv, &no_size)),
        [Code::SizeUnreadable]
    );
}

#[test]
fn without_a_trustworthy_word_from_vtctld_nothing_is_injected() {
    let pvc = new_pvc("100Gi");
    let with_state = |f: &dyn Fn(&mut ShardState)| {
        let mut inv = inventory(&[snap("s", 1.0)]);
        let mut st = healthy_state(&operator_shard(), &["8.0.36", "8.0.36"]);
        f(&mut st);
        inv.set_shard_state(st);
        decide_pvc(&enabled(), &inv, &pvc)
    };
    assert_eq!(codes(&with_state(&|_| {})), [Code::RestoredFromSnapshot]);
    let mut none = Dump::default();
    none.add(snap("s", 1.0).object());
    assert_eq!(
        codes(&decide_pvc(&enabled(), &none, &pvc)),
        [Code::ShardStateUnknown]
    );
    let d = with_state(&|s| s.error = Some("connection refused".into()));
    assert_eq!(codes(&d), [Code::ShardStateUnknown]);
    assert!(d.notes[0].message.contains("connection refused"));
    assert_eq!(
        codes(&with_state(&|s| s.refreshed_at = hours_ago(0.1))),
        [Code::ShardStateStale]
    );
    assert_eq!(
        codes(&with_state(&|s| s.refreshed_at = hours_ago(300.0 / 3600.0))),
        [Code::RestoredFromSnapshot],
        "exactly the max age"
    );
    assert_eq!(
        codes(&with_state(&|s| s.primary = None)),
        [Code::ShardHasNoPrimary]
    );
    let d = with_state(&|s| s.tablets[0].version = None);
    assert_eq!(
        codes(&d),
        [Code::ShardVersionUnknown],
        "the primary did not answer"
    );
    let d = with_state(&|s| s.tablets[1].version = None);
    assert_eq!(
        codes(&d),
        [Code::RestoredFromSnapshot],
        "a replica that did not answer does not count"
    );
    let d = with_state(&|s| s.tablets[1].version = Some("8.4.3".into()));
    assert_eq!(codes(&d), [Code::ShardVersionsDiffer]);
    assert!(
        d.notes[0].message.contains("mysql 8.0 and mysql 8.4"),
        "{:?}",
        d.notes
    );
    assert_eq!(
        codes(&with_state(&|s| s.tablets[1].version = Some("eight".into()))),
        [Code::ShardVersionUnknown]
    );
    assert_eq!(
        codes(&with_state(&|s| s.tablets.clear())),
        [Code::ShardVersionUnknown]
    );
    // Each of these leaves an Event.
    assert!(with_state(&|s| s.primary = None).event.is_some());
}

#[test]
fn objects_vtsnap_does_not_change_are_left_alone() {
    let inv = inventory(&[snap("s", 1.0)]);
    let pvc = new_pvc("100Gi");
    let mut r = review_of(Kind::PersistentVolumeClaim, &pvc);
    r.operation = Operation::Update;
    assert_eq!(
        codes(&decide(&r, &enabled(), &settings(), &inv, now())),
        [Code::NotVtsnaps]
    );
    let r = Review {
        object: None,
        ..review_of(Kind::Pod, &pvc)
    };
    assert_eq!(
        codes(&decide(&r, &enabled(), &settings(), &inv, now())),
        [Code::NotVtsnaps]
    );
    let mut other = pvc.clone();
    other["metadata"]["labels"]["planetscale.com/component"] = json!("vtgate");
    assert_eq!(
        codes(&decide_pvc(&enabled(), &inv, &other)),
        [Code::NotVtsnaps]
    );
    let mut bad = pvc.clone();
    bad["metadata"]["labels"]["planetscale.com/shard"] = json!("-80");
    let d = decide_pvc(&enabled(), &inv, &bad);
    assert_eq!(codes(&d), [Code::LabelsUnreadable]);
    let mut unlabelled = pvc.clone();
    unlabelled["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("planetscale.com/keyspace");
    assert_eq!(
        codes(&decide_pvc(&enabled(), &inv, &unlabelled)),
        [Code::LabelsUnreadable]
    );
    let other_cluster = config("  restore: {enabled: true}\n").clusters[0].clone();
    let mut cfg = enabled();
    cfg.clusters[0] = vtsnap_core::config::ClusterConfig {
        name: "other".into(),
        ..other_cluster
    };
    assert_eq!(
        codes(&decide_pvc(&cfg, &inv, &pvc)),
        [Code::ClusterNotConfigured]
    );
}

#[test]
fn nothing_is_decided_before_the_caches_are_filled() {
    struct Unsynced(Dump);
    impl Inventory for Unsynced {
        fn synced(&self) -> bool {
            false
        }
        fn snapshots(&self, s: &ShardRef) -> Vec<SnapshotRead> {
            self.0.snapshots(s)
        }
        fn shard_state(&self, s: &ShardRef) -> Option<ShardState> {
            self.0.shard_state(s)
        }
        fn first_pool_template(&self, s: &ShardRef) -> Result<PvcTemplate, FirstPoolUnknown> {
            self.0.first_pool_template(s)
        }
        fn pvc(&self, n: &str, p: &str) -> Option<PvcRead> {
            self.0.pvc(n, p)
        }
    }
    let inv = Unsynced(inventory(&[snap("s", 1.0)]));
    let pvc = new_pvc("100Gi");
    let d = decide(
        &review_of(Kind::PersistentVolumeClaim, &pvc),
        &enabled(),
        &settings(),
        &inv,
        now(),
    );
    assert_eq!(
        (codes(&d), d.patch.len()),
        (vec![Code::InventoryNotSynced], 0)
    );
}

/// Audit item 2: a tablet the GC re-provisioned (recorded on the snapshot it was restored
/// from) gets no restore when the operator recreates its PVC: it restores from the
/// regular backup, and a second failure from another snapshot cannot happen. Another
/// tablet of the shard still gets the newest usable snapshot.
#[test]
fn a_reprovisioned_tablet_s_recreated_pvc_gets_no_restore() {
    let pvc = new_pvc("100Gi");
    let tablet = operator_shard().tablet("replica", 4);
    let key = vtsnap_core::snapshot::reprovisioned_key(tablet.alias.uid);
    let mut bad = snap("s-bad", 2.0).object();
    bad["metadata"]["annotations"][ANN_UNUSABLE] = json!("tablet could not catch up");
    bad["metadata"]["annotations"][key.as_str()] = json!("re-provisioned");
    let mut inv = inventory(&[snap("s-new", 1.0)]);
    inv.add(bad);
    let d = decide_pvc(&enabled(), &inv, &pvc);
    assert_eq!(codes(&d), [Code::TabletReprovisioned], "{d:#?}");
    assert_eq!(restored_from(&d, &pvc), None);
    assert!(d.notes[0].message.contains("s-bad"), "{:?}", d.notes[0]);
    // The shard's other tablets are restored as before.
    let other = operator_shard()
        .tablet("replica", 5)
        .pvc(&pvc_template("100Gi"));
    let d = decide_pvc(&enabled(), &inv, &other);
    assert_eq!(
        restored_from(&d, &other).as_deref(),
        Some("s-new"),
        "{d:#?}"
    );
}
