//! Every injection rule and every row of the vtbackup table (docs/design.md §9), on objects shaped as
//! vitess-operator makes them (`vtsnap_testkit::operator_objects`).

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;
use serde_json::{Value, json};
use vtsnap_core::config::Config;
use vtsnap_core::snapshot::{
    ANN_CUT_TIME, ANN_SOURCE_PVC, ANN_SOURCE_TABLET, ANN_UNUSABLE, LABEL_TABLET_UID,
};
use vtsnap_core::vtbackup::{
    ANN_DATA_VOLUME_HASH, ANN_TEMPLATE_HASH, PLACEHOLDER_CLASS, data_volume, placeholder_spec,
    template_hash,
};
use vtsnap_testkit::operator_objects::{
    OperatorShard, VtsnapSnapshot, operator_shard, pvc_template, with_extra_mount,
    with_extra_volume,
};

use super::*;
use crate::observe::{Dump, ShardState, TabletVersion};
use crate::patch::{Op, apply};

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

pub(super) fn review_of<'a>(kind: Kind, obj: &'a Value) -> Review<'a> {
    Review {
        kind: Some(kind),
        operation: "CREATE",
        namespace: "vitess",
        object: obj,
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
fn the_age_limit_and_the_size_fit_are_exact_at_their_bounds() {
    let d = decide_pvc(
        &enabled(),
        &inventory(&[snap("s", 47.99)]),
        &new_pvc("64Gi"),
    );
    assert_eq!(
        codes(&d),
        [Code::RestoredFromSnapshot],
        "just younger than 48h, exactly the size"
    );
    let d = decide_pvc(&enabled(), &inventory(&[snap("s", 48.0)]), &new_pvc("64Gi"));
    assert_eq!(codes(&d), [Code::NoUsableSnapshot], "48h is too old");
    let d = decide_pvc(
        &enabled(),
        &inventory(&[snap("s", 1.0)]),
        &new_pvc("68719476735"),
    );
    assert_eq!(codes(&d), [Code::NoUsableSnapshot], "one byte short");
    let cfg = config("  restore: {enabled: true, maxSnapshotAge: 6h}\n");
    let d = decide_pvc(
        &cfg,
        &inventory(&[snap("s", 6.5), snap("t", 5.5)]),
        &new_pvc("64Gi"),
    );
    assert_eq!(restored_from(&d, &new_pvc("64Gi")).as_deref(), Some("t"));
}

#[test]
fn ties_on_the_cut_go_to_the_later_name() {
    let d = decide_pvc(
        &enabled(),
        &inventory(&[snap("s-a", 3.0), snap("s-b", 3.0)]),
        &new_pvc("100Gi"),
    );
    assert_eq!(restored_from(&d, &new_pvc("100Gi")).as_deref(), Some("s-b"));
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
    r.operation = "UPDATE";
    assert_eq!(
        codes(&decide(&r, &enabled(), &settings(), &inv, now())),
        [Code::NotVtsnaps]
    );
    let r = Review {
        kind: None,
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
        fn snapshots(&self, s: &ShardRef) -> Vec<crate::observe::SnapshotRead> {
            self.0.snapshots(s)
        }
        fn shard_state(&self, s: &ShardRef) -> Option<ShardState> {
            self.0.shard_state(s)
        }
        fn cluster(&self, n: &str, c: &str) -> Option<Value> {
            self.0.cluster(n, c)
        }
        fn pvc(&self, n: &str, p: &str) -> Option<Value> {
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

// ---- node-local restores -------------------------------------------------------------

pub(super) fn node_local() -> Config {
    config("  restore: {enabled: true, nodeLocal: true, nodeLabel: topology.topolvm.io/node}\n")
}

#[test]
fn node_local_snapshots_record_their_node_and_pin_the_pod_there() {
    let inv = inventory(&[snap("s", 1.0)]);
    let pvc = new_pvc("100Gi");
    let d = decide_pvc(&node_local(), &inv, &pvc);
    let stored = apply(&pvc, &d.patch).unwrap();
    assert_eq!(
        stored["metadata"]["annotations"][ANN_RESTORE_NODE],
        "node-2"
    );
    // The Pod of that PVC.
    let mut inv = inv;
    inv.add(stored);
    let pod = operator_shard().tablet("replica", 4).pod();
    let d = decide(
        &review_of(Kind::Pod, &pod),
        &node_local(),
        &settings(),
        &inv,
        now(),
    );
    assert_eq!(
        codes(&d),
        [Code::RestoreContainerAdded, Code::PinnedToSourceNode],
        "{d:#?}"
    );
    let after = apply(&pod, &d.patch).unwrap();
    assert_eq!(
        after["spec"]["nodeSelector"],
        json!({"topology.topolvm.io/node": "node-2"})
    );
    // The operator's own affinity is not touched (it would see a change as drift).
    assert_eq!(after["spec"]["affinity"], pod["spec"]["affinity"]);
    // A snapshot that does not say where it was cut cannot be restored node-locally.
    let d = decide_pvc(
        &node_local(),
        &inventory(&[Snap {
            node: "",
            ..snap("s", 1.0)
        }]),
        &pvc,
    );
    assert_eq!(codes(&d), [Code::NoUsableSnapshot]);
    assert!(d.notes[0].message.contains("no source node recorded"));
}

#[test]
fn pinning_respects_a_selector_the_pod_already_has_and_needs_the_pvc() {
    let pvc = {
        let p = new_pvc("100Gi");
        let d = decide_pvc(&node_local(), &inventory(&[snap("s", 1.0)]), &p);
        apply(&p, &d.patch).unwrap()
    };
    let mut inv = inventory(&[]);
    inv.add(pvc);
    let mut pod = operator_shard().tablet("replica", 4).pod();
    pod["spec"]["nodeSelector"] = json!({"topology.topolvm.io/node": "node-2", "disk": "ssd"});
    let d = decide(
        &review_of(Kind::Pod, &pod),
        &node_local(),
        &settings(),
        &inv,
        now(),
    );
    assert!(codes(&d).contains(&Code::PinnedToSourceNode));
    assert!(d.patch.iter().all(|op| !op.path().contains("nodeSelector")));
    pod["spec"]["nodeSelector"]["topology.topolvm.io/node"] = json!("node-7");
    let d = decide(
        &review_of(Kind::Pod, &pod),
        &node_local(),
        &settings(),
        &inv,
        now(),
    );
    assert!(codes(&d).contains(&Code::NodeSelectorConflict), "{d:#?}");
    assert!(d.patch.iter().all(|op| !op.path().contains("nodeSelector")));
    // The PVC is not known: the Pod is not pinned (the GC un-sticks it if it stays Pending).
    let pod = operator_shard().tablet("replica", 4).pod();
    let d = decide(
        &review_of(Kind::Pod, &pod),
        &node_local(),
        &settings(),
        &inventory(&[]),
        now(),
    );
    assert!(codes(&d).contains(&Code::RestorePvcUnknown), "{d:#?}");
    // Not node-local: the PVC is not consulted at all.
    let d = decide(
        &review_of(Kind::Pod, &pod),
        &enabled(),
        &settings(),
        &inventory(&[]),
        now(),
    );
    assert_eq!(codes(&d), [Code::RestoreContainerAdded]);
}

// ---- the restore init container ------------------------------------------------------

#[test]
fn tablet_pods_of_opted_in_pools_get_the_restore_init_container_last() {
    let pod = operator_shard().tablet("replica", 4).pod();
    let d = decide(
        &review_of(Kind::Pod, &pod),
        &enabled(),
        &settings(),
        &inventory(&[]),
        now(),
    );
    let after = apply(&pod, &d.patch).unwrap();
    let inits: Vec<&str> = after["spec"]["initContainers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        inits,
        ["init-vt-root", "init-mysql-socket", RESTORE_CONTAINER]
    );
    let c = &after["spec"]["initContainers"][2];
    assert_eq!(c, &restore_container("vtsnap/vtsnap-restore:0.1.0"));
    assert_eq!(
        c["volumeMounts"][0],
        json!({"name": "persistent-volume-claim", "mountPath": "/vt/vtdataroot", "subPath": "vtdataroot"})
    );
    assert_eq!(
        c["env"][0]["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.labels['planetscale.com/tablet-uid']"
    );
    // Only that: the operator's containers, volumes and affinity are as it made them.
    let mut without = after.clone();
    without["spec"]["initContainers"]
        .as_array_mut()
        .unwrap()
        .pop();
    assert_eq!(without, pod);

    // Already in the pool's initContainers: nothing added.
    let mut has = pod.clone();
    has["spec"]["initContainers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": RESTORE_CONTAINER, "image": "mine"}));
    let d = decide(
        &review_of(Kind::Pod, &has),
        &enabled(),
        &settings(),
        &inventory(&[]),
        now(),
    );
    assert_eq!(
        (codes(&d), d.patch.len()),
        (vec![Code::RestoreContainerPresent], 0)
    );
    // No image configured: nothing added, and the note says what to do.
    let s = Settings {
        restore_image: None,
        ..settings()
    };
    let d = decide(
        &review_of(Kind::Pod, &pod),
        &enabled(),
        &s,
        &inventory(&[]),
        now(),
    );
    assert_eq!((codes(&d), d.patch.len()), (vec![Code::NoRestoreImage], 0));
    // Not opted in, or no data volume.
    let d = decide(
        &review_of(Kind::Pod, &pod),
        &config(""),
        &settings(),
        &inventory(&[]),
        now(),
    );
    assert_eq!((codes(&d), d.patch.len()), (vec![Code::RestoreDisabled], 0));
    let d = decide(
        &review_of(Kind::Pod, &pod),
        &config("  restore: {enabled: true, pools: [rdonly]}\n"),
        &settings(),
        &inventory(&[]),
        now(),
    );
    assert_eq!(codes(&d), [Code::PoolNotOptedIn]);
    let mut no_pvc = pod.clone();
    no_pvc["spec"]["volumes"] = json!([{"name": "vt-root", "emptyDir": {}}]);
    let d = decide(
        &review_of(Kind::Pod, &no_pvc),
        &enabled(),
        &settings(),
        &inventory(&[]),
        now(),
    );
    assert_eq!(codes(&d), [Code::NoDataVolume]);
    // A Pod without any init container gets the list.
    let mut bare = pod.clone();
    bare["spec"]
        .as_object_mut()
        .unwrap()
        .remove("initContainers");
    let d = decide(
        &review_of(Kind::Pod, &bare),
        &enabled(),
        &settings(),
        &inventory(&[]),
        now(),
    );
    assert_eq!(
        apply(&bare, &d.patch).unwrap()["spec"]["initContainers"][0]["name"],
        RESTORE_CONTAINER
    );
}

// ---- vtbackup storage (docs/design.md §9's table) ---------------------------------------------

fn vitess_cluster(first_pool: &Value) -> Value {
    json!({"apiVersion": "planetscale.com/v2", "kind": "VitessCluster",
        "metadata": {"name": "example", "namespace": "vitess", "uid": "vc-1"},
        "spec": {"keyspaces": [{"name": "commerce", "partitionings": [{"equal": {"parts": 1, "shardTemplate": {
            "tabletPools": [{"cell": "zone1", "type": "replica", "replicas": 3, "dataVolumeClaimTemplate": first_pool}]}}}]}]}})
}

pub(super) fn with_cluster(first_pool: &Value) -> Dump {
    let mut d = inventory(&[]);
    d.add(vitess_cluster(first_pool));
    d
}

pub(super) fn vtbackup_config(block: &str) -> Config {
    config(&format!("  vtbackup: {block}\n"))
}

fn own_template() -> Value {
    json!({"storageClassName": "cheap-disk", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}})
}

fn annotation<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v["metadata"]["annotations"][k].as_str()
}

#[test]
fn inherited_storage_changes_nothing_and_stamps_the_first_pools_template() {
    let pool = pvc_template("100Gi");
    let inv = with_cluster(&pool);
    let cfg = config("");
    let s = operator_shard();
    let pod = s.vtbackup_init_pod();
    let d = decide(&review_of(Kind::Pod, &pod), &cfg, &settings(), &inv, now());
    assert_eq!(codes(&d), [Code::InheritFirstPool]);
    let after = apply(&pod, &d.patch).unwrap();
    assert_eq!(
        after["spec"], pod["spec"],
        "the Pod's storage is the operator's"
    );
    assert_eq!(
        annotation(&after, ANN_TEMPLATE_HASH),
        Some(template_hash(&pool).as_str())
    );
    assert_eq!(
        annotation(&after, ANN_DATA_VOLUME_HASH),
        Some(data_volume(&pod).unwrap().hash().as_str())
    );
    let pvc = s.vtbackup_init_pvc(&pool);
    let d = decide(
        &review_of(Kind::PersistentVolumeClaim, &pvc),
        &cfg,
        &settings(),
        &inv,
        now(),
    );
    let after = apply(&pvc, &d.patch).unwrap();
    assert_eq!(after["spec"], pool);
    assert_eq!(
        annotation(&after, ANN_TEMPLATE_HASH),
        Some(template_hash(&pool).as_str())
    );
    let sched = s.scheduled_backup_pvc("daily", 1_800_000_000, &pool);
    let d = decide(
        &review_of(Kind::PersistentVolumeClaim, &sched),
        &cfg,
        &settings(),
        &inv,
        now(),
    );
    assert_eq!(
        (codes(&d), d.patch.len()),
        (vec![Code::InheritFirstPool], 0)
    );
    // Without the VitessCluster the first pool's template is unknown: no template hash.
    let d = decide(
        &review_of(Kind::Pod, &pod),
        &cfg,
        &settings(),
        &inventory(&[]),
        now(),
    );
    assert_eq!(
        codes(&d),
        [Code::InheritFirstPool, Code::FirstPoolTemplateUnknown]
    );
    let after = apply(&pod, &d.patch).unwrap();
    assert!(annotation(&after, ANN_TEMPLATE_HASH).is_none());
    assert!(annotation(&after, ANN_DATA_VOLUME_HASH).is_some());
}

#[test]
fn a_vtbackup_pvc_without_a_spec_gets_the_placeholder_added() {
    // Found by the review fuzzer: a JSON patch cannot replace a member that is missing.
    let pool = pvc_template("100Gi");
    let inv = with_cluster(&pool);
    let cfg = vtbackup_config("{useEmptyDirForInitialBackup: true}");
    let mut pvc = operator_shard().vtbackup_init_pvc(&pool);
    pvc.as_object_mut().unwrap().remove("spec");
    let d = decide(
        &review_of(Kind::PersistentVolumeClaim, &pvc),
        &cfg,
        &settings(),
        &inv,
        now(),
    );
    assert!(
        matches!(&d.patch[0], Op::Add { path, .. } if path == "/spec"),
        "{:?}",
        d.patch
    );
    let after = apply(&pvc, &d.patch).unwrap();
    assert_eq!(after["spec"], placeholder_spec());
}

#[test]
fn an_empty_dir_initial_backup_gets_an_empty_dir_and_a_placeholder_pvc() {
    let pool = pvc_template("100Gi");
    let inv = with_cluster(&pool);
    let cfg = vtbackup_config("{useEmptyDirForInitialBackup: true}");
    let s = operator_shard();
    let pod = s.vtbackup_init_pod();
    let d = decide(&review_of(Kind::Pod, &pod), &cfg, &settings(), &inv, now());
    assert_eq!(codes(&d), [Code::EmptyDirForInitialBackup]);
    let after = apply(&pod, &d.patch).unwrap();
    assert_eq!(
        after["spec"]["volumes"][1],
        json!({"name": "persistent-volume-claim", "emptyDir": {}})
    );
    assert_eq!(after["spec"]["volumes"][0], pod["spec"]["volumes"][0]);
    assert_eq!(
        after["spec"]["containers"], pod["spec"]["containers"],
        "the mount stays, on the emptyDir now"
    );
    assert_eq!(
        annotation(&after, ANN_DATA_VOLUME_HASH),
        Some(data_volume(&after).unwrap().hash().as_str()),
        "the hash is of the effective volume"
    );
    assert_ne!(
        annotation(&after, ANN_DATA_VOLUME_HASH),
        Some(data_volume(&pod).unwrap().hash().as_str())
    );
    assert_eq!(
        annotation(&after, ANN_TEMPLATE_HASH),
        Some(template_hash(&placeholder_spec()).as_str())
    );

    let pvc = s.vtbackup_init_pvc(&pool);
    let d = decide(
        &review_of(Kind::PersistentVolumeClaim, &pvc),
        &cfg,
        &settings(),
        &inv,
        now(),
    );
    assert_eq!(codes(&d), [Code::PlaceholderPvc]);
    assert!(
        matches!(&d.patch[0], Op::Replace { path, .. } if path == "/spec"),
        "{:?}",
        d.patch
    );
    let after = apply(&pvc, &d.patch).unwrap();
    assert_eq!(after["spec"], placeholder_spec());
    assert_eq!(after["spec"]["storageClassName"], PLACEHOLDER_CLASS);
    assert_eq!(
        after["metadata"]["labels"], pvc["metadata"]["labels"],
        "still the operator's PVC"
    );
    assert_eq!(
        annotation(&after, ANN_TEMPLATE_HASH),
        Some(template_hash(&placeholder_spec()).as_str())
    );

    // Scheduled backups keep the first pool's template.
    let sched = s.scheduled_backup_pvc("daily", 1_800_000_000, &pool);
    let d = decide(
        &review_of(Kind::PersistentVolumeClaim, &sched),
        &cfg,
        &settings(),
        &inv,
        now(),
    );
    assert_eq!(
        (codes(&d), d.patch.len()),
        (vec![Code::InheritFirstPool], 0)
    );
    // Tablets' PVCs are not vtbackup's.
    let tablet = s.tablet("replica", 1).pvc(&pool);
    let d = decide(
        &review_of(Kind::PersistentVolumeClaim, &tablet),
        &cfg,
        &settings(),
        &inv,
        now(),
    );
    assert_eq!((codes(&d), d.patch.len()), (vec![Code::RestoreDisabled], 0));
}

#[test]
fn a_data_volume_the_pools_extra_volumes_chose_is_kept() {
    let cfg = vtbackup_config("{useEmptyDirForInitialBackup: true}");
    let inv = with_cluster(&pvc_template("100Gi"));
    let s = operator_shard();
    // extraVolumes replaced the data volume by name.
    let pod = with_extra_volume(
        s.vtbackup_init_pod(),
        json!({"name": "persistent-volume-claim", "hostPath": {"path": "/scratch"}}),
    );
    let d = decide(&review_of(Kind::Pod, &pod), &cfg, &settings(), &inv, now());
    assert_eq!(codes(&d), [Code::DataVolumeOverridden]);
    let after = apply(&pod, &d.patch).unwrap();
    assert_eq!(after["spec"], pod["spec"]);
    assert_eq!(
        annotation(&after, ANN_DATA_VOLUME_HASH),
        Some(data_volume(&pod).unwrap().hash().as_str())
    );
    // extraVolumeMounts put /vt/vtdataroot on another volume.
    let pod = with_extra_mount(
        with_extra_volume(
            s.vtbackup_init_pod(),
            json!({"name": "scratch", "emptyDir": {"sizeLimit": "20Gi"}}),
        ),
        json!({"name": "scratch", "mountPath": "/vt/vtdataroot"}),
    );
    let d = decide(&review_of(Kind::Pod, &pod), &cfg, &settings(), &inv, now());
    assert_eq!(codes(&d), [Code::DataVolumeOverridden]);
    assert_eq!(apply(&pod, &d.patch).unwrap()["spec"], pod["spec"]);
    // No vtbackup container mounting the data root.
    let mut odd = s.vtbackup_init_pod();
    odd["spec"]["containers"][0]["name"] = json!("other");
    let d = decide(&review_of(Kind::Pod, &odd), &cfg, &settings(), &inv, now());
    assert_eq!((codes(&d), d.patch.len()), (vec![Code::NoDataMount], 0));
}

#[test]
fn a_vtbackup_template_becomes_the_spec_of_initial_and_scheduled_backup_pvcs() {
    let pool = pvc_template("100Gi");
    let inv = with_cluster(&pool);
    let cfg = vtbackup_config(
        "{dataVolumeClaimTemplate: {storageClassName: cheap-disk, accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}}}",
    );
    let s = operator_shard();
    let want_hash = template_hash(&own_template());
    let pod = s.vtbackup_init_pod();
    let d = decide(&review_of(Kind::Pod, &pod), &cfg, &settings(), &inv, now());
    assert_eq!(codes(&d), [Code::VtbackupTemplate]);
    let after = apply(&pod, &d.patch).unwrap();
    assert_eq!(after["spec"], pod["spec"]);
    assert_eq!(
        annotation(&after, ANN_TEMPLATE_HASH),
        Some(want_hash.as_str())
    );
    for pvc in [
        s.vtbackup_init_pvc(&pool),
        s.scheduled_backup_pvc("daily", 1_800_000_000, &pool),
    ] {
        let d = decide(
            &review_of(Kind::PersistentVolumeClaim, &pvc),
            &cfg,
            &settings(),
            &inv,
            now(),
        );
        assert_eq!(codes(&d), [Code::VtbackupTemplate]);
        let after = apply(&pvc, &d.patch).unwrap();
        assert_eq!(after["spec"], own_template());
        assert_eq!(
            annotation(&after, ANN_TEMPLATE_HASH),
            Some(want_hash.as_str())
        );
        assert_eq!(after["metadata"]["name"], pvc["metadata"]["name"]);
    }
    // The more specific level's choice replaces the other (an emptyDir shard in a
    // template cluster).
    let cfg = config(
        "  vtbackup: {dataVolumeClaimTemplate: {resources: {requests: {storage: 10Gi}}}}\n  keyspaces:\n    commerce:\n      vtbackup: {useEmptyDirForInitialBackup: true}\n",
    );
    let d = decide(
        &review_of(Kind::PersistentVolumeClaim, &s.vtbackup_init_pvc(&pool)),
        &cfg,
        &settings(),
        &inv,
        now(),
    );
    assert_eq!(codes(&d), [Code::PlaceholderPvc]);
}

// ---- a property: whatever the snapshots, the one chosen is usable and the newest ------

fn arb_snap() -> impl Strategy<Value = (f64, bool, bool, u8, u8, bool)> {
    (
        0.0f64..100.0,
        any::<bool>(),
        any::<bool>(),
        0u8..3,
        60u8..70,
        any::<bool>(),
    )
}

proptest! {
    #[test]
    fn the_chosen_snapshot_is_usable_and_no_usable_one_is_newer(specs in proptest::collection::vec(arb_snap(), 0..12)) {
        let versions = ["8.0.36", "8.4.3", "10.11.18-MariaDB"];
        let snaps: Vec<Snap> = specs.iter().enumerate().map(|(i, (age, ready, failed, v, size_gi, unusable))| Snap {
            ready: *ready,
            phase: if *failed { "failed" } else if *ready { "ready" } else { "cut" },
            version: versions[usize::from(*v)],
            flavor: if *v == 2 { "mariadb" } else { "mysql" },
            size: Some(Box::leak(format!("{size_gi}Gi").into_boxed_str())),
            unusable: unusable.then_some("purged"),
            ..snap(&format!("s{i:02}"), *age)
        }).collect();
        let usable = |s: &Snap| s.ready && s.phase == "ready" && s.unusable.is_none()
            && s.age_h < 48.0 && s.version == "8.0.36" && s.size.is_some_and(|z| z.trim_end_matches("Gi").parse::<u32>().unwrap() <= 64);
        let pvc = new_pvc("64Gi");
        let d = decide_pvc(&enabled(), &inventory(&snaps), &pvc);
        match restored_from(&d, &pvc) {
            Some(name) => {
                let chosen = snaps.iter().find(|s| s.name == name).unwrap();
                prop_assert!(usable(chosen), "chose an unusable snapshot {name}");
                prop_assert!(snaps.iter().filter(|s| usable(s)).all(|s| s.age_h >= chosen.age_h - 1e-6 || s.name == name));
            }
            None => prop_assert!(!snaps.iter().any(usable), "left alone though one was usable: {d:?}"),
        }
    }
}

/// `restore.requireDrill`: only a snapshot whose last drill passed (at a time that can be
/// true) is offered; without it, drills change nothing.
#[test]
fn require_drill_offers_only_snapshots_whose_drill_passed() {
    // Each record names its own snapshot (`uid-<name>`, cut `age_h` hours ago).
    let record = |name: &str, age_h: f64, h: f64, result: &str| {
        let (at, cut) = (hours_ago(h), hours_ago(age_h));
        Some(format!(
            r#"{{"result":"{result}","at":"{at}","snapshotUid":"uid-{name}","cut":"{cut}","rto":{{"pvcBoundMs":1,"restoreMs":2,"mysqldReadyMs":3}}}}"#
        ))
        .map(|r| {
            if result == "failed" {
                r.replace(r#""rto""#, r#""reason":"table shop.orders: corrupt","rto""#)
            } else {
                r
            }
        })
    };
    let snaps = || {
        vec![
            Snap {
                drill: record("s-failed", 1.0, 0.5, "failed"),
                ..snap("s-failed", 1.0)
            },
            snap("s-undrilled", 2.0),
            Snap {
                drill: record("s-future", 3.0, -1.0, "passed"),
                ..snap("s-future", 3.0)
            },
            Snap {
                drill: record("s-drilled", 5.0, 4.0, "passed"),
                ..snap("s-drilled", 5.0)
            },
            snap("s-old", 6.0),
        ]
    };
    let pvc = new_pvc("100Gi");
    let required = config("  restore: {enabled: true, requireDrill: true}\n");
    let d = decide_pvc(&required, &inventory(&snaps()), &pvc);
    assert_eq!(
        restored_from(&d, &pvc).as_deref(),
        Some("s-drilled"),
        "{d:#?}"
    );
    // Off (the default): the newest usable one, drilled or not.
    let d = decide_pvc(&enabled(), &inventory(&snaps()), &pvc);
    assert_eq!(
        restored_from(&d, &pvc).as_deref(),
        Some("s-failed"),
        "{d:#?}"
    );
    // None passed: the PVC is left as created and the Event names each reason.
    let mut none = snaps();
    none.retain(|s| s.name != "s-drilled");
    let d = decide_pvc(&required, &inventory(&none), &pvc);
    assert_eq!(codes(&d), [Code::NoUsableSnapshot]);
    let msg = &d.notes[0].message;
    for want in [
        "s-failed: its drill failed: \"table shop.orders: corrupt\" (restore.requireDrill)",
        "s-undrilled: no passed drill (restore.requireDrill)",
        "s-future: no passed drill: \"its record is dated",
    ] {
        assert!(msg.contains(want), "{want}: {msg}");
    }
}

/// Round three, item 1: with `restore.requireDrill`, a record dated before its snapshot
/// existed, or copied from another snapshot, proves nothing: the older snapshot whose own
/// drill passed is offered instead of the newer one carrying such a record.
#[test]
fn require_drill_ignores_records_not_made_for_the_snapshot() {
    let passed = |name: &str, cut_h: f64, at: &str| {
        Some(format!(
            r#"{{"result":"passed","at":"{at}","snapshotUid":"uid-{name}","cut":"{}"}}"#,
            hours_ago(cut_h)
        ))
    };
    let older = passed("s-older", 5.0, &hours_ago(4.0).to_string());
    let pvc = new_pvc("100Gi");
    let required = config("  restore: {enabled: true, requireDrill: true}\n");
    for (newest, want) in [
        // Dated 2020, long before the snapshot was cut.
        (
            passed("s-newest", 1.0, "2020-01-01T00:00:00Z"),
            "before the snapshot's cut",
        ),
        // s-older's record, copied verbatim.
        (older.clone(), "made for another snapshot"),
        // A record of an earlier version that names no snapshot.
        (
            Some(r#"{"result":"passed","at":"2026-11-29T11:00:00Z"}"#.into()),
            "missing field `snapshotUid`",
        ),
    ] {
        let snaps = vec![
            Snap {
                drill: newest,
                ..snap("s-newest", 1.0)
            },
            Snap {
                drill: older.clone(),
                ..snap("s-older", 5.0)
            },
        ];
        let d = decide_pvc(&required, &inventory(&snaps), &pvc);
        assert_eq!(
            restored_from(&d, &pvc).as_deref(),
            Some("s-older"),
            "{want}: {d:#?}"
        );
        // Without the older one, nothing is offered, and the Event says why.
        let d = decide_pvc(&required, &inventory(&snaps[..1]), &pvc);
        assert_eq!(codes(&d), [Code::NoUsableSnapshot]);
        assert!(
            d.notes[0].message.contains(want),
            "{want}: {:?}",
            d.notes[0]
        );
        // With requireDrill off, such a record neither helps nor strands the snapshot.
        let d = decide_pvc(&enabled(), &inventory(&snaps), &pvc);
        assert_eq!(restored_from(&d, &pvc).as_deref(), Some("s-newest"));
    }
    // Round three, item 13: an unreadable record strands nothing: with requireDrill off
    // the snapshot is offered; with it on, it is simply not drilled.
    let snaps = vec![Snap {
        drill: Some("{not json".into()),
        ..snap("s-garbled", 1.0)
    }];
    let d = decide_pvc(&enabled(), &inventory(&snaps), &pvc);
    assert_eq!(
        restored_from(&d, &pvc).as_deref(),
        Some("s-garbled"),
        "{d:#?}"
    );
    let d = decide_pvc(&required, &inventory(&snaps), &pvc);
    assert!(
        d.notes[0]
            .message
            .contains("s-garbled: no passed drill: \"its record is not a drill record"),
        "{:?}",
        d.notes[0]
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
