//! Catch-up coverage of a shard's snapshots (docs/design.md §5.7): which ready snapshots a
//! new tablet could still catch up from, judged against what the shard's primary purged
//! ([`vtsnap_core::coverage`]). Known only when every ready snapshot gets a verdict; an
//! unknown (the primary not read, a position that does not read) changes nothing.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use vtsnap_core::coverage::{Coverage, coverage, headroom};
use vtsnap_core::reconcile::Read;
use vtsnap_core::shard::ShardRef;

use super::failed_restores::{MarkUnusable, UnusableReason};
use crate::observe::{Inventory, PrimaryBinlogs, Snap};

/// What coverage says of one shard, as the plan prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShardCoverage {
    pub namespace: String,
    pub cluster: String,
    pub keyspace: String,
    pub shard: String,
    #[serde(flatten)]
    pub state: CoverageState,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "coverage", rename_all = "kebab-case")]
pub enum CoverageState {
    Known {
        /// The newest ready snapshot a new tablet can catch up from and would be given
        /// (no unusable mark; a passed drill under `restore.requireDrill`).
        newest_covered: Option<String>,
        /// How long `newest_covered` stays covered (the primary's binlog expiry minus its
        /// age); `None` when the primary does not expire binlogs by time.
        headroom_seconds: Option<u64>,
        /// Ready snapshots the primary purged past.
        not_covered: Vec<String>,
        /// Set when the headroom is shorter than the shard's snapshot interval (the gap
        /// between its two newest ready snapshots): the newest covered snapshot may stop
        /// being covered before the next one exists.
        warning: Option<String>,
    },
    Unknown {
        why: String,
    },
}

/// The verdicts for one shard's ready snapshots: `Some(covered)` by name when every one
/// has a verdict, else `None` (and the plan says why).
pub(super) struct Judged {
    pub covered: Option<BTreeMap<String, bool>>,
    pub report: ShardCoverage,
    pub marks: Vec<MarkUnusable>,
}

/// Judges `ready` (one shard's ready snapshots, newest first); the newest covered one it
/// reports is the newest that is also `usable` (a restore would be given it).
pub(super) fn judge(
    inv: &Inventory,
    shard: &ShardRef,
    ready: &[&Snap],
    now: Timestamp,
    usable: &dyn Fn(&Snap) -> bool,
) -> Judged {
    let report = |state| ShardCoverage {
        namespace: shard.namespace.clone(),
        cluster: shard.cluster.clone(),
        keyspace: shard.keyspace.clone(),
        shard: shard.shard.to_string(),
        state,
    };
    let unknown = |why: String| Judged {
        covered: None,
        report: report(CoverageState::Unknown { why }),
        marks: Vec::new(),
    };
    let binlogs: &PrimaryBinlogs = match inv.binlogs.get(shard) {
        Some(Read::Present(b)) => b,
        Some(Read::Unreadable(why)) => return unknown(format!("the primary was not read: {why}")),
        Some(Read::Absent) | None => return unknown("the primary was not read".into()),
    };
    let mut covered = BTreeMap::new();
    let mut marks = Vec::new();
    let mut not_covered = Vec::new();
    for s in ready {
        match coverage(s.position.as_deref(), s.exactness, Some(&binlogs.purged)) {
            Coverage::Covered => {
                covered.insert(s.name.clone(), true);
            }
            Coverage::NotCovered { missing } => {
                covered.insert(s.name.clone(), false);
                not_covered.push(s.name.clone());
                if !s.unusable {
                    marks.push(MarkUnusable::new(
                        &s.namespace,
                        &s.name,
                        UnusableReason::NotCovered,
                        &format!(
                            "the shard's primary purged binlogs a restore from it needs: {missing}"
                        ),
                    ));
                }
            }
            Coverage::Unknown { why } => return unknown(format!("{}: {why}", s.name)),
        }
    }
    let newest = ready
        .iter()
        .find(|s| covered.get(&s.name) == Some(&true) && usable(s));
    let headroom_seconds = newest.and_then(|s| {
        let age = u64::try_from(now.as_second() - s.created.as_second()).unwrap_or(0);
        headroom(Duration::from_secs(age), binlogs.expiry?).map(|h| h.as_secs())
    });
    // The interval the shard is snapshotted at, as observed: its two newest ready ones.
    let interval = match ready {
        [a, b, ..] => u64::try_from(a.created.as_second() - b.created.as_second()).ok(),
        _ => None,
    };
    let warning = match (newest, headroom_seconds, interval) {
        (Some(n), Some(h), Some(i)) if h < i => Some(format!(
            "snapshot {} stays covered for {h}s, less than the {i}s between the shard's last two snapshots: the next one may come too late",
            n.name
        )),
        // (`ready` is never empty: a shard without a ready snapshot is not judged)
        (None, _, _) => Some(
            "no usable ready snapshot can be caught up from: the primary purged past every one, or the rest are unusable".to_owned(),
        ),
        _ => None,
    };
    Judged {
        covered: Some(covered),
        report: report(CoverageState::Known {
            newest_covered: newest.map(|s| s.name.clone()),
            headroom_seconds,
            not_covered,
            warning,
        }),
        marks,
    }
}
