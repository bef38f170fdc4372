//! The reconciler's decisions, pure, on objects shaped as vitess-operator makes them and
//! mutated by the admission webhook's own decision code: the storage proposal's test list (docs/design.md §9), one test
//! per case.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::core::admission::Operation;
use serde_json::{Value, json};
use vtsnap_admission::decide::{Settings, decide};
use vtsnap_admission::inventory::Dump;
use vtsnap_admission::observe::{Kind as ReviewKind, NewObject, Review};
use vtsnap_admission::patch::apply;
use vtsnap_core::config::Config;
use vtsnap_core::reconcile::ObjectKey;
use vtsnap_testkit::operator_objects::{operator_shard, pvc_template, with_extra_volume};
use vtsnap_vtbackup_storage::decide::{Action, Kind, Plan, Reason, plan};
use vtsnap_vtbackup_storage::observe::{ANN_REPLACED_FOR, BOUND_BY_CONTROLLER, Read, World, group};

const BASE: &str = "clusters:\n- name: example\n  namespace: vitess\n";

fn config(vtbackup: &str) -> Config {
    let block = if vtbackup.is_empty() {
        String::new()
    } else {
        format!("  vtbackup: {vtbackup}\n")
    };
    Config::from_yaml(&format!("{BASE}{block}")).unwrap()
}

const EMPTY_DIR: &str = "{useEmptyDirForInitialBackup: true}";
const CHEAP: &str = "{dataVolumeClaimTemplate: {storageClassName: cheap, accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}}}";
const CHEAPER: &str = "{dataVolumeClaimTemplate: {storageClassName: cheap, accessModes: [ReadWriteOnce], resources: {requests: {storage: 5Gi}}}}";

/// The first pool's template and pool.
fn pool_template() -> Value {
    pvc_template("100Gi")
}

fn vitess_cluster(pool_extra: Value) -> Value {
    let mut pool = json!({"cell": "zone1", "type": "replica", "replicas": 3, "dataVolumeClaimTemplate": pool_template()});
    if let (Some(p), Some(extra)) = (pool.as_object_mut(), pool_extra.as_object()) {
        p.extend(extra.clone());
    }
    json!({"apiVersion": "planetscale.com/v2", "kind": "VitessCluster",
        "metadata": {"name": "example", "namespace": "vitess", "uid": "vc-1"},
        "spec": {"keyspaces": [{"name": "commerce", "partitionings": [{"equal": {"parts": 1, "shardTemplate": {
            "tabletPools": [pool]}}}]}]}})
}

/// What the API server stores when the operator creates `obj` with the webhook serving
/// under `cfg`.
fn created(cfg: &Config, cluster: &Value, obj: &Value, pod: bool) -> Value {
    let mut inv = Dump::default();
    inv.add(cluster.clone());
    let settings = Settings {
        restore_image: None,
        shard_state_max_age: Duration::from_secs(300),
    };
    let kind = if pod {
        ReviewKind::Pod
    } else {
        ReviewKind::PersistentVolumeClaim
    };
    let d = decide(
        &Review {
            operation: Operation::Create,
            namespace: "vitess".into(),
            object: Some(NewObject::read(kind, obj, "vitess")),
        },
        cfg,
        &settings,
        &inv,
        Timestamp::now(),
    );
    let mut stored = apply(obj, &d.patch).unwrap();
    stored["metadata"]["uid"] = json!(format!("uid-{}", if pod { "pod" } else { "pvc" }));
    stored
}

struct Objects {
    pod: Option<Value>,
    pvc: Option<Value>,
}

/// The initial backup's Pod and PVC as created under `made_under`, with the pool extras
/// `pool_extra` applied by the operator.
fn made_under(made_under: &Config, pool_extra: Value) -> Objects {
    let s = operator_shard();
    let cluster = vitess_cluster(pool_extra.clone());
    let mut pod = s.vtbackup_init_pod();
    for v in pool_extra
        .get("extraVolumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        pod = with_extra_volume(pod, v.clone());
    }
    let pod = created(made_under, &cluster, &pod, true);
    let pvc = created(
        made_under,
        &cluster,
        &s.vtbackup_init_pvc(&pool_template()),
        false,
    );
    Objects {
        pod: Some(pod),
        pvc: Some(pvc),
    }
}

fn phase(mut pod: Value, phase: &str) -> Value {
    pod["status"] = json!({"phase": phase});
    pod
}

fn world(cfg: &Config, o: &Objects, pool_extra: Value) -> World {
    world_with(cfg, o, Read::Present(vitess_cluster(pool_extra)))
}

/// The world of `o` whose VitessCluster was read as `cluster`.
fn world_with(cfg: &Config, o: &Objects, cluster: Read<Value>) -> World {
    World::new(
        cfg,
        group(
            &o.pod.clone().into_iter().collect::<Vec<_>>(),
            &o.pvc.clone().into_iter().collect::<Vec<_>>(),
        ),
        &BTreeMap::from([(ObjectKey::new("vitess", "example"), cluster)]),
        Read::Present(Some("standard".into())),
        Vec::new(),
    )
}

/// `(kind, action, reason)` of every step.
fn steps(p: &Plan) -> Vec<(Kind, Action, Reason)> {
    assert_eq!(p.shards.len(), 1, "{p:#?}");
    p.shards[0]
        .objects
        .iter()
        .map(|o| (o.kind, o.action, o.reason))
        .collect()
}

use Action::*;
use Kind::{PersistentVolumeClaim as Pvc, Pod};

#[test]
fn objects_made_by_the_webhook_are_up_to_date_under_every_policy() {
    for policy in ["", EMPTY_DIR, CHEAP] {
        let cfg = config(policy);
        let mut o = made_under(&cfg, json!({}));
        o.pod = o.pod.map(|p| phase(p, "Pending"));
        let p = plan(&cfg, &world(&cfg, &o, json!({})), None);
        assert_eq!(
            steps(&p),
            [
                (Pod, Keep, Reason::UpToDate),
                (Pvc, Keep, Reason::PodPresent)
            ],
            "policy {policy:?}: {p:#?}"
        );
        // Once the Pod is gone, the PVC is as wanted too.
        o.pod = None;
        assert_eq!(
            steps(&plan(&cfg, &world(&cfg, &o, json!({})), None)),
            [(Pvc, Keep, Reason::UpToDate)],
            "{policy:?}"
        );
    }
}

#[test]
fn pvc_to_empty_dir_replaces_the_pod_then_the_pvc() {
    let mut o = made_under(&config(""), json!({}));
    o.pod = o.pod.map(|p| phase(p, "Pending"));
    let p = plan(
        &config(EMPTY_DIR),
        &world(&config(EMPTY_DIR), &o, json!({})),
        None,
    );
    assert_eq!(
        steps(&p),
        [
            (Pod, DeletePod, Reason::DataVolumeChanged),
            (Pvc, DeletePvc, Reason::TemplateChanged)
        ]
    );
    // The recreated objects (operator + webhook) are then up to date.
    let again = made_under(&config(EMPTY_DIR), json!({}));
    let p = plan(
        &config(EMPTY_DIR),
        &world(
            &config(EMPTY_DIR),
            &Objects {
                pod: again.pod.map(|p| phase(p, "Pending")),
                ..again
            },
            json!({}),
        ),
        None,
    );
    assert_eq!(
        steps(&p),
        [
            (Pod, Keep, Reason::UpToDate),
            (Pvc, Keep, Reason::PodPresent)
        ]
    );
}

#[test]
fn empty_dir_to_pvc_replaces_the_pod_then_the_placeholder() {
    let mut o = made_under(&config(EMPTY_DIR), json!({}));
    o.pod = o.pod.map(|p| phase(p, "Failed"));
    let p = plan(&config(""), &world(&config(""), &o, json!({})), None);
    assert_eq!(
        steps(&p),
        [
            (Pod, DeletePod, Reason::DataVolumeChanged),
            (Pvc, DeletePvc, Reason::TemplateChanged)
        ]
    );
}

#[test]
fn a_custom_template_change_replaces_pod_and_pvc() {
    let mut o = made_under(&config(CHEAP), json!({}));
    o.pod = o.pod.map(|p| phase(p, "Pending"));
    let p = plan(
        &config(CHEAPER),
        &world(&config(CHEAPER), &o, json!({})),
        None,
    );
    assert_eq!(
        steps(&p),
        [
            (Pod, DeletePod, Reason::TemplateChanged),
            (Pvc, DeletePvc, Reason::TemplateChanged)
        ]
    );
    // From inherited to a custom template, and back.
    let mut o = made_under(&config(""), json!({}));
    o.pod = o.pod.map(|p| phase(p, "Pending"));
    assert_eq!(
        steps(&plan(
            &config(CHEAP),
            &world(&config(CHEAP), &o, json!({})),
            None
        ))[1],
        (Pvc, DeletePvc, Reason::TemplateChanged)
    );
}

#[test]
fn an_effective_volume_change_replaces_the_pod_and_keeps_an_unchanged_pvc() {
    let mut o = made_under(&config(""), json!({}));
    o.pod = o.pod.map(|p| phase(p, "Pending"));
    // The pool now overrides the data volume with a hostPath (extraVolumes).
    let extra = json!({"extraVolumes": [{"name": "persistent-volume-claim", "hostPath": {"path": "/scratch"}}]});
    let p = plan(&config(""), &world(&config(""), &o, extra.clone()), None);
    assert_eq!(
        steps(&p),
        [
            (Pod, DeletePod, Reason::DataVolumeChanged),
            (Pvc, Keep, Reason::UpToDate)
        ],
        "{p:#?}"
    );
    // The replacement has the hostPath and is up to date; the PVC was never touched.
    let again = made_under(&config(""), extra.clone());
    let w = world(
        &config(""),
        &Objects {
            pod: again.pod.map(|p| phase(p, "Pending")),
            pvc: o.pvc.clone(),
        },
        extra,
    );
    assert_eq!(
        steps(&plan(&config(""), &w, None)),
        [
            (Pod, Keep, Reason::UpToDate),
            (Pvc, Keep, Reason::PodPresent)
        ]
    );
}

#[test]
fn a_running_initial_backup_is_never_interrupted() {
    let mut o = made_under(&config(""), json!({}));
    o.pod = o.pod.map(|p| phase(p, "Running"));
    for policy in [EMPTY_DIR, CHEAP, ""] {
        let p = plan(
            &config(policy),
            &world(&config(policy), &o, json!({})),
            None,
        );
        assert_eq!(
            steps(&p),
            [
                (Pod, Keep, Reason::RunningBackupPreserved),
                (Pvc, Keep, Reason::PodPresent)
            ],
            "{policy:?}"
        );
    }
}

#[test]
fn empty_dir_frees_an_initial_backup_pending_on_an_unbindable_inherited_pvc() {
    // Created before vtsnap (no hashes), Pending: its PVC cannot bind.
    let s = operator_shard();
    let mut pod = phase(s.vtbackup_init_pod(), "Pending");
    pod["metadata"]["uid"] = json!("uid-pod");
    let mut pvc = s.vtbackup_init_pvc(&pool_template());
    pvc["metadata"]["uid"] = json!("uid-pvc");
    pvc["status"] = json!({"phase": "Pending"});
    let o = Objects {
        pod: Some(pod),
        pvc: Some(pvc),
    };
    let p = plan(
        &config(EMPTY_DIR),
        &world(&config(EMPTY_DIR), &o, json!({})),
        None,
    );
    assert_eq!(
        steps(&p),
        [
            (Pod, DeletePod, Reason::LegacyDiffers),
            (Pvc, DeletePvc, Reason::LegacyDiffers)
        ],
        "{p:#?}"
    );
}

/// A PVC after Kubernetes filled in its defaults and bound it.
fn defaulted(mut pvc: Value, class: &str) -> Value {
    pvc["spec"]["storageClassName"] = json!(class);
    pvc["spec"]["volumeMode"] = json!("Filesystem");
    pvc["spec"]["volumeName"] = json!("pvc-0f3a");
    pvc["metadata"]["annotations"] =
        json!({BOUND_BY_CONTROLLER: "yes", "pv.kubernetes.io/bind-completed": "yes"});
    pvc["status"] = json!({"phase": "Bound"});
    pvc
}

fn legacy(pod_phase: &str, pvc: Value) -> Objects {
    let s = operator_shard();
    let mut pod = phase(s.vtbackup_init_pod(), pod_phase);
    pod["metadata"]["uid"] = json!("uid-pod");
    let mut pvc = pvc;
    pvc["metadata"]["uid"] = json!("uid-pvc");
    Objects {
        pod: Some(pod),
        pvc: Some(pvc),
    }
}

#[test]
fn hashless_objects_that_already_match_are_adopted_counting_kubernetes_defaults() {
    let pvc = defaulted(
        operator_shard().vtbackup_init_pvc(&pool_template()),
        "standard",
    );
    let o = legacy("Pending", pvc);
    let p = plan(&config(""), &world(&config(""), &o, json!({})), None);
    assert_eq!(
        steps(&p),
        [
            (Pod, Adopt, Reason::LegacyMatches),
            (Pvc, Adopt, Reason::LegacyMatches)
        ],
        "{p:#?}"
    );
    // Running: adopted too (stamping interrupts nothing).
    let pvc = defaulted(
        operator_shard().vtbackup_init_pvc(&pool_template()),
        "standard",
    );
    let o = legacy("Running", pvc);
    assert_eq!(
        steps(&plan(&config(""), &world(&config(""), &o, json!({})), None))[0],
        (Pod, Keep, Reason::RunningBackupPreserved)
    );
}

#[test]
fn single_hash_objects_are_adopted_like_hashless_ones() {
    // The webhook stamped only the data-volume hash (the VitessCluster was not cached yet).
    let mut o = made_under(&config(""), json!({}));
    let pod = o.pod.as_mut().unwrap();
    pod["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove("vtsnap.io/vtbackup-pvc-template-hash");
    *pod = phase(pod.clone(), "Pending");
    o.pvc.as_mut().unwrap()["metadata"]["annotations"] = json!({});
    let p = plan(&config(""), &world(&config(""), &o, json!({})), None);
    assert_eq!(
        steps(&p),
        [
            (Pod, Adopt, Reason::LegacyMatches),
            (Pvc, Adopt, Reason::LegacyMatches)
        ],
        "{p:#?}"
    );
}

#[test]
fn an_explicit_empty_storage_class_is_not_the_default_class() {
    let empty_class = "{dataVolumeClaimTemplate: {storageClassName: \"\", accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}}}";
    let template = json!({"storageClassName": "", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}});
    // Made with "" (and bound to a static PV): adopted.
    let o = legacy(
        "Succeeded",
        defaulted(operator_shard().vtbackup_init_pvc(&template), ""),
    );
    assert_eq!(
        steps(&plan(
            &config(empty_class),
            &world(&config(empty_class), &o, json!({})),
            None
        ))[1],
        (Pvc, Adopt, Reason::LegacyMatches)
    );
    // Given the default class: not what "" asks for.
    let mut o = legacy(
        "Succeeded",
        defaulted(operator_shard().vtbackup_init_pvc(&template), "standard"),
    );
    o.pod = None;
    let p = plan(
        &config(empty_class),
        &world(&config(empty_class), &o, json!({})),
        None,
    );
    assert_eq!(
        steps(&p),
        [(Pvc, DeletePvc, Reason::LegacyDiffers)],
        "{p:#?}"
    );
}

#[test]
fn a_user_prebound_volume_is_not_a_controller_binding() {
    let mut pvc = operator_shard().vtbackup_init_pvc(&pool_template());
    pvc["spec"]["volumeName"] = json!("pv-by-hand");
    pvc["spec"]["storageClassName"] = json!("standard");
    let mut o = legacy("Succeeded", pvc);
    o.pod = None;
    let p = plan(&config(""), &world(&config(""), &o, json!({})), None);
    assert_eq!(steps(&p), [(Pvc, DeletePvc, Reason::LegacyDiffers)]);
    assert!(
        p.shards[0].objects[0].message.contains("set by hand"),
        "{p:#?}"
    );
}

#[test]
fn uncertain_reads_keep_everything_and_retry() {
    // A PVC that could not be read keeps a legacy Pod.
    let o = legacy(
        "Pending",
        defaulted(
            operator_shard().vtbackup_init_pvc(&pool_template()),
            "standard",
        ),
    );
    let mut w = world(&config(EMPTY_DIR), &o, json!({}));
    w.shards[0].pvc = Read::Unreadable("PVCs in vitess: 503".into());
    let p = plan(&config(EMPTY_DIR), &w, None);
    assert_eq!(
        steps(&p),
        [
            (Pod, Wait, Reason::PvcUnreadable),
            (Pvc, Wait, Reason::PvcUnreadable)
        ]
    );
    assert!(p.blocked());
    // A Pod that could not be read: nothing happens to the PVC either.
    let mut w = world(&config(EMPTY_DIR), &o, json!({}));
    w.shards[0].pod = Read::Unreadable("Pods in vitess: timeout".into());
    let p = plan(&config(EMPTY_DIR), &w, None);
    assert_eq!(
        steps(&p),
        [
            (Pod, Wait, Reason::PodUnreadable),
            (Pvc, Wait, Reason::PodUnreadable)
        ]
    );
    // The VitessCluster (the first pool) cannot be read, or the default class.
    let w = world_with(&config(""), &o, Read::Unreadable("500".into()));
    assert_eq!(
        steps(&plan(&config(""), &w, None)),
        [
            (Pod, Wait, Reason::DesiredUnknown),
            (Pvc, Wait, Reason::DesiredUnknown)
        ]
    );
    let w = world_with(&config(""), &o, Read::Absent);
    assert_eq!(
        steps(&plan(&config(""), &w, None))[0].2,
        Reason::DesiredUnknown
    );
    let mut w = world(&config(""), &o, json!({}));
    w.default_class = Read::Unreadable("StorageClasses: 403".into());
    assert_eq!(
        steps(&plan(&config(""), &w, None)),
        [(Pod, Wait, Reason::DefaultClassUnknown)]
    );
    // With the class named in the template the default class does not matter.
    let o = legacy("Pending", defaulted(operator_shard().vtbackup_init_pvc(&json!({"storageClassName": "cheap", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}})), "cheap"));
    let mut w = world(&config(CHEAP), &o, json!({}));
    w.default_class = Read::Unreadable("StorageClasses: 403".into());
    assert_eq!(steps(&plan(&config(CHEAP), &w, None))[0].1, Adopt);
}

#[test]
fn a_replacement_that_does_not_converge_is_not_replaced_again() {
    let mut o = made_under(&config(""), json!({}));
    o.pod = o.pod.map(|p| phase(p, "Pending"));
    let extra = json!({"extraVolumes": [{"name": "persistent-volume-claim", "hostPath": {"path": "/scratch"}}]});
    let p = plan(&config(""), &world(&config(""), &o, extra.clone()), None);
    let guard = p.shards[0].desired.as_ref().unwrap().guard();
    // The operator ignored the extraVolumes (older than v2.17.0): the new Pod still has
    // the PVC volume. The guard the first replacement left on the PVC stops a loop.
    o.pvc.as_mut().unwrap()["metadata"]["annotations"][ANN_REPLACED_FOR] = json!(guard);
    let p = plan(&config(""), &world(&config(""), &o, extra), None);
    assert_eq!(
        steps(&p)[0],
        (Pod, Wait, Reason::ReplacementDidNotConverge),
        "{p:#?}"
    );
    assert!(!p.blocked(), "not a read failure");
}

#[test]
fn a_pvc_being_deleted_frees_itself_of_a_pod_that_is_not_running() {
    let mut o = made_under(&config(""), json!({}));
    o.pod = o.pod.map(|p| phase(p, "Pending"));
    o.pvc.as_mut().unwrap()["metadata"]["deletionTimestamp"] = json!("2026-12-01T00:00:00Z");
    let p = plan(&config(""), &world(&config(""), &o, json!({})), None);
    assert_eq!(
        steps(&p)[0],
        (Pod, DeletePod, Reason::PvcBeingReplaced),
        "{p:#?}"
    );
    // Running: kept even so.
    o.pod = o.pod.map(|p| phase(p, "Running"));
    assert_eq!(
        steps(&plan(&config(""), &world(&config(""), &o, json!({})), None))[0],
        (Pod, Keep, Reason::RunningBackupPreserved)
    );
}

#[test]
fn scheduled_backups_tablets_and_other_clusters_are_not_touched() {
    let s = operator_shard();
    let sched = s.scheduled_backup_pvc("daily", 1_800_000_000, &pool_template());
    let tablet = s.tablet("replica", 1).pvc(&pool_template());
    let w = World::new(
        &config(EMPTY_DIR),
        group(&[s.tablet("replica", 1).pod()], &[sched, tablet]),
        &BTreeMap::new(),
        Read::Present(None),
        Vec::new(),
    );
    assert!(plan(&config(EMPTY_DIR), &w, None).shards.is_empty());
    let o = made_under(&config(""), json!({}));
    let w = world(&config(""), &o, json!({}));
    assert!(plan(&config(""), &w, Some("other")).shards.is_empty());
    let other = Config::from_yaml("clusters:\n- name: other\n  namespace: vitess\n").unwrap();
    assert!(plan(&other, &w, None).shards.is_empty());
}

#[test]
fn a_legacy_pod_whose_data_volume_differs_is_replaced() {
    let pvc = defaulted(
        operator_shard().vtbackup_init_pvc(&pool_template()),
        "standard",
    );
    let o = legacy("Pending", pvc.clone());
    let p = plan(
        &config(EMPTY_DIR),
        &world(&config(EMPTY_DIR), &o, json!({})),
        None,
    );
    assert_eq!(
        steps(&p)[0],
        (Pod, DeletePod, Reason::LegacyDiffers),
        "{p:#?}"
    );
    // The PVC fits the template, but the pool's extraVolumes replace the data volume.
    let extra = json!({"extraVolumes": [{"name": "persistent-volume-claim", "hostPath": {"path": "/scratch"}}]});
    let o = legacy("Pending", pvc);
    let p = plan(&config(""), &world(&config(""), &o, extra), None);
    assert_eq!(
        steps(&p)[0],
        (Pod, DeletePod, Reason::LegacyDiffers),
        "{p:#?}"
    );
}

#[test]
fn an_unreadable_pvc_beside_an_up_to_date_pod_waits_and_keeps_the_pod() {
    let mut o = made_under(&config(""), json!({}));
    o.pod = o.pod.map(|p| phase(p, "Pending"));
    let mut w = world(&config(""), &o, json!({}));
    w.shards[0].pvc = Read::Unreadable("PVCs in vitess: 503".into());
    let p = plan(&config(""), &w, None);
    assert_eq!(
        steps(&p),
        [
            (Pod, Keep, Reason::UpToDate),
            (Pvc, Wait, Reason::PvcUnreadable)
        ],
        "{p:#?}"
    );
}

#[test]
fn only_an_adopted_pod_lets_its_pvc_be_adopted() {
    // The Pod carries both hashes (kept); its PVC lost its hash: kept, not adopted.
    let mut o = made_under(&config(""), json!({}));
    o.pod = o.pod.map(|p| phase(p, "Pending"));
    o.pvc.as_mut().unwrap()["metadata"]["annotations"] = json!({});
    let p = plan(&config(""), &world(&config(""), &o, json!({})), None);
    assert_eq!(
        steps(&p),
        [
            (Pod, Keep, Reason::UpToDate),
            (Pvc, Keep, Reason::PodPresent)
        ],
        "{p:#?}"
    );
    // A legacy Pod adopted beside a PVC that already has its hash: the PVC is kept.
    let mut pvc = defaulted(
        operator_shard().vtbackup_init_pvc(&pool_template()),
        "standard",
    );
    let desired = plan(
        &config(""),
        &world(&config(""), &legacy("Pending", pvc.clone()), json!({})),
        None,
    )
    .shards[0]
        .desired
        .clone()
        .unwrap();
    pvc["metadata"]["annotations"]["vtsnap.io/vtbackup-pvc-template-hash"] =
        json!(desired.template_hash);
    let p = plan(
        &config(""),
        &world(&config(""), &legacy("Pending", pvc), json!({})),
        None,
    );
    assert_eq!(
        steps(&p),
        [
            (Pod, Adopt, Reason::LegacyMatches),
            (Pvc, Keep, Reason::PodPresent)
        ],
        "{p:#?}"
    );
}

#[test]
fn the_loop_guard_names_both_hashes() {
    // Stored on PVCs: its spelling must not change between releases.
    let d = vtsnap_vtbackup_storage::decide::Desired {
        template_hash: "t0".into(),
        data_volume_hash: "d1".into(),
    };
    assert_eq!(d.guard(), "d1/t0");
}
