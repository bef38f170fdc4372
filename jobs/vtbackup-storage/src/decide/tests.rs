//! The decider on uncertain Pods, invalid templates and objects whose signals conflict:
//! nothing is deleted on a guess.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use serde_json::{Value, json};
use vtsnap_core::reconcile::ObjectKey;
use vtsnap_testkit::operator_objects::{operator_shard, pvc_template};

use super::*;
use crate::observe::group;

const EMPTY_DIR: &str = "clusters:\n- name: example\n  namespace: vitess\n  vtbackup: {useEmptyDirForInitialBackup: true}\n";

fn config(text: &str) -> Config {
    Config::from_yaml(text).unwrap()
}

fn vitess_cluster(template: &Value) -> Value {
    let mut c = operator_shard().unsharded_vitess_cluster(template);
    c["metadata"]["uid"] = json!("vc-1");
    c
}

/// A hashless initial-backup Pod in `phase` (`None`: no phase) and its PVC, as the
/// operator made them before vtsnap: under the emptyDir policy the Pod differs.
fn objects(phase: Option<&str>) -> (Value, Value) {
    let s = operator_shard();
    let mut pod = s.vtbackup_init_pod();
    pod["metadata"]["uid"] = json!("uid-pod");
    if let Some(p) = phase {
        pod["status"] = json!({"phase": p});
    }
    let mut pvc = s.vtbackup_init_pvc(&pvc_template("100Gi"));
    pvc["metadata"]["uid"] = json!("uid-pvc");
    (pod, pvc)
}

fn world_of(config: &Config, pods: &[Value], pvcs: &[Value], pool_template: &Value) -> World {
    let clusters = BTreeMap::from([(
        ObjectKey::new("vitess", "example"),
        Read::Present(vitess_cluster(pool_template)),
    )]);
    World::new(
        config,
        group(pods, pvcs),
        &clusters,
        Read::Present(None),
        Vec::new(),
    )
}

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
fn only_a_pod_known_not_to_run_is_replaced() {
    for phase in ["Pending", "Succeeded", "Failed"] {
        let (pod, pvc) = objects(Some(phase));
        let p = plan(
            &config(EMPTY_DIR),
            &world_of(&config(EMPTY_DIR), &[pod], &[pvc], &pvc_template("100Gi")),
            None,
        );
        assert_eq!(
            steps(&p),
            [
                (Pod, DeletePod, Reason::LegacyDiffers),
                (Pvc, DeletePvc, Reason::LegacyDiffers)
            ],
            "{phase}"
        );
        assert!(!p.blocked());
    }
    for phase in [
        Some("Unknown"),
        None,
        Some("Runnin"),
        Some("Running\u{1b}[2J"),
    ] {
        let (pod, pvc) = objects(phase);
        let p = plan(
            &config(EMPTY_DIR),
            &world_of(&config(EMPTY_DIR), &[pod], &[pvc], &pvc_template("100Gi")),
            None,
        );
        assert_eq!(
            steps(&p),
            [
                (Pod, Wait, Reason::PodPhaseUncertain),
                (Pvc, Keep, Reason::PodPresent)
            ],
            "{phase:?}"
        );
        assert!(p.blocked(), "an uncertain Pod is reported: {phase:?}");
        let msg = &p.shards[0].objects[0].message;
        assert!(msg.contains("kept until it is known"), "{msg}");
    }
}

#[test]
fn a_pod_already_being_deleted_is_not_deleted_again() {
    let (mut pod, pvc) = objects(Some("Pending"));
    pod["metadata"]["deletionTimestamp"] = json!("2026-12-01T00:00:00Z");
    let p = plan(
        &config(EMPTY_DIR),
        &world_of(
            &config(EMPTY_DIR),
            std::slice::from_ref(&pod),
            std::slice::from_ref(&pvc),
            &pvc_template("100Gi"),
        ),
        None,
    );
    assert_eq!(
        steps(&p),
        [
            (Pod, Wait, Reason::PodTerminating),
            (Pvc, Keep, Reason::PodPresent)
        ]
    );
    assert!(!p.blocked(), "a Pod going away is no failure");
    // Nor when its PVC is being deleted too; an uncertain one waits there as well.
    let mut going = pvc;
    going["metadata"]["deletionTimestamp"] = json!("2026-12-01T00:00:00Z");
    let inherit = config("clusters:\n- name: example\n  namespace: vitess\n");
    let p = plan(
        &inherit,
        &world_of(&inherit, &[pod], &[going.clone()], &pvc_template("100Gi")),
        None,
    );
    assert_eq!(steps(&p)[0], (Pod, Wait, Reason::PodTerminating));
    let (unknown, _) = objects(Some("Unknown"));
    let p = plan(
        &inherit,
        &world_of(
            &inherit,
            &[unknown],
            &[going.clone()],
            &pvc_template("100Gi"),
        ),
        None,
    );
    assert_eq!(steps(&p)[0], (Pod, Wait, Reason::PodPhaseUncertain));
    let (pending, _) = objects(Some("Pending"));
    let p = plan(
        &inherit,
        &world_of(&inherit, &[pending], &[going], &pvc_template("100Gi")),
        None,
    );
    assert_eq!(steps(&p)[0], (Pod, DeletePod, Reason::PvcBeingReplaced));
}

#[test]
fn an_invalid_wanted_template_deletes_nothing() {
    // The first pool's template, as the cluster (or a dump) has it.
    for bad in [
        json!({}),
        json!({"resources": {"requests": {"storage": "abc"}}}),
        json!({"storageClass": "x", "resources": {"requests": {"storage": "1Gi"}}}),
    ] {
        let (pod, pvc) = objects(Some("Pending"));
        let p = plan(
            &config("clusters:\n- name: example\n  namespace: vitess\n"),
            &world_of(
                &config("clusters:\n- name: example\n  namespace: vitess\n"),
                &[pod],
                &[pvc],
                &bad,
            ),
            None,
        );
        assert_eq!(
            steps(&p),
            [
                (Pod, Wait, Reason::TemplateInvalid),
                (Pvc, Wait, Reason::TemplateInvalid)
            ],
            "{bad}"
        );
        assert!(p.blocked());
        assert_eq!(p.shards[0].desired, None);
    }
    // A config built around the loader: its template is checked as scratch storage.
    let mut c = config(
        "clusters:\n- name: example\n  namespace: vitess\n  vtbackup: {dataVolumeClaimTemplate: {resources: {requests: {storage: 1Gi}}}}\n",
    );
    let sourced = json!({"resources": {"requests": {"storage": "100Gi"}},
        "dataSource": {"kind": "VolumeSnapshot", "name": "s", "apiGroup": "snapshot.storage.k8s.io"}});
    c.clusters[0]
        .vtbackup
        .as_mut()
        .unwrap()
        .data_volume_claim_template = Some(sourced.clone());
    let (pod, pvc) = objects(Some("Pending"));
    let p = plan(
        &c,
        &world_of(
            &c,
            std::slice::from_ref(&pod),
            std::slice::from_ref(&pvc),
            &pvc_template("100Gi"),
        ),
        None,
    );
    assert_eq!(steps(&p)[0], (Pod, Wait, Reason::TemplateInvalid));
    assert!(
        p.shards[0].objects[0].message.contains("dataSource"),
        "{p:#?}"
    );
    // The same data source in a pool's template is the operator's business.
    let p = plan(
        &config("clusters:\n- name: example\n  namespace: vitess\n"),
        &world_of(
            &config("clusters:\n- name: example\n  namespace: vitess\n"),
            &[pod],
            &[pvc],
            &sourced,
        ),
        None,
    );
    assert_ne!(steps(&p)[0].1, Wait, "{p:#?}");
}

#[test]
fn a_tablet_pvc_with_backup_labels_is_never_planned() {
    let s = operator_shard();
    let tablet = s.tablet("replica", 1);
    // A tablet's PVC carrying a scheduled backup's labels: not a vtbackup object at all.
    let mut sched_like = tablet.pvc(&pvc_template("100Gi"));
    sched_like["metadata"]["uid"] = json!("uid-t");
    sched_like["metadata"]["labels"]["backup.planetscale.com/type"] = json!("update");
    sched_like["metadata"]["labels"]["planetscale.com/backup-schedule"] = json!("daily");
    let w = world_of(
        &config(EMPTY_DIR),
        &[],
        &[sched_like],
        &pvc_template("100Gi"),
    );
    assert!(plan(&config(EMPTY_DIR), &w, None).shards.is_empty());
    // One carrying the initial backup's labels: its shard waits, reported.
    let mut init_like = tablet.pvc(&pvc_template("100Gi"));
    init_like["metadata"]["uid"] = json!("uid-t");
    for (k, v) in [
        ("backup.planetscale.com/type", "init"),
        ("planetscale.com/component", "vtbackup"),
    ] {
        init_like["metadata"]["labels"][k] = json!(v);
    }
    let (pod, pvc) = objects(Some("Pending"));
    let p = plan(
        &config(EMPTY_DIR),
        &world_of(
            &config(EMPTY_DIR),
            &[pod],
            &[pvc, init_like],
            &pvc_template("100Gi"),
        ),
        None,
    );
    assert_eq!(
        steps(&p),
        [
            (Pod, Wait, Reason::PvcUnreadable),
            (Pvc, Wait, Reason::PvcUnreadable)
        ],
        "{p:#?}"
    );
    let msg = &p.shards[0].objects[0].message;
    assert!(msg.contains("tablet label"), "{msg}");
}
