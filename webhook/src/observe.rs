//! Observe: the review's object read into typed values — a k8s-openapi `Pod` or
//! `PersistentVolumeClaim`, the shard and pool its labels name, what its vtbackup labels
//! say it is — or a typed reason it cannot be; and the PVC templates an [`Inventory`]
//! holds (its snapshots and vtctld's word on a shard are core's types:
//! `vtsnap_core::snapshot::SnapshotRead`, `vtsnap_core::snapshot::choice::ShardState`).
//! Deciders see only these: JSON stops here.
//!
//! [`Inventory`]: crate::inventory::Inventory

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimSpec, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::admission::{AdmissionRequest, Operation};
use kube::core::{DynamicObject, GroupVersionKind};
use serde::de::DeserializeOwned;
use serde_json::Value;
use vtsnap_core::config::VtbackupStorage;
use vtsnap_core::k8s_names::{cut_to_bytes, escape_controls};
use vtsnap_core::labels;
use vtsnap_core::naming::{KeyRange, SafeNameError};
use vtsnap_core::shard::ShardRef;
use vtsnap_core::tablet_volume::{SizeError, data_claim, requested_size};
use vtsnap_core::vitesscluster::first_pool_template;
use vtsnap_core::vtbackup::{
    BackupObject, DataShape, Identity, ObjectKind, data_volume, desired_init_template,
    placeholder_spec, template_hash,
};

/// The kinds of object the webhook is registered for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    PersistentVolumeClaim,
    Pod,
}

impl Kind {
    /// The kind a review's `request.kind` names: core/v1 Pods and PVCs, nothing else.
    pub fn of(gvk: &GroupVersionKind) -> Option<Self> {
        match (gvk.group.as_str(), gvk.version.as_str(), gvk.kind.as_str()) {
            ("", "v1", "PersistentVolumeClaim") => Some(Self::PersistentVolumeClaim),
            ("", "v1", "Pod") => Some(Self::Pod),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::PersistentVolumeClaim => "PersistentVolumeClaim",
            Self::Pod => "Pod",
        }
    }

    fn object_kind(self) -> ObjectKind {
        match self {
            Self::PersistentVolumeClaim => ObjectKind::PersistentVolumeClaim,
            Self::Pod => ObjectKind::Pod,
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The longest part of a serde message kept: it may quote the value it could not read.
const DETAIL_MAX: usize = 240;

/// Why the object under review does not read as its kind: the field, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the {kind} does not read: {field}: {detail}")]
pub struct Unreadable {
    pub kind: Kind,
    /// The JSON path of the field (`.` for the object itself).
    pub field: String,
    pub detail: String,
}

/// Reads `raw` as `T`, naming the field that does not read.
fn typed<T: DeserializeOwned>(kind: Kind, raw: &Value) -> Result<T, Unreadable> {
    serde_path_to_error::deserialize(raw).map_err(|e| Unreadable {
        kind,
        field: e.path().to_string(),
        detail: escape_controls(cut_to_bytes(&e.inner().to_string(), DETAIL_MAX)).into_owned(),
    })
}

/// Why a label a decision needs does not name what it should.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelError {
    #[error("label {label} is missing")]
    Missing { label: &'static str },
    #[error("label {}: {source}", labels::SHARD)]
    Shard { source: SafeNameError },
}

/// A review as the decision reads it.
#[derive(Debug, Clone)]
pub struct Review {
    pub operation: Operation,
    /// The request's namespace (empty for a cluster-scoped object).
    pub namespace: String,
    /// The object, when the review is of a Pod or a PVC and carries one (a DELETE does not).
    pub object: Option<Result<NewObject, Unreadable>>,
}

impl Review {
    /// What the decision needs of a review request (`crate::admission::Request`).
    pub fn observe(req: &AdmissionRequest<DynamicObject>) -> Self {
        let namespace = req.namespace.clone().unwrap_or_default();
        let object = Kind::of(&req.kind)
            .zip(req.object.as_ref())
            .map(|(kind, o)| {
                serde_json::to_value(o)
                    .map_err(|e| Unreadable {
                        kind,
                        field: ".".into(),
                        detail: e.to_string(),
                    })
                    .and_then(|raw| NewObject::read(kind, &raw, &namespace))
            });
        Self {
            operation: req.operation.clone(),
            namespace,
            object,
        }
    }

    /// The claim of a Pod being created (the server reads it when its cache lacks it).
    pub fn pod_data_claim(&self) -> Option<&str> {
        if self.operation != Operation::Create {
            return None;
        }
        match &self.object.as_ref()?.as_ref().ok()?.body {
            Body::Pod(p) => p.data_claim(),
            Body::Pvc(_) => None,
        }
    }
}

/// A Pod or PVC under review.
#[derive(Debug, Clone)]
pub struct NewObject {
    pub meta: ObjectMeta,
    /// What its vtbackup labels say it is, cross-checked against its name and owner.
    pub backup: Identity,
    /// The shard its operator labels name (in the request's namespace).
    pub shard: Result<ShardRef, LabelError>,
    /// Its tablet pool (`planetscale.com/tablet-type`).
    pub pool: Result<String, LabelError>,
    pub body: Body,
}

/// What is read of the object beyond its metadata.
#[derive(Debug, Clone)]
pub enum Body {
    Pod(Box<NewPod>),
    Pvc(Box<NewPvc>),
}

#[derive(Debug, Clone)]
pub struct NewPod {
    pub spec: Option<PodSpec>,
    /// Where an initial-backup Pod's `/vt/vtdataroot` is (`None` for any other Pod, and for
    /// one whose `vtbackup` container does not mount it).
    pub backup_data: Option<BackupData>,
}

impl NewPod {
    /// The claim its data volume names.
    pub fn data_claim(&self) -> Option<&str> {
        data_claim(self.spec.as_ref()?.volumes.as_deref()?)
    }
}

#[derive(Debug, Clone)]
pub struct NewPvc {
    pub spec: Option<PersistentVolumeClaimSpec>,
    /// Its requested storage, read from the object as sent: k8s-openapi's `Quantity` holds
    /// only text, and a hand-made review may send a number, which is then named.
    pub requested: Result<u128, SizeError>,
}

/// Where an initial-backup Pod's `/vt/vtdataroot` is (core's `DataVolume`, typed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupData {
    /// What the data-volume hash is of.
    pub shape: DataShape,
    /// The index in `spec.volumes` of the operator's default PVC volume, when that is it.
    pub default_pvc: Option<usize>,
}

impl NewObject {
    /// Reads the JSON of a `kind` object of a review in `namespace`.
    pub fn read(kind: Kind, raw: &Value, namespace: &str) -> Result<Self, Unreadable> {
        let backup = BackupObject::identify(raw, kind.object_kind());
        let (meta, body) = match kind {
            Kind::Pod => {
                let pod: Pod = typed(kind, raw)?;
                let backup_data = (backup == Identity::Backup(BackupObject::InitPod))
                    .then(|| backup_data(raw, pod.metadata.name.as_deref().unwrap_or("")))
                    .flatten();
                let body = NewPod {
                    spec: pod.spec,
                    backup_data,
                };
                (pod.metadata, Body::Pod(Box::new(body)))
            }
            Kind::PersistentVolumeClaim => {
                let requested = requested_size(raw);
                let pvc: PersistentVolumeClaim = match requested {
                    Ok(_) | Err(SizeError::Quantity { .. }) => typed(kind, raw)?,
                    // Not text (null, a number, …), and named: the rest still reads.
                    Err(_) => typed(kind, &without_storage(raw))?,
                };
                let body = NewPvc {
                    spec: pvc.spec,
                    requested,
                };
                (pvc.metadata, Body::Pvc(Box::new(body)))
            }
        };
        Ok(Self {
            shard: shard_of(&meta, namespace),
            pool: label(&meta, labels::TABLET_TYPE).map(str::to_owned),
            meta,
            backup,
            body,
        })
    }

    pub fn kind(&self) -> Kind {
        match self.body {
            Body::Pod(_) => Kind::Pod,
            Body::Pvc(_) => Kind::PersistentVolumeClaim,
        }
    }

    /// Its name (empty before the API server generates one).
    pub fn name(&self) -> &str {
        self.meta.name.as_deref().unwrap_or("")
    }

    /// Whether its component label says it is a tablet's.
    pub fn is_tablet(&self) -> bool {
        label(&self.meta, labels::COMPONENT).ok() == Some(labels::COMPONENT_VTTABLET)
    }

    /// The value of its label `key`, if it has one.
    pub fn label(&self, key: &'static str) -> Option<&str> {
        label(&self.meta, key).ok()
    }
}

fn label<'a>(meta: &'a ObjectMeta, key: &'static str) -> Result<&'a str, LabelError> {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
        .ok_or(LabelError::Missing { label: key })
}

/// The shard an object's operator labels name.
fn shard_of(meta: &ObjectMeta, namespace: &str) -> Result<ShardRef, LabelError> {
    let safe = label(meta, labels::SHARD)?;
    let shard = KeyRange::from_safe_name(safe).map_err(|source| LabelError::Shard { source })?;
    Ok(ShardRef {
        namespace: namespace.to_owned(),
        cluster: label(meta, labels::CLUSTER)?.to_owned(),
        keyspace: label(meta, labels::KEYSPACE)?.to_owned(),
        shard,
    })
}

fn backup_data(raw: &Value, pod_name: &str) -> Option<BackupData> {
    let data = data_volume(raw)?;
    let default_pvc = data
        .volume
        .as_ref()
        .filter(|_| data.is_default_pvc(pod_name))
        .map(|(i, _)| *i);
    Some(BackupData {
        shape: data.shape(),
        default_pvc,
    })
}

fn without_storage(raw: &Value) -> Value {
    let mut out = raw.clone();
    if let Some(requests) = out
        .pointer_mut("/spec/resources/requests")
        .and_then(Value::as_object_mut)
    {
        requests.remove("storage");
    }
    out
}

/// A tablet PVC as an inventory holds it.
pub type PvcRead = Result<PersistentVolumeClaim, Unreadable>;

/// Reads a PVC's JSON.
pub fn read_pvc(raw: &Value) -> PvcRead {
    typed(Kind::PersistentVolumeClaim, raw)
}

/// A PVC spec template — the config's, the placeholder, or the first tablet pool's. It is
/// hashed and copied into a patch, never read field by field: its hash must be the storage
/// reconciler's, which is taken of the JSON as written.
#[derive(Debug, Clone, PartialEq)]
pub struct PvcTemplate(Value);

impl PvcTemplate {
    /// The hash stamped as `vtsnap.io/vtbackup-pvc-template-hash`.
    pub fn hash(&self) -> String {
        template_hash(&self.0)
    }

    /// The template as the patch writes it.
    pub fn json(&self) -> &Value {
        &self.0
    }

    /// The first tablet pool's `dataVolumeClaimTemplate` of `shard` in a VitessCluster.
    pub fn first_pool(cluster: &Value, shard: &ShardRef) -> Result<Self, FirstPoolUnknown> {
        match first_pool_template(cluster, &shard.keyspace, &shard.shard.to_string()) {
            Ok(Some(t)) => Ok(Self(t.clone())),
            Ok(None) => Err(FirstPoolUnknown::NotInSpec),
            Err(e) => Err(FirstPoolUnknown::Unreadable {
                detail: e.to_string(),
            }),
        }
    }
}

/// Why the first tablet pool's template of a shard is not known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FirstPoolUnknown {
    #[error("VitessCluster {cluster} is not cached")]
    NoCluster { cluster: String },
    #[error("the VitessCluster defines no dataVolumeClaimTemplate for the shard's first pool")]
    NotInSpec,
    #[error("the VitessCluster's spec does not read: {detail}")]
    Unreadable { detail: String },
}

/// Where vtbackup Pods get their scratch storage (the config's choice), its template typed.
#[derive(Debug, Clone, PartialEq)]
pub enum Storage {
    InheritFirstPool,
    EmptyDirForInitialBackup,
    Template(PvcTemplate),
}

impl Storage {
    pub fn of(config: &VtbackupStorage) -> Self {
        match config {
            VtbackupStorage::InheritFirstPool => Self::InheritFirstPool,
            VtbackupStorage::EmptyDirForInitialBackup => Self::EmptyDirForInitialBackup,
            VtbackupStorage::Template(t) => Self::Template(PvcTemplate(t.clone())),
        }
    }
}

/// The template the initial backup's Pod and PVC are made for (core's
/// `desired_init_template`: the configured one, the placeholder, or the first pool's), or
/// why it is not known.
pub fn desired_init(
    config: &VtbackupStorage,
    first_pool: Result<PvcTemplate, FirstPoolUnknown>,
) -> Result<PvcTemplate, FirstPoolUnknown> {
    let pool = first_pool.as_ref().ok().map(PvcTemplate::json);
    match (desired_init_template(config, pool), first_pool) {
        (Some(t), _) => Ok(PvcTemplate(t)),
        (None, Err(e)) => Err(e),
        (None, Ok(_)) => Err(FirstPoolUnknown::NotInSpec),
    }
}

/// The placeholder PVC spec (a PVC that never binds).
pub fn placeholder() -> PvcTemplate {
    PvcTemplate(placeholder_spec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use vtsnap_core::tablet_volume::data_claim_of;
    use vtsnap_testkit::operator_objects::{operator_shard, pvc_template};

    fn pvc(storage: Value) -> Value {
        let mut p = operator_shard()
            .tablet("replica", 1)
            .pvc(&pvc_template("1Gi"));
        p["spec"]["resources"]["requests"]["storage"] = storage;
        p
    }

    fn read(kind: Kind, raw: &Value) -> Result<NewObject, Unreadable> {
        NewObject::read(kind, raw, "vitess")
    }

    #[test]
    fn an_operator_pvc_reads_with_its_shard_pool_and_size() {
        let o = read(Kind::PersistentVolumeClaim, &pvc(json!("2Gi"))).unwrap();
        assert!(o.is_tablet());
        assert_eq!(o.pool.as_deref(), Ok("replica"));
        assert_eq!(o.shard.as_ref().unwrap().keyspace, "commerce");
        assert_eq!(o.backup, Identity::Other);
        let Body::Pvc(p) = &o.body else {
            panic!("a PVC reads as a PVC")
        };
        assert_eq!(p.requested, Ok(2 << 30));
    }

    #[test]
    fn a_size_that_is_no_quantity_string_is_named_and_the_pvc_still_reads() {
        for (storage, want) in [
            (
                json!(5),
                "spec.resources.requests.storage is the number 5, not a quantity string (\"5\")",
            ),
            (
                json!(["1Gi"]),
                "spec.resources.requests.storage is a list, not a quantity string",
            ),
            (json!(null), "spec.resources.requests.storage is missing"),
        ] {
            let o = read(Kind::PersistentVolumeClaim, &pvc(storage)).unwrap();
            let Body::Pvc(p) = &o.body else {
                panic!("a PVC reads as a PVC")
            };
            assert_eq!(p.requested.as_ref().unwrap_err().to_string(), want);
        }
    }

    #[test]
    fn an_object_that_does_not_read_names_the_field() {
        let mut pod = operator_shard().tablet("replica", 1).pod();
        pod["spec"]["volumes"][0]["name"] = json!(7);
        let e = read(Kind::Pod, &pod).unwrap_err();
        assert_eq!(e.kind, Kind::Pod);
        assert_eq!(e.field, "spec.volumes[0].name");
        assert!(
            e.to_string()
                .starts_with("the Pod does not read: spec.volumes[0].name: invalid type"),
            "{e}"
        );
        let mut pvc = pvc(json!("1Gi"));
        pvc["metadata"]["labels"]["x"] = json!("\u{1b}[2J".repeat(200));
        pvc["metadata"]["labels"]["y"] = json!(["a"]);
        let e = read(Kind::PersistentVolumeClaim, &pvc).unwrap_err();
        assert_eq!(e.field, "metadata.labels.y");
        assert!(!e.detail.chars().any(char::is_control));
    }

    #[test]
    fn labels_that_name_no_shard_or_pool_are_typed_reasons() {
        let mut p = pvc(json!("1Gi"));
        let labels = p["metadata"]["labels"].as_object_mut().unwrap();
        labels.remove(labels::TABLET_TYPE);
        labels.insert(labels::SHARD.into(), json!("-80"));
        let o = read(Kind::PersistentVolumeClaim, &p).unwrap();
        assert_eq!(
            o.pool,
            Err(LabelError::Missing {
                label: labels::TABLET_TYPE
            })
        );
        assert!(
            o.shard
                .unwrap_err()
                .to_string()
                .starts_with("label planetscale.com/shard: ")
        );
    }

    #[test]
    fn a_pods_data_claim_is_its_data_volumes() {
        let pod = operator_shard().tablet("replica", 1).pod();
        let o = read(Kind::Pod, &pod).unwrap();
        let Body::Pod(p) = &o.body else {
            panic!("a Pod reads as a Pod")
        };
        let want = pod["metadata"]["name"].as_str().unwrap();
        assert_eq!(p.data_claim(), Some(want));
        assert_eq!(data_claim_of(&pod).as_deref(), Some(want));
        assert_eq!(p.backup_data, None);
        assert_eq!(data_claim_of(&json!({"spec": {}})), None);
    }

    #[test]
    fn an_initial_backup_pods_data_volume_is_read_with_its_index() {
        let pod = operator_shard().vtbackup_init_pod();
        let o = read(Kind::Pod, &pod).unwrap();
        let Body::Pod(p) = &o.body else {
            panic!("a Pod reads as a Pod")
        };
        let data = p.backup_data.as_ref().unwrap();
        assert_eq!(data.default_pvc, Some(1));
        assert_eq!(data.shape, data_volume(&pod).unwrap().shape());
    }
}
