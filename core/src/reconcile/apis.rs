//! The custom resources vtsnap reads, defined once: vitess-operator's VitessCluster
//! (`planetscale.com/v2`) and the CSI VolumeSnapshot (`snapshot.storage.k8s.io/v1`).

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde_json::Value;

use crate::labels::{self, MANAGED_BY, MANAGED_BY_VTSNAP};
use crate::shard::ShardRef;
use crate::snapshot;

pub fn vitess_cluster_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("planetscale.com", "v2", "VitessCluster"),
        "vitessclusters",
    )
}

pub fn volume_snapshot_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(snapshot::GROUP, snapshot::VERSION, "VolumeSnapshot"),
        "volumesnapshots",
    )
}

/// VitessClusters of one namespace.
pub fn vitess_clusters(kube: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(kube.clone(), namespace, &vitess_cluster_resource())
}

/// VolumeSnapshots of one namespace.
pub fn volume_snapshots(kube: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(kube.clone(), namespace, &volume_snapshot_resource())
}

/// The label selector of a shard's vtsnap VolumeSnapshots.
pub fn shard_snapshot_selector(shard: &ShardRef) -> String {
    let shard_labels = shard.labels();
    let mut pairs = vec![(MANAGED_BY, MANAGED_BY_VTSNAP)];
    pairs.extend(shard_labels.iter().map(|(k, v)| (*k, v.as_str())));
    labels::selector(&pairs)
}

/// The shard's vtsnap VolumeSnapshots in its namespace, every page, as JSON (what
/// [`snapshot::VolumeSnapshot::read`] takes).
pub async fn shard_snapshots(
    kube: &kube::Client,
    shard: &ShardRef,
) -> Result<Vec<Value>, kube::Error> {
    let api = volume_snapshots(kube, &shard.namespace);
    let lp = ListParams::default().labels(&shard_snapshot_selector(shard));
    let listed = super::list::all(&api, &lp).await?;
    Ok(listed
        .into_iter()
        .filter_map(|o| serde_json::to_value(o).ok())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shards_snapshots_are_selected_by_vtsnap_and_its_three_labels() {
        let shard = ShardRef::parse_path("vitess/example/commerce/-80").unwrap();
        assert_eq!(
            shard_snapshot_selector(&shard),
            "app.kubernetes.io/managed-by=vtsnap,vtsnap.io/cluster=example,\
             vtsnap.io/keyspace=commerce,vtsnap.io/shard=x-80"
        );
    }

    #[test]
    fn the_resources_carry_their_group_version_and_plural() {
        let v = vitess_cluster_resource();
        assert_eq!(
            (v.group.as_str(), v.version.as_str(), v.plural.as_str()),
            ("planetscale.com", "v2", "vitessclusters")
        );
        let s = volume_snapshot_resource();
        assert_eq!(s.api_version, "snapshot.storage.k8s.io/v1");
        assert_eq!(
            (s.kind.as_str(), s.plural.as_str()),
            ("VolumeSnapshot", "volumesnapshots")
        );
    }
}
