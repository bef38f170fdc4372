//! vtsnap-vtbackup-storage against the real kube-apiserver and controller manager: legacy
//! objects the API server defaulted (storage class, volumeMode) and the PV controller bound
//! are adopted; the emptyDir policy replaces the Pod, then the PVC once the Pod is verified
//! gone; a PVC someone deleted under its Pod, held by the real pvc-protection finalizer,
//! is freed by deleting the Pod (not running) that holds it.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::{Value, json};
use vtsnap_core::config::Config;
use vtsnap_core::vtbackup::{ANN_DATA_VOLUME_HASH, ANN_TEMPLATE_HASH};
use vtsnap_testkit::operator_objects::{OperatorShard, operator_shard, pvc_template};
use vtsnap_testkit::real_kube::{RealKube, TestNamespace, resource};
use vtsnap_vtbackup_storage::act::{Options, Report, run};

const LIMIT: Duration = Duration::from_secs(90);

fn pods() -> kube::core::ApiResource {
    resource("", "v1", "Pod", "pods")
}

fn pvcs() -> kube::core::ApiResource {
    resource("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims")
}

fn config(ns: &str, vtbackup: &str) -> Config {
    Config::from_yaml(&format!(
        "clusters:\n- name: example\n  namespace: {ns}\n  vtbackup: {vtbackup}\n"
    ))
    .unwrap()
}

fn opts() -> Options {
    Options {
        dry_run: false,
        only_cluster: None,
        pod_gone_timeout: Duration::from_secs(60),
    }
}

fn steps(r: &Report) -> Vec<String> {
    r.run
        .plan
        .shards
        .iter()
        .flat_map(|s| &s.objects)
        .map(|o| format!("{:?} {:?}", o.kind, o.action))
        .collect()
}

/// The VitessCluster, and the initial backup's Pod (Pending: there is no kubelet; bound to
/// the node when `bound`) and PVC, as the operator makes them without the webhook.
async fn legacy_backup(kube: &RealKube, ns: &TestNamespace, bound: bool) -> OperatorShard {
    let s = OperatorShard {
        namespace: ns.name.clone(),
        ..operator_shard()
    };
    // The pool's template names no class: the API server fills in the default one.
    kube.create(s.unsharded_vitess_cluster(&pvc_template("64Mi")))
        .await;
    kube.create(s.vtbackup_init_pvc(&pvc_template("64Mi")))
        .await;
    kube.wait_pvc_bound(&ns.name, &s.vtbackup_init_name(), LIMIT)
        .await;
    let mut pod = s.vtbackup_init_pod();
    if bound {
        pod["spec"]["nodeName"] = json!(kube.first_node().await);
    }
    kube.create(pod).await;
    s
}

/// What kubelet does for a Pod of its node being deleted (there is none here): it ends
/// its containers (none run) and removes the object, until the task is aborted.
fn kubelet_finishes_deletions(namespace: &str) -> tokio::task::JoinHandle<()> {
    let ns = namespace.to_owned();
    tokio::spawn(async move {
        let kube = RealKube::from_env().await;
        let api = kube::Api::<k8s_openapi::api::core::v1::Pod>::namespaced(kube.client(), &ns);
        loop {
            if let Ok(list) = api.list(&Default::default()).await {
                for p in list.items {
                    if p.metadata.deletion_timestamp.is_some()
                        && let Some(n) = p.metadata.name
                    {
                        let _ = api
                            .delete(
                                &n,
                                &kube::api::DeleteParams {
                                    grace_period_seconds: Some(0),
                                    ..Default::default()
                                },
                            )
                            .await;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

fn annotation<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v["metadata"]["annotations"][k].as_str()
}

#[tokio::test]
async fn defaulted_legacy_objects_are_adopted_then_the_empty_dir_policy_replaces_pod_and_pvc() {
    let kube = RealKube::from_env().await;
    let ns = kube.namespace("vtbackup").await;
    let s = legacy_backup(&kube, &ns, false).await;
    let name = s.vtbackup_init_name();
    let stored = kube.get(&pvcs(), &ns.name, &name).await.unwrap();
    assert!(
        stored["spec"]["storageClassName"].is_string(),
        "the API server filled in the class: {stored}"
    );
    assert_eq!(stored["spec"]["volumeMode"], "Filesystem");

    let r = run(&config(&ns.name, "{}"), &opts(), kube.client()).await;
    assert_eq!(r.exit_code, 0, "{r:?}");
    assert_eq!(
        steps(&r),
        ["Pod Adopt", "PersistentVolumeClaim Adopt"],
        "{r:?}"
    );
    let pod = kube.get(&pods(), &ns.name, &name).await.unwrap();
    let pvc = kube.get(&pvcs(), &ns.name, &name).await.unwrap();
    assert!(annotation(&pod, ANN_DATA_VOLUME_HASH).is_some(), "{pod}");
    assert_eq!(
        annotation(&pod, ANN_TEMPLATE_HASH),
        annotation(&pvc, ANN_TEMPLATE_HASH)
    );

    // useEmptyDirForInitialBackup: the Pod (Pending) goes, then the PVC.
    let r = run(
        &config(&ns.name, "{useEmptyDirForInitialBackup: true}"),
        &opts(),
        kube.client(),
    )
    .await;
    assert_eq!(r.exit_code, 0, "{r:?}");
    assert_eq!(
        steps(&r),
        ["Pod DeletePod", "PersistentVolumeClaim DeletePvc"],
        "{r:?}"
    );
    kube.wait_gone(&pods(), &ns.name, &name, LIMIT).await;
    kube.wait_gone(&pvcs(), &ns.name, &name, LIMIT).await;
}

#[tokio::test]
async fn a_pvc_held_by_the_protection_finalizer_is_freed_by_deleting_its_idle_pod() {
    let kube = RealKube::from_env().await;
    let ns = kube.namespace("vtbackup-held").await;
    // Bound to the node: the pvc-protection controller counts only scheduled Pods.
    let s = legacy_backup(&kube, &ns, true).await;
    let name = s.vtbackup_init_name();
    let api = kube::Api::<k8s_openapi::api::core::v1::PersistentVolumeClaim>::namespaced(
        kube.client(),
        &ns.name,
    );
    api.delete(&name, &Default::default()).await.unwrap();
    // The real pvc-protection controller keeps it while the Pod uses it.
    let held = kube
        .wait_for(&pvcs(), &ns.name, &name, "terminating", LIMIT, |v| {
            v.pointer("/metadata/deletionTimestamp").is_some()
        })
        .await;
    assert!(
        held["metadata"]["finalizers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "kubernetes.io/pvc-protection"),
        "{held}"
    );
    let kubelet = kubelet_finishes_deletions(&ns.name);
    let r = run(&config(&ns.name, "{}"), &opts(), kube.client()).await;
    assert_eq!(steps(&r)[0], "Pod DeletePod", "{r:?}");
    assert_eq!(
        r.run.plan.shards[0].objects[0].reason,
        vtsnap_vtbackup_storage::decide::Reason::PvcBeingReplaced
    );
    kube.wait_gone(&pods(), &ns.name, &name, LIMIT).await;
    kube.wait_gone(&pvcs(), &ns.name, &name, LIMIT).await;
    kubelet.abort();
}
