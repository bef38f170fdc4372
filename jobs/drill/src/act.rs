//! Act: create the drill's PVC and Pod, wait for the checker, record the result on the
//! snapshot, and remove what it made (docs/design.md §5.9).
//!
//! Both objects are owned by the drill Job: a drill killed at any step leaves them to the
//! garbage collector. The Job deletes them itself when it ends normally. It writes only
//! its own objects and the snapshot's `vtsnap.io/drill` annotation.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use vtsnap_core::coverage::Coverage;
use vtsnap_core::events::{EventType, Events, Subject};
use vtsnap_core::reconcile::{Refusal, Waited, remove_made, wait_until};
use vtsnap_core::snapshot::{ANN_DRILL, DrillOf, DrillRecord, DrillResult};

use crate::decide::outcome::{self, WaitEnd, Watched};
use crate::error::DrillError;
use crate::observe::pod::{PodStatus, unschedulable};

/// The component name of the drill's Events.
pub const COMPONENT: &str = "vtsnap-drill";

/// What act did, for the report.
#[derive(Debug, Clone, Default)]
pub struct Done {
    pub steps: Vec<String>,
    pub record: Option<DrillRecord>,
    /// What could not be removed (the garbage collector will, through the owner).
    pub left: Vec<String>,
}

/// Runs one drill: `pvc` and `pod` (named `name`) restore `snapshot` in `namespace`.
#[allow(clippy::too_many_arguments)]
pub async fn drill(
    kube: &kube::Client,
    namespace: &str,
    name: &str,
    snapshot: &str,
    record_for: &DrillOf,
    pvc: &Value,
    pod: &Value,
    limit: Duration,
    job: Option<String>,
    catch_up: &Coverage,
) -> Result<Done, DrillError> {
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(kube.clone(), namespace);
    let pods: Api<Pod> = Api::namespaced(kube.clone(), namespace);
    let mut done = Done::default();
    let create_err = |object: String| move |source| DrillError::Create { object, source };

    let claim: PersistentVolumeClaim = serde_json::from_value(pvc.clone())
        .map_err(|e| DrillError::UnknownShard(format!("the drill PVC does not build: {e}")))?;
    let started = Instant::now();
    let claim = pvcs
        .create(&PostParams::default(), &claim)
        .await
        .map_err(create_err(format!(
            "PersistentVolumeClaim {namespace}/{name}"
        )))?;
    done.steps.push("pvc-created".into());
    let spec: Pod = serde_json::from_value(pod.clone())
        .map_err(|e| DrillError::UnknownShard(format!("the drill Pod does not build: {e}")))?;
    let created = match pods.create(&PostParams::default(), &spec).await {
        Ok(p) => p,
        Err(source) => {
            remove(&pvcs, name, claim.metadata.uid.as_deref(), &mut done).await;
            return Err(DrillError::Create {
                object: format!("Pod {namespace}/{name}"),
                source,
            });
        }
    };
    done.steps.push("pod-created".into());

    let bound = |p: Option<&PersistentVolumeClaim>| {
        p.and_then(|p| p.status.as_ref())
            .and_then(|s| s.phase.as_deref())
            == Some("Bound")
    };
    let made = Made {
        pods: &pods,
        pvcs: &pvcs,
        name,
        pod_uid: created.metadata.uid.as_deref(),
        pvc_uid: claim.metadata.uid.as_deref(),
    };
    let refused = |object: &str, refusal: Refusal, done: Done| DrillError::Watch {
        object: format!("{object} {namespace}/{name}"),
        refusal,
        left: done.left,
    };
    let pvc_bound_ms = match wait_until(&pvcs, name, limit, bound).await {
        Waited::Met(_) => {
            done.steps.push("pvc-bound".into());
            Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX))
        }
        Waited::TimedOut { .. } => None,
        Waited::Refused(r) => {
            made.clean_up(&mut done).await;
            return Err(refused("PersistentVolumeClaim", r, done));
        }
    };
    let left = limit.saturating_sub(started.elapsed());
    let ended = |p: Option<&Pod>| p.is_some_and(|p| outcome::finished(&PodStatus::read(p)));
    let (last, wait) = if pvc_bound_ms.is_some() {
        match wait_until(&pods, name, left, ended).await {
            Waited::Met(pod) => (pod, WaitEnd::Finished),
            Waited::TimedOut { last, .. } => (last.present().cloned(), WaitEnd::Deadline),
            Waited::Refused(r) => {
                made.clean_up(&mut done).await;
                return Err(refused("Pod", r, done));
            }
        }
    } else {
        (pods.get_opt(name).await.ok().flatten(), WaitEnd::Deadline)
    };
    done.steps.push(
        match wait {
            WaitEnd::Deadline => "deadline",
            WaitEnd::Finished => "pod-finished",
        }
        .into(),
    );
    let record = outcome::with_catch_up(
        outcome::record(
            &Watched {
                pvc_bound_ms,
                unschedulable: last.as_ref().and_then(unschedulable),
                pod: last.as_ref().map(PodStatus::read),
                wait,
            },
            record_for,
            Timestamp::now(),
            job,
        ),
        catch_up,
    );

    made.clean_up(&mut done).await;
    write_record(kube, namespace, snapshot, &record).await?;
    done.steps.push("recorded".into());
    done.record = Some(record);
    Ok(done)
}

/// The drill's two objects, as this run made them.
struct Made<'a> {
    pods: &'a Api<Pod>,
    pvcs: &'a Api<PersistentVolumeClaim>,
    name: &'a str,
    pod_uid: Option<&'a str>,
    pvc_uid: Option<&'a str>,
}

impl Made<'_> {
    /// Deletes both and waits until they are gone, so that the next drill of the shard
    /// finds none under way; what is still there is listed in `done.left`.
    async fn clean_up(&self, done: &mut Done) {
        remove(self.pods, self.name, self.pod_uid, done).await;
        remove(self.pvcs, self.name, self.pvc_uid, done).await;
        gone(self.pods, self.name, done).await;
        gone(self.pvcs, self.name, done).await;
    }
}

/// Deletes one of the drill's objects, only the very one it made (its UID).
async fn remove<K>(api: &Api<K>, name: &str, uid: Option<&str>, done: &mut Done)
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    remove_made(api, name, uid, (&mut done.steps, &mut done.left)).await;
}

/// How long the run waits for its deleted objects to go (a Pod's grace period, the PVC's
/// protection finalizer).
const GONE_LIMIT: Duration = Duration::from_secs(120);

/// Waits until the object is gone; one still there at [`GONE_LIMIT`] is reported left.
async fn gone<K>(api: &Api<K>, name: &str, done: &mut Done)
where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + 'static,
{
    let kind = K::kind(&()).into_owned();
    if done.left.iter().any(|l| l == &format!("{kind}/{name}")) {
        return;
    }
    let waited = wait_until(api, name, GONE_LIMIT, |o: Option<&K>| o.is_none()).await;
    if !matches!(waited, Waited::Met(_)) {
        done.left.push(format!("{kind}/{name}"));
    }
}

/// The record on the snapshot (`vtsnap.io/drill`) and an Event on it.
pub async fn write_record(
    kube: &kube::Client,
    namespace: &str,
    snapshot: &str,
    record: &DrillRecord,
) -> Result<(), DrillError> {
    let api = vtsnap_core::reconcile::apis::volume_snapshots(kube, namespace);
    let patch = json!({"metadata": {"annotations": {ANN_DRILL: record.render()}}});
    api.patch(snapshot, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|source| DrillError::Record {
            snapshot: format!("{namespace}/{snapshot}"),
            source,
        })?;
    let (type_, reason, message) = match record.result {
        DrillResult::Passed => {
            let rto = record.rto.unwrap_or_default();
            (
                EventType::Normal,
                "DrillPassed",
                format!(
                    "restored and checked: RTO {} ms (PVC bound {} ms, restore {} ms, mysqld ready {} ms)",
                    rto.total_ms(),
                    rto.pvc_bound_ms,
                    rto.restore_ms,
                    rto.mysqld_ready_ms
                ),
            )
        }
        DrillResult::Failed => (
            EventType::Warning,
            "DrillFailed",
            format!(
                "the restore drill failed: {}",
                record.reason.as_deref().unwrap_or_default()
            ),
        ),
    };
    Events::new(kube.clone(), COMPONENT)
        .publish(
            &Subject::snapshot(namespace, snapshot),
            type_,
            "RecordDrill",
            reason,
            &message,
        )
        .await;
    Ok(())
}
