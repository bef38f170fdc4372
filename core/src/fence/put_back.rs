//! Putting a fenced tablet back into service (docs/design.md §5.1 step 6, §5.4): StartReplication,
//! then ChangeTabletType to its original type. The one copy used by the snapshot job's
//! unfence, fence recovery (job and GC), and the node helper's release.

use crate::naming::TabletAlias;
use crate::vtctld::client::CallLimits;
use crate::vtctld::{TabletType, VtctldClient, VtctldError};

/// What a fence changed on the tablet, so what must be undone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct TabletChanges {
    /// StopReplication was called (or may have been).
    pub replication_stopped: bool,
    /// ChangeTabletType moved the tablet away from its original type (or may have).
    pub type_changed: bool,
}

impl TabletChanges {
    /// Nothing was changed.
    pub const NONE: Self = Self {
        replication_stopped: false,
        type_changed: false,
    };
    /// Unknown, as in a recovery from the lease: undo everything (both steps are idempotent).
    pub const ALL: Self = Self {
        replication_stopped: true,
        type_changed: true,
    };
}

/// One step of the put-back that failed.
#[derive(Debug, thiserror::Error)]
pub enum PutBackError {
    #[error("cannot reach vtctld to put {alias} back: {source}")]
    Vtctld {
        alias: TabletAlias,
        #[source]
        source: VtctldError,
    },
    #[error("StartReplication on {alias}: {source}")]
    StartReplication {
        alias: TabletAlias,
        #[source]
        source: VtctldError,
    },
    #[error("ChangeTabletType of {alias} back to {original}: {source}")]
    RestoreType {
        alias: TabletAlias,
        original: &'static str,
        #[source]
        source: VtctldError,
    },
}

/// Undoes `changes` on the tablet: StartReplication, then ChangeTabletType back to
/// `original`. Each step is attempted even if the one before failed; every failure is
/// returned. A PRIMARY is never changed by ChangeTabletType (docs/design.md §2), so an original
/// type of PRIMARY skips that step.
pub async fn put_tablet_back(
    vtctld: &VtctldClient,
    alias: &TabletAlias,
    original: TabletType,
    changes: TabletChanges,
) -> Vec<PutBackError> {
    let mut problems = Vec::new();
    if changes.replication_stopped
        && let Err(source) = vtctld.start_replication(alias).await
    {
        problems.push(PutBackError::StartReplication {
            alias: alias.clone(),
            source,
        });
    }
    if changes.type_changed
        && original != TabletType::Primary
        && let Err(source) = vtctld.change_tablet_type(alias, original).await
    {
        problems.push(PutBackError::RestoreType {
            alias: alias.clone(),
            original: original.name(),
            source,
        });
    }
    problems
}

/// [`put_tablet_back`] through the vtctld at `endpoint` (as recorded on a lease or in the
/// node helper's registry).
pub async fn put_tablet_back_at(
    endpoint: &str,
    alias: &TabletAlias,
    original: TabletType,
    changes: TabletChanges,
) -> Vec<PutBackError> {
    match VtctldClient::new(endpoint, CallLimits::default()) {
        Ok(vt) => put_tablet_back(&vt, alias, original, changes).await,
        Err(source) => vec![PutBackError::Vtctld {
            alias: alias.clone(),
            source,
        }],
    }
}

/// The problems as one line, for summaries and lease annotations.
pub fn describe(problems: &[PutBackError]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}
