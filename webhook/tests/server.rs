//! The webhook over real HTTPS, its caches fed by watches of the test kit's in-memory API
//! server (`FakeKube`, a fake: it stands in for the API where faults are injected; the
//! real API server calls the webhook in `e2e/suite/tests/real_admission.rs`).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use vtsnap_admission::cache::Caches;
use vtsnap_admission::decide::Settings;
use vtsnap_admission::inventory::Inventory;
use vtsnap_admission::patch::{Op, apply};
use vtsnap_admission::server::{App, serve};
use vtsnap_admission::tls::{Reloading, server_config};
use vtsnap_core::config::Config;
use vtsnap_core::shard::ShardRef;
use vtsnap_core::snapshot::choice::{ShardState, TabletVersion};
use vtsnap_testkit::fake_kube::FakeKube;
use vtsnap_testkit::https::{TestCert, request};
use vtsnap_testkit::operator_objects::{operator_shard, pvc_template};

const CONFIG: &str =
    "clusters:\n- name: example\n  namespace: vitess\n  restore: {enabled: true}\n";

/// Waits until `cond` holds (it is polled; the test fails after `limit`).
async fn until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

struct Webhook {
    kube: FakeKube,
    addr: SocketAddr,
    cert: TestCert,
    dir: tempfile::TempDir,
    reloading: Arc<Reloading>,
    caches: Caches,
    _stop: oneshot::Sender<()>,
}

fn key() -> ShardRef {
    ShardRef {
        namespace: "vitess".into(),
        cluster: "example".into(),
        keyspace: "commerce".into(),
        shard: "-".parse().unwrap(),
    }
}

impl Webhook {
    /// Serves with one ready snapshot (`s-1`, cut an hour ago) in the fake API and a
    /// healthy MySQL 8.0 shard state.
    async fn start() -> Self {
        let kube = FakeKube::new();
        let cut = Timestamp::now() - SignedDuration::from_hours(1);
        kube.put_json(
            "snapshot.storage.k8s.io",
            "volumesnapshots",
            operator_shard().snapshot("s-1", cut).object(),
        );
        let config = Arc::new(Config::from_yaml(CONFIG).unwrap());
        let (caches, _) = Caches::start(
            &kube.client_as("admission"),
            &BTreeSet::from(["vitess".to_owned()]),
        );
        let c = caches.clone();
        until("the caches are filled", Duration::from_secs(10), || {
            c.synced()
        })
        .await;
        caches.shard_states().write().unwrap().insert(
            key(),
            ShardState {
                key: key(),
                primary: Some("zone1-0000000101".into()),
                tablets: vec![TabletVersion {
                    alias: "zone1-0000000101".into(),
                    version: Some("8.0.36".into()),
                }],
                refreshed_at: Timestamp::now(),
                error: None,
            },
        );
        let cert = TestCert::new(&["127.0.0.1"]);
        let dir = tempfile::tempdir().unwrap();
        let (c, k) = cert.write(dir.path());
        let reloading = Reloading::load(&c, &k).unwrap();
        let tls = server_config(reloading.clone()).unwrap();
        let settings = Settings {
            restore_image: Some("vtsnap/vtsnap-restore:test".into()),
            shard_state_max_age: Duration::from_secs(300),
        };
        let (app, _events) = App::new(
            config,
            settings,
            caches.clone(),
            kube.client_as("admission"),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(serve(listener, tls, app, async {
            let _ = stopped.await;
        }));
        Self {
            kube,
            addr,
            cert,
            dir,
            reloading,
            caches,
            _stop: stop,
        }
    }

    async fn post(&self, body: Vec<u8>) -> (u16, String) {
        let a = request(self.addr, &self.cert, "POST", "/mutate", body)
            .await
            .unwrap();
        (a.status, a.body)
    }
}

fn review(kind: &str, object: &Value, dry_run: bool) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "3b2c-1", "kind": {"group": "", "version": "v1", "kind": kind},
                    "resource": {"group": "", "version": "v1", "resource": "x"},
                    "operation": "CREATE", "namespace": "vitess", "dryRun": dry_run, "object": object}}))
    .unwrap()
}

fn patch_of(response: &Value) -> Vec<Op> {
    let b64 = response["response"]["patch"].as_str().unwrap_or("");
    let raw = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap();
    serde_json::from_slice::<Vec<Value>>(&raw)
        .unwrap()
        .into_iter()
        .map(|op| match op["op"].as_str().unwrap() {
            "add" => Op::Add {
                path: op["path"].as_str().unwrap().into(),
                value: op["value"].clone(),
            },
            "replace" => Op::Replace {
                path: op["path"].as_str().unwrap().into(),
                value: op["value"].clone(),
            },
            other => panic!("unexpected op {other}"),
        })
        .collect()
}

fn events(kube: &FakeKube) -> Vec<Value> {
    kube.events()
}

#[tokio::test]
async fn a_review_over_https_gets_the_patch_and_the_event_is_recorded() {
    let w = Webhook::start().await;
    let pvc = operator_shard()
        .tablet("replica", 4)
        .pvc(&pvc_template("100Gi"));
    let (status, body) = w.post(review("PersistentVolumeClaim", &pvc, false)).await;
    assert_eq!(status, 200, "{body}");
    let r: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(r["response"]["uid"], "3b2c-1");
    assert_eq!(r["response"]["allowed"], true);
    assert_eq!(
        r["response"]["auditAnnotations"]["decision"],
        "restored-from-snapshot"
    );
    let stored = apply(&pvc, &patch_of(&r)).unwrap();
    assert_eq!(stored["spec"]["dataSourceRef"]["name"], "s-1");
    let kube = w.kube.clone();
    until(
        "the RestoreInjected event is recorded",
        Duration::from_secs(10),
        || {
            events(&kube)
                .iter()
                .any(|e| e["reason"] == "RestoreInjected")
        },
    )
    .await;
    let ev = events(&w.kube)
        .into_iter()
        .find(|e| e["reason"] == "RestoreInjected")
        .unwrap();
    assert_eq!(ev["regarding"]["kind"], "PersistentVolumeClaim");
    assert_eq!(ev["regarding"]["name"], pvc["metadata"]["name"]);

    // The tablet's Pod gets the restore init container.
    let pod = operator_shard().tablet("replica", 4).pod();
    let (status, body) = w.post(review("Pod", &pod, false)).await;
    assert_eq!(status, 200);
    let r: Value = serde_json::from_str(&body).unwrap();
    let stored = apply(&pod, &patch_of(&r)).unwrap();
    assert_eq!(
        stored["spec"]["initContainers"][2]["name"],
        "vtsnap-restore"
    );
    assert_eq!(
        stored["spec"]["initContainers"][2]["image"],
        "vtsnap/vtsnap-restore:test"
    );
    assert_eq!(
        vtsnap_testkit::rbac::refused("admission", &w.kube.log()),
        Vec::<String>::new(),
        "requests its Role does not grant"
    );
}

#[tokio::test]
async fn a_dry_run_records_no_event_and_a_skip_says_why() {
    let w = Webhook::start().await;
    // Too small for the snapshot: left alone, an Event says why — but not on a dry run.
    let dry = operator_shard()
        .tablet("replica", 6)
        .pvc(&pvc_template("1Gi"));
    let (status, body) = w.post(review("PersistentVolumeClaim", &dry, true)).await;
    assert_eq!(status, 200);
    let r: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        r["response"]["auditAnnotations"]["decision"],
        "no-usable-snapshot"
    );
    assert!(r["response"].get("patch").is_none());
    let pvc = operator_shard()
        .tablet("replica", 5)
        .pvc(&pvc_template("1Gi"));
    let (_, _) = w.post(review("PersistentVolumeClaim", &pvc, false)).await;
    let kube = w.kube.clone();
    until(
        "the RestoreSkipped event is recorded",
        Duration::from_secs(10),
        || {
            events(&kube)
                .iter()
                .any(|e| e["reason"] == "RestoreSkipped")
        },
    )
    .await;
    // Events are recorded in order: the dry run's would be there by now.
    let about = |e: &Value| e["regarding"]["name"].as_str().unwrap_or("").to_owned();
    let all = events(&w.kube);
    assert!(
        all.iter()
            .all(|e| about(e) != dry["metadata"]["name"].as_str().unwrap()),
        "the dry run recorded an event: {all:?}"
    );
    let ev = all
        .iter()
        .find(|e| e["reason"] == "RestoreSkipped")
        .unwrap();
    assert_eq!(about(ev), pvc["metadata"]["name"].as_str().unwrap());
    assert!(
        ev["note"].as_str().unwrap().contains("the PVC asks for"),
        "{ev}"
    );
}

#[tokio::test]
async fn a_snapshot_added_later_is_seen_through_the_watch() {
    let w = Webhook::start().await;
    let newer = Timestamp::now() - SignedDuration::from_mins(5);
    w.kube.put_json(
        "snapshot.storage.k8s.io",
        "volumesnapshots",
        operator_shard().snapshot("s-2", newer).object(),
    );
    let caches = w.caches.clone();
    until("the watch delivers s-2", Duration::from_secs(10), || {
        caches.snapshots(&key()).len() == 2
    })
    .await;
    let pvc = operator_shard()
        .tablet("replica", 4)
        .pvc(&pvc_template("100Gi"));
    let (_, body) = w.post(review("PersistentVolumeClaim", &pvc, true)).await;
    let r: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        apply(&pvc, &patch_of(&r)).unwrap()["spec"]["dataSourceRef"]["name"],
        "s-2"
    );
}

#[tokio::test]
async fn malformed_requests_get_400_with_the_reason_and_the_server_keeps_serving() {
    let w = Webhook::start().await;
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"not json".to_vec(), "unreadable AdmissionReview: the body is not JSON"),
        (b"{}".to_vec(), "unreadable AdmissionReview: apiVersion is missing"),
        (
            serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u"}})).unwrap(),
            "request.kind.version is missing",
        ),
        (vec![0xff, 0xfe, 0x00], "the body is not JSON"),
    ];
    for (body, want) in cases {
        let (status, text) = w.post(body).await;
        assert_eq!(status, 400, "{text}");
        assert!(text.contains(want), "{text:?} lacks {want:?}");
    }
    let big = vec![b' '; vtsnap_admission::admission::MAX_BODY + 1];
    let (status, text) = w.post(big).await;
    assert_eq!(status, 413, "{text}");
    let a = request(w.addr, &w.cert, "GET", "/nothing", Vec::new())
        .await
        .unwrap();
    assert_eq!(a.status, 404);
    let a = request(w.addr, &w.cert, "GET", "/mutate", Vec::new())
        .await
        .unwrap();
    assert_eq!(a.status, 405);
    let a = request(w.addr, &w.cert, "GET", "/readyz", Vec::new())
        .await
        .unwrap();
    assert_eq!(a.status, 200);
    let a = request(w.addr, &w.cert, "GET", "/metrics", Vec::new())
        .await
        .unwrap();
    assert!(
        a.body.contains("vtsnap_admission_bad_reviews_total 5"),
        "{}",
        a.body
    );
    assert!(
        a.body.contains("vtsnap_admission_snapshots_cached 1"),
        "{}",
        a.body
    );
    let a = request(w.addr, &w.cert, "GET", "/debug/shards", Vec::new())
        .await
        .unwrap();
    let states: Vec<ShardState> = serde_json::from_str(&a.body).unwrap();
    assert_eq!(states[0].key, key());
    // Still serving reviews.
    let pvc = operator_shard()
        .tablet("replica", 4)
        .pvc(&pvc_template("100Gi"));
    assert_eq!(
        w.post(review("PersistentVolumeClaim", &pvc, true)).await.0,
        200
    );
}

#[tokio::test]
async fn a_rotated_certificate_is_served_without_a_restart_and_a_broken_one_is_not() {
    let w = Webhook::start().await;
    let first = request(w.addr, &w.cert, "GET", "/healthz", Vec::new())
        .await
        .unwrap();
    assert_eq!(first.server_cert, w.cert.der());
    let watch = tokio::spawn(w.reloading.clone().watch(Duration::from_millis(50)));

    // A new pair in the Secret: served from the next handshake on.
    let next = TestCert::new(&["127.0.0.1"]);
    next.write(w.dir.path());
    let addr = w.addr;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match request(addr, &next, "GET", "/healthz", Vec::new()).await {
            Ok(a) => {
                assert_eq!(a.server_cert, next.der());
                break;
            }
            Err(e) => assert!(
                Instant::now() < deadline,
                "the new certificate was not served: {e}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The old one is no longer trusted by a client that only trusts it.
    assert!(
        request(addr, &w.cert, "GET", "/healthz", Vec::new())
            .await
            .is_err()
    );

    // A key that does not match its certificate: refused, the previous pair stays.
    let other = TestCert::new(&["127.0.0.1"]);
    std::fs::write(w.dir.path().join("tls.key"), &other.key_pem).unwrap();
    assert!(w.reloading.reload().is_err());
    let a = request(addr, &next, "GET", "/healthz", Vec::new())
        .await
        .unwrap();
    assert_eq!((a.status, a.server_cert), (200, next.der()));
    // Garbage: the same.
    std::fs::write(w.dir.path().join("tls.crt"), "not a certificate").unwrap();
    assert!(w.reloading.reload().is_err());
    assert_eq!(
        request(addr, &next, "GET", "/healthz", Vec::new())
            .await
            .unwrap()
            .status,
        200
    );
    // A FIFO in its place: refused unopened (opening it would wait for a writer for ever).
    let crt = w.dir.path().join("tls.crt");
    std::fs::remove_file(&crt).unwrap();
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&crt)
            .status()
            .unwrap()
            .success()
    );
    let reloading = w.reloading.clone();
    let reloaded = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::task::spawn_blocking(move || reloading.reload()),
    )
    .await
    .expect("a reload blocked on a FIFO")
    .unwrap();
    let e = reloaded.unwrap_err().to_string();
    assert!(e.contains("tls.crt is not a regular file (a FIFO)"), "{e}");
    assert_eq!(
        request(addr, &next, "GET", "/healthz", Vec::new())
            .await
            .unwrap()
            .server_cert,
        next.der()
    );
    watch.abort();
}
