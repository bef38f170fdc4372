//! What a decision may consult besides the object under review: the shard's snapshots,
//! what vtctld last said about the shard, the shard's first pool template and the tablet
//! PVCs — each already typed (core's snapshot and shard-state types; [`crate::observe`]
//! for the rest).
//!
//! The server answers from watch-backed caches ([`crate::cache`]) and a background vtctld
//! refresh ([`crate::tablets`]), with a PVC it read on a cache miss laid over them
//! ([`Overlay`]); the offline `review` from a dump ([`Dump`]). Both are read through
//! [`Inventory`], so a decision is the same function of the same values.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use serde_json::Value;
use vtsnap_core::shard::ShardRef;
use vtsnap_core::snapshot::choice::ShardState;
use vtsnap_core::snapshot::{SnapshotRead, VolumeSnapshot};

use crate::observe::{FirstPoolUnknown, PvcRead, PvcTemplate, read_pvc};

pub trait Inventory {
    /// Whether every cache has been filled once (before, nothing is decided from it).
    fn synced(&self) -> bool;
    /// The shard's VolumeSnapshots (vtsnap's, by their labels).
    fn snapshots(&self, shard: &ShardRef) -> Vec<SnapshotRead>;
    fn shard_state(&self, shard: &ShardRef) -> Option<ShardState>;
    /// The `dataVolumeClaimTemplate` of the shard's first tablet pool, from its
    /// VitessCluster (what vtbackup objects inherit).
    fn first_pool_template(&self, shard: &ShardRef) -> Result<PvcTemplate, FirstPoolUnknown>;
    /// A tablet PVC.
    fn pvc(&self, namespace: &str, name: &str) -> Option<PvcRead>;
}

/// An inventory held in memory: from a `kubectl get -o json` dump (offline review) or
/// built by a test.
#[derive(Debug, Clone, Default)]
pub struct Dump {
    snapshots: Vec<Value>,
    clusters: BTreeMap<(String, String), Value>,
    pvcs: BTreeMap<(String, String), PvcRead>,
    shards: BTreeMap<ShardRef, ShardState>,
}

fn meta<'a>(v: &'a Value, field: &str) -> &'a str {
    v.pointer(&format!("/metadata/{field}"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

impl Dump {
    /// Adds one object of the kinds the webhook reads; others are ignored. A PVC that does
    /// not read is kept with its reason.
    pub fn add(&mut self, obj: Value) {
        let key = (
            meta(&obj, "namespace").to_owned(),
            meta(&obj, "name").to_owned(),
        );
        match obj.get("kind").and_then(Value::as_str) {
            Some("VolumeSnapshot") if VolumeSnapshot::is_vtsnaps(&obj) => self.snapshots.push(obj),
            Some("VitessCluster") => {
                self.clusters.insert(key, obj);
            }
            Some("PersistentVolumeClaim") => {
                self.pvcs.insert(key, read_pvc(&obj));
            }
            _ => {}
        }
    }

    pub fn set_shard_state(&mut self, s: ShardState) {
        self.shards.insert(s.key.clone(), s);
    }
}

impl Inventory for Dump {
    fn synced(&self) -> bool {
        true
    }

    fn snapshots(&self, shard: &ShardRef) -> Vec<SnapshotRead> {
        self.snapshots
            .iter()
            .filter(|s| VolumeSnapshot::is_of_shard(s, shard))
            .map(VolumeSnapshot::read)
            .collect()
    }

    fn shard_state(&self, shard: &ShardRef) -> Option<ShardState> {
        self.shards.get(shard).cloned()
    }

    fn first_pool_template(&self, shard: &ShardRef) -> Result<PvcTemplate, FirstPoolUnknown> {
        let cluster = self
            .clusters
            .get(&(shard.namespace.clone(), shard.cluster.clone()))
            .ok_or_else(|| FirstPoolUnknown::NoCluster {
                cluster: shard.cluster.clone(),
            })?;
        PvcTemplate::first_pool(cluster, shard)
    }

    fn pvc(&self, namespace: &str, name: &str) -> Option<PvcRead> {
        self.pvcs
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }
}

/// An inventory with one PVC read outside the caches (a cache miss the server filled).
pub struct Overlay<'a> {
    base: &'a dyn Inventory,
    pvc: Option<PersistentVolumeClaim>,
}

impl std::fmt::Debug for Overlay<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Overlay")
            .field("pvc", &self.pvc.is_some())
            .finish_non_exhaustive()
    }
}

impl<'a> Overlay<'a> {
    pub fn new(base: &'a dyn Inventory, pvc: Option<PersistentVolumeClaim>) -> Self {
        Self { base, pvc }
    }
}

impl Inventory for Overlay<'_> {
    fn synced(&self) -> bool {
        self.base.synced()
    }

    fn snapshots(&self, shard: &ShardRef) -> Vec<SnapshotRead> {
        self.base.snapshots(shard)
    }

    fn shard_state(&self, shard: &ShardRef) -> Option<ShardState> {
        self.base.shard_state(shard)
    }

    fn first_pool_template(&self, shard: &ShardRef) -> Result<PvcTemplate, FirstPoolUnknown> {
        self.base.first_pool_template(shard)
    }

    fn pvc(&self, namespace: &str, name: &str) -> Option<PvcRead> {
        let mine = self.pvc.as_ref().filter(|p| {
            p.metadata.namespace.as_deref() == Some(namespace)
                && p.metadata.name.as_deref() == Some(name)
        });
        match mine {
            Some(p) => Some(Ok(p.clone())),
            None => self.base.pvc(namespace, name),
        }
    }
}
