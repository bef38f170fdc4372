//! The doctor's storage checks, pure: the VolumeSnapshotClass of the tablets' driver, the
//! StorageClass's binding mode, and the tablet volumes' topology, each against the policy
//! of the shards whose PVCs use them.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::StorageClass;
use vtsnap_core::config::{Config, ResolvedPolicy, resolve_in};

use super::objects::{SnapshotDeletion, TabletPvc};
use super::world::{Check, World};

/// The resolved policy of a tablet PVC's shard, if its cluster is configured.
fn policy_of(config: &Config, pvc: &TabletPvc) -> Option<ResolvedPolicy> {
    let shard = &pvc.shard;
    let cluster = config.cluster_in(&shard.namespace, &shard.cluster)?;
    Some(resolve_in(
        cluster,
        &shard.keyspace,
        &shard.shard.to_string(),
    ))
}

/// A tablet PVC's StorageClass by name ("" when it names none: then no class is found).
fn class_of(pvc: &TabletPvc) -> &str {
    pvc.storage_class.as_deref().unwrap_or_default()
}

/// The StorageClass named `name`.
fn storage_class_named<'a>(classes: &'a [StorageClass], name: &str) -> Option<&'a StorageClass> {
    classes
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(name))
}

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
        .map_or_else(|| "the config is not valid".to_owned(), ToString::to_string);
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
        groups
            .entry((class, class_of(p).to_owned()))
            .or_default()
            .push(p.key.to_string());
    }
    if groups.is_empty() {
        return vec![Check::warn(
            ID,
            "no tablet PVC of a configured cluster found: nothing to snapshot yet",
            "check config.clusters' names and namespaces against the VitessClusters",
        )];
    }
    groups
        .into_iter()
        .map(|((class, storage_class), pvcs)| {
            let driver = storage_class_named(storage, &storage_class)
                .map(|sc| sc.provisioner.as_str())
                .unwrap_or_default();
            let example = &pvcs[0];
            let found = match &class {
                Some(name) => classes.iter().find(|c| &c.name == name),
                None => classes.iter().find(|c| c.default && c.driver == driver),
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
            let name = &vsc.name;
            if vsc.driver != driver {
                return Check::fail(
                    ID,
                    format!(
                        "VolumeSnapshotClass {name} is of driver {:?}, the tablet PVCs' StorageClass {storage_class} of {driver:?} (e.g. {example})",
                        vsc.driver
                    ),
                    "set snapshot.volumeSnapshotClassName to a class of the tablets' CSI driver",
                );
            }
            if vsc.deletion_policy == SnapshotDeletion::Retain {
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
        let class = class_of(p);
        let mode = storage_class_named(storage, class)
            .and_then(|c| c.volume_binding_mode.as_deref())
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
pub fn pinned_node(pv: &PersistentVolume) -> Option<String> {
    let per_node = |key: &str| {
        let name = key.rsplit('/').next().unwrap_or(key);
        matches!(name, "hostname" | "node" | "nodename" | "node-name")
    };
    let spec = pv.spec.as_ref();
    let terms = spec
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
        .map(|r| r.node_selector_terms.as_slice());
    let mut nodes: BTreeSet<&str> = BTreeSet::new();
    for term in terms.into_iter().flatten() {
        let one = term.match_expressions.iter().flatten().find_map(|e| {
            let values = e.values.as_deref()?;
            let single = values.len() == 1 && e.operator == "In";
            (per_node(&e.key) && single).then(|| values[0].as_str())
        });
        // A term without a per-node pin allows other nodes: the volume is not node-local.
        nodes.insert(one?);
    }
    let local = spec.is_some_and(|s| s.local.is_some());
    match (nodes.len(), local) {
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
        let Some(volume) = p.volume.as_deref() else {
            continue;
        };
        let Some(pv) = volumes
            .iter()
            .find(|v| v.metadata.name.as_deref() == Some(volume))
        else {
            continue;
        };
        seen += 1;
        let class = class_of(p).to_owned();
        let pvc = p.key.to_string();
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
