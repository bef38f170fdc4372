//! A real kubelet runs Pods (the local cluster's `NODE=1`: containerd, runc, the CNI
//! bridge): a Pod is bound by the scheduler and Running, its container has a cgroup under
//! the freezer hierarchy's `kubepods`, the API server serves a container's log from
//! kubelet, and deleting the Pod removes its cgroup. A PVC of vtsnap's btrfs CSI driver
//! (registered with kubelet by itself) is mounted into a Pod by kubelet, and that Pod
//! reaches the API server through the "kubernetes" Service (kube-proxy). Without a kubelet-run Node (the
//! default `cluster.sh up`, whose Node is hand-made) it fails: `scripts/test-real.sh` runs
//! it only on the cluster with a node.
//!
//! Images are never pulled: the sandbox image and `localhost/vtsnap-debian:bookworm` are
//! imported into the node by `cluster.sh up` (imagePullPolicy: Never).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, LogParams};
use serde_json::{Value, json};
use vtsnap_testkit::real_kube::{
    BTRFS_CLASS, RealKube, container_freezer_cgroup, pod_running, resource,
};

const PAUSE_IMAGE: &str = "localhost/vtsnap-pause:1";
const SHELL_IMAGE: &str = "localhost/vtsnap-debian:bookworm";

fn pods() -> kube::core::ApiResource {
    resource("", "v1", "Pod", "pods")
}

fn pod(namespace: &str, name: &str, image: &str, command: Option<Vec<&str>>) -> Value {
    let mut container = json!({"name": "main", "image": image, "imagePullPolicy": "Never"});
    if let Some(c) = command {
        container["command"] = json!(c);
    }
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": [container], "terminationGracePeriodSeconds": 5},
    })
}

async fn wait_path_gone(path: &Path, limit: Duration) {
    let start = Instant::now();
    while path.exists() {
        assert!(
            start.elapsed() < limit,
            "{} still exists {limit:?} after the pod was deleted",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_runs_on_the_real_kubelet_in_its_own_cgroup_and_serves_its_log() {
    let kube = RealKube::from_env().await;
    // Never skipped: scripts/test-real.sh runs it on the cluster with a node, and leaves it
    // out (--skip) of the node-less phase.
    let (node, _) = kube
        .kubelet_node()
        .await
        .expect("no Node is run by a kubelet: start the local cluster with NODE=1 for this test");
    let ns = kube.namespace("kubelet").await;
    let api: Api<Pod> = Api::namespaced(kube.client(), &ns.name);

    // The sandbox image alone as the container: bound by the scheduler, run by kubelet.
    kube.create(pod(&ns.name, "pause", PAUSE_IMAGE, None)).await;
    let limit = Duration::from_secs(120);
    let pause = kube
        .wait_for(&pods(), &ns.name, "pause", "Running", limit, pod_running)
        .await;
    assert_eq!(
        pause["spec"]["nodeName"],
        json!(node),
        "bound to the kubelet's Node"
    );
    assert!(
        pause
            .pointer("/status/podIP")
            .and_then(Value::as_str)
            .is_some_and(|ip| !ip.is_empty()),
        "the pod has an IP from the CNI bridge: {}",
        pause["status"]
    );
    let cgroup = container_freezer_cgroup(&pause, "main");
    assert!(cgroup.is_dir(), "no cgroup {}", cgroup.display());

    // A container that writes to stdout: its log comes from kubelet through the API server.
    let word = format!("hello-from-{}", ns.name);
    // (a shell as PID 1 ignores SIGTERM unless it traps it: deleting would take the grace period)
    let script = format!("echo {word}; trap 'exit 0' TERM; sleep 3600 & wait");
    kube.create(pod(
        &ns.name,
        "echo",
        SHELL_IMAGE,
        Some(vec!["/bin/sh", "-c", &script]),
    ))
    .await;
    kube.wait_for(&pods(), &ns.name, "echo", "Running", limit, pod_running)
        .await;
    let start = Instant::now();
    loop {
        let log = api
            .logs("echo", &LogParams::default())
            .await
            .unwrap_or_else(|e| panic!("log of pod echo (the API server asks kubelet): {e}"));
        if log.lines().any(|l| l == word) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "log of pod echo: {log:?}, no {word}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // Deleted: kubelet stops the container and removes its pod's cgroup.
    api.delete("pause", &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("delete pod pause: {e}"));
    kube.wait_gone(&pods(), &ns.name, "pause", limit).await;
    wait_path_gone(&cgroup, Duration::from_secs(60)).await;
    let pod_cgroup = cgroup.parent().unwrap().to_path_buf();
    wait_path_gone(&pod_cgroup, Duration::from_secs(60)).await;

    api.delete("echo", &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("delete pod echo: {e}"));
    kube.wait_gone(&pods(), &ns.name, "echo", limit).await;
}

/// Mount points (from this process's mount table) whose path ends with `suffix`.
fn mounts_ending_with(suffix: &str) -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .expect("read /proc/self/mountinfo")
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|m| m.ends_with(suffix))
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelet_mounts_a_btrfs_csi_volume_and_the_pod_reaches_the_api_through_its_service() {
    let kube = RealKube::from_env().await;
    kube.kubelet_node()
        .await
        .expect("no Node is run by a kubelet: start the local cluster with NODE=1 for this test");
    let ns = kube.namespace("kubelet-csi").await;
    let limit = Duration::from_secs(120);
    kube.create(json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": ns.name},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": BTRFS_CLASS,
                 "resources": {"requests": {"storage": "64Mi"}}},
    }))
    .await;
    let pv = kube.wait_pvc_bound(&ns.name, "data", limit).await;
    let subvolume = kube.volume_dir(&pv).await;

    // The pod writes into its volume, then opens a TCP connection to the API server at the
    // address kubelet gave it (the "kubernetes" Service's ClusterIP).
    let word = format!("written-by-{}", ns.name);
    let script = format!(
        "echo {word} > /data/hello && \
         if exec 3<>/dev/tcp/$KUBERNETES_SERVICE_HOST/$KUBERNETES_SERVICE_PORT; \
         then echo api-reachable; else echo api-unreachable; fi; \
         trap 'exit 0' TERM; sleep 3600 & wait"
    );
    let mut p = pod(
        &ns.name,
        "writer",
        SHELL_IMAGE,
        Some(vec!["/bin/bash", "-c", &script]),
    );
    p["spec"]["containers"][0]["volumeMounts"] = json!([{"name": "data", "mountPath": "/data"}]);
    p["spec"]["volumes"] =
        json!([{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]);
    kube.create(p).await;
    let writer = kube
        .wait_for(&pods(), &ns.name, "writer", "Running", limit, pod_running)
        .await;
    let uid = writer["metadata"]["uid"].as_str().unwrap().to_owned();
    let target = format!("/pods/{uid}/volumes/kubernetes.io~csi/{pv}/mount");
    assert_eq!(
        mounts_ending_with(&target).len(),
        1,
        "kubelet's NodePublishVolume target {target} is not mounted once"
    );

    let api: Api<Pod> = Api::namespaced(kube.client(), &ns.name);
    let start = Instant::now();
    let log = loop {
        let log = api
            .logs("writer", &LogParams::default())
            .await
            .unwrap_or_else(|e| panic!("log of pod writer: {e}"));
        if log.contains("api-") {
            break log;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "pod writer logged {log:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(
        log.trim(),
        "api-reachable",
        "the pod could not connect to the kubernetes Service"
    );
    assert_eq!(
        std::fs::read_to_string(subvolume.join("hello")).unwrap_or_default(),
        format!("{word}\n"),
        "the pod's write is not in the PV's subvolume {}",
        subvolume.display()
    );

    api.delete("writer", &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("delete pod writer: {e}"));
    kube.wait_gone(&pods(), &ns.name, "writer", limit).await;
    // kubelet's NodeUnpublishVolume removed the bind mount; the data stays in the volume
    assert!(
        mounts_ending_with(&target).is_empty(),
        "{target} is still mounted after the pod is gone"
    );
    assert!(subvolume.join("hello").is_file());
}
