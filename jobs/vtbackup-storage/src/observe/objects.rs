//! The initial backup's Pod and PVC, each read into the plain value the decider needs, or
//! refused with why.

use serde_json::Value;
use vtsnap_core::vtbackup::{ANN_DATA_VOLUME_HASH, ANN_TEMPLATE_HASH, DataShape, data_volume};

use super::claim::{BOUND_BY_CONTROLLER, ClaimSpec};

/// The loop guard's annotation on the PVC: the desired hashes a Pod was last replaced for.
pub const ANN_REPLACED_FOR: &str = "vtsnap.io/vtbackup-replaced-for";

pub(super) fn annotation(v: &Value, k: &str) -> Option<String> {
    v.pointer("/metadata/annotations")
        .and_then(|a| a.get(k))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

pub(super) fn text(v: &Value, p: &str) -> String {
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

/// Whether an object is being deleted (it has a `deletionTimestamp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deletion {
    NotRequested,
    /// Already going: the operator recreates it once it is gone.
    Terminating,
}

impl Deletion {
    fn of(v: &Value) -> Self {
        if v.pointer("/metadata/deletionTimestamp")
            .is_some_and(|t| !t.is_null())
        {
            Self::Terminating
        } else {
            Self::NotRequested
        }
    }
}

/// Who set a claim's `volumeName`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoundBy {
    /// The PV controller, when it bound the claim ([`BOUND_BY_CONTROLLER`]).
    Controller,
    /// Whoever wrote the claim (or nobody: no volume).
    Writer,
}

/// The initial-backup Pod.
#[derive(Debug, Clone, PartialEq)]
pub struct PodState {
    pub name: String,
    pub uid: String,
    /// As read: a delete is refused (409) if the Pod changed since (it started, say).
    pub resource_version: String,
    pub phase: PodPhase,
    pub deletion: Deletion,
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
            deletion: Deletion::of(v),
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
    pub deletion: Deletion,
    /// Its spec (compared with the template for adoption).
    pub spec: ClaimSpec,
    pub bound_by: BoundBy,
}

impl PvcState {
    pub fn read(v: &Value) -> Result<Self, String> {
        let name = text(v, "/metadata/name");
        let uid = text(v, "/metadata/uid");
        if name.is_empty() || uid.is_empty() {
            return Err("metadata.name or metadata.uid is missing".into());
        }
        let Some(spec) = v.get("spec").filter(|s| s.is_object()) else {
            return Err(format!("PVC {name}: spec is not an object"));
        };
        Ok(Self {
            resource_version: text(v, "/metadata/resourceVersion"),
            template_hash: annotation(v, ANN_TEMPLATE_HASH),
            replaced_for: annotation(v, ANN_REPLACED_FOR),
            deletion: Deletion::of(v),
            spec: ClaimSpec::read(spec),
            bound_by: if annotation(v, BOUND_BY_CONTROLLER).as_deref() == Some("yes") {
                BoundBy::Controller
            } else {
                BoundBy::Writer
            },
            name,
            uid,
        })
    }
}
