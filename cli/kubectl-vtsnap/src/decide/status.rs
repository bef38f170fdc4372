//! `kubectl vtsnap status`, pure: per shard the newest snapshot, the last run of its Job,
//! its schedule, the fence, restores in progress; per node the node helper. Shards with a
//! problem come first, each problem in words.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::jiff::Timestamp;
use k8s_openapi::jiff::tz::TimeZone;
use serde::Serialize;
use vtsnap_core::config::{Config, ResolvedPitr, resolve_in};
use vtsnap_core::cron::Schedule;
use vtsnap_core::fence::lease_name;
use vtsnap_core::k8s_names::escape_controls;
use vtsnap_core::naming::TabletUid;
use vtsnap_core::pitr::chain::Span;
use vtsnap_core::reconcile::ObjectKey;
use vtsnap_core::shard::ShardRef;
use vtsnap_core::snapshot::{Phase, VolumeSnapshot, mode_label};
use vtsnap_gc::decide::{CoverageState, ShardCoverage};

use super::objects::{FenceLease, JobRun, PodOnNode, SnapshotCron, TabletPvc, Unreadable};

/// What `observe` read for the status.
#[derive(Debug, Clone, Default)]
pub struct Seen {
    pub snapshots: Vec<VolumeSnapshot>,
    pub cronjobs: Vec<SnapshotCron>,
    pub jobs: Vec<JobRun>,
    pub leases: Vec<FenceLease>,
    pub tablet_pvcs: Vec<TabletPvc>,
    pub tablet_pods: Vec<PodOnNode>,
    pub node_helpers: Vec<PodOnNode>,
    /// Catch-up coverage per shard, from the GC's own decider (read-only).
    pub coverage: Vec<ShardCoverage>,
    /// Objects that did not read (a snapshot without vtsnap's labels, …): the status
    /// passes over them.
    pub unreadable: Vec<Unreadable>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Newest {
    pub name: String,
    pub age_seconds: i64,
    pub mode: String,
    pub phase: String,
    /// Why restores pass over it, when the GC marked it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unusable: Option<String>,
}

/// The next scheduled run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum NextRun {
    At {
        time: String,
        in_seconds: i64,
    },
    /// Suspended, or a schedule that never fires (e.g. February 30th).
    Never,
    Unknown {
        why: String,
    },
}

/// When `cron` fires next after `now`.
fn next_run(cron: &SnapshotCron, now: Timestamp) -> NextRun {
    if cron.suspended {
        return NextRun::Never;
    }
    let schedule = match Schedule::parse(&cron.schedule) {
        Ok(sc) => sc,
        Err(e) => return NextRun::Unknown { why: e.to_string() },
    };
    // The chart's CronJobs run in UTC unless `timeZone` says otherwise; a named zone is
    // read from the system's time zone database (/usr/share/zoneinfo).
    let tz = match cron.time_zone.as_deref().unwrap_or_default() {
        "" | "UTC" | "Etc/UTC" => TimeZone::UTC,
        name => match TimeZone::get(name) {
            Ok(tz) => tz,
            Err(_) => {
                return NextRun::Unknown {
                    why: format!("time zone {} is not known here", escape_controls(name)),
                };
            }
        },
    };
    match schedule.next_after(now, &tz) {
        Some(t) => NextRun::At {
            time: t.to_string(),
            in_seconds: t.as_second() - now.as_second(),
        },
        None => NextRun::Never,
    }
}

/// Catch-up coverage as the status shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum Coverage {
    /// The newest covered snapshot; `headroom_seconds` until it stops being covered
    /// (`None`: the primary does not expire binlogs by time).
    Covered {
        newest_covered: String,
        headroom_seconds: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        warning: Option<String>,
    },
    /// Ready snapshots exist and none can catch up.
    NoneCovered,
    /// Not read (vtctld unreachable, no primary, …) or no ready snapshot.
    Unknown { why: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LastRun {
    pub job: String,
    /// `succeeded`, `failed` or `running`.
    pub result: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished: Option<String>,
}

/// The shard's most recent restore drill (`vtsnap.io/drill` on any of its snapshots).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LastDrill {
    pub snapshot: String,
    pub result: &'static str,
    pub age_seconds: i64,
    /// PVC bound + restore + mysqld ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rto_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The recoverable window the binlog archive job last recorded (docs/pitr.md §3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Recoverable {
    /// The snapshot that carries the record.
    pub snapshot: String,
    /// Any second of these spans can be recovered to, oldest first.
    pub spans: Vec<Span>,
    /// How long ago the window ends: the newest point a recovery can reach now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_age_seconds: Option<i64>,
    /// How long ago the archive job read the archive.
    pub checked_age_seconds: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fence {
    pub holder: String,
    pub since: String,
    pub expires: String,
    pub expired: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Restore {
    pub pvc: String,
    pub snapshot: String,
    pub phase: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShardStatus {
    /// `namespace`, `cluster`, `keyspace` and `shard` (the key range) in JSON.
    #[serde(flatten)]
    pub shard: ShardRef,
    /// The newest ready snapshot (else the newest of any phase).
    pub newest: Option<Newest>,
    pub ready_snapshots: usize,
    /// Whether a new tablet can catch up from a snapshot, and for how long.
    pub coverage: Coverage,
    pub schedule: Option<String>,
    pub suspended: bool,
    /// When the CronJob fires next (not while suspended).
    pub next_run: NextRun,
    pub last_run: Option<LastRun>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_drill: Option<LastDrill>,
    /// Point-in-time recovery, when the archive job has recorded a window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recoverable: Option<Recoverable>,
    pub fence: Option<Fence>,
    pub restores: Vec<Restore>,
    /// What needs a person, in words; empty when the shard is protected.
    pub problems: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeStatus {
    pub node: String,
    pub tablets: usize,
    pub helper_ready: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Status {
    pub shards: Vec<ShardStatus>,
    pub nodes: Vec<NodeStatus>,
}

impl ShardStatus {
    /// A shard of which nothing is known yet.
    fn new(shard: ShardRef) -> Self {
        Self {
            shard,
            newest: None,
            ready_snapshots: 0,
            coverage: Coverage::Unknown {
                why: "no ready snapshot".into(),
            },
            schedule: None,
            suspended: false,
            next_run: NextRun::Unknown {
                why: "no snapshot CronJob".into(),
            },
            last_run: None,
            last_drill: None,
            recoverable: None,
            fence: None,
            restores: Vec::new(),
            problems: Vec::new(),
        }
    }
}

/// The status of every shard of the configured clusters that has tablets, snapshots or a
/// snapshot CronJob; problems first.
pub fn status(config: &Config, seen: &Seen, now: Timestamp) -> Status {
    let configured: BTreeSet<ObjectKey> = config
        .clusters
        .iter()
        .map(|c| ObjectKey::new(&c.namespace, &c.name))
        .collect();
    let shards: BTreeSet<ShardRef> = seen
        .tablet_pvcs
        .iter()
        .map(|p| p.shard.clone())
        .chain(seen.snapshots.iter().map(VolumeSnapshot::shard_ref))
        .filter(|s| config.cluster_in(&s.namespace, &s.cluster).is_some())
        .collect();
    // The snapshot CronJobs live in the install's namespace: matched by their shard's
    // namespace too (docs/design.md §5.8).
    let crons: BTreeMap<ShardRef, &SnapshotCron> = seen
        .cronjobs
        .iter()
        .filter_map(|c| Some((super::schedules::cron_shard(&configured, c)?, c)))
        .collect();
    let mut out_shards: Vec<ShardStatus> = shards
        .into_iter()
        .map(|shard| shard_status(config, seen, &crons, shard, now))
        .collect();
    // Problems first; then by shard.
    out_shards.sort_by_key(|s| s.problems.is_empty());
    Status {
        shards: out_shards,
        nodes: nodes(seen),
    }
}

fn shard_status(
    config: &Config,
    seen: &Seen,
    crons: &BTreeMap<ShardRef, &SnapshotCron>,
    shard: ShardRef,
    now: Timestamp,
) -> ShardStatus {
    let mine: Vec<&VolumeSnapshot> = seen
        .snapshots
        .iter()
        .filter(|r| r.shard_ref() == shard)
        .collect();
    let mut st = ShardStatus::new(shard);
    let shard = &st.shard;
    let is_ready = |r: &&&VolumeSnapshot| r.phase == Some(Phase::Ready);
    st.ready_snapshots = mine.iter().filter(is_ready).count();
    let newest = mine
        .iter()
        .filter(is_ready)
        .max_by_key(|r| (r.created, r.name.clone()))
        .or_else(|| mine.iter().max_by_key(|r| (r.created, r.name.clone())));
    st.newest = newest.map(|r| Newest {
        name: r.name.clone(),
        age_seconds: r.created.map_or(0, |c| now.as_second() - c.as_second()),
        mode: r.mode.map_or("?", mode_label).to_owned(),
        phase: r.phase.map_or("?", Phase::as_str).to_owned(),
        unusable: r.unusable.clone(),
    });
    if let Some(c) = seen.coverage.iter().find(|c| {
        c.namespace == shard.namespace
            && c.cluster == shard.cluster
            && c.keyspace == shard.keyspace
            && c.shard == shard.shard.to_string()
    }) {
        st.coverage = match &c.state {
            CoverageState::Known {
                newest_covered: Some(n),
                headroom_seconds,
                warning,
                ..
            } => Coverage::Covered {
                newest_covered: n.clone(),
                headroom_seconds: *headroom_seconds,
                warning: warning.clone(),
            },
            CoverageState::Known {
                newest_covered: None,
                ..
            } => Coverage::NoneCovered,
            CoverageState::Unknown { why } => Coverage::Unknown { why: why.clone() },
        };
    }
    st.last_drill = mine
        .iter()
        // Only records that count (made for their snapshot, not from the future):
        // the rule the GC and the webhook apply (docs/design.md §5.9).
        .filter_map(|r| r.counted_drill(now).map(|d| (r, d)))
        .max_by_key(|(r, d)| (d.at, r.name.clone()))
        .map(|(r, d)| LastDrill {
            snapshot: r.name.clone(),
            result: d.result.as_str(),
            age_seconds: now.as_second() - d.at.as_second(),
            rto_ms: d.rto.map(|t| t.total_ms()),
            reason: d.reason.clone(),
        });
    st.recoverable = mine
        .iter()
        // Only records that count (written on their snapshot, not from the future); the
        // most recently checked one.
        .filter_map(|r| Some((r, r.pitr_window(now)?.ok()?)))
        .max_by_key(|(r, w)| (w.checked, r.name.clone()))
        .map(|(r, w)| Recoverable {
            snapshot: r.name.clone(),
            spans: w.spans.clone(),
            end_age_seconds: w.end().map(|e| now.as_second() - e.as_second()),
            checked_age_seconds: now.as_second() - w.checked.as_second(),
        });
    if let Some(cron) = crons.get(shard) {
        st.schedule = Some(cron.schedule.clone());
        st.suspended = cron.suspended;
        st.next_run = next_run(cron, now);
    }
    st.last_run = seen
        .jobs
        .iter()
        .filter(|j| shard.labelled_on(&j.labels))
        .max_by_key(|j| j.created)
        .map(|j| LastRun {
            job: j.name.clone(),
            result: j.result.as_str(),
            finished: j.finished.map(|t| t.to_string()),
        });
    st.fence = fence(seen, shard, now);
    st.restores = seen
        .tablet_pvcs
        .iter()
        .filter(|p| p.shard == *shard && p.phase.as_deref() != Some("Bound"))
        .filter_map(|p| {
            Some(Restore {
                pvc: p.key.name.clone(),
                snapshot: p.restored_from.clone()?,
                phase: p.phase.clone().unwrap_or_default(),
            })
        })
        .collect();
    let mut problems = problems(config, &st, now);
    problems.extend(restored_after_reprovisioning(seen, &mine, &st.shard));
    st.problems = problems;
    st
}

/// The shard's fence Lease, if one is held (in the shard's own namespace).
fn fence(seen: &Seen, shard: &ShardRef, now: Timestamp) -> Option<Fence> {
    let name = lease_name(&shard.cluster, &shard.keyspace, &shard.shard.safe_name());
    let l: &FenceLease = seen
        .leases
        .iter()
        .find(|l| l.key.namespace == shard.namespace && l.key.name == name)?;
    let expires = l.renewed.map(|r| r.as_second() + l.duration_seconds);
    Some(Fence {
        holder: l.holder.clone().unwrap_or_default(),
        since: l.acquired.map(|t| t.to_string()).unwrap_or_default(),
        expires: expires
            .and_then(|e| Timestamp::from_second(e).ok())
            .map_or_else(|| "?".to_owned(), |t| t.to_string()),
        expired: expires.is_none_or(|e| e < now.as_second()),
    })
}

/// A tablet restored from a snapshot although vtsnap re-provisioned it once (a record on a
/// snapshot of the shard names it): the GC leaves it to a person (docs/design.md §5.7).
fn restored_after_reprovisioning(
    seen: &Seen,
    mine: &[&VolumeSnapshot],
    shard: &ShardRef,
) -> Vec<String> {
    let once: BTreeMap<TabletUid, Option<&str>> = mine
        .iter()
        .flat_map(|r| r.reprovisioned.iter().map(|(t, pvc)| (*t, pvc.as_deref())))
        .collect();
    seen.tablet_pvcs
        .iter()
        .filter(|p| p.shard == *shard)
        .filter_map(|p| {
            let from = p.restored_from.as_deref()?;
            let uid = p.tablet_uid?;
            // A record naming this very PVC is a re-provisioning not carried out yet.
            let recorded = once.get(&uid)?;
            let this_pvc = recorded.is_some_and(|r| Some(r) == p.uid.as_deref());
            (!this_pvc).then(|| {
                format!(
                    "tablet {uid} was restored from snapshot {} after vtsnap re-provisioned it once: it is not re-provisioned again; check its replication",
                    escape_controls(from)
                )
            })
        })
        .collect()
}

fn problems(config: &Config, st: &ShardStatus, now: Timestamp) -> Vec<String> {
    let mut out = Vec::new();
    let policy = config
        .cluster_in(&st.shard.namespace, &st.shard.cluster)
        .map(|c| resolve_in(c, &st.shard.keyspace, &st.shard.shard.to_string()));
    match &st.newest {
        None => out.push("no snapshot".to_owned()),
        Some(_) if st.ready_snapshots == 0 => out.push("no ready snapshot".to_owned()),
        Some(n) => {
            if let Some(why) = &n.unusable {
                out.push(format!(
                    "newest ready snapshot {} is unusable: {why}",
                    n.name
                ));
            }
            let max = policy.as_ref().map_or(i64::MAX, |p| {
                i64::try_from(p.restore.max_snapshot_age.get().as_secs()).unwrap_or(i64::MAX)
            });
            if n.age_seconds >= max {
                out.push(format!(
                    "newest ready snapshot {} is {}h old, past restore.maxSnapshotAge: new tablets get none",
                    n.name,
                    n.age_seconds / 3600
                ));
            }
        }
    }
    match &st.coverage {
        Coverage::NoneCovered => out
            .push("no ready snapshot can catch up: the primary purged past all of them".to_owned()),
        Coverage::Covered {
            warning: Some(w), ..
        } => out.push(w.clone()),
        _ => {}
    }
    if let Some(d) = &st.last_drill
        && d.reason.is_some()
    {
        out.push(format!(
            "the last restore drill ({}) failed: {}",
            d.snapshot,
            escape_controls(d.reason.as_deref().unwrap_or_default())
        ));
    }
    if st.schedule.is_none() {
        out.push("no snapshot CronJob".to_owned());
    } else if st.suspended {
        out.push("its snapshot CronJob is suspended".to_owned());
    }
    if let Some(r) = &st.last_run
        && r.result == "failed"
    {
        out.push(format!("the last snapshot Job {} failed", r.job));
    }
    if let Some(f) = &st.fence
        && f.expired
    {
        out.push(format!(
            "a fence held by {} expired at {}: the GC or the node helper recovers it",
            f.holder, f.expires
        ));
    }
    out.extend(
        policy
            .as_ref()
            .and_then(|p| archive_problem(&p.pitr, st, now)),
    );
    out
}

/// How long an archive run may take before its reading is due: a run's start and its
/// backup (docs/pitr.md §3).
const ARCHIVE_GRACE_SECONDS: i64 = 600;

/// With `pitr.enabled` (and not suspended): no window recorded, or the archive job has not
/// read the archive for two runs of its schedule (UTC) and [`ARCHIVE_GRACE_SECONDS`].
fn archive_problem(policy: &ResolvedPitr, st: &ShardStatus, now: Timestamp) -> Option<String> {
    if !policy.enabled || policy.suspend {
        return None;
    }
    let Some(r) = &st.recoverable else {
        return Some(
            "pitr.enabled, but no recoverable window is recorded: the binlog archive has not run, or has not read the archive"
                .to_owned(),
        );
    };
    let checked = Timestamp::from_second(now.as_second() - r.checked_age_seconds).ok()?;
    let schedule = Schedule::parse(&policy.schedule).ok()?;
    let second_run = schedule
        .next_after(checked, &TimeZone::UTC)
        .and_then(|first| schedule.next_after(first, &TimeZone::UTC))?;
    (now.as_second() > second_run.as_second() + ARCHIVE_GRACE_SECONDS).then(|| {
        format!(
            "the binlog archive was last read {}m ago, more than two runs of {:?}: its CronJob is not running or failing",
            r.checked_age_seconds / 60,
            policy.schedule
        )
    })
}

fn nodes(seen: &Seen) -> Vec<NodeStatus> {
    let mut tablets: BTreeMap<&str, usize> = BTreeMap::new();
    for n in seen.tablet_pods.iter().filter_map(|p| p.node.as_deref()) {
        *tablets.entry(n).or_default() += 1;
    }
    let helpers: BTreeSet<&str> = seen
        .node_helpers
        .iter()
        .filter(|p| p.ready)
        .filter_map(|p| p.node.as_deref())
        .collect();
    let mut out: Vec<NodeStatus> = tablets
        .into_iter()
        .map(|(node, n)| NodeStatus {
            node: node.to_owned(),
            tablets: n,
            helper_ready: helpers.contains(node),
        })
        .collect();
    out.sort_by_key(|n| n.helper_ready);
    out
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
