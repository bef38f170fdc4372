//! The webhook's `/metrics` carries the Kubernetes client's retries
//! (`vtsnap_api_retries_total{verb,code}`, docs/design.md §3.8). A test binary of its own:
//! the counter is process-wide, and a retry counted here must not show up in the other
//! scrape tests' family lists.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use vtsnap_admission::cache::Caches;
use vtsnap_admission::decide::Settings;
use vtsnap_admission::server::{App, Limits, serve_stream};
use vtsnap_core::config::Config;
use vtsnap_testkit::fake_kube::FakeKube;
use vtsnap_testkit::prom_parse::{Format, Kind, parse};

fn app(kube: &FakeKube) -> Arc<App> {
    // No namespaces: no watches.
    let (caches, _) = Caches::start(&kube.client_as("admission"), &BTreeSet::new());
    let settings = Settings {
        restore_image: None,
        shard_state_max_age: Duration::from_secs(300),
    };
    let config =
        Arc::new(Config::from_yaml("clusters:\n- name: example\n  namespace: vitess\n").unwrap());
    let (app, _events) = App::new(config, settings, caches, kube.client_as("admission"));
    app
}

/// `GET /metrics` on its own in-memory connection: the body.
async fn scrape(app: &Arc<App>) -> String {
    let (mut client, server) = tokio::io::duplex(64 << 10);
    let (_open, closed) = tokio::sync::watch::channel(false);
    tokio::spawn(serve_stream(server, app.clone(), Limits::default(), closed));
    client
        .write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    client.read_to_string(&mut answer).await.unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    body.to_owned()
}

#[tokio::test]
async fn the_clients_retries_are_served_once_one_happened() {
    let app = app(&FakeKube::new());
    let before = parse(&scrape(&app).await, Format::OpenMetrics).unwrap();
    assert!(before.family("vtsnap_api_retries").is_none());

    vtsnap_core::metrics::count_api_retry("watch", "429");
    vtsnap_core::metrics::count_api_retry("get", "transport");
    let body = scrape(&app).await;
    let e = parse(&body, Format::OpenMetrics).unwrap_or_else(|e| panic!("{e}\n{body}"));
    let f = e.family("vtsnap_api_retries").unwrap();
    assert_eq!(f.kind, Kind::Counter);
    let total = "vtsnap_api_retries_total";
    assert_eq!(
        f.value(total, &[("verb", "watch"), ("code", "429")]),
        Some(1.0)
    );
    assert_eq!(
        f.value(total, &[("verb", "get"), ("code", "transport")]),
        Some(1.0)
    );
}
