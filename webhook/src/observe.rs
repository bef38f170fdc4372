//! What a decision may consult besides the object under review: the shard's snapshots,
//! what vtctld last said about the shard, the VitessCluster's spec and the tablet PVCs.
//!
//! The server answers from watch-backed caches ([`crate::cache`]) and a background
//! vtctld refresh ([`crate::tablets`]); the offline `review` from a dump ([`Dump`]). Both
//! are read through [`Inventory`], so a decision is the same function of the same values.

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use vtsnap_core::shard::ShardRef;
use vtsnap_core::snapshot::{ReadError, VolumeSnapshot};

/// One tablet's MySQL version as vtctld's `GetFullStatus` reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TabletVersion {
    pub alias: String,
    /// `None`: the tablet did not answer.
    pub version: Option<String>,
}

/// What vtctld said about a shard at `refreshed_at` (`GET /debug/shards` on the server).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardState {
    pub key: ShardRef,
    /// The shard record's primary.
    pub primary: Option<String>,
    pub tablets: Vec<TabletVersion>,
    pub refreshed_at: Timestamp,
    /// Why the last refresh failed (the state is then empty).
    pub error: Option<String>,
}

/// A snapshot as read from its object.
pub type SnapshotRead = Result<VolumeSnapshot, ReadError>;

pub trait Inventory {
    /// Whether every cache has been filled once (before, nothing is decided from it).
    fn synced(&self) -> bool;
    /// The shard's VolumeSnapshots (vtsnap's, by their labels).
    fn snapshots(&self, shard: &ShardRef) -> Vec<SnapshotRead>;
    fn shard_state(&self, shard: &ShardRef) -> Option<ShardState>;
    /// A VitessCluster object.
    fn cluster(&self, namespace: &str, name: &str) -> Option<Value>;
    /// A tablet PVC object.
    fn pvc(&self, namespace: &str, name: &str) -> Option<Value>;
}

/// An inventory held in memory: from a `kubectl get -o json` dump (offline review) or
/// built by a test.
#[derive(Debug, Clone, Default)]
pub struct Dump {
    snapshots: Vec<Value>,
    clusters: BTreeMap<(String, String), Value>,
    pvcs: BTreeMap<(String, String), Value>,
    shards: BTreeMap<ShardRef, ShardState>,
}

fn meta<'a>(v: &'a Value, field: &str) -> &'a str {
    v.pointer(&format!("/metadata/{field}"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

impl Dump {
    /// Adds one object of the kinds the webhook reads; others are ignored.
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
                self.pvcs.insert(key, obj);
            }
            _ => {}
        }
    }

    pub fn set_shard_state(&mut self, s: ShardState) {
        self.shards.insert(s.key.clone(), s);
    }

    /// From a `List` (`kubectl get volumesnapshots,persistentvolumeclaims,vitessclusters -o json`).
    pub fn from_list(list: &Value) -> Result<Self, String> {
        let items = list
            .get("items")
            .and_then(Value::as_array)
            .ok_or("not a List: no items")?;
        let mut d = Self::default();
        for it in items {
            d.add(it.clone());
        }
        Ok(d)
    }
}

/// Whether a snapshot object carries the labels of `shard`.
pub fn snapshot_of(obj: &Value, shard: &ShardRef) -> bool {
    use vtsnap_core::snapshot::{LABEL_CLUSTER, LABEL_KEYSPACE, LABEL_SHARD};
    let label = |k: &str| {
        obj.pointer("/metadata/labels")
            .and_then(|l| l.get(k))
            .and_then(Value::as_str)
    };
    meta(obj, "namespace") == shard.namespace
        && label(LABEL_CLUSTER) == Some(&shard.cluster)
        && label(LABEL_KEYSPACE) == Some(&shard.keyspace)
        && label(LABEL_SHARD) == Some(&shard.shard.safe_name())
}

impl Inventory for Dump {
    fn synced(&self) -> bool {
        true
    }

    fn snapshots(&self, shard: &ShardRef) -> Vec<SnapshotRead> {
        self.snapshots
            .iter()
            .filter(|s| snapshot_of(s, shard))
            .map(VolumeSnapshot::read)
            .collect()
    }

    fn shard_state(&self, shard: &ShardRef) -> Option<ShardState> {
        self.shards.get(shard).cloned()
    }

    fn cluster(&self, namespace: &str, name: &str) -> Option<Value> {
        self.clusters
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    fn pvc(&self, namespace: &str, name: &str) -> Option<Value> {
        self.pvcs
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }
}
