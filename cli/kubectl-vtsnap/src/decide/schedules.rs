//! The doctor's schedule check, pure: every shard of the configured clusters' specs has a
//! snapshot CronJob, and the schedule reconciler's last run succeeded. A shard without one
//! is a silent gap: nothing snapshots it, and `status` (which starts from the CronJobs and
//! snapshots) does not list it. Also which shard a CronJob is for, for `status` too.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use vtsnap_core::naming::safe_shard_name;
use vtsnap_core::snapshot::{LABEL_CLUSTER, LABEL_KEYSPACE, LABEL_SHARD};
use vtsnap_snapshot::schedule::names::{ANN_SHARD, ShardKey};

use super::fields::{label, s};
pub use super::world::SpecShard;
use super::world::{Check, World};

/// `(namespace, cluster, keyspace, shard safe name)` a snapshot CronJob is for, among the
/// configured `(namespace, cluster)`s. The CronJobs live in the install's namespace, so the
/// shard's namespace is the reconciler's record's; a CronJob without one (the chart's own)
/// is its cluster's only configured namespace's, and nobody's when that cluster's name is
/// configured in two (docs/design.md §5.8). `None` also when its labels and record disagree.
pub fn cron_shard<'a>(
    clusters: impl IntoIterator<Item = (&'a str, &'a str)>,
    cron: &Value,
) -> Option<(String, String, String, String)> {
    let (cluster, keyspace, shard) = (
        label(cron, LABEL_CLUSTER),
        label(cron, LABEL_KEYSPACE),
        label(cron, LABEL_SHARD),
    );
    let recorded = cron
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(ANN_SHARD))
        .and_then(Value::as_str);
    let namespace = match recorded {
        Some(record) => {
            let key = ShardKey::parse(record).ok()?;
            let labelled = (cluster, keyspace, shard);
            if (
                key.cluster.as_str(),
                key.keyspace.as_str(),
                safe_shard_name(&key.shard).as_str(),
            ) != labelled
            {
                return None;
            }
            key.namespace
        }
        None => {
            let mut namespaces: BTreeSet<&str> = clusters
                .into_iter()
                .filter(|(_, name)| *name == cluster)
                .map(|(namespace, _)| namespace)
                .collect();
            let only = namespaces.pop_first()?;
            if !namespaces.is_empty() {
                return None;
            }
            only.to_owned()
        }
    };
    Some((
        namespace,
        cluster.to_owned(),
        keyspace.to_owned(),
        shard.to_owned(),
    ))
}

/// A Job that ended `Failed`.
fn failed(job: &Value) -> bool {
    job.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Failed" && c["status"] == "True")
        })
}

pub(super) fn schedules(w: &World) -> Check {
    const ID: &str = "schedules";
    let (shards, crons) = match (&w.spec_shards, &w.snapshot_cronjobs) {
        (Ok(s), Ok(c)) => (s, c),
        (Err(e), _) | (_, Err(e)) => {
            return Check::warn(
                ID,
                format!("not checked: {e}"),
                "run doctor as a user who may get vitessclusters and list cronjobs",
            );
        }
    };
    let mut have: BTreeMap<(String, String, String, String), Vec<&str>> = BTreeMap::new();
    // The configured clusters; the spec's when the config is not valid (its own check).
    let clusters: BTreeSet<(&str, &str)> = match &w.config {
        Ok(config) => config
            .clusters
            .iter()
            .map(|c| (c.namespace.as_str(), c.name.as_str()))
            .collect(),
        Err(_) => shards
            .iter()
            .map(|(ns, cluster, _, _)| (ns.as_str(), cluster.as_str()))
            .collect(),
    };
    for c in crons {
        if let Some(key) = cron_shard(clusters.iter().copied(), c) {
            have.entry(key).or_default().push(s(c, "/metadata/name"));
        }
    }
    let missing: Vec<String> = shards
        .iter()
        .filter(|(ns, cluster, keyspace, shard)| {
            !have.contains_key(&(
                ns.clone(),
                cluster.clone(),
                keyspace.clone(),
                safe_shard_name(shard),
            ))
        })
        .map(|(ns, cluster, keyspace, shard)| format!("{ns}/{cluster}/{keyspace}/{shard}"))
        .collect();
    let twice: Vec<String> = have
        .iter()
        .filter(|(_, names)| names.len() > 1)
        .map(|((ns, cluster, keyspace, shard), names)| {
            format!("{ns}/{cluster}/{keyspace}/{shard} ({})", names.join(", "))
        })
        .collect();
    // The newest reconciler Job (by creation), if it failed.
    let last = w.reconciler_jobs.as_ref().ok().and_then(|jobs| {
        jobs.iter()
            .max_by_key(|j| s(j, "/metadata/creationTimestamp").to_owned())
    });
    let last_failed = last
        .filter(|j| failed(j))
        .map(|j| s(j, "/metadata/name").to_owned());
    if !missing.is_empty() {
        let fix = match &last_failed {
            Some(job) => format!("the schedule reconciler's last run failed: kubectl logs job/{job}"),
            None => "wait for the schedule reconciler's next run (every 5 minutes), or check it is enabled (snapshot.reconcile.enabled)".to_owned(),
        };
        return Check::fail(
            ID,
            format!(
                "{} shard(s) without a snapshot CronJob, so never snapshotted: {}",
                missing.len(),
                missing.join(", ")
            ),
            fix,
        );
    }
    if !twice.is_empty() {
        return Check::warn(
            ID,
            format!(
                "{} shard(s) with more than one snapshot CronJob, each of which runs: {}",
                twice.len(),
                twice.join("; ")
            ),
            "the schedule reconciler keeps a second CronJob of a shard rather than delete it: delete the one its plan reports as duplicate (vtsnap-snapshot schedule plan)",
        );
    }
    if let Some(job) = last_failed {
        return Check::warn(
            ID,
            format!(
                "every shard has its snapshot CronJob, but the schedule reconciler's last run ({job}) failed"
            ),
            format!("kubectl logs job/{job}"),
        );
    }
    Check::pass(
        ID,
        format!(
            "each of the {} shard(s) of the configured clusters has its snapshot CronJob",
            shards.len()
        ),
    )
}
