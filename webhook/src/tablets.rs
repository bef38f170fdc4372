//! The background vtctld read behind restore injection's version match: for each shard
//! that has snapshots and restore enabled, core's read of the shard record's primary and
//! every tablet's MySQL version (`vtsnap_core::discover::versions`). Reviews read the last
//! result; they never wait for vtctld.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use vtsnap_core::config::{Config, resolve_in};
use vtsnap_core::discover::versions::read_shard;
use vtsnap_core::discover::vtctld_endpoint;
use vtsnap_core::shard::ShardRef;
use vtsnap_core::snapshot::choice::ShardState;
use vtsnap_core::vtctld::VtctldClient;
use vtsnap_core::vtctld::client::CallLimits;

use crate::cache::{Caches, ShardStates};

/// One pass: every shard with snapshots whose policy enables restore.
pub async fn refresh_once(
    client: &kube::Client,
    config: &Config,
    caches: &Caches,
    states: &ShardStates,
) {
    let mut by_cluster: BTreeMap<(String, String), Vec<ShardRef>> = BTreeMap::new();
    for key in caches.shards_with_snapshots() {
        let Some(cl) = config.cluster_in(&key.namespace, &key.cluster) else {
            continue;
        };
        if resolve_in(cl, &key.keyspace, &key.shard.to_string())
            .restore
            .enabled
        {
            by_cluster
                .entry((key.namespace.clone(), key.cluster.clone()))
                .or_default()
                .push(key);
        }
    }
    for ((ns, cluster), shards) in by_cluster {
        let Some(cl) = config.cluster_in(&ns, &cluster) else {
            continue;
        };
        let client_for = match vtctld_endpoint(client, &ns, &cluster, &cl.vtctld).await {
            Ok(endpoint) => {
                VtctldClient::new(&endpoint, CallLimits::default()).map_err(|e| e.to_string())
            }
            Err(e) => Err(e.to_string()),
        };
        for key in shards {
            let state = match &client_for {
                Ok(v) => read_shard(v, &key).await,
                Err(e) => ShardState {
                    key: key.clone(),
                    primary: None,
                    tablets: Vec::new(),
                    refreshed_at: Timestamp::now(),
                    error: Some(format!("no vtctld for cluster {ns}/{cluster}: {e}")),
                },
            };
            if let Some(e) = &state.error {
                tracing::warn!(shard = %key, error = %e, "vtctld could not be read");
            }
            if let Ok(mut m) = states.write() {
                m.insert(key, state);
            }
        }
    }
}

/// Refreshes every `every` until the process ends.
pub async fn refresh_loop(
    client: kube::Client,
    config: Arc<Config>,
    caches: Caches,
    every: Duration,
) {
    let states = caches.shard_states();
    // The first pass needs the snapshot caches filled (it reads which shards have any).
    while !crate::inventory::Inventory::synced(&caches) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    loop {
        refresh_once(&client, &config, &caches, &states).await;
        tokio::time::sleep(every).await;
    }
}
