//! `/metrics` of the webhook scraped after known traffic, the body read by a strict
//! OpenMetrics parser: the families docs/admission.md lists, with their types, labels and
//! values — and nothing else.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use vtsnap_admission::cache::Caches;
use vtsnap_admission::decide::Settings;
use vtsnap_admission::server::{App, Limits, serve_stream};
use vtsnap_core::config::Config;
use vtsnap_core::snapshot::{DrillRecord, Rto};
use vtsnap_testkit::fake_kube::FakeKube;
use vtsnap_testkit::operator_objects::operator_shard;
use vtsnap_testkit::prom_parse::{Format, Kind, parse};

const CONFIG: &str = "clusters:\n- name: example\n  namespace: vitess\n";

fn app(kube: &FakeKube) -> Arc<App> {
    // No namespaces: no watches, and the caches count as filled.
    app_watching(kube, &BTreeSet::new())
}

fn app_watching(kube: &FakeKube, namespaces: &BTreeSet<String>) -> Arc<App> {
    let (caches, _) = Caches::start(&kube.client_as("admission"), namespaces);
    let settings = Settings {
        restore_image: None,
        shard_state_max_age: Duration::from_secs(300),
    };
    let config = Arc::new(Config::from_yaml(CONFIG).unwrap());
    let (app, _events) = App::new(config, settings, caches, kube.client_as("admission"));
    app
}

/// One request on its own in-memory connection; the whole answer, head and body.
async fn request(app: &Arc<App>, method: &str, path: &str, body: &[u8]) -> String {
    let (mut client, server) = tokio::io::duplex(64 << 10);
    let (_open, closed) = tokio::sync::watch::channel(false);
    tokio::spawn(serve_stream(server, app.clone(), Limits::default(), closed));
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    client.write_all(head.as_bytes()).await.unwrap();
    client.write_all(body).await.unwrap();
    let mut answer = String::new();
    client.read_to_string(&mut answer).await.unwrap();
    answer
}

/// A review of an object vtsnap does not change (a Secret).
fn secret_review() -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u-1", "kind": {"group": "", "version": "v1", "kind": "Secret"},
                    "resource": {"group": "", "version": "v1", "resource": "secrets"},
                    "operation": "CREATE", "namespace": "vitess",
                    "object": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}}}))
    .unwrap()
}

#[tokio::test]
async fn every_documented_family_with_its_type_labels_and_values() {
    let kube = FakeKube::new();
    let app = app(&kube);
    for _ in 0..2 {
        let a = request(&app, "POST", "/mutate", &secret_review()).await;
        assert!(a.starts_with("HTTP/1.1 200 OK"), "{a}");
    }
    let a = request(&app, "POST", "/mutate", b"not json").await;
    assert!(a.starts_with("HTTP/1.1 400"), "{a}");

    let answer = request(&app, "GET", "/metrics", b"").await;
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(
        head.lines().any(|l| l.to_lowercase()
            == "content-type: application/openmetrics-text; version=1.0.0; charset=utf-8"),
        "{head}"
    );
    let e = parse(body, Format::OpenMetrics).unwrap_or_else(|e| panic!("{e}\n{body}"));

    let want: BTreeMap<String, Kind> = [
        ("vtsnap_admission_reviews", Kind::Counter),
        ("vtsnap_admission_bad_reviews", Kind::Counter),
        ("vtsnap_admission_events_dropped", Kind::Counter),
        ("vtsnap_admission_cache_synced", Kind::Gauge),
        ("vtsnap_admission_snapshots_cached", Kind::Gauge),
        ("vtsnap_admission_connections_open", Kind::Gauge),
        ("vtsnap_admission_connections_closed", Kind::Counter),
    ]
    .into_iter()
    .map(|(n, k)| (n.to_owned(), k))
    .collect();
    assert_eq!(e.kinds(), want, "{body}");

    let reviews = e.family("vtsnap_admission_reviews").unwrap();
    assert_eq!(reviews.samples.len(), 1, "{reviews:?}");
    assert_eq!(
        reviews.value(
            "vtsnap_admission_reviews_total",
            &[("decision", "not-vtsnaps")]
        ),
        Some(2.0)
    );
    for (family, sample, value) in [
        (
            "vtsnap_admission_bad_reviews",
            "vtsnap_admission_bad_reviews_total",
            1.0,
        ),
        (
            "vtsnap_admission_events_dropped",
            "vtsnap_admission_events_dropped_total",
            0.0,
        ),
        (
            "vtsnap_admission_cache_synced",
            "vtsnap_admission_cache_synced",
            1.0,
        ),
        (
            "vtsnap_admission_snapshots_cached",
            "vtsnap_admission_snapshots_cached",
            0.0,
        ),
    ] {
        let f = e.family(family).unwrap();
        assert_eq!(f.samples.len(), 1, "{f:?}");
        assert_eq!(f.value(sample, &[]), Some(value), "{f:?}");
    }
    // Connections handed to `serve_stream` are not the listener's: none is counted open,
    // and none was closed by the server.
    let open = e.family("vtsnap_admission_connections_open").unwrap();
    assert_eq!(open.samples.len(), 1, "{open:?}");
    assert_eq!(
        open.value("vtsnap_admission_connections_open", &[]),
        Some(0.0),
        "{open:?}"
    );
    let closed = e.family("vtsnap_admission_connections_closed").unwrap();
    let reasons: BTreeMap<String, f64> = closed
        .samples
        .iter()
        .map(|s| {
            assert_eq!(s.name, "vtsnap_admission_connections_closed_total");
            assert_eq!(s.labels.len(), 1, "{s:?}");
            (s.labels["reason"].clone(), s.value)
        })
        .collect();
    let want: BTreeMap<String, f64> = [
        "handshake-deadline",
        "request-deadline",
        "idle-deadline",
        "evicted",
        "full",
    ]
    .into_iter()
    .map(|r| (r.to_owned(), 0.0))
    .collect();
    assert_eq!(reasons, want);
}

/// `/metrics` body once the caches are filled (the fake API's watches delivered).
async fn scrape(app: &Arc<App>) -> String {
    let start = std::time::Instant::now();
    loop {
        let answer = request(app, "GET", "/metrics", b"").await;
        let body = answer.split_once("\r\n\r\n").unwrap().1.to_owned();
        if body.contains("vtsnap_admission_cache_synced 1\n") {
            return body;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{body}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn drill_gauges_follow_the_snapshots_through_the_watch() {
    let kube = FakeKube::new();
    let now = Timestamp::now();
    let rto = Rto {
        pvc_bound_ms: 1200,
        restore_ms: 80,
        mysqld_ready_ms: 3000,
    };
    let passed_at = now - SignedDuration::from_hours(26);
    let mut a = operator_shard()
        .named("commerce", "-80")
        .snapshot("a", passed_at);
    a.drill = Some(DrillRecord::passed(&a.drill_of(), passed_at, rto, None).render());
    let mut b = operator_shard().named("commerce", "-80").snapshot("b", now);
    b.drill =
        Some(DrillRecord::failed(&b.drill_of(), now, "table t1 corrupt", None, None).render());
    let c = operator_shard().named("commerce", "80-").snapshot("c", now);
    for s in [&a, &b, &c] {
        kube.put_json("snapshot.storage.k8s.io", "volumesnapshots", s.object());
    }
    let app = app_watching(&kube, &BTreeSet::from(["vitess".to_owned()]));
    let body = scrape(&app).await;
    let e = parse(&body, Format::OpenMetrics).unwrap_or_else(|e| panic!("{e}\n{body}"));
    let shard = [
        ("namespace", "vitess"),
        ("cluster", "example"),
        ("keyspace", "commerce"),
        ("shard", "-80"),
    ];
    for (family, value) in [
        (
            "vtsnap_drill_last_passed_timestamp_seconds",
            passed_at.as_second() as f64,
        ),
        ("vtsnap_drill_last_result", 0.0),
        ("vtsnap_drill_last_rto_seconds", 4.28),
    ] {
        let f = e
            .family(family)
            .unwrap_or_else(|| panic!("{family}\n{body}"));
        assert_eq!(f.kind, Kind::Gauge);
        // One series: 80- has no drill.
        assert_eq!(f.samples.len(), 1, "{f:?}");
        assert_eq!(f.value(family, &shard), Some(value), "{f:?}");
    }
    // Both of the shard's drilled snapshots deleted: its series go at the next scrape.
    for name in ["a", "b"] {
        kube.remove("snapshot.storage.k8s.io", "volumesnapshots", "vitess", name);
    }
    let start = std::time::Instant::now();
    while scrape(&app).await.contains("vtsnap_drill_") {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the drill series stay"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
