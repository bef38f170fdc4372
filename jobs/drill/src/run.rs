//! `vtsnap-drill run` and `plan`: observe → decide → act → report for one shard.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use vtsnap_core::config::Config;
use vtsnap_core::shard::ShardName;

use crate::act;
use crate::decide::objects::{Owner, Settings};
use crate::decide::{self, Plan};
use crate::error::DrillError;
use crate::observe;
use crate::report::{Outcome, Summary};

/// What a run needs besides the config and the shard.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub settings: Settings,
    /// The drill Job (owner of the drill's objects).
    pub owner: Option<Owner>,
    /// Drill this snapshot instead of the rule's choice.
    pub snapshot: Option<String>,
    /// Decide and print only.
    pub plan_only: bool,
}

/// Runs (or plans) one shard's drill; the summary says how it ended.
pub async fn run(
    kube: &kube::Client,
    config: &Config,
    name: &ShardName,
    o: &RunOptions,
) -> Summary {
    let summary = Summary::new(format!("{}/{}/{}", name.cluster, name.keyspace, name.shard));
    let configured = match observe::shard_of(config, name) {
        Ok(c) => c,
        Err(e) => return summary.failed(&e),
    };
    let observed = match observe::observe(kube, &configured, o.snapshot.clone()).await {
        Ok(obs) => obs,
        Err(e) => return summary.failed(&e),
    };
    let plan = decide::plan(&observed, &o.settings, o.owner.as_ref(), Timestamp::now());
    if o.plan_only {
        return planned(summary, plan);
    }
    let (name_of, snapshot, record_for, pvc, pod) = match plan {
        Plan::Nothing { refusal } => return summary.refused(refusal),
        Plan::Drill {
            name,
            snapshot,
            record_for,
            pvc,
            pod,
        } => (name, snapshot, record_for, pvc, pod),
    };
    let mut summary = summary;
    summary.snapshot = Some(snapshot.clone());
    let catch_up = decide::catch_up(&observed, &snapshot);
    summary.catch_up = Some(catch_up.clone());
    // The Pod's own deadline, and a minute for the kubelet to report it.
    let limit = Duration::from_secs(o.settings.deadline_seconds.saturating_add(60));
    match act::drill(
        kube,
        &configured.shard.namespace,
        &name_of,
        &snapshot,
        &record_for,
        &pvc,
        &pod,
        limit,
        o.owner.as_ref().map(|w| w.name.clone()),
        &catch_up,
    )
    .await
    {
        Ok(done) => {
            summary.steps = done.steps;
            summary.left = done.left;
            match done.record {
                Some(r) => summary.drilled(r),
                None => summary,
            }
        }
        Err(e) => {
            if let DrillError::Watch { left, .. } = &e {
                summary.left.clone_from(left);
            }
            summary.failed(&e)
        }
    }
}

/// The summary of a plan only (`plan`, from the cluster or a dump).
pub fn planned(summary: Summary, plan: Plan) -> Summary {
    let mut s = summary;
    s.outcome = Outcome::Planned;
    if let Plan::Drill { snapshot, .. } = &plan {
        s.snapshot = Some(snapshot.clone());
    }
    s.plan = Some(plan);
    s
}
