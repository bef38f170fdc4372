//! The edge: what the API (or a dump) gives, as JSON, read into the typed objects the
//! deciders take. An object that does not read is kept as its [`Unreadable`] reason, never
//! read as empty. Pure: the status's golden test reads its dump through here too.

use k8s_openapi::Resource;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use serde::Deserialize;
use serde::de::{DeserializeOwned, IgnoredAny};
use serde_json::Value;
use vtsnap_core::k8s_names::escape_controls;
use vtsnap_core::labels;
use vtsnap_core::reconcile::ObjectKey;
use vtsnap_core::restored::ANN_RESTORED_FROM;
use vtsnap_core::shard::{LabelSet, ShardRef};
use vtsnap_core::snapshot::VolumeSnapshot;
use vtsnap_gc::decide::ShardCoverage;
use vtsnap_snapshot::schedule::names::ANN_SHARD;

use crate::decide::objects::{
    FenceLease, JobResult, JobRun, PodOnNode, SnapshotClass, SnapshotCron, SnapshotDeletion,
    SnapshotHandling, TabletPvc, Unreadable,
};
use crate::decide::status::Seen;

/// The annotation that makes a VolumeSnapshotClass its driver's default.
pub const DEFAULT_CLASS: &str = "snapshot.storage.kubernetes.io/is-default-class";

/// `namespace/name`, or `name` of a cluster-wide object, for a message.
fn shown(v: &Value) -> String {
    let field = |f: &str| {
        v.get("metadata")
            .and_then(|m| m.get(f))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    match (field("namespace"), field("name")) {
        ("", name) => name.to_owned(),
        (ns, name) => format!("{ns}/{name}"),
    }
}

/// An object of kind `K` (a Kubernetes type, or a reader's own view of a custom one).
pub fn object<K: DeserializeOwned>(kind: &'static str, v: &Value) -> Result<K, Unreadable> {
    K::deserialize(v).map_err(|e| Unreadable::Schema {
        kind,
        object: escape_controls(&shown(v)).into_owned(),
        why: escape_controls(&e.to_string()).into_owned(),
    })
}

/// `namespace/name` of a namespaced object, both set.
fn key_of(kind: &'static str, meta: &ObjectMeta) -> Result<ObjectKey, Unreadable> {
    match (meta.namespace.as_deref(), meta.name.as_deref()) {
        (Some(ns), Some(name)) if !ns.is_empty() && !name.is_empty() => {
            Ok(ObjectKey::new(ns, name))
        }
        _ => Err(Unreadable::Unnamed { kind }),
    }
}

/// Of a Kubernetes type.
pub fn typed<K: DeserializeOwned + Resource>(v: &Value) -> Result<K, Unreadable> {
    object(K::KIND, v)
}

/// Every object of `values` that reads; the reasons of those that do not go to
/// `unreadable`.
pub fn each<T>(
    values: &[Value],
    read: impl Fn(&Value) -> Result<T, Unreadable>,
    unreadable: &mut Vec<Unreadable>,
) -> Vec<T> {
    let mut out = Vec::new();
    for v in values {
        match read(v) {
            Ok(t) => out.push(t),
            Err(u) => unreadable.push(u),
        }
    }
    out
}

/// Every object of `values`, or the first that does not read.
pub fn every<T>(
    values: &[Value],
    read: impl Fn(&Value) -> Result<T, Unreadable>,
) -> Result<Vec<T>, Unreadable> {
    values.iter().map(read).collect()
}

/// The name of an object of `kind` (where only names are read: CustomResourceDefinitions,
/// ServiceAccounts).
pub fn name(kind: &'static str) -> impl Fn(&Value) -> Result<String, Unreadable> {
    #[derive(Deserialize)]
    struct Named {
        #[serde(default)]
        metadata: ObjectMeta,
    }
    move |v| {
        let n: Named = object(kind, v)?;
        Ok(n.metadata.name.unwrap_or_default())
    }
}

fn when(t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>) -> Option<Timestamp> {
    t.map(|t| t.0)
}

/// A tablet PVC, by its operator labels' shard.
pub fn tablet_pvc(v: &Value) -> Result<TabletPvc, Unreadable> {
    let p: PersistentVolumeClaim = typed(v)?;
    let key = key_of(PersistentVolumeClaim::KIND, &p.metadata)?;
    let labels = p.metadata.labels.clone().unwrap_or_default();
    let shard =
        ShardRef::from_label_set(LabelSet::Operator, &key.namespace, &labels).map_err(|why| {
            Unreadable::TabletShard {
                pvc: key.clone(),
                why: Box::new(why),
            }
        })?;
    let (storage_class, volume) = p
        .spec
        .map(|s| (s.storage_class_name, s.volume_name))
        .unwrap_or_default();
    Ok(TabletPvc {
        uid: p.metadata.uid,
        tablet_uid: labels.get(labels::TABLET_UID).and_then(|u| u.parse().ok()),
        restored_from: p
            .metadata
            .annotations
            .and_then(|mut a| a.remove(ANN_RESTORED_FROM)),
        phase: p.status.and_then(|s| s.phase),
        storage_class,
        volume: volume.filter(|v| !v.is_empty()),
        shard,
        key,
    })
}

/// A Pod: where it runs, and whether it is Ready.
pub fn pod(v: &Value) -> Result<PodOnNode, Unreadable> {
    let p: Pod = typed(v)?;
    Ok(PodOnNode {
        node: p.spec.and_then(|s| s.node_name).filter(|n| !n.is_empty()),
        ready: p
            .status
            .and_then(|s| s.conditions)
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True")),
    })
}

/// A snapshot CronJob; its shard record, when it has one, must read.
pub fn snapshot_cron(v: &Value) -> Result<SnapshotCron, Unreadable> {
    snapshot_cron_of(typed(v)?)
}

/// [`snapshot_cron`] of a CronJob read typed.
pub fn snapshot_cron_of(c: CronJob) -> Result<SnapshotCron, Unreadable> {
    let name = c.metadata.name.unwrap_or_default();
    let recorded = match c
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANN_SHARD))
    {
        None => None,
        Some(record) => {
            Some(
                ShardRef::parse_path(record).map_err(|why| Unreadable::ShardRecord {
                    cron: name.clone(),
                    why,
                })?,
            )
        }
    };
    let spec = c.spec.unwrap_or_default();
    Ok(SnapshotCron {
        labels: c.metadata.labels.unwrap_or_default(),
        recorded,
        schedule: spec.schedule,
        suspended: spec.suspend == Some(true),
        time_zone: spec.time_zone,
        name,
    })
}

/// A Job, and how it ended.
pub fn job(v: &Value) -> Result<JobRun, Unreadable> {
    let j: Job = typed(v)?;
    let status = j.status.unwrap_or_default();
    let done = |t: &str| {
        status
            .conditions
            .as_ref()
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == t && c.status == "True"))
    };
    let result = if done("Complete") {
        JobResult::Succeeded
    } else if done("Failed") {
        JobResult::Failed
    } else {
        JobResult::Running
    };
    Ok(JobRun {
        name: j.metadata.name.unwrap_or_default(),
        labels: j.metadata.labels.unwrap_or_default(),
        created: when(j.metadata.creation_timestamp.as_ref()),
        result,
        finished: when(status.completion_time.as_ref()),
    })
}

/// A fence Lease.
pub fn lease(v: &Value) -> Result<FenceLease, Unreadable> {
    let l: Lease = typed(v)?;
    let key = key_of(Lease::KIND, &l.metadata)?;
    let spec = l.spec.unwrap_or_default();
    Ok(FenceLease {
        key,
        holder: spec.holder_identity,
        acquired: spec.acquire_time.map(|t| t.0),
        renewed: spec.renew_time.map(|t| t.0),
        duration_seconds: spec.lease_duration_seconds.map_or(0, i64::from),
    })
}

/// One of vtsnap's VolumeSnapshots, by the schema every vtsnap program reads.
pub fn snapshot(v: &Value) -> Result<VolumeSnapshot, Unreadable> {
    VolumeSnapshot::read(v).map_err(Unreadable::Snapshot)
}

/// A VolumeSnapshot as the snapshot-controller check sees it.
pub fn snapshot_handling(v: &Value) -> Result<SnapshotHandling, Unreadable> {
    #[derive(Deserialize)]
    struct Handling {
        #[serde(default)]
        metadata: ObjectMeta,
        /// Present and not null once a snapshot-controller wrote it.
        status: Option<IgnoredAny>,
    }
    let s: Handling = object("VolumeSnapshot", v)?;
    Ok(SnapshotHandling {
        name: s.metadata.name.unwrap_or_default(),
        created: when(s.metadata.creation_timestamp.as_ref()),
        has_status: s.status.is_some(),
    })
}

/// A VolumeSnapshotClass (external-snapshotter's CRD: no Kubernetes type).
pub fn snapshot_class(v: &Value) -> Result<SnapshotClass, Unreadable> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Class {
        #[serde(default)]
        metadata: ObjectMeta,
        driver: String,
        deletion_policy: SnapshotDeletion,
    }
    let c: Class = object("VolumeSnapshotClass", v)?;
    Ok(SnapshotClass {
        default: c
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(DEFAULT_CLASS))
            .is_some_and(|d| d == "true"),
        name: c.metadata.name.unwrap_or_default(),
        driver: c.driver,
        deletion_policy: c.deletion_policy,
    })
}

/// The shards of the VitessCluster `cluster`'s spec (a shard that is not a key range
/// refuses the spec).
pub fn spec_shards(cluster: &ObjectKey, v: &Value) -> Result<Vec<ShardRef>, Unreadable> {
    let shards = vtsnap_core::vitesscluster::spec_shards(v).map_err(|why| Unreadable::Spec {
        cluster: cluster.clone(),
        why,
    })?;
    Ok(shards
        .into_iter()
        .map(|ks| ShardRef::new(cluster, ks))
        .collect())
}

/// What the status reads, as the API (or a dump) gives it.
#[derive(Debug, Clone, Default)]
pub struct StatusObjects {
    pub snapshots: Vec<Value>,
    pub cronjobs: Vec<Value>,
    pub jobs: Vec<Value>,
    pub leases: Vec<Value>,
    pub tablet_pvcs: Vec<Value>,
    pub tablet_pods: Vec<Value>,
    pub node_helpers: Vec<Value>,
}

/// The status's objects read, with the GC's coverage. An object that does not read is
/// kept aside with its reason ([`Seen::unreadable`]); the others are shown.
pub fn status_seen(objects: &StatusObjects, coverage: Vec<ShardCoverage>) -> Seen {
    let mut unreadable = Vec::new();
    let bad = &mut unreadable;
    Seen {
        snapshots: each(&objects.snapshots, snapshot, bad),
        cronjobs: each(&objects.cronjobs, snapshot_cron, bad),
        jobs: each(&objects.jobs, job, bad),
        leases: each(&objects.leases, lease, bad),
        tablet_pvcs: each(&objects.tablet_pvcs, tablet_pvc, bad),
        tablet_pods: each(&objects.tablet_pods, pod, bad),
        node_helpers: each(&objects.node_helpers, pod, bad),
        coverage,
        unreadable,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;
    use vtsnap_core::shard::ShardLabelError;

    use super::*;

    fn tablet_pvc_labelled(shard: &str) -> Value {
        json!({"metadata": {"name": format!("t-{shard}"), "namespace": "vitess", "uid": "u-1",
            "labels": {"planetscale.com/cluster": "example", "planetscale.com/keyspace": "commerce",
                       "planetscale.com/shard": shard, "planetscale.com/tablet-uid": "0000000104"},
            "annotations": {"vtsnap.io/restored-from": "a-1"}},
            "spec": {"storageClassName": "fast", "volumeName": ""}, "status": {"phase": "Pending"}})
    }

    /// An object that does not read is neither dropped silently nor read as empty: it is
    /// kept aside with what was wrong, and the others are read.
    #[test]
    fn an_object_that_does_not_read_is_kept_aside_with_its_reason() {
        let objects = StatusObjects {
            snapshots: vec![json!({"metadata": {"name": "theirs", "namespace": "vitess"}})],
            cronjobs: vec![json!({"metadata": {"name": "c-1",
                "annotations": {"vtsnap.io/schedule-shard": "vitess/example/commerce"}}})],
            tablet_pvcs: vec![tablet_pvc_labelled("x-80"), tablet_pvc_labelled("zz")],
            tablet_pods: vec![json!({"spec": {"nodeName": 7}})],
            ..StatusObjects::default()
        };
        let seen = status_seen(&objects, Vec::new());
        let why: Vec<String> = seen.unreadable.iter().map(ToString::to_string).collect();
        assert_eq!(why.len(), 4, "{why:#?}");
        assert!(
            matches!(seen.unreadable[0], Unreadable::Snapshot(_)),
            "{why:#?}"
        );
        assert!(
            matches!(&seen.unreadable[1], Unreadable::ShardRecord { cron, .. } if cron == "c-1"),
            "{why:#?}"
        );
        assert!(
            matches!(
                &seen.unreadable[2],
                Unreadable::TabletShard { pvc, why }
                    if pvc.name == "t-zz" && matches!(**why, ShardLabelError::Shard { .. })
            ),
            "{why:#?}"
        );
        assert!(
            matches!(&seen.unreadable[3], Unreadable::Schema { kind: "Pod", .. }),
            "{why:#?}"
        );
        // The PVC that reads, with its shard typed and its fields as the API gave them.
        let [pvc] = seen.tablet_pvcs.as_slice() else {
            panic!("{:?}", seen.tablet_pvcs);
        };
        assert_eq!(pvc.shard.to_string(), "vitess/example/commerce/-80");
        assert_eq!(
            pvc.tablet_uid.map(|u| u.to_string()),
            Some("104".to_owned())
        );
        assert_eq!(
            (
                pvc.restored_from.as_deref(),
                pvc.phase.as_deref(),
                pvc.volume.as_deref()
            ),
            (Some("a-1"), Some("Pending"), None)
        );
        let missing = tablet_pvc(&json!({"metadata": {"name": "p", "namespace": "vitess",
            "labels": {"planetscale.com/cluster": "example"}}}));
        assert!(
            matches!(
                &missing,
                Err(Unreadable::TabletShard { why, .. })
                    if **why == ShardLabelError::Missing { label: labels::KEYSPACE }
            ),
            "{missing:?}"
        );
    }

    /// A VitessCluster's spec gives typed shards; one that is not a key range refuses the
    /// spec, naming the cluster (the doctor's schedule check then says it was not checked).
    #[test]
    fn a_spec_shard_that_is_not_a_key_range_refuses_its_cluster() {
        let cluster = ObjectKey::new("vitess", "example");
        let spec = |shards: Value| {
            json!({"spec": {"keyspaces": [{"name": "commerce",
                "partitionings": [{"custom": {"shards": shards}}]}]}})
        };
        let good = spec(json!([{"keyRange": {"end": "80"}}, {"keyRange": {"start": "80"}}]));
        let shards: Vec<String> = spec_shards(&cluster, &good)
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            shards,
            ["vitess/example/commerce/-80", "vitess/example/commerce/80-"]
        );
        let bad = spec(json!([{"keyRange": {"start": "80", "end": "40"}}]));
        let e = spec_shards(&cluster, &bad).unwrap_err();
        assert!(matches!(e, Unreadable::Spec { .. }), "{e}");
        assert!(
            e.to_string().starts_with("VitessCluster vitess/example: "),
            "{e}"
        );
    }

    #[test]
    fn jobs_leases_and_classes_read_typed() {
        let j = job(
            &json!({"metadata": {"name": "j", "creationTimestamp": "2026-12-01T11:00:00Z",
            "labels": {"vtsnap.io/shard": "x-x"}},
            "status": {"completionTime": "2026-12-01T11:03:10Z",
                       "conditions": [{"type": "Complete", "status": "True"}]}}),
        )
        .unwrap();
        assert_eq!(j.result, JobResult::Succeeded);
        assert_eq!(
            j.finished.map(|t| t.to_string()).as_deref(),
            Some("2026-12-01T11:03:10Z")
        );
        let failed = job(&json!({"status": {"conditions": [
            {"type": "Failed", "status": "True"}]}}))
        .unwrap();
        assert_eq!(failed.result, JobResult::Failed);
        assert_eq!(job(&json!({})).unwrap().result, JobResult::Running);
        let l = lease(&json!({"metadata": {"name": "f", "namespace": "vitess"},
            "spec": {"renewTime": "2026-12-01T11:59:30.000000Z"}}))
        .unwrap();
        assert_eq!(
            (l.key.to_string(), l.duration_seconds),
            ("vitess/f".to_owned(), 0)
        );
        assert!(l.renewed.is_some() && l.holder.is_none());
        assert!(matches!(
            lease(&json!({"metadata": {"name": "f"}})),
            Err(Unreadable::Unnamed { kind: "Lease" })
        ));
        let c = snapshot_class(&json!({"metadata": {"name": "c",
            "annotations": {DEFAULT_CLASS: "true"}}, "driver": "d", "deletionPolicy": "Retain"}))
        .unwrap();
        assert_eq!(
            (c.default, c.deletion_policy),
            (true, SnapshotDeletion::Retain)
        );
        let e = snapshot_class(&json!({"metadata": {"name": "c"}, "driver": "d",
            "deletionPolicy": "Keep"}))
        .unwrap_err();
        assert!(e.to_string().starts_with("VolumeSnapshotClass c: "), "{e}");
    }
}
