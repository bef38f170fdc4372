//! What `kubectl vtsnap doctor`'s checks read ([`World`], typed by `observe`) and what each
//! gives ([`Check`]): the types every check file shares, so that none of them imports
//! another.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use vtsnap_core::config::Config;
use vtsnap_core::shard::ShardRef;

pub use super::objects::{
    JobRun, NotRead, PodOnNode, Read, SnapshotClass, SnapshotCron, SnapshotHandling, TabletPvc,
};

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Level {
    Fail,
    Warn,
    Pass,
}

/// One line of the doctor's report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub check: &'static str,
    pub level: Level,
    pub message: String,
    /// What to do about it, in one line (none for a pass).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    pub(super) fn pass(check: &'static str, message: impl Into<String>) -> Self {
        Self {
            check,
            level: Level::Pass,
            message: message.into(),
            fix: None,
        }
    }

    pub(super) fn warn(
        check: &'static str,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Self {
            check,
            level: Level::Warn,
            message: message.into(),
            fix: Some(fix.into()),
        }
    }

    pub(super) fn fail(
        check: &'static str,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Self {
            check,
            level: Level::Fail,
            message: message.into(),
            fix: Some(fix.into()),
        }
    }
}

/// Where the chart is installed: the namespace of its ConfigMap and the release's full
/// name (the ConfigMap is `<fullname>-config`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Install {
    pub namespace: String,
    pub fullname: String,
}

/// One SubjectAccessReview: may `program`'s ServiceAccount do `verb` on the resource
/// (in `namespace`, or cluster-wide when `None`)?
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Access {
    pub program: String,
    pub namespace: Option<String>,
    pub group: String,
    pub resource: String,
    pub verb: String,
    /// The authorizer's answer, or why it could not be asked.
    pub allowed: Result<bool, String>,
}

/// The admission webhook as found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebhookSeen {
    /// No MutatingWebhookConfiguration of the install.
    NotInstalled,
    Installed {
        name: String,
        failure_policy: String,
        /// `namespace/name` of the Service it calls.
        service: String,
        /// Ready endpoints of that Service (EndpointSlices), or why they were not read.
        ready_endpoints: Result<usize, String>,
        /// The serving certificate's `notAfter`, or why it was not read.
        cert_not_after: Result<Timestamp, String>,
    },
}

/// What one shard's MySQL says, through vtctld (`ExecuteFetchAsDBA`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardMysql {
    pub shard: ShardRef,
    pub max_snapshot_age: Duration,
    /// Whether the shard's policy is `mode: online`.
    pub online: bool,
    /// The primary's binlog expiry (zero: binlogs do not expire by time; `None`: the
    /// server did not say).
    pub expiry: Result<Option<Duration>, String>,
    /// Online shards: each tablet's crash-safety variables that do not hold, as the
    /// snapshot job's own probe reads them (`sync_binlog=0 (needs 1)`).
    pub crash_safety: Result<Vec<(String, Vec<String>)>, String>,
}

/// Everything the checks look at. A list one of whose objects did not read is not read
/// ([`NotRead::Object`]): no check passes on a part of it.
#[derive(Debug, Clone)]
pub struct World {
    pub now: Timestamp,
    pub install: Option<Install>,
    /// The install's config, parsed and validated, or why it is not valid.
    pub config: Result<Config, String>,
    /// Names of the CustomResourceDefinitions present.
    pub crds: Read<BTreeSet<String>>,
    pub snapshot_classes: Read<Vec<SnapshotClass>>,
    pub storage_classes: Read<Vec<StorageClass>>,
    /// Tablet PVCs of the configured namespaces.
    pub tablet_pvcs: Read<Vec<TabletPvc>>,
    /// The PersistentVolumes bound to those PVCs.
    pub tablet_volumes: Read<Vec<PersistentVolume>>,
    /// Tablet Pods of the configured namespaces.
    pub tablet_pods: Read<Vec<PodOnNode>>,
    /// The node helper's Pods.
    pub node_helpers: Read<Vec<PodOnNode>>,
    /// vtsnap's VolumeSnapshots of the configured namespaces.
    pub snapshots: Read<Vec<SnapshotHandling>>,
    /// Labels of the install's namespace.
    pub namespace_labels: Read<BTreeMap<String, String>>,
    pub access: Vec<Access>,
    pub webhook: Read<WebhookSeen>,
    /// Per shard with tablets (read through vtctld).
    pub mysql: Vec<ShardMysql>,
    /// The shards of the configured clusters' VitessCluster specs.
    pub spec_shards: Read<Vec<ShardRef>>,
    /// The install's snapshot CronJobs (`app.kubernetes.io/component=snapshot`).
    pub snapshot_cronjobs: Read<Vec<SnapshotCron>>,
    /// The schedule reconciler's Jobs.
    pub reconciler_jobs: Read<Vec<JobRun>>,
}
