//! Decide: retention, deletion policy and fence recovery as one pure function of the
//! inventory, the config and the time (docs/design.md §4.2, §5.6).
//!
//! Per shard (newest first): a snapshot a Pending PVC is provisioned from is always kept,
//! and so is every snapshot of a namespace with a Pending PVC whose source is unreadable;
//! a `failed` one goes after `failedMaxAge`, whatever the policy; one that is not ready is
//! never deleted while younger than `readyTimeout` and never counts toward `maxCount`; the
//! newest ready snapshot of a shard that still exists is always kept; ready ones beyond
//! `maxCount` or older than `maxAge` go. A shard the VitessCluster spec no longer has loses
//! its snapshots after `gracePeriod` under `whenScaled: Delete` (measured from its newest
//! snapshot: the shard was still being snapshotted until it was removed). ownerReferences
//! to the VitessCluster follow `whenDeleted`.
//!
//! What the GC could not read completely (and every copy of a name seen twice) is
//! skipped: never deleted, recovered or counted, and listed in `skipped`. Leaving a
//! snapshot out of the count never deletes more: a readable snapshot's rank among the
//! readable ones is at most its true rank, and its own age is read. Only a removed shard's
//! grace period depends on the others (its newest snapshot), so a shard that may have a
//! skipped snapshot is not deleted as removed (`skipped-in-shard`).

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use vtsnap_core::config::{Config, Lifecycle};
use vtsnap_core::naming::KeyRange;
use vtsnap_core::shard::ShardRef;

use crate::inventory::{Inventory, Kind, Scope, Snap, UnreadableObject};

/// A creation time later than now by more than this (clock skew) cannot be real: the API
/// server sets it.
const FUTURE_SLACK_SECS: i64 = 3600;

/// Why a snapshot is deleted or kept (the JSON `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    InUseSource,
    /// A Pending PVC of its namespace has a data source that cannot be read.
    MaybeInUseSource,
    FailedExpired,
    FailedWithinMaxAge,
    ShardRemoved,
    WithinGracePeriod,
    NotReadyYet,
    UnreadyExpired,
    UnreadyWithinMaxAge,
    NewestReady,
    BeyondMaxCount,
    BeyondMaxAge,
    WithinMaxCount,
    SkippedInShard,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::InUseSource => "in-use-source",
            Reason::MaybeInUseSource => "maybe-in-use-source",
            Reason::FailedExpired => "failed-expired",
            Reason::FailedWithinMaxAge => "failed-within-max-age",
            Reason::ShardRemoved => "shard-removed",
            Reason::WithinGracePeriod => "within-grace-period",
            Reason::NotReadyYet => "not-ready-yet",
            Reason::UnreadyExpired => "unready-expired",
            Reason::UnreadyWithinMaxAge => "unready-within-max-age",
            Reason::NewestReady => "newest-ready",
            Reason::BeyondMaxCount => "beyond-max-count",
            Reason::BeyondMaxAge => "beyond-max-age",
            Reason::WithinMaxCount => "within-max-count",
            Reason::SkippedInShard => "skipped-in-shard",
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Item {
    pub namespace: String,
    pub name: String,
    pub reason: Reason,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OwnerChange {
    pub namespace: String,
    pub name: String,
    pub cluster: String,
    pub owner_uid: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct OwnerRefs {
    pub add: Vec<OwnerChange>,
    pub remove: Vec<OwnerChange>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FenceItem {
    pub namespace: String,
    pub name: String,
}

/// Why an object is skipped (the JSON `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SkipReason {
    /// A field it is planned by is missing or does not parse (`message` names it).
    Unreadable,
    /// Another object has the same namespace and name: which one is real is unknown.
    Duplicate,
    /// Created after now (beyond clock skew).
    CreatedInTheFuture,
}

impl SkipReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unreadable => "unreadable",
            Self::Duplicate => "duplicate",
            Self::CreatedInTheFuture => "created-in-the-future",
        }
    }
}

/// An object left alone because it was not read completely.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
    pub reason: SkipReason,
    pub message: String,
}

/// The plan; `--dry-run` and `plan` print it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub delete: Vec<Item>,
    pub keep: Vec<Item>,
    pub owner_refs: OwnerRefs,
    pub recover_fences: Vec<FenceItem>,
    pub skipped: Vec<Skipped>,
    /// Stuck node-local restores and snapshots restores cannot use.
    pub restores: crate::restores::RestorePlan,
}

/// The shards a skipped snapshot may be of, as far as its labels tell (`None`: a label
/// that is missing or not a string, so any).
#[derive(Debug)]
struct MaybeShard {
    namespace: String,
    cluster: Option<String>,
    keyspace: Option<String>,
    shard: Option<KeyRange>,
}

impl MaybeShard {
    fn exactly(s: &ShardRef) -> Self {
        Self {
            namespace: s.namespace.clone(),
            cluster: Some(s.cluster.clone()),
            keyspace: Some(s.keyspace.clone()),
            shard: Some(s.shard.clone()),
        }
    }

    /// `None` when its shard label is not a SafeName: then it is of no shard a readable
    /// snapshot is of.
    fn of_unreadable(u: &UnreadableObject) -> Option<Self> {
        let shard = match &u.shard {
            None => None,
            Some(label) => Some(KeyRange::from_safe_name(label).ok()?),
        };
        Some(Self {
            namespace: u.namespace.clone(),
            cluster: u.cluster.clone(),
            keyspace: u.keyspace.clone(),
            shard,
        })
    }

    fn may_be(&self, s: &ShardRef) -> bool {
        fn fits<T: PartialEq>(label: Option<&T>, want: &T) -> bool {
            label.is_none_or(|l| l == want)
        }
        self.namespace == s.namespace
            && fits(self.cluster.as_ref(), &s.cluster)
            && fits(self.keyspace.as_ref(), &s.keyspace)
            && fits(self.shard.as_ref(), &s.shard)
    }
}

/// The order plans have always been printed in: namespace, cluster, keyspace, then the
/// shard's SafeName (`80-x` before `x-80`, unlike [`ShardRef`]'s own order).
fn printed_order(a: &ShardRef, b: &ShardRef) -> std::cmp::Ordering {
    (&a.namespace, &a.cluster, &a.keyspace)
        .cmp(&(&b.namespace, &b.cluster, &b.keyspace))
        .then_with(|| a.shard.safe_name().cmp(&b.shard.safe_name()))
}

impl Snap {
    /// The shard its labels name.
    fn shard_ref(&self) -> ShardRef {
        ShardRef {
            namespace: self.namespace.clone(),
            cluster: self.cluster.clone(),
            keyspace: self.keyspace.clone(),
            shard: self.shard.clone(),
        }
    }
}

fn age_secs(now: Timestamp, t: Timestamp) -> i64 {
    now.as_second() - t.as_second()
}

/// Plans for the clusters of `config` (all, or only `only_cluster`).
pub fn plan(config: &Config, inv: &Inventory, now: Timestamp, only_cluster: Option<&str>) -> Plan {
    let scope: Vec<(String, String)> = config
        .clusters
        .iter()
        .filter(|c| only_cluster.is_none_or(|o| o == c.name))
        .map(|c| (c.namespace.clone(), c.name.clone()))
        .collect();
    let in_scope = |ns: &str, c: Option<&str>| {
        scope
            .iter()
            .any(|(sns, sc)| sns == ns && c.is_none_or(|c| c == sc))
    };
    let mut out = Plan::default();
    // Every copy of a name seen twice is skipped: which one is real is unknown.
    let mut seen: BTreeMap<(Kind, &str, &str), usize> = BTreeMap::new();
    let names = inv
        .snapshots
        .iter()
        .map(|s| (Kind::VolumeSnapshot, &s.namespace, &s.name))
        .chain(
            inv.leases
                .iter()
                .map(|l| (Kind::Lease, &l.namespace, &l.name)),
        )
        .chain(
            inv.unreadable
                .iter()
                .map(|u| (u.kind, &u.namespace, &u.name)),
        );
    for (kind, ns, name) in names {
        *seen.entry((kind, ns.as_str(), name.as_str())).or_default() += 1;
    }
    let twice = |kind, ns: &str, name: &str| seen.get(&(kind, ns, name)).is_some_and(|n| *n > 1);
    let mut maybe: Vec<MaybeShard> = Vec::new();
    for u in &inv.unreadable {
        // A lease has no cluster label: in scope by its namespace. A PVC of no known
        // namespace may hold a snapshot anywhere.
        let anywhere = u.kind == Kind::PersistentVolumeClaim && u.scope() == Scope::Any;
        if !anywhere && !in_scope(&u.namespace, u.cluster.as_deref()) {
            continue;
        }
        if u.kind == Kind::VolumeSnapshot {
            maybe.extend(MaybeShard::of_unreadable(u));
        }
        out.skipped.push(Skipped {
            kind: u.kind,
            namespace: u.namespace.clone(),
            name: u.name.clone(),
            reason: SkipReason::Unreadable,
            message: u.error.to_string(),
        });
    }
    let mut groups: BTreeMap<ShardRef, Vec<&Snap>> = BTreeMap::new();
    for s in &inv.snapshots {
        if in_scope(&s.namespace, Some(&s.cluster)) {
            let skip = if twice(Kind::VolumeSnapshot, &s.namespace, &s.name) {
                Some((
                    SkipReason::Duplicate,
                    "another VolumeSnapshot has this name".to_owned(),
                ))
            } else if age_secs(now, s.created) < -FUTURE_SLACK_SECS {
                Some((
                    SkipReason::CreatedInTheFuture,
                    format!("metadata.creationTimestamp {} is after now", s.created),
                ))
            } else {
                None
            };
            if let Some((reason, message)) = skip {
                maybe.push(MaybeShard::exactly(&s.shard_ref()));
                out.skipped.push(Skipped {
                    kind: Kind::VolumeSnapshot,
                    namespace: s.namespace.clone(),
                    name: s.name.clone(),
                    reason,
                    message,
                });
                continue;
            }
            groups.entry(s.shard_ref()).or_default().push(s);
        }
    }
    let mut groups: Vec<(ShardRef, Vec<&Snap>)> = groups.into_iter().collect();
    groups.sort_by(|(a, _), (b, _)| printed_order(a, b));
    for (key, mut snaps) in groups {
        let held = maybe.iter().any(|m| m.may_be(&key));
        let ShardRef {
            namespace: ns,
            cluster,
            keyspace,
            shard,
        } = key;
        let shard = shard.to_string();
        let Ok(policy) = config.resolve(&cluster, &keyspace, &shard) else {
            continue;
        };
        let source_unknown = inv.source_unknown_in(&ns);
        let cl = inv.clusters.get(&(ns.clone(), cluster.clone()));
        // Without the VitessCluster object, whenDeleted (ownerReferences) governs: the shard
        // is not "removed".
        let exists = cl.is_none_or(|c| c.shards.contains(&(keyspace.clone(), shard.clone())));
        // Newest first. creationTimestamp has second resolution; within one second the
        // later name is the newer snapshot (its stamp, then its `-<attempt>` suffix).
        snaps.sort_by(|a, b| b.created.cmp(&a.created).then(b.name.cmp(&a.name)));
        let newest = snaps.first().map_or(now, |s| s.created);
        let removed_delete = !exists && policy.deletion_policy.when_scaled == Lifecycle::Delete;
        let past_grace = age_secs(now, newest)
            > i64::try_from(policy.deletion_policy.grace_period.get().as_secs())
                .unwrap_or(i64::MAX);
        let secs = |d: vtsnap_core::config::GoDuration| {
            i64::try_from(d.get().as_secs()).unwrap_or(i64::MAX)
        };
        let failed_max = secs(policy.retention.failed_max_age);
        let ready_timeout = secs(policy.snapshot.ready_timeout);
        let max_count = usize::try_from(policy.retention.max_count).unwrap_or(usize::MAX);
        let mut rank = 0usize;
        for s in snaps {
            let age = age_secs(now, s.created);
            let (delete, reason) = if inv.in_use.contains(&(s.namespace.clone(), s.name.clone())) {
                (false, Reason::InUseSource)
            } else if source_unknown {
                (false, Reason::MaybeInUseSource)
            } else if s.failed {
                if age > failed_max {
                    (true, Reason::FailedExpired)
                } else {
                    (false, Reason::FailedWithinMaxAge)
                }
            } else if removed_delete {
                if !past_grace {
                    (false, Reason::WithinGracePeriod)
                } else if held {
                    (false, Reason::SkippedInShard)
                } else {
                    (true, Reason::ShardRemoved)
                }
            } else if !s.ready {
                if age < ready_timeout {
                    (false, Reason::NotReadyYet)
                } else if age > ready_timeout.saturating_add(failed_max) {
                    (true, Reason::UnreadyExpired)
                } else {
                    (false, Reason::UnreadyWithinMaxAge)
                }
            } else {
                let r = rank;
                rank += 1;
                if r == 0 {
                    (false, Reason::NewestReady)
                } else if r >= max_count {
                    (true, Reason::BeyondMaxCount)
                } else if policy.retention.max_age.is_some_and(|m| age > secs(m)) {
                    (true, Reason::BeyondMaxAge)
                } else {
                    (false, Reason::WithinMaxCount)
                }
            };
            let item = Item {
                namespace: s.namespace.clone(),
                name: s.name.clone(),
                reason,
            };
            if delete {
                out.delete.push(item);
                continue;
            }
            out.keep.push(item);
            if let Some(c) = cl {
                let want = policy.deletion_policy.when_deleted == Lifecycle::Delete;
                let has = s.cluster_owners.contains(&c.uid);
                let change = OwnerChange {
                    namespace: s.namespace.clone(),
                    name: s.name.clone(),
                    cluster: cluster.clone(),
                    owner_uid: c.uid.clone(),
                };
                if want && !has {
                    out.owner_refs.add.push(change);
                } else if !want && has {
                    out.owner_refs.remove.push(change);
                }
            }
        }
    }
    for l in &inv.leases {
        if !in_scope(&l.namespace, None) {
            continue;
        }
        if twice(Kind::Lease, &l.namespace, &l.name) {
            out.skipped.push(Skipped {
                kind: Kind::Lease,
                namespace: l.namespace.clone(),
                name: l.name.clone(),
                reason: SkipReason::Duplicate,
                message: "another Lease has this name".to_owned(),
            });
        } else if l.expired {
            out.recover_fences.push(FenceItem {
                namespace: l.namespace.clone(),
                name: l.name.clone(),
            });
        }
    }
    out.skipped
        .sort_by(|a, b| (&a.namespace, &a.name, a.kind).cmp(&(&b.namespace, &b.name, b.kind)));
    out.restores = crate::restores::plan_restores(config, inv, now, only_cluster);
    out
}

#[cfg(test)]
mod tests;
