//! How restored tablets catch up (docs/design.md §5.7): vtctld's last replication IO error
//! of each restored, running tablet, and whether its replication was never started.

use std::collections::{BTreeMap, BTreeSet};

use vtsnap_core::config::Config;
use vtsnap_core::naming::TabletAlias;
use vtsnap_core::reconcile::ObjectKey;
use vtsnap_core::vtctld::client::CallLimits;
use vtsnap_core::vtctld::messages::replicationdata::STATE_STOPPED;
use vtsnap_core::vtctld::{TabletType, VtctldClient};

use super::Inventory;

/// Asks vtctld how the replication of each restored, running tablet goes: its last IO
/// error, if any. Only tablets whose snapshot still exists are asked, usable or not (a
/// PVC may be forced onto an unusable one by hand): a tablet restored from a snapshot
/// the retention has since deleted is an ordinary replica by now, not vtsnap's to
/// re-provision. An error here leaves the tablet out (no action is taken on an unknown).
pub(super) async fn observe_catch_up(kube: &kube::Client, config: &Config, inv: &mut Inventory) {
    let present: BTreeSet<ObjectKey> = inv
        .snapshots
        .iter()
        .map(|s| ObjectKey::new(&s.namespace, &s.name))
        .collect();
    let mut by_cluster: BTreeMap<ObjectKey, Vec<(String, TabletAlias)>> = BTreeMap::new();
    for r in &inv.restored {
        let running = inv
            .pods
            .get(&ObjectKey::new(&r.namespace, &r.name))
            .is_some_and(|p| p.phase == "Running");
        if !(r.bound && running && present.contains(&ObjectKey::new(&r.namespace, &r.snapshot))) {
            continue;
        }
        if let Some(alias) = &r.tablet {
            by_cluster
                .entry(ObjectKey::new(&r.namespace, &r.cluster))
                .or_default()
                .push((r.name.clone(), alias.clone()));
        }
    }
    for (
        ObjectKey {
            namespace: ns,
            name: cluster,
        },
        tablets,
    ) in by_cluster
    {
        let Some(cl) = config.cluster_in(&ns, &cluster) else {
            continue;
        };
        let vtctld = match vtsnap_core::discover::vtctld_endpoint(kube, &ns, &cluster, &cl.vtctld)
            .await
            .map_err(|e| e.to_string())
            .and_then(|e| VtctldClient::new(&e, CallLimits::default()).map_err(|e| e.to_string()))
        {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(cluster = %format!("{ns}/{cluster}"), error = %e, "no vtctld: restored tablets are not checked");
                continue;
            }
        };
        for (pvc, alias) in tablets {
            match vtctld.get_full_status(&alias).await {
                Ok(st) => {
                    let stopped = st.replication_status.as_ref().is_some_and(|r| {
                        // stopped, not connecting or unknown: nothing is trying
                        r.io_state == STATE_STOPPED
                            && r.sql_state == STATE_STOPPED
                            && r.last_io_error.is_empty()
                            && r.last_sql_error.is_empty()
                    });
                    let io = st
                        .replication_status
                        .map(|r| r.last_io_error)
                        .unwrap_or_default();
                    if !io.is_empty() {
                        inv.catch_up.insert(ObjectKey::new(&ns, &pvc), io);
                    }
                    // A drained tablet's replication is stopped on purpose (a snapshot's
                    // fence); only a serving type's is a restore nothing started.
                    if stopped && serving_type(&vtctld, &alias).await {
                        inv.not_replicating.insert(ObjectKey::new(&ns, pvc));
                    }
                }
                Err(e) => {
                    tracing::warn!(tablet = %alias, error = %e, "GetFullStatus failed: not checked")
                }
            }
        }
    }
}

/// Whether vtctld says the tablet is a REPLICA or an RDONLY (a read that fails: no).
async fn serving_type(vtctld: &VtctldClient, alias: &TabletAlias) -> bool {
    vtctld.get_tablet(alias).await.is_ok_and(|t| {
        t.r#type == TabletType::Replica as i32 || t.r#type == TabletType::Rdonly as i32
    })
}
