//! `run`: observe (one paginated LIST per kind and namespace) → decide ([`plan`]) → act →
//! report. A namespace whose LIST fails, even half-way through its pages, is left out of
//! the plan entirely: nothing there is deleted on an uncertain read, and the run exits 1.

use std::convert::Infallible;
use std::time::Duration;
use vtsnap_core::exit::Exit;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use serde::Serialize;
use serde_json::{Value, json};
use vtsnap_core::config::Config;
use vtsnap_core::fence::client as fence_client;
use vtsnap_core::labels::{MANAGED_BY, MANAGED_BY_VTSNAP};
use vtsnap_core::naming::TabletAlias;
use vtsnap_core::reconcile::{Change, ReplaceError, replace_with_retry};
use vtsnap_core::snapshot;
use vtsnap_core::vtctld::VtctldClient;
use vtsnap_core::vtctld::client::CallLimits;

use crate::decide::{OwnerChange, Plan, plan};
use crate::observe::Inventory;
use crate::restores::MarkUnusable;

#[derive(Debug, Clone)]
pub struct GcOptions {
    pub dry_run: bool,
    pub only_cluster: Option<String>,
    /// How long a fence recovery waits for the node helper.
    pub node_timeout: Duration,
}

/// The JSON line printed at exit.
#[derive(Debug, Clone, Serialize)]
pub struct GcReport {
    pub dry_run: bool,
    pub plan: Plan,
    pub deleted: Vec<String>,
    pub owner_refs_changed: usize,
    pub fences_recovered: Vec<String>,
    /// Snapshots marked unusable for restores (`namespace/name`).
    pub marked_unusable: Vec<String>,
    /// Stuck restores whose Pod and PVC were deleted (`namespace/name`).
    pub unstuck: Vec<String>,
    /// Namespaces left out because a LIST failed.
    pub unreadable: Vec<String>,
    pub errors: Vec<String>,
    pub exit_code: u8,
}

fn snapshots_api(kube: &kube::Client, ns: &str) -> Api<DynamicObject> {
    snapshot::api(kube, ns)
}

fn clusters_api(kube: &kube::Client, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "planetscale.com",
        "v2",
        "VitessCluster",
    ));
    Api::namespaced_with(kube.clone(), ns, &ar)
}

fn to_value<T: Serialize>(t: &T) -> Value {
    serde_json::to_value(t).unwrap_or(Value::Null)
}

/// Lists every page of `api`, folding each page into the inventory as it arrives (only the
/// inventory is kept, never all the objects).
async fn fold_pages<K>(
    api: &Api<K>,
    lp: &ListParams,
    mut f: impl FnMut(&Value),
) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + Serialize + std::fmt::Debug,
{
    let mut lp = lp.clone().limit(500);
    loop {
        let page = api.list(&lp).await?;
        for item in &page.items {
            f(&to_value(item));
        }
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => return Ok(()),
        }
    }
}

/// Reads one namespace into `part`; any failed LIST (even on a later page) fails the whole
/// namespace, and the caller then discards `part`.
async fn observe_namespace(
    kube: &kube::Client,
    ns: &str,
    part: &mut Inventory,
    now: Timestamp,
) -> Result<(), String> {
    let managed = ListParams::default().labels(&format!("{MANAGED_BY}={MANAGED_BY_VTSNAP}"));
    fold_pages(&snapshots_api(kube, ns), &managed, |v| part.add_snapshot(v))
        .await
        .map_err(|e| format!("VolumeSnapshots: {e}"))?;
    fold_pages(
        &Api::<PersistentVolumeClaim>::namespaced(kube.clone(), ns),
        &ListParams::default(),
        |v| part.add_pvc(v),
    )
    .await
    .map_err(|e| format!("PersistentVolumeClaims: {e}"))?;
    fold_pages(&Api::<Lease>::namespaced(kube.clone(), ns), &managed, |v| {
        part.add_lease(v, now)
    })
    .await
    .map_err(|e| format!("Leases: {e}"))?;
    fold_pages(&clusters_api(kube, ns), &ListParams::default(), |v| {
        part.add_cluster(v)
    })
    .await
    .map_err(|e| format!("VitessClusters: {e}"))?;
    let tablets = ListParams::default().labels(&format!(
        "{}={}",
        vtsnap_core::labels::COMPONENT,
        vtsnap_core::labels::COMPONENT_VTTABLET
    ));
    fold_pages(&Api::<Pod>::namespaced(kube.clone(), ns), &tablets, |v| {
        part.add_pod(v)
    })
    .await
    .map_err(|e| format!("Pods: {e}"))?;
    Ok(())
}

/// Asks vtctld how the replication of each restored, running tablet goes (whose snapshot
/// is still usable): its last IO error, if any. An error here leaves the tablet out (no
/// action is taken on an unknown).
async fn observe_catch_up(kube: &kube::Client, config: &Config, inv: &mut Inventory) {
    let usable: std::collections::BTreeSet<(&str, &str)> = inv
        .snapshots
        .iter()
        .filter(|s| !s.unusable)
        .map(|s| (s.namespace.as_str(), s.name.as_str()))
        .collect();
    let mut by_cluster: std::collections::BTreeMap<(String, String), Vec<(String, TabletAlias)>> =
        std::collections::BTreeMap::new();
    for r in &inv.restored {
        let running = inv
            .pods
            .get(&(r.namespace.clone(), r.name.clone()))
            .is_some_and(|p| p.phase == "Running");
        if !(r.bound && running && usable.contains(&(r.namespace.as_str(), r.snapshot.as_str()))) {
            continue;
        }
        if let Some(alias) = &r.tablet {
            by_cluster
                .entry((r.namespace.clone(), r.cluster.clone()))
                .or_default()
                .push((r.name.clone(), alias.clone()));
        }
    }
    for ((ns, cluster), tablets) in by_cluster {
        let Some(cl) = config.cluster_in(&ns, &cluster) else {
            continue;
        };
        let vtctld = match vtsnap_core::discover::vtctld_endpoint(kube, &ns, &cluster, &cl.vtctld)
            .await
            .map_err(|e| e.to_string())
            .and_then(|e| VtctldClient::new(&e, CallLimits::default()).map_err(|e| e.to_string()))
        {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(cluster = %format!("{ns}/{cluster}"), error = %e, "no vtctld: restored tablets are not checked");
                continue;
            }
        };
        for (pvc, alias) in tablets {
            match vtctld.get_full_status(&alias).await {
                Ok(st) => {
                    let io = st
                        .replication_status
                        .map(|r| r.last_io_error)
                        .unwrap_or_default();
                    if !io.is_empty() {
                        inv.catch_up.insert((ns.clone(), pvc), io);
                    }
                }
                Err(e) => {
                    tracing::warn!(tablet = %alias, error = %e, "GetFullStatus failed: not checked")
                }
            }
        }
    }
}

/// Marks a snapshot unusable (an annotation; merging, so nothing else is touched).
async fn mark_unusable(kube: &kube::Client, m: &MarkUnusable) -> Result<(), String> {
    let patch = json!({"metadata": {"annotations": {snapshot::ANN_UNUSABLE: m.message}}});
    snapshots_api(kube, &m.namespace)
        .patch(&m.snapshot, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(drop)
        .map_err(|e| format!("marking {}/{} unusable: {e}", m.namespace, m.snapshot))
}

/// Deletes an object only if it is still the one planned for (its UID) and unchanged
/// since it was read (its resourceVersion); gone is done.
async fn delete_exactly<K>(
    api: &Api<K>,
    name: &str,
    uid: &str,
    resource_version: &str,
) -> Result<(), String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
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
        Err(e) => Err(format!("deleting {name} (uid {uid}): {e}")),
    }
}

/// Adds or removes the VitessCluster ownerReference, compare-and-swap, retried on conflicts.
async fn sync_owner(kube: &kube::Client, c: &OwnerChange, add: bool) -> Result<(), String> {
    let api = snapshots_api(kube, &c.namespace);
    let synced = replace_with_retry(
        &api,
        &c.name,
        5,
        |obj: &mut DynamicObject| -> Change<Infallible> {
            let refs = &mut obj.metadata.owner_references;
            let has = refs.iter().flatten().any(|r| r.uid == c.owner_uid);
            match (add, has) {
                (true, true) | (false, false) => return Change::Leave,
                (true, false) => refs.get_or_insert_with(Vec::new).push(
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                        api_version: "planetscale.com/v2".into(),
                        kind: "VitessCluster".into(),
                        name: c.cluster.clone(),
                        uid: c.owner_uid.clone(),
                        block_owner_deletion: Some(false),
                        controller: Some(false),
                    },
                ),
                (false, true) => {
                    if let Some(v) = refs.as_mut() {
                        v.retain(|r| r.uid != c.owner_uid);
                    }
                }
            }
            Change::Replace
        },
    )
    .await;
    match synced {
        // A snapshot deleted meanwhile needs no owner.
        Ok(_) | Err(ReplaceError::Gone { .. }) => Ok(()),
        Err(ReplaceError::Read { source, .. } | ReplaceError::Write { source, .. }) => {
            Err(source.to_string())
        }
        Err(ReplaceError::Conflicts { .. }) => Err(format!(
            "{}/{}: ownerReferences kept conflicting",
            c.namespace, c.name
        )),
        Err(ReplaceError::GaveUp { reason, .. }) => match reason {},
    }
}

pub async fn run(config: &Config, opts: &GcOptions, kube: kube::Client) -> GcReport {
    let now = Timestamp::now();
    let mut namespaces: Vec<String> = config
        .clusters
        .iter()
        .filter(|c| opts.only_cluster.as_deref().is_none_or(|o| o == c.name))
        .map(|c| c.namespace.clone())
        .collect();
    namespaces.sort();
    namespaces.dedup();

    // observe
    let mut inv = Inventory::default();
    let mut unreadable = Vec::new();
    for ns in &namespaces {
        let mut part = Inventory::default();
        match observe_namespace(&kube, ns, &mut part, now).await {
            Ok(()) => {
                inv.snapshots.extend(part.snapshots);
                inv.in_use.extend(part.in_use);
                inv.in_use_unknown.extend(part.in_use_unknown);
                inv.leases.extend(part.leases);
                inv.clusters.extend(part.clusters);
                inv.unusable_clusters.extend(part.unusable_clusters);
                inv.unreadable.extend(part.unreadable);
                inv.restored.extend(part.restored);
                inv.pods.extend(part.pods);
            }
            Err(e) => {
                tracing::error!(namespace = %ns, error = %e, "cannot read the namespace; nothing there is deleted");
                unreadable.push(format!("{ns}: {e}"));
            }
        }
    }

    observe_catch_up(&kube, config, &mut inv).await;

    // decide
    let p = plan(config, &inv, now, opts.only_cluster.as_deref());
    let mut report = GcReport {
        dry_run: opts.dry_run,
        plan: p.clone(),
        deleted: vec![],
        owner_refs_changed: 0,
        fences_recovered: vec![],
        marked_unusable: vec![],
        unstuck: vec![],
        unreadable,
        errors: vec![],
        exit_code: 0,
    };

    // act
    if !opts.dry_run {
        for f in &p.recover_fences {
            let api: Api<Lease> = Api::namespaced(kube.clone(), &f.namespace);
            let r = match api.get_opt(&f.name).await {
                Ok(Some(l)) => fence_client::recover(&api, &l, opts.node_timeout)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
                Ok(None) => Ok(()),
                Err(e) => Err(e.to_string()),
            };
            match r {
                Ok(()) => report
                    .fences_recovered
                    .push(format!("{}/{}", f.namespace, f.name)),
                Err(e) => report
                    .errors
                    .push(format!("recovering fence {}/{}: {e}", f.namespace, f.name)),
            }
        }
        let owner_of: std::collections::BTreeMap<(String, String), String> = inv
            .snapshots
            .iter()
            .map(|s| ((s.namespace.clone(), s.name.clone()), s.cluster.clone()))
            .collect();
        for d in &p.delete {
            match snapshots_api(&kube, &d.namespace)
                .delete(&d.name, &DeleteParams::default())
                .await
            {
                Ok(_) => {
                    report.deleted.push(format!("{}/{}", d.namespace, d.name));
                    if let Some(cluster) = owner_of.get(&(d.namespace.clone(), d.name.clone())) {
                        let uid = inv
                            .clusters
                            .get(&(d.namespace.clone(), cluster.clone()))
                            .map(|c| c.uid.as_str());
                        vtsnap_core::events::emit(
                            &kube,
                            "vtsnap-gc",
                            &d.namespace,
                            &vtsnap_core::events::Subject::vitess_cluster(cluster, uid),
                            "SnapshotDeleted",
                            &format!("deleted VolumeSnapshot {} ({})", d.name, d.reason),
                            false,
                        )
                        .await;
                    }
                }
                // Someone else deleted it: done.
                Err(kube::Error::Api(s)) if s.code == 404 => {
                    report.deleted.push(format!("{}/{}", d.namespace, d.name))
                }
                Err(e) => report
                    .errors
                    .push(format!("deleting {}/{}: {e}", d.namespace, d.name)),
            }
        }
        act_on_restores(&kube, &p, &inv, &mut report).await;
        for (changes, add) in [(&p.owner_refs.add, true), (&p.owner_refs.remove, false)] {
            for c in changes {
                match sync_owner(&kube, c, add).await {
                    Ok(()) => report.owner_refs_changed += 1,
                    Err(e) => report.errors.push(e),
                }
            }
        }
    }

    // report
    for d in &p.delete {
        tracing::info!(snapshot = %format!("{}/{}", d.namespace, d.name), reason = d.reason.as_str(), dry_run = opts.dry_run, "delete");
    }
    report.exit_code = if report.unreadable.is_empty() && report.errors.is_empty() {
        Exit::Ok
    } else {
        Exit::Failed
    }
    .code();
    report
}

/// Marks snapshots unusable, then un-sticks restores: a stuck restore whose snapshot could
/// not be marked is left for the next run (the recreated PVC would pick it again).
async fn act_on_restores(kube: &kube::Client, p: &Plan, inv: &Inventory, report: &mut GcReport) {
    let mut failed_marks = std::collections::BTreeSet::new();
    for m in &p.restores.mark_unusable {
        match mark_unusable(kube, m).await {
            Ok(()) => {
                report
                    .marked_unusable
                    .push(format!("{}/{}", m.namespace, m.snapshot));
                vtsnap_core::events::emit(
                    kube,
                    "vtsnap-gc",
                    &m.namespace,
                    &vtsnap_core::events::Subject::snapshot(&m.snapshot),
                    "SnapshotUnusable",
                    &m.message,
                    true,
                )
                .await;
            }
            Err(e) => {
                failed_marks.insert((m.namespace.clone(), m.snapshot.clone()));
                report.errors.push(e);
            }
        }
    }
    let cluster_of: std::collections::BTreeMap<(&str, &str), &str> = inv
        .restored
        .iter()
        .map(|r| ((r.namespace.as_str(), r.name.as_str()), r.cluster.as_str()))
        .collect();
    for u in &p.restores.unstick {
        if failed_marks.contains(&(u.namespace.clone(), u.snapshot.clone())) {
            continue;
        }
        let pods: Api<Pod> = Api::namespaced(kube.clone(), &u.namespace);
        let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(kube.clone(), &u.namespace);
        let done = match delete_exactly(&pods, &u.pod, &u.pod_uid, &u.pod_resource_version).await {
            Ok(()) => delete_exactly(&pvcs, &u.pvc, &u.pvc_uid, &u.pvc_resource_version).await,
            Err(e) => Err(e),
        };
        match done {
            Ok(()) => {
                report.unstuck.push(format!("{}/{}", u.namespace, u.pvc));
                if let Some(cluster) = cluster_of.get(&(u.namespace.as_str(), u.pvc.as_str())) {
                    let uid = inv
                        .clusters
                        .get(&(u.namespace.clone(), (*cluster).to_owned()))
                        .map(|c| c.uid.as_str());
                    vtsnap_core::events::emit(
                        kube,
                        "vtsnap-gc",
                        &u.namespace,
                        &vtsnap_core::events::Subject::vitess_cluster(cluster, uid),
                        "RestoreUnstuck",
                        &format!(
                            "Pod and PVC {} deleted after {}s Pending: snapshot {} restores only on node {}; the operator recreates them",
                            u.pvc, u.pending_seconds, u.snapshot, u.node
                        ),
                        true,
                    )
                    .await;
                }
            }
            Err(e) => report
                .errors
                .push(format!("un-sticking {}/{}: {e}", u.namespace, u.pvc)),
        }
    }
}

/// The plan as a table.
pub fn table(p: &Plan) -> String {
    let mut out = String::new();
    for (what, items) in [("DELETE", &p.delete), ("KEEP", &p.keep)] {
        for i in items {
            out.push_str(&format!(
                "{what:<7} {}/{}  {}\n",
                i.namespace, i.name, i.reason
            ));
        }
    }
    for c in &p.owner_refs.add {
        out.push_str(&format!(
            "OWN     {}/{}  add ownerReference to VitessCluster {}\n",
            c.namespace, c.name, c.cluster
        ));
    }
    for c in &p.owner_refs.remove {
        out.push_str(&format!(
            "DISOWN  {}/{}  remove ownerReference to VitessCluster {}\n",
            c.namespace, c.name, c.cluster
        ));
    }
    for f in &p.recover_fences {
        out.push_str(&format!(
            "RECOVER {}/{}  expired fence\n",
            f.namespace, f.name
        ));
    }
    for m in &p.restores.mark_unusable {
        out.push_str(&format!(
            "UNUSABLE {}/{}  {}\n",
            m.namespace, m.snapshot, m.message
        ));
    }
    for u in &p.restores.unstick {
        out.push_str(&format!(
            "UNSTICK {}/{}  Pending {}s; snapshot {} restores only on {}\n",
            u.namespace, u.pvc, u.pending_seconds, u.snapshot, u.node
        ));
    }
    for s in &p.skipped {
        out.push_str(&format!(
            "SKIP    {}/{}  {:?} {}: {}\n",
            s.namespace,
            s.name,
            s.kind,
            s.reason.as_str(),
            s.message
        ));
    }
    out.push_str(&format!(
        "{} to delete, {} kept, {} ownerReference changes, {} fences to recover, {} skipped\n",
        p.delete.len(),
        p.keep.len(),
        p.owner_refs.add.len() + p.owner_refs.remove.len(),
        p.recover_fences.len(),
        p.skipped.len()
    ));
    out
}

/// JSON of a plan: `{"delete","keep","owner_refs":{"add","remove"},"recover_fences","skipped"}`.
pub fn plan_json(p: &Plan) -> Value {
    json!(p)
}
