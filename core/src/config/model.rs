//! The config file as written (docs/design.md §4.1): strict, every field optional at every level.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::duration::GoDuration;

#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub clusters: Vec<ClusterConfig>,
}

/// The six policy blocks; the same at cluster, keyspace and shard level.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyBlocks {
    pub snapshot: Option<SnapshotPolicy>,
    pub retention: Option<RetentionPolicy>,
    pub deletion_policy: Option<DeletionPolicy>,
    pub restore: Option<RestorePolicy>,
    pub vtbackup: Option<VtbackupPolicy>,
    pub drill: Option<DrillPolicy>,
    pub pitr: Option<PitrPolicy>,
}

// serde cannot combine `flatten` with `deny_unknown_fields`, so each level names the
// policy blocks itself and hands them out through `policy()`.
macro_rules! with_policy {
    ($(#[$m:meta])* pub struct $name:ident { $($(#[$fm:meta])* pub $f:ident : $t:ty,)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        pub struct $name {
            $($(#[$fm])* pub $f: $t,)*
            pub snapshot: Option<SnapshotPolicy>,
            pub retention: Option<RetentionPolicy>,
            pub deletion_policy: Option<DeletionPolicy>,
            pub restore: Option<RestorePolicy>,
            pub vtbackup: Option<VtbackupPolicy>,
            pub drill: Option<DrillPolicy>,
            pub pitr: Option<PitrPolicy>,
        }

        impl $name {
            pub fn policy(&self) -> PolicyBlocks {
                PolicyBlocks {
                    snapshot: self.snapshot.clone(),
                    retention: self.retention.clone(),
                    deletion_policy: self.deletion_policy.clone(),
                    restore: self.restore.clone(),
                    vtbackup: self.vtbackup.clone(),
                    drill: self.drill.clone(),
                    pitr: self.pitr.clone(),
                }
            }

            /// This level with its policy blocks replaced (for a config read piece by piece).
            pub(super) fn with_policy(mut self, b: PolicyBlocks) -> Self {
                self.snapshot = b.snapshot;
                self.retention = b.retention;
                self.deletion_policy = b.deletion_policy;
                self.restore = b.restore;
                self.vtbackup = b.vtbackup;
                self.drill = b.drill;
                self.pitr = b.pitr;
                self
            }
        }
    };
}

with_policy! {
    /// One VitessCluster.
    pub struct ClusterConfig {
        pub name: String,
        pub namespace: String,
        /// `auto` (find the vtctld Service by labels) or `host:port`.
        #[serde(default = "auto")]
        pub vtctld: String,
        #[serde(default)]
        pub keyspaces: BTreeMap<String, KeyspaceConfig>,
    }
}

fn auto() -> String {
    "auto".to_owned()
}

with_policy! {
    pub struct KeyspaceConfig {
        #[serde(default)]
        pub shards: BTreeMap<String, ShardConfig>,
    }
}

with_policy! {
    pub struct ShardConfig {}
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Cold,
    Online,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TargetType {
    Replica,
    Rdonly,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WaitFor {
    Cut,
    Ready,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum Lifecycle {
    Retain,
    Delete,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SnapshotPolicy {
    pub volume_snapshot_class_name: Option<String>,
    pub mode: Option<Mode>,
    pub target: Option<TargetPolicy>,
    pub wait_for: Option<WaitFor>,
    pub cut_timeout: Option<GoDuration>,
    pub ready_timeout: Option<GoDuration>,
    pub max_hold: Option<GoDuration>,
    pub fsfreeze: Option<bool>,
    pub labels: Option<BTreeMap<String, String>>,
    pub annotations: Option<BTreeMap<String, String>>,
    /// When the shard's snapshot CronJob runs (a cron line; before its stagger).
    pub schedule: Option<String>,
    /// The CronJob made but not run.
    pub suspend: Option<bool>,
    /// The window the shards of a cluster spread over (`0s`: none; unset: the shortest
    /// interval between two runs).
    pub stagger: Option<GoDuration>,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TargetPolicy {
    pub tablet_type: Option<TargetType>,
    pub allow_single_replica: Option<bool>,
    /// Replicas lagging more than this are not snapshot targets.
    pub max_lag: Option<GoDuration>,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RetentionPolicy {
    pub max_count: Option<i64>,
    pub max_age: Option<GoDuration>,
    pub failed_max_age: Option<GoDuration>,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeletionPolicy {
    pub when_deleted: Option<Lifecycle>,
    pub when_scaled: Option<Lifecycle>,
    pub grace_period: Option<GoDuration>,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RestorePolicy {
    pub enabled: Option<bool>,
    pub pools: Option<Vec<String>>,
    pub max_snapshot_age: Option<GoDuration>,
    /// How long the shard's primary keeps its binlogs (`binlog_expire_logs_seconds`).
    pub binlog_retention: Option<GoDuration>,
    /// Snapshots restore only on their source node (TopoLVM): pin new tablets there.
    pub node_local: Option<bool>,
    /// The node label whose value is the node's name, used to pin a Pod.
    pub node_label: Option<String>,
    /// A restored tablet Pod Pending longer than this is un-stuck by the GC.
    pub pending_timeout: Option<GoDuration>,
    /// What the GC does with a restored tablet that cannot catch up (its snapshot's
    /// binlogs purged).
    pub on_catch_up_failure: Option<CatchUpFailure>,
    /// Offer new tablets only snapshots whose last drill passed (`vtsnap.io/drill`).
    pub require_drill: Option<bool>,
}

/// When a shard's restore drill runs (docs/design.md §5.9): its CronJob is made by the
/// schedule reconciler when the chart's drills are on.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DrillPolicy {
    /// `false`: no drill CronJob for the shard (one made before is deleted).
    pub enabled: Option<bool>,
    /// A cron line, before its stagger.
    pub schedule: Option<String>,
    /// The CronJob made but not run.
    pub suspend: Option<bool>,
    /// The window the drills of a cluster spread over (`0s`: none; unset: the shortest
    /// interval between two runs).
    pub stagger: Option<GoDuration>,
}

/// The shard's binlog archive for point-in-time recovery (docs/pitr.md): Vitess
/// incremental backups taken from its newest snapshot on, by `vtsnap-pitr archive`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PitrPolicy {
    /// `true`: the shard's archive is kept (`vtsnap-pitr archive` refuses a shard without).
    pub enabled: Option<bool>,
    /// A cron line, before its stagger: how often an increment is taken.
    pub schedule: Option<String>,
    /// The archive's CronJob made but not run.
    pub suspend: Option<bool>,
    /// The window the archive runs of a cluster spread over (`0s`: none; unset: the
    /// shortest interval between two runs).
    pub stagger: Option<GoDuration>,
    /// How far back recovery is promised.
    pub window: Option<GoDuration>,
    /// Take an increment on the primary when no replica can (a shard of one tablet).
    pub allow_primary: Option<bool>,
}

/// What the GC does with a restored tablet that cannot catch up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CatchUpFailure {
    /// Delete its Pod and PVC once (the snapshot marked unusable first), so that the
    /// operator recreates them and vttablet restores from the regular backup.
    Reprovision,
    /// Mark its snapshot unusable and leave the tablet to a person.
    Leave,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VtbackupPolicy {
    pub use_empty_dir_for_initial_backup: Option<bool>,
    /// A full PersistentVolumeClaim spec.
    pub data_volume_claim_template: Option<serde_json::Value>,
}
