//! The decisions, pure: `(object, policy, inventory) → JSON patch + reasons`. Nothing here
//! does I/O; the server and the offline `review` call [`decide`] with what they observed.

mod pod;
mod restore;
mod vtbackup;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_hostile;

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use serde_json::Value;
use vtsnap_core::config::{Config, resolve_in};
use vtsnap_core::k8s_names::escape_controls;
use vtsnap_core::labels;
use vtsnap_core::naming::KeyRange;
use vtsnap_core::shard::ShardRef;
use vtsnap_core::vtbackup::{BackupObject, Identity, ObjectKind};

pub use pod::{RESTORE_CONTAINER, data_claim as data_claim_of, restore_container};
pub use restore::{
    ANN_RESTORE_NODE, ANN_RESTORE_REASON, ANN_RESTORED_FROM, Choice, Rejection, choose,
    requested_bytes, shard_series,
};

use crate::observe::Inventory;
use crate::patch::Op;

/// Why the webhook did what it did, one code per part of a decision (kebab-case in the
/// response's audit annotation, the PVC's annotation and the logs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Code {
    /// Not an object vtsnap changes (another kind, operation or component).
    NotVtsnaps,
    /// The object's cluster is not in the config.
    ClusterNotConfigured,
    /// The object's labels do not name a shard vtsnap can read.
    LabelsUnreadable,
    /// The caches have not been filled yet: nothing is decided from them.
    InventoryNotSynced,
    // Restore injection (tablet PVCs).
    RestoreDisabled,
    PoolNotOptedIn,
    HasDataSource,
    SizeUnreadable,
    ShardStateUnknown,
    ShardStateStale,
    ShardHasNoPrimary,
    ShardVersionUnknown,
    ShardVersionsDiffer,
    NoUsableSnapshot,
    /// The tablet was re-provisioned after a restore could not catch up: it restores
    /// from the regular backup (docs/design.md §5.7).
    TabletReprovisioned,
    RestoredFromSnapshot,
    // Tablet Pods.
    RestoreContainerAdded,
    RestoreContainerPresent,
    /// Another container of the Pod already has the init container's name.
    RestoreContainerNameTaken,
    NoRestoreImage,
    NoDataVolume,
    PinnedToSourceNode,
    NodeSelectorConflict,
    /// The PVC's restore node is not a valid `nodeSelector` value.
    RestoreNodeUnpinnable,
    RestorePvcUnknown,
    // vtbackup storage.
    EmptyDirForInitialBackup,
    DataVolumeOverridden,
    NoDataMount,
    PlaceholderPvc,
    VtbackupTemplate,
    InheritFirstPool,
    FirstPoolTemplateUnknown,
    /// The object's vtbackup labels contradict its name, owner or each other.
    BackupObjectConflicting,
}

impl Code {
    pub fn as_str(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    }
}

/// One part of a decision and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Note {
    pub code: Code,
    pub message: String,
}

/// An Event the server records about the object (never on a dry run).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EventNote {
    pub reason: &'static str,
    pub message: String,
    pub warning: bool,
}

/// An Event's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Normal,
    Warning,
}

impl EventNote {
    /// An Event whose message has its control characters escaped (it quotes objects).
    pub fn new(reason: &'static str, message: impl AsRef<str>, severity: Severity) -> Self {
        Self {
            reason,
            message: escape_controls(message.as_ref()).into_owned(),
            warning: severity == Severity::Warning,
        }
    }
}

/// What the webhook answers: the patch (possibly empty) and why.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Decision {
    pub patch: Vec<Op>,
    pub notes: Vec<Note>,
    pub event: Option<EventNote>,
}

impl Decision {
    pub fn note(code: Code, message: impl AsRef<str>) -> Self {
        let mut d = Self::default();
        d.push(code, message);
        d
    }

    /// Adds a note; control characters the message quotes from objects are escaped (it
    /// is logged and printed).
    pub fn push(&mut self, code: Code, message: impl AsRef<str>) {
        self.notes.push(Note {
            code,
            message: escape_controls(message.as_ref()).into_owned(),
        });
    }

    /// The codes, comma-separated (the audit annotation).
    pub fn codes(&self) -> String {
        self.notes
            .iter()
            .map(|n| n.code.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// The kinds of object the webhook is registered for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    PersistentVolumeClaim,
    Pod,
}

/// The review request, as the decision needs it.
#[derive(Debug, Clone, Copy)]
pub struct Review<'a> {
    /// `None`: a kind the webhook does not change.
    pub kind: Option<Kind>,
    pub operation: &'a str,
    pub namespace: &'a str,
    pub object: &'a Value,
}

/// The webhook's own settings that decisions depend on.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The image of the injected `vtsnap-restore` init container (`None`: not injected;
    /// the pool's `initContainers` carry it).
    pub restore_image: Option<String>,
    /// Shard states older than this are not trusted.
    pub shard_state_max_age: Duration,
}

fn label<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.pointer("/metadata/labels")
        .and_then(|l| l.get(key))
        .and_then(Value::as_str)
}

pub fn name_of(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The shard an object's operator labels name.
fn shard_of(obj: &Value, namespace: &str) -> Result<ShardRef, String> {
    let need = |k: &str| label(obj, k).ok_or_else(|| format!("label {k} is missing"));
    let safe = need(labels::SHARD)?;
    let shard =
        KeyRange::from_safe_name(safe).map_err(|e| format!("label {}: {e}", labels::SHARD))?;
    Ok(ShardRef {
        namespace: namespace.to_owned(),
        cluster: need(labels::CLUSTER)?.to_owned(),
        keyspace: need(labels::KEYSPACE)?.to_owned(),
        shard,
    })
}

/// What a vtbackup object's labels say it is, in words.
fn claimed_as(claimed: BackupObject) -> &'static str {
    match claimed {
        BackupObject::InitPod => "the initial backup's Pod",
        BackupObject::InitPvc => "the initial backup's PVC",
        BackupObject::ScheduledPvc => "a scheduled backup's PVC",
    }
}

/// The decision for one review.
pub fn decide(
    review: &Review<'_>,
    config: &Config,
    settings: &Settings,
    inventory: &dyn Inventory,
    now: Timestamp,
) -> Decision {
    let obj = review.object;
    let Some(kind) = review.kind.filter(|_| review.operation == "CREATE") else {
        return Decision::note(Code::NotVtsnaps, "only Pod and PVC creation is changed");
    };
    let tablet = label(obj, labels::COMPONENT) == Some(labels::COMPONENT_VTTABLET);
    let object_kind = match kind {
        Kind::Pod => ObjectKind::Pod,
        Kind::PersistentVolumeClaim => ObjectKind::PersistentVolumeClaim,
    };
    let backup = match BackupObject::identify(obj, object_kind) {
        Identity::Backup(b) => Some(b),
        Identity::Other => None,
        // Neither a tablet's nor a vtbackup object for certain: left as it is.
        Identity::Conflicting { claimed, why } => {
            return Decision::note(
                Code::BackupObjectConflicting,
                format!(
                    "its labels call it {}, but {why}; left unchanged",
                    claimed_as(claimed)
                ),
            );
        }
    };
    if !tablet && backup.is_none() {
        return Decision::note(Code::NotVtsnaps, "neither a tablet's nor a vtbackup object");
    }
    let shard = match shard_of(obj, review.namespace) {
        Ok(s) => s,
        Err(why) => return Decision::note(Code::LabelsUnreadable, why),
    };
    let Some(cluster) = config.cluster_in(&shard.namespace, &shard.cluster) else {
        return Decision::note(
            Code::ClusterNotConfigured,
            format!(
                "cluster {}/{} is not in vtsnap's config",
                shard.namespace, shard.cluster
            ),
        );
    };
    if !inventory.synced() {
        return Decision::note(
            Code::InventoryNotSynced,
            "the webhook's caches are not filled yet: left as created",
        );
    }
    let policy = resolve_in(cluster, &shard.keyspace, &shard.shard.to_string());
    match (kind, backup) {
        (Kind::PersistentVolumeClaim, None) => restore::tablet_pvc(
            obj,
            &shard,
            &policy.restore,
            label(obj, labels::TABLET_TYPE).unwrap_or(""),
            settings,
            inventory,
            now,
        ),
        (Kind::Pod, None) => pod::tablet_pod(
            obj,
            &policy.restore,
            label(obj, labels::TABLET_TYPE).unwrap_or(""),
            settings,
            inventory.pvc(review.namespace, &pod::data_claim(obj).unwrap_or_default()),
        ),
        (_, Some(b)) => {
            let first_pool = inventory.cluster(&shard.namespace, &shard.cluster);
            vtbackup::vtbackup(obj, b, &shard, &policy.vtbackup, first_pool.as_ref())
        }
    }
}

/// What a JSON value is, in the words a refusal names it with.
pub(crate) fn kind_of(v: &Value) -> String {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
    .to_owned()
}
