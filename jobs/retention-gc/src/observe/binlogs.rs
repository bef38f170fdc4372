//! What each shard's primary no longer holds in its binlogs, for catch-up coverage
//! (docs/design.md §5.7), read once per shard per run with
//! [`vtsnap_core::coverage::read_primary`]; a shard whose primary cannot be read is
//! unreadable, and nothing is decided on it.

use std::collections::{BTreeMap, BTreeSet};

use vtsnap_core::config::Config;
use vtsnap_core::coverage::read_primary;
use vtsnap_core::reconcile::{ObjectKey, Read};
use vtsnap_core::shard::ShardRef;
use vtsnap_core::vtctld::VtctldClient;
use vtsnap_core::vtctld::client::CallLimits;

use super::Inventory;

/// Reads the primaries of the shards that have ready snapshots, once per shard.
pub(super) async fn observe_binlogs(kube: &kube::Client, config: &Config, inv: &mut Inventory) {
    let mut by_cluster: BTreeMap<ObjectKey, BTreeSet<ShardRef>> = BTreeMap::new();
    for s in inv.snapshots.iter().filter(|s| s.ready && !s.failed) {
        let shard = ShardRef {
            namespace: s.namespace.clone(),
            cluster: s.cluster.clone(),
            keyspace: s.keyspace.clone(),
            shard: s.shard.clone(),
        };
        by_cluster
            .entry(ObjectKey::new(&s.namespace, &s.cluster))
            .or_default()
            .insert(shard);
    }
    for (
        ObjectKey {
            namespace: ns,
            name: cluster,
        },
        shards,
    ) in by_cluster
    {
        let Some(cl) = config.cluster_in(&ns, &cluster) else {
            continue;
        };
        let vtctld = vtsnap_core::discover::vtctld_endpoint(kube, &ns, &cluster, &cl.vtctld)
            .await
            .map_err(|e| e.to_string())
            .and_then(|e| VtctldClient::new(&e, CallLimits::default()).map_err(|e| e.to_string()));
        for shard in shards {
            let read = match &vtctld {
                Ok(v) => match read_primary(v, &shard.keyspace, &shard.shard).await {
                    Ok(b) => Read::Present(b),
                    Err(e) => Read::Unreadable(e),
                },
                Err(e) => Read::Unreadable(format!("no vtctld: {e}")),
            };
            if let Read::Unreadable(e) = &read {
                tracing::warn!(shard = %shard, error = %e, "the primary's binlogs were not read: coverage unknown");
            }
            inv.binlogs.insert(shard, read);
        }
    }
}
