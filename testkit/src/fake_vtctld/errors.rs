//! Real vtctld's errors (Vitess 24 on MySQL 9.7), as its gRPC clients see them: code
//! Unknown (Vitess wraps the cause in words, not in a code) and the same words, so that
//! code matching on them is tested against what it will meet. The contract suite checks
//! the stable words of each against the real vtctld.

use vtsnap_core::naming::TabletAlias;
use vtsnap_core::vtctld::messages::topodata::{self, TabletType};

/// What mysqld's client says when mysqld's socket is gone (errno 2002).
pub const MYSQLD_DIAL: &str = "net.Dial(/vt/socket/mysql.sock) to local server failed: \
     dial unix /vt/socket/mysql.sock: connect: no such file or directory (errno 2002) \
     (sqlstate HY000)";

/// Which read of a missing shard fails first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardLookup {
    /// GetShard: the shard record.
    Record,
    /// GetTablets, ShardReplicationPositions: `GetTabletMapForShard`.
    TabletMap,
}

/// A shard (or its keyspace) that does not exist.
pub fn no_shard(lookup: ShardLookup, keyspace: &str, shard: &str) -> tonic::Status {
    let missing =
        format!("node doesn't exist: /vitess/global/keyspaces/{keyspace}/shards/{shard}/Shard");
    tonic::Status::unknown(match lookup {
        ShardLookup::Record => missing,
        ShardLookup::TabletMap => {
            format!("GetTabletMapForShard({keyspace}, {shard}) failed: {missing}")
        }
    })
}

/// A tablet that does not exist (its record is in the cell's topology).
pub fn no_tablet(alias: &Option<topodata::TabletAlias>) -> tonic::Status {
    let (cell, a) = match alias {
        Some(a) => (a.cell.clone(), TabletAlias::from(a).to_string()),
        None => (String::new(), String::new()),
    };
    tonic::Status::unknown(format!(
        "node doesn't exist: /vitess/{cell}/tablets/{a}/Tablet"
    ))
}

/// The tablet manager RPC `rpc` (`FullStatus`, `StopReplication`, `ChangeType`, …) on a
/// tablet whose mysqld is down.
pub fn mysqld_down(rpc: &str, alias: &str) -> tonic::Status {
    tonic::Status::unknown(mysqld_down_words(rpc, alias))
}

fn mysqld_down_words(rpc: &str, alias: &str) -> String {
    format!("rpc error: code = Unavailable desc = TabletManager.{rpc} on {alias}: {MYSQLD_DIAL}")
}

/// ExecuteFetchAsDBA on a tablet whose mysqld is down (its cause is wrapped once more).
pub fn fetch_mysqld_down(alias: &str) -> tonic::Status {
    fetch_failed(alias, MYSQLD_DIAL)
}

/// ExecuteFetchAsDBA that mysqld refused with `cause` (`… (errno N) (sqlstate S)`).
pub fn fetch_failed(alias: &str, cause: &str) -> tonic::Status {
    tonic::Status::unknown(format!(
        "rpc error: code = Unknown desc = TabletManager.ExecuteFetchAsDba on {alias}: \
         rpc error: code = Unknown desc = {cause}"
    ))
}

/// mysqld's answer to `SELECT @@var` for a variable it does not have.
pub fn unknown_variable(var: &str, query: &str) -> String {
    format!("Unknown system variable '{var}' (errno 1193) (sqlstate HY000) during query: {query}")
}

/// ChangeTabletType from or to a type it does not allow (anything to or from PRIMARY).
pub fn not_allowed(
    alias: &Option<topodata::TabletAlias>,
    from: TabletType,
    to: TabletType,
) -> tonic::Status {
    let (cell, uid) = alias
        .as_ref()
        .map(|a| (a.cell.clone(), a.uid))
        .unwrap_or_default();
    tonic::Status::unknown(format!(
        "tablet cell:\"{cell}\" uid:{uid} type change {} -> {} is not an allowed transition \
         for ChangeTabletType",
        from.name().to_uppercase(),
        to.name().to_uppercase()
    ))
}

/// ChangeTabletType and StartReplication in a shard without a primary.
pub fn no_primary(keyspace: &str, shard: &str) -> tonic::Status {
    tonic::Status::failed_precondition(format!("no primary tablet for shard {keyspace}/{shard}"))
}

/// StartReplication on a tablet that has no replication source (the primary).
pub fn not_a_replica(alias: &str) -> tonic::Status {
    tonic::Status::unknown(format!(
        "rpc error: code = Unknown desc = TabletManager.StartReplication on {alias}: \
         ExecuteFetch(START REPLICA) failed: The server is not configured as replica; fix in \
         config file or with CHANGE REPLICATION SOURCE TO (errno 1200) (sqlstate HY000) during \
         query: START REPLICA"
    ))
}

/// Why ShardReplicationPositions fails whole: one tablet's read of its position.
#[derive(Debug, Clone)]
pub enum PositionFailure {
    /// A replica whose mysqld is down.
    ReplicaDown(String),
    /// A replica type tablet with no replication configured (from Vitess's source:
    /// `mysql.ErrNotReplica`, which ReplicationStatus does not forgive).
    NotReplicating(String),
    /// The primary whose mysqld is down.
    PrimaryDown(String),
}

/// ShardReplicationPositions when some tablets' reads failed: every cause, joined as
/// Vitess's error recorder joins them (its order follows goroutines; here, aliases).
pub fn positions_failed(failures: &[PositionFailure]) -> tonic::Status {
    let words: Vec<String> = failures
        .iter()
        .map(|f| match f {
            PositionFailure::ReplicaDown(a) => format!(
                "ReplicationStatus({a}) failed: {}",
                mysqld_down_words("ReplicationStatus", a)
            ),
            PositionFailure::NotReplicating(a) => format!(
                "ReplicationStatus({a}) failed: rpc error: code = Unknown desc = \
                 TabletManager.ReplicationStatus on {a}: no replication status (errno 100) \
                 (sqlstate HY000)"
            ),
            PositionFailure::PrimaryDown(a) => format!(
                "PrimaryPosition({a}) failed: Code: UNAVAILABLE\n{}\n",
                mysqld_down_words("PrimaryPosition", a)
            ),
        })
        .collect();
    tonic::Status::unknown(words.join("; "))
}
