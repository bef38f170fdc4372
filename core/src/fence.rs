//! The fence lease (DESIGN §4.4): one `coordination.k8s.io/v1` Lease per shard that is the
//! fence, the job → node request channel and the dead-man's switch at once.
//!
//! The job writes the request annotations and renews the lease; the node helper on the
//! labelled node reads them and writes its answer (`node-state`, `node-error`). A lease that
//! stopped being renewed (expired), is deleted, or asks `release` means: release everything.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use crate::naming::{TabletAlias, join_with_limit};
use crate::vtctld::TabletType;

/// Selects the leases a node helper serves: `vtsnap.io/node=<node name>`.
pub const LABEL_NODE: &str = "vtsnap.io/node";
pub const ANN_TARGET_POD: &str = "vtsnap.io/target-pod";
pub const ANN_TARGET_POD_UID: &str = "vtsnap.io/target-pod-uid";
pub const ANN_TABLET_ALIAS: &str = "vtsnap.io/tablet-alias";
pub const ANN_ORIGINAL_TYPE: &str = "vtsnap.io/original-type";
pub const ANN_VTCTLD: &str = "vtsnap.io/vtctld";
pub const ANN_MODE: &str = "vtsnap.io/mode";
pub const ANN_REQUEST: &str = "vtsnap.io/request";
/// Longest hold in seconds; the node's own watchdog enforces it.
pub const ANN_MAX_HOLD: &str = "vtsnap.io/max-hold-seconds";
pub const ANN_NODE_STATE: &str = "vtsnap.io/node-state";
pub const ANN_NODE_ERROR: &str = "vtsnap.io/node-error";

/// The lease name of a shard's fence, shortened with a hash when too long.
pub fn lease_name(cluster: &str, keyspace: &str, shard_safe: &str) -> String {
    join_with_limit(&["vtsnap", cluster, keyspace, shard_safe], 253)
}

/// What the job asks the node helper to bring about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Request {
    /// Check the layout; change nothing.
    Probe,
    /// mysqld cleanly stopped.
    Stop,
    /// mysqld stopped and its container frozen.
    Hold,
    /// The volume's file system frozen (online mode).
    Fsfreeze,
    /// Everything released.
    Release,
}

impl FromStr for Request {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "probe" => Self::Probe,
            "stop" => Self::Stop,
            "hold" => Self::Hold,
            "fsfreeze" => Self::Fsfreeze,
            "release" => Self::Release,
            other => return Err(format!("unknown request {other:?}")),
        })
    }
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Probe => "probe",
            Self::Stop => "stop",
            Self::Hold => "hold",
            Self::Fsfreeze => "fsfreeze",
            Self::Release => "release",
        })
    }
}

/// The node helper's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeState {
    Probed,
    Stopped,
    Held,
    Fsfrozen,
    Released,
    /// A safety rule said no (the primary, the wrong pod, a multi-volume layout…).
    Refused,
    /// An action failed; `node-error` says which.
    Failed,
}

impl NodeState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Probed => "probed",
            Self::Stopped => "stopped",
            Self::Held => "held",
            Self::Fsfrozen => "fsfrozen",
            Self::Released => "released",
            Self::Refused => "refused",
            Self::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "probed" => Self::Probed,
            "stopped" => Self::Stopped,
            "held" => Self::Held,
            "fsfrozen" => Self::Fsfrozen,
            "released" => Self::Released,
            "refused" => Self::Refused,
            "failed" => Self::Failed,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("fence lease {lease}: {reason}")]
pub struct FenceError {
    pub lease: String,
    pub reason: String,
}

/// A fence lease, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    pub namespace: String,
    pub name: String,
    pub resource_version: Option<String>,
    pub target_pod: String,
    pub target_pod_uid: String,
    pub tablet_alias: TabletAlias,
    pub original_type: TabletType,
    pub vtctld: String,
    pub request: Request,
    pub max_hold: Duration,
    pub renew_time: Option<Timestamp>,
    pub lease_duration: Duration,
    pub node_state: Option<NodeState>,
}

fn tablet_type(s: &str) -> Option<TabletType> {
    TabletType::parse(s)
}

impl Fence {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Parses a lease; every missing or bad annotation is an error naming it.
    pub fn from_lease(l: &Lease) -> Result<Self, FenceError> {
        let name = l.metadata.name.clone().unwrap_or_default();
        let namespace = l.metadata.namespace.clone().unwrap_or_default();
        let err = |reason: String| FenceError {
            lease: format!("{namespace}/{name}"),
            reason,
        };
        let empty = BTreeMap::new();
        let a = l.metadata.annotations.as_ref().unwrap_or(&empty);
        let get = |k: &str| {
            a.get(k)
                .cloned()
                .ok_or_else(|| err(format!("annotation {k} is missing")))
        };
        let spec = l.spec.clone().unwrap_or_default();
        Ok(Self {
            target_pod: get(ANN_TARGET_POD)?,
            target_pod_uid: get(ANN_TARGET_POD_UID)?,
            tablet_alias: get(ANN_TABLET_ALIAS)?
                .parse()
                .map_err(|e| err(format!("{ANN_TABLET_ALIAS}: {e}")))?,
            original_type: tablet_type(&get(ANN_ORIGINAL_TYPE)?)
                .ok_or_else(|| err(format!("{ANN_ORIGINAL_TYPE} is not a tablet type")))?,
            vtctld: get(ANN_VTCTLD)?,
            request: get(ANN_REQUEST)?
                .parse()
                .map_err(|e| err(format!("{ANN_REQUEST}: {e}")))?,
            max_hold: Duration::from_secs(
                get(ANN_MAX_HOLD)?
                    .parse()
                    .map_err(|e| err(format!("{ANN_MAX_HOLD}: {e}")))?,
            ),
            renew_time: spec.renew_time.map(|t| t.0),
            lease_duration: Duration::from_secs(
                u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0),
            ),
            node_state: a.get(ANN_NODE_STATE).and_then(|s| NodeState::parse(s)),
            resource_version: l.metadata.resource_version.clone(),
            namespace,
            name,
        })
    }

    /// The holder stopped renewing: `renewTime + leaseDurationSeconds` is past.
    pub fn expired(&self, now: Timestamp) -> bool {
        match self.renew_time {
            None => true,
            Some(t) => {
                let until = t.as_millisecond().saturating_add(
                    i64::try_from(self.lease_duration.as_millis()).unwrap_or(i64::MAX),
                );
                now.as_millisecond() > until
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(renew: &str, secs: i32, extra: &[(&str, &str)]) -> Lease {
        let mut ann: BTreeMap<String, String> = [
            (ANN_TARGET_POD, "pod-a"),
            (ANN_TARGET_POD_UID, "uid-a"),
            (ANN_TABLET_ALIAS, "zone1-0000000101"),
            (ANN_ORIGINAL_TYPE, "replica"),
            (ANN_VTCTLD, "127.0.0.1:15999"),
            (ANN_REQUEST, "hold"),
            (ANN_MAX_HOLD, "600"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        for (k, v) in extra {
            ann.insert((*k).to_owned(), (*v).to_owned());
        }
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "f", "namespace": "ns", "annotations": ann},
            "spec": {"renewTime": renew, "leaseDurationSeconds": secs}
        }))
        .unwrap()
    }

    #[test]
    fn parses_the_request_and_expiry() {
        let f = Fence::from_lease(&lease("2026-01-01T00:00:00.000000Z", 10, &[])).unwrap();
        assert_eq!(f.request, Request::Hold);
        assert_eq!(f.original_type, TabletType::Replica);
        assert_eq!(f.tablet_alias.to_string(), "zone1-0000000101");
        assert_eq!(f.max_hold, Duration::from_secs(600));
        let t = |s: &str| s.parse::<Timestamp>().unwrap();
        assert!(!f.expired(t("2026-01-01T00:00:09Z")));
        assert!(f.expired(t("2026-01-01T00:00:11Z")));
    }

    #[test]
    fn bad_annotations_are_named() {
        let e = Fence::from_lease(&lease(
            "2026-01-01T00:00:00Z",
            10,
            &[(ANN_REQUEST, "freeze-everything")],
        ))
        .unwrap_err();
        assert!(e.to_string().contains(ANN_REQUEST), "{e}");
        let e = Fence::from_lease(&lease(
            "2026-01-01T00:00:00Z",
            10,
            &[(ANN_ORIGINAL_TYPE, "boss")],
        ))
        .unwrap_err();
        assert!(e.to_string().contains(ANN_ORIGINAL_TYPE), "{e}");
    }

    #[test]
    fn lease_names_stay_valid() {
        assert!(
            lease_name("example", "commerce", "x-80").starts_with("vtsnap-example-commerce-x-80-")
        );
        assert!(lease_name(&"c".repeat(300), "k", "x-x").len() <= 253);
    }
}

/// The job side of the fence: acquire, renew, request, await, delete — every write a
/// compare-and-swap on the lease's resourceVersion.
pub mod client {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
    use k8s_openapi::jiff::Timestamp;
    use kube::api::{Api, DeleteParams, PostParams, Preconditions};

    use super::*;

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
        /// A fence whose holder stopped renewing: recover it (DESIGN §5.4) before taking it.
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

    /// Renews (and optionally changes the request), compare-and-swap on resourceVersion.
    pub async fn renew(
        api: &Api<Lease>,
        lease: &Lease,
        request: Option<Request>,
    ) -> Result<Lease, FenceClientError> {
        let name = lease.metadata.name.clone().unwrap_or_default();
        let mut next = lease.clone();
        if let Some(s) = next.spec.as_mut() {
            s.renew_time = Some(now_micro());
        }
        if let Some(r) = request {
            next.metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(ANN_REQUEST.to_owned(), r.to_string());
        }
        api.replace(&name, &PostParams::default(), &next)
            .await
            .map_err(|e| kube_err(&name, e))
    }

    /// Waits until the node reports `want` (renewing meanwhile); a `refused` or `failed`
    /// answer ends the wait with the node's error.
    pub async fn await_node(
        api: &Api<Lease>,
        lease: Lease,
        want: NodeState,
        timeout: Duration,
    ) -> Result<Lease, FenceClientError> {
        let name = lease.metadata.name.clone().unwrap_or_default();
        let start = tokio::time::Instant::now();
        drop(lease);
        loop {
            let l = api.get(&name).await.map_err(|e| kube_err(&name, e))?;
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
                        lease: name,
                        state: s.as_str(),
                        error: error.unwrap_or_default(),
                    });
                }
                _ => {}
            }
            if start.elapsed() > timeout {
                return Err(FenceClientError::NodeTimeout {
                    lease: name,
                    want: want.as_str(),
                    after: timeout,
                    last: f.node_state.map(|s| s.as_str().to_owned()),
                    error,
                });
            }
            // Keep the fence alive while waiting; a node write in between is a conflict to
            // re-read, not an error.
            match renew(api, &l, None).await {
                Ok(_) | Err(FenceClientError::Conflict { .. }) => {}
                Err(e) => return Err(e),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
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

    /// Recovers an expired fence (DESIGN §5.4): ask the node to release, wait for it (the
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
        let vt = crate::vtctld::VtctldClient::new(
            &f.vtctld,
            crate::vtctld::client::CallLimits::default(),
        )
        .map_err(|e| FenceClientError::Restore {
            lease: name.clone(),
            error: e.to_string(),
        })?;
        let started = vt.start_replication(&f.tablet_alias).await;
        let typed = if f.original_type == TabletType::Primary {
            Ok(())
        } else {
            vt.change_tablet_type(&f.tablet_alias, f.original_type)
                .await
                .map(|_| ())
        };
        if let Err(e) = started.and(typed) {
            return Err(FenceClientError::Restore {
                lease: name,
                error: e.to_string(),
            });
        }
        let current = api.get_opt(&name).await.map_err(|e| kube_err(&name, e))?;
        if let Some(l) = current {
            delete(api, &l).await?;
        }
        Ok(Recovered {
            lease: name,
            node_released,
            tablet_restored: true,
        })
    }

    /// Deletes the fence, only if nobody changed it since `lease` was read.
    pub async fn delete(api: &Api<Lease>, lease: &Lease) -> Result<(), FenceClientError> {
        let name = lease.metadata.name.clone().unwrap_or_default();
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: lease.metadata.resource_version.clone(),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(&name, &dp).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(kube_err(&name, e)),
        }
    }
}
