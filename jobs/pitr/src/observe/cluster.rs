//! The shard, read live for the archive step: its vtsnap VolumeSnapshots (the API, one
//! LIST by its labels) and its tablets (vtctld's `GetTablets`).

use kube::api::ListParams;
use serde_json::Value;
use vtsnap_core::labels::{MANAGED_BY, MANAGED_BY_VTSNAP};
use vtsnap_core::reconcile::{apis, list};
use vtsnap_core::shard::ShardRef;
use vtsnap_core::vtctld::{TabletType, VtctldClient, VtctldError};

use crate::decide::archive::Tablet;

/// The shard's vtsnap snapshots, as JSON for [`super::bases`].
pub async fn snapshots(kube: &kube::Client, shard: &ShardRef) -> Result<Vec<Value>, kube::Error> {
    let mut selector = format!("{MANAGED_BY}={MANAGED_BY_VTSNAP}");
    for (k, v) in shard.labels() {
        selector.push_str(&format!(",{k}={v}"));
    }
    let api = apis::volume_snapshots(kube, &shard.namespace);
    let listed = list::all(&api, &ListParams::default().labels(&selector)).await?;
    Ok(listed
        .into_iter()
        .filter_map(|o| serde_json::to_value(o).ok())
        .collect())
}

/// The shard's tablets; one of a type this program does not know is left out (it is no
/// replica to take an increment on).
pub async fn tablets(vtctld: &VtctldClient, shard: &ShardRef) -> Result<Vec<Tablet>, VtctldError> {
    let listed = vtctld
        .get_tablets(&shard.keyspace, &shard.shard.to_string())
        .await?;
    Ok(listed
        .iter()
        .filter_map(|t| {
            Some(Tablet {
                alias: t.alias.as_ref()?.into(),
                kind: TabletType::try_from(t.r#type).ok()?,
            })
        })
        .collect())
}
