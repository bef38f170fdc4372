//! Observe: what a drill of one shard is decided from (docs/design.md §5.9). Reads only:
//! the shard's vtsnap snapshots, vtctld's view of its tablets, one tablet Pod and its data
//! PVC, and the drill objects of the shard that still exist.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, ListParams};
use serde_json::Value;
use vtsnap_admission::decide::data_claim_of;
use vtsnap_admission::observe::{SnapshotRead, snapshot_of};
use vtsnap_admission::tablets::read_shard;
use vtsnap_core::config::{Config, ConfiguredShard};
use vtsnap_core::coverage::{read_primary, read_primary_at};
use vtsnap_core::discover;
use vtsnap_core::labels as op;
use vtsnap_core::labels::MANAGED_BY;
use vtsnap_core::naming::TabletAlias;
use vtsnap_core::reconcile::list;
use vtsnap_core::shard::{ShardName, ShardRef};
use vtsnap_core::snapshot::{self, VolumeSnapshot};
use vtsnap_core::vtctld::VtctldClient;
use vtsnap_core::vtctld::client::CallLimits;

use crate::decide::Observed;
use crate::error::DrillError;
use crate::objects::MANAGED_BY_DRILL;

/// The shard a run drills, resolved from the config.
pub fn shard_of(config: &Config, name: &ShardName) -> Result<ConfiguredShard, DrillError> {
    config
        .shard(name)
        .map_err(|e| DrillError::UnknownShard(e.to_string()))
}

/// `planetscale.com/cluster=…,keyspace=…,shard=…` of the shard's tablet objects.
pub fn tablet_selector(s: &ShardRef) -> String {
    format!(
        "{}={},{}={},{}={},{}={}",
        op::COMPONENT,
        op::COMPONENT_VTTABLET,
        op::CLUSTER,
        s.cluster,
        op::KEYSPACE,
        s.keyspace,
        op::SHARD,
        s.shard.safe_name()
    )
}

/// The label selector of the shard's drill objects.
pub fn drill_selector(s: &ShardRef) -> String {
    format!(
        "{MANAGED_BY}={MANAGED_BY_DRILL},{}={},{}={},{}={}",
        snapshot::LABEL_CLUSTER,
        s.cluster,
        snapshot::LABEL_KEYSPACE,
        s.keyspace,
        snapshot::LABEL_SHARD,
        s.shard.safe_name()
    )
}

fn read_err(what: &str) -> impl FnOnce(kube::Error) -> DrillError + '_ {
    move |source| DrillError::Kubernetes {
        reading: what.to_owned(),
        source,
    }
}

/// Everything [`crate::decide::plan`] needs for `configured`.
pub async fn observe(
    kube: &kube::Client,
    configured: &ConfiguredShard,
    named: Option<String>,
) -> Result<Observed, DrillError> {
    let shard = &configured.shard;
    let ns = &shard.namespace;

    let endpoint = discover::vtctld_endpoint(kube, ns, &shard.cluster, &configured.vtctld)
        .await
        .map_err(|e| DrillError::Vtctld(e.to_string()))?;
    let vtctld = VtctldClient::new(&endpoint, CallLimits::default())
        .map_err(|e| DrillError::Vtctld(e.to_string()))?;
    let state = read_shard(&vtctld, shard).await;
    // The shard record was just read: its primary is asked directly.
    let purged = match state.primary.as_deref().map(str::parse::<TabletAlias>) {
        Some(Ok(primary)) => read_primary_at(&vtctld, &primary).await,
        Some(Err(e)) => Err(format!("the shard record's primary: {e}")),
        None => read_primary(&vtctld, &shard.keyspace, &shard.shard).await,
    }
    .map(|p| p.purged);

    let snaps = vtsnap_core::reconcile::apis::volume_snapshots(kube, ns);
    let of_shard = format!(
        "{MANAGED_BY}={},{}={},{}={},{}={}",
        vtsnap_core::labels::MANAGED_BY_VTSNAP,
        snapshot::LABEL_CLUSTER,
        shard.cluster,
        snapshot::LABEL_KEYSPACE,
        shard.keyspace,
        snapshot::LABEL_SHARD,
        shard.shard.safe_name()
    );
    let listed = list::all(&snaps, &ListParams::default().labels(&of_shard))
        .await
        .map_err(read_err("VolumeSnapshots"))?;
    let snapshots: Vec<SnapshotRead> = listed
        .into_iter()
        .filter_map(|o| serde_json::to_value(o).ok())
        .filter(|o| VolumeSnapshot::is_vtsnaps(o) && snapshot_of(o, shard))
        .map(|o| VolumeSnapshot::read(&o))
        .collect();

    let pods: Api<Pod> = Api::namespaced(kube.clone(), ns);
    let tablets = list::all(
        &pods,
        &ListParams::default().labels(&tablet_selector(shard)),
    )
    .await
    .map_err(read_err("the shard's tablet Pods"))?;
    let mut tablet_pods: Vec<Value> = tablets
        .into_iter()
        .filter_map(|p| serde_json::to_value(p).ok())
        .collect();
    tablet_pods.sort_by_key(|p| p.pointer("/metadata/name").map(Value::to_string));
    let tablet_pod = tablet_pods.into_iter().find(|p| data_claim_of(p).is_some());
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(kube.clone(), ns);
    let tablet_pvc = match tablet_pod.as_ref().and_then(data_claim_of) {
        Some(claim) => pvcs
            .get_opt(&claim)
            .await
            .map_err(read_err("the tablet's data PVC"))?
            .and_then(|p| serde_json::to_value(p).ok()),
        None => None,
    };

    let drills = ListParams::default().labels(&drill_selector(shard));
    let mut leftovers: Vec<String> = list::all(&pvcs, &drills)
        .await
        .map_err(read_err("drill PVCs"))?
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .map(|n| format!("PersistentVolumeClaim/{n}"))
        .collect();
    leftovers.extend(
        list::all(&pods, &drills)
            .await
            .map_err(read_err("drill Pods"))?
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .map(|n| format!("Pod/{n}")),
    );

    Ok(Observed {
        shard: shard.clone(),
        restore: configured.policy.restore.clone(),
        snapshots,
        state,
        tablet_pvc,
        tablet_pod,
        leftovers,
        named,
        purged,
    })
}
