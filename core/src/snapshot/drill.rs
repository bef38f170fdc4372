//! The drill record a snapshot carries (`vtsnap.io/drill`, docs/design.md §5.9): whether
//! a throwaway restore of it passed, when, why not, and how long each part of the
//! restore took (the measured RTO).
//!
//! The value is a small JSON object. The reader is strict about what it acts on (the
//! result, the time, the reason of a failure) and bounded in size: the GC keeps, and
//! the webhook may offer, a snapshot because of it.

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::read::CLOCK_SKEW;
use crate::k8s_names::{cut_to_bytes, escape_controls};

/// The annotation: the last drill of the snapshot.
pub const ANN_DRILL: &str = "vtsnap.io/drill";

/// A record longer than this is not one vtsnap wrote.
pub const MAX_RECORD_BYTES: usize = 4096;

/// A failure's reason is cut to this many bytes when written: even with every byte
/// escaped in JSON, the record stays within [`MAX_RECORD_BYTES`] and reads back.
pub const MAX_REASON_BYTES: usize = 1024;

/// How the drill ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum DrillResult {
    /// Restored, mysqld recovered, the position matched and every table checked opened.
    Passed,
    /// Any step failed (`reason` says which and why).
    Failed,
}

impl DrillResult {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The measured parts of a restore, in milliseconds from the drill's start of each part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rto {
    /// From the PVC's creation until it is bound (the volume is provisioned from the
    /// snapshot).
    pub pvc_bound_ms: u64,
    /// `vtsnap-restore`: from its start until it exits.
    pub restore_ms: u64,
    /// From mysqld's start until it answers on its socket (crash recovery included).
    pub mysqld_ready_ms: u64,
}

impl Rto {
    /// The three parts together: what a new tablet waits before it can catch up.
    pub fn total_ms(&self) -> u64 {
        self.pvc_bound_ms
            .saturating_add(self.restore_ms)
            .saturating_add(self.mysqld_ready_ms)
    }
}

/// One drill's outcome, as recorded on the snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DrillRecord {
    pub result: DrillResult,
    /// When the drill ended.
    pub at: Timestamp,
    /// Why it failed (only when failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The measured parts (those that were reached).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rto: Option<Rto>,
    /// The drill Job that ran it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
}

/// Why a `vtsnap.io/drill` value is not a record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DrillRecordError {
    #[error("is {len} bytes, more than {MAX_RECORD_BYTES}")]
    TooLong { len: usize },
    #[error("is not a drill record: {detail}")]
    Malformed { detail: String },
    #[error("is failed with no reason")]
    FailedWithoutReason,
    #[error("is passed but has a reason")]
    PassedWithReason,
}

impl DrillRecord {
    pub fn passed(at: Timestamp, rto: Rto, job: Option<String>) -> Self {
        Self {
            result: DrillResult::Passed,
            at,
            reason: None,
            rto: Some(rto),
            job,
        }
    }

    /// A failure; the reason's control characters are escaped (it may quote what mysqld
    /// or the API server said) and it is cut to [`MAX_REASON_BYTES`] on a character
    /// boundary.
    pub fn failed(at: Timestamp, reason: &str, rto: Option<Rto>, job: Option<String>) -> Self {
        let reason = cut_to_bytes(&escape_controls(reason), MAX_REASON_BYTES).to_owned();
        Self {
            result: DrillResult::Failed,
            at,
            reason: Some(if reason.is_empty() {
                "unknown".to_owned()
            } else {
                reason
            }),
            rto,
            job,
        }
    }

    /// Reads the annotation's value.
    pub fn parse(value: &str) -> Result<Self, DrillRecordError> {
        if value.len() > MAX_RECORD_BYTES {
            return Err(DrillRecordError::TooLong { len: value.len() });
        }
        let r: Self = serde_json::from_str(value).map_err(|e| DrillRecordError::Malformed {
            detail: e.to_string(),
        })?;
        match (r.result, &r.reason) {
            (DrillResult::Failed, None) => Err(DrillRecordError::FailedWithoutReason),
            (DrillResult::Passed, Some(_)) => Err(DrillRecordError::PassedWithReason),
            _ => Ok(r),
        }
    }

    /// The annotation's value.
    pub fn render(&self) -> String {
        // A struct of strings, numbers and a timestamp always serializes.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Passed, at a time that can be true (not after `now` beyond clock skew): a record
    /// from the future is no proof.
    pub fn passed_by(&self, now: Timestamp) -> bool {
        let latest = now.checked_add(CLOCK_SKEW).unwrap_or(Timestamp::MAX);
        self.result == DrillResult::Passed && self.at <= latest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn a_record_reads_back_as_written() {
        let rto = Rto {
            pvc_bound_ms: 1200,
            restore_ms: 80,
            mysqld_ready_ms: 3000,
        };
        let p = DrillRecord::passed(at("2026-12-03T10:00:00Z"), rto, Some("drill-1".into()));
        let text = p.render();
        assert_eq!(
            text,
            r#"{"result":"passed","at":"2026-12-03T10:00:00Z","rto":{"pvcBoundMs":1200,"restoreMs":80,"mysqldReadyMs":3000},"job":"drill-1"}"#
        );
        assert_eq!(DrillRecord::parse(&text).unwrap(), p);
        assert_eq!(rto.total_ms(), 4280);
        let f = DrillRecord::failed(at("2026-12-03T10:00:00Z"), "table t1\ncorrupt", None, None);
        assert_eq!(f.reason.as_deref(), Some("table t1\\ncorrupt"));
        assert_eq!(DrillRecord::parse(&f.render()).unwrap(), f);
        assert_eq!(
            DrillRecord::failed(at("2026-12-03T10:00:00Z"), "", None, None).reason,
            Some("unknown".into())
        );
        let long = DrillRecord::failed(at("2026-12-03T10:00:00Z"), &"x".repeat(5000), None, None);
        assert_eq!(long.reason.as_ref().unwrap().len(), MAX_REASON_BYTES);
        // The worst case for JSON (every byte escaped, multi-byte characters) still
        // reads back, and a cut never splits a character.
        for nasty in [
            "\"".repeat(3000),
            "é".repeat(3000),
            "\u{1}".repeat(3000),
            "\\".repeat(3000),
        ] {
            let r = DrillRecord::failed(
                at("2026-12-03T10:00:00Z"),
                &nasty,
                Some(Rto::default()),
                Some("j".repeat(253)),
            );
            assert!(r.reason.as_ref().unwrap().len() <= MAX_REASON_BYTES);
            assert_eq!(DrillRecord::parse(&r.render()).unwrap(), r);
        }
    }

    #[test]
    fn hostile_values_are_refused_by_name() {
        let bad = [
            ("", "is not a drill record"),
            ("passed", "is not a drill record"),
            (
                r#"{"result":"maybe","at":"2026-12-03T10:00:00Z"}"#,
                "unknown variant",
            ),
            (r#"{"result":"passed"}"#, "missing field `at`"),
            (
                r#"{"result":"passed","at":"yesterday"}"#,
                "is not a drill record",
            ),
            (r#"{"result":"passed","at":7}"#, "is not a drill record"),
            (
                r#"{"result":"failed","at":"2026-12-03T10:00:00Z"}"#,
                "no reason",
            ),
            (
                r#"{"result":"passed","at":"2026-12-03T10:00:00Z","reason":"x"}"#,
                "has a reason",
            ),
            (
                r#"{"result":"passed","at":"2026-12-03T10:00:00Z","rto":{"restoreMs":-1,"pvcBoundMs":0,"mysqldReadyMs":0}}"#,
                "is not a drill record",
            ),
            (
                r#"{"result":"passed","at":"2026-12-03T10:00:00Z","rto":{"restoreMs":1}}"#,
                "missing field",
            ),
        ];
        for (value, want) in bad {
            let err = DrillRecord::parse(value).unwrap_err().to_string();
            assert!(err.contains(want), "{value}: {err}");
        }
        let huge = format!(
            r#"{{"result":"failed","at":"2026-12-03T10:00:00Z","reason":"{}"}}"#,
            "x".repeat(MAX_RECORD_BYTES)
        );
        assert!(matches!(
            DrillRecord::parse(&huge),
            Err(DrillRecordError::TooLong { .. })
        ));
        // Exactly at the bound is read.
        let head = r#"{"result":"failed","at":"2026-12-03T10:00:00Z","reason":""#;
        let fill = MAX_RECORD_BYTES - head.len() - 2;
        let exact = format!("{head}{}\"}}", "x".repeat(fill));
        assert_eq!(exact.len(), MAX_RECORD_BYTES);
        assert!(DrillRecord::parse(&exact).is_ok());
        assert!(matches!(
            DrillRecord::parse(&format!("{head}{}\"}}", "x".repeat(fill + 1))),
            Err(DrillRecordError::TooLong { .. })
        ));
        // Fields a later version adds are tolerated.
        let later = r#"{"result":"passed","at":"2026-12-03T10:00:00Z","tables":3}"#;
        assert!(DrillRecord::parse(later).is_ok());
    }

    #[test]
    fn results_print_as_in_the_record() {
        for r in [DrillResult::Passed, DrillResult::Failed] {
            assert_eq!(serde_json::to_value(r).unwrap(), r.as_str());
        }
        assert_eq!(DrillResult::Failed.as_str(), "failed");
    }

    #[test]
    fn only_a_pass_that_can_be_true_proves_anything() {
        let now = at("2026-12-03T10:00:00Z");
        let pass = |t: &str| DrillRecord::passed(at(t), Rto::default(), None);
        assert!(pass("2026-12-03T09:00:00Z").passed_by(now));
        // Within clock skew of now, and exactly at its edge.
        assert!(pass("2026-12-03T10:05:00Z").passed_by(now));
        assert!(!pass("2026-12-03T10:05:01Z").passed_by(now));
        let failed = DrillRecord::failed(at("2026-12-03T09:00:00Z"), "x", None, None);
        assert!(!failed.passed_by(now));
    }
}
