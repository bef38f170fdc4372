//! `plan`: observe the shard, decide the target, report. Changes nothing.

use serde::Serialize;
use vtsnap_core::config::{Config, ConfiguredShard, LookupError, ResolvedPolicy, ShardLookupError};
use vtsnap_core::discover::{self, DiscoverError};
use vtsnap_core::select::{self, Refusal, Target};
use vtsnap_core::shard::ShardName;
use vtsnap_core::shard::{Issue, Shard, ShardRef};
use vtsnap_core::vtctld::client::CallLimits;
use vtsnap_core::vtctld::{VtctldClient, VtctldError};

use vtsnap_core::exit::Exit;

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Lookup(#[from] LookupError),
    #[error("--shard {shard:?}: {reason}")]
    BadShard { shard: String, reason: String },
    #[error(transparent)]
    Discover(#[from] DiscoverError),
    #[error(transparent)]
    Vtctld(#[from] VtctldError),
}

impl PlanError {
    pub fn exit(&self) -> Exit {
        match self {
            Self::Lookup(_) | Self::BadShard { .. } => Exit::Usage,
            Self::Discover(_) | Self::Vtctld(_) => Exit::Failed,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            Self::Lookup(_) => "unknown-cluster",
            Self::BadShard { .. } => "bad-shard",
            Self::Discover(DiscoverError::Vtctld(_)) | Self::Vtctld(_) => "vtctld-unavailable",
            Self::Discover(DiscoverError::NoVtctld { .. }) => "no-vtctld",
            Self::Discover(DiscoverError::Kube { .. }) => "kubernetes-unavailable",
        }
    }
}

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

/// Decide: the target for an observed shard under a resolved policy. Pure.
pub fn decide(shard: &Shard, policy: &ResolvedPolicy) -> Result<Target, Refusal> {
    select::select(shard, &policy.snapshot.target)
}

/// Observes the shard and plans a snapshot of it.
pub async fn plan(
    config: &Config,
    name: &ShardName,
    kube: kube::Client,
) -> Result<PlanReport, PlanError> {
    let ConfiguredShard {
        shard: shard_ref,
        policy,
        vtctld: setting,
    } = config.shard(name).map_err(|e| match e {
        ShardLookupError::Cluster(l) => PlanError::Lookup(l),
        ShardLookupError::BadShard { shard, reason } => PlanError::BadShard { shard, reason },
    })?;
    let span = tracing::info_span!("plan", shard = %shard_ref);
    let _g = span.enter();

    // observe
    let endpoint =
        discover::vtctld_endpoint(&kube, &shard_ref.namespace, &name.cluster, &setting).await?;
    let vtctld = VtctldClient::new(&endpoint, CallLimits::default())?;
    let observed = discover::observe(&kube, &vtctld, &shard_ref).await?;
    let found = discover::build(&shard_ref, &observed);
    for issue in &found.issues {
        tracing::warn!(?issue, "shard issue");
    }

    // decide
    let decision = decide(&found, &policy);

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
        shard: shard_ref,
        vtctld: endpoint,
        policy,
        tablets: rows(&found),
        target,
        refusal,
        issues: found.issues,
    })
}
