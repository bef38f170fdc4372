//! The window record written on the shard's newest base snapshot (`vtsnap.io/pitr-window`,
//! docs/pitr.md §3): one merge patch of one annotation, nothing else of the snapshot.

use kube::api::{Patch, PatchParams};
use serde_json::json;
use vtsnap_core::pitr::record::{ANN_PITR_WINDOW, WindowRecord};

pub async fn write_record(
    kube: &kube::Client,
    namespace: &str,
    snapshot: &str,
    record: &WindowRecord,
) -> Result<(), kube::Error> {
    let api = vtsnap_core::reconcile::apis::volume_snapshots(kube, namespace);
    let patch = json!({"metadata": {"annotations": {ANN_PITR_WINDOW: record.render()}}});
    api.patch(snapshot, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
}
