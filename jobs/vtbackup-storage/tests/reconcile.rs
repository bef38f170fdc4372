//! `vtsnap-vtbackup-storage run` against the in-memory API (`FakeKube`, a fake: it stands
//! in for the API server where faults are injected): the transitions end to end, the
//! fresh read before a PVC goes, adoption, dry runs — and a property: no sequence of API
//! faults (5xx, dropped connections, conflicts, a Pod appearing or starting between the
//! reads and the writes) deletes a PVC while its Pod exists, or deletes a running Pod.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use proptest::prelude::*;
use serde_json::{Value, json};
use vtsnap_core::config::Config;
use vtsnap_core::vtbackup::{ANN_DATA_VOLUME_HASH, ANN_TEMPLATE_HASH};
use vtsnap_testkit::fake_kube::{FakeKube, Fault, Verb, is};
use vtsnap_testkit::operator_objects::{operator_shard, pvc_template};
use vtsnap_vtbackup_storage::act::{Options, Report, run};

fn config(vtbackup: &str) -> Config {
    let block = if vtbackup.is_empty() {
        String::new()
    } else {
        format!("  vtbackup: {vtbackup}\n")
    };
    Config::from_yaml(&format!(
        "clusters:\n- name: example\n  namespace: vitess\n{block}"
    ))
    .unwrap()
}

fn vitess_cluster() -> Value {
    json!({"apiVersion": "planetscale.com/v2", "kind": "VitessCluster",
        "metadata": {"name": "example", "namespace": "vitess", "uid": "vc-1"},
        "spec": {"keyspaces": [{"name": "commerce", "partitionings": [{"equal": {"parts": 1, "shardTemplate": {
            "tabletPools": [{"cell": "zone1", "type": "replica", "replicas": 3, "dataVolumeClaimTemplate": pvc_template("100Gi")}]}}}]}]}})
}

/// The initial backup made before vtsnap (no hashes): its Pod in `phase`, its PVC bound.
fn world(pod_phase: Option<&str>) -> FakeKube {
    let kube = FakeKube::new();
    kube.put_json("planetscale.com", "vitessclusters", vitess_cluster());
    kube.put_json(
        "storage.k8s.io",
        "storageclasses",
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "provisioner": "x",
               "metadata": {"name": "standard", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}}),
    );
    let s = operator_shard();
    if let Some(phase) = pod_phase {
        let mut pod = s.vtbackup_init_pod();
        pod["status"] = json!({"phase": phase});
        kube.put_json("", "pods", pod);
    }
    let mut pvc = s.vtbackup_init_pvc(&pvc_template("100Gi"));
    pvc["spec"]["storageClassName"] = json!("standard");
    pvc["spec"]["volumeMode"] = json!("Filesystem");
    pvc["status"] = json!({"phase": "Pending"});
    kube.put_json("", "persistentvolumeclaims", pvc);
    kube
}

fn opts(dry_run: bool) -> Options {
    Options {
        dry_run,
        only_cluster: None,
        pod_gone_timeout: Duration::from_millis(300),
    }
}

fn name() -> String {
    operator_shard().vtbackup_init_name()
}

fn has(kube: &FakeKube, plural: &str) -> bool {
    kube.get_json("", plural, "vitess", &name()).is_some()
}

fn actions(r: &Report) -> Vec<String> {
    r.run
        .plan
        .shards
        .iter()
        .flat_map(|s| &s.objects)
        .map(|o| format!("{:?} {:?}", o.kind, o.action))
        .collect()
}

#[tokio::test]
async fn pending_on_an_inherited_pvc_the_empty_dir_policy_replaces_pod_then_pvc() {
    let kube = world(Some("Pending"));
    let cfg = config("{useEmptyDirForInitialBackup: true}");
    let dry = run(&cfg, &opts(true), kube.client_as("vtbackup-storage")).await;
    assert_eq!(
        actions(&dry),
        ["Pod DeletePod", "PersistentVolumeClaim DeletePvc"],
        "{dry:?}"
    );
    assert!(
        has(&kube, "pods") && has(&kube, "persistentvolumeclaims"),
        "a dry run changed something"
    );
    let r = run(&cfg, &opts(false), kube.client_as("vtbackup-storage")).await;
    assert_eq!(r.exit_code, 0, "{r:?}");
    assert_eq!(r.run.done.len(), 2, "{r:?}");
    assert!(!has(&kube, "pods") && !has(&kube, "persistentvolumeclaims"));
    // The PVC went only after a read of the Pod answered 404.
    let log = kube.log();
    let gone = log
        .iter()
        .position(|l| l.info.verb == Verb::Get && l.info.plural == "pods" && l.status == 404)
        .unwrap();
    let deleted = log
        .iter()
        .position(|l| l.info.verb == Verb::Delete && l.info.plural == "persistentvolumeclaims")
        .unwrap();
    assert!(gone < deleted, "{log:?}");
    assert_eq!(
        vtsnap_testkit::rbac::refused("vtbackup-storage", &kube.log()),
        Vec::<String>::new(),
        "requests its Role does not grant"
    );
}

#[tokio::test]
async fn an_uncertain_read_of_the_pod_keeps_the_pvc_until_a_later_run() {
    let kube = world(None);
    let cfg = config("{useEmptyDirForInitialBackup: true}");
    kube.fault(Fault::on(is(Verb::Get, "pods")).status(503));
    let r = run(&cfg, &opts(false), kube.client_as("vtbackup-storage")).await;
    assert_eq!(r.exit_code, 1, "{r:?}");
    assert!(
        has(&kube, "persistentvolumeclaims"),
        "a PVC was deleted on an uncertain read"
    );
    assert!(r.errors[0].cause.contains("cannot verify"), "{r:?}");
    let r = run(&cfg, &opts(false), kube.client_as("vtbackup-storage")).await;
    assert_eq!(r.exit_code, 0, "{r:?}");
    assert!(!has(&kube, "persistentvolumeclaims"));
}

#[tokio::test]
async fn a_pod_that_appears_before_the_pvc_goes_keeps_it() {
    let kube = world(None);
    let cfg = config("{useEmptyDirForInitialBackup: true}");
    // The operator recreates the Pod between the LIST and the PVC's deletion.
    let mut pod = operator_shard().vtbackup_init_pod();
    pod["status"] = json!({"phase": "Pending"});
    kube.fault(Fault::on(is(Verb::Get, "pods")).then_change(move |k| {
        k.put_json("", "pods", pod.clone());
    }));
    let r = run(&cfg, &opts(false), kube.client_as("vtbackup-storage")).await;
    assert_eq!(r.exit_code, 1, "{r:?}");
    assert!(
        has(&kube, "persistentvolumeclaims") && has(&kube, "pods"),
        "{r:?}"
    );
    assert!(r.errors[0].cause.contains("still there"), "{r:?}");
}

#[tokio::test]
async fn matching_legacy_objects_are_adopted_and_then_left_alone() {
    let kube = world(Some("Succeeded"));
    let r = run(
        &config(""),
        &opts(false),
        kube.client_as("vtbackup-storage"),
    )
    .await;
    assert_eq!(r.exit_code, 0, "{r:?}");
    assert_eq!(
        actions(&r),
        ["Pod Adopt", "PersistentVolumeClaim Adopt"],
        "{r:?}"
    );
    let pod = kube.get_json("", "pods", "vitess", &name()).unwrap();
    let pvc = kube
        .get_json("", "persistentvolumeclaims", "vitess", &name())
        .unwrap();
    assert!(pod["metadata"]["annotations"][ANN_DATA_VOLUME_HASH].is_string());
    assert_eq!(
        pod["metadata"]["annotations"][ANN_TEMPLATE_HASH],
        pvc["metadata"]["annotations"][ANN_TEMPLATE_HASH]
    );
    let again = run(
        &config(""),
        &opts(false),
        kube.client_as("vtbackup-storage"),
    )
    .await;
    assert_eq!(
        actions(&again),
        ["Pod Keep", "PersistentVolumeClaim Keep"],
        "{again:?}"
    );
    assert!(again.run.done.is_empty());
    assert_eq!(
        vtsnap_testkit::rbac::refused("vtbackup-storage", &kube.log()),
        Vec::<String>::new(),
        "requests its Role does not grant"
    );
}

#[tokio::test]
async fn a_failed_loop_guard_write_deletes_nothing() {
    // The PVC is kept (its template is unchanged) but the Pod's volume changes: the guard
    // goes on the PVC first, and without it the Pod stays.
    let kube = world(Some("Pending"));
    let cfg = Config::from_yaml("clusters:\n- name: example\n  namespace: vitess\n").unwrap();
    let mut cluster = vitess_cluster();
    cluster["spec"]["keyspaces"][0]["partitionings"][0]["equal"]["shardTemplate"]["tabletPools"]
        [0]["extraVolumes"] =
        json!([{"name": "persistent-volume-claim", "hostPath": {"path": "/scratch"}}]);
    kube.put_json("planetscale.com", "vitessclusters", cluster);
    kube.fault(Fault::on(is(Verb::Patch, "persistentvolumeclaims")).status(409));
    let r = run(&cfg, &opts(false), kube.client_as("vtbackup-storage")).await;
    assert_eq!(r.exit_code, 1, "{r:?}");
    assert!(has(&kube, "pods"), "deleted without the loop guard: {r:?}");
    assert_eq!(
        vtsnap_testkit::rbac::refused("vtbackup-storage", &kube.log()),
        Vec::<String>::new(),
        "requests its Role does not grant"
    );
}

// ---- the property -------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Fault1 {
    Status(Verb, &'static str, u16, u32),
    Drop(Verb, &'static str, u32),
    /// Before the n-th request of this verb and plural, the Pod appears (Pending) or, if
    /// it is there, starts running.
    PodChanges(Verb, &'static str, u32),
}

fn arb_read() -> impl Strategy<Value = (Verb, &'static str)> {
    prop_oneof![
        Just((Verb::List, "pods")),
        Just((Verb::List, "persistentvolumeclaims")),
        Just((Verb::Get, "pods")),
        Just((Verb::Get, "vitessclusters")),
        Just((Verb::List, "storageclasses")),
    ]
}

fn arb_write() -> impl Strategy<Value = (Verb, &'static str)> {
    prop_oneof![
        Just((Verb::Delete, "pods")),
        Just((Verb::Delete, "persistentvolumeclaims")),
        Just((Verb::Patch, "pods")),
        Just((Verb::Patch, "persistentvolumeclaims")),
    ]
}

fn arb_call() -> impl Strategy<Value = (Verb, &'static str)> {
    prop_oneof![arb_read(), arb_write()]
}

/// Faults on any call — a 404 only on writes: a read answering 404 for an object that
/// exists would be a lying API server, which nothing can defend against (a GET is a quorum
/// read) — and the Pod changing (someone else's write) only before reads: a write landing
/// between a read and a delete is what the preconditions and the pvc-protection finalizer
/// are for.
fn arb_fault() -> impl Strategy<Value = Fault1> {
    prop_oneof![
        (
            arb_call(),
            prop_oneof![Just(500u16), Just(503), Just(409)],
            1u32..3
        )
            .prop_map(|((v, p), code, nth)| Fault1::Status(v, p, code, nth)),
        (arb_write(), 1u32..3).prop_map(|((v, p), nth)| Fault1::Status(v, p, 404, nth)),
        (arb_call(), 1u32..3).prop_map(|((v, p), nth)| Fault1::Drop(v, p, nth)),
        (arb_read(), 1u32..3).prop_map(|((v, p), nth)| Fault1::PodChanges(v, p, nth)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn no_fault_sequence_deletes_a_pvc_under_its_pod_or_a_running_pod(
        pod in prop_oneof![Just(None), Just(Some("Pending")), Just(Some("Running")), Just(Some("Failed"))],
        policy in prop_oneof![Just(""), Just("{useEmptyDirForInitialBackup: true}"),
            Just("{dataVolumeClaimTemplate: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 5Gi}}}}")],
        faults in proptest::collection::vec(arb_fault(), 0..4),
        runs in 1usize..3,
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let kube = world(pod);
            for f in &faults {
                let rule = match f.clone() {
                    Fault1::Status(v, p, code, nth) => Fault::on(is(v, p)).nth(nth).status(code),
                    Fault1::Drop(v, p, nth) => Fault::on(is(v, p)).nth(nth).drop_connection(),
                    Fault1::PodChanges(v, p, nth) => Fault::on(is(v, p)).nth(nth).then_change(|k| {
                        let n = operator_shard().vtbackup_init_name();
                        let mut pod = k.get_json("", "pods", "vitess", &n).unwrap_or_else(|| operator_shard().vtbackup_init_pod());
                        let next = if pod["status"]["phase"] == "Pending" { "Running" } else { "Pending" };
                        pod["status"] = json!({"phase": next});
                        k.remove("", "pods", "vitess", &n);
                        k.put_json("", "pods", pod);
                    }),
                };
                kube.fault(rule);
            }
            // The world at the moment of each delete, matched afterwards with whether the
            // delete went through (a fault or its precondition may refuse it).
            type Seen = std::sync::Arc<std::sync::Mutex<Vec<Option<String>>>>;
            let (pvc_seen, pod_seen): (Seen, Seen) = Default::default();
            let s = pvc_seen.clone();
            kube.observe(is(Verb::Delete, "persistentvolumeclaims"), move |_, k| {
                let p = k.get_json("", "pods", "vitess", &operator_shard().vtbackup_init_name());
                s.lock().unwrap().push(p.map(|p| format!("PVC deleted while its Pod exists ({})", p["status"]["phase"])));
            });
            let s = pod_seen.clone();
            kube.observe(is(Verb::Delete, "pods"), move |_, k| {
                let p = k.get_json("", "pods", "vitess", &operator_shard().vtbackup_init_name());
                s.lock().unwrap().push(p.filter(|p| p["status"]["phase"] == "Running").map(|_| "a running Pod deleted".to_owned()));
            });
            for _ in 0..runs {
                let _ = run(&config(policy), &opts(false), kube.client()).await;
            }
            let log = kube.log();
            let mut violations = Vec::new();
            for (seen, plural) in [(&pvc_seen, "persistentvolumeclaims"), (&pod_seen, "pods")] {
                let done = log
                    .iter()
                    .filter(|l| l.info.verb == Verb::Delete && l.info.plural == plural)
                    .map(|l| (200..300).contains(&l.status));
                for (v, ok) in seen.lock().unwrap().iter().zip(done) {
                    if let (Some(v), true) = (v, ok) {
                        violations.push(v.clone());
                    }
                }
            }
            prop_assert!(violations.is_empty(), "{violations:?} with {faults:?}");
            Ok(())
        })?;
    }
}

#[test]
fn the_observers_see_a_violation_when_there_is_one() {
    // The property's own check, shown to fire: a PVC deleted by hand under its Pod.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let kube = world(Some("Running"));
        let seen: std::sync::Arc<std::sync::Mutex<Vec<String>>> = Default::default();
        let s = seen.clone();
        kube.observe(is(Verb::Delete, "persistentvolumeclaims"), move |_, k| {
            if k.get_json("", "pods", "vitess", &operator_shard().vtbackup_init_name())
                .is_some()
            {
                s.lock()
                    .unwrap()
                    .push("PVC deleted while its Pod exists".into());
            }
        });
        let api: kube::Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> =
            kube::Api::namespaced(kube.client(), "vitess");
        api.delete(&name(), &Default::default()).await.unwrap();
        assert_eq!(seen.lock().unwrap().len(), 1);
        assert!(
            kube.log()
                .iter()
                .any(|l| l.info.verb == Verb::Delete && l.status == 200)
        );
    });
}

#[tokio::test]
async fn a_pod_that_starts_between_the_read_and_the_delete_is_not_deleted() {
    // What the property found without the resourceVersion precondition: the Pod read as
    // Pending starts before the delete.
    let kube = world(Some("Pending"));
    kube.fault(Fault::on(is(Verb::Get, "vitessclusters")).then_change(|k| {
        let n = operator_shard().vtbackup_init_name();
        let mut pod = k.get_json("", "pods", "vitess", &n).unwrap();
        pod["status"] = json!({"phase": "Running"});
        k.remove("", "pods", "vitess", &n);
        k.put_json("", "pods", pod);
    }));
    let r = run(
        &config("{useEmptyDirForInitialBackup: true}"),
        &opts(false),
        kube.client(),
    )
    .await;
    assert_eq!(r.exit_code, 1, "{r:?}");
    assert!(
        has(&kube, "pods") && has(&kube, "persistentvolumeclaims"),
        "{r:?}"
    );
    assert!(
        r.errors[0].cause.contains("409") || r.errors[0].cause.to_lowercase().contains("conflict"),
        "{r:?}"
    );
}
