//! vtbackup scratch storage (docs/design.md §9):
//! which objects are vtbackup's, where a vtbackup Pod's data volume is, the placeholder
//! PVC an emptyDir initial backup leaves behind, and the two hashes stamped on the objects
//! so that the storage reconciler can tell what they were made for.
//!
//! Facts from vitess-operator (`pkg/operator/vttablet/vtbackup_pod.go`, `pvc.go`,
//! `pkg/controller/vitessbackupschedule/vitessbackupschedule_controller.go`,
//! `pkg/operator/vitessbackup/labels.go`):
//! - the initial-backup Pod and its PVC share one name and the labels
//!   `planetscale.com/component=vtbackup`, `backup.planetscale.com/type=init`;
//! - a scheduled backup's PVC (named after its Job) has `backup.planetscale.com/type=update`
//!   and `planetscale.com/backup-schedule`, and no component label;
//! - both are built from the shard's first tablet pool; the data volume is
//!   `persistent-volume-claim` (claimName = the Pod's or Job's name) mounted by the
//!   `vtbackup` container at `/vt/vtdataroot` (subPath `vtdataroot`); a pool's
//!   `extraVolumes` replace volumes by name and `extraVolumeMounts` mounts by mountPath;
//! - the operator never updates an existing vtbackup Pod or PVC.

use md5::{Digest, Md5};
use serde_json::{Map, Value, json};

use crate::config::VtbackupStorage;
use crate::labels;

pub const LABEL_BACKUP_TYPE: &str = "backup.planetscale.com/type";
pub const BACKUP_TYPE_INIT: &str = "init";
/// Scheduled backups (VitessBackupSchedule Jobs).
pub const BACKUP_TYPE_UPDATE: &str = "update";
pub const LABEL_BACKUP_SCHEDULE: &str = "planetscale.com/backup-schedule";
pub const CONTAINER: &str = "vtbackup";
pub const DATA_ROOT: &str = "/vt/vtdataroot";

/// The hash of the PVC template the object was made for (Pod and PVC).
pub const ANN_TEMPLATE_HASH: &str = "vtsnap.io/vtbackup-pvc-template-hash";
/// The hash of the Pod's effective `/vt/vtdataroot` mount and the volume it names.
pub const ANN_DATA_VOLUME_HASH: &str = "vtsnap.io/vtbackup-data-volume-hash";

/// The StorageClass of the placeholder PVC: no such class exists, and the PVC's selector
/// matches no PersistentVolume, so it never binds and nothing is ever allocated for it.
pub const PLACEHOLDER_CLASS: &str = "vtsnap-placeholder-never-binds";
/// The selector label of the placeholder PVC (no PV carries it).
pub const PLACEHOLDER_SELECTOR: &str = "vtsnap.io/placeholder";

/// A vtbackup object the storage choice applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackupObject {
    InitPod,
    InitPvc,
    ScheduledPvc,
}

/// The kind of an object being identified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    Pod,
    PersistentVolumeClaim,
}

/// What an object is, its labels cross-checked against its name, its owner and each other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    Backup(BackupObject),
    /// It claims to be no vtbackup object.
    Other,
    /// It claims to be `claimed`, and something else it carries says otherwise: it is
    /// never acted on, only reported.
    Conflicting {
        claimed: BackupObject,
        why: String,
    },
}

fn label<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.pointer("/metadata/labels")
        .and_then(|l| l.get(key))
        .and_then(Value::as_str)
}

/// The labels only the operator's tablet objects carry
/// (`pkg/controller/vitessshard/reconcile_tablets.go`).
const TABLET_LABELS: [&str; 3] = [
    labels::TABLET_UID,
    labels::TABLET_TYPE,
    labels::TABLET_INDEX,
];

/// The name vitess-operator gives a shard's initial-backup Pod and its PVC
/// (`pkg/operator/vttablet/vtbackup_pod.go`, `InitialBackupPodName`), from the object's
/// own shard labels; `None` when one is missing.
fn init_name_from_labels(obj: &Value) -> Option<String> {
    let cluster = label(obj, labels::CLUSTER)?;
    let keyspace = label(obj, labels::KEYSPACE)?;
    let shard = label(obj, labels::SHARD)?;
    Some(crate::naming::join_name(&[
        cluster,
        keyspace,
        shard,
        CONTAINER,
        BACKUP_TYPE_INIT,
    ]))
}

/// The kind of the object's controller, if it names one.
fn controller_kind(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|o| o.get("controller").and_then(Value::as_bool) == Some(true))
        .map(|o| o.get("kind").and_then(Value::as_str).unwrap_or(""))
}

/// What the objects claims to be by its backup-type label alone.
fn claimed(obj: &Value, kind: ObjectKind) -> Option<BackupObject> {
    match (kind, label(obj, LABEL_BACKUP_TYPE)?) {
        (ObjectKind::Pod, BACKUP_TYPE_INIT) => Some(BackupObject::InitPod),
        (ObjectKind::PersistentVolumeClaim, BACKUP_TYPE_INIT) => Some(BackupObject::InitPvc),
        (ObjectKind::PersistentVolumeClaim, BACKUP_TYPE_UPDATE) => Some(BackupObject::ScheduledPvc),
        _ => None,
    }
}

/// Why the object is not what its backup-type label claims, if it is not.
fn conflict(obj: &Value, claimed: BackupObject) -> Option<String> {
    let component = label(obj, labels::COMPONENT);
    if component == Some(labels::COMPONENT_VTTABLET) {
        return Some("it is labelled a vttablet object".to_owned());
    }
    if let Some(l) = TABLET_LABELS.iter().find(|l| label(obj, l).is_some()) {
        return Some(format!("it carries the tablet label {l}"));
    }
    let schedule = label(obj, LABEL_BACKUP_SCHEDULE).is_some();
    if claimed == BackupObject::ScheduledPvc {
        // vitessbackupschedule_controller.go labels the Job's objects without a component.
        return match (schedule, component) {
            (false, _) => Some(format!("it has no {LABEL_BACKUP_SCHEDULE} label")),
            (true, Some(c)) => Some(format!(
                "it is labelled component {c:?}, which a scheduled backup's PVC is not"
            )),
            (true, None) => None,
        };
    }
    if component != Some(labels::COMPONENT_VTBACKUP) {
        return Some(format!(
            "its component label is {component:?}, not {:?}",
            labels::COMPONENT_VTBACKUP
        ));
    }
    if schedule {
        return Some(format!(
            "it also carries {LABEL_BACKUP_SCHEDULE}, a scheduled backup's label"
        ));
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    match init_name_from_labels(obj) {
        None => return Some("its shard labels are missing".to_owned()),
        Some(want) if want != name => {
            return Some(format!(
                "it is named {name:?}, and the operator names its shard's initial backup {want:?}"
            ));
        }
        Some(_) => {}
    }
    // The operator's VitessShard controller owns both (reconcile_backup_job.go).
    match controller_kind(obj) {
        Some(k) if k != "VitessShard" => Some(format!(
            "its controller is a {k:?}, not the shard's VitessShard"
        )),
        _ => None,
    }
}

impl BackupObject {
    /// What a Pod or PVC is: its backup-type label's claim, cross-checked.
    pub fn identify(obj: &Value, kind: ObjectKind) -> Identity {
        let Some(claimed) = claimed(obj, kind) else {
            return Identity::Other;
        };
        match conflict(obj, claimed) {
            None => Identity::Backup(claimed),
            Some(why) => Identity::Conflicting { claimed, why },
        }
    }

    /// What a Pod or PVC is; `None` for anything else, and for an object whose signals
    /// conflict (see [`Self::identify`]).
    pub fn classify(obj: &Value, kind: ObjectKind) -> Option<Self> {
        match Self::identify(obj, kind) {
            Identity::Backup(b) => Some(b),
            Identity::Other | Identity::Conflicting { .. } => None,
        }
    }
}

/// The placeholder PVC spec (see [`PLACEHOLDER_CLASS`]): the smallest request, a class
/// that does not exist, and a selector no PV matches. The operator still creates the
/// initial backup's PVC; this keeps it from allocating a disk.
pub fn placeholder_spec() -> Value {
    json!({
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Mi"}},
        "storageClassName": PLACEHOLDER_CLASS,
        "volumeMode": "Filesystem",
        "selector": {"matchLabels": {PLACEHOLDER_SELECTOR: "never"}},
    })
}

/// The PVC spec the initial backup's PVC should have: the configured template, the
/// placeholder (emptyDir initial backup), or the first pool's (`None` when it is unknown).
pub fn desired_init_template(
    storage: &VtbackupStorage,
    first_pool: Option<&Value>,
) -> Option<Value> {
    match storage {
        VtbackupStorage::Template(t) => Some(t.clone()),
        VtbackupStorage::EmptyDirForInitialBackup => Some(placeholder_spec()),
        VtbackupStorage::InheritFirstPool => first_pool.cloned(),
    }
}

/// The same value with object keys sorted and `null` members dropped (absent and null
/// are the same in a Kubernetes spec), so equal specs hash alike.
pub fn canonical(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut sorted: Vec<(&String, &Value)> =
                m.iter().filter(|(_, v)| !v.is_null()).collect();
            sorted.sort_by(|a, b| a.0.cmp(b.0));
            Value::Object(
                sorted
                    .into_iter()
                    .map(|(k, v)| (k.clone(), canonical(v)))
                    .collect::<Map<String, Value>>(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

fn md5_hex(v: &Value) -> String {
    let digest = Md5::digest(canonical(v).to_string().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The hash of a PVC template (spec), stamped as [`ANN_TEMPLATE_HASH`].
pub fn template_hash(spec: &Value) -> String {
    md5_hex(spec)
}

/// Where a vtbackup Pod's `/vt/vtdataroot` comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct DataVolume {
    /// The `vtbackup` container's mount at `/vt/vtdataroot`.
    pub mount: Value,
    /// Index of the volume it names in `spec.volumes`, and the volume.
    pub volume: Option<(usize, Value)>,
}

impl DataVolume {
    /// Whether it is the operator's default: the PVC volume of the Pod's own name.
    pub fn is_default_pvc(&self, pod_name: &str) -> bool {
        self.volume.as_ref().is_some_and(|(_, v)| {
            v.get("name").and_then(Value::as_str) == Some(labels::DATA_VOLUME)
                && v.pointer("/persistentVolumeClaim/claimName")
                    .and_then(Value::as_str)
                    == Some(pod_name)
        })
    }

    /// The hash of the mount and its volume, stamped as [`ANN_DATA_VOLUME_HASH`].
    /// What the data volume is, as far as storage goes.
    pub fn shape(&self) -> DataShape {
        let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        DataShape {
            volume: text(&self.mount, "name"),
            sub_path: text(&self.mount, "subPath"),
            source: self
                .volume
                .as_ref()
                .map_or(Source::Missing, |(_, v)| Source::of(v)),
        }
    }

    /// The hash of its shape, stamped as [`ANN_DATA_VOLUME_HASH`].
    pub fn hash(&self) -> String {
        self.shape().hash()
    }
}

/// Where `/vt/vtdataroot` lives: the volume the mount names, its subPath and what kind of
/// storage backs it. Details of other volume kinds are left out on purpose: the API
/// server fills in their defaults (a ConfigMap's `defaultMode`, say), which a template
/// does not carry, and a hash over them would never match.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DataShape {
    pub volume: String,
    pub sub_path: String,
    pub source: Source,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Source {
    /// A PersistentVolumeClaim of this name.
    Claim {
        name: String,
    },
    EmptyDir,
    /// Another volume source (`hostPath`, `ephemeral`, …): its kind only.
    Other {
        kind: String,
    },
    /// The mount names no volume of the Pod.
    Missing,
}

impl Source {
    /// The kind of a Pod volume (`{"name", "<kind>": {…}}`).
    pub fn of(volume: &Value) -> Self {
        if let Some(c) = volume.get("persistentVolumeClaim") {
            return Self::Claim {
                name: c
                    .get("claimName")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
            };
        }
        if volume.get("emptyDir").is_some() {
            return Self::EmptyDir;
        }
        let kind = volume
            .as_object()
            .and_then(|m| m.keys().find(|k| k.as_str() != "name").cloned())
            .unwrap_or_default();
        Self::Other { kind }
    }
}

impl DataShape {
    pub fn hash(&self) -> String {
        md5_hex(&serde_json::to_value(self).unwrap_or(Value::Null))
    }
}

/// The data shape vitess-operator gives an initial-backup Pod named `pod_name` from the
/// shard's first tablet pool (`pool`: its `extraVolumeMounts` override the mount by
/// mountPath, its `extraVolumes` the volume by name) under the storage policy: the
/// operator's default PVC volume becomes an emptyDir with `useEmptyDirForInitialBackup`,
/// exactly as the admission webhook makes it.
pub fn desired_shape(pool: &Value, storage: &VtbackupStorage, pod_name: &str) -> DataShape {
    let list = |k: &str| {
        pool.get(k)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    let (volume, sub_path) = list("extraVolumeMounts")
        .iter()
        .find(|m| m.get("mountPath").and_then(Value::as_str) == Some(DATA_ROOT))
        .map_or_else(
            || (labels::DATA_VOLUME.to_owned(), "vtdataroot".to_owned()),
            |m| (text(m, "name"), text(m, "subPath")),
        );
    let source = match list("extraVolumes")
        .iter()
        .find(|v| v.get("name").and_then(Value::as_str) == Some(volume.as_str()))
    {
        Some(v) => Source::of(v),
        None if volume == labels::DATA_VOLUME => match storage {
            VtbackupStorage::EmptyDirForInitialBackup => Source::EmptyDir,
            _ => Source::Claim {
                name: pod_name.to_owned(),
            },
        },
        None => Source::Missing,
    };
    DataShape {
        volume,
        sub_path,
        source,
    }
}

/// The data volume of a vtbackup Pod (its `vtbackup` container's mount at
/// `/vt/vtdataroot`); `None` when the Pod has no such container or mount.
pub fn data_volume(pod: &Value) -> Option<DataVolume> {
    let containers = pod.pointer("/spec/containers")?.as_array()?;
    let vtbackup = containers
        .iter()
        .find(|c| c.get("name").and_then(Value::as_str) == Some(CONTAINER))?;
    let mount = vtbackup
        .get("volumeMounts")?
        .as_array()?
        .iter()
        .find(|m| m.get("mountPath").and_then(Value::as_str) == Some(DATA_ROOT))?
        .clone();
    let name = mount.get("name").and_then(Value::as_str);
    let volume = pod
        .pointer("/spec/volumes")
        .and_then(Value::as_array)
        .and_then(|vs| {
            vs.iter()
                .enumerate()
                .find(|(_, v)| name.is_some() && v.get("name").and_then(Value::as_str) == name)
                .map(|(i, v)| (i, v.clone()))
        });
    Some(DataVolume { mount, volume })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Value {
        json!({
            "metadata": {"name": "example-commerce-x-x-vtbackup-init-c6db73c9",
                         "labels": {"planetscale.com/component": "vtbackup", "backup.planetscale.com/type": "init",
                                    "planetscale.com/cluster": "example", "planetscale.com/keyspace": "commerce", "planetscale.com/shard": "x-x"}},
            "spec": {
                "containers": [{"name": "vtbackup", "volumeMounts": [
                    {"name": "vt-root", "mountPath": "/vt/config", "subPath": "config"},
                    {"name": "persistent-volume-claim", "mountPath": "/vt/vtdataroot", "subPath": "vtdataroot"}]}],
                "volumes": [{"name": "vt-root", "emptyDir": {}},
                            {"name": "persistent-volume-claim", "persistentVolumeClaim": {"claimName": "example-commerce-x-x-vtbackup-init-c6db73c9"}}],
            }
        })
    }

    #[test]
    fn objects_are_told_apart_by_their_labels() {
        let p = pod();
        assert_eq!(
            BackupObject::classify(&p, ObjectKind::Pod),
            Some(BackupObject::InitPod)
        );
        assert_eq!(
            BackupObject::classify(&p, ObjectKind::PersistentVolumeClaim),
            Some(BackupObject::InitPvc)
        );
        let sched = json!({"metadata": {"labels": {"backup.planetscale.com/type": "update", "planetscale.com/backup-schedule": "s"}}});
        assert_eq!(
            BackupObject::classify(&sched, ObjectKind::PersistentVolumeClaim),
            Some(BackupObject::ScheduledPvc)
        );
        assert_eq!(
            BackupObject::classify(&sched, ObjectKind::Pod),
            None,
            "scheduled Job pods are not changed"
        );
        let no_schedule =
            json!({"metadata": {"labels": {"backup.planetscale.com/type": "update"}}});
        assert_eq!(
            BackupObject::classify(&no_schedule, ObjectKind::PersistentVolumeClaim),
            None
        );
        let tablet = json!({"metadata": {"labels": {"planetscale.com/component": "vttablet", "backup.planetscale.com/type": "init"}}});
        assert_eq!(BackupObject::classify(&tablet, ObjectKind::Pod), None);
        assert_eq!(
            BackupObject::classify(&tablet, ObjectKind::PersistentVolumeClaim),
            None
        );
        assert_eq!(
            BackupObject::classify(&json!({}), ObjectKind::PersistentVolumeClaim),
            None
        );
    }

    fn pvc() -> Value {
        let mut p = pod();
        p["kind"] = json!("PersistentVolumeClaim");
        p
    }

    fn identity(obj: &Value, kind: ObjectKind) -> Result<Option<BackupObject>, String> {
        match BackupObject::identify(obj, kind) {
            Identity::Backup(b) => Ok(Some(b)),
            Identity::Other => Ok(None),
            Identity::Conflicting { why, .. } => Err(why),
        }
    }

    fn with_label(mut obj: Value, k: &str, v: &str) -> Value {
        obj["metadata"]["labels"][k] = json!(v);
        obj
    }

    #[test]
    fn an_object_whose_signals_conflict_is_no_backup_object() {
        use ObjectKind::{PersistentVolumeClaim as Pvc, Pod};
        assert_eq!(identity(&pod(), Pod), Ok(Some(BackupObject::InitPod)));
        assert_eq!(identity(&pvc(), Pvc), Ok(Some(BackupObject::InitPvc)));
        // A tablet's PVC that also carries a scheduled backup's labels.
        let tablet = json!({"metadata": {"name": "example-vttablet-zone1-2469782763-7e9b3fd1", "labels": {
            "planetscale.com/component": "vttablet", "planetscale.com/tablet-uid": "2469782763",
            "backup.planetscale.com/type": "update", "planetscale.com/backup-schedule": "daily"}}});
        let why = identity(&tablet, Pvc).unwrap_err();
        assert!(why.contains("vttablet"), "{why}");
        assert_eq!(
            BackupObject::identify(&tablet, Pvc),
            Identity::Conflicting {
                claimed: BackupObject::ScheduledPvc,
                why
            }
        );
        assert_eq!(
            BackupObject::classify(&tablet, ObjectKind::PersistentVolumeClaim),
            None
        );
        // Each tablet label alone is a tablet's signal.
        let sched = json!({"metadata": {"labels": {"backup.planetscale.com/type": "update", "planetscale.com/backup-schedule": "s"}}});
        for l in TABLET_LABELS {
            let why = identity(&with_label(sched.clone(), l, "1"), Pvc).unwrap_err();
            assert!(why.contains(l), "{why}");
            assert!(identity(&with_label(pvc(), l, "1"), Pvc).is_err(), "{l}");
        }
        // A scheduled backup's PVC has no component label.
        let why = identity(
            &with_label(sched.clone(), labels::COMPONENT, "vtbackup"),
            Pvc,
        )
        .unwrap_err();
        assert!(why.contains("component"), "{why}");
        // An initial backup's objects: the vtbackup component, no schedule, the
        // operator's name for the shard, the shard's VitessShard as controller.
        assert!(
            identity(&with_label(pvc(), LABEL_BACKUP_SCHEDULE, "s"), Pvc)
                .unwrap_err()
                .contains(LABEL_BACKUP_SCHEDULE)
        );
        assert!(
            identity(&with_label(pod(), labels::COMPONENT, "vtctld"), Pod)
                .unwrap_err()
                .contains("\"vtctld\"")
        );
        let mut renamed = pvc();
        renamed["metadata"]["name"] = json!("example-commerce-x-80-vtbackup-init-c6db73c9");
        assert!(identity(&renamed, Pvc).unwrap_err().contains(
            "names its shard's initial backup \"example-commerce-x-x-vtbackup-init-c6db73c9\""
        ));
        let other_shard = with_label(pvc(), labels::SHARD, "x-80");
        assert!(identity(&other_shard, Pvc).is_err());
        let mut unlabelled = pvc();
        unlabelled["metadata"]["labels"]
            .as_object_mut()
            .unwrap()
            .remove(labels::KEYSPACE);
        assert!(
            identity(&unlabelled, Pvc)
                .unwrap_err()
                .contains("shard labels")
        );
        let owned = |kind: &str, controller: bool| {
            let mut p = pvc();
            p["metadata"]["ownerReferences"] =
                json!([{"kind": kind, "name": "x", "controller": controller}]);
            identity(&p, Pvc)
        };
        assert_eq!(owned("VitessShard", true), Ok(Some(BackupObject::InitPvc)));
        assert!(
            owned("StatefulSet", true)
                .unwrap_err()
                .contains("StatefulSet")
        );
        assert_eq!(
            owned("StatefulSet", false),
            Ok(Some(BackupObject::InitPvc)),
            "only the controller counts"
        );
        // No backup type: not a claim at all.
        assert_eq!(
            identity(
                &json!({"metadata": {"labels": {"planetscale.com/component": "vtbackup"}}}),
                Pod
            ),
            Ok(None)
        );
    }

    #[test]
    fn the_data_volume_is_the_vtbackup_containers_mount_at_the_data_root() {
        let p = pod();
        let d = data_volume(&p).unwrap();
        assert_eq!(d.mount["name"], "persistent-volume-claim");
        assert_eq!(d.volume.as_ref().unwrap().0, 1);
        assert!(d.is_default_pvc("example-commerce-x-x-vtbackup-init-c6db73c9"));
        assert!(!d.is_default_pvc("other"));
        // extraVolumes replaced the data volume by name: not the default any more.
        let mut q = p.clone();
        q["spec"]["volumes"][1] =
            json!({"name": "persistent-volume-claim", "emptyDir": {"sizeLimit": "10Gi"}});
        let dq = data_volume(&q).unwrap();
        assert!(!dq.is_default_pvc("example-commerce-x-x-vtbackup-init-c6db73c9"));
        assert_ne!(dq.hash(), d.hash(), "the volume's kind is in the hash");
        assert_eq!(dq.shape().source, Source::EmptyDir);
        // Details of a volume are not (the API server defaults some).
        let mut q2 = q.clone();
        q2["spec"]["volumes"][1]["emptyDir"] = json!({});
        assert_eq!(data_volume(&q2).unwrap().hash(), dq.hash());
        // extraVolumeMounts moved /vt/vtdataroot onto another volume.
        let mut r = p.clone();
        r["spec"]["containers"][0]["volumeMounts"][1]["name"] = json!("vt-root");
        let dr = data_volume(&r).unwrap();
        assert_eq!(dr.volume.as_ref().unwrap().0, 0);
        assert_ne!(dr.hash(), d.hash(), "the mount is in the hash");
        // No vtbackup container, or no mount at the data root.
        let mut s = p.clone();
        s["spec"]["containers"][0]["name"] = json!("sidecar");
        assert!(data_volume(&s).is_none());
        let mut t = p;
        t["spec"]["containers"][0]["volumeMounts"][1]["mountPath"] = json!("/data");
        assert!(data_volume(&t).is_none());
    }

    #[test]
    fn the_desired_shape_follows_the_pool_overrides_and_the_policy() {
        let name = "example-commerce-x-x-vtbackup-init-c6db73c9";
        let plain = json!({"type": "replica"});
        let default = data_volume(&pod()).unwrap().shape();
        assert_eq!(
            desired_shape(&plain, &VtbackupStorage::InheritFirstPool, name),
            default
        );
        assert_eq!(
            desired_shape(&plain, &VtbackupStorage::Template(json!({})), name),
            default
        );
        let empty = desired_shape(&plain, &VtbackupStorage::EmptyDirForInitialBackup, name);
        assert_eq!(empty.source, Source::EmptyDir);
        assert_eq!(
            (empty.volume.as_str(), empty.sub_path.as_str()),
            ("persistent-volume-claim", "vtdataroot")
        );
        // extraVolumes replacing the data volume by name: kept, whatever the policy.
        let host = json!({"extraVolumes": [{"name": "persistent-volume-claim", "hostPath": {"path": "/scratch"}}]});
        for storage in [
            VtbackupStorage::InheritFirstPool,
            VtbackupStorage::EmptyDirForInitialBackup,
        ] {
            assert_eq!(
                desired_shape(&host, &storage, name).source,
                Source::Other {
                    kind: "hostPath".into()
                }
            );
        }
        // extraVolumeMounts moving the data root onto another volume.
        let moved = json!({"extraVolumeMounts": [{"name": "scratch", "mountPath": "/vt/vtdataroot"}],
                           "extraVolumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "20Gi"}}]});
        let s = desired_shape(&moved, &VtbackupStorage::InheritFirstPool, name);
        assert_eq!(
            (s.volume.as_str(), s.sub_path.as_str(), s.source),
            ("scratch", "", Source::EmptyDir)
        );
        let missing =
            json!({"extraVolumeMounts": [{"name": "nowhere", "mountPath": "/vt/vtdataroot"}]});
        assert_eq!(
            desired_shape(&missing, &VtbackupStorage::InheritFirstPool, name).source,
            Source::Missing
        );
        // What the webhook stamps on the Pod it made is what the reconciler wants.
        let other = json!({"name": "x", "ephemeral": {"volumeClaimTemplate": {}}});
        assert_eq!(
            Source::of(&other),
            Source::Other {
                kind: "ephemeral".into()
            }
        );
    }

    #[test]
    fn hashes_ignore_key_order_and_nulls_and_see_every_value() {
        let a = json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}});
        let b = json!({"resources": {"requests": {"storage": "10Gi"}}, "storageClassName": null, "accessModes": ["ReadWriteOnce"]});
        assert_eq!(template_hash(&a), template_hash(&b));
        let c = json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "11Gi"}}});
        assert_ne!(template_hash(&a), template_hash(&c));
        assert_eq!(template_hash(&a).len(), 32);
        // An explicit empty storage class is a value, not an absence.
        let d = json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}, "storageClassName": ""});
        assert_ne!(template_hash(&a), template_hash(&d));
    }

    #[test]
    fn the_desired_initial_template_follows_the_storage_choice() {
        let pool = json!({"resources": {"requests": {"storage": "100Gi"}}});
        let own = json!({"resources": {"requests": {"storage": "10Gi"}}});
        assert_eq!(
            desired_init_template(&VtbackupStorage::InheritFirstPool, Some(&pool)),
            Some(pool.clone())
        );
        assert_eq!(
            desired_init_template(&VtbackupStorage::InheritFirstPool, None),
            None
        );
        assert_eq!(
            desired_init_template(&VtbackupStorage::EmptyDirForInitialBackup, Some(&pool)),
            Some(placeholder_spec())
        );
        assert_eq!(
            desired_init_template(&VtbackupStorage::Template(own.clone()), Some(&pool)),
            Some(own)
        );
        let p = placeholder_spec();
        assert_eq!(p["storageClassName"], PLACEHOLDER_CLASS);
        assert!(p["selector"]["matchLabels"][PLACEHOLDER_SELECTOR].is_string());
    }
}
