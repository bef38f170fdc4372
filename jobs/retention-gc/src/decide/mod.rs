//! Decide: retention, deletion policy and fence recovery as one pure function of the
//! inventory, the config and the time (docs/design.md §4.2, §5.6).
//!
//! Per shard (newest first): a snapshot a Pending PVC is provisioned from is always kept,
//! and so is every snapshot of a namespace with a Pending PVC whose source is unreadable;
//! a `failed` one goes after `failedMaxAge`, whatever the policy; one that is not ready is
//! never deleted while younger than `readyTimeout` and never counts toward `maxCount`; the
//! newest ready snapshot of a shard that still exists is always kept, and so is the
//! newest ready one whose last drill passed; ready ones beyond `maxCount` or older than
//! `maxAge` go. A shard the VitessCluster spec no longer has loses
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
use vtsnap_core::config::{Config, GoDuration, Lifecycle, ResolvedPolicy, resolve_in};
use vtsnap_core::naming::KeyRange;
use vtsnap_core::reconcile::ObjectKey;
use vtsnap_core::shard::ShardRef;

use crate::observe::{Cluster, Expiry, Inventory, Kind, Scope, Snap, UnreadableObject};

mod coverage;
pub mod failed_restores;

pub use coverage::{CoverageState, ShardCoverage};
use failed_restores::MarkUnusable;

/// A creation time later than now by more than this (clock skew) cannot be real: the API
/// server sets it.
const FUTURE_SLACK_SECS: i64 = 3600;

/// Why a snapshot is deleted or kept (the JSON `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
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
    /// The newest ready snapshot a new tablet can still catch up from.
    NewestCovered,
    /// The newest ready snapshot whose last drill passed: the newest proof of a restore.
    NewestDrilled,
    /// The base of the oldest point `pitr.window` promises (docs/pitr.md): the newest
    /// ready, usable snapshot cut at or before `now - window`, or the oldest when none is.
    PitrBase,
    BeyondMaxCount,
    BeyondMaxAge,
    WithinMaxCount,
    SkippedInShard,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Whether a snapshot with this reason is deleted (the others are kept).
    fn deletes(self) -> bool {
        matches!(
            self,
            Reason::FailedExpired
                | Reason::ShardRemoved
                | Reason::UnreadyExpired
                | Reason::BeyondMaxCount
                | Reason::BeyondMaxAge
        )
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
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
        self.into()
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
    pub restores: failed_restores::RestorePlan,
    /// Catch-up coverage per shard with ready snapshots.
    pub coverage: Vec<ShardCoverage>,
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

fn secs(d: GoDuration) -> i64 {
    i64::try_from(d.get().as_secs()).unwrap_or(i64::MAX)
}

/// Plans for the clusters of `config` (all, or only `only_cluster`).
pub fn plan(config: &Config, inv: &Inventory, now: Timestamp, only_cluster: Option<&str>) -> Plan {
    let planned = Planned::of(config, only_cluster);
    let names = Names::count(inv);
    let mut skips = Skips::default();
    skips.unreadable(inv, &planned);
    let shards = group_by_shard(inv, &planned, &names, now, &mut skips);
    let mut out = Plan::default();
    let mut not_covered = Vec::new();
    for (shard, snaps) in shards {
        let held = skips.held(&shard);
        not_covered.extend(plan_shard(config, inv, now, &shard, snaps, held, &mut out));
    }
    out.recover_fences = recover_fences(inv, &planned, &names, &mut skips);
    out.skipped = skips.skipped;
    out.skipped
        .sort_by(|a, b| (&a.namespace, &a.name, a.kind).cmp(&(&b.namespace, &b.name, b.kind)));
    out.restores = failed_restores::plan_restores(config, inv, now, only_cluster);
    for m in not_covered {
        let marked = out.restores.mark_unusable.iter().any(|o| {
            (o.namespace.as_str(), o.snapshot.as_str())
                == (m.namespace.as_str(), m.snapshot.as_str())
        });
        if !marked {
            out.restores.mark_unusable.push(m);
        }
    }
    out
}

/// The clusters planned for: all of the config's, or only one.
struct Planned(Vec<ObjectKey>);

impl Planned {
    fn of(config: &Config, only_cluster: Option<&str>) -> Self {
        Self(
            config
                .clusters
                .iter()
                .filter(|c| only_cluster.is_none_or(|o| o == c.name))
                .map(|c| ObjectKey::new(&c.namespace, &c.name))
                .collect(),
        )
    }

    /// Whether an object of `namespace` and `cluster` (`None`: it names none) is planned.
    fn contains(&self, namespace: &str, cluster: Option<&str>) -> bool {
        self.0
            .iter()
            .any(|c| c.namespace == namespace && cluster.is_none_or(|want| want == c.name))
    }
}

/// How many objects of each kind have each namespace and name.
struct Names<'a>(BTreeMap<(Kind, &'a str, &'a str), usize>);

impl<'a> Names<'a> {
    fn count(inv: &'a Inventory) -> Self {
        let mut seen = BTreeMap::new();
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
        Self(seen)
    }

    /// Every copy of a name seen twice is skipped: which one is real is unknown.
    fn seen_twice(&self, kind: Kind, namespace: &str, name: &str) -> bool {
        self.0.get(&(kind, namespace, name)).is_some_and(|n| *n > 1)
    }
}

/// What is skipped, and the shards each skipped snapshot may be of.
#[derive(Default)]
struct Skips {
    skipped: Vec<Skipped>,
    maybe: Vec<MaybeShard>,
}

impl Skips {
    /// Every unreadable object of the clusters planned for. A lease has no cluster label:
    /// in scope by its namespace. A PVC of no known namespace may hold a snapshot anywhere.
    fn unreadable(&mut self, inv: &Inventory, planned: &Planned) {
        for u in &inv.unreadable {
            let anywhere = u.kind == Kind::PersistentVolumeClaim && u.scope() == Scope::Any;
            if !anywhere && !planned.contains(&u.namespace, u.cluster.as_deref()) {
                continue;
            }
            if u.kind == Kind::VolumeSnapshot {
                self.maybe.extend(MaybeShard::of_unreadable(u));
            }
            self.skipped.push(Skipped {
                kind: u.kind,
                namespace: u.namespace.clone(),
                name: u.name.clone(),
                reason: SkipReason::Unreadable,
                message: u.error.to_string(),
            });
        }
    }

    /// A readable snapshot skipped all the same.
    fn snapshot(&mut self, s: &Snap, reason: SkipReason, message: String) {
        self.maybe.push(MaybeShard::exactly(&s.shard_ref()));
        self.skipped.push(Skipped {
            kind: Kind::VolumeSnapshot,
            namespace: s.namespace.clone(),
            name: s.name.clone(),
            reason,
            message,
        });
    }

    /// Whether a skipped snapshot may be of `shard`.
    fn held(&self, shard: &ShardRef) -> Held {
        if self.maybe.iter().any(|m| m.may_be(shard)) {
            Held::BySkipped
        } else {
            Held::No
        }
    }
}

/// Why a readable snapshot is skipped, if it is.
fn skip_reason(s: &Snap, names: &Names<'_>, now: Timestamp) -> Option<(SkipReason, String)> {
    if names.seen_twice(Kind::VolumeSnapshot, &s.namespace, &s.name) {
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
    }
}

/// The snapshots of the clusters planned for and not skipped, by shard, the shards in
/// the order plans have always been printed in.
fn group_by_shard<'a>(
    inv: &'a Inventory,
    planned: &Planned,
    names: &Names<'_>,
    now: Timestamp,
    skips: &mut Skips,
) -> Vec<(ShardRef, Vec<&'a Snap>)> {
    let mut groups: BTreeMap<ShardRef, Vec<&Snap>> = BTreeMap::new();
    for s in &inv.snapshots {
        if !planned.contains(&s.namespace, Some(&s.cluster)) {
            continue;
        }
        if let Some((reason, message)) = skip_reason(s, names, now) {
            skips.snapshot(s, reason, message);
            continue;
        }
        groups.entry(s.shard_ref()).or_default().push(s);
    }
    let mut groups: Vec<(ShardRef, Vec<&Snap>)> = groups.into_iter().collect();
    groups.sort_by(|(a, _), (b, _)| printed_order(a, b));
    groups
}

/// Whether a skipped snapshot may be of a shard: then none of the shard's is deleted as
/// the snapshot of a removed shard (its newest may be the skipped one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    No,
    BySkipped,
}

/// Whether the VitessCluster's spec still defines a shard (without the object it is taken
/// to: `whenDeleted` governs then).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InSpec {
    Defined,
    Removed,
}

/// Whether a ready snapshot can be caught up from and would be given to a restore.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Offered {
    CoveredAndUsable,
    Otherwise,
}

/// One shard's snapshots, each deleted or kept with its reason; a kept one's
/// ownerReferences follow `whenDeleted`. A shard no policy resolves for is left out.
/// Returns the ready snapshots to mark unusable because they are not covered.
fn plan_shard(
    config: &Config,
    inv: &Inventory,
    now: Timestamp,
    shard: &ShardRef,
    mut snaps: Vec<&Snap>,
    held: Held,
    out: &mut Plan,
) -> Vec<MarkUnusable> {
    let key_range = shard.shard.to_string();
    // By namespace and name: a name configured in two namespaces is two clusters, and a
    // lookup by name alone left both out (docs/design.md §5.8).
    let Some(cluster_config) = config.cluster_in(&shard.namespace, &shard.cluster) else {
        return Vec::new();
    };
    let policy = resolve_in(cluster_config, &shard.keyspace, &key_range);
    let cluster = inv
        .clusters
        .get(&ObjectKey::new(&shard.namespace, &shard.cluster));
    // Without the VitessCluster object, whenDeleted (ownerReferences) governs: the shard
    // is not "removed".
    let in_spec = if cluster.is_none_or(|c| {
        c.shards
            .contains(&(shard.keyspace.clone(), key_range.clone()))
    }) {
        InSpec::Defined
    } else {
        InSpec::Removed
    };
    // Newest first. creationTimestamp has second resolution; within one second the
    // later name is the newer snapshot (its stamp, then its `-<attempt>` suffix).
    snaps.sort_by(|a, b| b.created.cmp(&a.created).then(b.name.cmp(&a.name)));
    let newest = snaps.first().map_or(now, |s| s.created);
    let retention = Retention {
        inv,
        now,
        source_unknown: inv.source_unknown_in(&shard.namespace),
        removed: when_scaled(&policy, in_spec, age_secs(now, newest), held),
        failed_max_age: secs(policy.retention.failed_max_age),
        ready_timeout: secs(policy.snapshot.ready_timeout),
        max_count: usize::try_from(policy.retention.max_count).unwrap_or(usize::MAX),
        max_age: policy.retention.max_age.map(secs),
        require_drill: policy.restore.require_drill,
        pitr_window: policy.pitr.window.filter(|_| policy.pitr.enabled).map(secs),
    };
    let when_deleted = policy.deletion_policy.when_deleted;
    let ready: Vec<&Snap> = snaps
        .iter()
        .copied()
        .filter(|s| s.ready && !s.failed)
        .collect();
    let judged = if ready.is_empty() {
        None
    } else {
        Some(coverage::judge(inv, shard, &ready, now, &|s| {
            retention.usable(s)
        }))
    };
    let covered = judged.as_ref().and_then(|j| j.covered.as_ref());
    let reasons = retention.reasons(&snaps, covered);
    for (s, reason) in snaps.into_iter().zip(reasons) {
        let item = Item {
            namespace: s.namespace.clone(),
            name: s.name.clone(),
            reason,
        };
        if reason.deletes() {
            out.delete.push(item);
            continue;
        }
        out.keep.push(item);
        if let Some(c) = cluster {
            follow_when_deleted(&mut out.owner_refs, s, &shard.cluster, c, when_deleted);
        }
    }
    let Some(judged) = judged else {
        return Vec::new();
    };
    out.coverage.push(judged.report);
    judged.marks
}

/// `whenScaled: Delete` for a shard the VitessCluster spec no longer has: its snapshots
/// are kept through `gracePeriod` from the newest, then deleted unless a skipped snapshot
/// may be of the shard (`held`). `None`: the shard is not removed, or `Retain`.
fn when_scaled(
    policy: &ResolvedPolicy,
    in_spec: InSpec,
    newest_age: i64,
    held: Held,
) -> Option<Reason> {
    if in_spec == InSpec::Defined || policy.deletion_policy.when_scaled != Lifecycle::Delete {
        None
    } else if newest_age <= secs(policy.deletion_policy.grace_period) {
        Some(Reason::WithinGracePeriod)
    } else if held == Held::BySkipped {
        Some(Reason::SkippedInShard)
    } else {
        Some(Reason::ShardRemoved)
    }
}

/// One shard's retention rules, resolved from its policy.
struct Retention<'a> {
    inv: &'a Inventory,
    now: Timestamp,
    /// A Pending PVC of the namespace has a data source that cannot be read.
    source_unknown: bool,
    /// What `whenScaled` makes of a removed shard's snapshots.
    removed: Option<Reason>,
    failed_max_age: i64,
    ready_timeout: i64,
    max_count: usize,
    max_age: Option<i64>,
    /// `restore.requireDrill`: only a snapshot whose drill passed is offered.
    require_drill: bool,
    /// `pitr.window` in seconds, when the shard's archive is on.
    pitr_window: Option<i64>,
}

impl Retention<'_> {
    /// A new tablet could be given it: no unusable mark, and a passed drill when the
    /// policy requires one. Retention protects, and coverage reports, the newest covered
    /// snapshot that is also usable (docs/design.md §5.7).
    fn usable(&self, s: &Snap) -> bool {
        !s.unusable && (!self.require_drill || self.drill_passed(s))
    }

    /// Why each of `snaps` (newest first) is kept or deleted. The ready ones are ranked
    /// newest first; with coverage known (`covered`, by name), the covered ones first, so
    /// that `maxCount` counts them first. Rank 0 (the newest ready one) is kept; so are the
    /// newest covered snapshot a restore would be given, the newest drilled one and the
    /// base of the oldest point the archive's window promises, whatever their rank
    /// (docs/design.md §5.7, §5.10).
    fn reasons(&self, snaps: &[&Snap], covered: Option<&BTreeMap<String, bool>>) -> Vec<Reason> {
        let mut reasons: Vec<Option<Reason>> = snaps.iter().map(|s| self.unranked(s)).collect();
        let is_covered = |s: &Snap| covered.and_then(|c| c.get(&s.name)).copied();
        let mut ranked: Vec<usize> = (0..snaps.len()).filter(|i| reasons[*i].is_none()).collect();
        // Stable: within each group the newest first, as `snaps` comes.
        ranked.sort_by_key(|i| is_covered(snaps[*i]) == Some(false));
        let covered_usable = |i: usize| is_covered(snaps[i]) == Some(true) && self.usable(snaps[i]);
        let newest_covered = ranked.iter().copied().find(|i| covered_usable(*i));
        let newest_drilled = ranked
            .iter()
            .copied()
            .filter(|i| self.drill_passed(snaps[*i]))
            .max_by_key(|i| (snaps[*i].created, &snaps[*i].name));
        let pitr_base = self.pitr_window.and_then(|window| {
            let usable = || ranked.iter().copied().filter(|i| self.usable(snaps[*i]));
            let promised_from = self.now.as_second().saturating_sub(window);
            usable()
                .filter(|i| snaps[*i].created.as_second() <= promised_from)
                .max_by_key(|i| (snaps[*i].created, &snaps[*i].name))
                .or_else(|| usable().min_by_key(|i| (snaps[*i].created, &snaps[*i].name)))
        });
        for (rank, i) in ranked.into_iter().enumerate() {
            let s = snaps[i];
            let age = age_secs(self.now, s.created);
            let offered = if covered_usable(i) {
                Offered::CoveredAndUsable
            } else {
                Offered::Otherwise
            };
            let reason = self.ready(rank, age, offered);
            reasons[i] = Some(match reason {
                r if !r.deletes() => r,
                _ if newest_covered == Some(i) => Reason::NewestCovered,
                _ if newest_drilled == Some(i) => Reason::NewestDrilled,
                _ if pitr_base == Some(i) => Reason::PitrBase,
                r => r,
            });
        }
        reasons
            .into_iter()
            .map(|r| r.unwrap_or(Reason::NewestReady))
            .collect()
    }

    /// Its last drill passed, by a record made for it that can be true.
    fn drill_passed(&self, s: &Snap) -> bool {
        s.drill.as_ref().is_some_and(|d| d.passed(self.now))
    }

    /// Why `s` is kept or deleted when that does not depend on its rank; `None` for a
    /// ready snapshot (ranked by [`Self::reasons`]).
    fn unranked(&self, s: &Snap) -> Option<Reason> {
        let age = age_secs(self.now, s.created);
        if self
            .inv
            .in_use
            .contains(&ObjectKey::new(&s.namespace, &s.name))
        {
            Some(Reason::InUseSource)
        } else if self.source_unknown {
            Some(Reason::MaybeInUseSource)
        } else if s.failed {
            Some(self.failed(age))
        } else if let Some(removed) = self.removed {
            Some(removed)
        } else if !s.ready {
            Some(self.unready(age))
        } else {
            None
        }
    }

    /// A `failed` snapshot goes after `failedMaxAge`, whatever the policy.
    fn failed(&self, age: i64) -> Reason {
        if age > self.failed_max_age {
            Reason::FailedExpired
        } else {
            Reason::FailedWithinMaxAge
        }
    }

    /// One not ready is never deleted while younger than `readyTimeout`, and goes
    /// `failedMaxAge` after it.
    fn unready(&self, age: i64) -> Reason {
        if age < self.ready_timeout {
            Reason::NotReadyYet
        } else if age > self.ready_timeout.saturating_add(self.failed_max_age) {
            Reason::UnreadyExpired
        } else {
            Reason::UnreadyWithinMaxAge
        }
    }

    /// The first ranked is kept (the newest covered one when `offered`); the others go
    /// beyond `maxCount` or `maxAge`.
    fn ready(&self, rank: usize, age: i64, offered: Offered) -> Reason {
        if rank == 0 && offered == Offered::CoveredAndUsable {
            Reason::NewestCovered
        } else if rank == 0 {
            Reason::NewestReady
        } else if rank >= self.max_count {
            Reason::BeyondMaxCount
        } else if self.max_age.is_some_and(|m| age > m) {
            Reason::BeyondMaxAge
        } else {
            Reason::WithinMaxCount
        }
    }
}

/// `whenDeleted` for a kept snapshot: owned by its VitessCluster under `Delete` (deleting
/// the cluster deletes it), not owned under `Retain`.
fn follow_when_deleted(
    refs: &mut OwnerRefs,
    s: &Snap,
    cluster: &str,
    c: &Cluster,
    when_deleted: Lifecycle,
) {
    let owned = when_deleted == Lifecycle::Delete;
    let has = s.cluster_owners.contains(&c.uid);
    let change = OwnerChange {
        namespace: s.namespace.clone(),
        name: s.name.clone(),
        cluster: cluster.to_owned(),
        owner_uid: c.uid.clone(),
    };
    if owned && !has {
        refs.add.push(change);
    } else if !owned && has {
        refs.remove.push(change);
    }
}

/// Fence recovery: the expired fence leases of the namespaces planned for; a lease whose
/// name is seen twice is skipped.
fn recover_fences(
    inv: &Inventory,
    planned: &Planned,
    names: &Names<'_>,
    skips: &mut Skips,
) -> Vec<FenceItem> {
    let mut recover = Vec::new();
    for l in &inv.leases {
        if !planned.contains(&l.namespace, None) {
            continue;
        }
        if names.seen_twice(Kind::Lease, &l.namespace, &l.name) {
            skips.skipped.push(Skipped {
                kind: Kind::Lease,
                namespace: l.namespace.clone(),
                name: l.name.clone(),
                reason: SkipReason::Duplicate,
                message: "another Lease has this name".to_owned(),
            });
        } else if l.expiry == Expiry::Expired {
            recover.push(FenceItem {
                namespace: l.namespace.clone(),
                name: l.name.clone(),
            });
        }
    }
    recover
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_coverage;
#[cfg(test)]
mod tests_scope;
