//! The whole story on a real cluster (`make e2e`: kind, TopoLVM thin snapshots,
//! vitess-operator, MySQL 8, vtsnap's images and chart; kind/up.sh): a cold snapshot of
//! each shard, an online one under write load, a new replica restored from a snapshot on
//! scale-up (pinned to the snapshot's node, caught up, CHECKSUM TABLE equal to the
//! primary's), the job killed mid-fence (the node helper puts the tablet back within lease
//! duration + slack), GC retention, and the initial vtbackup on an emptyDir with the
//! tablets' PVCs left alone.
//!
//! These need kubelet, TopoLVM and real Vitess: each is `#[ignore]`d with that reason, so
//! elsewhere (such as the local control plane of the real-API tier, where no Pod ever runs)
//! they count as ignored, never as passed. `make e2e` runs them with `--ignored` and
//! `VTSNAP_E2E_KIND=1`; run without that variable, each fails saying so. Every program
//! runs in the cluster, started the way an SRE starts it: a Job from its CronJob.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, ListParams, LogParams, PostParams};
use serde_json::{Value, json};
use vtsnap_core::fence::{ANN_NODE_STATE, ANN_TABLET_ALIAS, lease_name};
use vtsnap_core::restored::ANN_RESTORED_FROM;
use vtsnap_core::shard::LABEL_SHARD;
use vtsnap_core::snapshot::{
    ANN_GTID_EXECUTED, ANN_GTID_LOWER_BOUND, ANN_SOURCE_NODE, GROUP, LABEL_MODE, LABEL_PHASE,
};
use vtsnap_testkit::real_kube::{RealKube, resource};

/// Where vitess-operator runs the cluster, and where the chart runs vtsnap.
const CLUSTER_NS: &str = "example";
const VTSNAP_NS: &str = "vtsnap";
const VITESS_IMAGE: &str = "vitess/lite:v24.0.0-mysql80";
const LIMIT: Duration = Duration::from_secs(900);

/// The initial backups' Pods kind/up.sh kept while they ran, by name.
fn kept_init_pods() -> std::collections::BTreeMap<String, Value> {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../target/kind/vtbackup-init-pods"
    );
    let Ok(entries) = std::fs::read_dir(dir) else {
        return std::collections::BTreeMap::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .map(|e| {
            let v: Value = serde_json::from_slice(&std::fs::read(e.path()).unwrap()).unwrap();
            (v["metadata"]["name"].as_str().unwrap().to_owned(), v)
        })
        .collect()
}

/// The cluster of `make e2e`; anywhere else the test fails saying why (a skip is no pass).
async fn kind_cluster() -> RealKube {
    assert_eq!(
        std::env::var("VTSNAP_E2E_KIND").as_deref(),
        Ok("1"),
        "needs the kind cluster of `make e2e` (kubelet, TopoLVM, real Vitess; VTSNAP_E2E_KIND=1)"
    );
    RealKube::from_env().await
}

fn snapshots() -> kube::core::ApiResource {
    resource(GROUP, "v1", "VolumeSnapshot", "volumesnapshots")
}

fn unique(prefix: &str) -> String {
    let t = k8s_openapi::jiff::Timestamp::now().as_millisecond();
    format!("{prefix}-{}", t % 100_000_000)
}

/// The CronJob of the snapshot of a shard (the chart's name for release `vtsnap`).
fn snapshot_cronjob(shard_safe: &str) -> String {
    format!("vtsnap-snap-example-commerce-{shard_safe}")
}

/// A Job from a CronJob's template (`kubectl create job --from=cronjob/…`), with extra
/// arguments for its container; returns the Job's name.
async fn start_from_cronjob(kube: &RealKube, cronjob: &str, extra_args: &[&str]) -> String {
    // Made by the schedule reconciler (every minute in the harness's values).
    let cj = kube
        .wait_for(
            &resource("batch", "v1", "CronJob", "cronjobs"),
            VTSNAP_NS,
            cronjob,
            "made by the schedule reconciler (is the chart installed?)",
            Duration::from_secs(180),
            |_| true,
        )
        .await;
    let mut spec = cj["spec"]["jobTemplate"]["spec"].clone();
    if let Some(args) = spec
        .pointer_mut("/template/spec/containers/0/args")
        .and_then(Value::as_array_mut)
    {
        args.extend(extra_args.iter().map(|a| json!(a)));
    }
    let name = unique(cronjob.trim_start_matches("vtsnap-"));
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": VTSNAP_NS, "labels": {"vtsnap.io/e2e": "true"}},
        "spec": spec,
    }))
    .unwrap();
    Api::<Job>::namespaced(kube.client(), VTSNAP_NS)
        .create(&PostParams::default(), &job)
        .await
        .unwrap();
    name
}

/// Waits for a Job to end; `true` when it completed. Prints its Pod's log either way.
async fn wait_job(kube: &RealKube, namespace: &str, name: &str) -> bool {
    let jobs = Api::<Job>::namespaced(kube.client(), namespace);
    let deadline = Instant::now() + LIMIT;
    loop {
        let j = jobs.get(name).await.unwrap();
        let conditions = j
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        let ended = conditions
            .iter()
            .find(|c| c.status == "True" && (c.type_ == "Complete" || c.type_ == "Failed"));
        if let Some(c) = ended {
            eprintln!(
                "job {namespace}/{name}: {}\n{}",
                c.type_,
                job_log(kube, namespace, name).await
            );
            return c.type_ == "Complete";
        }
        assert!(
            Instant::now() < deadline,
            "job {namespace}/{name} did not end"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

async fn job_log(kube: &RealKube, namespace: &str, job: &str) -> String {
    let pods = Api::<Pod>::namespaced(kube.client(), namespace);
    let list = pods
        .list(&ListParams::default().labels(&format!("job-name={job}")))
        .await
        .unwrap();
    let mut out = String::new();
    for p in list.items {
        let name = p.metadata.name.unwrap_or_default();
        out += &pods
            .logs(&name, &LogParams::default())
            .await
            .unwrap_or_default();
    }
    out
}

/// `vtctldclient <args>` in the cluster (a Job with the Vitess image); its output.
async fn vtctldclient(kube: &RealKube, args: &[&str]) -> String {
    let services = kube
        .list(&resource("", "v1", "Service", "services"), CLUSTER_NS)
        .await;
    let vtctld = services
        .iter()
        .find(|s| s["metadata"]["labels"]["planetscale.com/component"] == "vtctld")
        .and_then(|s| s["metadata"]["name"].as_str())
        .expect("the vtctld Service")
        .to_owned();
    let name = unique("vtctldclient");
    let mut command = vec![
        "vtctldclient".to_owned(),
        "--server".to_owned(),
        format!("{vtctld}:15999"),
    ];
    command.extend(args.iter().map(|a| (*a).to_owned()));
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": CLUSTER_NS, "labels": {"vtsnap.io/e2e": "true"}},
        "spec": {"backoffLimit": 0, "ttlSecondsAfterFinished": 600, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "vtctldclient", "image": VITESS_IMAGE, "command": command}]}}},
    }))
    .unwrap();
    Api::<Job>::namespaced(kube.client(), CLUSTER_NS)
        .create(&PostParams::default(), &job)
        .await
        .unwrap();
    assert!(
        wait_job(kube, CLUSTER_NS, &name).await,
        "vtctldclient {args:?} failed"
    );
    job_log(kube, CLUSTER_NS, &name).await
}

/// vtsnap's VolumeSnapshots of a shard, newest first.
async fn shard_snapshots(kube: &RealKube, shard_safe: &str) -> Vec<Value> {
    let mut v: Vec<Value> = kube
        .list(&snapshots(), CLUSTER_NS)
        .await
        .into_iter()
        .filter(|s| s["metadata"]["labels"][LABEL_SHARD] == shard_safe)
        .collect();
    v.sort_by(|a, b| {
        b["metadata"]["creationTimestamp"]
            .as_str()
            .cmp(&a["metadata"]["creationTimestamp"].as_str())
    });
    v
}

fn annotation<'a>(v: &'a Value, k: &str) -> &'a str {
    v["metadata"]["annotations"][k].as_str().unwrap_or("")
}

async fn cold_snapshot(kube: &RealKube, shard_safe: &str) -> Value {
    let job = start_from_cronjob(kube, &snapshot_cronjob(shard_safe), &["--mode", "cold"]).await;
    assert!(
        wait_job(kube, VTSNAP_NS, &job).await,
        "the cold snapshot job of {shard_safe} failed"
    );
    let newest = shard_snapshots(kube, shard_safe).await.remove(0);
    assert_eq!(
        newest["metadata"]["labels"][LABEL_PHASE], "ready",
        "{newest}"
    );
    assert!(
        !annotation(&newest, ANN_GTID_EXECUTED).is_empty(),
        "{newest}"
    );
    newest
}

#[tokio::test]
#[ignore = "needs Docker and the internet: make e2e"]
async fn kind_a_cold_snapshot_of_each_shard() {
    let kube = kind_cluster().await;
    for shard in ["x-80", "80-x"] {
        let s = cold_snapshot(&kube, shard).await;
        assert_eq!(s["metadata"]["labels"][LABEL_MODE], "cold");
        assert_eq!(s["status"]["readyToUse"], true, "{s}");
    }
}

#[tokio::test]
#[ignore = "needs Docker and the internet: make e2e"]
async fn kind_an_online_snapshot_under_write_load() {
    let kube = kind_cluster().await;
    let manifest = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../kind/manifests/write-load.yaml"
    ))
    .unwrap();
    let load: Value = manifest
        .split("\n---\n")
        .filter_map(|d| serde_yaml_ng::from_str::<Value>(d).ok())
        .find(|d| d["kind"] == "Job")
        .unwrap();
    let jobs = Api::<Job>::namespaced(kube.client(), CLUSTER_NS);
    let _ = jobs
        .delete("vtsnap-e2e-write-load", &DeleteParams::background())
        .await;
    kube.wait_gone(
        &resource("batch", "v1", "Job", "jobs"),
        CLUSTER_NS,
        "vtsnap-e2e-write-load",
        LIMIT,
    )
    .await;
    kube.create(load).await;
    let job = start_from_cronjob(&kube, &snapshot_cronjob("x-80"), &["--mode", "online"]).await;
    let done = wait_job(&kube, VTSNAP_NS, &job).await;
    jobs.delete("vtsnap-e2e-write-load", &DeleteParams::background())
        .await
        .unwrap();
    assert!(done, "the online snapshot job failed");
    let s = shard_snapshots(&kube, "x-80").await.remove(0);
    assert_eq!(s["metadata"]["labels"][LABEL_MODE], "online", "{s}");
    assert!(!annotation(&s, ANN_GTID_LOWER_BOUND).is_empty(), "{s}");
}

/// The shard -80's tablet Pods.
async fn shard_tablets(kube: &RealKube) -> Vec<Pod> {
    Api::<Pod>::namespaced(kube.client(), CLUSTER_NS)
        .list(&ListParams::default().labels(
            "planetscale.com/component=vttablet,planetscale.com/keyspace=commerce,planetscale.com/shard=x-80",
        ))
        .await
        .unwrap()
        .items
}

fn all_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .is_some_and(|c| !c.is_empty() && c.iter().all(|c| c.ready))
}

async fn set_replicas(kube: &RealKube, n: i64) {
    let api = Api::<kube::api::DynamicObject>::namespaced_with(
        kube.client(),
        CLUSTER_NS,
        &resource("planetscale.com", "v2", "VitessCluster", "vitessclusters"),
    );
    let mut vc = serde_json::to_value(api.get("example").await.unwrap()).unwrap();
    vc["spec"]["keyspaces"][0]["partitionings"][0]["equal"]["shardTemplate"]["tabletPools"][0]["replicas"] =
        json!(n);
    let obj = serde_json::from_value(vc).unwrap();
    api.replace("example", &PostParams::default(), &obj)
        .await
        .unwrap();
}

fn checksum_of(out: &str) -> String {
    // vtctldclient prints the result as JSON; the checksum is the row's last value.
    let v: Value = serde_json::from_str(out.trim()).unwrap_or(Value::Null);
    v.pointer("/rows/0/values")
        .or_else(|| v.pointer("/rows/0"))
        .map(Value::to_string)
        .unwrap_or_else(|| out.trim().to_owned())
}

#[tokio::test]
#[ignore = "needs Docker and the internet: make e2e"]
async fn kind_a_new_replica_starts_from_the_newest_snapshot_and_catches_up() {
    let kube = kind_cluster().await;
    let snap = cold_snapshot(&kube, "x-80").await;
    let snap_name = snap["metadata"]["name"].as_str().unwrap().to_owned();
    let source_node = annotation(&snap, ANN_SOURCE_NODE).to_owned();
    let before: Vec<String> = shard_tablets(&kube)
        .await
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    set_replicas(&kube, 4).await;

    // The new tablet: its PVC restored from the snapshot, its Pod on the snapshot's node
    // (TopoLVM restores only there), ready once vtsnap-restore and mysqld are done.
    let deadline = Instant::now() + LIMIT;
    let new = loop {
        let new = shard_tablets(&kube)
            .await
            .into_iter()
            .find(|p| !before.contains(p.metadata.name.as_ref().unwrap()));
        if let Some(p) = new.filter(all_ready) {
            break p;
        }
        assert!(
            Instant::now() < deadline,
            "the fourth tablet never became ready"
        );
        tokio::time::sleep(Duration::from_secs(5)).await;
    };
    let name = new.metadata.name.clone().unwrap();
    let pvc = Api::<PersistentVolumeClaim>::namespaced(kube.client(), CLUSTER_NS)
        .get(&name)
        .await
        .unwrap();
    let pvc_v = serde_json::to_value(&pvc).unwrap();
    assert_eq!(annotation(&pvc_v, ANN_RESTORED_FROM), snap_name, "{pvc_v}");
    assert_eq!(pvc_v["spec"]["dataSourceRef"]["name"], snap_name, "{pvc_v}");
    assert_eq!(
        new.spec.as_ref().unwrap().node_name.as_deref(),
        Some(source_node.as_str()),
        "pinned to the snapshot's node"
    );

    // Caught up: the same checksum as the primary's, once writes stop (none run here).
    let uid = new.metadata.labels.as_ref().unwrap()["planetscale.com/tablet-uid"].clone();
    let alias = format!("zone1-{:0>10}", uid);
    let shard: Value = serde_json::from_str(
        vtctldclient(&kube, &["GetShard", "commerce/-80"])
            .await
            .trim(),
    )
    .unwrap();
    let p = &shard["shard"]["primary_alias"];
    let primary = format!("{}-{:0>10}", p["cell"].as_str().unwrap(), p["uid"]);
    let sql = "CHECKSUM TABLE vt_commerce.load_rows";
    let deadline = Instant::now() + LIMIT;
    loop {
        let want = checksum_of(&vtctldclient(&kube, &["ExecuteFetchAsDBA", &primary, sql]).await);
        let got = checksum_of(&vtctldclient(&kube, &["ExecuteFetchAsDBA", &alias, sql]).await);
        if want == got {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{alias} never caught up: {got} vs {want}"
        );
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    set_replicas(&kube, 3).await;
}

#[tokio::test]
#[ignore = "needs Docker and the internet: make e2e"]
async fn kind_the_job_killed_mid_fence_is_undone_by_the_node_helper() {
    let kube = kind_cluster().await;
    let job = start_from_cronjob(&kube, &snapshot_cronjob("80-x"), &["--mode", "cold"]).await;
    let lease = lease_name("example", "commerce", "80-x");
    let leases = resource("coordination.k8s.io", "v1", "Lease", "leases");
    // Fenced: mysqld stopped or held by the node helper.
    let held = kube
        .wait_for(&leases, CLUSTER_NS, &lease, "mysqld held", LIMIT, |v| {
            matches!(annotation(v, ANN_NODE_STATE), "stopped" | "held")
        })
        .await;
    let alias = annotation(&held, ANN_TABLET_ALIAS).to_owned();
    // SIGKILL the job: its Pod goes at once, the lease is never renewed or deleted.
    let pods = Api::<Pod>::namespaced(kube.client(), VTSNAP_NS);
    for p in pods
        .list(&ListParams::default().labels(&format!("job-name={job}")))
        .await
        .unwrap()
        .items
    {
        pods.delete(
            &p.metadata.name.unwrap(),
            &DeleteParams::default().grace_period(0),
        )
        .await
        .unwrap();
    }
    Api::<Job>::namespaced(kube.client(), VTSNAP_NS)
        .delete(&job, &DeleteParams::background())
        .await
        .unwrap();
    let killed = Instant::now();
    // The lease (30 s) expires; the node helper puts the tablet back and deletes it.
    kube.wait_gone(&leases, CLUSTER_NS, &lease, Duration::from_secs(90))
        .await;
    assert!(
        killed.elapsed() < Duration::from_secs(30 + 30),
        "released after {:?}: more than lease duration + 30 s of slack",
        killed.elapsed()
    );
    let tablet: Value =
        serde_json::from_str(vtctldclient(&kube, &["GetTablet", &alias]).await.trim()).unwrap();
    assert_eq!(tablet["type"], json!(2), "back to REPLICA: {tablet}");
}

#[tokio::test]
#[ignore = "needs Docker and the internet: make e2e"]
async fn kind_gc_keeps_max_count_snapshots() {
    let kube = kind_cluster().await;
    while shard_snapshots(&kube, "x-80").await.len() < 4 {
        cold_snapshot(&kube, "x-80").await;
    }
    let job = start_from_cronjob(&kube, "vtsnap-gc", &[]).await;
    assert!(wait_job(&kube, VTSNAP_NS, &job).await, "the GC job failed");
    let deadline = Instant::now() + LIMIT;
    while shard_snapshots(&kube, "x-80").await.len() > 3 {
        assert!(
            Instant::now() < deadline,
            "retention maxCount 3 was not applied"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

#[tokio::test]
#[ignore = "needs Docker and the internet: make e2e"]
async fn kind_the_initial_backup_ran_on_an_empty_dir_and_tablet_pvcs_are_untouched() {
    let kube = kind_cluster().await;
    let pods = Api::<Pod>::namespaced(kube.client(), CLUSTER_NS);
    let live = pods
        .list(
            &ListParams::default()
                .labels("planetscale.com/component=vtbackup,backup.planetscale.com/type=init"),
        )
        .await
        .unwrap()
        .items;
    // The operator deletes each once its backup is complete: kind/up.sh kept them as seen.
    let mut vtbackup: std::collections::BTreeMap<String, Value> = kept_init_pods();
    for p in live {
        let v = serde_json::to_value(&p).unwrap();
        vtbackup.insert(p.metadata.name.unwrap_or_default(), v);
    }
    // A loop over none would prove nothing: the shards had no backup, so one ran.
    assert!(
        !vtbackup.is_empty(),
        "no initial vtbackup Pod in {CLUSTER_NS}, live or kept by kind/up.sh: nothing to check"
    );
    for (name, v) in &vtbackup {
        let data = v["spec"]["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|vol| vol["name"] == "persistent-volume-claim")
            .cloned()
            .unwrap_or(Value::Null);
        assert!(
            data["emptyDir"].is_object(),
            "the data volume of initial backup {name}: {data}"
        );
    }
    // The tablets' PVCs: on TopoLVM, none of the vtbackup annotations.
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(kube.client(), CLUSTER_NS)
        .list(&ListParams::default().labels("planetscale.com/component=vttablet"))
        .await
        .unwrap()
        .items;
    assert!(pvcs.len() >= 6, "{} tablet PVCs", pvcs.len());
    for c in &pvcs {
        let v = serde_json::to_value(c).unwrap();
        assert_eq!(v["spec"]["storageClassName"], "topolvm-thin", "{v}");
        assert!(
            annotation(&v, vtsnap_core::vtbackup::ANN_TEMPLATE_HASH).is_empty(),
            "a tablet PVC was treated as vtbackup's: {v}"
        );
    }
}
