//! The decisions, pure: `(observed review, policy, inventory) → JSON patch + reasons`,
//! made on typed values ([`crate::observe`]). Nothing here does I/O or reads JSON; the
//! server and the offline `review` call [`decide`] with what they observed.

mod pod;
mod restore;
mod vtbackup;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_hostile;
#[cfg(test)]
mod tests_pod;
#[cfg(test)]
mod tests_vtbackup;

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::core::admission::Operation;
use serde::Serialize;
use vtsnap_core::config::{Config, resolve_in};
use vtsnap_core::k8s_names::escape_controls;
use vtsnap_core::vtbackup::{BackupObject, Identity};

use crate::inventory::Inventory;
use crate::observe::{Body, Review, Storage, desired_init};
use crate::patch::Op;

/// Why the webhook did what it did, one code per part of a decision (kebab-case in the
/// response's audit annotation, the PVC's annotation and the logs).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::IntoStaticStr, strum::VariantArray,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum Code {
    /// Not an object vtsnap changes (another kind, operation or component).
    NotVtsnaps,
    /// The object does not read as its kind (only a hand-made review can send such).
    ObjectUnreadable,
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
    pub fn as_str(self) -> &'static str {
        self.into()
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

/// The webhook's own settings that decisions depend on.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The image of the injected `vtsnap-restore` init container (`None`: not injected;
    /// the pool's `initContainers` carry it).
    pub restore_image: Option<String>,
    /// Shard states older than this are not trusted.
    pub shard_state_max_age: Duration,
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
    review: &Review,
    config: &Config,
    settings: &Settings,
    inventory: &dyn Inventory,
    now: Timestamp,
) -> Decision {
    let Some(object) = review
        .object
        .as_ref()
        .filter(|_| review.operation == Operation::Create)
    else {
        return Decision::note(Code::NotVtsnaps, "only Pod and PVC creation is changed");
    };
    let object = match object {
        Ok(o) => o,
        Err(e) => return Decision::note(Code::ObjectUnreadable, e.to_string()),
    };
    let backup = match &object.backup {
        Identity::Backup(b) => Some(*b),
        Identity::Other => None,
        // Neither a tablet's nor a vtbackup object for certain: left as it is.
        Identity::Conflicting { claimed, why } => {
            return Decision::note(
                Code::BackupObjectConflicting,
                format!(
                    "its labels call it {}, but {why}; left unchanged",
                    claimed_as(*claimed)
                ),
            );
        }
    };
    if !object.is_tablet() && backup.is_none() {
        return Decision::note(Code::NotVtsnaps, "neither a tablet's nor a vtbackup object");
    }
    let shard = match &object.shard {
        Ok(s) => s,
        Err(why) => return Decision::note(Code::LabelsUnreadable, why.to_string()),
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
    match (&object.body, backup) {
        (Body::Pvc(pvc), None) => restore::tablet_pvc(
            object,
            pvc,
            shard,
            &policy.restore,
            settings,
            inventory,
            now,
        ),
        (Body::Pod(pod), None) => {
            let pvc = pod
                .data_claim()
                .and_then(|claim| inventory.pvc(&review.namespace, claim));
            pod::tablet_pod(object, pod, &policy.restore, settings, pvc)
        }
        (_, Some(b)) => {
            let desired = desired_init(&policy.vtbackup, inventory.first_pool_template(shard));
            vtbackup::vtbackup(object, b, &Storage::of(&policy.vtbackup), desired)
        }
    }
}
