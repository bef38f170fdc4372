//! Report: the one JSON line each command prints, and its exit.

use serde::Serialize;
use vtsnap_core::exit::Exit;
use vtsnap_core::pitr::chain::{Plan, Refusal, Span, Target};
use vtsnap_core::reconcile::ErrorLine;

use crate::act::archive::Taken;
use crate::decide::archive::Take;
use crate::observe::{Observed, Passed};

/// The target as the line prints it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum TargetLine {
    /// Every transaction committed before this time (RFC 3339, UTC).
    Before(String),
    /// Every transaction of this GTID set.
    Through(String),
}

impl From<&Target> for TargetLine {
    fn from(t: &Target) -> Self {
        match t {
            Target::Before(at) => Self::Before(at.to_string()),
            Target::Through(g) => Self::Through(g.to_string()),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanLine {
    pub shard: String,
    pub target: TargetLine,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<Plan>,
    /// Each base that cannot reach the target, newest first, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<Passed>,
    /// Without a plan: why, with the window, in one sentence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The times the shard can be recovered to.
    pub window: Vec<Span>,
    /// The increments the archive holds.
    pub increments: usize,
    /// Snapshots that are no base, and backups that are not part of the archive.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub passed_snapshots: Vec<Passed>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub passed_backups: Vec<Passed>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub incomplete_backups: Vec<String>,
}

impl PlanLine {
    pub fn new(
        shard: String,
        target: &Target,
        chosen: Result<Plan, Vec<(String, Refusal)>>,
        window: Vec<Span>,
        archive: &Observed,
        passed_snapshots: Vec<Passed>,
    ) -> Self {
        let (plan, refused) = match chosen {
            Ok(p) => (Some(p), Vec::new()),
            Err(r) => (
                None,
                r.into_iter()
                    .map(|(name, why)| Passed {
                        name,
                        why: why.to_string(),
                    })
                    .collect(),
            ),
        };
        let message = plan
            .is_none()
            .then(|| refusal_message(&shard, target, &window));
        Self {
            shard,
            target: target.into(),
            plan,
            refused,
            message,
            window,
            increments: archive.increments.len(),
            passed_snapshots,
            passed_backups: archive.unusable.clone(),
            incomplete_backups: archive.incomplete.clone(),
        }
    }

    /// Prints the line (and, without a plan, its message on stderr); a plan is
    /// [`Exit::Ok`], none [`Exit::Refused`].
    pub fn print(&self) -> Exit {
        println!("{}", serde_json::to_string(self).unwrap_or_default());
        if let Some(m) = &self.message {
            eprintln!("{m}");
        }
        if self.plan.is_some() {
            Exit::Ok
        } else {
            Exit::Refused
        }
    }
}

/// `fetch`'s line: the plan's, with what was fetched and where the script is.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FetchLine {
    #[serde(flatten)]
    pub plan: PlanLine,
    /// The binlogs in replay order, as the mysqld's container sees them.
    pub files: Vec<String>,
    /// Their bytes, decompressed: what the replay reads.
    pub bytes: u64,
    pub script: String,
}

impl FetchLine {
    pub fn print(&self) -> Exit {
        println!("{}", serde_json::to_string(self).unwrap_or_default());
        Exit::Ok
    }
}

/// "No snapshot of S reaches T: the shard can be recovered to any point from A to B".
pub fn refusal_message(shard: &str, target: &Target, window: &[Span]) -> String {
    let target = match target {
        Target::Before(t) => format!("the time {t}"),
        Target::Through(g) => format!("the GTID set {g}"),
    };
    let window = if window.is_empty() {
        "the archive carries no snapshot of it to any point".to_owned()
    } else {
        let spans: Vec<String> = window
            .iter()
            .map(|s| format!("from {} to {}", s.from, s.to))
            .collect();
        format!(
            "the shard can be recovered to any point {}",
            spans.join(", or ")
        )
    };
    format!("no snapshot of {shard} reaches {target}: {window}")
}

/// How an archive run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ArchiveOutcome {
    /// An increment was stored.
    Stored,
    /// Nothing new since the archive's end: nothing stored.
    Empty,
    /// `--dry-run`: decided, not taken.
    Planned,
    /// Nothing can be taken (no snapshot, no replica, the archive not enabled).
    Refused,
    /// A read or the backup failed; the next run tries again.
    Failed,
    /// The shard is not in the config.
    Usage,
}

impl From<Taken> for ArchiveOutcome {
    fn from(t: Taken) -> Self {
        match t {
            Taken::Stored => Self::Stored,
            Taken::Empty => Self::Empty,
        }
    }
}

impl ArchiveOutcome {
    fn exit(self) -> Exit {
        match self {
            Self::Stored | Self::Empty | Self::Planned => Exit::Ok,
            Self::Refused => Exit::Refused,
            Self::Failed => Exit::Failed,
            Self::Usage => Exit::Usage,
        }
    }
}

/// `archive`'s line.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveLine {
    pub outcome: ArchiveOutcome,
    pub exit_code: u8,
    pub shard: String,
    /// The increment decided (and, unless planned or failed, taken).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub take: Option<Take>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub passed_snapshots: Vec<Passed>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub passed_backups: Vec<Passed>,
    /// The recoverable window as the archive stood after this run (docs/pitr.md §3).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub window: Vec<Span>,
    /// The snapshot the window was recorded on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_recorded_on: Option<String>,
    /// Why the window was not recorded (the run's outcome stands).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_not_recorded: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorLine>,
}

impl ArchiveLine {
    pub fn new(shard: String) -> Self {
        Self {
            outcome: ArchiveOutcome::Failed,
            exit_code: Exit::Failed.code(),
            shard,
            take: None,
            passed_snapshots: Vec::new(),
            passed_backups: Vec::new(),
            window: Vec::new(),
            window_recorded_on: None,
            window_not_recorded: None,
            error: None,
        }
    }

    pub fn finish(mut self, outcome: ArchiveOutcome) -> Self {
        self.outcome = outcome;
        self.exit_code = outcome.exit().code();
        self
    }

    /// Ends with `outcome` and the error line `code`: `message`.
    pub fn end(self, outcome: ArchiveOutcome, code: &'static str, message: impl ToString) -> Self {
        let mut l = self.finish(outcome);
        l.error = Some(ErrorLine {
            code,
            message: message.to_string(),
        });
        l
    }

    pub fn print(&self) -> Exit {
        println!("{}", serde_json::to_string(self).unwrap_or_default());
        if let Some(e) = &self.error {
            eprintln!("{}", e.message);
        }
        if let Some(why) = &self.window_not_recorded {
            eprintln!("the recoverable window was not recorded: {why}");
        }
        self.outcome.exit()
    }
}
