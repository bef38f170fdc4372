//! The doctor's schedule check, pure: every shard of the configured clusters' specs has a
//! snapshot CronJob, and the schedule reconciler's last run succeeded. A shard without one
//! is a silent gap: nothing snapshots it, and `status` (which starts from the CronJobs and
//! snapshots) does not list it.

use std::collections::BTreeSet;

use serde_json::Value;
use vtsnap_core::naming::safe_shard_name;
use vtsnap_core::snapshot::{LABEL_CLUSTER, LABEL_KEYSPACE, LABEL_SHARD};

use super::doctor::{Check, World};
use super::fields::{label, s};

/// `(namespace, cluster, keyspace, shard)` of a VitessCluster's spec.
pub type SpecShard = (String, String, String, String);

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
    let have: BTreeSet<(&str, &str, &str)> = crons
        .iter()
        .map(|c| {
            (
                label(c, LABEL_CLUSTER),
                label(c, LABEL_KEYSPACE),
                label(c, LABEL_SHARD),
            )
        })
        .collect();
    let missing: Vec<String> = shards
        .iter()
        .filter(|(_, cluster, keyspace, shard)| {
            !have.contains(&(
                cluster.as_str(),
                keyspace.as_str(),
                safe_shard_name(shard).as_str(),
            ))
        })
        .map(|(ns, cluster, keyspace, shard)| format!("{ns}/{cluster}/{keyspace}/{shard}"))
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
