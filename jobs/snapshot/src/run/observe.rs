//! observe: the config lookups, the shard's fence lease, the shard's tablets, and for online
//! runs the target's crash-safety variables, and whether the primary waits for semi-sync
//! acknowledgements. Reads only (a dry run runs all of it).

use vtsnap_core::shard::ShardName;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use vtsnap_core::config::{Config, ConfiguredShard, ResolvedPolicy, ShardLookupError};
use vtsnap_core::discover;
use vtsnap_core::fence::{Fence, lease_name};
use vtsnap_core::mysql_version::Flavor;
use vtsnap_core::naming::TabletAlias;
use vtsnap_core::shard::{Shard, ShardRef};
use vtsnap_core::vtctld::client::CallLimits;
use vtsnap_core::vtctld::{VtctldClient, VtctldError};

use super::decide::semi_sync::{self, PrimaryAcks};
use super::decide::{ObservedFence, crash_safety_variables};
use super::error::RunError;

/// What a run works on, resolved from the config and flags.
#[derive(Debug)]
pub struct Context {
    pub shard: ShardRef,
    pub policy: ResolvedPolicy,
    pub vtctld: VtctldClient,
}

impl Context {
    pub fn lease_name(&self) -> String {
        lease_name(
            &self.shard.cluster,
            &self.shard.keyspace,
            &self.shard.shard.safe_name(),
        )
    }

    pub fn leases(&self, kube: &kube::Client) -> Api<Lease> {
        Api::namespaced(kube.clone(), &self.shard.namespace)
    }
}

/// Resolves the cluster, shard, policy and vtctld endpoint.
pub async fn context(
    config: &Config,
    name: &ShardName,
    kube: &kube::Client,
) -> Result<Context, RunError> {
    let ConfiguredShard {
        shard,
        policy,
        vtctld,
    } = config.shard(name).map_err(|e| match e {
        ShardLookupError::Cluster(l) => RunError::UnknownCluster(l),
        ShardLookupError::BadShard { shard, reason } => RunError::BadShard { shard, reason },
    })?;
    let endpoint = discover::vtctld_endpoint(kube, &shard.namespace, &name.cluster, &vtctld)
        .await
        .map_err(RunError::NoVtctld)?;
    let vtctld =
        VtctldClient::new(&endpoint, CallLimits::default()).map_err(RunError::BadVtctld)?;
    Ok(Context {
        shard,
        policy,
        vtctld,
    })
}

/// The shard's fence lease, if any, parsed; an unreadable one refuses the run. Reads only:
/// whether it is recovered is decided ([`super::decide::recovery`]) and done by act.
pub async fn fence(
    ctx: &Context,
    kube: &kube::Client,
) -> Result<Option<(Lease, ObservedFence)>, RunError> {
    let name = ctx.lease_name();
    let existing = ctx.leases(kube).get_opt(&name).await.map_err(|source| {
        RunError::KubernetesUnavailable {
            lease: name.clone(),
            source,
        }
    })?;
    let Some(l) = existing else { return Ok(None) };
    let fence = Fence::from_lease(&l).map_err(RunError::UnreadableFence)?;
    let holder = l
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.clone())
        .unwrap_or_default();
    Ok(Some((l, ObservedFence { fence, holder })))
}

/// The shard as discovery sees it: Pods, PVCs and vtctld's view, joined.
pub async fn shard(ctx: &Context, kube: &kube::Client) -> Result<Shard, RunError> {
    let observed = discover::observe(kube, &ctx.vtctld, &ctx.shard)
        .await
        .map_err(RunError::Discovery)?;
    let found = discover::build(&ctx.shard, &observed);
    for issue in &found.issues {
        tracing::warn!(?issue, shard = %ctx.shard, "shard issue");
    }
    Ok(found)
}

/// What an online run reads from its target before the fence.
#[derive(Debug, Clone)]
pub struct OnlineFacts {
    pub version: String,
    /// The GTID position before the cut: the snapshot's lower bound.
    pub lower_bound: String,
    pub flavor: Flavor,
    /// The values of [`crash_safety_variables`], in order.
    pub values: Vec<Option<String>>,
}

/// GetFullStatus and the crash-safety variables through ExecuteFetchAsDBA.
pub async fn online_facts(
    vtctld: &VtctldClient,
    alias: &TabletAlias,
) -> Result<OnlineFacts, RunError> {
    let fs = vtctld
        .get_full_status(alias)
        .await
        .map_err(RunError::VtctldUnavailable)?;
    let flavor = Flavor::of_version(&fs.version);
    let q = format!(
        "SELECT {}",
        crash_safety_variables(flavor)
            .iter()
            .map(|(v, _)| format!("@@global.{v}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let r = vtctld
        .execute_fetch_as_dba(alias, &q, 1)
        .await
        .map_err(RunError::VtctldUnavailable)?;
    Ok(OnlineFacts {
        lower_bound: fs
            .replication_status
            .map(|s| s.position)
            .unwrap_or_default(),
        version: fs.version,
        flavor,
        values: r.rows.first().map(|row| row.cells()).unwrap_or_default(),
    })
}

/// What the primary waits for before a commit returns (semi-sync), read only when the
/// plan takes the target's acknowledgements away (see [`semi_sync`]).
pub async fn primary_acks(
    vtctld: &VtctldClient,
    primary: &TabletAlias,
) -> Result<PrimaryAcks, RunError> {
    let unknown = |reason: String| RunError::SemiSyncUnknown {
        primary: primary.to_string(),
        reason,
    };
    for query in semi_sync::QUERIES {
        match vtctld.execute_fetch_as_dba(primary, query, 1).await {
            Ok(r) => {
                let cells = r.rows.first().map(|row| row.cells()).unwrap_or_default();
                let cell = |i: usize| cells.get(i).cloned().flatten();
                let count = cell(1);
                return semi_sync::parse(cell(0).as_deref(), count.as_deref())
                    .ok_or_else(|| unknown(format!("{query} answered {cells:?}")));
            }
            Err(VtctldError::Rpc { message, .. }) if semi_sync::is_unknown_variable(&message) => {}
            Err(e) => return Err(unknown(e.to_string())),
        }
    }
    // Neither flavor's variables exist: no semi-sync plugin is loaded.
    Ok(PrimaryAcks::NotRequired)
}
