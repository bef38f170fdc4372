//! Report: how a run ends — the [`Outcome`] and its JSON line (the last stdout line, usage
//! errors included), the log line, and the exit code, mapped from [`RestoreError`] here
//! and nowhere else.

use serde::Serialize;
use vtsnap_core::exit::Exit;
use vtsnap_core::naming::TabletUid;

use crate::act::{ApplyError, Mode, StepReport};
use crate::decide::plan::Start;
use crate::decide::{DecideError, Decision, Leave};
use crate::observe::ObserveError;

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

/// Why a run did not finish, by the phase that stopped it (each phase's error says
/// whether it was bad usage, a refusal or a failure).
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error(transparent)]
    Observe(#[from] ObserveError),
    #[error(transparent)]
    Decide(#[from] DecideError),
    #[error("restore failed part-way (the journal is kept; run again to finish): {0}")]
    Apply(#[from] ApplyError),
}

impl RestoreError {
    /// How the program ends: usage (2), refused with nothing changed (3), or failed
    /// part-way (1).
    pub fn exit(&self) -> Exit {
        match self {
            Self::Observe(ObserveError::NotADirectory { .. })
            | Self::Decide(
                DecideError::ServerIdOutOfRange { .. } | DecideError::ServerIdOfSource { .. },
            ) => Exit::Usage,
            Self::Observe(ObserveError::Refused(_)) | Self::Decide(DecideError::Refused(_)) => {
                Exit::Refused
            }
            Self::Observe(ObserveError::Random(_)) | Self::Apply(_) => Exit::Failed,
        }
    }

    /// A stable kebab-case code for the JSON line.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Observe(ObserveError::NotADirectory { .. })
            | Self::Decide(
                DecideError::ServerIdOutOfRange { .. } | DecideError::ServerIdOfSource { .. },
            ) => "usage",
            Self::Observe(ObserveError::Refused(r)) | Self::Decide(DecideError::Refused(r)) => {
                r.code()
            }
            Self::Observe(ObserveError::Random(_)) => "random",
            Self::Apply(_) => "apply-failed",
        }
    }
}

/// The outcome of a run that decided `decision` and carried it out as `steps`.
pub fn outcome(decision: &Decision, steps: Vec<StepReport>, mode: Mode) -> Outcome {
    let dry_run = mode == Mode::DryRun;
    match decision {
        Decision::Leave {
            volume,
            tablet,
            restore_in_progress,
        } => Outcome {
            action: match volume {
                Leave::Empty => Action::Empty,
                Leave::Own => Action::None,
            },
            dry_run,
            resumed: false,
            from_uid: None,
            to_uid: *tablet,
            server_id: None,
            old_server_id: None,
            restore_in_progress: *restore_in_progress,
            steps,
        },
        Decision::Move { plan, start } => Outcome {
            action: Action::Moved,
            dry_run,
            resumed: *start == Start::Resume,
            from_uid: Some(plan.from),
            to_uid: plan.to,
            server_id: Some(plan.server_id),
            old_server_id: plan.old_server_id,
            restore_in_progress: plan.restore_in_progress,
            steps,
        },
    }
}

/// Logs and prints how the run for `tablet` ended, and tells the exit code.
pub fn end(result: &Result<Outcome, RestoreError>, mode: Mode, tablet: TabletUid) -> Exit {
    match result {
        Ok(outcome) => {
            tracing::info!(
                action = outcome.action.as_str(),
                steps = outcome.steps.len(),
                "restore finished"
            );
            println!("{}", serde_json::to_string(outcome).unwrap_or_default());
            Exit::Ok
        }
        Err(e) => {
            tracing::error!(error = %e, code = e.code(), "restore did not complete");
            let line = serde_json::json!({
                "action": if e.exit() == Exit::Refused { Action::Refused } else { Action::Failed },
                "dry_run": mode == Mode::DryRun,
                "to_uid": tablet,
                "error": { "code": e.code(), "message": e.to_string() },
            });
            println!("{line}");
            e.exit()
        }
    }
}

/// Prints the JSON line for flags that did not parse (before any tablet is known).
pub fn bad_flags(message: &str) {
    let line = serde_json::json!({
        "action": Action::Failed,
        "dry_run": false,
        "to_uid": null,
        "error": { "code": "usage", "message": message },
    });
    println!("{line}");
}
