//! Report: the one JSON line a drill run ends with (docs/design.md §5.9), and its exit;
//! its metrics ([`metrics`]).

pub mod metrics;

use serde::Serialize;
use vtsnap_core::exit::Exit;
use vtsnap_core::reconcile::ErrorLine;
use vtsnap_core::snapshot::{DrillRecord, DrillResult};

use crate::decide::{Plan, Refusal};
use crate::error::DrillError;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The snapshot restored and checked.
    Passed,
    /// The drill ran and the snapshot did not restore or check (the record says why).
    Failed,
    /// Nothing was drilled (the refusal says why); nothing was created.
    Refused,
    /// The run could not do its work (the error says which step).
    Error,
    /// `plan`: the decision only.
    Planned,
}

/// The JSON line.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub outcome: Outcome,
    pub shard: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drill: Option<DrillRecord>,
    /// PVC bound + restore + mysqld ready, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rto_ms: Option<u64>,
    pub steps: Vec<String>,
    /// Objects it could not delete (their owner's garbage collection will, if the Job
    /// owns them: one of another namespace only names itself on them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub left: Vec<String>,
    /// Whether a tablet restored from the snapshot can catch up (unknown never fails it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub catch_up: Option<vtsnap_core::coverage::Coverage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refusal: Option<Refusal>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<Plan>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorLine>,
}

impl Summary {
    pub fn new(shard: String) -> Self {
        Self {
            outcome: Outcome::Error,
            shard,
            snapshot: None,
            drill: None,
            rto_ms: None,
            steps: Vec::new(),
            left: Vec::new(),
            catch_up: None,
            refusal: None,
            plan: None,
            error: None,
        }
    }

    pub fn drilled(mut self, record: DrillRecord) -> Self {
        self.outcome = match record.result {
            DrillResult::Passed => Outcome::Passed,
            DrillResult::Failed => Outcome::Failed,
        };
        self.rto_ms = record.rto.map(|r| r.total_ms());
        self.drill = Some(record);
        self
    }

    pub fn refused(mut self, r: Refusal) -> Self {
        self.outcome = Outcome::Refused;
        self.refusal = Some(r);
        self
    }

    pub fn failed(mut self, e: &DrillError) -> Self {
        self.outcome = Outcome::Error;
        self.error = Some(ErrorLine {
            code: e.code(),
            message: e.to_string(),
        });
        self
    }

    /// 0 passed or planned; 1 failed or an error; 3 refused; 2 usage.
    pub fn exit(&self) -> Exit {
        match (self.outcome, &self.error) {
            (Outcome::Passed | Outcome::Planned, _) => Exit::Ok,
            (Outcome::Refused, _) => Exit::Refused,
            (Outcome::Error, Some(e)) if e.code == "unknown-shard" => Exit::Usage,
            (Outcome::Failed | Outcome::Error, _) => Exit::Failed,
        }
    }

    /// Prints the line and returns the exit.
    pub fn print(&self) -> Exit {
        println!("{}", serde_json::to_string(self).unwrap_or_default());
        self.exit()
    }
}
