//! The job side of the fence: acquire, renew, request, await, delete — every write a
//! compare-and-swap on the lease's resourceVersion.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};

use super::*;
use crate::fence::put_back::{TabletChanges, describe, put_tablet_back_at};
use crate::reconcile::{Change, Outcome, ReplaceError, Wake, replace_with_retry};

/// What the job asks for in a new fence.
#[derive(Debug, Clone)]
pub struct FenceSpec {
    pub namespace: String,
    pub name: String,
    /// The job's identity (its pod name).
    pub holder: String,
    /// The node of the target tablet (`vtsnap.io/node`).
    pub node: String,
    pub lease_duration: Duration,
    pub target_pod: String,
    pub target_pod_uid: String,
    pub tablet_alias: TabletAlias,
    pub original_type: TabletType,
    pub vtctld: String,
    pub mode: String,
    pub max_hold: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum FenceClientError {
    /// Another run holds a live fence on this shard.
    #[error("shard is fenced by {holder:?} (lease {lease}) until {until}")]
    Held {
        lease: String,
        holder: String,
        until: String,
    },
    /// A fence whose holder stopped renewing: recover it (docs/design.md §5.4) before taking it.
    #[error("fence lease {lease} expired (holder {holder:?}); it must be recovered first")]
    Expired { lease: String, holder: String },
    /// Someone else wrote the lease since we read it.
    #[error("fence lease {lease} changed under us (resourceVersion conflict)")]
    Conflict { lease: String },
    #[error("fence lease {lease}: {source}")]
    Kube { lease: String, source: kube::Error },
    #[error(transparent)]
    Parse(#[from] FenceError),
    #[error(
        "fence lease {lease}: the node did not reach {want} within {after:?} (last state {last:?}, error {error:?})"
    )]
    NodeTimeout {
        lease: String,
        want: &'static str,
        after: Duration,
        last: Option<String>,
        error: Option<String>,
    },
    #[error("fence lease {lease}: the node answered {state}: {error}")]
    NodeRefused {
        lease: String,
        state: &'static str,
        error: String,
    },
    /// The lease is held by someone else now: this holder lost it (it expired and was
    /// recovered or re-taken).
    #[error("fence lease {lease} is now held by {holder:?}; this run lost its fence")]
    Lost { lease: String, holder: String },
    #[error("fence lease {lease}: cannot restore the tablet through vtctld: {error}")]
    Restore { lease: String, error: String },
}

fn now_micro() -> MicroTime {
    MicroTime(Timestamp::now())
}

fn kube_err(lease: &str, e: kube::Error) -> FenceClientError {
    match e {
        kube::Error::Api(s) if s.code == 409 => FenceClientError::Conflict {
            lease: lease.to_owned(),
        },
        source => FenceClientError::Kube {
            lease: lease.to_owned(),
            source,
        },
    }
}

/// The Lease object for a new fence, asking for `request`.
pub fn lease_for(spec: &FenceSpec, request: Request) -> Lease {
    let ann: BTreeMap<String, String> = [
        (ANN_TARGET_POD, spec.target_pod.clone()),
        (ANN_TARGET_POD_UID, spec.target_pod_uid.clone()),
        (ANN_TABLET_ALIAS, spec.tablet_alias.to_string()),
        (ANN_ORIGINAL_TYPE, spec.original_type.name().to_owned()),
        (ANN_VTCTLD, spec.vtctld.clone()),
        (ANN_MODE, spec.mode.clone()),
        (ANN_REQUEST, request.to_string()),
        (ANN_MAX_HOLD, spec.max_hold.as_secs().to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    Lease {
        metadata: ObjectMeta {
            name: Some(spec.name.clone()),
            namespace: Some(spec.namespace.clone()),
            labels: Some(BTreeMap::from([
                (LABEL_NODE.to_owned(), spec.node.clone()),
                (
                    crate::labels::MANAGED_BY.to_owned(),
                    crate::labels::MANAGED_BY_VTSNAP.to_owned(),
                ),
            ])),
            annotations: Some(ann),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(spec.holder.clone()),
            lease_duration_seconds: Some(
                i32::try_from(spec.lease_duration.as_secs()).unwrap_or(i32::MAX),
            ),
            acquire_time: Some(now_micro()),
            renew_time: Some(now_micro()),
            ..LeaseSpec::default()
        }),
    }
}

/// Takes the fence by creating the lease. A live lease refuses; an expired one must be
/// recovered by the caller first. Exactly one of two racing callers can win.
pub async fn acquire(
    api: &Api<Lease>,
    spec: &FenceSpec,
    request: Request,
) -> Result<Lease, FenceClientError> {
    match api
        .create(&PostParams::default(), &lease_for(spec, request))
        .await
    {
        Ok(l) => Ok(l),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let existing = api
                .get(&spec.name)
                .await
                .map_err(|e| kube_err(&spec.name, e))?;
            let f = Fence::from_lease(&existing);
            let holder = existing
                .spec
                .as_ref()
                .and_then(|s| s.holder_identity.clone())
                .unwrap_or_default();
            match f {
                Ok(f) if f.expired(Timestamp::now()) => Err(FenceClientError::Expired {
                    lease: spec.name.clone(),
                    holder,
                }),
                Ok(f) => Err(FenceClientError::Held {
                    lease: spec.name.clone(),
                    holder,
                    until: f
                        .renew_time
                        .map(|t| (t + f.lease_duration).to_string())
                        .unwrap_or_default(),
                }),
                // Unreadable but present: treat as held, never as free.
                Err(_) => Err(FenceClientError::Held {
                    lease: spec.name.clone(),
                    holder,
                    until: "unknown".into(),
                }),
            }
        }
        Err(e) => Err(kube_err(&spec.name, e)),
    }
}

/// Renews the fence `name` that `holder` holds, and changes its request if one is given:
/// read, modify, compare-and-swap on resourceVersion, retried on conflicts (the node helper
/// writes the same lease). A new request voids the node's answer to the previous one, so a
/// stale `failed` is never read as the answer to this one. A lease that someone else now
/// holds is never renewed. The one renew every caller uses.
pub async fn renew(
    api: &Api<Lease>,
    name: &str,
    holder: &str,
    request: Option<Request>,
) -> Result<Lease, FenceClientError> {
    const ATTEMPTS: usize = 10;
    let renewed = replace_with_retry(api, name, ATTEMPTS, |l: &mut Lease| {
        let current = l
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.clone())
            .unwrap_or_default();
        if current != holder {
            return Change::GiveUp(FenceClientError::Lost {
                lease: name.to_owned(),
                holder: current,
            });
        }
        if let Some(s) = l.spec.as_mut() {
            s.renew_time = Some(now_micro());
        }
        if let Some(r) = request {
            let a = l.metadata.annotations.get_or_insert_with(BTreeMap::new);
            if a.get(ANN_REQUEST).map(String::as_str) != Some(r.to_string().as_str()) {
                a.remove(ANN_NODE_STATE);
                a.remove(ANN_NODE_ERROR);
            }
            a.insert(ANN_REQUEST.to_owned(), r.to_string());
        }
        Change::Replace
    })
    .await;
    match renewed {
        Ok(Outcome::Replaced(l) | Outcome::Left(l)) => Ok(l),
        Err(ReplaceError::GaveUp { reason, .. }) => Err(reason),
        Err(ReplaceError::Conflicts { .. }) => Err(FenceClientError::Conflict {
            lease: name.to_owned(),
        }),
        // A lease that is gone is an API error here, as every other failed read or write.
        Err(
            ReplaceError::Gone { source, .. }
            | ReplaceError::Read { source, .. }
            | ReplaceError::Write { source, .. },
        ) => Err(kube_err(name, source)),
    }
}

/// How often the wait for the node re-reads the lease (and renews it) when no watch event
/// came: the watch is the fast path, this the safety net for a watch that went quiet.
const NODE_POLL: Duration = Duration::from_millis(200);

/// Waits until the node reports `want` on the fence `name` (renewing it meanwhile as
/// `holder`); a `refused` or `failed` answer ends the wait with the node's error.
///
/// Each decision comes from a fresh GET. A watch on the lease, opened at that GET's
/// resourceVersion, only wakes the wait as soon as the node writes its answer, so a
/// hand-off costs a watch event rather than a poll interval; a watch that cannot be opened
/// or ends falls back to reading every [`NODE_POLL`].
pub async fn await_node(
    api: &Api<Lease>,
    name: &str,
    holder: &str,
    want: NodeState,
    timeout: Duration,
) -> Result<Lease, FenceClientError> {
    let start = tokio::time::Instant::now();
    let mut wake: Option<Wake<Lease>> = None;
    let mut last_renew = start;
    loop {
        let l = api.get(name).await.map_err(|e| kube_err(name, e))?;
        let f = Fence::from_lease(&l)?;
        let error = l
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANN_NODE_ERROR))
            .cloned()
            .filter(|e| !e.is_empty());
        match f.node_state {
            Some(s) if s == want => return Ok(l),
            Some(s @ (NodeState::Refused | NodeState::Failed)) => {
                return Err(FenceClientError::NodeRefused {
                    lease: name.to_owned(),
                    state: s.as_str(),
                    error: error.unwrap_or_default(),
                });
            }
            _ => {}
        }
        if start.elapsed() > timeout {
            return Err(FenceClientError::NodeTimeout {
                lease: name.to_owned(),
                want: want.as_str(),
                after: timeout,
                last: f.node_state.map(|s| s.as_str().to_owned()),
                error,
            });
        }
        if wake.is_none() {
            wake = Some(Wake::watch(api, name, l.metadata.resource_version.as_deref()).await);
        }
        // Renewed on the poll's beat, not on every event: our own renewal is an event too.
        if last_renew.elapsed() >= NODE_POLL {
            renew(api, name, holder, None).await?;
            last_renew = tokio::time::Instant::now();
        }
        let left = timeout.saturating_sub(start.elapsed());
        if let Some(w) = wake.as_mut() {
            w.nap(NODE_POLL.min(left + Duration::from_millis(1))).await;
        }
    }
}

/// What a recovery did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Recovered {
    pub lease: String,
    /// The node helper confirmed the node-local release (or recovered the lease itself).
    pub node_released: bool,
    /// StartReplication and ChangeTabletType back to the original type succeeded.
    pub tablet_restored: bool,
}

/// Recovers an expired fence (docs/design.md §5.4): ask the node to release, wait for it (the
/// node helper also does this on its own when the lease expires), put the tablet back
/// through vtctld, then delete the lease. Idempotent. The lease is deleted only once the
/// tablet is restored, so a failed recovery leaves it for the next try; a node helper that
/// never answers does not block the vtctld part (it releases its holds from its own
/// record once the lease is gone).
pub async fn recover(
    api: &Api<Lease>,
    lease: &Lease,
    node_timeout: Duration,
) -> Result<Recovered, FenceClientError> {
    let f = Fence::from_lease(lease)?;
    let name = f.name.clone();
    // Ask for the release without renewing: the lease stays expired.
    let mut asked = lease.clone();
    asked
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(ANN_REQUEST.to_owned(), Request::Release.to_string());
    match api.replace(&name, &PostParams::default(), &asked).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {}
        Err(e) => return Err(kube_err(&name, e)),
    }
    let start = tokio::time::Instant::now();
    let mut node_released = false;
    while start.elapsed() < node_timeout {
        match api.get_opt(&name).await.map_err(|e| kube_err(&name, e))? {
            None => {
                // The node helper recovered it (and restored the tablet) itself.
                return Ok(Recovered {
                    lease: name,
                    node_released: true,
                    tablet_restored: true,
                });
            }
            Some(l) => {
                if Fence::from_lease(&l).ok().and_then(|x| x.node_state)
                    == Some(NodeState::Released)
                {
                    node_released = true;
                    break;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let problems = put_tablet_back_at(
        &f.vtctld,
        &f.tablet_alias,
        f.original_type,
        TabletChanges::ALL,
    )
    .await;
    if !problems.is_empty() {
        return Err(FenceClientError::Restore {
            lease: name,
            error: describe(&problems),
        });
    }
    if let Some(l) = api.get_opt(&name).await.map_err(|e| kube_err(&name, e))? {
        delete_if_unchanged(api, &name, l.metadata.resource_version.as_deref()).await?;
    }
    Ok(Recovered {
        lease: name,
        node_released,
        tablet_restored: true,
    })
}

/// Deletes the fence `name` only if nobody changed it since `resource_version` was read
/// (a precondition, so a lease re-taken meanwhile is never deleted). Already gone is done.
pub async fn delete_if_unchanged(
    api: &Api<Lease>,
    name: &str,
    resource_version: Option<&str>,
) -> Result<(), FenceClientError> {
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            resource_version: resource_version.map(str::to_owned),
            uid: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &dp).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(kube_err(name, e)),
    }
}
