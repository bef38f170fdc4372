//! `run`: observe (one LIST per kind and namespace, the VitessClusters, the StorageClasses)
//! → decide ([`crate::decide::plan`]) → act → report.
//!
//! Acting re-checks what deciding assumed: every delete names the UID it was planned for,
//! and a PVC is deleted only after a fresh read of its Pod answers 404 (waiting up to
//! [`POD_GONE_TIMEOUT`] for a Pod deleted just before); any other answer leaves it for the
//! next run.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use serde::Serialize;
use serde_json::{Value, json};
use vtsnap_core::config::Config;
use vtsnap_core::exit::Exit;
use vtsnap_core::labels;
use vtsnap_core::vtbackup::{
    ANN_DATA_VOLUME_HASH, ANN_TEMPLATE_HASH, BACKUP_TYPE_INIT, LABEL_BACKUP_TYPE,
};

use crate::decide::{Action, Kind, Plan, ShardPlan, Step, plan};
use crate::observe::{ANN_REPLACED_FOR, Read, World, default_class, group};

/// How long a PVC's deletion waits for its Pod, deleted just before, to be gone.
pub const POD_GONE_TIMEOUT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(250);

#[derive(Debug, Clone)]
pub struct Options {
    pub dry_run: bool,
    pub only_cluster: Option<String>,
    /// How long a PVC's deletion waits for its Pod to be gone ([`POD_GONE_TIMEOUT`]).
    pub pod_gone_timeout: Duration,
}

/// The JSON line at exit.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub dry_run: bool,
    pub plan: Plan,
    /// `namespace/name: action` of every step carried out.
    pub done: Vec<String>,
    pub errors: Vec<String>,
    pub exit_code: u8,
}

fn to_values<K: Serialize>(items: Vec<K>) -> Vec<Value> {
    items
        .into_iter()
        .filter_map(|i| serde_json::to_value(i).ok())
        .collect()
}

fn clusters_api(kube: &kube::Client, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("planetscale.com", "v2", "VitessCluster"),
        "vitessclusters",
    );
    Api::namespaced_with(kube.clone(), ns, &ar)
}

/// Reads everything the plan needs. A failed LIST makes its kind unreadable for every
/// shard of the namespace (such shards are then found from the other kind's objects).
pub async fn observe(kube: &kube::Client, config: &Config, only_cluster: Option<&str>) -> World {
    let init = ListParams::default().labels(&labels::selector(&[
        (labels::COMPONENT, labels::COMPONENT_VTBACKUP),
        (LABEL_BACKUP_TYPE, BACKUP_TYPE_INIT),
    ]));
    let mut world = World {
        shards: Vec::new(),
        clusters: BTreeMap::new(),
        default_class: match Api::<StorageClass>::all(kube.clone())
            .list(&ListParams::default())
            .await
        {
            Ok(l) => Read::Present(default_class(&to_values(l.items))),
            Err(e) => Read::Unreadable(format!("StorageClasses: {e}")),
        },
    };
    let scope: Vec<(&str, &str)> = config
        .clusters
        .iter()
        .filter(|c| only_cluster.is_none_or(|o| o == c.name))
        .map(|c| (c.namespace.as_str(), c.name.as_str()))
        .collect();
    let namespaces: BTreeSet<&str> = scope.iter().map(|(ns, _)| *ns).collect();
    for ns in namespaces {
        let pods =
            vtsnap_core::discover::list_all(&Api::<Pod>::namespaced(kube.clone(), ns), &init).await;
        let pvcs = vtsnap_core::discover::list_all(
            &Api::<PersistentVolumeClaim>::namespaced(kube.clone(), ns),
            &init,
        )
        .await;
        let (pods, pods_err) = match pods {
            Ok(p) => (to_values(p), None),
            Err(e) => (Vec::new(), Some(format!("Pods in {ns}: {e}"))),
        };
        let (pvcs, pvcs_err) = match pvcs {
            Ok(p) => (to_values(p), None),
            Err(e) => (Vec::new(), Some(format!("PVCs in {ns}: {e}"))),
        };
        let mut shards = group(&pods, &pvcs);
        for s in &mut shards {
            if let Some(e) = &pods_err {
                s.pod = Read::Unreadable(e.clone());
            }
            if let Some(e) = &pvcs_err {
                s.pvc = Read::Unreadable(e.clone());
            }
        }
        world.shards.extend(shards);
        for (_, cluster) in scope.iter().filter(|(n, _)| *n == ns) {
            let read = match clusters_api(kube, ns).get_opt(cluster).await {
                Ok(Some(c)) => Read::Present(serde_json::to_value(c).unwrap_or(Value::Null)),
                Ok(None) => Read::Absent,
                Err(e) => Read::Unreadable(e.to_string()),
            };
            world
                .clusters
                .insert((ns.to_owned(), (*cluster).to_owned()), read);
        }
    }
    world
}

/// A delete of exactly what was read: the same UID, unchanged since (its resourceVersion).
fn preconditioned(st: &Step) -> DeleteParams {
    DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some(st.uid.clone()),
            resource_version: Some(st.resource_version.clone()).filter(|v| !v.is_empty()),
        }),
        ..DeleteParams::default()
    }
}

/// A fresh read of the Pod: `Ok(true)` when it is verified gone (404), waiting up to
/// `limit`; `Ok(false)` when it is still there; `Err` on any other answer.
async fn pod_gone(pods: &Api<Pod>, name: &str, limit: Duration) -> Result<bool, String> {
    let start = Instant::now();
    loop {
        match pods.get_opt(name).await {
            Ok(None) => return Ok(true),
            Ok(Some(_)) if start.elapsed() < limit => tokio::time::sleep(POLL).await,
            Ok(Some(_)) => return Ok(false),
            Err(e) => return Err(format!("cannot verify that Pod {name} is gone: {e}")),
        }
    }
}

async fn stamp<K>(api: &Api<K>, name: &str, annotations: Value) -> Result<(), String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(&json!({"metadata": {"annotations": annotations}})),
    )
    .await
    .map(drop)
    .map_err(|e| format!("stamping {name}: {e}"))
}

/// Carries out one shard's steps, in order: Pod first, then the PVC.
async fn act_shard(kube: &kube::Client, s: &ShardPlan, opts: &Options, report: &mut Report) {
    let ns = &s.key.namespace;
    let pods: Api<Pod> = Api::namespaced(kube.clone(), ns);
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(kube.clone(), ns);
    let Some(desired) = &s.desired else { return };
    let pvc_step = s
        .objects
        .iter()
        .find(|o| o.kind == Kind::PersistentVolumeClaim);
    let done = |report: &mut Report, st: &Step| {
        report
            .done
            .push(format!("{ns}/{}: {:?}", st.name, st.action))
    };
    for st in &s.objects {
        let r: Result<(), String> = match (st.kind, st.action) {
            (_, Action::Keep | Action::Wait) => continue,
            (Kind::Pod, Action::Adopt) => {
                stamp(&pods, &st.name, json!({ANN_TEMPLATE_HASH: desired.template_hash, ANN_DATA_VOLUME_HASH: desired.data_volume_hash})).await
            }
            (Kind::PersistentVolumeClaim, Action::Adopt) => {
                stamp(&pvcs, &st.name, json!({ANN_TEMPLATE_HASH: desired.template_hash})).await
            }
            (Kind::Pod, Action::DeletePod) => {
                // The loop guard first: without it the Pod is not deleted.
                let guarded = match pvc_step {
                    Some(p) if p.action != Action::DeletePvc => {
                        stamp(&pvcs, &p.name, json!({ANN_REPLACED_FOR: desired.guard()})).await
                    }
                    _ => Ok(()),
                };
                match guarded {
                    Ok(()) => match pods.delete(&st.name, &preconditioned(st)).await {
                        Ok(_) => Ok(()),
                        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
                        Err(e) => Err(format!("deleting Pod {ns}/{}: {e}", st.name)),
                    },
                    Err(e) => Err(e),
                }
            }
            (Kind::PersistentVolumeClaim, Action::DeletePvc) => {
                let pod = s.objects.iter().find(|o| o.kind == Kind::Pod).map_or(st.name.as_str(), |o| o.name.as_str());
                match pod_gone(&pods, pod, opts.pod_gone_timeout).await {
                    Ok(true) => match pvcs.delete(&st.name, &preconditioned(st)).await {
                        Ok(_) => Ok(()),
                        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
                        Err(e) => Err(format!("deleting PVC {ns}/{}: {e}", st.name)),
                    },
                    Ok(false) => Err(format!("PVC {ns}/{} kept: its Pod is still there", st.name)),
                    Err(e) => Err(format!("PVC {ns}/{} kept: {e}", st.name)),
                }
            }
            (kind, action) => Err(format!("no such step: {action:?} on a {kind:?}")),
        };
        match r {
            Ok(()) => done(report, st),
            Err(e) => {
                tracing::warn!(error = %e, "step not done; the next run tries again");
                report.errors.push(e);
                // A failed step on the Pod keeps the PVC: its absence is not established.
                if st.kind == Kind::Pod {
                    return;
                }
            }
        }
    }
}

pub async fn run(config: &Config, opts: &Options, kube: kube::Client) -> Report {
    // observe
    let world = observe(&kube, config, opts.only_cluster.as_deref()).await;
    // decide
    let p = plan(config, &world, opts.only_cluster.as_deref());
    let mut report = Report {
        dry_run: opts.dry_run,
        plan: p.clone(),
        done: Vec::new(),
        errors: Vec::new(),
        exit_code: 0,
    };
    // act
    if !opts.dry_run {
        for s in &p.shards {
            act_shard(&kube, s, opts, &mut report).await;
        }
    }
    // report
    for s in &p.shards {
        for o in &s.objects {
            tracing::info!(shard = %s.key,
                kind = ?o.kind, name = %o.name, action = ?o.action, reason = ?o.reason, dry_run = opts.dry_run, "{}", o.message);
        }
    }
    report.exit_code = if report.errors.is_empty() && !p.blocked() {
        Exit::Ok
    } else {
        Exit::Failed
    }
    .code();
    report
}

/// The plan from a dump (`kubectl get pods,persistentvolumeclaims,vitessclusters,storageclasses -A -o json`).
pub fn plan_from_dump(
    config: &Config,
    list: &Value,
    only_cluster: Option<&str>,
) -> Result<Plan, String> {
    let items = list
        .get("items")
        .and_then(Value::as_array)
        .ok_or("not a List: no items")?;
    let kind = |k: &str| -> Vec<Value> {
        items
            .iter()
            .filter(|i| i.get("kind").and_then(Value::as_str) == Some(k))
            .cloned()
            .collect()
    };
    let mut clusters = BTreeMap::new();
    for c in kind("VitessCluster") {
        let key = (
            c.pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            c.pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
        );
        let read = if clusters.contains_key(&key) {
            Read::Unreadable("the dump holds it twice".into())
        } else {
            Read::Present(c)
        };
        clusters.insert(key, read);
    }
    for c in &config.clusters {
        clusters
            .entry((c.namespace.clone(), c.name.clone()))
            .or_insert(Read::Absent);
    }
    let classes = kind("StorageClass");
    let world = World {
        shards: group(&kind("Pod"), &kind("PersistentVolumeClaim")),
        clusters,
        default_class: if classes.is_empty() {
            Read::Unreadable("the dump has no StorageClasses (add storageclasses to it)".into())
        } else {
            Read::Present(default_class(&classes))
        },
    };
    Ok(plan(config, &world, only_cluster))
}
