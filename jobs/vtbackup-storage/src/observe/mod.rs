//! Observe: what the reconciler reads, as plain values: per shard its initial-backup Pod
//! and PVC, and what its storage should be (from the config and the shard's VitessCluster:
//! [`wanted`]), and the cluster's default StorageClass. Read from the API ([`observe`]) or
//! from a `kubectl get … -o json` dump ([`World::from_dump`]).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ListParams};
use serde::Serialize;
use serde_json::Value;
use vtsnap_core::config::Config;
use vtsnap_core::dump::{self, DumpError};
use vtsnap_core::labels;
use vtsnap_core::naming::KeyRange;
use vtsnap_core::reconcile::{ObjectKey, apis, list};
use vtsnap_core::shard::ShardRef;
use vtsnap_core::vtbackup::{
    BACKUP_TYPE_INIT, BackupObject, Identity, LABEL_BACKUP_TYPE, ObjectKind,
};

mod claim;
mod objects;
mod wanted;

pub use claim::{BOUND_BY_CONTROLLER, ClaimSpec, ClassField};
pub use objects::{ANN_REPLACED_FOR, BoundBy, Deletion, PodPhase, PodState, PvcState};
/// What a tolerant read gave (absent, present, or unreadable with a reason).
pub use vtsnap_core::reconcile::Read;
pub use wanted::{Clusters, Template, Unknown, Wanted, wanted};

use objects::{annotation, text};

/// One shard's initial-backup objects, as found.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub key: ShardRef,
    pub pod: Read<PodState>,
    pub pvc: Read<PvcState>,
}

impl Found {
    /// The name of its Pod (and PVC: they share it), `""` when neither was read.
    fn pod_name(&self) -> &str {
        self.pod
            .present()
            .map(|p| p.name.as_str())
            .or_else(|| self.pvc.present().map(|p| p.name.as_str()))
            .unwrap_or_default()
    }
}

/// One shard's initial-backup objects, and what they should be.
#[derive(Debug, Clone, PartialEq)]
pub struct Shard {
    pub key: ShardRef,
    pub pod: Read<PodState>,
    pub pvc: Read<PvcState>,
    pub wanted: Result<Wanted, Unknown>,
}

/// Everything read.
#[derive(Debug, Clone, PartialEq)]
pub struct World {
    pub shards: Vec<Shard>,
    /// The default StorageClass (`Present(None)`: the cluster has none).
    pub default_class: Read<Option<String>>,
    /// LISTs that failed (`Pods in <ns>: why`): with no object read, no shard carries the
    /// error, yet the run did not see the namespace, so it is not complete.
    pub unlisted: Vec<String>,
}

impl World {
    /// The shards `found`, each with what `config` and its VitessCluster among `clusters`
    /// want of it.
    pub fn new(
        config: &Config,
        found: Vec<Found>,
        clusters: &Clusters,
        default_class: Read<Option<String>>,
        unlisted: Vec<String>,
    ) -> Self {
        let shards = found
            .into_iter()
            .map(|f| Shard {
                wanted: wanted(config, clusters, &f.key, f.pod_name()),
                key: f.key,
                pod: f.pod,
                pvc: f.pvc,
            })
            .collect();
        Self {
            shards,
            default_class,
            unlisted,
        }
    }
}

/// The shard an object's operator labels name.
pub fn shard_of(v: &Value) -> Option<ShardRef> {
    let label = |k: &str| {
        v.pointer("/metadata/labels")
            .and_then(|l| l.get(k))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    Some(ShardRef {
        namespace: text(v, "/metadata/namespace"),
        cluster: label(labels::CLUSTER)?,
        keyspace: label(labels::KEYSPACE)?,
        shard: KeyRange::from_safe_name(&label(labels::SHARD)?).ok()?,
    })
}

/// The default StorageClass's name among StorageClass objects (the
/// `storageclass.kubernetes.io/is-default-class` annotation; the newest wins, as the
/// admission plugin picks it).
pub fn default_class(classes: &[Value]) -> Option<String> {
    classes
        .iter()
        .filter(|c| {
            annotation(c, "storageclass.kubernetes.io/is-default-class").as_deref() == Some("true")
        })
        .max_by(|a, b| {
            text(a, "/metadata/creationTimestamp")
                .cmp(&text(b, "/metadata/creationTimestamp"))
                .then(text(b, "/metadata/name").cmp(&text(a, "/metadata/name")))
        })
        .map(|c| text(c, "/metadata/name"))
}

/// Groups initial-backup Pods and PVCs by shard. Objects of other shards' names are not
/// the shard's ([`BackupObject::identify`] cross-checks the name with the labels); one that
/// claims to be a shard's initial backup and conflicts, or cannot be read, makes its
/// shard's read of that kind unreadable: nothing is decided on it.
pub fn group(pods: &[Value], pvcs: &[Value]) -> Vec<Found> {
    let mut by: BTreeMap<ShardRef, (Read<PodState>, Read<PvcState>)> = BTreeMap::new();
    let mut put = |v: &Value, kind: ObjectKind| {
        let found = match BackupObject::identify(v, kind) {
            Identity::Backup(BackupObject::InitPod | BackupObject::InitPvc) => Ok(()),
            Identity::Conflicting {
                claimed: BackupObject::InitPod | BackupObject::InitPvc,
                why,
            } => Err(format!(
                "{} is labelled the initial backup's, but {why}: left alone",
                display(&text(v, "/metadata/name"))
            )),
            _ => return,
        };
        let Some(key) = shard_of(v) else { return };
        let entry = by.entry(key).or_insert((Read::Absent, Read::Absent));
        if kind == ObjectKind::Pod {
            entry.0 = match (&entry.0, found.and_then(|()| PodState::read(v))) {
                (Read::Absent, Ok(p)) => Read::Present(p),
                (Read::Unreadable(e), _) => Read::Unreadable(e.clone()),
                (_, Err(e)) => Read::Unreadable(e),
                (Read::Present(_), Ok(_)) => {
                    Read::Unreadable("more than one initial-backup Pod for the shard".into())
                }
            };
        } else {
            entry.1 = match (&entry.1, found.and_then(|()| PvcState::read(v))) {
                (Read::Absent, Ok(p)) => Read::Present(p),
                (Read::Unreadable(e), _) => Read::Unreadable(e.clone()),
                (_, Err(e)) => Read::Unreadable(e),
                (Read::Present(_), Ok(_)) => {
                    Read::Unreadable("more than one initial-backup PVC for the shard".into())
                }
            };
        }
    };
    for p in pods {
        put(p, ObjectKind::Pod);
    }
    for p in pvcs {
        put(p, ObjectKind::PersistentVolumeClaim);
    }
    by.into_iter()
        .map(|(key, (pod, pvc))| Found { key, pod, pvc })
        .collect()
}

/// A string read from an object, quoted with its control characters escaped, for
/// messages and the terminal.
pub fn display(s: &str) -> String {
    format!("{s:?}")
}

fn to_values<K: Serialize>(items: Vec<K>) -> Vec<Value> {
    items
        .into_iter()
        .filter_map(|i| serde_json::to_value(i).ok())
        .collect()
}

/// Reads everything the plan needs, for the configured clusters (only `only_cluster` when
/// given). A failed LIST makes its kind unreadable for every shard of the namespace (such
/// shards are then found from the other kind's objects).
pub async fn observe(kube: &kube::Client, config: &Config, only_cluster: Option<&str>) -> World {
    let init = ListParams::default().labels(&labels::selector(&[
        (labels::COMPONENT, labels::COMPONENT_VTBACKUP),
        (LABEL_BACKUP_TYPE, BACKUP_TYPE_INIT),
    ]));
    let classes = list::all(
        &Api::<StorageClass>::all(kube.clone()),
        &ListParams::default(),
    )
    .await;
    let default_class = match classes {
        Ok(l) => Read::Present(default_class(&to_values(l))),
        Err(e) => Read::Unreadable(format!("StorageClasses: {e}")),
    };
    let (mut found, mut clusters, mut unlisted) = (Vec::new(), Clusters::new(), Vec::new());
    let scope: Vec<(&str, &str)> = config
        .clusters
        .iter()
        .filter(|c| only_cluster.is_none_or(|o| o == c.name))
        .map(|c| (c.namespace.as_str(), c.name.as_str()))
        .collect();
    let namespaces: BTreeSet<&str> = scope.iter().map(|(ns, _)| *ns).collect();
    for ns in namespaces {
        let pods = list::all(&Api::<Pod>::namespaced(kube.clone(), ns), &init).await;
        let pvcs = list::all(
            &Api::<PersistentVolumeClaim>::namespaced(kube.clone(), ns),
            &init,
        )
        .await;
        let (pods, pods_err) = match pods {
            Ok(p) => (to_values(p), None),
            Err(e) => (Vec::new(), Some(format!("Pods in {ns}: {e}"))),
        };
        let (pvcs, pvcs_err) = match pvcs {
            Ok(p) => (to_values(p), None),
            Err(e) => (Vec::new(), Some(format!("PVCs in {ns}: {e}"))),
        };
        unlisted.extend(pods_err.iter().chain(&pvcs_err).cloned());
        let mut shards = group(&pods, &pvcs);
        for s in &mut shards {
            if let Some(e) = &pods_err {
                s.pod = Read::Unreadable(e.clone());
            }
            if let Some(e) = &pvcs_err {
                s.pvc = Read::Unreadable(e.clone());
            }
        }
        found.extend(shards);
        for (_, cluster) in scope.iter().filter(|(n, _)| *n == ns) {
            let got = apis::vitess_clusters(kube, ns).get_opt(cluster).await;
            let read = Read::from_get(
                got.map(|c| c.map(|c| serde_json::to_value(c).unwrap_or(Value::Null))),
            );
            clusters.insert(ObjectKey::new(ns, *cluster), read);
        }
    }
    World::new(config, found, &clusters, default_class, unlisted)
}

impl World {
    /// Reads a dump file or pipe with the reader every program's offline command uses,
    /// then [`Self::from_dump`].
    pub fn read_dump(path: &std::path::Path, config: &Config) -> Result<Self, DumpError> {
        Ok(Self::from_dump(config, &dump::read(path)?))
    }

    /// From the items of a dump (`kubectl get pods,persistentvolumeclaims,vitessclusters,storageclasses -A -o json`).
    /// A configured VitessCluster the dump lacks is absent; one it holds twice unreadable.
    pub fn from_dump(config: &Config, items: &[Value]) -> Self {
        let kind = |k: &str| -> Vec<Value> {
            items
                .iter()
                .filter(|i| i.get("kind").and_then(Value::as_str) == Some(k))
                .cloned()
                .collect()
        };
        let mut clusters = Clusters::new();
        for c in kind("VitessCluster") {
            let key = ObjectKey::new(text(&c, "/metadata/namespace"), text(&c, "/metadata/name"));
            let read = if clusters.contains_key(&key) {
                Read::Unreadable("the dump holds it twice".into())
            } else {
                Read::Present(c)
            };
            clusters.insert(key, read);
        }
        for c in &config.clusters {
            clusters
                .entry(ObjectKey::new(&c.namespace, &c.name))
                .or_insert(Read::Absent);
        }
        let classes = kind("StorageClass");
        let default_class = if classes.is_empty() {
            Read::Unreadable("the dump has no StorageClasses (add storageclasses to it)".into())
        } else {
            Read::Present(default_class(&classes))
        };
        let found = group(&kind("Pod"), &kind("PersistentVolumeClaim"));
        Self::new(config, found, &clusters, default_class, Vec::new())
    }
}
