//! Shard discovery: read the tablet Pods and PVCs (Kubernetes) and the shard record,
//! tablets and replication positions (vtctld) — `observe` — then join them by tablet
//! alias into a [`Shard`] — `build`, pure. Anything that does not line up is an [`Issue`].
//! Restore injection and the drill read the shard's MySQL versions instead: [`versions`].

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use kube::Client;
use kube::api::{Api, ListParams};

use crate::labels;
use crate::naming::{TabletAlias, TabletUid};
use crate::shard::{Issue, PodInfo, Replication, Shard, ShardRef, Tablet};
use crate::tablet_volume::data_claim;
use crate::vtctld::messages::replicationdata::STATE_RUNNING;
use crate::vtctld::messages::topodata;
use crate::vtctld::messages::vtctldata::ShardReplicationPositionsResponse;
use crate::vtctld::{TabletType, VtctldClient, VtctldError};

pub mod versions;

#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    #[error("listing {what} in namespace {namespace}: {source}")]
    Kube {
        what: &'static str,
        namespace: String,
        source: kube::Error,
    },
    #[error(transparent)]
    Vtctld(#[from] VtctldError),
    #[error(
        "no vtctld Service labelled {}={} with a port named {} in namespace {namespace}",
        labels::CLUSTER, .cluster, labels::VTCTLD_GRPC_PORT_NAME
    )]
    NoVtctld { namespace: String, cluster: String },
}

/// Everything read, before any interpretation.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub pods: Vec<Pod>,
    pub pvcs: Vec<PersistentVolumeClaim>,
    pub shard_record: Option<topodata::Shard>,
    pub tablets: Vec<topodata::Tablet>,
    pub positions: ShardReplicationPositionsResponse,
}

/// The label selector of a shard's tablet Pods and PVCs.
pub fn tablet_selector(r: &ShardRef) -> String {
    labels::selector(&[
        (labels::COMPONENT, labels::COMPONENT_VTTABLET),
        (labels::CLUSTER, &r.cluster),
        (labels::KEYSPACE, &r.keyspace),
        (labels::SHARD, &r.shard.safe_name()),
    ])
}

/// Finds vtctld's gRPC address from its Service: `<service>.<namespace>.svc:<grpc port>`.
/// The vtctld endpoint of a cluster: `setting` as configured, or with `auto` the one its
/// vtctld Service names.
pub async fn vtctld_endpoint(
    client: &Client,
    namespace: &str,
    cluster: &str,
    setting: &str,
) -> Result<String, DiscoverError> {
    if setting == "auto" {
        find_vtctld(client, namespace, cluster).await
    } else {
        Ok(setting.to_owned())
    }
}

pub async fn find_vtctld(
    client: &Client,
    namespace: &str,
    cluster: &str,
) -> Result<String, DiscoverError> {
    let api: Api<Service> = Api::namespaced(client.clone(), namespace);
    let sel = labels::selector(&[
        (labels::COMPONENT, labels::COMPONENT_VTCTLD),
        (labels::CLUSTER, cluster),
    ]);
    let svcs = crate::reconcile::list::all(&api, &ListParams::default().labels(&sel))
        .await
        .map_err(|source| DiscoverError::Kube {
            what: "Services",
            namespace: namespace.into(),
            source,
        })?;
    let mut found: Vec<String> = svcs
        .iter()
        .filter_map(|s| {
            let name = s.metadata.name.clone()?;
            let port = s
                .spec
                .as_ref()?
                .ports
                .as_ref()?
                .iter()
                .find(|p| p.name.as_deref() == Some(labels::VTCTLD_GRPC_PORT_NAME))?;
            Some(format!("{name}.{namespace}.svc:{}", port.port))
        })
        .collect();
    found.sort();
    found
        .into_iter()
        .next()
        .ok_or_else(|| DiscoverError::NoVtctld {
            namespace: namespace.into(),
            cluster: cluster.into(),
        })
}

/// Reads the shard from Kubernetes and vtctld.
pub async fn observe(
    client: &Client,
    vtctld: &VtctldClient,
    r: &ShardRef,
) -> Result<Observed, DiscoverError> {
    let lp = ListParams::default().labels(&tablet_selector(r));
    let kube_err = |what| {
        move |source| DiscoverError::Kube {
            what,
            namespace: r.namespace.clone(),
            source,
        }
    };
    let pods =
        crate::reconcile::list::all(&Api::<Pod>::namespaced(client.clone(), &r.namespace), &lp)
            .await
            .map_err(kube_err("Pods"))?;
    let pvcs = crate::reconcile::list::all(
        &Api::<PersistentVolumeClaim>::namespaced(client.clone(), &r.namespace),
        &lp,
    )
    .await
    .map_err(kube_err("PersistentVolumeClaims"))?;
    let shard = r.shard.to_string();
    let shard_record = Some(vtctld.get_shard(&r.keyspace, &shard).await?);
    let tablets = vtctld.get_tablets(&r.keyspace, &shard).await?;
    let positions = match vtctld
        .shard_replication_positions(&r.keyspace, &shard)
        .await
    {
        Ok(p) => p,
        Err(e) => {
            // Real vtctld fails the whole call when one replica's status cannot be read
            // (its mysqld down, held, restarting): one sick tablet must not hide the
            // others (docs/design.md §2, "ShardReplicationPositions").
            tracing::warn!(error = %e, "replication positions of the shard failed; reading each tablet");
            positions_one_by_one(vtctld, shard_record.as_ref(), &tablets).await
        }
    };
    Ok(Observed {
        pods,
        pvcs,
        shard_record,
        tablets,
        positions,
    })
}

/// Each tablet's replication status through GetFullStatus, the shard's primary left
/// out; a tablet whose status cannot be read has none (and becomes an issue in `build`).
async fn positions_one_by_one(
    vtctld: &VtctldClient,
    shard_record: Option<&topodata::Shard>,
    tablets: &[topodata::Tablet],
) -> ShardReplicationPositionsResponse {
    let primary = shard_record.and_then(|s| s.primary_alias.as_ref());
    let reads = tablets
        .iter()
        .filter(|t| t.alias.is_some() && t.alias.as_ref() != primary)
        .filter_map(|t| {
            let alias = TabletAlias::from(t.alias.as_ref()?);
            Some(async move {
                let status = vtctld.get_full_status(&alias).await;
                (alias, t, status)
            })
        });
    let mut out = ShardReplicationPositionsResponse::default();
    for (alias, tablet, status) in futures::future::join_all(reads).await {
        match status {
            Ok(full) => {
                if let Some(s) = full.replication_status {
                    out.replication_statuses.insert(alias.to_string(), s);
                }
            }
            Err(e) => tracing::warn!(tablet = %alias, error = %e, "no replication status"),
        }
        out.tablet_map.insert(alias.to_string(), tablet.clone());
    }
    out
}

fn alias_from_labels(l: &BTreeMap<String, String>) -> Result<TabletAlias, String> {
    let cell = l
        .get(labels::CELL)
        .ok_or_else(|| format!("no {} label", labels::CELL))?;
    let uid = l
        .get(labels::TABLET_UID)
        .ok_or_else(|| format!("no {} label", labels::TABLET_UID))?;
    let uid: TabletUid = uid
        .parse()
        .map_err(|e| format!("{}: {e}", labels::TABLET_UID))?;
    Ok(TabletAlias {
        cell: cell.clone(),
        uid,
    })
}

fn pod_info(p: &Pod) -> PodInfo {
    let status = p.status.as_ref();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    PodInfo {
        name: p.metadata.name.clone().unwrap_or_default(),
        uid: p.metadata.uid.clone().unwrap_or_default(),
        node: p.spec.as_ref().and_then(|s| s.node_name.clone()),
        phase: status
            .and_then(|s| s.phase.clone())
            .unwrap_or_else(|| "Unknown".into()),
        ready,
        terminating: p.metadata.deletion_timestamp.is_some(),
    }
}

fn claim_name(p: &Pod) -> Option<String> {
    data_claim(p.spec.as_ref()?.volumes.as_deref()?).map(str::to_owned)
}

/// Joins what was observed into a [`Shard`]. Pure.
pub fn build(r: &ShardRef, o: &Observed) -> Shard {
    let mut issues = Vec::new();
    let mut pods: BTreeMap<TabletAlias, &Pod> = BTreeMap::new();
    for p in &o.pods {
        let name = p.metadata.name.clone().unwrap_or_default();
        match alias_from_labels(p.metadata.labels.as_ref().unwrap_or(&BTreeMap::new())) {
            Ok(a) => {
                pods.insert(a, p);
            }
            Err(reason) => issues.push(Issue::BadTabletLabels { pod: name, reason }),
        }
    }
    let pvc_names: BTreeSet<&str> = o
        .pvcs
        .iter()
        .filter_map(|c| c.metadata.name.as_deref())
        .collect();
    let vt: BTreeMap<TabletAlias, TabletType> = o
        .tablets
        .iter()
        .filter_map(|t| {
            Some((
                TabletAlias::from(t.alias.as_ref()?),
                TabletType::try_from(t.r#type).unwrap_or(TabletType::Unknown),
            ))
        })
        .collect();
    let primary = o
        .shard_record
        .as_ref()
        .and_then(|s| s.primary_alias.as_ref())
        .map(TabletAlias::from);

    let aliases: BTreeSet<TabletAlias> = pods.keys().chain(vt.keys()).cloned().collect();
    let mut tablets = Vec::new();
    for alias in aliases {
        let a = alias.to_string();
        let pod = pods.get(&alias).copied();
        let vt_type = vt.get(&alias).copied();
        let info = pod.map(pod_info);
        match (&info, vt_type) {
            (None, _) => issues.push(Issue::PodMissing { alias: a.clone() }),
            (Some(p), None) => issues.push(Issue::NotInVtctld {
                alias: a.clone(),
                pod: p.name.clone(),
            }),
            _ => {}
        }
        if let Some(p) = &info {
            if p.terminating {
                issues.push(Issue::PodTerminating {
                    alias: a.clone(),
                    pod: p.name.clone(),
                });
            } else if p.phase == "Pending" {
                issues.push(Issue::PodPending {
                    alias: a.clone(),
                    pod: p.name.clone(),
                });
            }
        }
        let claim = pod.and_then(claim_name);
        let pvc = claim.clone().filter(|c| pvc_names.contains(c.as_str()));
        if pod.is_some() && pvc.is_none() {
            issues.push(Issue::PvcMissing {
                alias: a.clone(),
                pvc: claim,
            });
        }
        // Real vtctld gives the primary a position-only entry: it does not replicate.
        let replication = o
            .positions
            .replication_statuses
            .get(&a)
            .filter(|_| Some(&alias) != primary.as_ref())
            .map(|s| Replication {
                position: s.position.clone(),
                lag_seconds: s.replication_lag_seconds,
                lag_unknown: s.replication_lag_unknown,
                io_running: s.io_state == STATE_RUNNING,
                sql_running: s.sql_state == STATE_RUNNING,
                last_error: [&s.last_io_error, &s.last_sql_error]
                    .into_iter()
                    .find(|e| !e.is_empty())
                    .cloned(),
            });
        if replication.is_none()
            && vt_type.is_some_and(|t| t != TabletType::Primary)
            && Some(&alias) != primary.as_ref()
        {
            issues.push(Issue::NoReplicationStatus { alias: a.clone() });
        }
        tablets.push(Tablet {
            alias,
            vt_type,
            pool_type: pod.and_then(|p| {
                p.metadata
                    .labels
                    .as_ref()?
                    .get(labels::TABLET_TYPE)
                    .cloned()
            }),
            pod: info,
            pvc,
            replication,
        });
    }

    let typed: Vec<String> = vt
        .iter()
        .filter(|(_, t)| **t == TabletType::Primary)
        .map(|(a, _)| a.to_string())
        .collect();
    match &primary {
        None => issues.push(Issue::NoPrimary),
        Some(p) if typed.len() != 1 || typed[0] != p.to_string() => {
            issues.push(Issue::PrimaryMismatch {
                shard_primary: Some(p.to_string()),
                typed_primaries: typed,
            });
        }
        Some(_) => {}
    }
    Shard {
        shard_ref: r.clone(),
        primary,
        tablets,
        issues,
    }
}
