//! Observe: what the reconciler reads, as plain values: per shard its initial-backup Pod
//! and PVC, the VitessClusters (their first pools), and the cluster's default StorageClass.
//! Read from the API ([`observe`]) or from a `kubectl get … -o json` dump ([`World::from_dump`]).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ListParams};
use serde::Serialize;
use serde_json::Value;
use vtsnap_core::config::Config;
use vtsnap_core::input::{self, Accept, MAX_DUMP};
use vtsnap_core::labels;
use vtsnap_core::naming::KeyRange;
use vtsnap_core::reconcile::{apis, list};
use vtsnap_core::shard::ShardRef;
use vtsnap_core::vtbackup::{
    ANN_DATA_VOLUME_HASH, ANN_TEMPLATE_HASH, BACKUP_TYPE_INIT, BackupObject, DataShape, Identity,
    LABEL_BACKUP_TYPE, ObjectKind, data_volume,
};

/// What a tolerant read gave (absent, present, or unreadable with a reason).
pub use vtsnap_core::reconcile::Read;

/// The loop guard's annotation on the PVC: the desired hashes a Pod was last replaced for.
pub const ANN_REPLACED_FOR: &str = "vtsnap.io/vtbackup-replaced-for";

fn annotation(v: &Value, k: &str) -> Option<String> {
    v.pointer("/metadata/annotations")
        .and_then(|a| a.get(k))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

fn text(v: &Value, p: &str) -> String {
    v.pointer(p)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

/// A Pod's `status.phase`, as far as replacing it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodPhase {
    /// Not started yet: nothing runs, it may be replaced.
    Pending,
    Running,
    /// Ended (`Succeeded`, `Failed`): it may be replaced.
    Terminated,
    /// `Unknown` (its node is unreachable: the backup may still run), no phase, or one
    /// Kubernetes does not have: never replaced on a guess.
    Uncertain(String),
}

impl PodPhase {
    pub fn of(phase: Option<&str>) -> Self {
        match phase {
            Some("Pending") => Self::Pending,
            Some("Running") => Self::Running,
            Some("Succeeded" | "Failed") => Self::Terminated,
            Some("Unknown") => Self::Uncertain(
                "its phase is Unknown (its node does not answer): the backup may still run".into(),
            ),
            None => Self::Uncertain("it has no phase".into()),
            Some(other) => {
                Self::Uncertain(format!("its phase {other:?} is not one Kubernetes has"))
            }
        }
    }
}

/// The initial-backup Pod.
#[derive(Debug, Clone, PartialEq)]
pub struct PodState {
    pub name: String,
    pub uid: String,
    /// As read: a delete is refused (409) if the Pod changed since (it started, say).
    pub resource_version: String,
    pub phase: PodPhase,
    /// It has a deletionTimestamp: already going.
    pub terminating: bool,
    pub template_hash: Option<String>,
    pub data_hash: Option<String>,
    /// Its effective data volume (`None`: no vtbackup container mounts the data root).
    pub shape: Option<DataShape>,
}

impl PodState {
    pub fn read(v: &Value) -> Result<Self, String> {
        let name = text(v, "/metadata/name");
        let uid = text(v, "/metadata/uid");
        if name.is_empty() || uid.is_empty() {
            return Err("metadata.name or metadata.uid is missing".into());
        }
        Ok(Self {
            resource_version: text(v, "/metadata/resourceVersion"),
            phase: PodPhase::of(v.pointer("/status/phase").and_then(Value::as_str)),
            terminating: v
                .pointer("/metadata/deletionTimestamp")
                .is_some_and(|t| !t.is_null()),
            template_hash: annotation(v, ANN_TEMPLATE_HASH),
            data_hash: annotation(v, ANN_DATA_VOLUME_HASH),
            shape: data_volume(v).map(|d| d.shape()),
            name,
            uid,
        })
    }

    pub fn running(&self) -> bool {
        self.phase == PodPhase::Running
    }
}

/// The initial backup's PVC.
#[derive(Debug, Clone, PartialEq)]
pub struct PvcState {
    pub name: String,
    pub uid: String,
    pub resource_version: String,
    pub template_hash: Option<String>,
    pub replaced_for: Option<String>,
    /// Being deleted (held by the pvc-protection finalizer while a Pod uses it).
    pub terminating: bool,
    /// The whole object (its spec is compared with the template for adoption).
    pub object: Value,
}

impl PvcState {
    pub fn read(v: &Value) -> Result<Self, String> {
        let name = text(v, "/metadata/name");
        let uid = text(v, "/metadata/uid");
        if name.is_empty() || uid.is_empty() {
            return Err("metadata.name or metadata.uid is missing".into());
        }
        if !v.get("spec").is_some_and(Value::is_object) {
            return Err(format!("PVC {name}: spec is not an object"));
        }
        Ok(Self {
            resource_version: text(v, "/metadata/resourceVersion"),
            template_hash: annotation(v, ANN_TEMPLATE_HASH),
            replaced_for: annotation(v, ANN_REPLACED_FOR),
            terminating: v
                .pointer("/metadata/deletionTimestamp")
                .is_some_and(|t| !t.is_null()),
            object: v.clone(),
            name,
            uid,
        })
    }
}

/// One shard's initial-backup objects.
#[derive(Debug, Clone, PartialEq)]
pub struct Shard {
    pub key: ShardRef,
    pub pod: Read<PodState>,
    pub pvc: Read<PvcState>,
}

/// Everything read.
#[derive(Debug, Clone, PartialEq)]
pub struct World {
    pub shards: Vec<Shard>,
    /// VitessCluster objects by `(namespace, name)`.
    pub clusters: BTreeMap<(String, String), Read<Value>>,
    /// The default StorageClass (`Present(None)`: the cluster has none).
    pub default_class: Read<Option<String>>,
    /// LISTs that failed (`Pods in <ns>: why`): with no object read, no shard carries the
    /// error, yet the run did not see the namespace, so it is not complete.
    pub unlisted: Vec<String>,
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
pub fn group(pods: &[Value], pvcs: &[Value]) -> Vec<Shard> {
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
        .map(|(key, (pod, pvc))| Shard { key, pod, pvc })
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
    let mut world = World {
        shards: Vec::new(),
        clusters: BTreeMap::new(),
        default_class: match classes {
            Ok(l) => Read::Present(default_class(&to_values(l))),
            Err(e) => Read::Unreadable(format!("StorageClasses: {e}")),
        },
        unlisted: Vec::new(),
    };
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
        world
            .unlisted
            .extend(pods_err.iter().chain(&pvcs_err).cloned());
        let mut shards = group(&pods, &pvcs);
        for s in &mut shards {
            if let Some(e) = &pods_err {
                s.pod = Read::Unreadable(e.clone());
            }
            if let Some(e) = &pvcs_err {
                s.pvc = Read::Unreadable(e.clone());
            }
        }
        world.shards.extend(shards);
        for (_, cluster) in scope.iter().filter(|(n, _)| *n == ns) {
            let got = apis::vitess_clusters(kube, ns).get_opt(cluster).await;
            let read = Read::from_get(
                got.map(|c| c.map(|c| serde_json::to_value(c).unwrap_or(Value::Null))),
            );
            world
                .clusters
                .insert((ns.to_owned(), (*cluster).to_owned()), read);
        }
    }
    world
}

/// Why a dump cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    #[error(transparent)]
    Read(#[from] input::ReadError),
    #[error("not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    #[error("not a List: no items")]
    NotAList,
}

impl World {
    /// Reads a dump file or pipe of at most [`MAX_DUMP`] bytes, then [`Self::from_dump`].
    pub fn read_dump(path: &std::path::Path, config: &Config) -> Result<Self, DumpError> {
        let bytes = input::read_bounded(path, "a dump", MAX_DUMP, Accept::FileOrPipe)?;
        let list = serde_json::from_slice::<Value>(&bytes).map_err(DumpError::NotJson)?;
        Self::from_dump(config, &list)
    }

    /// From a dump (`kubectl get pods,persistentvolumeclaims,vitessclusters,storageclasses -A -o json`).
    /// A configured VitessCluster the dump lacks is absent; one it holds twice unreadable.
    pub fn from_dump(config: &Config, list: &Value) -> Result<Self, DumpError> {
        let items = list
            .get("items")
            .and_then(Value::as_array)
            .ok_or(DumpError::NotAList)?;
        let kind = |k: &str| -> Vec<Value> {
            items
                .iter()
                .filter(|i| i.get("kind").and_then(Value::as_str) == Some(k))
                .cloned()
                .collect()
        };
        let mut clusters = BTreeMap::new();
        for c in kind("VitessCluster") {
            let key = (text(&c, "/metadata/namespace"), text(&c, "/metadata/name"));
            let read = if clusters.contains_key(&key) {
                Read::Unreadable("the dump holds it twice".into())
            } else {
                Read::Present(c)
            };
            clusters.insert(key, read);
        }
        for c in &config.clusters {
            clusters
                .entry((c.namespace.clone(), c.name.clone()))
                .or_insert(Read::Absent);
        }
        let classes = kind("StorageClass");
        Ok(Self {
            shards: group(&kind("Pod"), &kind("PersistentVolumeClaim")),
            clusters,
            default_class: if classes.is_empty() {
                Read::Unreadable("the dump has no StorageClasses (add storageclasses to it)".into())
            } else {
                Read::Present(default_class(&classes))
            },
            unlisted: Vec::new(),
        })
    }
}
