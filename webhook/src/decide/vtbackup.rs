//! vtbackup scratch storage at creation (docs/design.md §9's table):
//!
//! | `vtbackup` policy | initial-backup Pod | its PVC | scheduled-backup PVC |
//! |---|---|---|---|
//! | neither set (inherit) | as created | as created (the first pool's template) | as created |
//! | `useEmptyDirForInitialBackup` | data volume → emptyDir | placeholder: never binds | as created |
//! | `dataVolumeClaimTemplate` | as created | spec → the template | spec → the template |
//!
//! A Pod whose `/vt/vtdataroot` the pool's `extraVolumes`/`extraVolumeMounts` already put
//! on something other than the operator's default PVC volume is left on it: the user's
//! explicit choice wins. The initial-backup Pod and PVC are stamped with the hash of the
//! PVC template they were made for, the Pod also with the hash of its effective data mount
//! and volume source, for the storage reconciler.

use vtsnap_core::vtbackup::{ANN_DATA_VOLUME_HASH, ANN_TEMPLATE_HASH, BackupObject, Source};

use super::{Code, Decision};
use crate::observe::{Body, FirstPoolUnknown, NewObject, PvcTemplate, Storage, placeholder};
use crate::patch;

/// The decision for a vtbackup Pod or PVC. `desired` is the template its initial backup is
/// made for (the configured one, the placeholder or the first pool's), or why it is not
/// known.
pub fn vtbackup(
    object: &NewObject,
    what: BackupObject,
    storage: &Storage,
    desired: Result<PvcTemplate, FirstPoolUnknown>,
) -> Decision {
    let mut d = Decision::default();
    // Stamped last, in this order, after any change of the spec.
    let mut stamps: Vec<(&str, String)> = Vec::new();
    match (what, &object.body) {
        (BackupObject::InitPod, Body::Pod(pod)) => {
            let Some(data) = &pod.backup_data else {
                return Decision::note(
                    Code::NoDataMount,
                    "the Pod has no vtbackup container mounting /vt/vtdataroot",
                );
            };
            let mut shape = data.shape.clone();
            match (storage, data.default_pvc) {
                (Storage::EmptyDirForInitialBackup, Some(i)) => {
                    d.patch.push(patch::empty_dir(i));
                    shape.source = Source::EmptyDir;
                    d.push(
                        Code::EmptyDirForInitialBackup,
                        "the initial backup's /vt/vtdataroot is an emptyDir",
                    );
                }
                (Storage::EmptyDirForInitialBackup, None) => d.push(
                    Code::DataVolumeOverridden,
                    "the pool's extraVolumes/extraVolumeMounts already choose /vt/vtdataroot's volume: kept",
                ),
                (Storage::Template(_), _) => d.push(
                    Code::VtbackupTemplate,
                    "the Pod's PVC gets the vtbackup template",
                ),
                (Storage::InheritFirstPool, _) => {
                    d.push(Code::InheritFirstPool, "the first tablet pool's storage");
                }
            }
            stamps.push((ANN_DATA_VOLUME_HASH, shape.hash()));
            stamp_template(&mut d, &mut stamps, desired);
        }
        (BackupObject::InitPvc, Body::Pvc(pvc)) => {
            match storage {
                Storage::EmptyDirForInitialBackup => {
                    d.patch
                        .push(patch::set_spec(pvc.spec.as_ref(), &placeholder()));
                    d.push(
                        Code::PlaceholderPvc,
                        "the initial backup uses an emptyDir: this PVC is a placeholder that never binds",
                    );
                }
                Storage::Template(t) => {
                    d.patch.push(patch::set_spec(pvc.spec.as_ref(), t));
                    d.push(
                        Code::VtbackupTemplate,
                        "spec from vtbackup.dataVolumeClaimTemplate",
                    );
                }
                Storage::InheritFirstPool => {
                    d.push(Code::InheritFirstPool, "the first tablet pool's template");
                }
            }
            stamp_template(&mut d, &mut stamps, desired);
        }
        (BackupObject::ScheduledPvc, Body::Pvc(pvc)) => match storage {
            Storage::Template(t) => {
                d.patch.push(patch::set_spec(pvc.spec.as_ref(), t));
                d.push(
                    Code::VtbackupTemplate,
                    "spec from vtbackup.dataVolumeClaimTemplate",
                );
                stamps.push((ANN_TEMPLATE_HASH, t.hash()));
            }
            _ => d.push(
                Code::InheritFirstPool,
                "scheduled backups keep the first tablet pool's template",
            ),
        },
        // core's `BackupObject::identify` names only a Pod as a Pod and a PVC as a PVC.
        (_, Body::Pod(_) | Body::Pvc(_)) => {
            return Decision::note(
                Code::BackupObjectConflicting,
                format!("a {} cannot be {what:?}", object.kind()),
            );
        }
    }
    d.patch.extend(patch::annotate(&object.meta, &stamps));
    d
}

fn stamp_template(
    d: &mut Decision,
    stamps: &mut Vec<(&str, String)>,
    desired: Result<PvcTemplate, FirstPoolUnknown>,
) {
    match desired {
        Ok(t) => stamps.push((ANN_TEMPLATE_HASH, t.hash())),
        Err(why) => d.push(
            Code::FirstPoolTemplateUnknown,
            format!(
                "the VitessCluster's first pool template is not known ({why}): no template hash stamped"
            ),
        ),
    }
}
