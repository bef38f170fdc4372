//! The recoverable window a shard's newest snapshot carries (`vtsnap.io/pitr-window`,
//! docs/pitr.md §3): what the archive job found the last time it read the archive, so
//! `kubectl vtsnap status` can show it without reading the backup storage.
//!
//! The value is a small JSON object, written by `vtsnap-pitr archive` after each run that
//! reached vtctld's storage. It is bound to the snapshot it was written on (its UID and
//! its cut, as a drill record is) and judged at the reader's `now`: a record copied from
//! another snapshot, or checked in the future, counts for nothing. Nothing deletes or
//! keeps a snapshot because of it: it is shown, never acted on.

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::chain::Span;
use crate::snapshot::{CLOCK_SKEW, DrillOf, MAX_UID_BYTES};

/// The annotation on the shard's newest base snapshot.
pub const ANN_PITR_WINDOW: &str = "vtsnap.io/pitr-window";

/// A record longer than this is not one vtsnap wrote.
pub const MAX_RECORD_BYTES: usize = 4096;

/// The most spans written: the newest ones (a window broken more often than this is
/// shown by its newest parts).
pub const MAX_SPANS: usize = 16;

/// The window as the archive job last read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WindowRecord {
    /// The times a recovery can reach, oldest first, disjoint.
    pub spans: Vec<Span>,
    /// When the job read the archive.
    pub checked: Timestamp,
    /// The snapshot it was written on: its UID and its cut (`status.creationTime`).
    pub snapshot_uid: String,
    pub cut: Timestamp,
}

/// Why a `vtsnap.io/pitr-window` value is not a record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowRecordError {
    #[error("is {len} bytes, more than {MAX_RECORD_BYTES}")]
    TooLong { len: usize },
    #[error("is not a window record: {detail}")]
    Malformed { detail: String },
    #[error("names a snapshot UID of {len} bytes (empty, or more than {MAX_UID_BYTES})")]
    BadUid { len: usize },
    #[error("has {count} spans, more than {MAX_SPANS}")]
    TooManySpans { count: usize },
    #[error("has a span that ends ({to}) before it starts ({from})")]
    Backwards { from: Timestamp, to: Timestamp },
    #[error("has spans out of order or overlapping (one ends {to}, the next starts {next})")]
    Unordered { to: Timestamp, next: Timestamp },
}

/// Why a snapshot's window record counts for nothing at the reader's `now`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowDiscounted {
    #[error("its window record {0}")]
    Unreadable(WindowRecordError),
    #[error("the snapshot has no UID or no cut to bind a window record to")]
    SnapshotUnbound,
    #[error("its window record was written on another snapshot")]
    OtherSnapshot,
    #[error(
        "its window record was written for a cut at {recorded}, but the snapshot was cut at {cut}"
    )]
    OtherCut { recorded: Timestamp, cut: Timestamp },
    #[error("its window record ends at {to}, after it was checked at {checked}")]
    EndsAfterCheck { to: Timestamp, checked: Timestamp },
    #[error("its window record was checked at {checked}, in the future (now is {now})")]
    InTheFuture { checked: Timestamp, now: Timestamp },
}

impl WindowRecord {
    /// The record of `spans` (the newest [`MAX_SPANS`]) read at `checked`, for the
    /// snapshot `of`.
    pub fn new(spans: &[Span], checked: Timestamp, of: &DrillOf) -> Self {
        let keep = spans.len().saturating_sub(MAX_SPANS);
        Self {
            spans: spans[keep..].to_vec(),
            checked,
            snapshot_uid: of.uid.clone(),
            cut: of.cut,
        }
    }

    /// Reads the annotation's value: bounded, typed, spans ordered and disjoint.
    pub fn parse(value: &str) -> Result<Self, WindowRecordError> {
        if value.len() > MAX_RECORD_BYTES {
            return Err(WindowRecordError::TooLong { len: value.len() });
        }
        let r: Self = serde_json::from_str(value).map_err(|e| WindowRecordError::Malformed {
            detail: e.to_string(),
        })?;
        if r.snapshot_uid.is_empty() || r.snapshot_uid.len() > MAX_UID_BYTES {
            return Err(WindowRecordError::BadUid {
                len: r.snapshot_uid.len(),
            });
        }
        if r.spans.len() > MAX_SPANS {
            return Err(WindowRecordError::TooManySpans {
                count: r.spans.len(),
            });
        }
        if let Some(s) = r.spans.iter().find(|s| s.to < s.from) {
            return Err(WindowRecordError::Backwards {
                from: s.from,
                to: s.to,
            });
        }
        if let Some(w) = r.spans.windows(2).find(|w| w[1].from <= w[0].to) {
            return Err(WindowRecordError::Unordered {
                to: w[0].to,
                next: w[1].from,
            });
        }
        Ok(r)
    }

    /// The annotation's value.
    pub fn render(&self) -> String {
        // Timestamps, a string and a list of them always serialize.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The newest time a recovery can reach.
    pub fn end(&self) -> Option<Timestamp> {
        self.spans.last().map(|s| s.to)
    }
}

/// Whether a record (as read) counts for the snapshot `of` at `now`: written on it (UID
/// and cut), ending no later than it was checked, and not checked in the future, each
/// within [`CLOCK_SKEW`].
pub fn standing<'r>(
    record: Result<&'r WindowRecord, &WindowRecordError>,
    of: Option<&DrillOf>,
    now: Timestamp,
) -> Result<&'r WindowRecord, WindowDiscounted> {
    let r = record.map_err(|e| WindowDiscounted::Unreadable(e.clone()))?;
    let of = of.ok_or(WindowDiscounted::SnapshotUnbound)?;
    if r.snapshot_uid != of.uid {
        return Err(WindowDiscounted::OtherSnapshot);
    }
    if r.cut != of.cut {
        return Err(WindowDiscounted::OtherCut {
            recorded: r.cut,
            cut: of.cut,
        });
    }
    if let Some(to) = r.end()
        && to > r.checked.checked_add(CLOCK_SKEW).unwrap_or(Timestamp::MAX)
    {
        return Err(WindowDiscounted::EndsAfterCheck {
            to,
            checked: r.checked,
        });
    }
    if r.checked > now.checked_add(CLOCK_SKEW).unwrap_or(Timestamp::MAX) {
        return Err(WindowDiscounted::InTheFuture {
            checked: r.checked,
            now,
        });
    }
    Ok(r)
}

#[cfg(test)]
#[path = "record_tests.rs"]
mod tests;
