//! `run`: one snapshot of one shard (docs/design.md §5.1 cold, §5.2 online).
//!
//! observe (config, the shard's fence lease and its tablets; reads only) → decide (a live
//! fence refuses, an expired one is recovered first; a [`SnapshotPlan`]: the target and the
//! ordered steps with their undo steps, pure and printable with `--dry-run`, which writes
//! nothing) → act (the recovery, then the shard observed again and the plan decided on it;
//! the steps in order; the undo stack
//! unwinds on every exit path, each undo attempted even if an earlier one failed, and a
//! fence that cannot be fully released is left to expire for the node helper, the next
//! run or the GC — exit 4) → report (one JSON summary, exit code).

pub mod act;
pub mod decide;
pub mod error;
pub mod fence;
pub mod observe;
pub mod report;

use std::time::Duration;
use vtsnap_core::shard::ShardName;

use k8s_openapi::jiff::Timestamp;
use tracing::Instrument;
use vtsnap_core::config::{Config, Mode};

pub use decide::{SnapshotPlan, Step, Undo};
pub use error::RunError;
pub use report::{Outcome, StepTiming, Summary};

/// How a run behaves beyond the config.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub mode: Option<Mode>,
    pub dry_run: bool,
    /// The job's identity on the lease (its pod name).
    pub holder: String,
    pub lease_duration: Duration,
    /// How long to wait for the node helper to answer a request.
    pub node_timeout: Duration,
    /// How often snapshot status is read.
    pub poll: Duration,
    /// Tests only: called with each step's name; returning true parks the run there for
    /// ever, so a test can abort it exactly after that step (as a killed job).
    pub park_after: Option<ParkHook>,
}

/// See [`RunOptions::park_after`].
#[derive(Clone)]
pub struct ParkHook(pub std::sync::Arc<dyn Fn(&str) -> bool + Send + Sync>);

impl std::fmt::Debug for ParkHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ParkHook")
    }
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            mode: None,
            dry_run: false,
            holder: std::env::var("HOSTNAME").unwrap_or_else(|_| "vtsnap-snapshot".into()),
            lease_duration: Duration::from_secs(30),
            node_timeout: Duration::from_secs(600),
            poll: Duration::from_secs(1),
            park_after: None,
        }
    }
}

/// Runs one snapshot; never panics, always returns a summary with its exit code.
pub async fn run(
    config: &Config,
    shard: &ShardName,
    opts: &RunOptions,
    kube: kube::Client,
) -> Summary {
    let summary = Summary {
        shard: shard.to_string(),
        dry_run: opts.dry_run,
        ..Summary::default()
    };
    let span = tracing::info_span!("run", shard = %summary.shard);
    let (summary, result) = execute(config, shard, opts, kube, summary)
        .instrument(span)
        .await;
    summary.finish(result)
}

async fn execute(
    config: &Config,
    shard: &ShardName,
    opts: &RunOptions,
    kube: kube::Client,
    mut summary: Summary,
) -> (Summary, Result<(), RunError>) {
    // observe
    let ctx = match observe::context(config, shard, &kube).await {
        Ok(c) => c,
        Err(e) => return (summary, Err(e)),
    };
    let mode = opts.mode.unwrap_or(ctx.policy.snapshot.mode);
    summary.mode = Some(mode);
    let lease = match observe::fence(&ctx, &kube).await {
        Ok(l) => l,
        Err(e) => return (summary, Err(e)),
    };
    // decide on the fence before anything else is read: a live one refuses (exit 3)
    // whatever the shard's state, an expired one is recovered first
    let recovery =
        match decide::recovery::recovery(lease.as_ref().map(|(_, o)| o), Timestamp::now()) {
            Ok(r) => r,
            Err(h) => {
                return (
                    summary,
                    Err(RunError::Fenced {
                        lease: h.lease,
                        holder: h.holder,
                    }),
                );
            }
        };
    let mut found = match observe::shard(&ctx, &kube).await {
        Ok(s) => s,
        Err(e) => return (summary, Err(e)),
    };

    // decide: the plan
    if opts.dry_run {
        // Nothing is written: the plan says what the run would recover and snapshot.
        if let Some(r) = &recovery {
            summary
                .steps
                .push(format!("dry run: would {}", r.describe()));
        }
        let mut plan = match decide::decide(&found, &summary.shard, &ctx.policy, mode) {
            Ok(p) => p,
            Err(e) => return (summary, Err(e.into())),
        };
        if let Err(e) = keeps_acks(&ctx, &found, &plan).await {
            return (summary, Err(e));
        }
        plan.recover = recovery;
        summary.target = Some(plan.target.target.alias.clone());
        summary.steps.push(format!(
            "dry run: would snapshot {} ({} mode) on node {}",
            plan.target.target.alias,
            decide::mode_name(mode),
            plan.target.target.node
        ));
        summary.plan = Some(plan);
        return (summary, Ok(()));
    }

    // act: the recovery changes the shard (the fenced tablet is back), so the target is
    // chosen on the shard as it is after it
    if let (Some(r), Some((l, _))) = (&recovery, &lease) {
        match act::recover_fence(&ctx, &kube, l, opts.node_timeout).await {
            Ok(name) => {
                summary.steps.push(format!("recover expired fence {name}"));
                summary.recovered_fence = Some(name);
            }
            Err(e) => return (summary, Err(e)),
        }
        tracing::info!(tablet = %r.tablet, shard = %ctx.shard, "fence recovered; observing again");
        found = match observe::shard(&ctx, &kube).await {
            Ok(s) => s,
            Err(e) => return (summary, Err(e)),
        };
    }
    let plan = match decide::decide(&found, &summary.shard, &ctx.policy, mode) {
        Ok(p) => p,
        Err(e) => return (summary, Err(e.into())),
    };
    if let Err(e) = keeps_acks(&ctx, &found, &plan).await {
        return (summary, Err(e));
    }
    summary.target = Some(plan.target.target.alias.clone());
    let mut actor = act::Actor::new(kube, &ctx, opts, &plan, summary);
    let result = actor.run().await;
    (actor.summary, result)
}

/// Refuses a plan that would leave the primary too few semi-sync acknowledgements; reads
/// the primary's variables only when the plan takes the target's away.
async fn keeps_acks(
    ctx: &observe::Context,
    found: &vtsnap_core::shard::Shard,
    plan: &SnapshotPlan,
) -> Result<(), RunError> {
    let Some(primary) = found
        .primary
        .as_ref()
        .filter(|_| decide::semi_sync::stops_acks(plan))
    else {
        return Ok(());
    };
    let acks = observe::primary_acks(&ctx.vtctld, primary).await?;
    decide::semi_sync::check(found, plan, acks)
        .map_err(|e| RunError::NoPlan(decide::NoPlan::SemiSyncAcks(e)))
}
