//! vtsnap-admission behind a real kube-apiserver: a MutatingWebhookConfiguration points the
//! API server at the webhook over TLS (a URL on 127.0.0.1, the CA in `caBundle`); the
//! objects the API server stores carry the patch. The snapshot it injects was cut by the
//! real CSI stack through `vtsnap-snapshot run`; the webhook's caches ride real watches;
//! its vtctld refresh reads the fake vtctld over real gRPC (docs/design.md §7: no vtctld here).
//! With the webhook gone, creation still works (`failurePolicy: Ignore`).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use vtsnap_core::shard::ShardName;

use base64::Engine as _;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use vtsnap_admission::cache::Caches;
use vtsnap_admission::decide::Settings;
use vtsnap_admission::inventory::Inventory;
use vtsnap_admission::server::{App, serve};
use vtsnap_admission::tls::{Reloading, server_config};
use vtsnap_core::config::Config;
use vtsnap_core::shard::ShardRef;
use vtsnap_core::vtbackup::{ANN_DATA_VOLUME_HASH, ANN_TEMPLATE_HASH, PLACEHOLDER_CLASS};
use vtsnap_snapshot::run::{RunOptions, run};
use vtsnap_testkit::fake_node::{ApiLeases, FakeNodeHelper, NodeScript};
use vtsnap_testkit::fake_vtctld::FakeVtctld;
use vtsnap_testkit::fixtures::shard;
use vtsnap_testkit::https::TestCert;
use vtsnap_testkit::operator_objects::{OperatorShard, operator_shard, pvc_template};
use vtsnap_testkit::real_kube::{BTRFS_CLASS, RealKube, resource};

const LIMIT: Duration = Duration::from_secs(90);

fn webhook_configurations() -> kube::core::ApiResource {
    resource(
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
    )
}

/// Deletes the cluster-scoped webhook configuration when the test ends.
struct ConfigurationGuard {
    name: String,
}

impl Drop for ConfigurationGuard {
    fn drop(&mut self) {
        let name = self.name.clone();
        // A runtime and a client of its own: the test's runtime is blocked in this drop,
        // and a client only works on the runtime that made it.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            if let Ok(rt) = rt {
                rt.block_on(async {
                    let kube = RealKube::from_env().await;
                    let api =
                        Api::<DynamicObject>::all_with(kube.client(), &webhook_configurations());
                    let _ = api.delete(&name, &DeleteParams::default()).await;
                });
            }
        })
        .join();
    }
}

/// The configuration the chart installs, pointed at `url` and scoped to one namespace.
fn webhook_configuration(name: &str, url: &str, ca_pem: &str, namespace: &str) -> Value {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let hook = |hook: &str, resource: &str| {
        json!({
            "name": format!("{hook}.vtsnap.io"),
            "clientConfig": {"url": url, "caBundle": ca},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": [resource], "scope": "Namespaced"}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "objectSelector": {"matchExpressions": [{"key": "planetscale.com/cluster", "operator": "Exists"}]},
            "failurePolicy": "Ignore",
            "sideEffects": "NoneOnDryRun",
            "timeoutSeconds": 5,
            "admissionReviewVersions": ["v1"],
            "reinvocationPolicy": "Never",
        })
    };
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name, "labels": {"vtsnap.io/test": "true"}},
        "webhooks": [hook("pvcs", "persistentvolumeclaims"), hook("pods", "pods")],
    })
}

async fn create_dry_run(kube: &RealKube, namespace: &str, pvc: &Value) -> PersistentVolumeClaim {
    let api: Api<PersistentVolumeClaim> = Api::namespaced(kube.client(), namespace);
    let obj: PersistentVolumeClaim = serde_json::from_value(pvc.clone()).unwrap();
    api.create(
        &PostParams {
            dry_run: true,
            ..PostParams::default()
        },
        &obj,
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn the_api_server_calls_the_webhook_and_stores_its_patches() {
    let kube = RealKube::from_env().await;
    let ns = kube.namespace("admission").await;

    // A shard whose PVCs the real provisioner bound, and a cold snapshot of it cut by the
    // real snapshot stack.
    let vtctld = FakeVtctld::new();
    let fixture = shard().replicas(3).primary(1);
    fixture
        .install_real(&kube, &ns.name, BTRFS_CLASS, &vtctld)
        .await;
    let vt = vtctld.serve().await;
    let _node = FakeNodeHelper::start_on(
        ApiLeases(kube.client()),
        "",
        NodeScript::default(),
        Duration::from_millis(50),
    );
    let yaml = format!(
        "clusters:\n- name: example\n  namespace: {}\n  vtctld: \"{}\"\n  \
         snapshot: {{volumeSnapshotClassName: {BTRFS_CLASS}, cutTimeout: 60s, readyTimeout: 60s, maxHold: 60s}}\n  \
         restore: {{enabled: true, nodeLocal: true}}\n  vtbackup: {{useEmptyDirForInitialBackup: true}}\n",
        ns.name,
        vt.endpoint()
    );
    let config = Config::from_yaml(&yaml).unwrap();
    let opts = RunOptions {
        holder: "job-admission".into(),
        lease_duration: Duration::from_secs(15),
        node_timeout: Duration::from_secs(30),
        poll: Duration::from_millis(200),
        ..RunOptions::default()
    };
    let s = run(
        &config,
        &ShardName::new("example", "commerce", "-"),
        &opts,
        kube.client(),
    )
    .await;
    assert_eq!(s.exit_code, 0, "{s:?}");
    let snapshot = s.snapshot.clone().unwrap();

    // The webhook, in process, on 127.0.0.1.
    let (caches, _watches) = Caches::start(&kube.client(), &BTreeSet::from([ns.name.clone()]));
    let config = Arc::new(config);
    tokio::spawn(vtsnap_admission::tablets::refresh_loop(
        kube.client(),
        config.clone(),
        caches.clone(),
        Duration::from_millis(500),
    ));
    let key = ShardRef {
        namespace: ns.name.clone(),
        cluster: "example".into(),
        keyspace: "commerce".into(),
        shard: "-".parse().unwrap(),
    };
    let start = Instant::now();
    while caches.shard_state(&key).is_none_or(|s| s.error.is_some())
        || caches.snapshots(&key).is_empty()
    {
        assert!(
            start.elapsed() < LIMIT,
            "the webhook never read the shard: {:?}",
            caches.shard_state(&key)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let cert = TestCert::new(&["127.0.0.1"]);
    let dir = tempfile::tempdir().unwrap();
    let (c, k) = cert.write(dir.path());
    let tls = server_config(Reloading::load(&c, &k).unwrap()).unwrap();
    let settings = Settings {
        restore_image: Some("vtsnap/vtsnap-restore:test".into()),
        shard_state_max_age: Duration::from_secs(300),
    };
    let (app, _events) = App::new(config, settings, caches, kube.client());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}/mutate", listener.local_addr().unwrap());
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, tls, app, async {
        let _ = stopped.await;
    }));
    let name = format!("vtsnap-test-{}", ns.name);
    kube.create(webhook_configuration(&name, &url, &cert.cert_pem, &ns.name))
        .await;
    let _guard = ConfigurationGuard { name };

    let shard_objects = OperatorShard {
        namespace: ns.name.clone(),
        ..operator_shard()
    };
    let mut template = pvc_template("64Mi");
    template["storageClassName"] = json!(BTRFS_CLASS);
    let new_tablet = shard_objects.tablet("replica", 4);
    let new_pvc = new_tablet.pvc(&template);

    // The API server picks the configuration up within moments: dry runs until it calls.
    let start = Instant::now();
    loop {
        let p = create_dry_run(&kube, &ns.name, &new_pvc).await;
        if p.spec.and_then(|s| s.data_source_ref).is_some() {
            break;
        }
        assert!(
            start.elapsed() < LIMIT,
            "the API server never called the webhook"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // A new tablet's PVC: stored with the data source, and the real provisioner binds it
    // from the snapshot.
    let stored = kube.create(new_pvc.clone()).await;
    assert_eq!(
        stored["spec"]["dataSourceRef"]["name"],
        snapshot.as_str(),
        "{stored}"
    );
    assert_eq!(stored["spec"]["dataSource"]["kind"], "VolumeSnapshot");
    assert_eq!(
        stored["metadata"]["annotations"]["vtsnap.io/restored-from"],
        snapshot.as_str()
    );
    // Every fixture Pod runs on the cluster's one Node: the snapshot's source node.
    let node = kube.first_node().await;
    assert_eq!(
        stored["metadata"]["annotations"]["vtsnap.io/restore-node"],
        node.as_str()
    );
    kube.wait_pvc_bound(&ns.name, &new_tablet.name, LIMIT).await;

    // Its Pod: the restore init container, and the pin to the snapshot's node.
    let stored = kube.create(new_tablet.pod()).await;
    let inits: Vec<&str> = stored["spec"]["initContainers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        inits,
        ["init-vt-root", "init-mysql-socket", "vtsnap-restore"],
        "{stored}"
    );
    assert_eq!(
        stored["spec"]["nodeSelector"]["kubernetes.io/hostname"],
        node.as_str(),
        "{stored}"
    );

    // vtbackup's initial backup: an emptyDir, and a placeholder PVC that never binds.
    let pod = kube.create(shard_objects.vtbackup_init_pod()).await;
    assert_eq!(
        pod["spec"]["volumes"][1],
        json!({"name": "persistent-volume-claim", "emptyDir": {}}),
        "{pod}"
    );
    assert!(pod["metadata"]["annotations"][ANN_DATA_VOLUME_HASH].is_string());
    let pvc = kube
        .create(shard_objects.vtbackup_init_pvc(&template))
        .await;
    assert_eq!(pvc["spec"]["storageClassName"], PLACEHOLDER_CLASS, "{pvc}");
    assert!(pvc["metadata"]["annotations"][ANN_TEMPLATE_HASH].is_string());
    assert_eq!(pvc["status"]["phase"], "Pending");
    // The tablets' own PVCs keep their storage.
    let tablet_pvc = kube
        .get(
            &resource("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
            &ns.name,
            &fixture.tablet(2).pod,
        )
        .await
        .unwrap();
    assert_eq!(tablet_pvc["spec"]["storageClassName"], BTRFS_CLASS);

    // With the webhook gone, creation still works: the object is stored as sent.
    let _ = stop.send(());
    server.await.unwrap();
    let late = shard_objects.tablet("replica", 5);
    let stored = kube.create(late.pvc(&template)).await;
    assert!(stored["spec"].get("dataSourceRef").is_none(), "{stored}");
    assert!(
        stored["metadata"]
            .get("annotations")
            .is_none_or(|a| a.get("vtsnap.io/restored-from").is_none())
    );
}
