//! vtctld over gRPC (`vtctlservice.Vtctld`): hand-written messages and a small client.

pub mod client;
pub mod messages;

pub use client::{VtctldClient, VtctldError};
pub use messages::topodata::TabletType;

use crate::naming::TabletAlias;

impl From<&TabletAlias> for messages::topodata::TabletAlias {
    fn from(a: &TabletAlias) -> Self {
        Self {
            cell: a.cell.clone(),
            uid: a.uid.get(),
        }
    }
}

impl From<&messages::topodata::TabletAlias> for TabletAlias {
    fn from(a: &messages::topodata::TabletAlias) -> Self {
        TabletAlias::new(a.cell.clone(), a.uid)
    }
}

impl TabletType {
    /// Parses the lowercase or uppercase name (`replica`, `RDONLY`).
    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Unknown,
            Self::Primary,
            Self::Replica,
            Self::Rdonly,
            Self::Spare,
            Self::Experimental,
            Self::Backup,
            Self::Restore,
            Self::Drained,
        ]
        .into_iter()
        .find(|t| t.name().eq_ignore_ascii_case(s))
    }

    /// Lowercase name as `vtctldclient` prints it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Unknown => "unknown",
            Self::Primary => "primary",
            Self::Replica => "replica",
            Self::Rdonly => "rdonly",
            Self::Spare => "spare",
            Self::Experimental => "experimental",
            Self::Backup => "backup",
            Self::Restore => "restore",
            Self::Drained => "drained",
        }
    }
}
