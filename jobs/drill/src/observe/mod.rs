//! Observe: what a drill of one shard is decided from (docs/design.md §5.9), read into
//! plain values ([`Observed`]). Reads only: the shard's vtsnap snapshots, vtctld's view of
//! its tablets, one tablet Pod and its data PVC, and the drill objects of the shard that
//! still exist — from the API ([`observe`]) or from a dump ([`dump`]). Also read here: the
//! drill Pod's status as the Job watches it ([`pod`]), and the restored server as the
//! checker probes it ([`server`]).

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, ListParams};
use vtsnap_core::config::{Config, ConfiguredShard, ResolvedRestore};
use vtsnap_core::coverage::{Purged, read_primary, read_primary_at};
use vtsnap_core::discover;
use vtsnap_core::discover::versions::read_shard;
use vtsnap_core::labels::MANAGED_BY;
use vtsnap_core::naming::TabletAlias;
use vtsnap_core::reconcile::list;
use vtsnap_core::shard::{LABEL_CLUSTER, LABEL_KEYSPACE, LABEL_SHARD};
use vtsnap_core::shard::{ShardName, ShardRef};
use vtsnap_core::snapshot::choice::ShardState;
use vtsnap_core::snapshot::{SnapshotRead, VolumeSnapshot};
use vtsnap_core::tablet_volume::read_shape_tablet;
pub use vtsnap_core::tablet_volume::{TabletPod, TabletPodUnreadable, TabletPvc, tablet_selector};
use vtsnap_core::vtctld::VtctldClient;
use vtsnap_core::vtctld::client::CallLimits;

use crate::decide::objects::MANAGED_BY_DRILL;
use crate::error::DrillError;

pub mod dump;
pub mod pod;
pub mod server;

/// What the drill Job saw of its shard.
#[derive(Debug, Clone)]
pub struct Observed {
    pub shard: ShardRef,
    pub restore: ResolvedRestore,
    pub snapshots: Vec<SnapshotRead>,
    /// vtctld's view (the shard's MySQL series).
    pub state: ShardState,
    /// A tablet PVC of the shard (its StorageClass and size).
    pub tablet_pvc: Option<TabletPvc>,
    /// A tablet Pod of the shard (its mysqld image and security context).
    pub tablet_pod: Option<TabletPod>,
    /// Drill objects of the shard that still exist (another drill runs, or a killed one's
    /// objects wait for the garbage collector).
    pub leftovers: Vec<String>,
    /// `--snapshot`: drill this one instead of the rule's choice.
    pub named: Option<String>,
    /// What the shard's primary no longer holds in its binlogs (`Err`: why it was not
    /// read), for the catch-up part of the verdict.
    pub purged: Result<Purged, String>,
}

/// The shard a run drills, resolved from the config.
pub fn shard_of(config: &Config, name: &ShardName) -> Result<ConfiguredShard, DrillError> {
    config
        .shard(name)
        .map_err(|e| DrillError::UnknownShard(e.to_string()))
}

/// The label selector of the shard's drill objects.
pub fn drill_selector(s: &ShardRef) -> String {
    format!(
        "{MANAGED_BY}={MANAGED_BY_DRILL},{}={},{}={},{}={}",
        LABEL_CLUSTER,
        s.cluster,
        LABEL_KEYSPACE,
        s.keyspace,
        LABEL_SHARD,
        s.shard.safe_name()
    )
}

fn read_err(what: &str) -> impl FnOnce(kube::Error) -> DrillError + '_ {
    move |source| DrillError::Kubernetes {
        reading: what.to_owned(),
        source,
    }
}

/// Everything [`crate::decide::plan`] needs for `configured`, from the API.
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

    let listed = vtsnap_core::reconcile::apis::shard_snapshots(kube, shard)
        .await
        .map_err(read_err("VolumeSnapshots"))?;
    let snapshots: Vec<SnapshotRead> = listed
        .into_iter()
        .filter(|o| VolumeSnapshot::is_vtsnaps(o) && VolumeSnapshot::is_of_shard(o, shard))
        .map(|o| VolumeSnapshot::read(&o))
        .collect();

    let shape = read_shape_tablet(kube, shard)
        .await
        .map_err(|e| DrillError::Kubernetes {
            reading: e.reading.to_owned(),
            source: e.source,
        })?;
    let tablet_pod = shape.as_ref().map(|t| t.pod.clone());
    let tablet_pvc = shape.and_then(|t| t.pvc);
    let pods: Api<Pod> = Api::namespaced(kube.clone(), ns);
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(kube.clone(), ns);

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
