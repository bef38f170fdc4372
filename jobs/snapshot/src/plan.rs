//! `plan`: the run's own observe (the config's shard, its vtctld, its tablets) and its own
//! target decision ([`crate::run::decide::select`]), printed. Changes nothing; fails with
//! the run's errors, codes and exit codes.

use serde::Serialize;
use vtsnap_core::config::{Config, ResolvedPolicy};
use vtsnap_core::shard::ShardName;
use vtsnap_core::shard::{Issue, Shard, ShardRef};

use crate::run::RunError;
use crate::run::decide::select::{self, Refusal, Target};
use crate::run::observe;
use vtsnap_core::exit::Exit;

/// One row of the tablet table.
#[derive(Debug, Clone, Serialize)]
pub struct TabletRow {
    pub alias: String,
    #[serde(rename = "type")]
    pub vt_type: Option<String>,
    pub pool: Option<String>,
    pub ready: bool,
    pub lag_seconds: Option<u32>,
    pub replicating: Option<bool>,
    pub node: Option<String>,
    pub pod: Option<String>,
    pub pvc: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RefusalReport {
    pub code: &'static str,
    pub message: String,
    pub details: Refusal,
}

/// What `plan --output json` prints.
#[derive(Debug, Clone, Serialize)]
pub struct PlanReport {
    pub shard: ShardRef,
    pub vtctld: String,
    pub policy: ResolvedPolicy,
    pub tablets: Vec<TabletRow>,
    pub target: Option<Target>,
    pub refusal: Option<RefusalReport>,
    pub issues: Vec<Issue>,
}

impl PlanReport {
    pub fn exit(&self) -> Exit {
        if self.target.is_some() {
            Exit::Ok
        } else {
            Exit::Refused
        }
    }
}

fn rows(shard: &Shard) -> Vec<TabletRow> {
    shard
        .tablets
        .iter()
        .map(|t| TabletRow {
            alias: t.alias.to_string(),
            vt_type: t.vt_type.map(|x| x.name().to_owned()),
            pool: t.pool_type.clone(),
            ready: t.pod.as_ref().is_some_and(|p| p.ready && !p.terminating),
            lag_seconds: t
                .replication
                .as_ref()
                .filter(|r| !r.lag_unknown)
                .map(|r| r.lag_seconds),
            replicating: t
                .replication
                .as_ref()
                .map(|r| r.io_running && r.sql_running),
            node: t.pod.as_ref().and_then(|p| p.node.clone()),
            pod: t.pod.as_ref().map(|p| p.name.clone()),
            pvc: t.pvc.clone(),
        })
        .collect()
}

/// Observes the shard as a run does and reports the target a run would take.
pub async fn plan(
    config: &Config,
    name: &ShardName,
    kube: kube::Client,
) -> Result<PlanReport, RunError> {
    // observe
    let ctx = observe::context(config, name, &kube).await?;
    let span = tracing::info_span!("plan", shard = %ctx.shard);
    let _g = span.enter();
    let found = observe::shard(&ctx, &kube).await?;

    // decide
    let decision = select::select(&found, &ctx.policy.snapshot.target);

    // report
    let (target, refusal) = match decision {
        Ok(t) => (Some(t), None),
        Err(r) => (
            None,
            Some(RefusalReport {
                code: r.code(),
                message: r.to_string(),
                details: r,
            }),
        ),
    };
    Ok(PlanReport {
        vtctld: ctx.vtctld.endpoint().to_owned(),
        shard: ctx.shard,
        policy: ctx.policy,
        tablets: rows(&found),
        target,
        refusal,
        issues: found.issues,
    })
}
