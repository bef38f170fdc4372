//! Every row of the vtbackup table (docs/design.md §9), on objects shaped as
//! vitess-operator makes them.

use serde_json::{Value, json};
use vtsnap_core::config::Config;
use vtsnap_core::vtbackup::{
    ANN_DATA_VOLUME_HASH, ANN_TEMPLATE_HASH, PLACEHOLDER_CLASS, data_volume, placeholder_spec,
    template_hash,
};
use vtsnap_testkit::operator_objects::{
    operator_shard, pvc_template, with_extra_mount, with_extra_volume,
};

use super::tests::{codes, config, inventory, now, review_of, settings};
use super::*;
use crate::inventory::Dump;
use crate::observe::Kind;
use crate::patch::{Op, apply};

// ---- vtbackup storage (docs/design.md §9's table) ---------------------------------------------

fn vitess_cluster(first_pool: &Value) -> Value {
    json!({"apiVersion": "planetscale.com/v2", "kind": "VitessCluster",
        "metadata": {"name": "example", "namespace": "vitess", "uid": "vc-1"},
        "spec": {"keyspaces": [{"name": "commerce", "partitionings": [{"equal": {"parts": 1, "shardTemplate": {
            "tabletPools": [{"cell": "zone1", "type": "replica", "replicas": 3, "dataVolumeClaimTemplate": first_pool}]}}}]}]}})
}

pub(super) fn with_cluster(first_pool: &Value) -> Dump {
    let mut d = inventory(&[]);
    d.add(vitess_cluster(first_pool));
    d
}

pub(super) fn vtbackup_config(block: &str) -> Config {
    config(&format!("  vtbackup: {block}\n"))
}

fn own_template() -> Value {
    json!({"storageClassName": "cheap-disk", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}})
}

fn annotation<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v["metadata"]["annotations"][k].as_str()
}

#[test]
fn inherited_storage_changes_nothing_and_stamps_the_first_pools_template() {
    let pool = pvc_template("100Gi");
    let inv = with_cluster(&pool);
    let cfg = config("");
    let s = operator_shard();
    let pod = s.vtbackup_init_pod();
    let d = decide(&review_of(Kind::Pod, &pod), &cfg, &settings(), &inv, now());
    assert_eq!(codes(&d), [Code::InheritFirstPool]);
    let after = apply(&pod, &d.patch).unwrap();
    assert_eq!(
        after["spec"], pod["spec"],
        "the Pod's storage is the operator's"
    );
    assert_eq!(
        annotation(&after, ANN_TEMPLATE_HASH),
        Some(template_hash(&pool).as_str())
    );
    assert_eq!(
        annotation(&after, ANN_DATA_VOLUME_HASH),
        Some(data_volume(&pod).unwrap().hash().as_str())
    );
    let pvc = s.vtbackup_init_pvc(&pool);
    let d = decide(
        &review_of(Kind::PersistentVolumeClaim, &pvc),
        &cfg,
        &settings(),
        &inv,
        now(),
    );
    let after = apply(&pvc, &d.patch).unwrap();
    assert_eq!(after["spec"], pool);
    assert_eq!(
        annotation(&after, ANN_TEMPLATE_HASH),
        Some(template_hash(&pool).as_str())
    );
    let sched = s.scheduled_backup_pvc("daily", 1_800_000_000, &pool);
    let d = decide(
        &review_of(Kind::PersistentVolumeClaim, &sched),
        &cfg,
        &settings(),
        &inv,
        now(),
    );
    assert_eq!(
        (codes(&d), d.patch.len()),
        (vec![Code::InheritFirstPool], 0)
    );
    // Without the VitessCluster the first pool's template is unknown: no template hash.
    let d = decide(
        &review_of(Kind::Pod, &pod),
        &cfg,
        &settings(),
        &inventory(&[]),
        now(),
    );
    assert_eq!(
        codes(&d),
        [Code::InheritFirstPool, Code::FirstPoolTemplateUnknown]
    );
    let after = apply(&pod, &d.patch).unwrap();
    assert!(annotation(&after, ANN_TEMPLATE_HASH).is_none());
    assert!(annotation(&after, ANN_DATA_VOLUME_HASH).is_some());
}

#[test]
fn a_vtbackup_pvc_without_a_spec_gets_the_placeholder_added() {
    // Found by the review fuzzer: a JSON patch cannot replace a member that is missing.
    let pool = pvc_template("100Gi");
    let inv = with_cluster(&pool);
    let cfg = vtbackup_config("{useEmptyDirForInitialBackup: true}");
    let mut pvc = operator_shard().vtbackup_init_pvc(&pool);
    pvc.as_object_mut().unwrap().remove("spec");
    let d = decide(
        &review_of(Kind::PersistentVolumeClaim, &pvc),
        &cfg,
        &settings(),
        &inv,
        now(),
    );
    assert!(
        matches!(&d.patch[0], Op::Add { path, .. } if path == "/spec"),
        "{:?}",
        d.patch
    );
    let after = apply(&pvc, &d.patch).unwrap();
    assert_eq!(after["spec"], placeholder_spec());
}

#[test]
fn an_empty_dir_initial_backup_gets_an_empty_dir_and_a_placeholder_pvc() {
    let pool = pvc_template("100Gi");
    let inv = with_cluster(&pool);
    let cfg = vtbackup_config("{useEmptyDirForInitialBackup: true}");
    let s = operator_shard();
    let pod = s.vtbackup_init_pod();
    let d = decide(&review_of(Kind::Pod, &pod), &cfg, &settings(), &inv, now());
    assert_eq!(codes(&d), [Code::EmptyDirForInitialBackup]);
    let after = apply(&pod, &d.patch).unwrap();
    assert_eq!(
        after["spec"]["volumes"][1],
        json!({"name": "persistent-volume-claim", "emptyDir": {}})
    );
    assert_eq!(after["spec"]["volumes"][0], pod["spec"]["volumes"][0]);
    assert_eq!(
        after["spec"]["containers"], pod["spec"]["containers"],
        "the mount stays, on the emptyDir now"
    );
    assert_eq!(
        annotation(&after, ANN_DATA_VOLUME_HASH),
        Some(data_volume(&after).unwrap().hash().as_str()),
        "the hash is of the effective volume"
    );
    assert_ne!(
        annotation(&after, ANN_DATA_VOLUME_HASH),
        Some(data_volume(&pod).unwrap().hash().as_str())
    );
    assert_eq!(
        annotation(&after, ANN_TEMPLATE_HASH),
        Some(template_hash(&placeholder_spec()).as_str())
    );

    let pvc = s.vtbackup_init_pvc(&pool);
    let d = decide(
        &review_of(Kind::PersistentVolumeClaim, &pvc),
        &cfg,
        &settings(),
        &inv,
        now(),
    );
    assert_eq!(codes(&d), [Code::PlaceholderPvc]);
    assert!(
        matches!(&d.patch[0], Op::Replace { path, .. } if path == "/spec"),
        "{:?}",
        d.patch
    );
    let after = apply(&pvc, &d.patch).unwrap();
    assert_eq!(after["spec"], placeholder_spec());
    assert_eq!(after["spec"]["storageClassName"], PLACEHOLDER_CLASS);
    assert_eq!(
        after["metadata"]["labels"], pvc["metadata"]["labels"],
        "still the operator's PVC"
    );
    assert_eq!(
        annotation(&after, ANN_TEMPLATE_HASH),
        Some(template_hash(&placeholder_spec()).as_str())
    );

    // Scheduled backups keep the first pool's template.
    let sched = s.scheduled_backup_pvc("daily", 1_800_000_000, &pool);
    let d = decide(
        &review_of(Kind::PersistentVolumeClaim, &sched),
        &cfg,
        &settings(),
        &inv,
        now(),
    );
    assert_eq!(
        (codes(&d), d.patch.len()),
        (vec![Code::InheritFirstPool], 0)
    );
    // Tablets' PVCs are not vtbackup's.
    let tablet = s.tablet("replica", 1).pvc(&pool);
    let d = decide(
        &review_of(Kind::PersistentVolumeClaim, &tablet),
        &cfg,
        &settings(),
        &inv,
        now(),
    );
    assert_eq!((codes(&d), d.patch.len()), (vec![Code::RestoreDisabled], 0));
}

#[test]
fn a_data_volume_the_pools_extra_volumes_chose_is_kept() {
    let cfg = vtbackup_config("{useEmptyDirForInitialBackup: true}");
    let inv = with_cluster(&pvc_template("100Gi"));
    let s = operator_shard();
    // extraVolumes replaced the data volume by name.
    let pod = with_extra_volume(
        s.vtbackup_init_pod(),
        json!({"name": "persistent-volume-claim", "hostPath": {"path": "/scratch"}}),
    );
    let d = decide(&review_of(Kind::Pod, &pod), &cfg, &settings(), &inv, now());
    assert_eq!(codes(&d), [Code::DataVolumeOverridden]);
    let after = apply(&pod, &d.patch).unwrap();
    assert_eq!(after["spec"], pod["spec"]);
    assert_eq!(
        annotation(&after, ANN_DATA_VOLUME_HASH),
        Some(data_volume(&pod).unwrap().hash().as_str())
    );
    // extraVolumeMounts put /vt/vtdataroot on another volume.
    let pod = with_extra_mount(
        with_extra_volume(
            s.vtbackup_init_pod(),
            json!({"name": "scratch", "emptyDir": {"sizeLimit": "20Gi"}}),
        ),
        json!({"name": "scratch", "mountPath": "/vt/vtdataroot"}),
    );
    let d = decide(&review_of(Kind::Pod, &pod), &cfg, &settings(), &inv, now());
    assert_eq!(codes(&d), [Code::DataVolumeOverridden]);
    assert_eq!(apply(&pod, &d.patch).unwrap()["spec"], pod["spec"]);
    // No vtbackup container mounting the data root.
    let mut odd = s.vtbackup_init_pod();
    odd["spec"]["containers"][0]["name"] = json!("other");
    let d = decide(&review_of(Kind::Pod, &odd), &cfg, &settings(), &inv, now());
    assert_eq!((codes(&d), d.patch.len()), (vec![Code::NoDataMount], 0));
}

#[test]
fn a_vtbackup_template_becomes_the_spec_of_initial_and_scheduled_backup_pvcs() {
    let pool = pvc_template("100Gi");
    let inv = with_cluster(&pool);
    let cfg = vtbackup_config(
        "{dataVolumeClaimTemplate: {storageClassName: cheap-disk, accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}}}",
    );
    let s = operator_shard();
    let want_hash = template_hash(&own_template());
    let pod = s.vtbackup_init_pod();
    let d = decide(&review_of(Kind::Pod, &pod), &cfg, &settings(), &inv, now());
    assert_eq!(codes(&d), [Code::VtbackupTemplate]);
    let after = apply(&pod, &d.patch).unwrap();
    assert_eq!(after["spec"], pod["spec"]);
    assert_eq!(
        annotation(&after, ANN_TEMPLATE_HASH),
        Some(want_hash.as_str())
    );
    for pvc in [
        s.vtbackup_init_pvc(&pool),
        s.scheduled_backup_pvc("daily", 1_800_000_000, &pool),
    ] {
        let d = decide(
            &review_of(Kind::PersistentVolumeClaim, &pvc),
            &cfg,
            &settings(),
            &inv,
            now(),
        );
        assert_eq!(codes(&d), [Code::VtbackupTemplate]);
        let after = apply(&pvc, &d.patch).unwrap();
        assert_eq!(after["spec"], own_template());
        assert_eq!(
            annotation(&after, ANN_TEMPLATE_HASH),
            Some(want_hash.as_str())
        );
        assert_eq!(after["metadata"]["name"], pvc["metadata"]["name"]);
    }
    // The more specific level's choice replaces the other (an emptyDir shard in a
    // template cluster).
    let cfg = config(
        "  vtbackup: {dataVolumeClaimTemplate: {resources: {requests: {storage: 10Gi}}}}\n  keyspaces:\n    commerce:\n      vtbackup: {useEmptyDirForInitialBackup: true}\n",
    );
    let d = decide(
        &review_of(Kind::PersistentVolumeClaim, &s.vtbackup_init_pvc(&pool)),
        &cfg,
        &settings(),
        &inv,
        now(),
    );
    assert_eq!(codes(&d), [Code::PlaceholderPvc]);
}
