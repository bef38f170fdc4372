//! The objects the deciders look at, as `observe` reads them: each with only what is
//! decided on, typed (a shard is a [`ShardRef`], a time a [`Timestamp`]), and why one
//! could not be read ([`Unreadable`]) or a list was not read ([`NotRead`]).

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use vtsnap_core::naming::{KeyRangeError, TabletUid};
use vtsnap_core::reconcile::ObjectKey;
use vtsnap_core::shard::{ShardLabelError, ShardPathError, ShardRef};
use vtsnap_core::vitesscluster::SpecError;

/// A tablet PVC: the shard its operator labels name, and what the status and the doctor
/// read of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TabletPvc {
    pub key: ObjectKey,
    /// `metadata.uid` (set by the API server; a dump may lack it).
    pub uid: Option<String>,
    pub shard: ShardRef,
    /// `planetscale.com/tablet-uid`; `None` when absent or not a UID (then no record of a
    /// tablet names it).
    pub tablet_uid: Option<TabletUid>,
    /// The snapshot the webhook restored it from (`vtsnap.io/restored-from`).
    pub restored_from: Option<String>,
    /// `status.phase` (`Pending`, `Bound`, …).
    pub phase: Option<String>,
    pub storage_class: Option<String>,
    /// The PersistentVolume it is bound to.
    pub volume: Option<String>,
}

/// A Pod (a tablet's, a node helper's): the node it runs on and whether it is Ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodOnNode {
    /// `spec.nodeName`; `None` until it is scheduled.
    pub node: Option<String>,
    /// Its `Ready` condition is `True`.
    pub ready: bool,
}

/// A snapshot CronJob of the install. Which shard it is for is the deciders' to say
/// (`schedules::cron_shard`): the chart's own carry only labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotCron {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// The schedule reconciler's record of the shard (`vtsnap.io/schedule-shard`).
    pub recorded: Option<ShardRef>,
    pub schedule: String,
    pub suspended: bool,
    /// `spec.timeZone`; `None`: the controller's (UTC for the chart's).
    pub time_zone: Option<String>,
}

/// How a Job ended, by its conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobResult {
    Succeeded,
    Failed,
    Running,
}

impl JobResult {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Running => "running",
        }
    }
}

/// A Job of the install (a snapshot run, a schedule reconciler run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRun {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub created: Option<Timestamp>,
    pub result: JobResult,
    /// `status.completionTime`.
    pub finished: Option<Timestamp>,
}

/// A fence Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FenceLease {
    pub key: ObjectKey,
    pub holder: Option<String>,
    pub acquired: Option<Timestamp>,
    pub renewed: Option<Timestamp>,
    /// `spec.leaseDurationSeconds` (0 when unset: expired once renewed).
    pub duration_seconds: i64,
}

/// One of vtsnap's VolumeSnapshots as the snapshot-controller check sees it: whether a
/// snapshot-controller has written its status yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotHandling {
    pub name: String,
    pub created: Option<Timestamp>,
    pub has_status: bool,
}

/// A VolumeSnapshotClass's `deletionPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
pub enum SnapshotDeletion {
    Delete,
    Retain,
}

/// A VolumeSnapshotClass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotClass {
    pub name: String,
    pub driver: String,
    pub deletion_policy: SnapshotDeletion,
    /// Annotated the default class of its driver.
    pub default: bool,
}

/// Why an object could not be read into the type its decider takes. Each names the
/// object; what it quotes from the object has its control characters escaped.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Unreadable {
    /// Not of its kind's schema (a field of the wrong type, a required one missing).
    #[error("{kind} {object}: {why}")]
    Schema {
        kind: &'static str,
        object: String,
        why: String,
    },
    /// No `metadata.namespace` or `metadata.name`: nothing can be matched to it.
    #[error("a {kind} without a namespace or a name")]
    Unnamed { kind: &'static str },
    /// A VolumeSnapshot vtsnap's reader refuses (no shard labels, a malformed annotation).
    #[error("{0}")]
    Snapshot(vtsnap_core::snapshot::ReadError),
    /// A tablet PVC whose operator labels name no shard.
    #[error("PersistentVolumeClaim {pvc}: {why}")]
    TabletShard {
        pvc: ObjectKey,
        why: Box<ShardLabelError>,
    },
    /// A snapshot CronJob whose shard record does not read.
    #[error("CronJob {cron}: {why}")]
    ShardRecord { cron: String, why: ShardPathError },
    /// A VitessCluster whose spec does not tell its shards.
    #[error("VitessCluster {cluster}: {why}")]
    Spec { cluster: ObjectKey, why: SpecError },
    /// A VitessCluster's spec names a shard that is not a key range.
    #[error("VitessCluster {cluster}: keyspace {keyspace}: {why}")]
    SpecShard {
        cluster: ObjectKey,
        keyspace: String,
        why: KeyRangeError,
    },
}

/// Why a list (or one answer) a check needs was not read.
#[derive(Debug, Clone, thiserror::Error)]
pub enum NotRead {
    /// What the API (or vtctld) answered, or what was missing to ask it (no install).
    #[error("{0}")]
    Answer(String),
    /// An object of the list could not be read: nothing is decided on the rest alone.
    #[error("{0}")]
    Object(Box<Unreadable>),
}

impl From<String> for NotRead {
    fn from(message: String) -> Self {
        Self::Answer(message)
    }
}

impl From<&str> for NotRead {
    fn from(message: &str) -> Self {
        Self::Answer(message.to_owned())
    }
}

impl From<Unreadable> for NotRead {
    fn from(u: Unreadable) -> Self {
        Self::Object(Box::new(u))
    }
}

/// A list (or an answer) read, or why not.
pub type Read<T> = Result<T, NotRead>;
