//! report: the one JSON line a run prints at exit (its fields and values are documented
//! in the README and keyed on by alerting, so they stay stable).

use serde::Serialize;
use vtsnap_core::config::Mode;
use vtsnap_core::exit::Exit;
use vtsnap_core::reconcile::ErrorLine;
use vtsnap_core::snapshot::Phase;

use super::decide::SnapshotPlan;
use super::error::RunError;

/// How the run ended (the JSON `outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default, strum::IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    #[default]
    Done,
    Failed,
    FailedUnfenceIncomplete,
    Usage,
    Refused,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    fn of(exit: Exit) -> Self {
        match exit {
            Exit::Ok => Outcome::Done,
            Exit::Failed => Outcome::Failed,
            Exit::Usage => Outcome::Usage,
            Exit::Refused => Outcome::Refused,
            Exit::UnfenceIncomplete => Outcome::FailedUnfenceIncomplete,
        }
    }
}

/// One finished step and how long it took.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct StepTiming {
    pub step: String,
    pub ms: u64,
}

/// The one JSON line printed at exit.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Summary {
    pub outcome: Outcome,
    pub exit_code: u8,
    pub shard: String,
    /// Absent only when the run stopped before its mode was known (bad usage).
    pub mode: Option<Mode>,
    pub dry_run: bool,
    pub target: Option<String>,
    pub snapshot: Option<String>,
    pub gtid: Option<String>,
    pub fence_window_ms: Option<u64>,
    pub cut_latency_ms: Option<u64>,
    pub ready_latency_ms: Option<u64>,
    pub phase: Option<Phase>,
    pub recovered_fence: Option<String>,
    pub error: Option<ErrorLine>,
    pub steps: Vec<String>,
    /// How long each step the run took, in order: from the end of the step before (the
    /// first from the start of the act), so the fence window can be read step by step.
    pub step_timings: Vec<StepTiming>,
    /// With `--dry-run`: what the run would do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<SnapshotPlan>,
}

impl Summary {
    /// Sets outcome, exit code and error from how the run ended.
    pub fn finish(mut self, result: Result<(), RunError>) -> Self {
        let exit = match &result {
            Ok(()) => Exit::Ok,
            Err(e) => e.exit(),
        };
        if let Err(e) = result {
            tracing::error!(code = e.code(), error = %e, shard = %self.shard, "run failed");
            self.error = Some(ErrorLine {
                code: e.code(),
                message: e.to_string(),
            });
        }
        self.outcome = Outcome::of(exit);
        self.exit_code = exit.code();
        self
    }
}
