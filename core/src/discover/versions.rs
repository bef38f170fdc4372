//! The vtctld read behind the restore rule's version match
//! ([`crate::snapshot::choice::shard_series`]): the shard record's primary and every
//! tablet's MySQL version (`GetShard`, `GetTablets`, `GetFullStatus`). The admission
//! webhook refreshes it in the background; a drill reads it once.

use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;

use crate::naming::TabletAlias;
use crate::shard::ShardRef;
use crate::snapshot::choice::{ShardState, TabletVersion};
use crate::vtctld::VtctldClient;

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
