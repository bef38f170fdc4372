//! Act: carries out a GC plan, each action on exactly what was planned for; one that
//! fails is an [`ActError`] of the report, and the next run tries it again. [`run`] is the
//! whole program: observe → decide → act → report.

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use serde_json::json;
use vtsnap_core::config::Config;
use vtsnap_core::events::{EventType, Events, Subject};
use vtsnap_core::fence::client as fence_client;
use vtsnap_core::reconcile::{
    ActError, Change, Completeness, ObjectKey, ReplaceError, apis, replace_with_retry,
};
use vtsnap_core::snapshot;

use crate::decide::failed_restores::{MarkUnusable, Reprovision};
use crate::decide::{CoverageState, OwnerChange, Plan, plan};
use crate::observe::{Inventory, Observed, observe};
use crate::report::{self, GcRun};

pub use crate::report::GcReport;

#[derive(Debug, Clone)]
pub struct GcOptions {
    pub dry_run: bool,
    pub only_cluster: Option<String>,
    /// How long a fence recovery waits for the node helper.
    pub node_timeout: Duration,
}

/// Observes the configured namespaces, plans, and (unless a dry run) carries out the plan.
/// A namespace whose read failed is left out of the plan entirely (nothing there is deleted
/// on an uncertain read), and the run exits 1.
pub async fn run(config: &Config, opts: &GcOptions, kube: kube::Client) -> GcReport {
    let now = Timestamp::now();
    let only = opts.only_cluster.as_deref();
    let Observed {
        inventory: inv,
        unreadable,
    } = observe(&kube, config, only, now).await;
    let complete = if unreadable.is_empty() {
        Completeness::Complete
    } else {
        Completeness::Partial
    };
    let p = plan(config, &inv, now, only);
    let mut report = GcReport::new(GcRun::new(opts.dry_run, p.clone(), unreadable));
    if !opts.dry_run {
        let events = Events::new(kube.clone(), COMPONENT);
        recover_fences(&kube, &p, opts.node_timeout, &mut report).await;
        delete_snapshots(&kube, &events, &p, &inv, &mut report).await;
        act_on_restores(&kube, &events, &p, &inv, &mut report).await;
        sync_owners(&kube, &p, &mut report).await;
        warn_coverage(&events, &p, &inv).await;
        warn_not_reprovisioned(&events, &p).await;
        warn_not_replicating(&events, &p).await;
    }
    report::log(&p, opts.dry_run);
    report.finish(complete);
    report
}

/// The `reportingController` of the GC's Events.
const COMPONENT: &str = "vtsnap-gc";

/// Recovers expired fences (the node helper puts the tablet back); a lease gone meanwhile
/// is done.
async fn recover_fences(kube: &kube::Client, p: &Plan, timeout: Duration, report: &mut GcReport) {
    for f in &p.recover_fences {
        let key = ObjectKey::new(&f.namespace, &f.name);
        let api: Api<Lease> = Api::namespaced(kube.clone(), &f.namespace);
        let r = match api.get_opt(&f.name).await {
            Ok(Some(l)) => fence_client::recover(&api, &l, timeout)
                .await
                .map(drop)
                .map_err(|e| e.to_string()),
            Ok(None) => Ok(()),
            Err(e) => Err(e.to_string()),
        };
        match r {
            Ok(()) => report.run.fences_recovered.push(key.to_string()),
            Err(e) => report
                .errors
                .push(ActError::new("recovering fence", key, e)),
        }
    }
}

/// Deletes the planned snapshots, each with an Event on its VitessCluster; one deleted by
/// someone else meanwhile is done.
async fn delete_snapshots(
    kube: &kube::Client,
    events: &Events,
    p: &Plan,
    inv: &Inventory,
    report: &mut GcReport,
) {
    let owner_of: BTreeMap<ObjectKey, &str> = inv
        .snapshots
        .iter()
        .map(|s| (ObjectKey::new(&s.namespace, &s.name), s.cluster.as_str()))
        .collect();
    for d in &p.delete {
        let key = ObjectKey::new(&d.namespace, &d.name);
        match apis::volume_snapshots(kube, &d.namespace)
            .delete(&d.name, &DeleteParams::default())
            .await
        {
            Ok(_) => {
                report.run.deleted.push(key.to_string());
                if let Some(cluster) = owner_of.get(&key) {
                    let uid = inv
                        .clusters
                        .get(&ObjectKey::new(&d.namespace, *cluster))
                        .map(|c| c.uid.as_str());
                    events
                        .publish(
                            &Subject::vitess_cluster(&d.namespace, cluster, uid),
                            EventType::Normal,
                            "DeleteSnapshot",
                            "SnapshotDeleted",
                            &format!("deleted VolumeSnapshot {} ({})", d.name, d.reason),
                        )
                        .await;
                }
            }
            Err(kube::Error::Api(s)) if s.code == 404 => report.run.deleted.push(key.to_string()),
            Err(e) => report
                .errors
                .push(ActError::new("deleting VolumeSnapshot", key, e)),
        }
    }
}

/// Adds, then removes, the planned ownerReferences to VitessClusters.
async fn sync_owners(kube: &kube::Client, p: &Plan, report: &mut GcReport) {
    for (changes, edit) in [
        (&p.owner_refs.add, OwnerEdit::Add),
        (&p.owner_refs.remove, OwnerEdit::Remove),
    ] {
        for c in changes {
            match sync_owner(kube, c, edit).await {
                Ok(()) => report.run.owner_refs_changed += 1,
                Err(e) => report.errors.push(e),
            }
        }
    }
}

/// Marks a snapshot unusable (an annotation; merging, so nothing else is touched).
async fn mark_unusable(kube: &kube::Client, m: &MarkUnusable) -> Result<(), kube::Error> {
    let patch = json!({"metadata": {"annotations": {snapshot::ANN_UNUSABLE: m.message}}});
    apis::volume_snapshots(kube, &m.namespace)
        .patch(&m.snapshot, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(drop)
}

/// A preconditioned delete that was refused or failed.
#[derive(Debug, thiserror::Error)]
#[error("deleting {kind} {name} (uid {uid}): {source}")]
struct DeleteError {
    kind: String,
    name: String,
    uid: String,
    source: kube::Error,
}

/// Deletes an object only if it is still the one planned for (its UID) and unchanged
/// since it was read (its resourceVersion); gone is done.
async fn delete_exactly<K>(
    api: &Api<K>,
    name: &str,
    uid: &str,
    resource_version: &str,
) -> Result<(), DeleteError>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let dp = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: Some(resource_version.to_owned()).filter(|v| !v.is_empty()),
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &dp).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(source) => Err(DeleteError {
            kind: K::kind(&()).into_owned(),
            name: name.to_owned(),
            uid: uid.to_owned(),
            source,
        }),
    }
}

/// Which way an ownerReference to the VitessCluster changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OwnerEdit {
    Add,
    Remove,
}

impl OwnerEdit {
    fn doing(self) -> &'static str {
        match self {
            Self::Add => "adding the VitessCluster ownerReference to VolumeSnapshot",
            Self::Remove => "removing the VitessCluster ownerReference from VolumeSnapshot",
        }
    }
}

/// Adds or removes the VitessCluster ownerReference, compare-and-swap, retried on conflicts.
async fn sync_owner(kube: &kube::Client, c: &OwnerChange, edit: OwnerEdit) -> Result<(), ActError> {
    let api = apis::volume_snapshots(kube, &c.namespace);
    let synced = replace_with_retry(
        &api,
        &c.name,
        5,
        |obj: &mut DynamicObject| -> Change<Infallible> {
            let refs = &mut obj.metadata.owner_references;
            let has = refs.iter().flatten().any(|r| r.uid == c.owner_uid);
            match (edit, has) {
                (OwnerEdit::Add, true) | (OwnerEdit::Remove, false) => return Change::Leave,
                (OwnerEdit::Add, false) => refs.get_or_insert_with(Vec::new).push(OwnerReference {
                    api_version: "planetscale.com/v2".into(),
                    kind: "VitessCluster".into(),
                    name: c.cluster.clone(),
                    uid: c.owner_uid.clone(),
                    block_owner_deletion: Some(false),
                    controller: Some(false),
                }),
                (OwnerEdit::Remove, true) => {
                    if let Some(v) = refs.as_mut() {
                        v.retain(|r| r.uid != c.owner_uid);
                    }
                }
            }
            Change::Replace
        },
    )
    .await;
    let failed =
        |cause: String| ActError::new(edit.doing(), ObjectKey::new(&c.namespace, &c.name), cause);
    match synced {
        // A snapshot deleted meanwhile needs no owner.
        Ok(_) | Err(ReplaceError::Gone { .. }) => Ok(()),
        Err(ReplaceError::Read { source, .. } | ReplaceError::Write { source, .. }) => {
            Err(failed(source.to_string()))
        }
        Err(ReplaceError::Conflicts { .. }) => {
            Err(failed("ownerReferences kept conflicting".into()))
        }
        Err(ReplaceError::GaveUp { reason, .. }) => match reason {},
    }
}

/// Marks snapshots unusable, then un-sticks restores: a stuck restore whose snapshot could
/// not be marked is left for the next run (the recreated PVC would pick it again).
async fn act_on_restores(
    kube: &kube::Client,
    events: &Events,
    p: &Plan,
    inv: &Inventory,
    report: &mut GcReport,
) {
    let mut failed_marks = BTreeSet::new();
    for m in &p.restores.mark_unusable {
        let key = ObjectKey::new(&m.namespace, &m.snapshot);
        match mark_unusable(kube, m).await {
            Ok(()) => {
                report.run.marked_unusable.push(key.to_string());
                events
                    .publish(
                        &Subject::snapshot(&m.namespace, &m.snapshot),
                        EventType::Warning,
                        "MarkUnusable",
                        "SnapshotUnusable",
                        &m.message,
                    )
                    .await;
            }
            Err(e) => {
                report.errors.push(ActError::new(
                    "marking unusable VolumeSnapshot",
                    key.clone(),
                    e,
                ));
                failed_marks.insert(key);
            }
        }
    }
    let cluster_of: BTreeMap<ObjectKey, &str> = inv
        .restored
        .iter()
        .map(|r| (ObjectKey::new(&r.namespace, &r.name), r.cluster.as_str()))
        .collect();
    for u in &p.restores.unstick {
        if failed_marks.contains(&ObjectKey::new(&u.namespace, &u.snapshot)) {
            continue;
        }
        let key = ObjectKey::new(&u.namespace, &u.pvc);
        let pods: Api<Pod> = Api::namespaced(kube.clone(), &u.namespace);
        let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(kube.clone(), &u.namespace);
        // The Pod first: one that changed since it was read (it started) keeps its PVC too.
        let done = match delete_exactly(&pods, &u.pod, &u.pod_uid, &u.pod_resource_version).await {
            Ok(()) => delete_exactly(&pvcs, &u.pvc, &u.pvc_uid, &u.pvc_resource_version).await,
            Err(e) => Err(e),
        };
        match done {
            Ok(()) => {
                report.run.unstuck.push(key.to_string());
                if let Some(cluster) = cluster_of.get(&ObjectKey::new(&u.namespace, &u.pvc)) {
                    let uid = inv
                        .clusters
                        .get(&ObjectKey::new(&u.namespace, *cluster))
                        .map(|c| c.uid.as_str());
                    events
                        .publish(
                            &Subject::vitess_cluster(&u.namespace, cluster, uid),
                            EventType::Warning,
                            "UnstickRestore",
                            "RestoreUnstuck",
                            &format!(
                                "Pod and PVC {} deleted after {}s Pending: snapshot {} restores only on node {}; the operator recreates them",
                                u.pvc, u.pending_seconds, u.snapshot, u.node
                            ),
                        )
                        .await;
                }
            }
            Err(e) => report
                .errors
                .push(ActError::new("un-sticking the restore of PVC", key, e)),
        }
    }
    for r in &p.restores.reprovision {
        // Only once its snapshot can no longer be picked: the recreated PVC would take it.
        if failed_marks.contains(&ObjectKey::new(&r.namespace, &r.snapshot)) {
            continue;
        }
        let key = ObjectKey::new(&r.namespace, &r.pvc);
        // The record first: without it the recreated PVC could be restored, and the tablet
        // re-provisioned, again (docs/design.md §5.7).
        if let Err(e) = record_reprovisioned(kube, r).await {
            report.errors.push(ActError::new(
                "recording the re-provisioning on VolumeSnapshot",
                ObjectKey::new(&r.namespace, &r.snapshot),
                e,
            ));
            continue;
        }
        let pods: Api<Pod> = Api::namespaced(kube.clone(), &r.namespace);
        let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(kube.clone(), &r.namespace);
        let done = match delete_exactly(&pods, &r.pod, &r.pod_uid, &r.pod_resource_version).await {
            Ok(()) => delete_exactly(&pvcs, &r.pvc, &r.pvc_uid, &r.pvc_resource_version).await,
            Err(e) => Err(e),
        };
        match done {
            Ok(()) => {
                report.run.reprovisioned.push(key.to_string());
                events
                    .publish(
                        &Subject::snapshot(&r.namespace, &r.snapshot),
                        EventType::Warning,
                        "ReprovisionTablet",
                        "TabletReprovisioned",
                        &format!(
                            "Pod and PVC {} deleted: restored from {}, it cannot catch up ({}); the operator recreates them and vttablet restores from the regular backup",
                            r.pvc, r.snapshot, r.io_error
                        ),
                    )
                    .await;
            }
            Err(e) => {
                report
                    .errors
                    .push(ActError::new("re-provisioning the tablet of PVC", key, e))
            }
        }
    }
}

/// Records on the snapshot that `r.tablet` is re-provisioned (a merge patch: only that
/// key is touched).
async fn record_reprovisioned(kube: &kube::Client, r: &Reprovision) -> Result<(), kube::Error> {
    let value = snapshot::Reprovisioned {
        pvc_uid: r.pvc_uid.clone(),
        at: Timestamp::now(),
        why: format!(
            "tablet {} restored from this snapshot could not catch up: {}",
            r.tablet,
            vtsnap_core::k8s_names::cut_to_bytes(&r.io_error, 512)
        ),
    }
    .render();
    let patch =
        json!({"metadata": {"annotations": {snapshot::reprovisioned_key(r.tablet.uid): value}}});
    apis::volume_snapshots(kube, &r.namespace)
        .patch(&r.snapshot, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(drop)
}

/// A Warning Event on each snapshot whose restored tablet is left as it is.
async fn warn_not_reprovisioned(events: &Events, p: &Plan) {
    for n in &p.restores.not_reprovisioned {
        events
            .publish(
                &Subject::snapshot(&n.namespace, &n.snapshot),
                EventType::Warning,
                "ReprovisionTablet",
                "TabletNotReprovisioned",
                &format!(
                    "the tablet of PVC {} restored from it cannot catch up and is not re-provisioned: {}",
                    n.pvc, n.why
                ),
            )
            .await;
    }
}

/// A Warning Event on each snapshot whose restored tablet nothing started replicating.
async fn warn_not_replicating(events: &Events, p: &Plan) {
    for n in &p.restores.not_replicating {
        events
            .publish(
                &Subject::snapshot(&n.namespace, &n.snapshot),
                EventType::Warning,
                "CheckReplication",
                "TabletNotReplicating",
                &n.message(),
            )
            .await;
    }
}

/// A Warning Event on the VitessCluster for each shard whose coverage is at risk.
async fn warn_coverage(events: &Events, p: &Plan, inv: &Inventory) {
    for c in &p.coverage {
        let CoverageState::Known {
            warning: Some(w), ..
        } = &c.state
        else {
            continue;
        };
        let uid = inv
            .clusters
            .get(&ObjectKey::new(&c.namespace, &c.cluster))
            .map(|k| k.uid.as_str());
        events
            .publish(
                &Subject::vitess_cluster(&c.namespace, &c.cluster, uid),
                EventType::Warning,
                "CheckCoverage",
                "CoverageAtRisk",
                &format!("{}/{}: {w}", c.keyspace, c.shard),
            )
            .await;
    }
}
