//! Under semi-sync, a run must leave the primary enough replicas to acknowledge its writes.
//! Vitess's `semi_sync` durability makes the primary wait for an acknowledgement for as long
//! as it takes (its MySQL fragments set `rpl_semi_sync_source_timeout` to 10^18 ms and
//! `rpl_semi_sync_source_wait_no_replica`), and only REPLICA tablets acknowledge. A cut that
//! stops the target's replication (cold) or freezes its file system (online with fsfreeze)
//! takes its acknowledgements away until the cut ends: if too few others are left, every
//! write on the primary blocks meanwhile (docs/design.md §5.1, "Semi-sync").

use serde::Serialize;
use vtsnap_core::config::Mode;
use vtsnap_core::naming::TabletAlias;
use vtsnap_core::shard::Shard;
use vtsnap_core::vtctld::TabletType;

use super::SnapshotPlan;

/// What the primary waits for before a commit returns, as read from its variables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "semiSync", rename_all = "kebab-case")]
pub enum PrimaryAcks {
    /// Semi-sync is off, or its plugin is not loaded.
    NotRequired,
    /// `rpl_semi_sync_source_enabled` (MariaDB: `_master_`) is on and waits for this many
    /// replicas (`rpl_semi_sync_source_wait_for_replica_count`; MariaDB always 1).
    Required { replicas: u32 },
}

/// The run would block the primary's writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error(
    "taking {alias} would leave the primary {left} of the {required} semi-sync \
     acknowledgement(s) it waits for ({}), so its writes would block until the cut ends; \
     add a replica, repair the stopped ones, or snapshot an rdonly tablet",
    others(.acking)
)]
pub struct AcksTooFew {
    pub alias: String,
    pub required: u32,
    pub left: u32,
    /// The other REPLICA tablets that replicate, and so acknowledge.
    pub acking: Vec<String>,
}

fn others(acking: &[String]) -> String {
    if acking.is_empty() {
        "no other replica replicates".to_owned()
    } else {
        format!("only {} replicate", acking.join(", "))
    }
}

/// Whether the plan takes the target's acknowledgements away during the cut.
pub fn stops_acks(plan: &SnapshotPlan) -> bool {
    plan.target.original_type == TabletType::Replica && (plan.mode == Mode::Cold || plan.fsfreeze)
}

/// Checks that the primary keeps enough acknowledging replicas while `plan` runs.
pub fn check(shard: &Shard, plan: &SnapshotPlan, acks: PrimaryAcks) -> Result<(), AcksTooFew> {
    let PrimaryAcks::Required { replicas: required } = acks else {
        return Ok(());
    };
    if !stops_acks(plan) {
        return Ok(());
    }
    let target = &plan.target.target.tablet_alias;
    let acking: Vec<String> = shard
        .tablets
        .iter()
        .filter(|t| t.vt_type == Some(TabletType::Replica))
        .filter(|t| &t.alias != target && Some(&t.alias) != shard.primary.as_ref())
        .filter(|t| {
            t.replication
                .as_ref()
                .is_some_and(|r| r.io_running && r.sql_running)
        })
        .map(|t| t.alias.to_string())
        .collect();
    let left = u32::try_from(acking.len()).unwrap_or(u32::MAX);
    if left >= required {
        return Ok(());
    }
    Err(AcksTooFew {
        alias: alias_of(target),
        required,
        left,
        acking,
    })
}

fn alias_of(a: &TabletAlias) -> String {
    a.to_string()
}

/// Reads [`PrimaryAcks`] from the values of
/// `SELECT @@global.rpl_semi_sync_source_enabled, @@global.rpl_semi_sync_source_wait_for_replica_count`
/// (MySQL) or `SELECT @@global.rpl_semi_sync_master_enabled` (MariaDB: no count, always 1).
/// `None` when a value is not one a server gives.
pub fn parse(enabled: Option<&str>, count: Option<&str>) -> Option<PrimaryAcks> {
    let on = match enabled?.trim().to_ascii_uppercase().as_str() {
        "1" | "ON" => true,
        "0" | "OFF" => false,
        _ => return None,
    };
    if !on {
        return Some(PrimaryAcks::NotRequired);
    }
    let replicas = match count {
        None => 1,
        Some(c) => c.trim().parse::<u32>().ok().filter(|n| *n >= 1)?,
    };
    Some(PrimaryAcks::Required { replicas })
}

/// The queries, MySQL's first; a server that lacks a query's variables answers
/// "Unknown system variable" (errno 1193): its plugin is not loaded or it is the other
/// flavor.
pub const QUERIES: [&str; 2] = [
    "SELECT @@global.rpl_semi_sync_source_enabled, @@global.rpl_semi_sync_source_wait_for_replica_count",
    "SELECT @@global.rpl_semi_sync_master_enabled",
];

/// Whether a server's error says that a variable does not exist.
pub fn is_unknown_variable(message: &str) -> bool {
    message.contains("Unknown system variable") || message.contains("errno 1193")
}

#[cfg(test)]
mod tests;
