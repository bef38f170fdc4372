//! Why a drill run could not do its work, naming what failed (docs/design.md §10 for the
//! exit codes).

use vtsnap_core::exit::Exit;

#[derive(Debug, thiserror::Error)]
pub enum DrillError {
    #[error("{0}")]
    UnknownShard(String),
    #[error("vtctld: {0}")]
    Vtctld(String),
    #[error("reading {reading}: {source}")]
    Kubernetes {
        reading: String,
        #[source]
        source: kube::Error,
    },
    #[error("creating {object}: {source}")]
    Create {
        object: String,
        #[source]
        source: kube::Error,
    },
    /// The server refuses this Job the watch of an object it made (its RBAC); `left` is
    /// what could not be removed after it.
    #[error("watching {object}: refused ({refusal})")]
    Watch {
        object: String,
        refusal: vtsnap_core::reconcile::Refusal,
        left: Vec<String>,
    },
    #[error("recording the drill on VolumeSnapshot {snapshot}: {source}")]
    Record {
        snapshot: String,
        #[source]
        source: kube::Error,
    },
}

impl DrillError {
    /// Nothing was created before these; a bad shard name is a usage error.
    pub const fn exit(&self) -> Exit {
        match self {
            Self::UnknownShard(_) => Exit::Usage,
            Self::Vtctld(_)
            | Self::Kubernetes { .. }
            | Self::Create { .. }
            | Self::Watch { .. }
            | Self::Record { .. } => Exit::Failed,
        }
    }

    /// The stable code of the JSON line.
    pub const fn code(&self) -> &'static str {
        match self {
            Self::UnknownShard(_) => "unknown-shard",
            Self::Vtctld(_) => "vtctld-unavailable",
            Self::Kubernetes { .. } => "kubernetes-unavailable",
            Self::Create { .. } => "create-failed",
            Self::Watch { .. } => "watch-refused",
            Self::Record { .. } => "record-failed",
        }
    }
}
