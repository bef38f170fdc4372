//! The kind harness's own manifests (kind/), checked here where kind cannot run: each
//! object the scripts apply is accepted by the real API server (server-side dry run, with
//! the CRDs the local control plane has), the chart renders with the harness's values into
//! objects the API server accepts, and the files agree with each other (class names, the
//! per-worker lvmd sockets and mounts, the fields vitess-operator v2.17.0's CRD requires).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};
use vtsnap_testkit::real_kube::{RealKube, plural_of, resource};

fn kind_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kind")
}

fn yaml_docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    text.split("\n---")
        .filter_map(|d| serde_yaml_ng::from_str::<Value>(d).ok())
        .filter(|v| !v.is_null())
        .collect()
}

fn one(path: &str) -> Value {
    yaml_docs(&kind_dir().join(path)).remove(0)
}

/// A server-side dry-run create: the API server validates and admits it, stores nothing.
async fn dry_run_create(kube: &RealKube, mut v: Value, namespace: Option<&str>) {
    if let Some(ns) = namespace {
        v["metadata"]["namespace"] = json!(ns);
    }
    let api_version = v["apiVersion"].as_str().unwrap().to_owned();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
    let kind = v["kind"].as_str().unwrap().to_owned();
    let ar = resource(group, version, &kind, &plural_of(&kind));
    let api: Api<DynamicObject> = match v["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(kube.client(), ns, &ar),
        None => Api::all_with(kube.client(), &ar),
    };
    let obj: DynamicObject = serde_json::from_value(v.clone()).unwrap();
    api.create(
        &PostParams {
            dry_run: true,
            ..PostParams::default()
        },
        &obj,
    )
    .await
    .unwrap_or_else(|e| {
        panic!(
            "the API server refused {kind} {}: {e}",
            v["metadata"]["name"]
        )
    });
}

#[tokio::test]
async fn the_harness_objects_are_accepted_by_the_api_server() {
    let kube = RealKube::from_env().await;
    let ns = kube.namespace("kind-manifests").await;
    dry_run_create(&kube, one("manifests/volumesnapshotclass.yaml"), None).await;
    dry_run_create(&kube, one("manifests/vitesscluster.yaml"), Some(&ns.name)).await;
    for doc in yaml_docs(&kind_dir().join("manifests/write-load.yaml")) {
        dry_run_create(&kube, doc, Some(&ns.name)).await;
    }
}

#[tokio::test]
async fn the_chart_with_the_harness_values_renders_objects_the_api_server_accepts() {
    let kube = RealKube::from_env().await;
    let cluster_ns = kube.namespace("kind-example").await;
    let vtsnap_ns = kube.namespace("kind-vtsnap").await;
    let helm = std::env::var_os("VTSNAP_TEST_HELM")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tools/helm"));
    let out = Command::new(helm)
        .args(["template", "vtsnap"])
        .arg(kind_dir().join("../charts/vtsnap"))
        .args(["-n", &vtsnap_ns.name, "-f"])
        .arg(kind_dir().join("manifests/vtsnap-values.yaml"))
        .arg("--set")
        .arg(format!("config.clusters[0].namespace={}", cluster_ns.name))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rendered = String::from_utf8(out.stdout).unwrap();
    let mut kinds = Vec::new();
    for doc in rendered.split("\n---") {
        let v: Value = match serde_yaml_ng::from_str(doc) {
            Ok(v) if !Value::is_null(&v) => v,
            _ => continue,
        };
        kinds.push(v["kind"].as_str().unwrap().to_owned());
        dry_run_create(&kube, v, None).await;
    }
    // The GC's, vtbackup-storage's and the schedule reconciler's: the snapshot CronJobs
    // are the reconciler's to make, in the cluster.
    assert!(
        kinds.iter().filter(|k| *k == "CronJob").count() >= 3,
        "{kinds:?}"
    );
    assert!(
        rendered.contains("-snapshot-schedule") && rendered.contains("\"schedule\"\n"),
        "the reconciler and its template are rendered"
    );
}

#[test]
fn the_harness_files_agree_with_each_other() {
    // The StorageClass TopoLVM makes is the tablets' class; the snapshot class is vtsnap's.
    let topolvm = one("topolvm-values.yaml");
    let class = topolvm["storageClasses"][0]["name"].as_str().unwrap();
    assert_eq!(
        topolvm["storageClasses"][0]["storageClass"]["additionalParameters"]["topolvm.io/device-class"],
        "thin",
        "snapshots need the thin class"
    );
    let vc = one("manifests/vitesscluster.yaml");
    let shard_template = &vc["spec"]["keyspaces"][0]["partitionings"][0]["equal"]["shardTemplate"];
    let pool = &shard_template["tabletPools"][0];
    assert_eq!(pool["dataVolumeClaimTemplate"]["storageClassName"], class);
    let vsc = one("manifests/volumesnapshotclass.yaml");
    assert_eq!(vsc["driver"], "topolvm.io");
    let values = one("manifests/vtsnap-values.yaml");
    let cluster = &values["config"]["clusters"][0];
    assert_eq!(
        cluster["snapshot"]["volumeSnapshotClassName"],
        vsc["metadata"]["name"]
    );
    assert_eq!(
        cluster["restore"]["nodeLocal"], true,
        "TopoLVM restores on the source's node only"
    );
    assert_eq!(cluster["namespace"], vc["metadata"]["namespace"]);
    assert_eq!(cluster["name"], vc["metadata"]["name"]);
    // The config the chart renders is one vtsnap accepts.
    let config = serde_yaml_ng::to_string(&values["config"]).unwrap();
    vtsnap_core::config::Config::from_yaml(&config).unwrap();

    // What vitess-operator v2.17.0's CRD requires (deploy/crds/planetscale.com_vitessclusters.yaml).
    assert!(vc["spec"]["cells"][0]["name"].is_string());
    assert!(vc["spec"]["keyspaces"][0]["name"].is_string());
    assert!(shard_template["databaseInitScriptSecret"]["key"].is_string());
    for k in ["cell", "type", "replicas"] {
        assert!(!pool[k].is_null(), "tabletPools[0].{k}");
    }
    assert!(pool["vttablet"]["resources"].is_object());
    assert!(pool["mysqld"]["resources"].is_object());
    assert!(
        vc["spec"]["backup"]["locations"][0].is_object(),
        "vtbackup runs only with a location"
    );
    // The restore init container is the README's snippet.
    let init = &pool["initContainers"][0];
    assert_eq!(init["name"], "vtsnap-restore");
    assert_eq!(
        init["env"][0]["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.labels['planetscale.com/tablet-uid']"
    );
    assert_eq!(init["volumeMounts"][0]["name"], "persistent-volume-claim");
    assert_eq!(init["volumeMounts"][0]["subPath"], "vtdataroot");
    assert_eq!(init["securityContext"]["runAsUser"], 999);

    // Worker N mounts lvmd N's socket directory, where lvmd N's config puts its socket.
    let kind = one("cluster.yaml");
    let lvmd = std::fs::read_to_string(kind_dir().join("lvmd.yaml.in")).unwrap();
    let socket_dir = |n: usize| {
        let cfg: Value = serde_yaml_ng::from_str(&lvmd.replace("@N@", &n.to_string())).unwrap();
        let path = cfg["socket-name"].as_str().unwrap().to_owned();
        assert_eq!(cfg["device-classes"][0]["type"], "thin");
        path.rsplit_once('/').unwrap().0.to_owned()
    };
    let workers: Vec<&Value> = kind["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["role"] == "worker")
        .collect();
    assert_eq!(workers.len(), 3);
    for (i, w) in workers.iter().enumerate() {
        let mounts = w["extraMounts"].as_array().unwrap();
        let lvmd_mount = mounts
            .iter()
            .find(|m| m["containerPath"] == "/tmp/topolvm")
            .unwrap();
        assert_eq!(lvmd_mount["hostPath"].as_str().unwrap(), socket_dir(i + 1));
        assert!(mounts.iter().any(|m| m["containerPath"] == "/dev"));
        assert!(mounts.iter().any(
            |m| m["containerPath"] == "/var/lib/kubelet" && m["propagation"] == "Bidirectional"
        ));
        // The backup location's hostPath is on every worker.
        let backups = vc["spec"]["backup"]["locations"][0]["volume"]["hostPath"]["path"].clone();
        assert!(mounts.iter().any(|m| m["containerPath"] == backups));
    }
    assert_eq!(
        topolvm["node"]["lvmdSocket"].as_str().unwrap(),
        "/tmp/topolvm/lvmd.sock"
    );
}
