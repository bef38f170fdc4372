//! Ending freezes: through the descriptors kept open since the freeze ([`Kept`]), so a
//! thaw never needs a new file descriptor.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::cgroup::{Cgroup, CgroupError, Control};
use crate::fsfreeze::{self, FsFreezeError, Mount};

/// Which of a lease's recorded freezes to end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freezes {
    /// The mysqld container's cgroup only (a `stop` after a `hold`).
    Cgroup,
    /// The tablet volume's file system only.
    FileSystem,
    /// Both: a release.
    All,
}

impl Freezes {
    pub fn cgroup(self) -> bool {
        matches!(self, Self::Cgroup | Self::All)
    }

    pub fn file_system(self) -> bool {
        matches!(self, Self::FileSystem | Self::All)
    }
}

/// The open descriptors of one lease's freezes.
#[derive(Debug, Default)]
pub struct Kept {
    pub cgroup: Option<Arc<Control>>,
    pub mount: Option<Arc<Mount>>,
}

/// Why a freeze could not be ended.
#[derive(Debug, thiserror::Error)]
pub enum ThawError {
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    #[error(transparent)]
    Fs(#[from] FsFreezeError),
}

/// Ends the freezes `cgroup` and `fs` name for `lease`, through the descriptors kept for it
/// where they are open (a path is opened only when none is). Each that ended is cleared and
/// its descriptor dropped.
pub fn end_freezes(
    kept: &mut BTreeMap<String, Kept>,
    lease: &str,
    cgroup: Option<&mut Option<Cgroup>>,
    fs: Option<&mut Option<PathBuf>>,
) -> Vec<ThawError> {
    let mut problems = Vec::new();
    let k = kept.entry(lease.to_owned()).or_default();
    if let Some(slot) = cgroup
        && let Some(cg) = slot.as_ref()
    {
        let ended = match k.cgroup.as_ref().filter(|c| c.cgroup() == cg) {
            Some(c) => c.thaw(),
            None => cg.thaw(),
        };
        match ended {
            Ok(()) => {
                *slot = None;
                k.cgroup = None;
            }
            Err(e) => problems.push(e.into()),
        }
    }
    if let Some(slot) = fs
        && let Some(m) = slot.as_ref()
    {
        let ended = match k.mount.as_ref().filter(|f| f.path() == m) {
            Some(f) => f.thaw().map(|_| ()),
            None => fsfreeze::thaw(m),
        };
        match ended {
            Ok(()) => {
                *slot = None;
                k.mount = None;
            }
            Err(e) => problems.push(e.into()),
        }
    }
    if k.cgroup.is_none() && k.mount.is_none() {
        kept.remove(lease);
    }
    problems
}

/// Opens the freezer files of a recorded freeze; a failure is logged (the thaw then opens
/// them by path).
pub(super) fn keep(lease: &str, cgroup: Option<&Cgroup>, fs: Option<&PathBuf>) -> Kept {
    let mut k = Kept::default();
    if let Some(cg) = cgroup {
        match cg.open() {
            Ok(c) => k.cgroup = Some(Arc::new(c)),
            Err(err) => {
                tracing::warn!(lease, error = %err, "cannot keep the frozen cgroup's files open")
            }
        }
    }
    if let Some(m) = fs {
        match fsfreeze::open_to_thaw(m) {
            Ok(f) => k.mount = Some(Arc::new(f)),
            Err(err) => {
                tracing::warn!(lease, error = %err, "cannot keep the frozen mount open")
            }
        }
    }
    k
}
