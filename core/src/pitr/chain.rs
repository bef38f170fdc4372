//! Which archive increments carry a snapshot forward, and how far (docs/pitr.md §3). Pure:
//! the caller reads the snapshots and the archive's MANIFESTs.
//!
//! An increment follows a server that holds `P` when `P` holds its `from` (nothing before
//! it is missing), it adds something (`to` ⊄ `P`), and its history is `P`'s (`P` ⊆ `to` ∪
//! `purged`): the rule Vitess chains its own incrementals by
//! (`go/vt/mysqlctl/binlogs_gtid.go`, `IsValidIncrementalBakcup`). What an increment holds
//! that `P` has too is skipped by the server on replay (GTID auto-skip), so an increment
//! may start before `P`.
//!
//! Times are commit times at whole seconds. A point in time `T` is every transaction
//! committed before `T` (Vitess's `--restore-to-timestamp`: "up to, and excluding"); a
//! point at a GTID set is every transaction in it (`--restore-to-pos`, inclusive). A
//! snapshot was cut at `cut`, so all it holds committed before then; what a lagging
//! replica had not applied by then comes from the archive. The archive reaches `T` once an
//! increment's last commit is at or after `T`: every earlier commit precedes it in the
//! binlog.

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use super::manifest::Increment;
use crate::coverage::{Exactness, GtidSet};

/// A snapshot a recovery may start from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Base {
    pub name: String,
    pub gtid: GtidSet,
    pub exactness: Exactness,
    pub cut: Timestamp,
}

/// The point a recovery stops at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Every transaction committed before this time.
    Before(Timestamp),
    /// Every transaction of this set.
    Through(GtidSet),
}

/// Where an archive stops carrying a base: the increment that would come next and the
/// transactions between (none when its history is another one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gap {
    /// The last increment followed (or the base).
    pub after: String,
    pub next: String,
    /// GTIDs neither the base, the increments followed nor `next` hold.
    pub missing: String,
}

/// How far a base reaches through the archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reach<'a> {
    pub increments: Vec<&'a Increment>,
    /// What a server holds after all of them.
    pub holds: GtidSet,
    /// The last commit they hold; `None` without increments.
    pub last_commit: Option<Timestamp>,
    /// Where the archive stops carrying it while later increments exist.
    pub gap: Option<Gap>,
}

/// Whether `inc` follows a server that holds `held`.
fn follows(inc: &Increment, held: &GtidSet) -> bool {
    inc.from.is_subset_of(held)
        && !inc.to.is_subset_of(held)
        && inc
            .to
            .union(&inc.purged)
            .is_some_and(|history| held.is_subset_of(&history))
}

/// How far `base` reaches through `archive` (any order; followed in the order they began).
pub fn reach<'a>(base: &Base, archive: &'a [Increment]) -> Reach<'a> {
    let mut ordered: Vec<&Increment> = archive.iter().collect();
    ordered.sort_by(|a, b| a.started.cmp(&b.started).then(a.name.cmp(&b.name)));
    let mut held = base.gtid.clone();
    let mut increments: Vec<&Increment> = Vec::new();
    // Each increment is followed at most once (it must add to what is held), so the walk
    // ends within as many steps as there are increments, whatever the archive holds.
    for _ in 0..ordered.len() {
        let Some(next) = ordered.iter().find(|i| follows(i, &held)) else {
            break;
        };
        held = held.union(&next.to).unwrap_or_else(|| next.to.clone());
        increments.push(next);
    }
    let gap = ordered
        .iter()
        .find(|i| !i.to.is_subset_of(&held))
        .map(|next| Gap {
            after: increments
                .last()
                .map_or_else(|| base.name.clone(), |i| i.name.clone()),
            next: next.name.clone(),
            missing: next.from.missing_from(&held).unwrap_or_default(),
        });
    Reach {
        last_commit: increments.iter().map(|i| i.last_commit).max(),
        increments,
        holds: held,
        gap,
    }
}

/// A recovery: the base, the increments to replay in order, and where to stop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub base: String,
    pub increments: Vec<String>,
    /// What the replay must check the restored base holds before it starts: an online
    /// snapshot recorded a lower bound, and a GTID target must hold all of the base.
    pub base_check: BaseCheck,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BaseCheck {
    /// What the base holds is recorded exactly, or the target is a time.
    Recorded,
    /// Check after restoring that its `gtid_executed` is within the target.
    WithinTargetAfterRestore,
}

/// Why a base cannot recover to the target.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("it was cut at {cut}, after the target {target}")]
    CutAfterTarget { cut: Timestamp, target: Timestamp },
    #[error("it holds transactions past the target: {beyond}")]
    HoldsBeyondTarget { beyond: String },
    #[error("the archive carries it from {from} to {to}; the target {target} is outside")]
    OutsideWindow {
        from: Timestamp,
        to: Timestamp,
        target: Timestamp,
    },
    #[error("the archive has no increment that follows it")]
    NoIncrement,
    #[error("the archive stops at {} before the target: {} would follow and {} are missing", .gap.after, .gap.next, display_missing(&.gap.missing))]
    Gap { gap: Gap },
    #[error("the archive ends before the target: it lacks {missing}")]
    BeyondArchive { missing: String },
}

fn display_missing(m: &str) -> &str {
    if m.is_empty() {
        "no GTIDs (its history is another one)"
    } else {
        m
    }
}

fn beyond_archive(reach: &Reach<'_>, missing: String) -> Refusal {
    match &reach.gap {
        Some(gap) => Refusal::Gap { gap: gap.clone() },
        None => Refusal::BeyondArchive { missing },
    }
}

/// How `base` recovers to `target` through `archive`, or why it cannot.
pub fn plan(base: &Base, archive: &[Increment], target: &Target) -> Result<Plan, Refusal> {
    let reach = reach(base, archive);
    let (increments, base_check) = match target {
        Target::Before(t) => {
            if base.cut > *t {
                return Err(Refusal::CutAfterTarget {
                    cut: base.cut,
                    target: *t,
                });
            }
            let Some(end) = reach.last_commit else {
                return Err(match &reach.gap {
                    Some(gap) => Refusal::Gap { gap: gap.clone() },
                    None => Refusal::NoIncrement,
                });
            };
            if *t > end {
                return Err(match &reach.gap {
                    Some(gap) => Refusal::Gap { gap: gap.clone() },
                    None => Refusal::OutsideWindow {
                        from: base.cut,
                        to: end,
                        target: *t,
                    },
                });
            }
            // Up to the first increment whose last commit reaches the target.
            let upto = reach
                .increments
                .iter()
                .position(|i| i.last_commit >= *t)
                .map_or(reach.increments.len(), |p| p + 1);
            (&reach.increments[..upto], BaseCheck::Recorded)
        }
        Target::Through(g) => {
            if let Some(beyond) = base.gtid.missing_from(g).filter(|m| !m.is_empty()) {
                return Err(Refusal::HoldsBeyondTarget { beyond });
            }
            if base.gtid.flavor() != g.flavor() {
                return Err(Refusal::HoldsBeyondTarget {
                    beyond: base.gtid.to_string(),
                });
            }
            // Up to the first increment after which the target is held.
            let mut held = base.gtid.clone();
            let mut upto = None;
            if g.is_subset_of(&held) {
                upto = Some(0);
            }
            for (n, inc) in reach.increments.iter().enumerate() {
                if upto.is_some() {
                    break;
                }
                held = held.union(&inc.to).unwrap_or_else(|| inc.to.clone());
                if g.is_subset_of(&held) {
                    upto = Some(n + 1);
                }
            }
            let Some(upto) = upto else {
                let missing = g.missing_from(&reach.holds).unwrap_or_default();
                return Err(beyond_archive(&reach, missing));
            };
            let check = match base.exactness {
                Exactness::Exact => BaseCheck::Recorded,
                Exactness::LowerBound => BaseCheck::WithinTargetAfterRestore,
            };
            (&reach.increments[..upto], check)
        }
    };
    Ok(Plan {
        base: base.name.clone(),
        increments: increments.iter().map(|i| i.name.clone()).collect(),
        base_check,
    })
}

/// The base a recovery starts from: `forced` by name, or the newest (by cut) that can
/// reach the target. Refused with each base's reason when none can.
pub fn choose(
    bases: &[Base],
    archive: &[Increment],
    target: &Target,
    forced: Option<&str>,
) -> Result<Plan, Vec<(String, Refusal)>> {
    let mut ordered: Vec<&Base> = bases
        .iter()
        .filter(|b| forced.is_none_or(|f| f == b.name))
        .collect();
    ordered.sort_by(|a, b| b.cut.cmp(&a.cut).then(b.name.cmp(&a.name)));
    let mut refused = Vec::new();
    for b in ordered {
        match plan(b, archive, target) {
            Ok(p) => return Ok(p),
            Err(r) => refused.push((b.name.clone(), r)),
        }
    }
    Err(refused)
}

/// The times a shard can be recovered to: from each base's cut to the last commit the
/// archive carries it to, overlapping spans merged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Span {
    pub from: Timestamp,
    pub to: Timestamp,
}

pub fn window(bases: &[Base], archive: &[Increment]) -> Vec<Span> {
    let mut spans: Vec<Span> = bases
        .iter()
        .filter_map(|b| {
            let to = reach(b, archive).last_commit?;
            (to >= b.cut).then_some(Span { from: b.cut, to })
        })
        .collect();
    spans.sort_by_key(|s| s.from);
    let mut merged: Vec<Span> = Vec::new();
    for s in spans {
        match merged.last_mut() {
            Some(last) if s.from <= last.to => last.to = last.to.max(s.to),
            _ => merged.push(s),
        }
    }
    merged
}

#[cfg(test)]
#[path = "chain_tests.rs"]
mod tests;
