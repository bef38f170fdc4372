//! The custom resources vtsnap reads, defined once: vitess-operator's VitessCluster
//! (`planetscale.com/v2`) and the CSI VolumeSnapshot (`snapshot.storage.k8s.io/v1`).

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};

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

#[cfg(test)]
mod tests {
    use super::*;

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
