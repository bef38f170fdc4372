//! `vtsnap-restore`: makes a tablet volume cloned from another tablet's snapshot belong
//! to the tablet it is now attached to (docs/design.md §5.5).
//!
//! The spine is observe → decide → act → report:
//! [`observe::observe`] reads the volume, [`decide::plan`] decides the steps (pure),
//! [`act::apply`] carries them out under a journal, and [`Outcome`] is the report.

pub mod act;
pub mod beneath;
pub mod binlog;
pub mod durable;
pub mod journal;
pub use vtsnap_core::mycnf;
pub mod decide;
pub mod observe;
pub mod preflight;
pub mod refusal;

use std::io::Read;
use std::path::PathBuf;

use serde::Serialize;
use vtsnap_core::exit::Exit;
use vtsnap_core::naming::TabletUid;

use crate::act::{ApplyError, StepReport};
use crate::beneath::Root;
use crate::decide::Plan;
use crate::observe::Observed;
use crate::refusal::Refusal;

/// Lowest server-id Vitess hands out (`go/vt/mysqlctl/mycnf_gen.go`, RandomizeMysqlServerID):
/// 0 is reserved and 1–99 are used by Vitess's own binlog connections.
pub const SERVER_ID_MIN: u32 = 100;
/// Server-ids stay below 2^31 (semi-sync logs print them as signed 32-bit).
pub const SERVER_ID_END: u32 = 1 << 31;

/// What to do, as parsed from flags or the environment.
#[derive(Debug, Clone)]
pub struct Options {
    pub vtdataroot: PathBuf,
    pub tablet_uid: TabletUid,
    /// A fixed new server-id instead of a random one.
    pub server_id: Option<u32>,
    pub dry_run: bool,
}

/// What a run did (the JSON `action`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::IntoStaticStr)]
#[strum(serialize_all = "lowercase")]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// A fresh volume: nothing to restore.
    Empty,
    /// The volume is already this tablet's.
    None,
    /// Another tablet's data was moved to this tablet.
    Moved,
    /// Refused by a precondition; nothing changed (exit 3).
    Refused,
    /// Failed (exit 1); a rerun finishes the journaled move.
    Failed,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What the run did, printed as the last stdout line.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub action: Action,
    pub dry_run: bool,
    /// An interrupted earlier run was finished.
    pub resumed: bool,
    pub from_uid: Option<TabletUid>,
    pub to_uid: TabletUid,
    pub server_id: Option<u32>,
    pub old_server_id: Option<u32>,
    /// `restore_in_progress` is left as it was; true means vttablet will restore from a
    /// backup over this volume instead of using its data.
    pub restore_in_progress: bool,
    pub steps: Vec<StepReport>,
}

#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error("bad usage: {0}")]
    Usage(String),
    #[error("refusing to change the volume: {0}")]
    Refused(#[from] Refusal),
    #[error("restore failed part-way (the journal is kept; run again to finish): {0}")]
    Apply(#[from] ApplyError),
    #[error("cannot pick a random server-id: {0}")]
    Random(std::io::Error),
}

impl RestoreError {
    /// How the program ends: usage (2), refused with nothing changed (3), or failed
    /// part-way (1).
    pub fn exit(&self) -> Exit {
        match self {
            Self::Usage(_) => Exit::Usage,
            Self::Refused(_) => Exit::Refused,
            Self::Apply(_) | Self::Random(_) => Exit::Failed,
        }
    }

    /// A stable kebab-case code for the JSON line.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Usage(_) => "usage",
            Self::Refused(r) => r.code(),
            Self::Apply(_) => "apply-failed",
            Self::Random(_) => "random",
        }
    }
}

/// A random server-id in [100, 2^31) that differs from `old`.
pub fn random_server_id(old: Option<u32>) -> std::io::Result<u32> {
    let mut f = std::fs::File::open("/dev/urandom")?;
    loop {
        let mut b = [0u8; 4];
        f.read_exact(&mut b)?;
        let id = SERVER_ID_MIN + u32::from_le_bytes(b) % (SERVER_ID_END - SERVER_ID_MIN);
        if Some(id) != old {
            return Ok(id);
        }
    }
}

fn check_server_id(id: u32, old: Option<u32>) -> Result<u32, RestoreError> {
    if !(SERVER_ID_MIN..SERVER_ID_END).contains(&id) {
        return Err(RestoreError::Usage(format!(
            "--server-id {id} is outside [{SERVER_ID_MIN}, {SERVER_ID_END})"
        )));
    }
    if Some(id) == old {
        return Err(RestoreError::Usage(format!(
            "--server-id {id} is the source tablet's own server-id"
        )));
    }
    Ok(id)
}

fn nothing(action: Action, opts: &Options, restore_in_progress: bool) -> Outcome {
    Outcome {
        action,
        dry_run: opts.dry_run,
        resumed: false,
        from_uid: None,
        to_uid: opts.tablet_uid,
        server_id: None,
        old_server_id: None,
        restore_in_progress,
        steps: Vec::new(),
    }
}

/// Runs the restore on one volume.
pub fn run(opts: &Options) -> Result<Outcome, RestoreError> {
    let root = Root::open(&opts.vtdataroot).map_err(|e| {
        RestoreError::Usage(format!(
            "--vtdataroot {} is not a directory ({e})",
            opts.vtdataroot.display()
        ))
    })?;

    // observe
    let observed = observe::observe(&root, opts.tablet_uid)?;

    // decide
    let (plan, resumed): (Plan, bool) = match observed {
        Observed::Empty => return Ok(nothing(Action::Empty, opts, false)),
        Observed::Own {
            restore_in_progress,
        } => return Ok(nothing(Action::None, opts, restore_in_progress)),
        Observed::Resume(j) => {
            if j.plan.to != opts.tablet_uid {
                return Err(Refusal::JournalForOtherTablet {
                    journal_to: j.plan.to,
                    mine: opts.tablet_uid,
                }
                .into());
            }
            // What an earlier run left, and anything planted since, checked before the
            // first change of this run.
            preflight::check_resume(&root, observe::POD_MOUNT, &j.plan)?;
            (j.plan, true)
        }
        Observed::Move(src) => {
            let server_id = match opts.server_id {
                Some(id) => check_server_id(id, src.old_server_id)?,
                None => random_server_id(src.old_server_id).map_err(RestoreError::Random)?,
            };
            let plan = decide::plan(&src, opts.tablet_uid, server_id);
            // Everything the move will touch, checked before the first change.
            preflight::check(&root, &src.mount, &plan)?;
            (plan, false)
        }
    };

    // act
    let steps = if opts.dry_run {
        act::planned(&plan)
    } else {
        let span = tracing::info_span!("move", from = %plan.from, to = %plan.to, resumed);
        let _g = span.enter();
        act::apply(&root, &plan, resumed)?
    };

    // report
    Ok(Outcome {
        action: Action::Moved,
        dry_run: opts.dry_run,
        resumed,
        from_uid: Some(plan.from),
        to_uid: plan.to,
        server_id: Some(plan.server_id),
        old_server_id: plan.old_server_id,
        restore_in_progress: plan.restore_in_progress,
        steps,
    })
}
