//! The fence lease (docs/design.md §4.4): one `coordination.k8s.io/v1` Lease per shard that is the
//! fence, the job → node request channel and the dead-man's switch at once.
//!
//! The job writes the request annotations and renews the lease; the node helper on the
//! labelled node reads them and writes its answer (`node-state`, `node-error`). A lease that
//! stopped being renewed (expired), is deleted, or asks `release` means: release everything.

pub mod client;
pub mod put_back;

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

/// A request annotation that names no request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown request {0:?}")]
pub struct UnknownRequest(pub String);

impl FromStr for Request {
    type Err = UnknownRequest;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "probe" => Self::Probe,
            "stop" => Self::Stop,
            "hold" => Self::Hold,
            "fsfreeze" => Self::Fsfreeze,
            "release" => Self::Release,
            other => return Err(UnknownRequest(other.to_owned())),
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "lowercase")]
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
        self.into()
    }

    pub fn parse(s: &str) -> Option<Self> {
        s.parse().ok()
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

    /// The last millisecond (since the epoch) at which the fence is still live:
    /// `renewTime + leaseDurationSeconds`; None if it was never renewed.
    pub fn live_until_ms(&self) -> Option<i64> {
        let t = self.renew_time?;
        Some(
            t.as_millisecond()
                .saturating_add(i64::try_from(self.lease_duration.as_millis()).unwrap_or(i64::MAX)),
        )
    }

    /// The holder stopped renewing: `renewTime + leaseDurationSeconds` is past.
    pub fn expired(&self, now: Timestamp) -> bool {
        self.live_until_ms()
            .is_none_or(|until| now.as_millisecond() > until)
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
