//! Why a run stopped: one typed error per cause, each naming the object, with the stable
//! `code` of the JSON line and the exit code (docs/design.md §5.1) decided in one place.

use std::time::Duration;

use vtsnap_core::config::LookupError;
use vtsnap_core::discover::DiscoverError;
use vtsnap_core::exit::Exit;
use vtsnap_core::fence::FenceError;
use vtsnap_core::fence::client::FenceClientError;
use vtsnap_core::fence::put_back::PutBackError;
use vtsnap_core::vtctld::VtctldError;

use super::decide::{NoPlan, Violation};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    UnknownCluster(#[from] LookupError),
    #[error("--shard {shard:?}: {reason}")]
    BadShard { shard: String, reason: String },
    #[error(transparent)]
    BadVtctld(VtctldError),
    #[error(transparent)]
    VtctldUnavailable(VtctldError),
    #[error("finding vtctld: {0}")]
    NoVtctld(DiscoverError),
    #[error("reading fence lease {lease}: {source}")]
    KubernetesUnavailable { lease: String, source: kube::Error },
    #[error("shard is fenced by {holder:?} (lease {lease})")]
    Fenced { lease: String, holder: String },
    #[error("an unreadable fence exists: {0}")]
    UnreadableFence(FenceError),
    #[error("recovering the expired fence: {0}")]
    FenceRecovery(FenceClientError),
    #[error(transparent)]
    Discovery(DiscoverError),
    #[error(transparent)]
    NoPlan(#[from] NoPlan),
    #[error(
        "cannot tell whether the primary {primary} waits for semi-sync acknowledgements \
         (a cut could block its writes): {reason}"
    )]
    SemiSyncUnknown { primary: String, reason: String },
    #[error(
        "{alias} is not crash-safe for an online snapshot: {}",
        list(violations)
    )]
    OnlinePrecondition {
        alias: String,
        violations: Vec<Violation>,
    },
    #[error(transparent)]
    FenceTaken(FenceClientError),
    #[error("taking the fence: {0}")]
    Fence(FenceClientError),
    #[error("layout probe: {0}")]
    LayoutRefused(FenceClientError),
    #[error("layout probe: {0}")]
    Probe(FenceClientError),
    #[error("draining {alias}: {source}")]
    Drain { alias: String, source: VtctldError },
    #[error("stopping replication on {alias}: {source}")]
    StopReplication { alias: String, source: VtctldError },
    #[error("reading the position of {alias}: {source}")]
    Status { alias: String, source: VtctldError },
    #[error("{alias} reported no replication position")]
    NoPosition { alias: String },
    #[error("{0}")]
    NodeStop(FenceClientError),
    #[error("{0}")]
    NodeHold(FenceClientError),
    #[error("{0}")]
    Fsfreeze(FenceClientError),
    #[error("building VolumeSnapshot {name}: {source}")]
    BuildSnapshot {
        name: String,
        source: serde_json::Error,
    },
    #[error("creating VolumeSnapshot {name}: {source}")]
    CreateSnapshot { name: String, source: kube::Error },
    #[error("snapshot {name} was not cut within {limit:?} (last error: {last_error})")]
    CutTimeout {
        name: String,
        limit: Duration,
        last_error: String,
    },
    #[error("snapshot {name} was cut but not ready within {timeout}")]
    ReadyTimeout { name: String, timeout: String },
    /// The run failed (or, with `cause` None, succeeded up to the cut) and putting the
    /// tablet back did not fully succeed: the lease is left to expire for recovery.
    #[error("{}; unfence incomplete: {}", cause.as_ref().map_or_else(|| "the snapshot was cut".to_owned(), ToString::to_string), list(problems))]
    UnfenceIncomplete {
        cause: Option<Box<RunError>>,
        problems: Vec<UnfenceProblem>,
    },
}

/// One undo step that failed.
#[derive(Debug, thiserror::Error)]
pub enum UnfenceProblem {
    #[error("node release: {0}")]
    NodeRelease(FenceClientError),
    #[error(transparent)]
    PutBack(PutBackError),
    #[error("deleting the fence: {0}")]
    DeleteFence(FenceClientError),
}

fn list<T: ToString>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl RunError {
    /// The stable code in the JSON line's `error.code`.
    pub fn code(&self) -> &'static str {
        match self {
            RunError::UnknownCluster(_) => "unknown-cluster",
            RunError::BadShard { .. } => "bad-shard",
            RunError::BadVtctld(_) => "bad-vtctld",
            RunError::VtctldUnavailable(_) | RunError::NoVtctld(_) => "vtctld-unavailable",
            RunError::KubernetesUnavailable { .. } => "kubernetes-unavailable",
            RunError::Fenced { .. } | RunError::UnreadableFence(_) | RunError::FenceTaken(_) => {
                "fenced"
            }
            RunError::FenceRecovery(_) => "fence-recovery-failed",
            // The cause's own code, as `plan` has always named it.
            RunError::Discovery(DiscoverError::Kube { .. }) => "kubernetes-unavailable",
            RunError::Discovery(DiscoverError::Vtctld(_) | DiscoverError::NoVtctld { .. }) => {
                "vtctld-unavailable"
            }
            RunError::NoPlan(NoPlan::Refused(r)) => r.code(),
            RunError::NoPlan(NoPlan::TargetTypeUnknown { .. }) => "target-type-unknown",
            RunError::NoPlan(NoPlan::SemiSyncAcks(_)) => "semi-sync-acks",
            RunError::SemiSyncUnknown { .. } => "semi-sync-unknown",
            RunError::OnlinePrecondition { .. } => "online-precondition",
            RunError::Fence(_) => "fence-failed",
            RunError::LayoutRefused(_) => "layout-refused",
            RunError::Probe(_) => "probe-failed",
            RunError::Drain { .. } => "drain-failed",
            RunError::StopReplication { .. } => "stop-replication-failed",
            RunError::Status { .. } => "status-failed",
            RunError::NoPosition { .. } => "no-position",
            RunError::NodeStop(_) => "node-stop-failed",
            RunError::NodeHold(_) => "node-hold-failed",
            RunError::Fsfreeze(_) => "fsfreeze-failed",
            RunError::BuildSnapshot { .. } | RunError::CreateSnapshot { .. } => "snapshot-failed",
            RunError::CutTimeout { .. } => "cut-timeout",
            RunError::ReadyTimeout { .. } => "ready-timeout",
            RunError::UnfenceIncomplete { cause, .. } => {
                cause.as_ref().map_or("unfence-incomplete", |c| c.code())
            }
        }
    }

    /// The exit code: usage and refusals touched nothing; 4 leaves the lease for recovery.
    pub fn exit(&self) -> Exit {
        match self {
            RunError::UnknownCluster(_) | RunError::BadShard { .. } | RunError::BadVtctld(_) => {
                Exit::Usage
            }
            RunError::Fenced { .. }
            | RunError::UnreadableFence(_)
            | RunError::FenceTaken(_)
            | RunError::NoPlan(_)
            | RunError::SemiSyncUnknown { .. }
            | RunError::OnlinePrecondition { .. }
            | RunError::LayoutRefused(_) => Exit::Refused,
            RunError::UnfenceIncomplete { .. } => Exit::UnfenceIncomplete,
            _ => Exit::Failed,
        }
    }
}
