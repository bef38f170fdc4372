//! Act: make the recovery's PVC and Pod, wait for the replay's result, then leave the Pod
//! serving or cut its volume into a VolumeSnapshot (docs/pitr.md §8). It writes only the
//! objects it makes; what fails is removed (the very objects it made, by UID), so a failed
//! recovery leaves nothing behind but its report.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::Value;
use vtsnap_core::reconcile::{Waited, remove_made, wait_until};

use crate::decide::recovery::{FETCH_CONTAINER, REPLAY_CONTAINER, Recovery, cut as snapshot_of};

#[derive(Debug, thiserror::Error)]
pub enum RecoverError {
    #[error("cannot create {object}: {source}")]
    Create { object: String, source: kube::Error },
    #[error("{object} does not build: {detail}")]
    Build { object: String, detail: String },
    #[error("{object}: {detail}")]
    Watch { object: String, detail: String },
    #[error("the {container} container failed (exit {code}): {message}")]
    Container {
        container: String,
        code: i32,
        message: String,
    },
    #[error("the replay's result {0}")]
    Result(String),
}

/// The replay's result, as its container handed it over (hostile until read).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReplayResult {
    pub bytes: u64,
    pub last_transaction: Option<u32>,
    pub gtid_executed: String,
}

/// The kubelet keeps at most this much of a termination message.
const MAX_RESULT_BYTES: usize = 4096;

impl ReplayResult {
    /// Reads the termination message: one JSON object whose set is MySQL's.
    pub fn read(message: &str) -> Result<Self, RecoverError> {
        if message.len() > MAX_RESULT_BYTES {
            return Err(RecoverError::Result(format!(
                "is {} bytes, more than a termination message holds",
                message.len()
            )));
        }
        let r: Self = serde_json::from_str(message.trim())
            .map_err(|e| RecoverError::Result(format!("does not read ({e}): {message:?}")))?;
        vtsnap_core::coverage::GtidSet::parse(
            vtsnap_core::snapshot::GtidFlavor::Mysql56,
            &r.gtid_executed,
            vtsnap_core::coverage::Text::Server,
        )
        .map_err(|e| RecoverError::Result(format!("names no GTID set: {e}")))?;
        Ok(r)
    }
}

/// What the run made and how long each part took.
#[derive(Debug, Clone, Default)]
pub struct Done {
    pub steps: Vec<String>,
    pub result: Option<ReplayResult>,
    /// From the first create to the replay's result.
    pub replayed_ms: u64,
    /// The cut snapshot, once ready; from the first create to then.
    pub cut: Option<String>,
    pub cut_ms: Option<u64>,
    /// What could not be removed.
    pub left: Vec<String>,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The terminated state of `container` (an init container or not), if it ended.
pub fn terminated(pod: &Pod, container: &str) -> Option<(i32, String)> {
    let status = pod.status.as_ref()?;
    status
        .init_container_statuses
        .iter()
        .flatten()
        .chain(status.container_statuses.iter().flatten())
        .find(|c| c.name == container)?
        .state
        .as_ref()?
        .terminated
        .as_ref()
        .map(|t| (t.exit_code, t.message.clone().unwrap_or_default()))
}

fn phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref()?.phase.as_deref()
}

/// Makes `pvc` and `pod` (both named `name`) in `namespace`, waits for the replay, and
/// with `cut` (the recovery and its snapshot class) cuts the stopped volume into a
/// VolumeSnapshot naming the replay's set, then removes Pod and PVC.
pub async fn recover(
    kube: &kube::Client,
    namespace: &str,
    name: &str,
    (pvc, pod): (&Value, &Value),
    cut: Option<(&Recovery, Option<&str>)>,
    limit: Duration,
) -> (Done, Result<(), RecoverError>) {
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(kube.clone(), namespace);
    let pods: Api<Pod> = Api::namespaced(kube.clone(), namespace);
    let mut done = Done::default();
    let started = Instant::now();
    let made = match make(&pvcs, &pods, name, (pvc, pod), &mut done).await {
        Ok(m) => m,
        Err(e) => return (done, Err(e)),
    };
    let outcome = replay(&pods, name, limit, started, &mut done).await;
    let outcome = match (outcome, cut, done.result.as_ref()) {
        (Ok(()), Some((recovery, class)), Some(result)) => {
            let snapshot = snapshot_of(name, recovery, class, &result.gtid_executed);
            cut_volume(
                kube, &pods, namespace, name, &snapshot, limit, started, &mut done,
            )
            .await
        }
        (o, _, _) => o,
    };
    if outcome.is_err() || cut.is_some() {
        made.remove(&pvcs, &pods, name, &mut done).await;
    }
    (done, outcome)
}

/// The UIDs of what was made.
struct Made {
    pvc: Option<String>,
    pod: Option<String>,
}

impl Made {
    async fn remove(
        &self,
        pvcs: &Api<PersistentVolumeClaim>,
        pods: &Api<Pod>,
        name: &str,
        done: &mut Done,
    ) {
        let pod = self.pod.as_deref();
        remove_made(pods, name, pod, (&mut done.steps, &mut done.left)).await;
        let pvc = self.pvc.as_deref();
        remove_made(pvcs, name, pvc, (&mut done.steps, &mut done.left)).await;
    }
}

async fn make(
    pvcs: &Api<PersistentVolumeClaim>,
    pods: &Api<Pod>,
    name: &str,
    (pvc, pod): (&Value, &Value),
    done: &mut Done,
) -> Result<Made, RecoverError> {
    let build = |object: &str| {
        let object = format!("the recovery {object}");
        move |e: serde_json::Error| RecoverError::Build {
            object,
            detail: e.to_string(),
        }
    };
    let claim: PersistentVolumeClaim = serde_json::from_value(pvc.clone()).map_err(build("PVC"))?;
    let spec: Pod = serde_json::from_value(pod.clone()).map_err(build("Pod"))?;
    let claim = pvcs
        .create(&PostParams::default(), &claim)
        .await
        .map_err(|source| RecoverError::Create {
            object: format!("PersistentVolumeClaim {name}"),
            source,
        })?;
    done.steps.push("pvc-created".into());
    let mut made = Made {
        pvc: claim.metadata.uid,
        pod: None,
    };
    match pods.create(&PostParams::default(), &spec).await {
        Ok(p) => {
            made.pod = p.metadata.uid;
            done.steps.push("pod-created".into());
            Ok(made)
        }
        Err(source) => {
            let pvc = made.pvc.as_deref();
            remove_made(pvcs, name, pvc, (&mut done.steps, &mut done.left)).await;
            Err(RecoverError::Create {
                object: format!("Pod {name}"),
                source,
            })
        }
    }
}

/// Waits until the replay ended (or the Pod did: an init container failed, the deadline).
async fn replay(
    pods: &Api<Pod>,
    name: &str,
    limit: Duration,
    started: Instant,
    done: &mut Done,
) -> Result<(), RecoverError> {
    let ended = |p: Option<&Pod>| {
        p.is_none_or(|p| {
            terminated(p, REPLAY_CONTAINER).is_some()
                || matches!(phase(p), Some("Failed" | "Succeeded"))
        })
    };
    let watch = |detail: String| RecoverError::Watch {
        object: format!("Pod {name}"),
        detail,
    };
    let pod = match wait_until(pods, name, limit, ended).await {
        Waited::Met(Some(p)) => p,
        Waited::Met(None) => return Err(watch("deleted before the replay ended".into())),
        Waited::TimedOut { .. } => return Err(watch(format!("no result within {limit:?}"))),
        Waited::Refused(r) => return Err(watch(r.to_string())),
    };
    done.replayed_ms = ms(started.elapsed());
    for container in [FETCH_CONTAINER, REPLAY_CONTAINER] {
        if let Some((code, message)) = terminated(&pod, container)
            && code != 0
        {
            return Err(RecoverError::Container {
                container: container.into(),
                code,
                message: message.trim().to_owned(),
            });
        }
    }
    let Some((_, message)) = terminated(&pod, REPLAY_CONTAINER) else {
        let why = pod
            .status
            .as_ref()
            .and_then(|s| s.message.clone().or(s.reason.clone()))
            .unwrap_or_else(|| format!("phase {}", phase(&pod).unwrap_or("unknown")));
        return Err(watch(format!("ended before the replay ran: {why}")));
    };
    done.result = Some(ReplayResult::read(&message)?);
    done.steps.push("replayed".into());
    Ok(())
}

/// Waits for mysqld to stop (the replay shut it down), then cuts the volume.
#[allow(clippy::too_many_arguments)]
async fn cut_volume(
    kube: &kube::Client,
    pods: &Api<Pod>,
    namespace: &str,
    name: &str,
    snapshot: &Value,
    limit: Duration,
    started: Instant,
    done: &mut Done,
) -> Result<(), RecoverError> {
    let watch = |object: &str, detail: String| RecoverError::Watch {
        object: format!("{object} {name}"),
        detail,
    };
    let left = limit.saturating_sub(started.elapsed());
    let stopped =
        |p: Option<&Pod>| p.is_none_or(|p| matches!(phase(p), Some("Failed" | "Succeeded")));
    match wait_until(pods, name, left, stopped).await {
        Waited::Met(Some(p)) if phase(&p) == Some("Succeeded") => {}
        Waited::Met(Some(p)) => {
            return Err(watch(
                "Pod",
                format!(
                    "mysqld did not stop cleanly (phase {})",
                    phase(&p).unwrap_or("unknown")
                ),
            ));
        }
        Waited::Met(None) => return Err(watch("Pod", "deleted before mysqld stopped".into())),
        Waited::TimedOut { .. } => return Err(watch("Pod", "mysqld did not stop in time".into())),
        Waited::Refused(r) => return Err(watch("Pod", r.to_string())),
    }
    done.steps.push("mysqld-stopped".into());
    let api = vtsnap_core::reconcile::apis::volume_snapshots(kube, namespace);
    let object: DynamicObject =
        serde_json::from_value(snapshot.clone()).map_err(|e| RecoverError::Build {
            object: "the recovered VolumeSnapshot".into(),
            detail: e.to_string(),
        })?;
    api.create(&PostParams::default(), &object)
        .await
        .map_err(|source| RecoverError::Create {
            object: format!("VolumeSnapshot {name}"),
            source,
        })?;
    done.steps.push("snapshot-created".into());
    let ready = |o: Option<&DynamicObject>| {
        o.is_some_and(|o| o.data.pointer("/status/readyToUse") == Some(&Value::Bool(true)))
    };
    let left = limit.saturating_sub(started.elapsed());
    match wait_until(&api, name, left, ready).await {
        Waited::Met(_) => {}
        Waited::TimedOut { .. } => {
            return Err(watch("VolumeSnapshot", "not ready in time".into()));
        }
        Waited::Refused(r) => return Err(watch("VolumeSnapshot", r.to_string())),
    }
    done.steps.push("snapshot-ready".into());
    done.cut = Some(name.to_owned());
    done.cut_ms = Some(ms(started.elapsed()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_is_read_only_whole_bounded_and_naming_a_mysql_set() {
        let ok = r#"{"bytes":10,"lastTransaction":1700000000,"gtidExecuted":"3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"}"#;
        let r = ReplayResult::read(ok).unwrap();
        assert_eq!((r.bytes, r.last_transaction), (10, Some(1_700_000_000)));
        let null = r#"{"bytes":0,"lastTransaction":null,"gtidExecuted":""}"#;
        assert_eq!(ReplayResult::read(null).unwrap().last_transaction, None);
        for bad in [
            "",
            "vtsnap-pitr: the replay stopped short of the target",
            r#"{"bytes":-1,"lastTransaction":null,"gtidExecuted":""}"#,
            r#"{"bytes":1,"lastTransaction":null,"gtidExecuted":"not a set"}"#,
            r#"{"bytes":1,"lastTransaction":null,"gtidExecuted":"","extra":1}"#,
        ] {
            assert!(ReplayResult::read(bad).is_err(), "{bad}");
        }
        let long = format!(
            r#"{{"bytes":1,"lastTransaction":null,"gtidExecuted":"{}"}}"#,
            "a".repeat(5000)
        );
        let e = ReplayResult::read(&long).unwrap_err().to_string();
        assert!(e.contains("more than a termination message holds"), "{e}");
    }

    #[test]
    fn the_terminated_state_is_found_among_init_and_regular_containers() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "status": {
                "phase": "Running",
                "initContainerStatuses": [{"name": "fetch", "image": "i", "imageID": "", "ready": false,
                    "restartCount": 0, "state": {"terminated": {"exitCode": 0, "message": "m"}}}],
                "containerStatuses": [{"name": "replay", "image": "i", "imageID": "", "ready": false,
                    "restartCount": 0, "state": {"terminated": {"exitCode": 3, "message": "short"}}},
                    {"name": "mysqld", "image": "i", "imageID": "", "ready": true,
                    "restartCount": 0, "state": {"running": {}}}]
            }
        }))
        .unwrap();
        assert_eq!(terminated(&pod, "fetch"), Some((0, "m".into())));
        assert_eq!(terminated(&pod, "replay"), Some((3, "short".into())));
        assert_eq!(terminated(&pod, "mysqld"), None);
        assert_eq!(terminated(&pod, "other"), None);
    }
}
