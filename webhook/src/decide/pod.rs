//! Tablet Pods of opted-in pools: the `vtsnap-restore` init container, and for node-local
//! drivers the pin to the node the PVC's snapshot restores on.
//!
//! Both are stable under vitess-operator's drift detection (`pkg/operator/update/podspec.go`,
//! `PodContainers`; `pkg/operator/vttablet/pod.go`, `UpdatePod`): an init container with a
//! name of its own is left in place, and `spec.nodeSelector` is never compared. A node
//! *affinity* would not be: the operator replaces `spec.affinity` with its desired one and
//! schedules a rolling restart for the difference, so the pin is a `nodeSelector` entry on
//! `restore.nodeLabel` (default `kubernetes.io/hostname`, whose value is the node's name).

use k8s_openapi::api::core::v1::PodSpec;
use vtsnap_core::config::ResolvedRestore;
use vtsnap_core::k8s_names::untrusted;
use vtsnap_core::labels;
use vtsnap_core::restored::ANN_RESTORE_NODE;
use vtsnap_core::snapshot::choice::unpinnable;
use vtsnap_core::tablet_volume::data_claim;

use super::{Code, Decision, EventNote, Settings, Severity};
use crate::observe::{NewObject, NewPod, PvcRead};
use vtsnap_core::restore_pod::CONTAINER as RESTORE_CONTAINER;

use crate::patch;

/// The container list of the Pod with a container named `name`, if one has (a name must be
/// unique across all three).
fn list_with_container(spec: &PodSpec, name: &str) -> Option<&'static str> {
    if spec
        .init_containers
        .iter()
        .flatten()
        .any(|c| c.name == name)
    {
        Some("initContainers")
    } else if spec.containers.iter().any(|c| c.name == name) {
        Some("containers")
    } else if spec
        .ephemeral_containers
        .iter()
        .flatten()
        .any(|c| c.name == name)
    {
        Some("ephemeralContainers")
    } else {
        None
    }
}

/// The decision for a new tablet Pod; `pvc` is its data PVC as the inventory has it (if it
/// does).
pub fn tablet_pod(
    object: &NewObject,
    pod: &NewPod,
    policy: &ResolvedRestore,
    settings: &Settings,
    pvc: Option<PvcRead>,
) -> Decision {
    let pool = match &object.pool {
        Ok(p) => p,
        Err(_) if !policy.enabled => {
            return Decision::note(
                Code::RestoreDisabled,
                "restore is not enabled for this shard",
            );
        }
        Err(why) => return Decision::note(Code::LabelsUnreadable, why.to_string()),
    };
    if !policy.opts_in(pool) {
        return Decision::note(
            if policy.enabled {
                Code::PoolNotOptedIn
            } else {
                Code::RestoreDisabled
            },
            format!("pool {pool:?} does not restore from snapshots"),
        );
    }
    let Some((spec, claim)) = pod
        .spec
        .as_ref()
        .and_then(|s| Some((s, data_claim(s.volumes.as_deref()?)?)))
    else {
        return Decision::note(
            Code::NoDataVolume,
            format!("the Pod has no {} volume", labels::DATA_VOLUME),
        );
    };
    let mut d = Decision::default();
    // The injection adds a container and no volume (it mounts the data volume the Pod
    // has), so only a container name can clash.
    match list_with_container(spec, RESTORE_CONTAINER) {
        Some("initContainers") => d.push(
            Code::RestoreContainerPresent,
            "the pool's initContainers already run vtsnap-restore",
        ),
        Some(list) => {
            let why = format!(
                "Pod {} already has a container named {RESTORE_CONTAINER} in spec.{list}: no restore init container added (a second one would make the Pod invalid)",
                untrusted(object.name())
            );
            d.event = Some(EventNote::new(
                "RestoreContainerNotAdded",
                why.clone(),
                Severity::Warning,
            ));
            d.push(Code::RestoreContainerNameTaken, why);
        }
        None => add_container(&mut d, spec, settings),
    }
    if !policy.node_local {
        return d;
    }
    let pvc = match pvc {
        Some(Ok(p)) => p,
        None => {
            d.push(
                Code::RestorePvcUnknown,
                format!("PVC {claim} was not found: the Pod is not pinned (the GC un-sticks it if it stays Pending)"),
            );
            return d;
        }
        Some(Err(why)) => {
            d.push(
                Code::RestorePvcUnknown,
                format!("PVC {claim} does not read ({why}): the Pod is not pinned (the GC un-sticks it if it stays Pending)"),
            );
            return d;
        }
    };
    let Some(node) = pvc
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANN_RESTORE_NODE))
    else {
        return d;
    };
    if let Some(why) = unpinnable(node) {
        let why = format!(
            "PVC {claim}'s restore node {} cannot be a nodeSelector value ({why}): the Pod is not pinned",
            untrusted(node)
        );
        d.event = Some(EventNote::new(
            "RestoreNotPinned",
            why.clone(),
            Severity::Warning,
        ));
        d.push(Code::RestoreNodeUnpinnable, why);
        return d;
    }
    let key = &policy.node_label;
    match spec.node_selector.as_ref().and_then(|s| s.get(key.as_str())) {
        Some(v) if v == node => {
            d.push(Code::PinnedToSourceNode, format!("already on {key}={node}"));
        }
        Some(other) => d.push(
            Code::NodeSelectorConflict,
            format!(
                "{} is pinned to {key}={other}, but its snapshot restores only on {node}: left as it is",
                object.name()
            ),
        ),
        None => {
            d.patch.extend(patch::pin(spec, key, node));
            d.push(
                Code::PinnedToSourceNode,
                format!("nodeSelector {key}={node}: PVC {claim}'s snapshot restores only there"),
            );
        }
    }
    d
}

fn add_container(d: &mut Decision, spec: &PodSpec, settings: &Settings) {
    if let Some(image) = &settings.restore_image {
        d.patch.extend(patch::add_restore_container(spec, image));
        d.push(
            Code::RestoreContainerAdded,
            format!("init container {RESTORE_CONTAINER} ({image})"),
        );
    } else {
        d.push(
            Code::NoRestoreImage,
            "no --restore-image: add the vtsnap-restore init container to the pool (docs/restore.md)",
        );
    }
}
