//! `kubectl vtsnap status`, pure: per shard the newest snapshot, the last run of its Job,
//! its schedule, the fence, restores in progress; per node the node helper. Shards with a
//! problem come first, each problem in words.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::jiff::Timestamp;
use k8s_openapi::jiff::tz::TimeZone;
use serde::Serialize;
use serde_json::Value;
use vtsnap_core::config::{Config, resolve_in};
use vtsnap_core::cron::Schedule;
use vtsnap_core::fence::lease_name;
use vtsnap_core::k8s_names::escape_controls;
use vtsnap_core::labels;
use vtsnap_core::naming::{KeyRange, TabletUid};
use vtsnap_core::restored::ANN_RESTORED_FROM;
use vtsnap_core::snapshot::{LABEL_CLUSTER, LABEL_KEYSPACE, LABEL_SHARD, Phase, VolumeSnapshot};
use vtsnap_gc::decide::{CoverageState, ShardCoverage};

use super::fields::{label, pod_ready, s};

/// What `observe` read for the status (objects as the API gives them).
#[derive(Debug, Clone, Default)]
pub struct Seen {
    pub snapshots: Vec<Value>,
    pub cronjobs: Vec<Value>,
    pub jobs: Vec<Value>,
    pub leases: Vec<Value>,
    pub tablet_pvcs: Vec<Value>,
    pub tablet_pods: Vec<Value>,
    pub node_helpers: Vec<Value>,
    /// Catch-up coverage per shard, from the GC's own decider (read-only).
    pub coverage: Vec<ShardCoverage>,
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

/// When `cron` (a CronJob object) fires next after `now`.
fn next_run(cron: &Value, now: Timestamp) -> NextRun {
    if cron.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true) {
        return NextRun::Never;
    }
    let schedule = match Schedule::parse(s(cron, "/spec/schedule")) {
        Ok(sc) => sc,
        Err(e) => return NextRun::Unknown { why: e.to_string() },
    };
    // The chart's CronJobs run in UTC unless `timeZone` says otherwise; a named zone is
    // read from the system's time zone database (/usr/share/zoneinfo).
    let tz = match s(cron, "/spec/timeZone") {
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
    pub namespace: String,
    pub cluster: String,
    pub keyspace: String,
    pub shard: String,
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

/// (namespace, cluster, keyspace, shard safe name)
type Key = (String, String, String, String);

fn job_result(j: &Value) -> &'static str {
    let done = |t: &str| {
        j.pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == t && c["status"] == "True"))
    };
    if done("Complete") {
        "succeeded"
    } else if done("Failed") {
        "failed"
    } else {
        "running"
    }
}

/// The status of every shard of the configured clusters that has tablets, snapshots or a
/// snapshot CronJob; problems first.
pub fn status(config: &Config, seen: &Seen, now: Timestamp) -> Status {
    let mut shards: BTreeMap<Key, ShardStatus> = BTreeMap::new();
    let mut entry = |ns: &str, cluster: &str, keyspace: &str, safe: &str| -> Option<Key> {
        config.cluster_in(ns, cluster)?;
        let shard = KeyRange::from_safe_name(safe).ok()?;
        let key = (
            ns.to_owned(),
            cluster.to_owned(),
            keyspace.to_owned(),
            safe.to_owned(),
        );
        shards.entry(key.clone()).or_insert_with(|| ShardStatus {
            namespace: ns.to_owned(),
            cluster: cluster.to_owned(),
            keyspace: keyspace.to_owned(),
            shard: shard.to_string(),
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
            fence: None,
            restores: Vec::new(),
            problems: Vec::new(),
        });
        Some(key)
    };
    for p in &seen.tablet_pvcs {
        let (ns, c, k, sh) = (
            s(p, "/metadata/namespace"),
            label(p, labels::CLUSTER),
            label(p, labels::KEYSPACE),
            label(p, labels::SHARD),
        );
        entry(ns, c, k, sh);
    }
    let reads: Vec<VolumeSnapshot> = seen
        .snapshots
        .iter()
        .filter_map(|v| VolumeSnapshot::read(v).ok())
        .collect();
    for r in &reads {
        entry(&r.namespace, &r.cluster, &r.keyspace, &r.shard.safe_name());
    }
    // The snapshot CronJobs live in the install's namespace: matched by their shard's
    // namespace too (docs/design.md §5.8).
    let mut crons: BTreeMap<Key, &Value> = BTreeMap::new();
    for c in &seen.cronjobs {
        let clusters = config
            .clusters
            .iter()
            .map(|c| (c.namespace.as_str(), c.name.as_str()));
        if let Some(key) = super::schedules::cron_shard(clusters, c) {
            crons.insert(key, c);
        }
    }
    let mut out_shards = Vec::new();
    for ((ns, cluster, keyspace, safe), mut st) in shards {
        let mine: Vec<&VolumeSnapshot> = reads
            .iter()
            .filter(|r| {
                r.namespace == ns
                    && r.cluster == cluster
                    && r.keyspace == keyspace
                    && r.shard.safe_name() == safe
            })
            .collect();
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
            mode: r.mode.map_or_else(
                || "?".to_owned(),
                |m| {
                    serde_json::to_value(m)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default()
                },
            ),
            phase: r
                .phase
                .map_or_else(|| "?".to_owned(), |p| <&str>::from(p).to_owned()),
            unusable: r.unusable.clone(),
        });
        if let Some(c) = seen.coverage.iter().find(|c| {
            c.namespace == ns
                && c.cluster == cluster
                && c.keyspace == keyspace
                && KeyRange::from_safe_name(&safe).is_ok_and(|k| k.to_string() == c.shard)
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
        if let Some(cron) =
            crons.get(&(ns.clone(), cluster.clone(), keyspace.clone(), safe.clone()))
        {
            st.schedule = Some(s(cron, "/spec/schedule").to_owned());
            st.suspended = cron.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true);
            st.next_run = next_run(cron, now);
        }
        st.last_run = seen
            .jobs
            .iter()
            .filter(|j| {
                label(j, LABEL_CLUSTER) == cluster
                    && label(j, LABEL_KEYSPACE) == keyspace
                    && label(j, LABEL_SHARD) == safe
            })
            .max_by_key(|j| s(j, "/metadata/creationTimestamp").to_owned())
            .map(|j| LastRun {
                job: s(j, "/metadata/name").to_owned(),
                result: job_result(j),
                finished: j
                    .pointer("/status/completionTime")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            });
        let lease = lease_name(&cluster, &keyspace, &safe);
        st.fence = seen
            .leases
            .iter()
            .find(|l| s(l, "/metadata/namespace") == ns && s(l, "/metadata/name") == lease)
            .map(|l| {
                let renewed = s(l, "/spec/renewTime").parse::<Timestamp>().ok();
                let secs = l
                    .pointer("/spec/leaseDurationSeconds")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                let expires = renewed.map(|r| r.as_second() + secs);
                Fence {
                    holder: s(l, "/spec/holderIdentity").to_owned(),
                    since: s(l, "/spec/acquireTime").to_owned(),
                    expires: expires
                        .and_then(|e| Timestamp::from_second(e).ok())
                        .map_or_else(|| "?".to_owned(), |t| t.to_string()),
                    expired: expires.is_none_or(|e| e < now.as_second()),
                }
            });
        st.restores = seen
            .tablet_pvcs
            .iter()
            .filter(|p| {
                s(p, "/metadata/namespace") == ns
                    && label(p, labels::CLUSTER) == cluster
                    && label(p, labels::KEYSPACE) == keyspace
                    && label(p, labels::SHARD) == safe
                    && s(p, "/status/phase") != "Bound"
            })
            .filter_map(|p| {
                let from = p
                    .pointer("/metadata/annotations")
                    .and_then(|a| a.get(ANN_RESTORED_FROM))
                    .and_then(Value::as_str)?;
                Some(Restore {
                    pvc: s(p, "/metadata/name").to_owned(),
                    snapshot: from.to_owned(),
                    phase: s(p, "/status/phase").to_owned(),
                })
            })
            .collect();
        st.problems = problems(config, &st);
        st.problems.extend(restored_after_reprovisioning(
            seen, &mine, &ns, &cluster, &keyspace, &safe,
        ));
        out_shards.push(st);
    }
    // Problems first; then by name.
    out_shards.sort_by_key(|s| s.problems.is_empty());
    Status {
        shards: out_shards,
        nodes: nodes(seen),
    }
}

/// A tablet restored from a snapshot although vtsnap re-provisioned it once (a record on a
/// snapshot of the shard names it): the GC leaves it to a person (docs/design.md §5.7).
fn restored_after_reprovisioning(
    seen: &Seen,
    mine: &[&VolumeSnapshot],
    ns: &str,
    cluster: &str,
    keyspace: &str,
    safe: &str,
) -> Vec<String> {
    let once: BTreeMap<TabletUid, Option<&str>> = mine
        .iter()
        .flat_map(|r| r.reprovisioned.iter().map(|(t, pvc)| (*t, pvc.as_deref())))
        .collect();
    seen.tablet_pvcs
        .iter()
        .filter(|p| {
            s(p, "/metadata/namespace") == ns
                && label(p, labels::CLUSTER) == cluster
                && label(p, labels::KEYSPACE) == keyspace
                && label(p, labels::SHARD) == safe
        })
        .filter_map(|p| {
            let from = p
                .pointer("/metadata/annotations")?
                .get(ANN_RESTORED_FROM)?
                .as_str()?;
            let uid: TabletUid = label(p, labels::TABLET_UID).parse().ok()?;
            // A record naming this very PVC is a re-provisioning not carried out yet.
            let recorded = once.get(&uid)?;
            (*recorded != Some(s(p, "/metadata/uid"))).then(|| {
                format!(
                    "tablet {uid} was restored from snapshot {} after vtsnap re-provisioned it once: it is not re-provisioned again; check its replication",
                    escape_controls(from)
                )
            })
        })
        .collect()
}

fn problems(config: &Config, st: &ShardStatus) -> Vec<String> {
    let mut out = Vec::new();
    let policy = config
        .cluster_in(&st.namespace, &st.cluster)
        .map(|c| resolve_in(c, &st.keyspace, &st.shard));
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
    out
}

fn nodes(seen: &Seen) -> Vec<NodeStatus> {
    let mut tablets: BTreeMap<&str, usize> = BTreeMap::new();
    for p in &seen.tablet_pods {
        let n = s(p, "/spec/nodeName");
        if !n.is_empty() {
            *tablets.entry(n).or_default() += 1;
        }
    }
    let helpers: BTreeSet<&str> = seen
        .node_helpers
        .iter()
        .filter(|p| pod_ready(p))
        .map(|p| s(p, "/spec/nodeName"))
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
