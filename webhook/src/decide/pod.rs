//! Tablet Pods of opted-in pools: the `vtsnap-restore` init container, and for node-local
//! drivers the pin to the node the PVC's snapshot restores on.
//!
//! Both are stable under vitess-operator's drift detection (`pkg/operator/update/podspec.go`,
//! `PodContainers`; `pkg/operator/vttablet/pod.go`, `UpdatePod`): an init container with a
//! name of its own is left in place, and `spec.nodeSelector` is never compared. A node
//! *affinity* would not be: the operator replaces `spec.affinity` with its desired one and
//! schedules a rolling restart for the difference, so the pin is a `nodeSelector` entry on
//! `restore.nodeLabel` (default `kubernetes.io/hostname`, whose value is the node's name).

use serde_json::{Value, json};
use vtsnap_core::config::ResolvedRestore;
use vtsnap_core::k8s_names::{self, untrusted};
use vtsnap_core::restored::ANN_RESTORE_NODE;
use vtsnap_core::{labels, restore_pod};

use super::{Code, Decision, EventNote, Settings, Severity, name_of};
use crate::patch;

/// The injected init container's name (also the README snippet's).
pub const RESTORE_CONTAINER: &str = "vtsnap-restore";

/// The claim the Pod's data volume (`persistent-volume-claim`) names.
pub fn data_claim(pod: &Value) -> Option<String> {
    pod.pointer("/spec/volumes")?
        .as_array()?
        .iter()
        .find(|v| v.get("name").and_then(Value::as_str) == Some(labels::DATA_VOLUME))?
        .pointer("/persistentVolumeClaim/claimName")?
        .as_str()
        .map(str::to_owned)
}

/// The init container: the tablet's data volume mounted as `mysqld` mounts it, the UID
/// from the Pod's own label, as the pods' user (`vtsnap_core::restore_pod`, which
/// `vtsnap-restore` reads too).
pub fn restore_container(image: &str) -> Value {
    json!({
        "name": RESTORE_CONTAINER,
        "image": image,
        "args": ["--vtdataroot", restore_pod::VTDATAROOT],
        "env": [
            {"name": restore_pod::ENV_TABLET_UID, "valueFrom": {"fieldRef": {"fieldPath": format!("metadata.labels['{}']", labels::TABLET_UID)}}},
            {"name": restore_pod::ENV_LOG_FORMAT, "value": "json"},
        ],
        "volumeMounts": [{"name": labels::DATA_VOLUME, "mountPath": restore_pod::VTDATAROOT, "subPath": restore_pod::VTDATAROOT_SUBPATH}],
        "securityContext": {"runAsUser": restore_pod::POD_USER, "runAsGroup": restore_pod::POD_USER, "allowPrivilegeEscalation": false},
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
    })
}

/// The Pod's container lists; a name must be unique across all three.
const CONTAINER_LISTS: [&str; 3] = ["initContainers", "containers", "ephemeralContainers"];

/// The first container list of the Pod with a container named `name`.
fn list_with_container(pod: &Value, name: &str) -> Option<&'static str> {
    CONTAINER_LISTS.into_iter().find(|list| {
        pod.get("spec")
            .and_then(|s| s.get(*list))
            .and_then(Value::as_array)
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c.get("name").and_then(Value::as_str) == Some(name))
            })
    })
}

/// Why a node name cannot be a `nodeSelector` value: the API refuses a Pod whose selector
/// value is not a label value (at most 63 characters), though node names may be longer.
pub fn unpinnable(node: &str) -> Option<String> {
    let as_name = k8s_names::dns_subdomain(node)
        .err()
        .map(|e| format!("not a node name: {e}"));
    let as_value = || {
        k8s_names::label_value(node)
            .err()
            .map(|e| format!("not a label value: {e}"))
    };
    as_name.or_else(as_value)
}

/// The decision for a new tablet Pod; `pvc` is its data PVC as cached (if it is).
pub fn tablet_pod(
    pod: &Value,
    policy: &ResolvedRestore,
    pool: &str,
    settings: &Settings,
    pvc: Option<Value>,
) -> Decision {
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
    let Some(claim) = data_claim(pod) else {
        return Decision::note(
            Code::NoDataVolume,
            format!("the Pod has no {} volume", labels::DATA_VOLUME),
        );
    };
    let mut d = Decision::default();
    // The injection adds a container and no volume (it mounts the data volume the Pod
    // has), so only a container name can clash.
    match list_with_container(pod, RESTORE_CONTAINER) {
        Some("initContainers") => d.push(
            Code::RestoreContainerPresent,
            "the pool's initContainers already run vtsnap-restore",
        ),
        Some(list) => {
            let why = format!(
                "Pod {} already has a container named {RESTORE_CONTAINER} in spec.{list}: no restore init container added (a second one would make the Pod invalid)",
                untrusted(name_of(pod))
            );
            d.event = Some(EventNote::new(
                "RestoreContainerNotAdded",
                why.clone(),
                Severity::Warning,
            ));
            d.push(Code::RestoreContainerNameTaken, why);
        }
        None => add_container(&mut d, pod, settings),
    }
    if !policy.node_local {
        return d;
    }
    let Some(pvc) = pvc else {
        d.push(
            Code::RestorePvcUnknown,
            format!("PVC {claim} was not found: the Pod is not pinned (the GC un-sticks it if it stays Pending)"),
        );
        return d;
    };
    let Some(node) = pvc
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(ANN_RESTORE_NODE))
        .and_then(Value::as_str)
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
    match pod
        .pointer("/spec/nodeSelector")
        .and_then(|s| s.get(key.as_str()))
        .and_then(Value::as_str)
    {
        Some(v) if v == node => {
            d.push(Code::PinnedToSourceNode, format!("already on {key}={node}"));
        }
        Some(other) => d.push(
            Code::NodeSelectorConflict,
            format!(
                "{} is pinned to {key}={other}, but its snapshot restores only on {node}: left as it is",
                name_of(pod)
            ),
        ),
        None => {
            d.patch
                .extend(patch::set_entry(pod, "/spec/nodeSelector", key, json!(node)));
            d.push(
                Code::PinnedToSourceNode,
                format!("nodeSelector {key}={node}: PVC {claim}'s snapshot restores only there"),
            );
        }
    }
    d
}

fn add_container(d: &mut Decision, pod: &Value, settings: &Settings) {
    if let Some(image) = &settings.restore_image {
        d.patch.extend(patch::append(
            pod,
            "/spec/initContainers",
            restore_container(image),
        ));
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
