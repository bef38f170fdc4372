//! `serve` against clients that hold connections: bodies that never finish, TLS
//! handshakes that never start, kept-alive connections that never send, and floods of
//! them past the connection cap. Probes and a real review must still be answered, and
//! every held connection must be closed by the server once its deadline passes. The caches
//! are fed by the test kit's in-memory API server (a fake).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls_pki_types::ServerName;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio_rustls::client::TlsStream;
use vtsnap_admission::cache::Caches;
use vtsnap_admission::decide::Settings;
use vtsnap_admission::inventory::Inventory;
use vtsnap_admission::server::{App, CloseReason, Limits, serve_with};
use vtsnap_admission::tls::{Reloading, server_config};
use vtsnap_core::config::Config;
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
    app: Arc<App>,
    addr: SocketAddr,
    cert: TestCert,
    _dir: tempfile::TempDir,
    _kube: FakeKube,
    _stop: oneshot::Sender<()>,
}

impl Webhook {
    async fn start(limits: Limits) -> Self {
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
        tokio::spawn(serve_with(listener, tls, app.clone(), limits, async {
            let _ = stopped.await;
        }));
        Self {
            app,
            addr,
            cert,
            _dir: dir,
            _kube: kube,
            _stop: stop,
        }
    }

    fn open(&self) -> u64 {
        self.app.metrics.connections.open()
    }

    fn closed(&self, reason: CloseReason) -> u64 {
        self.app.metrics.connections.closed(reason)
    }

    fn closed_by_deadline(&self) -> u64 {
        [
            CloseReason::HandshakeDeadline,
            CloseReason::IdleDeadline,
            CloseReason::RequestDeadline,
        ]
        .into_iter()
        .map(|r| self.closed(r))
        .sum()
    }

    /// A TLS connection that has sent nothing yet.
    async fn tls(&self) -> TlsStream<TcpStream> {
        self.try_tls().await.unwrap()
    }

    /// [`Webhook::tls`], or the error of a server that closed it at once.
    async fn try_tls(&self) -> std::io::Result<TlsStream<TcpStream>> {
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
    }

    /// A review whose head is complete and whose body stops after its first byte.
    async fn stalled_body(&self) -> TlsStream<TcpStream> {
        self.try_stalled_body().await.unwrap()
    }

    /// [`Webhook::stalled_body`], or the error of a server that closed it at once.
    async fn try_stalled_body(&self) -> std::io::Result<TlsStream<TcpStream>> {
        let mut s = self.try_tls().await?;
        s.write_all(
            b"POST /mutate HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
              content-length: 4096\r\n\r\n{",
        )
        .await?;
        s.flush().await?;
        Ok(s)
    }

    /// `/healthz`, `/readyz` and a real review on new connections, each answered within
    /// `within`.
    async fn probe_and_review(&self, within: Duration) {
        for path in ["/healthz", "/readyz"] {
            let a = tokio::time::timeout(
                within,
                request(self.addr, &self.cert, "GET", path, Vec::new()),
            )
            .await
            .unwrap_or_else(|_| panic!("{path} was not answered under the flood"))
            .unwrap_or_else(|e| panic!("{path} under the flood: {e}"));
            assert_eq!(a.status, 200, "{path}: {}", a.body);
        }
        let a = tokio::time::timeout(
            within,
            request(self.addr, &self.cert, "POST", "/mutate", review()),
        )
        .await
        .expect("the review was not answered under the flood")
        .expect("the review under the flood");
        assert_eq!(a.status, 200, "{}", a.body);
        let r: Value = serde_json::from_str(&a.body).unwrap();
        assert_eq!(r["response"]["uid"], "flood-1");
        assert_eq!(r["response"]["allowed"], true);
    }
}

fn review() -> Vec<u8> {
    let pvc = operator_shard()
        .tablet("replica", 4)
        .pvc(&pvc_template("100Gi"));
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "flood-1", "kind": {"group": "", "version": "v1", "kind": "PersistentVolumeClaim"},
                    "resource": {"group": "", "version": "v1", "resource": "persistentvolumeclaims"},
                    "operation": "CREATE", "namespace": "vitess", "dryRun": true, "object": pvc}}))
    .unwrap()
}

/// Reads until the server closes `s` (end of stream, or the reset or missing
/// close_notify a dropped connection gives); anything it sends first is returned.
async fn read_until_closed<S: tokio::io::AsyncRead + Unpin>(s: &mut S) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_bodies_are_closed_by_the_server_at_the_request_deadline() {
    let limits = Limits {
        request: Duration::from_secs(3),
        ..Limits::default()
    };
    let w = Webhook::start(limits).await;
    let mut stalled = Vec::new();
    for _ in 0..16 {
        stalled.push(w.stalled_body().await);
    }
    until(
        "the server holds every stalled review",
        Duration::from_secs(10),
        || w.open() == 16,
    )
    .await;
    // Each is closed by the server, without an answer: its read ends. The bound only keeps
    // a server that never closes them from hanging the test.
    for s in &mut stalled {
        let got = tokio::time::timeout(limits.request * 10, read_until_closed(s))
            .await
            .expect("a stalled body was never closed");
        assert!(got.is_empty(), "{}", String::from_utf8_lossy(&got));
    }
    // The client sees EOF before the server's task counts the close: wait for the count.
    until("every close is counted", Duration::from_secs(10), || {
        w.closed(CloseReason::RequestDeadline) >= 16
    })
    .await;
    assert_eq!(w.closed(CloseReason::RequestDeadline), 16);
    assert_eq!(w.closed(CloseReason::Evicted), 0);
    until(
        "every stalled slot is given back",
        Duration::from_secs(10),
        || w.open() == 0,
    )
    .await;
    w.probe_and_review(limits.request * 10).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed_at_their_deadlines() {
    let limits = Limits {
        handshake: Duration::from_secs(4),
        idle: Duration::from_secs(3),
        ..Limits::default()
    };
    let w = Webhook::start(limits).await;
    // TCP only: no TLS handshake ever starts.
    let mut silent = Vec::new();
    for _ in 0..16 {
        silent.push(TcpStream::connect(w.addr).await.unwrap());
    }
    // TLS done, no request.
    let mut idle = Vec::new();
    for _ in 0..16 {
        idle.push(w.tls().await);
    }
    for s in &mut silent {
        tokio::time::timeout(limits.handshake * 5, read_until_closed(s))
            .await
            .expect("a connection without a handshake was never closed");
    }
    for s in &mut idle {
        tokio::time::timeout(limits.idle * 5, read_until_closed(s))
            .await
            .expect("an idle connection was never closed");
    }
    // The client sees EOF before the server's task counts the close: wait for the count.
    until("every close is counted", Duration::from_secs(10), || {
        w.closed(CloseReason::HandshakeDeadline) >= 16 && w.closed(CloseReason::IdleDeadline) >= 16
    })
    .await;
    assert_eq!(w.closed(CloseReason::HandshakeDeadline), 16);
    assert_eq!(w.closed(CloseReason::IdleDeadline), 16);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_past_the_cap_does_not_keep_probes_or_reviews_out() {
    // Deadlines far beyond the test: every answer below comes through eviction.
    let long = Duration::from_secs(60);
    let limits = Limits {
        handshake: long,
        request: long,
        idle: long,
        max_connections: 16,
    };
    let w = Webhook::start(limits).await;
    // The attacker does not care whether each connection is kept.
    let mut stalled = Vec::new();
    for _ in 0..32 {
        stalled.extend(w.try_stalled_body().await.ok());
    }
    let mut idle_tls = Vec::new();
    for _ in 0..16 {
        idle_tls.extend(w.try_tls().await.ok());
    }
    let mut opened = 48;
    let taken_in =
        |opened: u64| w.closed(CloseReason::Evicted) + w.closed(CloseReason::Full) >= opened - 16;
    until("the cap is reached", Duration::from_secs(10), || {
        w.open() == 16 && taken_in(opened)
    })
    .await;
    w.probe_and_review(long / 2).await;

    // Idle TCP connections that keep coming, round after round.
    let mut silent = Vec::new();
    for _round in 0..3 {
        for _ in 0..48 {
            silent.push(TcpStream::connect(w.addr).await.unwrap());
        }
        opened += 48;
        until(
            "the round's connections are taken in",
            Duration::from_secs(10),
            || w.closed(CloseReason::Evicted) >= opened - 16,
        )
        .await;
        w.probe_and_review(long / 2).await;
    }
    assert_eq!(w.closed_by_deadline(), 0);
    assert_eq!(w.closed(CloseReason::Full), 0);
    assert!(w.open() <= 16, "{} open past the cap", w.open());

    // The stalled reviews were the first to give way: each is closed.
    assert_eq!(stalled.len(), 32);
    for s in &mut stalled {
        let got = tokio::time::timeout(long / 2, read_until_closed(s))
            .await
            .expect("an evicted connection was not closed");
        assert!(got.is_empty(), "{}", String::from_utf8_lossy(&got));
    }
}
