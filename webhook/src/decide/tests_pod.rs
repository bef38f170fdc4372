//! Tablet Pods: the restore init container, and the pin of a node-local restore (the PVC
//! is decided first, as vitess-operator creates it first).

use serde_json::json;
use vtsnap_core::config::Config;
use vtsnap_testkit::operator_objects::operator_shard;

use super::tests::{
    Snap, codes, config, decide_pvc, enabled, inventory, new_pvc, now, review_of, settings, snap,
};
use super::*;
use crate::observe::Kind;
use crate::patch::{apply, restore_container};
use vtsnap_core::restore_pod::CONTAINER as RESTORE_CONTAINER;
use vtsnap_core::restored::ANN_RESTORE_NODE;

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

/// A tablet Pod without its pool label: nothing to say when restores are off, named as
/// unreadable when they are on (a Pod the webhook would have to guess about).
#[test]
fn a_pod_without_its_pool_label_is_left_alone_and_said_why() {
    let mut pod = operator_shard().tablet("replica", 4).pod();
    pod["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("planetscale.com/tablet-type");
    let inv = inventory(&[snap("s", 1.0)]);
    let decide_pod =
        |cfg: &Config| decide(&review_of(Kind::Pod, &pod), cfg, &settings(), &inv, now());
    let off = decide_pod(&config(""));
    assert_eq!(codes(&off), [Code::RestoreDisabled], "{off:#?}");
    assert!(off.patch.is_empty());
    let on = decide_pod(&enabled());
    assert_eq!(codes(&on), [Code::LabelsUnreadable], "{on:#?}");
    assert!(on.patch.is_empty());
}
