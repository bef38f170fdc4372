//! The background vtctld read behind restore injection's version match: for each shard
//! that has snapshots and restore enabled, the shard record's primary and every tablet's
//! MySQL version (`GetShard`, `GetTablets`, `GetFullStatus`). Reviews read the last result;
//! they never wait for vtctld.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use vtsnap_core::config::{Config, resolve_in};
use vtsnap_core::discover::vtctld_endpoint;
use vtsnap_core::naming::TabletAlias;
use vtsnap_core::shard::ShardRef;
use vtsnap_core::vtctld::VtctldClient;
use vtsnap_core::vtctld::client::CallLimits;

use crate::cache::{Caches, ShardStates};
use crate::observe::{ShardState, TabletVersion};

/// At most this many `GetFullStatus` calls at once per shard.
const CONCURRENT_STATUS: usize = 4;

/// What vtctld says about one shard now.
pub async fn read_shard(vtctld: &VtctldClient, key: &ShardRef) -> ShardState {
    let now = Timestamp::now;
    let failed = |e: String| ShardState {
        key: key.clone(),
        primary: None,
        tablets: Vec::new(),
        refreshed_at: now(),
        error: Some(e),
    };
    let shard = match vtctld
        .get_shard(&key.keyspace, &key.shard.to_string())
        .await
    {
        Ok(s) => s,
        Err(e) => return failed(e.to_string()),
    };
    let tablets = match vtctld
        .get_tablets(&key.keyspace, &key.shard.to_string())
        .await
    {
        Ok(t) => t,
        Err(e) => return failed(e.to_string()),
    };
    let primary = shard
        .primary_alias
        .as_ref()
        .filter(|a| a.uid != 0 || !a.cell.is_empty())
        .map(|a| TabletAlias::from(a).to_string());
    let aliases: Vec<TabletAlias> = tablets
        .iter()
        .filter_map(|t| t.alias.as_ref().map(TabletAlias::from))
        .collect();
    let versions = futures::stream::iter(aliases)
        .map(|alias| async move {
            let version = match vtctld.get_full_status(&alias).await {
                Ok(s) => Some(s.version).filter(|v| !v.is_empty()),
                Err(e) => {
                    tracing::debug!(tablet = %alias, error = %e, "GetFullStatus failed; its version is unknown");
                    None
                }
            };
            TabletVersion {
                alias: alias.to_string(),
                version,
            }
        })
        .buffer_unordered(CONCURRENT_STATUS)
        .collect::<Vec<_>>()
        .await;
    let mut tablets = versions;
    tablets.sort_by(|a, b| a.alias.cmp(&b.alias));
    ShardState {
        key: key.clone(),
        primary,
        tablets,
        refreshed_at: now(),
        error: None,
    }
}

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
    while !crate::observe::Inventory::synced(&caches) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    loop {
        refresh_once(&client, &config, &caches, &states).await;
        tokio::time::sleep(every).await;
    }
}
