//! What can go wrong: starting the daemon ([`DaemonError`]), one step for one lease
//! ([`StepError`]), and the parts of a release ([`ReleaseProblem`]).

use std::net::SocketAddr;
use std::path::PathBuf;

use vtsnap_core::fence::NodeState;
use vtsnap_core::fence::client::FenceClientError;
use vtsnap_core::fence::put_back::PutBackError;
use vtsnap_core::naming::TabletAlias;
use vtsnap_core::vtctld::VtctldError;

use super::config::ConfigError;
use super::pods;
use super::registry::{self, ThawError};
use crate::cgroup::CgroupError;
use crate::fsfreeze::FsFreezeError;
use crate::mysqlctl::MysqlCtlError;
use crate::probe;

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Registry(#[from] registry::RegistryError),
    #[error("cannot start the watchdog thread: {0}")]
    Watchdog(std::io::Error),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// Why a step did not complete. Refusals are final for the lease ([`NodeState::Refused`]);
/// everything else is reported `failed` and tried again next cycle. The text goes to the
/// lease's `node-error`.
#[derive(Debug, thiserror::Error)]
pub(super) enum StepError {
    #[error("pod {pod} does not exist")]
    PodMissing { pod: String },
    #[error("cannot read pod {pod}: {source}")]
    PodUnreadable {
        pod: String,
        #[source]
        source: kube::Error,
    },
    #[error("pod {pod} is not the one the lease names (UID differs: replaced?)")]
    PodReplaced { pod: String },
    #[error("pod {pod} runs on node {node:?}, not {this}")]
    PodElsewhere {
        pod: String,
        node: String,
        this: String,
    },
    #[error("vtctld of tablet {tablet}: {source}")]
    Vtctld {
        tablet: TabletAlias,
        #[source]
        source: VtctldError,
    },
    #[error("cannot confirm tablet {tablet} is not the primary: {source}")]
    TabletUnconfirmed {
        tablet: TabletAlias,
        #[source]
        source: VtctldError,
    },
    #[error("tablet {tablet} is the primary")]
    TabletIsPrimary { tablet: TabletAlias },
    #[error("the volume of tablet {tablet}: {source}")]
    Volume {
        tablet: TabletAlias,
        #[source]
        source: pods::MountError,
    },
    #[error("tablet {tablet}: {source}")]
    Probe {
        tablet: TabletAlias,
        #[source]
        source: probe::ProbeError,
    },
    /// The answer could not be written yet (the API failed, or the lease kept changing):
    /// nothing to report on the lease, the pass is repeated soon.
    #[error("the answer to lease {lease} is not written yet")]
    NotAnswered { lease: String },
    #[error("no hold record for lease {lease}")]
    NoRecord { lease: String },
    #[error(transparent)]
    Registry(#[from] registry::RegistryError),
    #[error(transparent)]
    Mysqlctl(#[from] MysqlCtlError),
    #[error("pod (UID {pod_uid}) reports no mysqld container ID")]
    NoContainerId { pod_uid: String },
    #[error("container {container}: {source}")]
    ContainerCgroup {
        container: String,
        #[source]
        source: CgroupError,
    },
    #[error("no process of container {container} on this node")]
    NoProcess { container: String },
    #[error("freezing container {container}: {source}")]
    Freeze {
        container: String,
        #[source]
        source: CgroupError,
    },
    #[error("the volume of pod (UID {pod_uid}) was not found on this node")]
    NoMount { pod_uid: String },
    /// The mount may not be frozen (the root file system, not a mount point): final.
    #[error(transparent)]
    MountRefused(FsFreezeError),
    #[error(transparent)]
    Mount(#[from] FsFreezeError),
    #[error(transparent)]
    Thaw(#[from] ThawError),
    #[error("release incomplete: {}", join(.problems))]
    ReleaseIncomplete { problems: Vec<ReleaseProblem> },
    #[error("released, but cannot delete lease {lease}: {source}")]
    LeaseDelete {
        lease: String,
        #[source]
        source: Box<FenceClientError>,
    },
    /// A corrupt hold registry lost this lease's record, and a freeze was found and ended.
    #[error(
        "the hold registry was corrupt (moved to {}); a freeze this helper may have begun for tablet {tablet} was found and ended, and is not begun again for this lease",
        moved_to.display()
    )]
    LostHoldEnded {
        tablet: TabletAlias,
        moved_to: PathBuf,
    },
}

impl StepError {
    pub(super) fn state(&self) -> NodeState {
        match self {
            Self::PodMissing { .. }
            | Self::PodReplaced { .. }
            | Self::PodElsewhere { .. }
            | Self::TabletIsPrimary { .. }
            | Self::Volume { .. }
            | Self::Probe { .. }
            | Self::ContainerCgroup { .. }
            | Self::MountRefused(_) => NodeState::Refused,
            _ => NodeState::Failed,
        }
    }
}

/// One part of a release that did not complete.
#[derive(Debug, thiserror::Error)]
pub(super) enum ReleaseProblem {
    #[error(transparent)]
    Thaw(#[from] ThawError),
    #[error(transparent)]
    Registry(#[from] registry::RegistryError),
    #[error(transparent)]
    Mysqld(#[from] MysqlCtlError),
    #[error(transparent)]
    PutBack(#[from] PutBackError),
}

fn join(problems: &[ReleaseProblem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}
