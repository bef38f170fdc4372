//! Decide, pure: per shard, what to do with its initial-backup Pod and PVC to converge
//! them to the configured storage (docs/design.md §9), against the two
//! hashes the admission webhook stamps:
//!
//! 1. a running initial-backup Pod is kept, whatever its storage;
//! 2. a Pod that is not running, whose data-volume or template hash differs from what is
//!    wanted now, is deleted (the operator recreates it, the webhook mutates the new one);
//! 3. the PVC is deleted only when the wanted template's hash differs from its own, and only
//!    once the Pod is gone — `act` verifies that with a fresh read (a 404, not an error);
//! 4. a read that failed leads to `wait`, never to a deletion;
//! 5. objects without both hashes (made before vtsnap, or while the webhook was down) are
//!    adopted — the hashes stamped, nothing recreated — when what they are already is what
//!    is wanted (Kubernetes' defaults counted: see [`effective`]); an unreadable PVC
//!    keeps the Pod;
//! 6. so `useEmptyDirForInitialBackup: true` frees an initial backup Pending on a PVC that
//!    cannot bind: its Pod is not running and its data volume differs.
//!
//! A Pod replaced once for the wanted hashes whose replacement still differs (an operator
//! that does not apply the pool's `extraVolumes` to vtbackup, older than v2.17.0) is not
//! deleted again: `wait`, `replacement-did-not-converge`.

use serde::Serialize;
use vtsnap_core::config::Config;
use vtsnap_core::shard::ShardRef;

use crate::observe::{
    ClassField, Deletion, PodPhase, PodState, PvcState, Read, Shard, Template, World,
};

pub mod effective;

use effective::pvc_matches;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    Keep,
    Adopt,
    DeletePod,
    DeletePvc,
    Wait,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    UpToDate,
    RunningBackupPreserved,
    DataVolumeChanged,
    TemplateChanged,
    LegacyMatches,
    LegacyDiffers,
    /// The PVC is being deleted and its Pod, not running, holds it.
    PvcBeingReplaced,
    /// The PVC waits until its Pod is gone.
    PodPresent,
    ReplacementDidNotConverge,
    PodUnreadable,
    PvcUnreadable,
    /// The wanted storage cannot be told (VitessCluster missing or unreadable, the shard
    /// or its first pool not in its spec, the cluster not configured).
    DesiredUnknown,
    DefaultClassUnknown,
    /// The wanted PVC template is not a valid PVC spec: the API server would refuse the
    /// PVC the operator makes from it, so nothing is replaced for it.
    TemplateInvalid,
    /// The Pod's phase is `Unknown`, missing or unrecognised: it may still be running.
    PodPhaseUncertain,
    /// The Pod is already being deleted.
    PodTerminating,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Kind {
    Pod,
    PersistentVolumeClaim,
}

/// What to do with one object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Step {
    pub kind: Kind,
    pub name: String,
    /// Acted on only if it still has this UID.
    pub uid: String,
    /// Deleted only if it has not changed since it was read.
    pub resource_version: String,
    pub action: Action,
    pub reason: Reason,
    pub message: String,
}

/// The hashes wanted now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Desired {
    pub template_hash: String,
    pub data_volume_hash: String,
}

impl Desired {
    /// The loop guard's value.
    pub fn guard(&self) -> String {
        format!("{}/{}", self.data_volume_hash, self.template_hash)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShardPlan {
    #[serde(flatten)]
    pub key: ShardRef,
    pub desired: Option<Desired>,
    pub objects: Vec<Step>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub shards: Vec<ShardPlan>,
}

impl Plan {
    /// Whether a step waits on something that could not be read (the run exits 1).
    pub fn blocked(&self) -> bool {
        self.shards.iter().flat_map(|s| &s.objects).any(|o| {
            o.action == Action::Wait
                && matches!(
                    o.reason,
                    Reason::PodUnreadable
                        | Reason::PvcUnreadable
                        | Reason::DesiredUnknown
                        | Reason::DefaultClassUnknown
                        | Reason::TemplateInvalid
                        | Reason::PodPhaseUncertain
                )
        })
    }
}

/// The wanted template (for adoption) and hashes, or why they are unknown.
fn desired_for(shard: &Shard) -> Result<(&Template, Desired), (Reason, String)> {
    let wanted = shard
        .wanted
        .as_ref()
        .map_err(|why| (Reason::DesiredUnknown, why.to_string()))?;
    if let Some(p) = &wanted.template.problem {
        return Err((
            Reason::TemplateInvalid,
            format!(
                "the wanted PVC template is not a valid PVC spec ({p}): nothing is replaced for it"
            ),
        ));
    }
    let desired = Desired {
        template_hash: wanted.template.hash.clone(),
        data_volume_hash: wanted.data_volume_hash.clone(),
    };
    Ok((&wanted.template, desired))
}

fn step(
    kind: Kind,
    name: &str,
    uid: &str,
    action: Action,
    reason: Reason,
    message: impl Into<String>,
) -> Step {
    Step {
        kind,
        name: name.to_owned(),
        uid: uid.to_owned(),
        resource_version: String::new(),
        action,
        reason,
        message: message.into(),
    }
}

/// Whether a legacy object is already what is wanted.
fn legacy_pod_matches(pod: &PodState, want_shape_hash: &str) -> bool {
    pod.shape
        .as_ref()
        .is_some_and(|s| s.hash() == want_shape_hash)
}

fn plan_shard(world: &World, shard: &Shard) -> ShardPlan {
    let mut out = plan_steps(world, shard);
    for o in &mut out.objects {
        o.resource_version = match o.kind {
            Kind::Pod => shard.pod.present().map(|p| p.resource_version.clone()),
            Kind::PersistentVolumeClaim => shard.pvc.present().map(|p| p.resource_version.clone()),
        }
        .unwrap_or_default();
    }
    out
}

fn plan_steps(world: &World, shard: &Shard) -> ShardPlan {
    let pod_name = shard
        .pod
        .present()
        .map(|p| p.name.clone())
        .or_else(|| shard.pvc.present().map(|p| p.name.clone()))
        .unwrap_or_default();
    let mut out = ShardPlan {
        key: shard.key.clone(),
        desired: None,
        objects: Vec::new(),
    };
    let (template, desired) = match desired_for(shard) {
        Ok(d) => d,
        Err((reason, why)) => {
            for (kind, name, uid) in [
                shard.pod.present().map(|p| (Kind::Pod, &p.name, &p.uid)),
                shard
                    .pvc
                    .present()
                    .map(|p| (Kind::PersistentVolumeClaim, &p.name, &p.uid)),
            ]
            .into_iter()
            .flatten()
            {
                out.objects
                    .push(step(kind, name, uid, Action::Wait, reason, why.clone()));
            }
            return out;
        }
    };
    out.desired = Some(desired.clone());
    let default_class = match &world.default_class {
        Read::Present(c) => Ok(c.as_deref()),
        Read::Unreadable(e) => Err(e.clone()),
        Read::Absent => Ok(None),
    };
    let pvc_fits = |p: &PvcState| -> Result<Result<(), String>, String> {
        let matches = |class| pvc_matches(&p.spec, p.bound_by, &template.spec, class);
        match (&default_class, &template.spec.storage_class) {
            // Without a class in the template the default one counts, and is unknown.
            (Err(e), ClassField::Unset) => Err(e.clone()),
            (Ok(c), _) => Ok(matches(*c)),
            (Err(_), ClassField::Named(_) | ClassField::NotAString(_)) => Ok(matches(None)),
        }
    };

    // The Pod.
    let pod_goes = match &shard.pod {
        Read::Unreadable(e) => {
            out.objects.push(step(
                Kind::Pod,
                &pod_name,
                "",
                Action::Wait,
                Reason::PodUnreadable,
                e.clone(),
            ));
            if let Some(p) = shard.pvc.present() {
                out.objects.push(step(
                    Kind::PersistentVolumeClaim,
                    &p.name,
                    &p.uid,
                    Action::Wait,
                    Reason::PodUnreadable,
                    "the Pod's absence cannot be verified",
                ));
            }
            return out;
        }
        Read::Absent => true,
        Read::Present(p) => {
            let hashed = p.template_hash.is_some() && p.data_hash.is_some();
            let drift = if hashed {
                if p.data_hash.as_deref() != Some(desired.data_volume_hash.as_str()) {
                    Some((
                        Reason::DataVolumeChanged,
                        "its data volume is not the one wanted now".to_owned(),
                    ))
                } else if p.template_hash.as_deref() != Some(desired.template_hash.as_str()) {
                    Some((
                        Reason::TemplateChanged,
                        "it was made for another PVC template".to_owned(),
                    ))
                } else {
                    None
                }
            } else {
                // Legacy: judged by what it is.
                let pvc_ok = match &shard.pvc {
                    Read::Present(c) => match pvc_fits(c) {
                        Ok(r) => r,
                        Err(e) => {
                            out.objects.push(step(
                                Kind::Pod,
                                &p.name,
                                &p.uid,
                                Action::Wait,
                                Reason::DefaultClassUnknown,
                                e,
                            ));
                            return out;
                        }
                    },
                    Read::Absent => Ok(()),
                    Read::Unreadable(e) => {
                        out.objects.push(step(
                            Kind::Pod,
                            &p.name,
                            &p.uid,
                            Action::Wait,
                            Reason::PvcUnreadable,
                            e.clone(),
                        ));
                        out.objects.push(step(
                            Kind::PersistentVolumeClaim,
                            &p.name,
                            "",
                            Action::Wait,
                            Reason::PvcUnreadable,
                            e.clone(),
                        ));
                        return out;
                    }
                };
                match (legacy_pod_matches(p, &desired.data_volume_hash), pvc_ok) {
                    (false, _) => Some((
                        Reason::LegacyDiffers,
                        "its data volume is not the one wanted now".to_owned(),
                    )),
                    (true, Err(why)) => {
                        Some((Reason::LegacyDiffers, format!("its PVC differs: {why}")))
                    }
                    (true, Ok(())) => None,
                }
            };
            let pvc_terminating = shard
                .pvc
                .present()
                .is_some_and(|c| c.deletion == Deletion::Terminating);
            // Only a Pod known not to run (Pending, Succeeded, Failed) and not already
            // going may be replaced; an uncertain one waits.
            let replaceable = match (&p.phase, p.deletion) {
                (_, Deletion::Terminating) => Err((
                    Reason::PodTerminating,
                    "it is already being deleted: the operator recreates it once it is gone"
                        .to_owned(),
                )),
                (PodPhase::Uncertain(why), Deletion::NotRequested) => Err((
                    Reason::PodPhaseUncertain,
                    format!("{why}: kept until it is known"),
                )),
                (
                    PodPhase::Pending | PodPhase::Running | PodPhase::Terminated,
                    Deletion::NotRequested,
                ) => Ok(()),
            };
            // A deletion, or the wait that stands for it; whether the Pod goes.
            let delete = |out: &mut ShardPlan, reason: Reason, msg: String| match &replaceable {
                Ok(()) => {
                    out.objects.push(step(
                        Kind::Pod,
                        &p.name,
                        &p.uid,
                        Action::DeletePod,
                        reason,
                        msg,
                    ));
                    true
                }
                Err((why_not, not)) => {
                    out.objects.push(step(
                        Kind::Pod,
                        &p.name,
                        &p.uid,
                        Action::Wait,
                        *why_not,
                        format!("{msg}, but {not}"),
                    ));
                    false
                }
            };
            match (p.running(), drift, pvc_terminating) {
                (true, drift, _) => {
                    let msg = if drift.is_some() {
                        "running: never interrupted (it differs; it is replaced once it stops)"
                    } else {
                        "running: never interrupted"
                    };
                    out.objects.push(step(
                        Kind::Pod,
                        &p.name,
                        &p.uid,
                        Action::Keep,
                        Reason::RunningBackupPreserved,
                        msg,
                    ));
                    false
                }
                (false, None, true) => delete(
                    &mut out,
                    Reason::PvcBeingReplaced,
                    "its PVC is being deleted and it holds it: it goes, then the operator recreates both".to_owned(),
                ),
                (false, None, false) if hashed => {
                    out.objects.push(step(
                        Kind::Pod,
                        &p.name,
                        &p.uid,
                        Action::Keep,
                        Reason::UpToDate,
                        "as wanted",
                    ));
                    false
                }
                (false, None, false) => {
                    out.objects.push(step(
                        Kind::Pod,
                        &p.name,
                        &p.uid,
                        Action::Adopt,
                        Reason::LegacyMatches,
                        "already as wanted: the hashes are stamped",
                    ));
                    false
                }
                (false, Some((reason, msg)), _) => {
                    let guard = shard.pvc.present().and_then(|c| c.replaced_for.as_deref());
                    if guard == Some(desired.guard().as_str()) {
                        out.objects.push(step(
                            Kind::Pod,
                            &p.name,
                            &p.uid,
                            Action::Wait,
                            Reason::ReplacementDidNotConverge,
                            format!("{msg}, but it was already replaced once for this storage and the new one differs too (does the operator apply the pool's extraVolumes to vtbackup? v2.17.0 or later)"),
                        ));
                        false
                    } else {
                        delete(&mut out, reason, format!("not running and {msg}"))
                    }
                }
            }
        }
    };

    // The PVC.
    match &shard.pvc {
        Read::Unreadable(e) => {
            if !out
                .objects
                .iter()
                .any(|o| o.kind == Kind::PersistentVolumeClaim)
            {
                out.objects.push(step(
                    Kind::PersistentVolumeClaim,
                    &pod_name,
                    "",
                    Action::Wait,
                    Reason::PvcUnreadable,
                    e.clone(),
                ));
            }
        }
        Read::Absent => {}
        Read::Present(c) if !pod_goes => {
            let pod_adopted = out
                .objects
                .iter()
                .any(|o| o.kind == Kind::Pod && o.action == Action::Adopt);
            if c.template_hash.is_none() && pod_adopted {
                out.objects.push(step(
                    Kind::PersistentVolumeClaim,
                    &c.name,
                    &c.uid,
                    Action::Adopt,
                    Reason::LegacyMatches,
                    "already as wanted: the hash is stamped",
                ));
            } else {
                out.objects.push(step(
                    Kind::PersistentVolumeClaim,
                    &c.name,
                    &c.uid,
                    Action::Keep,
                    Reason::PodPresent,
                    "kept while its Pod is there",
                ));
            }
        }
        Read::Present(c) => {
            let s = match &c.template_hash {
                Some(h) if *h == desired.template_hash => step(
                    Kind::PersistentVolumeClaim,
                    &c.name,
                    &c.uid,
                    Action::Keep,
                    Reason::UpToDate,
                    "as wanted",
                ),
                Some(_) => step(
                    Kind::PersistentVolumeClaim,
                    &c.name,
                    &c.uid,
                    Action::DeletePvc,
                    Reason::TemplateChanged,
                    "made for another template: deleted once its Pod is verified gone; the operator recreates it",
                ),
                None => match pvc_fits(c) {
                    Err(e) => step(
                        Kind::PersistentVolumeClaim,
                        &c.name,
                        &c.uid,
                        Action::Wait,
                        Reason::DefaultClassUnknown,
                        e,
                    ),
                    Ok(Ok(())) => step(
                        Kind::PersistentVolumeClaim,
                        &c.name,
                        &c.uid,
                        Action::Adopt,
                        Reason::LegacyMatches,
                        "already as wanted: the hash is stamped",
                    ),
                    Ok(Err(why)) => step(
                        Kind::PersistentVolumeClaim,
                        &c.name,
                        &c.uid,
                        Action::DeletePvc,
                        Reason::LegacyDiffers,
                        format!("{why}: deleted once its Pod is verified gone"),
                    ),
                },
            };
            out.objects.push(s);
        }
    }
    out
}

/// The plan for every shard of `world` whose cluster is configured (all, or only `only_cluster`).
pub fn plan(config: &Config, world: &World, only_cluster: Option<&str>) -> Plan {
    Plan {
        shards: world
            .shards
            .iter()
            .filter(|s| only_cluster.is_none_or(|c| c == s.key.cluster))
            .filter(|s| {
                config
                    .cluster_in(&s.key.namespace, &s.key.cluster)
                    .is_some()
            })
            .map(|s| plan_shard(world, s))
            .collect(),
    }
}

#[cfg(test)]
mod tests;
