//! `vtsnap-vtbackup-storage run` against a busy API server (docs/design.md §3.8): under a
//! 429 storm that clears it replaces the initial backup's Pod and PVC as on a quiet
//! server; under one that does not clear it deletes nothing.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::{Value, json};
use vtsnap_core::config::Config;
use vtsnap_core::retry::RetryPolicy;
use vtsnap_testkit::fake_kube::{FakeKube, storm_every_other, storm_without_end};
use vtsnap_testkit::operator_objects::{operator_shard, pvc_template};
use vtsnap_vtbackup_storage::act::{Options, run};

/// The programs' bounds, with waits of milliseconds (`Retry-After` is capped by them).
const FAST: RetryPolicy = RetryPolicy {
    max_wait: Duration::from_millis(5),
    first_wait: Duration::from_millis(1),
    ..RetryPolicy::DEFAULT
};

fn config() -> Config {
    Config::from_yaml(
        "clusters:\n- name: example\n  namespace: vitess\n  vtbackup: {useEmptyDirForInitialBackup: true}\n",
    )
    .unwrap()
}

fn vitess_cluster() -> Value {
    json!({"apiVersion": "planetscale.com/v2", "kind": "VitessCluster",
        "metadata": {"name": "example", "namespace": "vitess", "uid": "vc-1"},
        "spec": {"keyspaces": [{"name": "commerce", "partitionings": [{"equal": {"parts": 1, "shardTemplate": {
            "tabletPools": [{"cell": "zone1", "type": "replica", "replicas": 3, "dataVolumeClaimTemplate": pvc_template("100Gi")}]}}}]}]}})
}

/// The initial backup's Pod, Pending, and its PVC: the empty-dir policy replaces both.
fn world() -> FakeKube {
    let kube = FakeKube::new();
    kube.put_json("planetscale.com", "vitessclusters", vitess_cluster());
    kube.put_json(
        "storage.k8s.io",
        "storageclasses",
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "provisioner": "x",
               "metadata": {"name": "standard", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}}),
    );
    let s = operator_shard();
    let mut pod = s.vtbackup_init_pod();
    pod["status"] = json!({"phase": "Pending"});
    kube.put_json("", "pods", pod);
    let mut pvc = s.vtbackup_init_pvc(&pvc_template("100Gi"));
    pvc["spec"]["storageClassName"] = json!("standard");
    pvc["spec"]["volumeMode"] = json!("Filesystem");
    pvc["status"] = json!({"phase": "Pending"});
    kube.put_json("", "persistentvolumeclaims", pvc);
    kube
}

fn opts() -> Options {
    Options {
        dry_run: false,
        only_cluster: None,
        pod_gone_timeout: Duration::from_secs(5),
    }
}

fn has(kube: &FakeKube, plural: &str) -> bool {
    let name = operator_shard().vtbackup_init_name();
    kube.get_json("", plural, "vitess", &name).is_some()
}

#[tokio::test]
async fn a_storm_that_clears_replaces_pod_and_pvc() {
    let kube = world();
    kube.fault(storm_every_other(1));
    let client = kube.client_with_retries("vtbackup-storage", FAST);
    let r = run(&config(), &opts(), client).await;
    assert_eq!(r.exit_code, 0, "{r:?}");
    assert_eq!(r.run.done.len(), 2, "{r:?}");
    assert!(!has(&kube, "pods") && !has(&kube, "persistentvolumeclaims"));
    assert!(kube.log().iter().filter(|l| l.status == 429).count() >= 3);
}

#[tokio::test]
async fn a_storm_that_does_not_clear_deletes_nothing() {
    let kube = world();
    kube.fault(storm_without_end(1));
    let client = kube.client_with_retries("vtbackup-storage", FAST);
    let r = run(&config(), &opts(), client).await;
    assert!(r.run.done.is_empty(), "{r:?}");
    assert!(has(&kube, "pods") && has(&kube, "persistentvolumeclaims"));
    assert!(kube.writes().is_empty(), "{:?}", kube.writes());
    // Every read had its whole bound of tries, no more.
    let throttled = kube.log().iter().filter(|l| l.status == 429).count();
    assert_eq!(throttled % FAST.tries as usize, 0, "{throttled}");
}

/// Both LISTs of a namespace failing leave no shard to hang the errors on: the run is
/// still incomplete (exit 1), not an empty success.
#[tokio::test]
async fn a_storm_that_does_not_clear_fails_the_run() {
    let kube = world();
    kube.fault(storm_without_end(1));
    let client = kube.client_with_retries("vtbackup-storage", FAST);
    let r = run(&config(), &opts(), client).await;
    assert_eq!(r.exit_code, 1, "{r:?}");
}
