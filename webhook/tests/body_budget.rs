//! The review bodies of every connection share one budget: a flood of large bodies, some of
//! them stalled mid-body, never holds more than the budget (counted by its semaphore), a
//! review that cannot get its share within the wait is answered 503 saying why, and probes
//! and reviews are answered throughout. The caches are fed by the test kit's in-memory API
//! server (a fake).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls_pki_types::ServerName;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio_rustls::client::TlsStream;
use vtsnap_admission::cache::Caches;
use vtsnap_admission::decide::Settings;
use vtsnap_admission::inventory::Inventory;
use vtsnap_admission::server::{App, BodyBudget, Limits, serve_budgeted};
use vtsnap_admission::tls::{Reloading, server_config};
use vtsnap_core::config::Config;
use vtsnap_testkit::fake_kube::FakeKube;
use vtsnap_testkit::https::{TestCert, request};
use vtsnap_testkit::operator_objects::{operator_shard, pvc_template};

const CONFIG: &str =
    "clusters:\n- name: example\n  namespace: vitess\n  restore: {enabled: true}\n";
const MIB: usize = 1 << 20;
/// The budget under test: four 4 MiB bodies.
const BUDGET: usize = 16 * MIB;

/// Waits until `cond` holds (it is polled; the test fails after `limit`).
async fn until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

struct Webhook {
    budget: Arc<BodyBudget>,
    addr: SocketAddr,
    cert: TestCert,
    _dir: tempfile::TempDir,
    _kube: FakeKube,
    _stop: oneshot::Sender<()>,
}

impl Webhook {
    async fn start(limits: Limits, budget: BodyBudget) -> Self {
        let kube = FakeKube::new();
        let config = Arc::new(Config::from_yaml(CONFIG).unwrap());
        let (caches, _) = Caches::start(&kube.client(), &BTreeSet::from(["vitess".to_owned()]));
        let c = caches.clone();
        until("the caches are filled", Duration::from_secs(10), || {
            c.synced()
        })
        .await;
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
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let budget = Arc::new(budget);
        tokio::spawn(serve_budgeted(
            listener,
            tls,
            app,
            limits,
            budget.clone(),
            async {
                let _ = stopped.await;
            },
        ));
        Self {
            budget,
            addr,
            cert,
            _dir: dir,
            _kube: kube,
            _stop: stop,
        }
    }

    async fn tls(&self) -> TlsStream<TcpStream> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.cert.der()).unwrap();
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        let tcp = TcpStream::connect(self.addr).await.unwrap();
        tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
            .await
            .unwrap()
    }

    /// A review declaring `len` bytes whose body stops after its first byte.
    async fn stalled(&self, len: usize) -> TlsStream<TcpStream> {
        let mut s = self.tls().await;
        s.write_all(
            format!(
                "POST /mutate HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {len}\r\n\r\n{{"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
        s.flush().await.unwrap();
        s
    }

    async fn post(&self, body: Vec<u8>) -> (u16, String) {
        let a = request(self.addr, &self.cert, "POST", "/mutate", body)
            .await
            .unwrap();
        (a.status, a.body)
    }

    async fn probe(&self) {
        let a = request(self.addr, &self.cert, "GET", "/healthz", Vec::new())
            .await
            .unwrap();
        assert_eq!(a.status, 200, "{}", a.body);
    }
}

/// A small real review (dry run: no Event).
fn review() -> Vec<u8> {
    let pvc = operator_shard()
        .tablet("replica", 4)
        .pvc(&pvc_template("100Gi"));
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "budget-1", "kind": {"group": "", "version": "v1", "kind": "PersistentVolumeClaim"},
                    "resource": {"group": "", "version": "v1", "resource": "persistentvolumeclaims"},
                    "operation": "CREATE", "namespace": "vitess", "dryRun": true, "object": pvc}}))
    .unwrap()
}

/// A large body (unreadable as a review: it is answered 400 once read).
fn large(len: usize) -> Vec<u8> {
    let mut b = vec![b' '; len];
    b[0] = b'[';
    b
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_large_bodies_holds_no_more_than_the_budget_and_probes_answer() {
    let limits = Limits {
        request: Duration::from_secs(3),
        ..Limits::default()
    };
    let wait = Duration::from_millis(500);
    let w = Webhook::start(limits, BodyBudget::new(BUDGET, wait).unwrap()).await;

    // Six stalled 4 MiB bodies: four take the whole budget, two wait for it.
    let mut stalled = Vec::new();
    for _ in 0..6 {
        stalled.push(w.stalled(4 * MIB).await);
    }
    until(
        "the stalled bodies hold the budget",
        Duration::from_secs(10),
        || w.budget.held() == BUDGET,
    )
    .await;
    // Exhausted: a probe still answers; a review waits its bound, then is refused, saying so.
    w.probe().await;
    let started = Instant::now();
    let (status, body) = w.post(review()).await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("budget for review bodies") && body.contains("stayed exhausted"),
        "{body}"
    );
    assert!(started.elapsed() >= wait, "refused before its wait");

    // The stalled ones are closed at the request deadline, and give their share back.
    drop(stalled);
    until(
        "the stalled bodies' share is given back",
        limits.request * 5,
        || w.budget.held() == 0,
    )
    .await;

    // Sixteen complete 4 MiB bodies at once (64 MiB): each is answered, 400 when read or
    // 503 when its share did not come within the wait; never more than the budget held.
    let flood: Vec<_> = (0..16)
        .map(|_| {
            let (addr, cert) = (w.addr, w.cert.clone());
            tokio::spawn(async move {
                request(addr, &cert, "POST", "/mutate", large(4 * MIB))
                    .await
                    .map(|a| a.status)
            })
        })
        .collect();
    w.probe().await;
    for f in flood {
        let status = f.await.unwrap().unwrap();
        assert!(status == 400 || status == 503, "{status}");
    }
    assert!(
        w.budget.peak() <= BUDGET,
        "held {} bytes at most, above the budget of {BUDGET}",
        w.budget.peak()
    );
    assert_eq!(w.budget.held(), 0, "every share is given back");

    // And a review is answered again.
    let (status, body) = w.post(review()).await;
    assert_eq!(status, 200, "{body}");
    let r: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(r["response"]["uid"], "budget-1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_declared_above_the_largest_review_is_refused_unread() {
    let w = Webhook::start(Limits::default(), BodyBudget::default()).await;
    let mut s = w.stalled(64 * MIB).await;
    let mut out = Vec::new();
    tokio::io::AsyncReadExt::read_buf(&mut s, &mut out)
        .await
        .unwrap();
    let head = String::from_utf8_lossy(&out);
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
    assert_eq!(
        w.budget.peak(),
        0,
        "nothing of it was taken from the budget"
    );
}
