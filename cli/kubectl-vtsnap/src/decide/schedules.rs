//! The doctor's schedule check, pure: every shard of the configured clusters' specs has a
//! snapshot CronJob, and the schedule reconciler's last run succeeded. A shard without one
//! is a silent gap: nothing snapshots it, and `status` (which starts from the CronJobs and
//! snapshots) does not list it. Also which shard a CronJob is for, for `status` too.

use std::collections::{BTreeMap, BTreeSet};

use vtsnap_core::reconcile::ObjectKey;
use vtsnap_core::shard::LABEL_CLUSTER;
use vtsnap_core::shard::ShardRef;

use super::objects::{JobResult, SnapshotCron};
use super::world::{Check, World};

/// The shard a snapshot CronJob is for, among the configured clusters. The CronJobs live
/// in the install's namespace, so the shard's namespace is the reconciler's record's; a
/// CronJob without one (the chart's own) is its cluster's only configured namespace's, and
/// nobody's when that cluster's name is configured in two (docs/design.md §5.8). `None`
/// also when its labels and record disagree, or its labels name no shard.
pub fn cron_shard(clusters: &BTreeSet<ObjectKey>, cron: &SnapshotCron) -> Option<ShardRef> {
    if let Some(record) = &cron.recorded {
        return record.labelled_on(&cron.labels).then(|| record.clone());
    }
    let cluster = cron.labels.get(LABEL_CLUSTER)?;
    let mut namespaces = clusters.iter().filter(|c| &c.name == cluster);
    let only = namespaces.next()?;
    if namespaces.next().is_some() {
        return None;
    }
    ShardRef::from_labels(&only.namespace, &cron.labels).ok()
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
    let mut have: BTreeMap<ShardRef, Vec<&str>> = BTreeMap::new();
    // The configured clusters; the spec's when the config is not valid (its own check).
    let clusters: BTreeSet<ObjectKey> = match &w.config {
        Ok(config) => config
            .clusters
            .iter()
            .map(|c| ObjectKey::new(&c.namespace, &c.name))
            .collect(),
        Err(_) => shards.iter().map(ShardRef::cluster_key).collect(),
    };
    for c in crons {
        if let Some(key) = cron_shard(&clusters, c) {
            have.entry(key).or_default().push(&c.name);
        }
    }
    let missing: Vec<String> = shards
        .iter()
        .filter(|shard| !have.contains_key(shard))
        .map(ToString::to_string)
        .collect();
    // Named by the label-safe shard name, as the CronJobs' labels have it.
    let twice: Vec<String> = have
        .iter()
        .filter(|(_, names)| names.len() > 1)
        .map(|(shard, names)| {
            format!(
                "{}/{}/{}/{} ({})",
                shard.namespace,
                shard.cluster,
                shard.keyspace,
                shard.safe_name(),
                names.join(", ")
            )
        })
        .collect();
    // The newest reconciler Job (by creation), if it failed.
    let last = w
        .reconciler_jobs
        .as_ref()
        .ok()
        .and_then(|jobs| jobs.iter().max_by_key(|j| j.created));
    let last_failed = last
        .filter(|j| j.result == JobResult::Failed)
        .map(|j| j.name.clone());
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
