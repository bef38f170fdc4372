//! The drill record a snapshot carries (`vtsnap.io/drill`, docs/design.md §5.9): whether
//! a throwaway restore of it passed, when, why not, and how long each part of the
//! restore took (the measured RTO).
//!
//! The value is a small JSON object. The reader is strict about what it acts on (the
//! result, the time, the reason of a failure) and bounded in size: the GC keeps, and
//! the webhook may offer, a snapshot because of it.
//!
//! A record names the snapshot it was made for (its UID and its cut) and counts only
//! there, and only if it was made after that cut and not in the future
//! ([`standing`], docs/design.md §5.9): a record copied from another snapshot, or dated
//! before its own snapshot existed, proves nothing. An unreadable record counts as none
//! (it never makes its snapshot unreadable), so a new drill can replace it.

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use crate::k8s_names::{cut_to_bytes, escape_controls};

/// How far apart two clocks (the API server's, the snapshotter's, the snapshot job's, the
/// reader's) may be before a time read from a snapshot is taken as impossible.
pub const CLOCK_SKEW: SignedDuration = SignedDuration::from_secs(300);

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

/// The snapshot a record was made for: its `metadata.uid` and its cut
/// (`status.creationTime`, the point in time the volume holds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DrillOf {
    pub uid: String,
    pub cut: Timestamp,
}

/// The longest `metadata.uid` a record may name (the API server's are 36 bytes).
pub const MAX_UID_BYTES: usize = 128;

/// One drill's outcome, as recorded on the snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DrillRecord {
    pub result: DrillResult,
    /// When the drill ended.
    pub at: Timestamp,
    /// The UID of the snapshot it was made for.
    pub snapshot_uid: String,
    /// That snapshot's cut (`status.creationTime`).
    pub cut: Timestamp,
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
    #[error("names a snapshot UID of {len} bytes (empty, or more than {MAX_UID_BYTES})")]
    BadUid { len: usize },
}

/// Why a snapshot's `vtsnap.io/drill` counts for nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Discounted {
    #[error("its record {0}")]
    Unreadable(DrillRecordError),
    #[error("the snapshot has no UID or no cut to bind a record to")]
    SnapshotUnbound,
    #[error("its record was made for another snapshot (UID {uid:?})")]
    OtherSnapshot { uid: String },
    #[error("its record was made for a cut at {recorded}, but the snapshot was cut at {cut}")]
    OtherCut { recorded: Timestamp, cut: Timestamp },
    #[error("its record is dated {at}, before the snapshot's cut at {cut}")]
    BeforeCut { at: Timestamp, cut: Timestamp },
    #[error("its record is dated {at}, in the future (now is {now})")]
    InTheFuture { at: Timestamp, now: Timestamp },
}

/// A snapshot's record as read, with the snapshot it must name: what a decider keeps to
/// judge it at its own `now` ([`standing`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrillSeen {
    pub record: Result<DrillRecord, DrillRecordError>,
    pub of: Option<DrillOf>,
}

impl DrillSeen {
    pub fn standing(&self, now: Timestamp) -> Result<&DrillRecord, Discounted> {
        standing(self.record.as_ref(), self.of.as_ref(), now)
    }

    /// It counts at `now` and passed.
    pub fn passed(&self, now: Timestamp) -> bool {
        self.standing(now)
            .is_ok_and(|r| r.result == DrillResult::Passed)
    }
}

/// Whether a record (as read) counts for the snapshot `of` at `now`: made for it (UID and
/// cut), after that cut, and not in the future, each within [`CLOCK_SKEW`]. The one rule
/// every program applies (the GC, the webhook, the metrics, `kubectl vtsnap status`).
pub fn standing<'r>(
    record: Result<&'r DrillRecord, &DrillRecordError>,
    of: Option<&DrillOf>,
    now: Timestamp,
) -> Result<&'r DrillRecord, Discounted> {
    let r = record.map_err(|e| Discounted::Unreadable(e.clone()))?;
    let of = of.ok_or(Discounted::SnapshotUnbound)?;
    if r.snapshot_uid != of.uid {
        return Err(Discounted::OtherSnapshot {
            uid: escape_controls(&r.snapshot_uid).into_owned(),
        });
    }
    if r.cut != of.cut {
        return Err(Discounted::OtherCut {
            recorded: r.cut,
            cut: of.cut,
        });
    }
    if r.at < of.cut.checked_sub(CLOCK_SKEW).unwrap_or(Timestamp::MIN) {
        return Err(Discounted::BeforeCut {
            at: r.at,
            cut: of.cut,
        });
    }
    if r.at > now.checked_add(CLOCK_SKEW).unwrap_or(Timestamp::MAX) {
        return Err(Discounted::InTheFuture { at: r.at, now });
    }
    Ok(r)
}

impl DrillRecord {
    pub fn passed(of: &DrillOf, at: Timestamp, rto: Rto, job: Option<String>) -> Self {
        Self {
            result: DrillResult::Passed,
            at,
            snapshot_uid: of.uid.clone(),
            cut: of.cut,
            reason: None,
            rto: Some(rto),
            job,
        }
    }

    /// A failure; the reason's control characters are escaped (it may quote what mysqld
    /// or the API server said) and it is cut to [`MAX_REASON_BYTES`] on a character
    /// boundary.
    pub fn failed(
        of: &DrillOf,
        at: Timestamp,
        reason: &str,
        rto: Option<Rto>,
        job: Option<String>,
    ) -> Self {
        let reason = cut_to_bytes(&escape_controls(reason), MAX_REASON_BYTES).to_owned();
        Self {
            result: DrillResult::Failed,
            at,
            snapshot_uid: of.uid.clone(),
            cut: of.cut,
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
        if r.snapshot_uid.is_empty() || r.snapshot_uid.len() > MAX_UID_BYTES {
            return Err(DrillRecordError::BadUid {
                len: r.snapshot_uid.len(),
            });
        }
        match (r.result, &r.reason) {
            (DrillResult::Failed, None) => Err(DrillRecordError::FailedWithoutReason),
            (DrillResult::Passed, Some(_)) => Err(DrillRecordError::PassedWithReason),
            _ => Ok(r),
        }
    }

    /// The snapshot it was made for.
    pub fn of(&self) -> DrillOf {
        DrillOf {
            uid: self.snapshot_uid.clone(),
            cut: self.cut,
        }
    }

    /// The annotation's value.
    pub fn render(&self) -> String {
        // A struct of strings, numbers and a timestamp always serializes.
        serde_json::to_string(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn of() -> DrillOf {
        DrillOf {
            uid: "9f1c0d2e-0000-4000-8000-000000000001".into(),
            cut: at("2026-12-03T09:00:00Z"),
        }
    }

    const HEAD: &str =
        r#""snapshotUid":"9f1c0d2e-0000-4000-8000-000000000001","cut":"2026-12-03T09:00:00Z""#;

    #[test]
    fn a_record_reads_back_as_written() {
        let rto = Rto {
            pvc_bound_ms: 1200,
            restore_ms: 80,
            mysqld_ready_ms: 3000,
        };
        let p = DrillRecord::passed(
            &of(),
            at("2026-12-03T10:00:00Z"),
            rto,
            Some("drill-1".into()),
        );
        let text = p.render();
        assert_eq!(
            text,
            format!(
                r#"{{"result":"passed","at":"2026-12-03T10:00:00Z",{HEAD},"rto":{{"pvcBoundMs":1200,"restoreMs":80,"mysqldReadyMs":3000}},"job":"drill-1"}}"#
            )
        );
        assert_eq!(DrillRecord::parse(&text).unwrap(), p);
        assert_eq!(p.of(), of());
        assert_eq!(rto.total_ms(), 4280);
        let t = at("2026-12-03T10:00:00Z");
        let f = DrillRecord::failed(&of(), t, "table t1\ncorrupt", None, None);
        assert_eq!(f.reason.as_deref(), Some("table t1\\ncorrupt"));
        assert_eq!(DrillRecord::parse(&f.render()).unwrap(), f);
        assert_eq!(
            DrillRecord::failed(&of(), t, "", None, None).reason,
            Some("unknown".into())
        );
        let long = DrillRecord::failed(&of(), t, &"x".repeat(5000), None, None);
        assert_eq!(long.reason.as_ref().unwrap().len(), MAX_REASON_BYTES);
        // The worst case for JSON (every byte escaped, multi-byte characters, the
        // longest UID) still reads back, and a cut never splits a character.
        let longest = DrillOf {
            uid: "\"".repeat(MAX_UID_BYTES),
            ..of()
        };
        for nasty in [
            "\"".repeat(3000),
            "é".repeat(3000),
            "\u{1}".repeat(3000),
            "\\".repeat(3000),
        ] {
            let r = DrillRecord::failed(
                &longest,
                t,
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
            ("".to_owned(), "is not a drill record"),
            ("passed".to_owned(), "is not a drill record"),
            (
                format!(r#"{{"result":"maybe","at":"2026-12-03T10:00:00Z",{HEAD}}}"#),
                "unknown variant",
            ),
            (format!(r#"{{"result":"passed",{HEAD}}}"#), "missing field `at`"),
            (
                format!(r#"{{"result":"passed","at":"yesterday",{HEAD}}}"#),
                "is not a drill record",
            ),
            (
                format!(r#"{{"result":"passed","at":7,{HEAD}}}"#),
                "is not a drill record",
            ),
            (
                format!(r#"{{"result":"failed","at":"2026-12-03T10:00:00Z",{HEAD}}}"#),
                "no reason",
            ),
            (
                format!(r#"{{"result":"passed","at":"2026-12-03T10:00:00Z",{HEAD},"reason":"x"}}"#),
                "has a reason",
            ),
            (
                format!(
                    r#"{{"result":"passed","at":"2026-12-03T10:00:00Z",{HEAD},"rto":{{"restoreMs":-1,"pvcBoundMs":0,"mysqldReadyMs":0}}}}"#
                ),
                "is not a drill record",
            ),
            (
                format!(
                    r#"{{"result":"passed","at":"2026-12-03T10:00:00Z",{HEAD},"rto":{{"restoreMs":1}}}}"#
                ),
                "missing field",
            ),
            // Records of earlier versions named no snapshot: they count as none.
            (
                r#"{"result":"passed","at":"2026-12-03T10:00:00Z"}"#.to_owned(),
                "missing field `snapshotUid`",
            ),
            (
                r#"{"result":"passed","at":"2026-12-03T10:00:00Z","snapshotUid":"u"}"#.to_owned(),
                "missing field `cut`",
            ),
            (
                r#"{"result":"passed","at":"2026-12-03T10:00:00Z","snapshotUid":"","cut":"2026-12-03T09:00:00Z"}"#
                    .to_owned(),
                "UID of 0 bytes",
            ),
            (
                format!(
                    r#"{{"result":"passed","at":"2026-12-03T10:00:00Z","snapshotUid":"{}","cut":"2026-12-03T09:00:00Z"}}"#,
                    "u".repeat(MAX_UID_BYTES + 1)
                ),
                "UID of 129 bytes",
            ),
            (
                format!(
                    r#"{{"result":"passed","at":"2026-12-03T10:00:00Z",{HEAD},"snapshotUid":"other"}}"#
                ),
                "duplicate field",
            ),
        ];
        for (value, want) in bad {
            let err = DrillRecord::parse(&value).unwrap_err().to_string();
            assert!(err.contains(want), "{value}: {err}");
        }
        let huge = format!(
            r#"{{"result":"failed","at":"2026-12-03T10:00:00Z",{HEAD},"reason":"{}"}}"#,
            "x".repeat(MAX_RECORD_BYTES)
        );
        assert!(matches!(
            DrillRecord::parse(&huge),
            Err(DrillRecordError::TooLong { .. })
        ));
        // Exactly at the bound is read.
        let head = format!(r#"{{"result":"failed","at":"2026-12-03T10:00:00Z",{HEAD},"reason":""#);
        let fill = MAX_RECORD_BYTES - head.len() - 2;
        let exact = format!("{head}{}\"}}", "x".repeat(fill));
        assert_eq!(exact.len(), MAX_RECORD_BYTES);
        assert!(DrillRecord::parse(&exact).is_ok());
        assert!(matches!(
            DrillRecord::parse(&format!("{head}{}\"}}", "x".repeat(fill + 1))),
            Err(DrillRecordError::TooLong { .. })
        ));
        // Fields a later version adds are tolerated.
        let later =
            format!(r#"{{"result":"passed","at":"2026-12-03T10:00:00Z",{HEAD},"tables":3}}"#);
        assert!(DrillRecord::parse(&later).is_ok());
    }

    #[test]
    fn results_print_as_in_the_record() {
        for r in [DrillResult::Passed, DrillResult::Failed] {
            assert_eq!(serde_json::to_value(r).unwrap(), r.as_str());
        }
        assert_eq!(DrillResult::Failed.as_str(), "failed");
    }

    /// What a decider keeps (`DrillSeen`) judges as the snapshot's own reader does: only a
    /// counted pass is a pass.
    #[test]
    fn a_seen_record_passes_only_when_it_counts_and_passed() {
        let now = at("2026-12-03T12:00:00Z");
        let seen = |record: Result<DrillRecord, DrillRecordError>, of: Option<DrillOf>| DrillSeen {
            record,
            of,
        };
        let passed = DrillRecord::passed(&of(), at("2026-12-03T10:00:00Z"), Rto::default(), None);
        let failed = DrillRecord::failed(&of(), at("2026-12-03T10:00:00Z"), "x", None, None);
        assert!(seen(Ok(passed.clone()), Some(of())).passed(now));
        assert!(!seen(Ok(failed), Some(of())).passed(now));
        assert!(!seen(Ok(passed.clone()), None).passed(now));
        assert!(!seen(Err(DrillRecordError::FailedWithoutReason), Some(of())).passed(now));
        let other = DrillOf {
            uid: "another".into(),
            ..of()
        };
        assert!(!seen(Ok(passed), Some(other)).passed(now));
    }

    /// Round three: a record dated before its snapshot existed, copied from another
    /// snapshot, or from the future, counts for nothing; only its own snapshot's record,
    /// made after the cut, does.
    #[test]
    fn a_record_counts_only_for_its_own_snapshot_after_its_cut() {
        let now = at("2026-12-03T12:00:00Z");
        let mine = of();
        let pass = |o: &DrillOf, t: &str| DrillRecord::passed(o, at(t), Rto::default(), None);
        let judge =
            |r: &DrillRecord, o: Option<&DrillOf>| standing(Ok(r), o, now).map(|r| r.result);
        let good = pass(&mine, "2026-12-03T10:00:00Z");
        assert_eq!(judge(&good, Some(&mine)), Ok(DrillResult::Passed));
        let failed = DrillRecord::failed(&mine, at("2026-12-03T10:00:00Z"), "x", None, None);
        assert_eq!(judge(&failed, Some(&mine)), Ok(DrillResult::Failed));
        // Copied from another snapshot.
        let other = DrillOf {
            uid: "another-uid".into(),
            ..mine.clone()
        };
        assert!(matches!(
            judge(&pass(&other, "2026-12-03T10:00:00Z"), Some(&mine)),
            Err(Discounted::OtherSnapshot { .. })
        ));
        // The same UID, another cut (the object was rewritten, or the record forged).
        let recut = DrillOf {
            cut: at("2026-12-02T09:00:00Z"),
            ..mine.clone()
        };
        assert!(matches!(
            judge(&pass(&recut, "2026-12-03T10:00:00Z"), Some(&mine)),
            Err(Discounted::OtherCut { .. })
        ));
        // Dated before the cut (the round-three reproduction: 2020), within skew, at
        // skew's edge.
        assert!(matches!(
            judge(&pass(&mine, "2020-01-01T00:00:00Z"), Some(&mine)),
            Err(Discounted::BeforeCut { .. })
        ));
        assert!(judge(&pass(&mine, "2026-12-03T08:55:00Z"), Some(&mine)).is_ok());
        assert!(matches!(
            judge(&pass(&mine, "2026-12-03T08:54:59Z"), Some(&mine)),
            Err(Discounted::BeforeCut { .. })
        ));
        // From the future: within skew of now counts, beyond does not.
        assert!(judge(&pass(&mine, "2026-12-03T12:05:00Z"), Some(&mine)).is_ok());
        assert!(matches!(
            judge(&pass(&mine, "2026-12-03T12:05:01Z"), Some(&mine)),
            Err(Discounted::InTheFuture { .. })
        ));
        assert!(matches!(
            judge(&pass(&mine, "2099-01-01T00:00:00Z"), Some(&mine)),
            Err(Discounted::InTheFuture { .. })
        ));
        // A snapshot with nothing to bind to, and an unreadable record.
        assert_eq!(judge(&good, None), Err(Discounted::SnapshotUnbound));
        let e = DrillRecordError::FailedWithoutReason;
        assert_eq!(
            standing(Err(&e), Some(&mine), now).unwrap_err(),
            Discounted::Unreadable(e)
        );
    }
}
