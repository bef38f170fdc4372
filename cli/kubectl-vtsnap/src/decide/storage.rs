//! The doctor's storage checks, pure: the VolumeSnapshotClass of the tablets' driver, the
//! StorageClass's binding mode, and the tablet volumes' topology, each against the policy
//! of the shards whose PVCs use them.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::fields::{policy_of, s};
use super::world::{Check, World};

pub(super) const DEFAULT_CLASS: &str = "snapshot.storage.kubernetes.io/is-default-class";

/// The configured (or default) VolumeSnapshotClass of each group of tablet PVCs: it must
/// exist and be of their StorageClass's driver; `deletionPolicy: Retain` is warned.
pub(super) fn snapshot_classes(w: &World) -> Vec<Check> {
    const ID: &str = "snapshot-class";
    let (Ok(cfg), Ok(pvcs), Ok(classes), Ok(storage)) = (
        &w.config,
        &w.tablet_pvcs,
        &w.snapshot_classes,
        &w.storage_classes,
    ) else {
        let why = [
            w.tablet_pvcs.as_ref().err(),
            w.snapshot_classes.as_ref().err(),
            w.storage_classes.as_ref().err(),
        ]
        .into_iter()
        .flatten()
        .next()
        .map_or_else(|| "the config is not valid".to_owned(), Clone::clone);
        return vec![Check::warn(
            ID,
            format!("not checked: {why}"),
            "fix what the lines above say",
        )];
    };
    // (configured class or None, StorageClass) → the PVCs that use them
    let mut groups: BTreeMap<(Option<String>, String), Vec<String>> = BTreeMap::new();
    for p in pvcs {
        let Some(policy) = policy_of(cfg, p) else {
            continue;
        };
        let class = policy.snapshot.volume_snapshot_class_name;
        let ns = s(p, "/metadata/namespace");
        groups
            .entry((class, s(p, "/spec/storageClassName").to_owned()))
            .or_default()
            .push(format!("{ns}/{}", s(p, "/metadata/name")));
    }
    if groups.is_empty() {
        return vec![Check::warn(
            ID,
            "no tablet PVC of a configured cluster found: nothing to snapshot yet",
            "check config.clusters' names and namespaces against the VitessClusters",
        )];
    }
    let by_name = |list: &'_ [Value], name: &str| -> Option<Value> {
        list.iter()
            .find(|c| s(c, "/metadata/name") == name)
            .cloned()
    };
    groups
        .into_iter()
        .map(|((class, storage_class), pvcs)| {
            let driver = by_name(storage, &storage_class)
                .map(|sc| s(&sc, "/provisioner").to_owned())
                .unwrap_or_default();
            let example = &pvcs[0];
            let found = match &class {
                Some(name) => by_name(classes, name),
                None => classes
                    .iter()
                    .find(|c| {
                        s(c, &format!("/metadata/annotations/{}", DEFAULT_CLASS.replace('/', "~1")))
                            == "true"
                            && s(c, "/driver") == driver
                    })
                    .cloned(),
            };
            let Some(vsc) = found else {
                let what = class.as_deref().map_or_else(
                    || format!("no default VolumeSnapshotClass for driver {driver:?}"),
                    |n| format!("VolumeSnapshotClass {n} does not exist"),
                );
                return Check::fail(
                    ID,
                    format!("{what} (tablet PVC {example})"),
                    "create it, or set snapshot.volumeSnapshotClassName to one of the tablets' driver",
                );
            };
            let name = s(&vsc, "/metadata/name").to_owned();
            if s(&vsc, "/driver") != driver {
                return Check::fail(
                    ID,
                    format!(
                        "VolumeSnapshotClass {name} is of driver {:?}, the tablet PVCs' StorageClass {storage_class} of {driver:?} (e.g. {example})",
                        s(&vsc, "/driver")
                    ),
                    "set snapshot.volumeSnapshotClassName to a class of the tablets' CSI driver",
                );
            }
            if s(&vsc, "/deletionPolicy") == "Retain" {
                return Check::warn(
                    ID,
                    format!(
                        "VolumeSnapshotClass {name} has deletionPolicy Retain: a snapshot the GC deletes keeps its storage (and its cost)"
                    ),
                    "use a class with deletionPolicy: Delete, or clean up VolumeSnapshotContents yourself",
                );
            }
            Check::pass(
                ID,
                format!("{name} (driver {driver}) for {} tablet PVC(s)", pvcs.len()),
            )
        })
        .collect()
}

/// Node-local restores need the tablets' StorageClass to bind on first consumer.
pub(super) fn binding_mode(w: &World) -> Vec<Check> {
    const ID: &str = "binding-mode";
    let (Ok(cfg), Ok(pvcs), Ok(storage)) = (&w.config, &w.tablet_pvcs, &w.storage_classes) else {
        return Vec::new();
    };
    let mut immediate: BTreeSet<String> = BTreeSet::new();
    for p in pvcs {
        if !policy_of(cfg, p).is_some_and(|policy| policy.restore.node_local) {
            continue;
        }
        let class = s(p, "/spec/storageClassName");
        let mode = storage
            .iter()
            .find(|c| s(c, "/metadata/name") == class)
            .map(|c| s(c, "/volumeBindingMode"))
            .unwrap_or_default();
        if mode != "WaitForFirstConsumer" {
            immediate.insert(class.to_owned());
        }
    }
    if immediate.is_empty() {
        return vec![Check::pass(
            ID,
            "node-local restores use StorageClasses that bind on first consumer",
        )];
    }
    vec![Check::warn(
        ID,
        format!(
            "restore.nodeLocal is on, but StorageClass(es) {} bind immediately: a restored volume may be made on a node the Pod cannot run on",
            immediate.into_iter().collect::<Vec<_>>().join(", ")
        ),
        "use volumeBindingMode: WaitForFirstConsumer for node-local drivers",
    )]
}

/// The node a PersistentVolume can only be used on, if it is pinned to one: a `local`
/// volume, or a `nodeAffinity` whose every term allows exactly one value of a per-node
/// topology key (`kubernetes.io/hostname`, or a driver's `…/node`, `…/nodename`,
/// `…/hostname` as node-local CSI drivers such as TopoLVM name theirs).
pub fn pinned_node(pv: &Value) -> Option<String> {
    let per_node = |key: &str| {
        let name = key.rsplit('/').next().unwrap_or(key);
        matches!(name, "hostname" | "node" | "nodename" | "node-name")
    };
    let terms = pv
        .pointer("/spec/nodeAffinity/required/nodeSelectorTerms")
        .and_then(Value::as_array);
    let mut nodes: BTreeSet<&str> = BTreeSet::new();
    for term in terms.into_iter().flatten() {
        let one = term
            .get("matchExpressions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find_map(|e| {
                let values = e.get("values").and_then(Value::as_array)?;
                let key = e.get("key").and_then(Value::as_str)?;
                let single =
                    values.len() == 1 && e.get("operator").and_then(Value::as_str) == Some("In");
                (per_node(key) && single)
                    .then(|| values[0].as_str())
                    .flatten()
            });
        // A term without a per-node pin allows other nodes: the volume is not node-local.
        nodes.insert(one?);
    }
    match (nodes.len(), pv.pointer("/spec/local").is_some()) {
        (1, _) => nodes.into_iter().next().map(str::to_owned),
        (0, true) => Some("?".to_owned()),
        _ => None,
    }
}

/// `restore.nodeLocal` against where the tablet volumes can be used: a node-local volume
/// restored on another node cannot reach its snapshot (fail); pinning restores of volumes
/// that are not node-local narrows scheduling for nothing (warn).
pub(super) fn topology(w: &World) -> Vec<Check> {
    const ID: &str = "topology";
    let Ok(cfg) = &w.config else {
        return Vec::new();
    };
    let (pvcs, volumes) = match (&w.tablet_pvcs, &w.tablet_volumes) {
        (Ok(p), Ok(v)) => (p, v),
        (Err(e), _) | (_, Err(e)) => {
            return vec![Check::warn(
                ID,
                format!("not checked: {e}"),
                "run doctor as a user who may list persistentvolumes",
            )];
        }
    };
    // StorageClass → examples
    let mut local_unpinned: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut pinned_needlessly: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut seen = 0usize;
    for p in pvcs {
        let Some(policy) = policy_of(cfg, p) else {
            continue;
        };
        let volume = s(p, "/spec/volumeName");
        let Some(pv) = volumes
            .iter()
            .find(|v| !volume.is_empty() && s(v, "/metadata/name") == volume)
        else {
            continue;
        };
        seen += 1;
        let class = s(p, "/spec/storageClassName").to_owned();
        let pvc = format!("{}/{}", s(p, "/metadata/namespace"), s(p, "/metadata/name"));
        match (pinned_node(pv), policy.restore.node_local) {
            (Some(node), false) => local_unpinned
                .entry(class)
                .or_default()
                .push(format!("{pvc} (PV {volume} only on node {node})")),
            (None, true) => pinned_needlessly.entry(class).or_default().push(pvc),
            _ => {}
        }
    }
    let mut out: Vec<Check> = local_unpinned
        .into_iter()
        .map(|(class, examples)| {
            Check::fail(
                ID,
                format!(
                    "tablet volumes of StorageClass {class} are node-local, e.g. {}, but restore.nodeLocal is off: a tablet restored on another node cannot use its snapshot",
                    examples[0]
                ),
                "set restore.nodeLocal: true for these clusters (restored tablets are then pinned to their snapshot's node)",
            )
        })
        .collect();
    out.extend(pinned_needlessly.into_iter().map(|(class, examples)| {
        Check::warn(
            ID,
            format!(
                "restore.nodeLocal is on, but the tablet volumes of StorageClass {class} are not pinned to a node (e.g. {}): restored tablets are kept to their snapshot's node for nothing",
                examples[0]
            ),
            "set restore.nodeLocal: false unless the driver's snapshots can only be restored on their node",
        )
    }));
    if out.is_empty() {
        out.push(Check::pass(
            ID,
            if seen == 0 {
                "no bound tablet volume yet".to_owned()
            } else {
                format!("restore.nodeLocal matches the topology of {seen} bound tablet volume(s)")
            },
        ));
    }
    out
}
