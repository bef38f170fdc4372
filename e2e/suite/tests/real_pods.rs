//! vtsnap as its users run it: the chart installed by the real helm, every program a Pod
//! started by the real kubelet from vtsnap's own images (imported into the node's
//! containerd, never pulled), with the chart's ServiceAccounts, RBAC and securityContexts.
//!
//! - The snapshot CronJob fires on its schedule (the real CronJob and Job controllers) and
//!   its Job's Pod takes an online snapshot through the real CSI stack; the node helper's
//!   DaemonSet Pod answers its probe from the tablet volume kubelet mounted.
//! - The API server calls the webhook through its Service (kube-proxy); a new tablet's PVC
//!   is restored from that snapshot and kubelet runs `vtsnap-restore` from its image as the
//!   Pod's init container on the mounted clone.
//! - No program fell back from a watch to polling; each ran as its ServiceAccount, as the
//!   user its securityContext names (read from the host's /proc); the Events are readable.
//!
//! FAKES (docs/design.md §7): vtctld (served by the test on the node's address), and the
//! tablet Pods' `vttablet` and `mysqld` containers (sleepers with the operator's names,
//! labels, volumes and mounts). Runs only on the cluster with a node (`NODE=1`).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{ListParams, LogParams};
use serde_json::{Value, json};
use vtsnap_core::naming::TabletUid;
use vtsnap_testkit::fake_vtctld::FakeVtctld;
use vtsnap_testkit::fixtures::shard;
use vtsnap_testkit::helm::Release;
use vtsnap_testkit::layout::TabletLayout;
use vtsnap_testkit::operator_objects::{
    OperatorShard, OperatorTablet, operator_shard, pvc_template,
};
use vtsnap_testkit::real_kube::{BTRFS_CLASS, RealKube, resource, snapshot_ready};

const SHELL_IMAGE: &str = "localhost/vtsnap-debian:bookworm";
const RELEASE: &str = "p";
const FULL: &str = "p-vtsnap";
/// A cron line that never fires (February 31st).
const NEVER: &str = "0 0 31 2 *";
const LIMIT: Duration = Duration::from_secs(120);
/// The chart's non-root user (images/vtsnap/Containerfile, values' securityContext).
const NON_ROOT: u32 = 65532;
/// What a program logs when a watch is refused and it polls instead (core/src/wake.rs),
/// and when a cache's or the lease watch fails.
const FALLBACK_LOGS: &[&str] = &[
    "polling instead",
    "watch failed",
    "watch of the fence leases failed",
];

fn pods() -> kube::core::ApiResource {
    resource("", "v1", "Pod", "pods")
}

fn snapshots() -> kube::core::ApiResource {
    resource(
        "snapshot.storage.k8s.io",
        "v1",
        "VolumeSnapshot",
        "volumesnapshots",
    )
}

/// The kubelet-run Node and its InternalIP.
async fn kubelet_node(kube: &RealKube) -> (String, IpAddr) {
    let api: Api<Node> = Api::all(kube.client());
    let node = api
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|n| {
            n.status
                .as_ref()
                .and_then(|s| s.node_info.as_ref())
                .is_some_and(|i| !i.kubelet_version.is_empty())
        })
        .expect("no Node is run by a kubelet: start the local cluster with NODE=1 for this test");
    let ip = node
        .status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .and_then(|a| a.iter().find(|a| a.type_ == "InternalIP"))
        .map(|a| a.address.parse().unwrap())
        .expect("the Node has no InternalIP");
    (node.metadata.name.unwrap(), ip)
}

/// kubelet's root directory: the local cluster keeps it beside its kubeconfig.
fn kubelet_dir(kube: &RealKube) -> PathBuf {
    let dir = kube.kubeconfig().parent().unwrap().join("node/kubelet");
    assert!(
        dir.join("pods").is_dir(),
        "no kubelet pods directory in {}",
        dir.display()
    );
    dir
}

/// Running with every container ready; panics at once when kubelet cannot start one.
fn ready(v: &Value) -> bool {
    for list in ["initContainerStatuses", "containerStatuses"] {
        for s in v["status"][list].as_array().into_iter().flatten() {
            if let Some(reason) = s.pointer("/state/waiting/reason").and_then(Value::as_str) {
                assert!(
                    !matches!(
                        reason,
                        "ErrImageNeverPull"
                            | "CreateContainerError"
                            | "CrashLoopBackOff"
                            | "CreateContainerConfigError"
                    ),
                    "pod {}: container {} waiting: {reason}: {}",
                    v["metadata"]["name"],
                    s["name"],
                    s.pointer("/state/waiting/message")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                );
            }
        }
    }
    v.pointer("/status/phase").and_then(Value::as_str) == Some("Running")
        && v["status"]["containerStatuses"]
            .as_array()
            .is_some_and(|cs| !cs.is_empty() && cs.iter().all(|c| c["ready"] == json!(true)))
}

/// Waits until the Pods selected by `selector` are `want` many and all satisfy `cond`.
async fn wait_pods(
    kube: &RealKube,
    ns: &str,
    selector: &str,
    want: usize,
    what: &str,
    cond: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    let start = Instant::now();
    loop {
        let api: Api<kube::api::DynamicObject> = Api::namespaced_with(kube.client(), ns, &pods());
        let list: Vec<Value> = api
            .list(&ListParams::default().labels(selector))
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|o| serde_json::to_value(o).unwrap())
            .collect();
        if list.len() == want && list.iter().all(&cond) {
            return list;
        }
        assert!(
            start.elapsed() < LIMIT,
            "{what}: pods {selector} in {ns} not there within {LIMIT:?}: {}",
            serde_json::to_string_pretty(&list.iter().map(|p| &p["status"]).collect::<Vec<_>>())
                .unwrap()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn pod_log(kube: &RealKube, ns: &str, name: &str) -> String {
    let api: Api<Pod> = Api::namespaced(kube.client(), ns);
    api.logs(name, &LogParams::default())
        .await
        .unwrap_or_else(|e| panic!("log of pod {ns}/{name} (the API server asks kubelet): {e}"))
}

/// The uid the container's first process runs as, read on the host: the container's
/// cgroup (kubepods/<qos>/pod<uid>/<container id>) lists its processes.
fn container_process_uid(pod: &Value, container: &str) -> u32 {
    let uid = pod["metadata"]["uid"].as_str().unwrap();
    let status = pod["status"]["containerStatuses"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == container)
        .unwrap();
    let id = status["containerID"].as_str().unwrap();
    let id = id.split_once("://").map_or(id, |(_, id)| id);
    let qos = match pod["status"]["qosClass"].as_str() {
        Some("Guaranteed") => String::new(),
        Some(q) => format!("{}/", q.to_ascii_lowercase()),
        None => panic!("pod without qosClass"),
    };
    let procs = format!("/sys/fs/cgroup/freezer/kubepods/{qos}pod{uid}/{id}/cgroup.procs");
    let text = std::fs::read_to_string(&procs).unwrap_or_else(|e| panic!("{procs}: {e}"));
    let pid = text
        .lines()
        .next()
        .unwrap_or_else(|| panic!("{procs} is empty"));
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A cron line that fires once, at the first minute boundary at least 40 s from now (UTC).
fn once_soon() -> String {
    let t = k8s_openapi::jiff::Timestamp::now() + Duration::from_secs(100);
    let t = t.to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC);
    // the boundary at the start of t's minute is between 40 and 100 s away
    format!("{} {} {} {} *", t.minute(), t.hour(), t.day(), t.month())
}

/// The chart's securityContext for every program but the node helper, as the API server
/// stored it.
fn assert_restricted(pod: &Value, container: &str) {
    let name = &pod["metadata"]["name"];
    let c = pod["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == container)
        .unwrap();
    let sc = &c["securityContext"];
    assert_eq!(sc["readOnlyRootFilesystem"], json!(true), "{name}: {sc}");
    assert_eq!(sc["allowPrivilegeEscalation"], json!(false), "{name}: {sc}");
    let pod_sc = &pod["spec"]["securityContext"];
    assert_eq!(pod_sc["runAsNonRoot"], json!(true), "{name}: {pod_sc}");
}

fn assert_no_fallback(what: &str, log: &str) {
    for l in log.lines() {
        assert!(
            !FALLBACK_LOGS.iter().any(|f| l.contains(f)),
            "{what} fell back from a watch: {l}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chart_runs_as_pods_snapshots_on_schedule_and_a_new_tablet_restores() {
    let kube = RealKube::from_env().await;
    let (node, node_ip) = kubelet_node(&kube).await;
    let kubelet = kubelet_dir(&kube);
    let vitess = kube.namespace("pods-vitess").await;
    let system = kube.namespace("pods-system").await;

    // vtctld (FAKE) knows the shard: tablet 1 primary, 2 and 3 replicas, on the node's
    // address so that Pods reach it.
    let fixture = shard().replicas(3).primary(1);
    let vtctld = FakeVtctld::new();
    fixture.install_vtctld(&vtctld);
    let vt = vtctld.serve_on(node_ip).await;

    // The tablets as vitess-operator makes them: each PVC bound by the real provisioner and
    // holding its tablet's files, each Pod run by kubelet with the volume mounted.
    let operator = OperatorShard {
        namespace: vitess.name.clone(),
        ..operator_shard()
    };
    let mut template = pvc_template("64Mi");
    template["storageClassName"] = json!(BTRFS_CLASS);
    let tablets: Vec<OperatorTablet> = (1..=3).map(|i| operator.tablet("replica", i)).collect();
    for (n, t) in tablets.iter().enumerate() {
        assert_eq!(
            t.alias,
            fixture.alias(n + 1),
            "the fixture and the operator agree"
        );
        kube.create(t.pvc(&template)).await;
        let pv = kube.wait_pvc_bound(&vitess.name, &t.name, LIMIT).await;
        let dir = kube.volume_dir(&pv).await.join("vtdataroot");
        std::fs::create_dir_all(&dir).unwrap();
        TabletLayout::mariadb(t.alias.uid.get())
            .write(&dir)
            .unwrap();
        kube.create(t.runnable_pod(SHELL_IMAGE)).await;
    }
    for t in &tablets {
        let p = kube
            .wait_for(&pods(), &vitess.name, &t.name, "Ready", LIMIT, ready)
            .await;
        assert_eq!(p["spec"]["nodeName"], json!(node));
    }

    // helm install: the real images, the snapshot CronJob due at the next minute.
    let schedule = once_soon();
    let node_state = kube
        .kubeconfig()
        .parent()
        .unwrap()
        .join("node/vtsnap-node-state");
    let values = json!({
        "image": {"registry": "localhost", "repository": "vtsnap", "tag": "0.1.0", "pullPolicy": "Never"},
        "config": {"clusters": [{"name": "example", "namespace": vitess.name, "vtctld": vt.endpoint(),
            "snapshot": {"mode": "online", "volumeSnapshotClassName": BTRFS_CLASS,
                         "cutTimeout": "60s", "readyTimeout": "60s", "maxHold": "60s"},
            "restore": {"enabled": true, "nodeLocal": true}}]},
        "snapshot": {"timeZone": "UTC", "activeDeadlineSeconds": 300,
                     "shards": [{"cluster": "example", "keyspace": "commerce", "shard": "-", "schedule": schedule}]},
        "gc": {"schedule": NEVER},
        "vtbackupStorage": {"schedule": NEVER},
        "node": {"kubeletDir": kubelet.display().to_string(), "stateDir": node_state.display().to_string()},
        "admission": {"replicas": 1, "refresh": "2s", "podDisruptionBudget": {"enabled": false}},
    });
    let _release = Release::install(RELEASE, &system.name, &values, kube.kubeconfig());

    // The long-running programs: Ready, as their ServiceAccounts and users.
    let node_pod = wait_pods(
        &kube,
        &system.name,
        "app.kubernetes.io/component=node",
        1,
        "node helper",
        ready,
    )
    .await
    .remove(0);
    let webhook = wait_pods(
        &kube,
        &system.name,
        "app.kubernetes.io/component=admission",
        1,
        "webhook",
        ready,
    )
    .await
    .remove(0);
    assert_eq!(
        node_pod["spec"]["serviceAccountName"],
        json!(format!("{FULL}-node"))
    );
    assert_eq!(node_pod["spec"]["hostPID"], json!(true));
    assert_eq!(
        container_process_uid(&node_pod, "node"),
        0,
        "the node helper runs as root"
    );
    assert_eq!(
        webhook["spec"]["serviceAccountName"],
        json!(format!("{FULL}-admission"))
    );
    assert_restricted(&webhook, "admission");
    assert_eq!(container_process_uid(&webhook, "admission"), NON_ROOT);

    // The CronJob fires (the real CronJob controller), its Job's Pod takes the snapshot.
    let job_pod = wait_pods(
        &kube,
        &system.name,
        "app.kubernetes.io/component=snapshot",
        1,
        "the snapshot CronJob's Job",
        |p| {
            let phase = p["status"]["phase"].as_str().unwrap_or("");
            assert_ne!(
                phase, "Failed",
                "the snapshot Job's Pod failed: {}",
                p["status"]
            );
            phase == "Succeeded"
        },
    )
    .await
    .remove(0);
    let job_name = job_pod["metadata"]["name"].as_str().unwrap().to_owned();
    let job_log = pod_log(&kube, &system.name, &job_name).await;
    assert_eq!(
        job_pod["spec"]["serviceAccountName"],
        json!(format!("{FULL}-snapshot"))
    );
    assert_restricted(&job_pod, "snapshot");
    let exit = &job_pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"];
    assert_eq!(exit, &json!(0), "{job_log}");
    assert!(
        job_pod["metadata"]["ownerReferences"][0]["kind"] == "Job",
        "{}",
        job_pod["metadata"]
    );
    // its last line is the run's JSON summary
    let summary: Value = job_log
        .lines()
        .rev()
        .find_map(|l| {
            serde_json::from_str::<Value>(l)
                .ok()
                .filter(|v| v.get("snapshot").is_some())
        })
        .unwrap_or_else(|| panic!("no summary line in the Job's log:\n{job_log}"));
    let snapshot = summary["snapshot"].as_str().unwrap().to_owned();
    let taken = kube
        .wait_for(
            &snapshots(),
            &vitess.name,
            &snapshot,
            "readyToUse",
            LIMIT,
            snapshot_ready,
        )
        .await;
    assert_eq!(
        taken["metadata"]["labels"]["vtsnap.io/mode"], "online",
        "{taken}"
    );

    // A new tablet: the API server calls the webhook through its Service; the PVC is
    // restored from the snapshot and kubelet runs vtsnap-restore from its image.
    let new_tablet = operator.tablet("replica", 4);
    let start = Instant::now();
    loop {
        let api: Api<kube::api::DynamicObject> = Api::namespaced_with(
            kube.client(),
            &vitess.name,
            &resource("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
        );
        let pvc: kube::api::DynamicObject =
            serde_json::from_value(new_tablet.pvc(&template)).unwrap();
        let p = api
            .create(
                &kube::api::PostParams {
                    dry_run: true,
                    field_manager: None,
                },
                &pvc,
            )
            .await
            .unwrap();
        if p.data["spec"]["dataSourceRef"]["name"] == json!(snapshot) {
            break;
        }
        assert!(
            start.elapsed() < LIMIT,
            "the webhook never offered {snapshot}: {}",
            p.data["spec"]
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let pvc = kube.create(new_tablet.pvc(&template)).await;
    assert_eq!(
        pvc["spec"]["dataSourceRef"]["name"],
        json!(snapshot),
        "{pvc}"
    );
    let pv = kube
        .wait_pvc_bound(&vitess.name, &new_tablet.name, LIMIT)
        .await;
    let stored = kube.create(new_tablet.runnable_pod(SHELL_IMAGE)).await;
    let inits: Vec<&str> = stored["spec"]["initContainers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        inits,
        ["init-vt-root", "init-mysql-socket", "vtsnap-restore"]
    );
    assert_eq!(
        stored["spec"]["initContainers"][2]["image"],
        json!("localhost/vtsnap/vtsnap-restore:0.1.0")
    );
    let restored = kube
        .wait_for(
            &pods(),
            &vitess.name,
            &new_tablet.name,
            "Ready",
            LIMIT,
            ready,
        )
        .await;
    let init = &restored["status"]["initContainerStatuses"][2];
    assert_eq!(init["name"], "vtsnap-restore");
    assert_eq!(init["state"]["terminated"]["exitCode"], json!(0), "{init}");
    let restore_log = {
        let api: Api<Pod> = Api::namespaced(kube.client(), &vitess.name);
        api.logs(
            &new_tablet.name,
            &LogParams {
                container: Some("vtsnap-restore".into()),
                ..LogParams::default()
            },
        )
        .await
        .unwrap()
    };
    // The clone is the new tablet's: its directory renamed, the source's gone.
    let root = kube.volume_dir(&pv).await.join("vtdataroot");
    let source_uid: TabletUid = taken["metadata"]["labels"]["vtsnap.io/tablet-uid"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        root.join(format!("vt_{}", new_tablet.alias.uid.padded()))
            .is_dir(),
        "no tablet directory of the new tablet in its volume; vtsnap-restore logged:\n{restore_log}"
    );
    assert!(!root.join(format!("vt_{}", source_uid.padded())).exists());

    // Nothing fell back from a watch to polling; the Events are on the server.
    assert_no_fallback("the snapshot Job", &job_log);
    assert_no_fallback(
        "the webhook",
        &pod_log(
            &kube,
            &system.name,
            webhook["metadata"]["name"].as_str().unwrap(),
        )
        .await,
    );
    assert_no_fallback(
        "the node helper",
        &pod_log(
            &kube,
            &system.name,
            node_pod["metadata"]["name"].as_str().unwrap(),
        )
        .await,
    );
    let events = kube
        .list(
            &resource("events.k8s.io", "v1", "Event", "events"),
            &vitess.name,
        )
        .await;
    let reasons: Vec<&str> = events
        .iter()
        .filter(|e| e["regarding"]["name"] == json!(snapshot))
        .filter_map(|e| e["reason"].as_str())
        .collect();
    for want in ["SnapshotCreated", "SnapshotCut", "SnapshotReady"] {
        assert!(
            reasons.contains(&want),
            "no {want} Event on {snapshot}: {reasons:?}"
        );
    }
}
