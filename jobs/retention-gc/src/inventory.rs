//! What the GC reads, as plain values: vtsnap's VolumeSnapshots, the snapshots Pending PVCs
//! are being provisioned from, fence leases, and the VitessClusters (their UIDs and the
//! shards their specs define). Built from API lists or from a `kubectl get … -o json` dump.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;
use vtsnap_core::labels::{MANAGED_BY, MANAGED_BY_VTSNAP};
use vtsnap_core::naming::KeyRange;
use vtsnap_core::snapshot::{Phase, ReadError, VolumeSnapshot};

use crate::partitioning::cluster_shards;

/// One of vtsnap's snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snap {
    pub namespace: String,
    pub name: String,
    pub cluster: String,
    pub keyspace: String,
    pub shard: KeyRange,
    pub created: Timestamp,
    /// Labelled `failed` (known bad).
    pub failed: bool,
    /// `readyToUse` (and cut).
    pub ready: bool,
    /// UIDs of VitessCluster owners.
    pub cluster_owners: Vec<String>,
}

/// Why one of vtsnap's snapshots is left out of the plan (so never deleted): the GC deletes
/// only what it read completely.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Unreadable {
    #[error(transparent)]
    Read(#[from] ReadError),
    /// Its age is unknown, so no retention rule can place it.
    #[error("VolumeSnapshot {namespace}/{name} has no metadata.creationTimestamp")]
    NoCreationTime { namespace: String, name: String },
}

/// Why a dump cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    #[error("not a List of objects: {0}")]
    NotAList(serde_json::Error),
    #[error("item {index} of the List: {source}")]
    Item {
        index: usize,
        source: serde_json::Error,
    },
}

/// A VitessCluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    pub uid: String,
    /// `(keyspace, shard name)` from the spec.
    pub shards: BTreeSet<(String, String)>,
}

/// A fence lease (namespace, name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRef {
    pub namespace: String,
    pub name: String,
    pub expired: bool,
}

#[derive(Debug, Clone, Default)]
pub struct Inventory {
    pub snapshots: Vec<Snap>,
    /// `(namespace, snapshot name)` that a Pending PVC names as its data source.
    pub in_use: BTreeSet<(String, String)>,
    pub leases: Vec<LeaseRef>,
    /// Keyed by `(namespace, name)`.
    pub clusters: BTreeMap<(String, String), Cluster>,
    /// vtsnap's snapshots that could not be read.
    pub unreadable: Vec<Unreadable>,
}

fn s(v: &Value, p: &str) -> String {
    v.pointer(p)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn label(v: &Value, k: &str) -> String {
    s(
        v,
        &format!(
            "/metadata/labels/{}",
            k.replace('~', "~0").replace('/', "~1")
        ),
    )
}

impl Inventory {
    /// One of vtsnap's snapshots (others are ignored); one that cannot be read is kept
    /// apart in `unreadable`.
    pub fn add_snapshot(&mut self, v: &Value) {
        if !VolumeSnapshot::is_vtsnaps(v) {
            return;
        }
        match Snap::read(v) {
            Ok(s) => self.snapshots.push(s),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read a VolumeSnapshot; it is left out of the plan");
                self.unreadable.push(e);
            }
        }
    }

    /// A PVC that is still Pending and names a VolumeSnapshot as its source.
    pub fn add_pvc(&mut self, v: &Value) {
        if v.pointer("/status/phase")
            .and_then(Value::as_str)
            .unwrap_or("Pending")
            != "Pending"
        {
            return;
        }
        for src in ["/spec/dataSource", "/spec/dataSourceRef"] {
            if let Some(d) = v.pointer(src)
                && d.get("kind").and_then(Value::as_str) == Some("VolumeSnapshot")
            {
                let ns = d
                    .get("namespace")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .unwrap_or_else(|| s(v, "/metadata/namespace"));
                self.in_use.insert((ns, s(d, "/name")));
            }
        }
    }

    pub fn add_lease(&mut self, v: &Value, now: Timestamp) {
        if label(v, MANAGED_BY) != MANAGED_BY_VTSNAP {
            return;
        }
        let renew = s(v, "/spec/renewTime").parse::<Timestamp>().ok();
        let dur = v
            .pointer("/spec/leaseDurationSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let expired = renew.is_none_or(|r| now.as_second() > r.as_second() + dur);
        self.leases.push(LeaseRef {
            namespace: s(v, "/metadata/namespace"),
            name: s(v, "/metadata/name"),
            expired,
        });
    }

    pub fn add_cluster(&mut self, v: &Value) {
        self.clusters.insert(
            (s(v, "/metadata/namespace"), s(v, "/metadata/name")),
            Cluster {
                uid: s(v, "/metadata/uid"),
                shards: cluster_shards(v),
            },
        );
    }

    /// From a `kubectl get volumesnapshots,persistentvolumeclaims,leases,vitessclusters -A -o json`
    /// dump (a `List` of objects with their `kind`), one item at a time: only the inventory
    /// is kept in memory, never the whole parsed dump.
    pub fn from_dump_text(text: &[u8], now: Timestamp) -> Result<Self, DumpError> {
        #[derive(serde::Deserialize)]
        struct List<'a> {
            #[serde(borrow)]
            items: Vec<&'a serde_json::value::RawValue>,
        }
        let list: List<'_> = serde_json::from_slice(text).map_err(DumpError::NotAList)?;
        let mut inv = Self::default();
        for (index, raw) in list.items.into_iter().enumerate() {
            let it: Value = serde_json::from_str(raw.get())
                .map_err(|source| DumpError::Item { index, source })?;
            inv.add_any(&it, now);
        }
        Ok(inv)
    }

    /// Adds one object of any of the four kinds; others are ignored.
    pub fn add_any(&mut self, it: &Value, now: Timestamp) {
        match it.get("kind").and_then(Value::as_str) {
            Some("VolumeSnapshot") => self.add_snapshot(it),
            Some("PersistentVolumeClaim") => self.add_pvc(it),
            Some("Lease") => self.add_lease(it, now),
            Some("VitessCluster") => self.add_cluster(it),
            _ => {}
        }
    }
}

impl Snap {
    fn read(v: &Value) -> Result<Self, Unreadable> {
        let s = VolumeSnapshot::read(v)?;
        let Some(created) = s.created else {
            return Err(Unreadable::NoCreationTime {
                namespace: s.namespace,
                name: s.name,
            });
        };
        Ok(Self {
            failed: s.phase == Some(Phase::Failed),
            ready: s.status.is_ready(),
            namespace: s.namespace,
            name: s.name,
            cluster: s.cluster,
            keyspace: s.keyspace,
            shard: s.shard,
            created,
            cluster_owners: s.cluster_owners,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn snapshot(name: &str, phase: &str) -> Value {
        json!({"kind": "VolumeSnapshot", "metadata": {"name": name, "namespace": "vitess",
            "creationTimestamp": "2026-11-29T00:00:00Z", "labels": {
            "app.kubernetes.io/managed-by": "vtsnap", "vtsnap.io/cluster": "example",
            "vtsnap.io/keyspace": "commerce", "vtsnap.io/shard": "x-80", "vtsnap.io/phase": phase}}})
    }

    #[test]
    fn unreadable_snapshots_are_kept_apart_and_others_ignored() {
        let now: Timestamp = "2026-11-29T12:00:00Z".parse().unwrap();
        let mut inv = Inventory::default();
        inv.add_any(&snapshot("good", "failed"), now);
        inv.add_any(&snapshot("bad-phase", "Failed"), now);
        let mut undated = snapshot("undated", "ready");
        undated["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("creationTimestamp");
        inv.add_any(&undated, now);
        // Not vtsnap's: neither read nor unreadable.
        inv.add_any(
            &json!({"kind": "VolumeSnapshot", "metadata": {"name": "manual", "namespace": "vitess"}}),
            now,
        );
        assert_eq!(
            inv.snapshots
                .iter()
                .map(|s| (s.name.as_str(), s.shard.to_string(), s.failed))
                .collect::<Vec<_>>(),
            [("good", "-80".to_owned(), true)]
        );
        let why: Vec<String> = inv.unreadable.iter().map(ToString::to_string).collect();
        assert_eq!(why.len(), 2, "{why:?}");
        assert!(
            why[0].contains("vitess/bad-phase") && why[0].contains("vtsnap.io/phase"),
            "{why:?}"
        );
        assert!(
            matches!(&inv.unreadable[1], Unreadable::NoCreationTime { name, .. } if name == "undated")
        );
    }
}
