//! Catch-up coverage (docs/design.md §5.7): can a tablet restored from a snapshot still
//! catch up from its shard's primary? Only while the primary's binlogs still hold every
//! transaction after the snapshot's position. Pure: the caller reads the primary.
//!
//! - MySQL: covered when `@@global.gtid_purged` of the primary is a subset of the
//!   snapshot's executed set (auto-positioning fails with error 1236 otherwise).
//! - MariaDB: per replication domain, the position at the start of the primary's oldest
//!   binlog (`BINLOG_GTID_POS('<oldest>', 4)`) must not be ahead of the snapshot's
//!   `gtid_current_pos` in that domain.
//!
//! A cold snapshot records its exact position; an online one a lower bound, so an online
//! snapshot is judged at its lower bound (it may in truth hold more, never less).

mod primary;
mod set;

use std::time::Duration;

use serde::Serialize;

pub use primary::{PrimaryBinlogs, read_primary, read_primary_at};
pub use set::{GtidSet, Intervals, Text, normalize};

/// How exact the snapshot's recorded position is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Exactness {
    /// Cold: the position the server stopped at.
    Exact,
    /// Online: recorded before the cut; the snapshot holds at least this.
    LowerBound,
}

/// What the primary's binlogs no longer hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Purged {
    /// MySQL: `@@global.gtid_purged`.
    Mysql56(GtidSet),
    /// MariaDB: the position at the start of the oldest binlog.
    MariadbOldestBinlogStart(GtidSet),
}

/// The verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "coverage", rename_all = "kebab-case")]
pub enum Coverage {
    Covered,
    /// The primary purged what a restore would need; `missing` names it.
    NotCovered {
        missing: String,
    },
    /// Nothing can be said; nothing is decided on it.
    Unknown {
        why: String,
    },
}

/// The verdict for a snapshot at `position` (a Vitess position, `<flavor>/<set>`) against
/// what the primary purged. `None` for either input (not recorded, not read) is unknown.
pub fn coverage(position: Option<&str>, exactness: Exactness, purged: Option<&Purged>) -> Coverage {
    let unknown = |why: String| Coverage::Unknown { why };
    let Some(position) = position else {
        return unknown("the snapshot records no position".into());
    };
    let Some(purged) = purged else {
        return unknown("the primary's binlogs were not read".into());
    };
    let snapshot = match GtidSet::parse_position(position, Text::Strict) {
        Ok(s) => s,
        Err(e) => return unknown(format!("the snapshot's position does not read: {e}")),
    };
    // The rule follows the flavor of the sets themselves (a set knows its flavor).
    let (Purged::Mysql56(gone) | Purged::MariadbOldestBinlogStart(gone)) = purged;
    if snapshot.flavor() != gone.flavor() {
        return unknown(format!(
            "the snapshot's position is {}, the primary's binlogs are {}",
            snapshot.flavor().prefix(),
            gone.flavor().prefix()
        ));
    }
    match gone.missing_from(&snapshot) {
        Some(m) if m.is_empty() => Coverage::Covered,
        Some(m) => Coverage::NotCovered {
            missing: match exactness {
                Exactness::Exact => m,
                Exactness::LowerBound => format!("{m} (beyond its lower bound)"),
            },
        },
        None => unknown("the sets are of different flavors".into()),
    }
}

/// How long the newest covered snapshot stays covered: the primary keeps a binlog for
/// `expiry` after it was written, and the first binlog a restore from a snapshot cut at
/// `age` ago needs was written no earlier than the cut. `None` when the primary does not
/// expire binlogs by time (`expiry` zero); zero when it is already due.
pub fn headroom(age: Duration, expiry: Duration) -> Option<Duration> {
    (!expiry.is_zero()).then(|| expiry.saturating_sub(age))
}

#[cfg(test)]
mod tests;
