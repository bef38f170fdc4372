//! What each shard's MySQL says, through vtctld, for the doctor: the primary's binlog
//! expiry and, where `mode: online`, each tablet's crash safety.

use std::collections::{BTreeMap, BTreeSet};

use vtsnap_core::config::{Config, Mode, resolve_in};
use vtsnap_core::coverage::read_primary;
use vtsnap_core::naming::TabletAlias;
use vtsnap_core::reconcile::ObjectKey;
use vtsnap_core::shard::ShardRef;
use vtsnap_core::vtctld::client::CallLimits;
use vtsnap_core::vtctld::{TabletType, VtctldClient};

use crate::decide::doctor::{Read, ShardMysql};
use crate::decide::objects::TabletPvc;

/// Each tablet of the shard but its primary: the crash-safety variables that do not
/// hold, read by the snapshot job's own probe.
async fn crash_safety(
    v: &VtctldClient,
    shard: &ShardRef,
) -> Result<Vec<(String, Vec<String>)>, String> {
    let tablets = v
        .get_tablets(&shard.keyspace, &shard.shard.to_string())
        .await
        .map_err(|e| format!("GetTablets: {e}"))?;
    let mut out = Vec::new();
    for t in tablets
        .iter()
        .filter(|t| t.r#type != TabletType::Primary as i32)
    {
        let Some(alias) = t.alias.as_ref().map(TabletAlias::from) else {
            continue;
        };
        let facts = vtsnap_snapshot::run::observe::online_facts(v, &alias)
            .await
            .map_err(|e| format!("{alias}: {e}"))?;
        let violations = vtsnap_snapshot::run::decide::crash_safety(facts.flavor, &facts.values);
        out.push((
            alias.to_string(),
            violations.iter().map(ToString::to_string).collect(),
        ));
    }
    Ok(out)
}

/// Per shard with tablets: the primary's binlog expiry and, where `mode: online`, each
/// tablet's crash safety, through the cluster's vtctld (one connection per cluster).
pub(super) async fn shards_mysql(
    kube: &kube::Client,
    config: &Result<Config, String>,
    pvcs: &Read<Vec<TabletPvc>>,
) -> Vec<ShardMysql> {
    let (Ok(cfg), Ok(pvcs)) = (config, pvcs) else {
        return Vec::new();
    };
    let mut by_cluster: BTreeMap<ObjectKey, BTreeSet<&ShardRef>> = BTreeMap::new();
    for p in pvcs {
        by_cluster
            .entry(p.shard.cluster_key())
            .or_default()
            .insert(&p.shard);
    }
    let mut out = Vec::new();
    for (cluster, shards) in by_cluster {
        let Some(cl) = cfg.cluster_in(&cluster.namespace, &cluster.name) else {
            continue;
        };
        let vtctld = vtsnap_core::discover::vtctld_endpoint(
            kube,
            &cluster.namespace,
            &cluster.name,
            &cl.vtctld,
        )
        .await
        .map_err(|e| format!("no vtctld: {e}"))
        .and_then(|e| {
            VtctldClient::new(&e, CallLimits::default()).map_err(|e| format!("no vtctld: {e}"))
        });
        for shard in shards {
            let policy = resolve_in(cl, &shard.keyspace, &shard.shard.to_string());
            let online = policy.snapshot.mode == Mode::Online;
            let (expiry, safety) = match &vtctld {
                Err(e) => (Err(e.clone()), Err(e.clone())),
                Ok(v) => {
                    let expiry = read_primary(v, &shard.keyspace, &shard.shard)
                        .await
                        .map(|b| b.expiry);
                    let safety = if online {
                        crash_safety(v, shard).await
                    } else {
                        Ok(Vec::new())
                    };
                    (expiry, safety)
                }
            };
            out.push(ShardMysql {
                shard: shard.clone(),
                max_snapshot_age: policy.restore.max_snapshot_age.get(),
                online,
                expiry,
                crash_safety: safety,
            });
        }
    }
    out
}
