//! Arbitrary bytes as what a client sends once its TLS handshake is done, served by the
//! code that serves every connection (`serve_stream`: hyper's HTTP/1.1 parser, the
//! connection's deadlines, the routes, the body bound, the review) over an in-memory
//! stream. The client never closes its side, as a stalling attacker does not: the
//! connection must still end (on the clock, which is paused and runs ahead whenever nothing
//! else can). Nothing may panic; every answer is HTTP, and every review answered 200
//! allows.
#![no_main]

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::runtime::Runtime;
use vtsnap_admission::cache::Caches;
use vtsnap_admission::decide::Settings;
use vtsnap_admission::server::{App, Limits, serve_stream};
use vtsnap_core::config::Config;

const CONFIG: &str = "clusters:\n- name: example\n  namespace: vitess\n  \
    restore: {enabled: true, nodeLocal: true}\n  vtbackup: {useEmptyDirForInitialBackup: true}\n";

const LIMITS: Limits = Limits {
    handshake: Duration::from_secs(5),
    request: Duration::from_secs(10),
    idle: Duration::from_secs(120),
    max_connections: 1,
};

/// The most of an answer read: far above any answer to a body of this size.
const MAX_ANSWER: u64 = 64 << 20;

/// A Kubernetes API that answers every call 404: a Pod's PVC read finds nothing and an
/// Event is not recorded, without a network.
fn no_api() -> kube::Client {
    let service = tower::service_fn(|_req: http::Request<kube::client::Body>| async {
        let body = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}"#;
        let mut r = http::Response::new(Full::new(Bytes::from_static(body.as_bytes())));
        *r.status_mut() = http::StatusCode::NOT_FOUND;
        Ok::<_, std::convert::Infallible>(r)
    });
    kube::Client::new(service, "default")
}

fn world() -> &'static (Runtime, Arc<App>) {
    static WORLD: OnceLock<(Runtime, Arc<App>)> = OnceLock::new();
    WORLD.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap_or_else(|e| panic!("runtime: {e}"));
        let app = rt.block_on(async {
            let client = no_api();
            // No namespaces: no watches; the caches count as filled and hold nothing.
            let (caches, _) = Caches::start(&client, &BTreeSet::new());
            let config = Config::from_yaml(CONFIG).unwrap_or_else(|e| panic!("config: {e:?}"));
            let settings = Settings {
                restore_image: Some("vtsnap/vtsnap-restore:fuzz".into()),
                shard_state_max_age: Duration::from_secs(300),
            };
            App::new(Arc::new(config), settings, caches, client).0
        });
        (rt, app)
    })
}

/// Checks what the server sent: HTTP/1.x answers one after another (each with its length),
/// and every `200` review an allowing one.
fn check(mut answer: &[u8]) {
    while !answer.is_empty() {
        let text = String::from_utf8_lossy(answer);
        assert!(
            text.starts_with("HTTP/1.1 ") || text.starts_with("HTTP/1.0 "),
            "not an HTTP answer: {text:?}"
        );
        let Some(end) = text.find("\r\n\r\n") else {
            return;
        };
        let head = &text[..end];
        let length = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .and_then(|n| n.parse::<usize>().ok());
        let Some(length) = length else {
            // A 100 Continue has no body and is followed by the answer.
            assert!(
                head.contains(" 100 Continue"),
                "an answer without a length: {head:?}"
            );
            answer = &answer[end + 4..];
            continue;
        };
        let body_start = end + 4;
        let Some(body) = answer.get(body_start..body_start + length) else {
            return;
        };
        if head.contains(" 200 OK") && head.contains("content-type: application/json") {
            if let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) {
                if v.get("kind").and_then(|k| k.as_str()) == Some("AdmissionReview") {
                    assert_eq!(v["response"]["allowed"], serde_json::json!(true), "{v}");
                }
            }
        }
        answer = &answer[body_start + length..];
    }
}

fuzz_target!(|data: &[u8]| {
    let (rt, app) = world();
    let answer = rt.block_on(async {
        let (client, server) = tokio::io::duplex(64 << 10);
        let (_open, closed) = tokio::sync::watch::channel(false);
        let served = tokio::spawn(serve_stream(server, app.clone(), LIMITS, closed));
        let (mut rd, mut wr) = tokio::io::split(client);
        let data = data.to_vec();
        // Written, and the write side left open: the server alone ends the connection.
        let writer = tokio::spawn(async move {
            let _ = wr.write_all(&data).await;
            wr
        });
        let mut answer = Vec::new();
        let _ = (&mut rd).take(MAX_ANSWER).read_to_end(&mut answer).await;
        let _ = served.await;
        drop(writer.await);
        answer
    });
    check(&answer);
});
