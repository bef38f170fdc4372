//! The checker: the second container of a drill Pod (docs/design.md §5.9). It waits for
//! the restored mysqld on the socket the two share, checks it, and leaves one JSON
//! report on stdout and in its termination message, where the drill Job reads it.

pub mod judge;
pub mod probe;

use std::path::Path;

use serde::Serialize;

pub use judge::{Expectation, Failure, Verdict, judge};
pub use probe::{ProbeOptions, probe, shutdown};

/// A container's termination message holds at most this many bytes.
pub const MAX_RESULT_BYTES: usize = 4096;

/// What the checker reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckReport {
    pub verdict: Verdict,
    /// From the checker's start until mysqld answered (`None`: it never did).
    pub mysqld_ready_ms: Option<u64>,
}

impl CheckReport {
    /// The JSON of the report, within [`MAX_RESULT_BYTES`] (the reason is already bounded).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Probes and judges.
pub async fn check(opts: &ProbeOptions, expect: &Expectation) -> CheckReport {
    match probe(opts).await {
        Ok(p) => CheckReport {
            verdict: judge(expect, &p.observed),
            mysqld_ready_ms: Some(p.mysqld_ready_ms),
        },
        Err(why) => CheckReport {
            verdict: Verdict::not_ready(&why),
            mysqld_ready_ms: None,
        },
    }
}

/// Writes the report where the kubelet reads the termination message (its reason is
/// bounded so that the JSON fits).
pub fn write_result(path: &Path, report: &CheckReport) -> std::io::Result<()> {
    std::fs::write(path, report.to_json())
}
