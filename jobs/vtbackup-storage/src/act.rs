//! Act: carries out a plan, shard by shard, and [`run`], the whole program: observe
//! ([`crate::observe::observe`]) → decide ([`crate::decide::plan`]) → act → report.
//!
//! Acting re-checks what deciding assumed: every delete names the UID it was planned for,
//! and a PVC is deleted only after a fresh read of its Pod answers 404 (waiting up to
//! [`POD_GONE_TIMEOUT`] for a Pod deleted just before); any other answer leaves it for the
//! next run.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};
use vtsnap_core::config::Config;
use vtsnap_core::reconcile::{ActError, Completeness, ObjectKey};
use vtsnap_core::vtbackup::{ANN_DATA_VOLUME_HASH, ANN_TEMPLATE_HASH};

use crate::decide::{Action, Kind, ShardPlan, Step, plan};
use crate::observe::{ANN_REPLACED_FOR, observe};
use crate::report::{self, StorageRun};

pub use crate::report::Report;

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

/// Why a step was not done (the cause of its [`ActError`]).
#[derive(Debug, thiserror::Error)]
enum StepError {
    #[error(transparent)]
    Api(#[from] kube::Error),
    /// Without the loop guard the Pod is not deleted.
    #[error("stamping the loop guard on PVC {pvc}: {source}")]
    Guard { pvc: String, source: kube::Error },
    #[error("kept: cannot verify that Pod {pod} is gone: {source}")]
    PodUnverified { pod: String, source: kube::Error },
    #[error("kept: its Pod {pod} is still there")]
    PodStillThere { pod: String },
    #[error("no such step: {action:?} on a {kind:?}")]
    NoSuchStep { action: Action, kind: Kind },
}

/// What a step was doing, for its error: `deleting Pod`, `adopting PVC`.
fn doing(st: &Step) -> String {
    let verb = match st.action {
        Action::Adopt => "adopting",
        Action::DeletePod | Action::DeletePvc => "deleting",
        Action::Keep | Action::Wait => "keeping",
    };
    let kind = match st.kind {
        Kind::Pod => "Pod",
        Kind::PersistentVolumeClaim => "PVC",
    };
    format!("{verb} {kind}")
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

/// Deletes `st`'s object as planned; gone is done.
async fn delete<K>(api: &Api<K>, st: &Step) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(&st.name, &preconditioned(st)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// A fresh read of the Pod: `Ok(true)` when it is verified gone (404), waiting up to
/// `limit`; `Ok(false)` when it is still there; `Err` on any other answer.
async fn pod_gone(pods: &Api<Pod>, name: &str, limit: Duration) -> Result<bool, kube::Error> {
    let start = Instant::now();
    loop {
        match pods.get_opt(name).await? {
            None => return Ok(true),
            Some(_) if start.elapsed() < limit => tokio::time::sleep(POLL).await,
            Some(_) => return Ok(false),
        }
    }
}

async fn stamp<K>(api: &Api<K>, name: &str, annotations: Value) -> Result<(), kube::Error>
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
    for st in &s.objects {
        let r: Result<(), StepError> = match (st.kind, st.action) {
            (_, Action::Keep | Action::Wait) => continue,
            (Kind::Pod, Action::Adopt) => {
                stamp(&pods, &st.name, json!({ANN_TEMPLATE_HASH: desired.template_hash, ANN_DATA_VOLUME_HASH: desired.data_volume_hash})).await.map_err(Into::into)
            }
            (Kind::PersistentVolumeClaim, Action::Adopt) => {
                stamp(&pvcs, &st.name, json!({ANN_TEMPLATE_HASH: desired.template_hash})).await.map_err(Into::into)
            }
            (Kind::Pod, Action::DeletePod) => {
                // The loop guard first: without it the Pod is not deleted.
                let guarded = match pvc_step {
                    Some(p) if p.action != Action::DeletePvc => {
                        stamp(&pvcs, &p.name, json!({ANN_REPLACED_FOR: desired.guard()}))
                            .await
                            .map_err(|source| StepError::Guard { pvc: p.name.clone(), source })
                    }
                    _ => Ok(()),
                };
                match guarded {
                    Ok(()) => delete(&pods, st).await.map_err(Into::into),
                    Err(e) => Err(e),
                }
            }
            (Kind::PersistentVolumeClaim, Action::DeletePvc) => {
                let pod = s.objects.iter().find(|o| o.kind == Kind::Pod).map_or(st.name.as_str(), |o| o.name.as_str());
                match pod_gone(&pods, pod, opts.pod_gone_timeout).await {
                    Ok(true) => delete(&pvcs, st).await.map_err(Into::into),
                    Ok(false) => Err(StepError::PodStillThere { pod: pod.to_owned() }),
                    Err(source) => Err(StepError::PodUnverified { pod: pod.to_owned(), source }),
                }
            }
            (kind, action) => Err(StepError::NoSuchStep { action, kind }),
        };
        match r {
            Ok(()) => report
                .run
                .done
                .push(format!("{ns}/{}: {:?}", st.name, st.action)),
            Err(e) => {
                let e = ActError::new(doing(st), ObjectKey::new(ns, &st.name), e);
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
    let world = observe(&kube, config, opts.only_cluster.as_deref()).await;
    let p = plan(config, &world, opts.only_cluster.as_deref());
    // A step waiting on something unreadable, or a namespace not listed at all, leaves
    // the run incomplete (exit 1).
    for why in &world.unlisted {
        tracing::warn!(error = %why, "a LIST failed: the namespace was not seen");
    }
    let complete = if p.blocked() || !world.unlisted.is_empty() {
        Completeness::Partial
    } else {
        Completeness::Complete
    };
    let mut report = Report::new(StorageRun {
        dry_run: opts.dry_run,
        plan: p.clone(),
        done: Vec::new(),
    });
    if !opts.dry_run {
        for s in &p.shards {
            act_shard(&kube, s, opts, &mut report).await;
        }
    }
    report::log(&p, opts.dry_run);
    report.finish(complete);
    report
}
