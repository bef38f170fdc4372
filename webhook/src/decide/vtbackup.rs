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

use serde_json::{Value, json};
use vtsnap_core::config::VtbackupStorage;
use vtsnap_core::shard::ShardRef;
use vtsnap_core::vitesscluster::first_pool_template;
use vtsnap_core::vtbackup::{
    ANN_DATA_VOLUME_HASH, ANN_TEMPLATE_HASH, BackupObject, DataVolume, data_volume,
    desired_init_template, placeholder_spec, template_hash,
};

use super::{Code, Decision, name_of};
use crate::patch::{self, Op};

fn stamp(d: &mut Decision, obj: &mut Value, key: &str, value: String) {
    let ops = patch::set_entry(obj, "/metadata/annotations", key, json!(value));
    if let Ok(next) = patch::apply(obj, &ops) {
        *obj = next;
    }
    d.patch.extend(ops);
}

fn replace_spec(d: &mut Decision, obj: &mut Value, spec: &Value) {
    let (path, value) = ("/spec".to_owned(), spec.clone());
    // A JSON patch cannot replace a member that is not there (an object without a spec).
    d.patch.push(if obj.get("spec").is_some() {
        Op::Replace { path, value }
    } else {
        Op::Add { path, value }
    });
    obj["spec"] = spec.clone();
}

/// The decision for a vtbackup Pod or PVC of `shard`. `cluster` is its VitessCluster
/// object, if cached (the first pool's template comes from it).
pub fn vtbackup(
    obj: &Value,
    what: BackupObject,
    shard: &ShardRef,
    storage: &VtbackupStorage,
    cluster: Option<&Value>,
) -> Decision {
    let first_pool = cluster
        .and_then(|c| first_pool_template(c, &shard.keyspace, &shard.shard.to_string()).ok())
        .flatten();
    let desired = desired_init_template(storage, first_pool);
    let mut d = Decision::default();
    let mut out = obj.clone();
    match what {
        BackupObject::InitPod => {
            let name = name_of(obj).to_owned();
            let Some(mut data) = data_volume(obj) else {
                return Decision::note(
                    Code::NoDataMount,
                    "the Pod has no vtbackup container mounting /vt/vtdataroot",
                );
            };
            match storage {
                VtbackupStorage::EmptyDirForInitialBackup if data.is_default_pvc(&name) => {
                    if let Some((i, v)) = &mut data.volume {
                        let empty = json!({"name": v["name"], "emptyDir": {}});
                        d.patch.push(Op::Replace {
                            path: format!("/spec/volumes/{i}"),
                            value: empty.clone(),
                        });
                        out["spec"]["volumes"][*i] = empty.clone();
                        *v = empty;
                    }
                    d.push(
                        Code::EmptyDirForInitialBackup,
                        "the initial backup's /vt/vtdataroot is an emptyDir",
                    );
                }
                VtbackupStorage::EmptyDirForInitialBackup => d.push(
                    Code::DataVolumeOverridden,
                    "the pool's extraVolumes/extraVolumeMounts already choose /vt/vtdataroot's volume: kept",
                ),
                VtbackupStorage::Template(_) => d.push(
                    Code::VtbackupTemplate,
                    "the Pod's PVC gets the vtbackup template",
                ),
                VtbackupStorage::InheritFirstPool => {
                    d.push(Code::InheritFirstPool, "the first tablet pool's storage");
                }
            }
            stamp(
                &mut d,
                &mut out,
                ANN_DATA_VOLUME_HASH,
                DataVolume::hash(&data),
            );
            stamp_template(&mut d, &mut out, desired.as_ref());
        }
        BackupObject::InitPvc => {
            match storage {
                VtbackupStorage::EmptyDirForInitialBackup => {
                    replace_spec(&mut d, &mut out, &placeholder_spec());
                    d.push(
                        Code::PlaceholderPvc,
                        "the initial backup uses an emptyDir: this PVC is a placeholder that never binds",
                    );
                }
                VtbackupStorage::Template(t) => {
                    replace_spec(&mut d, &mut out, t);
                    d.push(
                        Code::VtbackupTemplate,
                        "spec from vtbackup.dataVolumeClaimTemplate",
                    );
                }
                VtbackupStorage::InheritFirstPool => {
                    d.push(Code::InheritFirstPool, "the first tablet pool's template");
                }
            }
            stamp_template(&mut d, &mut out, desired.as_ref());
        }
        BackupObject::ScheduledPvc => match storage {
            VtbackupStorage::Template(t) => {
                replace_spec(&mut d, &mut out, t);
                d.push(
                    Code::VtbackupTemplate,
                    "spec from vtbackup.dataVolumeClaimTemplate",
                );
                stamp(&mut d, &mut out, ANN_TEMPLATE_HASH, template_hash(t));
            }
            _ => d.push(
                Code::InheritFirstPool,
                "scheduled backups keep the first tablet pool's template",
            ),
        },
    }
    d
}

fn stamp_template(d: &mut Decision, out: &mut Value, desired: Option<&Value>) {
    match desired {
        Some(t) => stamp(d, out, ANN_TEMPLATE_HASH, template_hash(t)),
        None => d.push(
            Code::FirstPoolTemplateUnknown,
            "the VitessCluster's first pool template is not known: no template hash stamped",
        ),
    }
}
