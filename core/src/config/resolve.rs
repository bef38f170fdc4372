//! Field-level merge (shard > keyspace > cluster > built-in defaults) into a fully
//! resolved policy. Callers never see an unset field.
//!
//! The rules follow the seed PVC deletion-policy design: a child that sets one field
//! inherits the others from its parent; an absent block and an empty block are the same.
//! Label and annotation maps merge key by key. The vtbackup storage choice is one
//! decision: the most specific level that makes any choice wins as a whole.

use std::collections::BTreeMap;

use serde::Serialize;

use super::model::*;
use crate::duration::GoDuration;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedPolicy {
    pub snapshot: ResolvedSnapshot,
    pub retention: ResolvedRetention,
    pub deletion_policy: ResolvedDeletion,
    pub restore: ResolvedRestore,
    pub vtbackup: VtbackupStorage,
    pub drill: ResolvedDrill,
    pub pitr: ResolvedPitr,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedPitr {
    pub enabled: bool,
    pub schedule: String,
    pub suspend: bool,
    /// `None`: the schedule's shortest interval.
    pub stagger: Option<GoDuration>,
    /// `None`: no promise beyond what the snapshots' retention keeps.
    pub window: Option<GoDuration>,
    pub allow_primary: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedDrill {
    pub enabled: bool,
    pub schedule: String,
    pub suspend: bool,
    /// `None`: the schedule's shortest interval.
    pub stagger: Option<GoDuration>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedSnapshot {
    /// `None`: the cluster's default VolumeSnapshotClass.
    pub volume_snapshot_class_name: Option<String>,
    pub mode: Mode,
    pub target: ResolvedTarget,
    pub wait_for: WaitFor,
    pub cut_timeout: GoDuration,
    pub ready_timeout: GoDuration,
    pub max_hold: GoDuration,
    pub fsfreeze: bool,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub schedule: String,
    pub suspend: bool,
    /// `None`: the schedule's shortest interval.
    pub stagger: Option<GoDuration>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedTarget {
    pub tablet_type: TargetType,
    pub allow_single_replica: bool,
    pub max_lag: GoDuration,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedRetention {
    pub max_count: u32,
    /// `None`: no age limit.
    pub max_age: Option<GoDuration>,
    pub failed_max_age: GoDuration,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedDeletion {
    pub when_deleted: Lifecycle,
    pub when_scaled: Lifecycle,
    pub grace_period: GoDuration,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedRestore {
    pub enabled: bool,
    /// Empty: every tablet pool of the shard.
    pub pools: Vec<String>,
    pub max_snapshot_age: GoDuration,
    pub binlog_retention: GoDuration,
    pub node_local: bool,
    pub node_label: String,
    pub pending_timeout: GoDuration,
    pub on_catch_up_failure: CatchUpFailure,
    pub require_drill: bool,
}

impl ResolvedRestore {
    /// Whether new tablets of pool `pool` (the `planetscale.com/tablet-type` label) start
    /// from a snapshot.
    pub fn opts_in(&self, pool: &str) -> bool {
        self.enabled && (self.pools.is_empty() || self.pools.iter().any(|p| p == pool))
    }
}

/// Where vtbackup Pods get their scratch storage (seed: vtbackup storage PR).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "storage", content = "template")]
pub enum VtbackupStorage {
    /// The first tablet pool's PVC template, for initial and scheduled backups (historical).
    InheritFirstPool,
    /// emptyDir for the initial backup; the first pool's template for scheduled ones.
    EmptyDirForInitialBackup,
    /// This PVC template for initial and scheduled backups.
    Template(serde_json::Value),
}

/// Built-in defaults (docs/design.md §4.1 and the documented choices in docs/config.md).
pub mod defaults {
    use super::GoDuration;
    pub const CUT_TIMEOUT: GoDuration = GoDuration::secs(5 * 60);
    pub const READY_TIMEOUT: GoDuration = GoDuration::secs(6 * 3600);
    pub const MAX_HOLD: GoDuration = GoDuration::secs(10 * 60);
    pub const MAX_LAG: GoDuration = GoDuration::secs(30);
    pub const MAX_COUNT: u32 = 7;
    pub const FAILED_MAX_AGE: GoDuration = GoDuration::secs(24 * 3600);
    pub const GRACE_PERIOD: GoDuration = GoDuration::secs(72 * 3600);
    /// Vitess keeps binlogs 3 days (`binlog_expire_logs_seconds = 259200`); stay well inside.
    pub const MAX_SNAPSHOT_AGE: GoDuration = GoDuration::secs(48 * 3600);
    /// Vitess's MySQL 8 config (`config/mycnf/mysql80.cnf`: `binlog_expire_logs_seconds = 259200`).
    pub const BINLOG_RETENTION: GoDuration = GoDuration::secs(72 * 3600);
    /// Set on every node by kubelet; its value is the node's name unless kubelet runs
    /// with `--hostname-override`.
    pub const NODE_LABEL: &str = "kubernetes.io/hostname";
    pub const PENDING_TIMEOUT: GoDuration = GoDuration::secs(15 * 60);
}

fn pick<T: Clone>(child: &Option<T>, parent: &Option<T>) -> Option<T> {
    child.clone().or_else(|| parent.clone())
}

fn merge_maps(
    child: &Option<BTreeMap<String, String>>,
    parent: &Option<BTreeMap<String, String>>,
) -> Option<BTreeMap<String, String>> {
    match (child, parent) {
        (None, None) => None,
        (c, p) => {
            let mut m = p.clone().unwrap_or_default();
            m.extend(c.clone().unwrap_or_default());
            Some(m)
        }
    }
}

fn merge_opt<T: Clone>(
    child: &Option<T>,
    parent: &Option<T>,
    f: impl Fn(&T, &T) -> T,
) -> Option<T> {
    match (child, parent) {
        (Some(c), Some(p)) => Some(f(c, p)),
        (c, p) => pick(c, p),
    }
}

fn merge_target(c: &TargetPolicy, p: &TargetPolicy) -> TargetPolicy {
    TargetPolicy {
        tablet_type: pick(&c.tablet_type, &p.tablet_type),
        allow_single_replica: pick(&c.allow_single_replica, &p.allow_single_replica),
        max_lag: pick(&c.max_lag, &p.max_lag),
    }
}

fn merge_snapshot(c: &SnapshotPolicy, p: &SnapshotPolicy) -> SnapshotPolicy {
    SnapshotPolicy {
        volume_snapshot_class_name: pick(
            &c.volume_snapshot_class_name,
            &p.volume_snapshot_class_name,
        ),
        mode: pick(&c.mode, &p.mode),
        target: merge_opt(&c.target, &p.target, merge_target),
        wait_for: pick(&c.wait_for, &p.wait_for),
        cut_timeout: pick(&c.cut_timeout, &p.cut_timeout),
        ready_timeout: pick(&c.ready_timeout, &p.ready_timeout),
        max_hold: pick(&c.max_hold, &p.max_hold),
        fsfreeze: pick(&c.fsfreeze, &p.fsfreeze),
        labels: merge_maps(&c.labels, &p.labels),
        annotations: merge_maps(&c.annotations, &p.annotations),
        schedule: pick(&c.schedule, &p.schedule),
        suspend: pick(&c.suspend, &p.suspend),
        stagger: pick(&c.stagger, &p.stagger),
    }
}

fn merge_retention(c: &RetentionPolicy, p: &RetentionPolicy) -> RetentionPolicy {
    RetentionPolicy {
        max_count: pick(&c.max_count, &p.max_count),
        max_age: pick(&c.max_age, &p.max_age),
        failed_max_age: pick(&c.failed_max_age, &p.failed_max_age),
    }
}

fn merge_deletion(c: &DeletionPolicy, p: &DeletionPolicy) -> DeletionPolicy {
    DeletionPolicy {
        when_deleted: pick(&c.when_deleted, &p.when_deleted),
        when_scaled: pick(&c.when_scaled, &p.when_scaled),
        grace_period: pick(&c.grace_period, &p.grace_period),
    }
}

fn merge_restore(c: &RestorePolicy, p: &RestorePolicy) -> RestorePolicy {
    RestorePolicy {
        enabled: pick(&c.enabled, &p.enabled),
        pools: pick(&c.pools, &p.pools),
        max_snapshot_age: pick(&c.max_snapshot_age, &p.max_snapshot_age),
        binlog_retention: pick(&c.binlog_retention, &p.binlog_retention),
        node_local: pick(&c.node_local, &p.node_local),
        node_label: pick(&c.node_label, &p.node_label),
        pending_timeout: pick(&c.pending_timeout, &p.pending_timeout),
        on_catch_up_failure: pick(&c.on_catch_up_failure, &p.on_catch_up_failure),
        require_drill: pick(&c.require_drill, &p.require_drill),
    }
}

/// Whether a vtbackup block makes a storage choice at all.
fn makes_choice(v: &VtbackupPolicy) -> bool {
    v.use_empty_dir_for_initial_backup.is_some() || v.data_volume_claim_template.is_some()
}

fn merge_vtbackup(
    c: &Option<VtbackupPolicy>,
    p: &Option<VtbackupPolicy>,
) -> Option<VtbackupPolicy> {
    match c {
        Some(c) if makes_choice(c) => Some(c.clone()),
        _ => p.clone(),
    }
}

/// Merges a child level over its parent, field by field.
pub fn merge(child: &PolicyBlocks, parent: &PolicyBlocks) -> PolicyBlocks {
    PolicyBlocks {
        snapshot: merge_opt(&child.snapshot, &parent.snapshot, merge_snapshot),
        retention: merge_opt(&child.retention, &parent.retention, merge_retention),
        deletion_policy: merge_opt(
            &child.deletion_policy,
            &parent.deletion_policy,
            merge_deletion,
        ),
        restore: merge_opt(&child.restore, &parent.restore, merge_restore),
        vtbackup: merge_vtbackup(&child.vtbackup, &parent.vtbackup),
        drill: merge_opt(&child.drill, &parent.drill, merge_drill),
        pitr: merge_opt(&child.pitr, &parent.pitr, merge_pitr),
    }
}

fn merge_pitr(c: &PitrPolicy, p: &PitrPolicy) -> PitrPolicy {
    PitrPolicy {
        enabled: pick(&c.enabled, &p.enabled),
        schedule: pick(&c.schedule, &p.schedule),
        suspend: pick(&c.suspend, &p.suspend),
        stagger: pick(&c.stagger, &p.stagger),
        window: pick(&c.window, &p.window),
        allow_primary: pick(&c.allow_primary, &p.allow_primary),
    }
}

fn merge_drill(c: &DrillPolicy, p: &DrillPolicy) -> DrillPolicy {
    DrillPolicy {
        enabled: pick(&c.enabled, &p.enabled),
        schedule: pick(&c.schedule, &p.schedule),
        suspend: pick(&c.suspend, &p.suspend),
        stagger: pick(&c.stagger, &p.stagger),
    }
}

/// Fills every unset field with its built-in default.
pub fn with_defaults(b: &PolicyBlocks) -> ResolvedPolicy {
    let s = b.snapshot.clone().unwrap_or_default();
    let t = s.target.clone().unwrap_or_default();
    let r = b.retention.clone().unwrap_or_default();
    let d = b.deletion_policy.clone().unwrap_or_default();
    let rs = b.restore.clone().unwrap_or_default();
    let vt = b.vtbackup.clone().unwrap_or_default();
    let dr = b.drill.clone().unwrap_or_default();
    let pi = b.pitr.clone().unwrap_or_default();
    ResolvedPolicy {
        snapshot: ResolvedSnapshot {
            volume_snapshot_class_name: s.volume_snapshot_class_name,
            mode: s.mode.unwrap_or(Mode::Cold),
            target: ResolvedTarget {
                tablet_type: t.tablet_type.unwrap_or(TargetType::Replica),
                allow_single_replica: t.allow_single_replica.unwrap_or(false),
                max_lag: t.max_lag.unwrap_or(defaults::MAX_LAG),
            },
            wait_for: s.wait_for.unwrap_or(WaitFor::Cut),
            cut_timeout: s.cut_timeout.unwrap_or(defaults::CUT_TIMEOUT),
            ready_timeout: s.ready_timeout.unwrap_or(defaults::READY_TIMEOUT),
            max_hold: s.max_hold.unwrap_or(defaults::MAX_HOLD),
            fsfreeze: s.fsfreeze.unwrap_or(false),
            labels: s.labels.unwrap_or_default(),
            annotations: s.annotations.unwrap_or_default(),
            schedule: s
                .schedule
                .unwrap_or_else(|| crate::schedule::DEFAULT_SCHEDULE.to_owned()),
            suspend: s.suspend.unwrap_or(false),
            stagger: s.stagger,
        },
        retention: ResolvedRetention {
            // Validation guarantees 1 ≤ maxCount ≤ u32::MAX.
            max_count: r
                .max_count
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(defaults::MAX_COUNT),
            max_age: r.max_age,
            failed_max_age: r.failed_max_age.unwrap_or(defaults::FAILED_MAX_AGE),
        },
        deletion_policy: ResolvedDeletion {
            when_deleted: d.when_deleted.unwrap_or(Lifecycle::Retain),
            when_scaled: d.when_scaled.unwrap_or(Lifecycle::Delete),
            grace_period: d.grace_period.unwrap_or(defaults::GRACE_PERIOD),
        },
        restore: ResolvedRestore {
            enabled: rs.enabled.unwrap_or(false),
            pools: rs.pools.unwrap_or_default(),
            max_snapshot_age: rs.max_snapshot_age.unwrap_or(defaults::MAX_SNAPSHOT_AGE),
            binlog_retention: rs.binlog_retention.unwrap_or(defaults::BINLOG_RETENTION),
            node_local: rs.node_local.unwrap_or(false),
            node_label: rs
                .node_label
                .unwrap_or_else(|| defaults::NODE_LABEL.to_owned()),
            pending_timeout: rs.pending_timeout.unwrap_or(defaults::PENDING_TIMEOUT),
            on_catch_up_failure: rs
                .on_catch_up_failure
                .unwrap_or(CatchUpFailure::Reprovision),
            require_drill: rs.require_drill.unwrap_or(false),
        },
        vtbackup: match (
            vt.data_volume_claim_template,
            vt.use_empty_dir_for_initial_backup,
        ) {
            (Some(t), _) => VtbackupStorage::Template(t),
            (None, Some(true)) => VtbackupStorage::EmptyDirForInitialBackup,
            _ => VtbackupStorage::InheritFirstPool,
        },
        drill: ResolvedDrill {
            enabled: dr.enabled.unwrap_or(true),
            schedule: dr
                .schedule
                .unwrap_or_else(|| crate::schedule::DEFAULT_DRILL_SCHEDULE.to_owned()),
            suspend: dr.suspend.unwrap_or(false),
            stagger: dr.stagger,
        },
        pitr: ResolvedPitr {
            enabled: pi.enabled.unwrap_or(false),
            schedule: pi
                .schedule
                .unwrap_or_else(|| crate::schedule::DEFAULT_PITR_SCHEDULE.to_owned()),
            suspend: pi.suspend.unwrap_or(false),
            stagger: pi.stagger,
            window: pi.window,
            allow_primary: pi.allow_primary.unwrap_or(false),
        },
    }
}
