//! The next increment of a shard's binlog archive (docs/pitr.md §6): from the furthest
//! point the archive carries the newest snapshot to, on a replica. Pure.
//!
//! From the newest snapshot, not from `auto`: Vitess's `auto` starts from the newest
//! backup in its storage, which is none before the first increment, and may be one a
//! snapshot base cannot chain to. A lagging replica that does not yet hold that point
//! fails the call; the next run tries again. After a reparent the shard's tablets are read
//! again, and positions name every source, so the archive goes on.

use serde::Serialize;
use vtsnap_core::naming::TabletAlias;
use vtsnap_core::pitr::chain::{self, Base};
use vtsnap_core::pitr::manifest::Increment;
use vtsnap_core::vtctld::TabletType;

/// A tablet of the shard as vtctld lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tablet {
    pub alias: TabletAlias,
    pub kind: TabletType,
}

/// Whether the primary may take the increment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnPrimary {
    Never,
    /// Only when no replica can (a shard of one tablet).
    WhenNoReplica,
}

/// The increment to take.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Take {
    #[serde(skip)]
    pub alias: TabletAlias,
    pub tablet: String,
    /// `MySQL56/<set>`: Vitess's `incremental_from_pos`.
    pub from: String,
    /// The snapshot the archive carries forward.
    pub base: String,
    /// Increments of the archive that already follow it.
    pub after_increments: usize,
    pub on_primary: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoTake {
    #[error("the shard has no snapshot to start its archive from")]
    NoBase,
    #[error("no replica to take the increment on (tablets: {0}); the primary is not used")]
    NoReplica(String),
}

/// The order replicas are asked in: serving replicas, then read-only ones, then spares
/// (the types Vitess's `BackupShard` picks from); never a drained tablet (it is being
/// snapshotted) or one in a backup or restore.
fn rank(kind: TabletType) -> Option<u8> {
    match kind {
        TabletType::Replica => Some(0),
        TabletType::Rdonly => Some(1),
        TabletType::Spare => Some(2),
        _ => None,
    }
}

pub fn next_increment(
    bases: &[Base],
    archive: &[Increment],
    tablets: &[Tablet],
    on_primary: OnPrimary,
) -> Result<Take, NoTake> {
    let base = bases
        .iter()
        .max_by(|a, b| a.cut.cmp(&b.cut).then(a.name.cmp(&b.name)))
        .ok_or(NoTake::NoBase)?;
    let reach = chain::reach(base, archive);
    let replica = tablets
        .iter()
        .filter_map(|t| rank(t.kind).map(|r| (r, t)))
        .min_by(|(ra, a), (rb, b)| {
            ra.cmp(rb)
                .then(a.alias.to_string().cmp(&b.alias.to_string()))
        })
        .map(|(_, t)| t);
    let primary = tablets.iter().find(|t| t.kind == TabletType::Primary);
    let (tablet, on_primary) = match (replica, on_primary, primary) {
        (Some(t), _, _) => (t, false),
        (None, OnPrimary::WhenNoReplica, Some(p)) => (p, true),
        _ => {
            let seen: Vec<String> = tablets
                .iter()
                .map(|t| format!("{} {}", t.alias, t.kind.name()))
                .collect();
            return Err(NoTake::NoReplica(if seen.is_empty() {
                "none".into()
            } else {
                seen.join(", ")
            }));
        }
    };
    Ok(Take {
        alias: tablet.alias.clone(),
        tablet: tablet.alias.to_string(),
        from: format!("MySQL56/{}", reach.holds),
        base: base.name.clone(),
        after_increments: reach.increments.len(),
        on_primary,
    })
}

#[cfg(test)]
#[path = "archive_tests.rs"]
mod tests;
