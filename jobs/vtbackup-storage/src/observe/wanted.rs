//! What a shard's initial backup should be now, read from the config and the shard's
//! VitessCluster: the PVC template (the config's, the placeholder of an emptyDir initial
//! backup, or the first tablet pool's) and the data volume the operator and the admission
//! webhook give the Pod (docs/design.md §9). A template is read here, hashed as the
//! webhook stamps it; what cannot be told is a [`Unknown`] naming what is missing.

use std::collections::BTreeMap;

use serde_json::Value;
use vtsnap_core::config::pvc_spec::{self, Problem, Purpose};
use vtsnap_core::config::{Config, VtbackupStorage, resolve_in};
use vtsnap_core::naming::KeyRange;
use vtsnap_core::reconcile::{ObjectKey, Read};
use vtsnap_core::shard::ShardRef;
use vtsnap_core::vitesscluster::first_pool;
use vtsnap_core::vtbackup::{desired_init_template, desired_shape, template_hash};

use super::claim::ClaimSpec;

/// A PVC template, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    /// As the webhook stamps it ([`vtsnap_core::vtbackup::ANN_TEMPLATE_HASH`]).
    pub hash: String,
    /// The first reason it is not a PVC spec for its purpose (`None`: it is one).
    pub problem: Option<Problem>,
    pub spec: ClaimSpec,
}

impl Template {
    pub fn read(spec: &Value, purpose: Purpose) -> Self {
        Self {
            hash: template_hash(spec),
            problem: pvc_spec::problems(spec, purpose).into_iter().next(),
            spec: ClaimSpec::read(spec),
        }
    }
}

/// What one shard's initial backup should be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    pub template: Template,
    /// The hash of the data volume its Pod should have
    /// ([`vtsnap_core::vtbackup::ANN_DATA_VOLUME_HASH`]).
    pub data_volume_hash: String,
}

/// Why the wanted storage of a shard cannot be told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unknown {
    #[error("cluster {cluster} is not in the config")]
    NotConfigured { cluster: ObjectKey },
    #[error("VitessCluster {cluster} not found")]
    ClusterNotFound { cluster: ObjectKey },
    #[error("VitessCluster {cluster}: {why}")]
    ClusterUnreadable { cluster: ObjectKey, why: String },
    /// A field of its spec (`path`) is not what it should be.
    #[error("VitessCluster {cluster}: {path} is not {expected}")]
    Spec {
        cluster: ObjectKey,
        path: String,
        expected: &'static str,
    },
    #[error("the VitessCluster's spec has no tablet pool for {keyspace}/{shard}")]
    NoPool { keyspace: String, shard: KeyRange },
    #[error("the first tablet pool of {keyspace}/{shard} has no dataVolumeClaimTemplate")]
    NoTemplate { keyspace: String, shard: KeyRange },
}

/// The VitessClusters read, by namespace and name.
pub type Clusters = BTreeMap<ObjectKey, Read<Value>>;

/// What `key`'s initial backup (its Pod named `pod_name`) should be under `config`, given
/// its VitessCluster among `clusters`.
pub fn wanted(
    config: &Config,
    clusters: &Clusters,
    key: &ShardRef,
    pod_name: &str,
) -> Result<Wanted, Unknown> {
    let at = ObjectKey::new(&key.namespace, &key.cluster);
    let cl = config
        .cluster_in(&key.namespace, &key.cluster)
        .ok_or_else(|| Unknown::NotConfigured {
            cluster: at.clone(),
        })?;
    // The config and the VitessCluster spec name a shard by its key range.
    let shard = key.shard.to_string();
    let storage = resolve_in(cl, &key.keyspace, &shard).vtbackup;
    let cluster = match clusters.get(&at) {
        Some(Read::Present(c)) => c,
        Some(Read::Unreadable(why)) => {
            return Err(Unknown::ClusterUnreadable {
                cluster: at,
                why: why.clone(),
            });
        }
        Some(Read::Absent) | None => return Err(Unknown::ClusterNotFound { cluster: at }),
    };
    let pool = first_pool(cluster, &key.keyspace, &shard)
        .map_err(|e| Unknown::Spec {
            cluster: at.clone(),
            path: e.path,
            expected: e.expected,
        })?
        .ok_or_else(|| Unknown::NoPool {
            keyspace: key.keyspace.clone(),
            shard: key.shard.clone(),
        })?;
    let template = desired_init_template(
        &storage,
        pool.get("dataVolumeClaimTemplate").filter(|t| !t.is_null()),
    )
    .ok_or_else(|| Unknown::NoTemplate {
        keyspace: key.keyspace.clone(),
        shard: key.shard.clone(),
    })?;
    // The config's template was checked when it was loaded; the pool's comes from the
    // cluster (or a dump) as it is.
    let purpose = match storage {
        VtbackupStorage::Template(_) => Purpose::Scratch,
        VtbackupStorage::EmptyDirForInitialBackup | VtbackupStorage::InheritFirstPool => {
            Purpose::AsKubernetesTakesIt
        }
    };
    Ok(Wanted {
        template: Template::read(&template, purpose),
        data_volume_hash: desired_shape(pool, &storage, pod_name).hash(),
    })
}
