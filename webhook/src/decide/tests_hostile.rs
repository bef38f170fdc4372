//! Objects vtsnap did not write, or that contradict themselves: each is left unpinned,
//! left without the init container, or left unchanged, with a reason, and the object is
//! never made invalid. Snapshots of that kind are passed over by core's rule (its
//! `tests_hostile`); here, what the webhook makes of that.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use vtsnap_core::snapshot::ANN_SOURCE_NODE;
use vtsnap_testkit::operator_objects::{operator_shard, pvc_template};

use super::tests::{
    codes, decide_pvc, enabled, healthy_state, inventory, new_pvc, now, review_of, settings, snap,
};
use super::tests_pod::node_local;
use super::tests_vtbackup::{vtbackup_config, with_cluster};
use super::*;
use crate::inventory::Dump;
use crate::observe::Kind;
use crate::patch::apply;
use vtsnap_core::restore_pod::CONTAINER as RESTORE_CONTAINER;
use vtsnap_core::restored::ANN_RESTORE_NODE;

/// The shard's inventory holding exactly these snapshot objects.
fn inventory_of(objects: Vec<Value>) -> Dump {
    let mut d = inventory(&[]);
    for o in objects {
        d.add(o);
    }
    d.set_shard_state(healthy_state(&operator_shard(), &["8.0.36"]));
    d
}

// ---- node-local pins ----------------------------------------------------------------

/// A DNS subdomain of `n` characters (a valid node name).
fn node_name(n: usize) -> String {
    let mut s: String = "node-".into();
    while s.len() < n {
        s.push(if s.len().is_multiple_of(20) { '.' } else { 'a' });
    }
    s
}

fn node_local_decision(node: &str) -> (Value, Decision) {
    let mut o = snap("s", 1.0).object();
    o["metadata"]["annotations"][ANN_SOURCE_NODE] = json!(node);
    let pvc = new_pvc("100Gi");
    let d = decide_pvc(&node_local(), &inventory_of(vec![o]), &pvc);
    (pvc, d)
}

#[test]
fn a_source_node_a_node_selector_cannot_name_is_not_restored_onto() {
    // 84 characters: a valid node name, not a label value; before, the Pod was refused.
    let long = node_name(84);
    assert!(vtsnap_core::k8s_names::is_dns_subdomain(&long));
    let (_, d) = node_local_decision(&long);
    assert_eq!(codes(&d), [Code::NoUsableSnapshot], "{d:#?}");
    assert!(
        d.notes[0]
            .message
            .contains("cannot be pinned with a nodeSelector (not a label value: must be at most 63 characters (is 84)"),
        "{}",
        d.notes[0].message
    );
    // 63 is a label value: restored, and the node recorded for the Pod.
    let ok = node_name(63);
    let (pvc, d) = node_local_decision(&ok);
    assert_eq!(codes(&d), [Code::RestoredFromSnapshot], "{d:#?}");
    let after = apply(&pvc, &d.patch).unwrap();
    assert_eq!(
        after["metadata"]["annotations"][ANN_RESTORE_NODE],
        json!(ok)
    );
    let (_, d) = node_local_decision(&node_name(64));
    assert_eq!(codes(&d), [Code::NoUsableSnapshot], "64: {d:#?}");
    // A label value that is no node name.
    let (_, d) = node_local_decision("Node_1");
    assert!(
        d.notes[0].message.contains("(not a node name: "),
        "{}",
        d.notes[0].message
    );
    // Not node-local: the node is not needed, so not judged.
    let mut o = snap("s", 1.0).object();
    o["metadata"]["annotations"][ANN_SOURCE_NODE] = json!(long);
    let d = decide_pvc(&enabled(), &inventory_of(vec![o]), &new_pvc("100Gi"));
    assert_eq!(codes(&d), [Code::RestoredFromSnapshot]);
}

fn pod_decision(pvc_node: Option<&str>, pod: &Value) -> Decision {
    let mut inv = inventory(&[]);
    let mut pvc = operator_shard()
        .tablet("replica", 4)
        .pvc(&vtsnap_testkit::operator_objects::pvc_template("100Gi"));
    if let Some(n) = pvc_node {
        pvc["metadata"]["annotations"] = json!({ANN_RESTORE_NODE: n});
    }
    inv.add(pvc);
    decide(
        &review_of(Kind::Pod, pod),
        &node_local(),
        &settings(),
        &inv,
        now(),
    )
}

#[test]
fn a_restore_node_that_is_no_label_value_leaves_the_pod_unpinned() {
    let pod = operator_shard().tablet("replica", 4).pod();
    let d = pod_decision(Some(&node_name(84)), &pod);
    assert_eq!(
        codes(&d),
        [Code::RestoreContainerAdded, Code::RestoreNodeUnpinnable],
        "{d:#?}"
    );
    let after = apply(&pod, &d.patch).unwrap();
    assert!(after["spec"].get("nodeSelector").is_none(), "{after:#}");
    let ev = d.event.unwrap();
    assert_eq!((ev.reason, ev.warning), ("RestoreNotPinned", true));
    assert!(ev.message.contains("not a label value"), "{}", ev.message);
    // An empty one is not a node either.
    let d = pod_decision(Some(""), &pod);
    assert!(codes(&d).contains(&Code::RestoreNodeUnpinnable), "{d:#?}");
    // A valid one pins.
    let d = pod_decision(Some(&node_name(63)), &pod);
    assert_eq!(
        codes(&d),
        [Code::RestoreContainerAdded, Code::PinnedToSourceNode]
    );
    assert!(d.event.is_none());
}

// ---- the init container's name ------------------------------------------------------

#[test]
fn a_container_already_named_vtsnap_restore_keeps_the_init_container_out() {
    let pod = operator_shard().tablet("replica", 4).pod();
    for list in ["containers", "ephemeralContainers"] {
        let mut clash = pod.clone();
        if clash["spec"].get(list).is_none() {
            clash["spec"][list] = json!([]);
        }
        clash["spec"][list]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": RESTORE_CONTAINER, "image": "mine"}));
        let d = pod_decision(Some("node-2"), &clash);
        assert_eq!(
            codes(&d),
            [Code::RestoreContainerNameTaken, Code::PinnedToSourceNode],
            "{list}: {d:#?}"
        );
        let after = apply(&clash, &d.patch).unwrap();
        let names = |l: &str| -> Vec<String> {
            after["spec"][l]
                .as_array()
                .map(|cs| {
                    cs.iter()
                        .map(|c| c["name"].as_str().unwrap().to_owned())
                        .collect()
                })
                .unwrap_or_default()
        };
        assert!(!names("initContainers").contains(&RESTORE_CONTAINER.to_owned()));
        // Still pinned: the PVC restores only there.
        assert_eq!(
            after["spec"]["nodeSelector"],
            json!({"topology.topolvm.io/node": "node-2"})
        );
        let ev = d.event.as_ref().unwrap();
        assert_eq!((ev.reason, ev.warning), ("RestoreContainerNotAdded", true));
        assert!(
            ev.message.contains(&format!("spec.{list}")),
            "{}",
            ev.message
        );
    }
    // Already an init container: as before, nothing added and no Event.
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
        (codes(&d), d.patch.len(), d.event),
        (vec![Code::RestoreContainerPresent], 0, None)
    );
}

// ---- messages -----------------------------------------------------------------------

#[test]
fn a_size_given_as_a_number_is_said_to_be_one() {
    let inv = inventory(&[snap("s", 1.0)]);
    let mut pvc = new_pvc("100Gi");
    pvc["spec"]["resources"]["requests"]["storage"] = json!(5_368_709_120_u64);
    let d = decide_pvc(&enabled(), &inv, &pvc);
    assert_eq!(codes(&d), [Code::SizeUnreadable]);
    assert_eq!(
        d.notes[0].message,
        "spec.resources.requests.storage is the number 5368709120, not a quantity string (\"5368709120\")"
    );
    pvc["spec"]["resources"]["requests"]["storage"] = json!(["1Gi"]);
    let d = decide_pvc(&enabled(), &inv, &pvc);
    assert_eq!(
        d.notes[0].message,
        "spec.resources.requests.storage is a list, not a quantity string"
    );
    pvc["spec"]["resources"]["requests"]["storage"] = json!("lots");
    let d = decide_pvc(&enabled(), &inv, &pvc);
    assert!(
        d.notes[0]
            .message
            .starts_with("spec.resources.requests.storage: "),
        "{}",
        d.notes[0].message
    );
    pvc["spec"]["resources"]["requests"] = json!({});
    let d = decide_pvc(&enabled(), &inv, &pvc);
    assert_eq!(
        d.notes[0].message,
        "spec.resources.requests.storage is missing"
    );
}

#[test]
fn control_characters_from_objects_reach_no_message_unescaped() {
    let mut pvc = new_pvc("100Gi");
    pvc["metadata"]["name"] = json!("p\u{1b}[2J\u{7}");
    let mut bad = snap("s-\u{1b}]0;owned\u{7}", 1.0).object();
    bad["metadata"]["annotations"]["vtsnap.io/unusable"] = json!("purged\u{1b}[31m");
    let d = decide_pvc(&enabled(), &inventory_of(vec![bad]), &pvc);
    let ev = d.event.as_ref().unwrap();
    for text in [&d.notes[0].message, &ev.message] {
        assert!(!text.chars().any(char::is_control), "{text:?}");
        assert!(text.contains("\\u{1b}"), "{text}");
    }
    assert!(
        ev.message
            .starts_with("PVC p\\u{1b}[2J\\u{7} provisioned normally"),
        "{}",
        ev.message
    );
    assert!(
        d.notes[0]
            .message
            .contains("marked unusable: \"purged\\u{1b}[31m\"")
    );
    // A Pod's name in a conflict note.
    let mut pod = operator_shard().tablet("replica", 4).pod();
    pod["metadata"]["name"] = json!("pod\u{9b}x");
    pod["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": RESTORE_CONTAINER}));
    let d = pod_decision(None, &pod);
    assert!(
        d.notes[0].message.contains("Pod \"pod\\u{9b}x\""),
        "{:?}",
        d.notes
    );
    assert!(!d.event.unwrap().message.chars().any(char::is_control));
}

#[test]
fn event_notes_carry_their_severity() {
    let n = EventNote::new("R", "m\u{0}", Severity::Normal);
    assert_eq!(
        (n.reason, n.message.as_str(), n.warning),
        ("R", "m\\u{0}", false)
    );
    assert!(EventNote::new("R", "m", Severity::Warning).warning);
}

// ---- vtbackup objects that contradict themselves ------------------------------------

#[test]
fn a_vtbackup_object_whose_labels_contradict_it_is_left_unchanged() {
    let pool = pvc_template("100Gi");
    let inv = with_cluster(&pool);
    let cfg = vtbackup_config("{useEmptyDirForInitialBackup: true}");
    let s = operator_shard();
    // Each would get the emptyDir or the placeholder spec if it were what it claims.
    let mut renamed = s.vtbackup_init_pvc(&pool);
    renamed["metadata"]["name"] = json!("someone-elses-pvc");
    let mut tablet_pod = s.vtbackup_init_pod();
    tablet_pod["metadata"]["labels"]["planetscale.com/tablet-uid"] = json!("101");
    let mut owned = s.vtbackup_init_pvc(&pool);
    owned["metadata"]["ownerReferences"] =
        json!([{"kind": "StatefulSet", "name": "x", "controller": true}]);
    for (what, kind, obj, words) in [
        (
            "renamed PVC",
            Kind::PersistentVolumeClaim,
            &renamed,
            "its labels call it the initial backup's PVC, but it is named",
        ),
        (
            "Pod with a tablet label",
            Kind::Pod,
            &tablet_pod,
            "its labels call it the initial backup's Pod, but it carries the tablet label",
        ),
        (
            "PVC owned by another controller",
            Kind::PersistentVolumeClaim,
            &owned,
            "controller",
        ),
    ] {
        let d = decide(&review_of(kind, obj), &cfg, &settings(), &inv, now());
        assert_eq!(codes(&d), [Code::BackupObjectConflicting], "{what}: {d:#?}");
        assert!(d.patch.is_empty(), "{what}");
        assert!(
            d.notes[0].message.contains(words),
            "{what}: {}",
            d.notes[0].message
        );
    }
    // The same objects as the operator writes them are changed.
    let d = decide(
        &review_of(Kind::PersistentVolumeClaim, &s.vtbackup_init_pvc(&pool)),
        &cfg,
        &settings(),
        &inv,
        now(),
    );
    assert_eq!(codes(&d), [Code::PlaceholderPvc]);
}
