//! Reading one object of each kind the GC reads into its plain value, or into what could
//! not be read of it ([`Unreadable`]): nothing is guessed.

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;
use vtsnap_core::coverage::Exactness;
use vtsnap_core::reconcile::ObjectKey;
use vtsnap_core::snapshot::{Phase, ReadError, VolumeSnapshot};
use vtsnap_core::vitesscluster::cluster_shards;

use super::{Cluster, Expiry, LeaseRef, RestoredPvc, Snap, Unreadable, label, s};

/// The snapshots a PVC is provisioned from: none unless it is Pending (a missing phase is
/// Pending) and a data source of kind VolumeSnapshot names one.
pub(super) fn pvc_sources(v: &Value) -> Result<Vec<ObjectKey>, Unreadable> {
    let pvc = format!("{}/{}", s(v, "/metadata/namespace"), s(v, "/metadata/name"));
    let bad = |field, expected| Unreadable::PvcMalformed {
        pvc: pvc.clone(),
        field,
        expected,
    };
    match v.pointer("/status/phase") {
        None | Some(Value::Null) => {}
        Some(Value::String(p)) if p == "Pending" => {}
        Some(Value::String(_)) => return Ok(Vec::new()),
        Some(_) => return Err(bad("status.phase", "a string")),
    }
    let mut out = Vec::new();
    for (src, field) in [
        ("/spec/dataSource", "spec.dataSource"),
        ("/spec/dataSourceRef", "spec.dataSourceRef"),
    ] {
        let d = match v.pointer(src) {
            None | Some(Value::Null) => continue,
            Some(d @ Value::Object(_)) => d,
            Some(_) => return Err(bad(field, "an object")),
        };
        match d.get("kind") {
            Some(Value::String(k)) if k == "VolumeSnapshot" => {}
            Some(Value::String(_)) => continue,
            _ => return Err(bad(field, "an object with a string kind")),
        }
        let name = d
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| bad(field, "an object with a non-empty name"))?;
        let ns = match d.get("namespace") {
            None | Some(Value::Null) => v
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .ok_or_else(|| bad("metadata.namespace", "a non-empty string"))?,
            Some(Value::String(n)) if !n.is_empty() => n.as_str(),
            Some(_) => {
                return Err(bad(
                    field,
                    "an object whose namespace is a non-empty string",
                ));
            }
        };
        out.push(ObjectKey::new(ns, name));
    }
    Ok(out)
}

impl Cluster {
    /// Its namespace and name, and what the GC needs of it, or what could not be read.
    pub(super) fn read(v: &Value) -> Result<(ObjectKey, Self), Unreadable> {
        let cluster = format!("{}/{}", s(v, "/metadata/namespace"), s(v, "/metadata/name"));
        let text = |p: &str, field: &'static str| {
            v.pointer(p)
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .ok_or_else(|| Unreadable::ClusterMalformed {
                    cluster: cluster.clone(),
                    field,
                    problem: format!("{field} is not a non-empty string"),
                })
        };
        let namespace = text("/metadata/namespace", "metadata.namespace")?;
        let name = text("/metadata/name", "metadata.name")?;
        let uid = text("/metadata/uid", "metadata.uid")?;
        let shards = cluster_shards(v).map_err(|e| Unreadable::ClusterMalformed {
            cluster: cluster.clone(),
            field: "spec.keyspaces",
            problem: e.to_string(),
        })?;
        Ok((ObjectKey::new(namespace, name), Self { uid, shards }))
    }
}

impl LeaseRef {
    pub(super) fn read(v: &Value, now: Timestamp) -> Result<Self, Unreadable> {
        let text = |p: &str| v.pointer(p).and_then(Value::as_str);
        let lease = format!(
            "{}/{}",
            text("/metadata/namespace").unwrap_or(""),
            text("/metadata/name").unwrap_or("")
        );
        let missing = |field| Unreadable::LeaseMissing {
            lease: lease.clone(),
            field,
        };
        let malformed = |field, expected| Unreadable::LeaseMalformed {
            lease: lease.clone(),
            field,
            expected,
        };
        let ident = |p: &str, field| match v.pointer(p) {
            None | Some(Value::Null) => Err(missing(field)),
            Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            Some(_) => Err(malformed(field, "a non-empty string")),
        };
        let namespace = ident("/metadata/namespace", "metadata.namespace")?;
        let name = ident("/metadata/name", "metadata.name")?;
        let renew: Timestamp = match v.pointer("/spec/renewTime") {
            None | Some(Value::Null) => return Err(missing("spec.renewTime")),
            Some(t) => t
                .as_str()
                .and_then(|t| t.parse().ok())
                .ok_or_else(|| malformed("spec.renewTime", "an RFC 3339 time"))?,
        };
        // The API's type is int32 and it requires > 0; anything else is not a duration.
        let secs = match v.pointer("/spec/leaseDurationSeconds") {
            None | Some(Value::Null) => return Err(missing("spec.leaseDurationSeconds")),
            Some(d) => d
                .as_i64()
                .and_then(|d| i32::try_from(d).ok())
                .filter(|d| *d > 0)
                .ok_or_else(|| {
                    malformed(
                        "spec.leaseDurationSeconds",
                        "a whole number of seconds from 1 to 2147483647",
                    )
                })?,
        };
        let expired = now.as_second() > renew.as_second().saturating_add(i64::from(secs));
        Ok(Self {
            expiry: if expired {
                Expiry::Expired
            } else {
                Expiry::Live
            },
            namespace,
            name,
        })
    }
}

impl Snap {
    pub(super) fn read(v: &Value) -> Result<Self, Unreadable> {
        let s = VolumeSnapshot::read(v)?;
        if s.namespace.is_empty() {
            return Err(ReadError::Malformed {
                snapshot: format!("/{}", s.name),
                field: "metadata.namespace",
                expected: "a non-empty string",
            }
            .into());
        }
        let Some(created) = s.created else {
            return Err(Unreadable::NoCreationTime {
                namespace: s.namespace,
                name: s.name,
            });
        };
        let drill = s.drill_seen();
        let reprovisioned = s.reprovisioned.clone();
        let (position, exactness) = match (s.gtid_executed, s.gtid_lower_bound) {
            (Some(p), _) => (Some(p), Exactness::Exact),
            (None, Some(p)) => (Some(p), Exactness::LowerBound),
            (None, None) => (None, Exactness::Exact),
        };
        Ok(Self {
            drill,
            reprovisioned,
            position,
            exactness,
            failed: s.phase == Some(Phase::Failed),
            ready: s.status.is_ready(),
            namespace: s.namespace,
            name: s.name,
            cluster: s.cluster,
            keyspace: s.keyspace,
            shard: s.shard,
            created,
            cluster_owners: s.cluster_owners,
            unusable: s.unusable.is_some(),
        })
    }
}

impl RestoredPvc {
    /// A PVC carrying `vtsnap.io/restored-from` with the identity it is watched by;
    /// anything less is not watched (`None`).
    pub(super) fn read(v: &Value) -> Option<Self> {
        use vtsnap_core::labels as l;
        use vtsnap_core::restored::{ANN_RESTORE_NODE, ANN_RESTORED_FROM};
        let ann = |k: &str| {
            v.pointer("/metadata/annotations")
                .and_then(|a| a.get(k))
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
        };
        let snapshot = ann(ANN_RESTORED_FROM)?;
        let need = |t: String| (!t.is_empty()).then_some(t);
        let tablet = match (
            need(label(v, l::CELL)),
            label(v, l::TABLET_UID).parse::<vtsnap_core::naming::TabletUid>(),
        ) {
            (Some(cell), Ok(uid)) => Some(vtsnap_core::naming::TabletAlias { cell, uid }),
            _ => None,
        };
        Some(Self {
            namespace: need(s(v, "/metadata/namespace"))?,
            name: need(s(v, "/metadata/name"))?,
            uid: need(s(v, "/metadata/uid"))?,
            resource_version: s(v, "/metadata/resourceVersion"),
            snapshot,
            node: ann(ANN_RESTORE_NODE),
            bound: s(v, "/status/phase") == "Bound",
            has_volume: !s(v, "/spec/volumeName").is_empty(),
            cluster: need(label(v, l::CLUSTER))?,
            keyspace: need(label(v, l::KEYSPACE))?,
            shard: need(label(v, l::SHARD))?,
            tablet,
        })
    }
}
