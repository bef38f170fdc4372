//! `/metrics` scraped as Prometheus does: the OpenMetrics content type, and a body that
//! parses line by line, each sample under a declared family, ending in `# EOF`.
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

const CONFIG: &str = "clusters:\n- name: example\n  namespace: vitess\n";

/// One request on an in-memory connection; the whole answer, head and body.
async fn get(path: &str) -> String {
    let kube = FakeKube::new();
    // No namespaces: no watches, and the caches count as filled.
    let (caches, _) = Caches::start(&kube.client_as("admission"), &BTreeSet::new());
    let settings = Settings {
        restore_image: None,
        shard_state_max_age: Duration::from_secs(300),
    };
    let config = Arc::new(Config::from_yaml(CONFIG).unwrap());
    let (app, _events) = App::new(config, settings, caches, kube.client_as("admission"));
    let (mut client, server) = tokio::io::duplex(64 << 10);
    let (_open, closed) = tokio::sync::watch::channel(false);
    tokio::spawn(serve_stream(server, app, Limits::default(), closed));
    client
        .write_all(
            format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
    let mut answer = String::new();
    client.read_to_string(&mut answer).await.unwrap();
    answer
}

/// Checks OpenMetrics text: `# HELP`/`# TYPE` before each family's samples, every sample
/// named after its family and with a number as its value, and `# EOF` last. Returns the
/// families and their types.
fn parse(body: &str) -> Vec<(String, String)> {
    let mut families = Vec::new();
    let mut lines = body.lines().peekable();
    while let Some(line) = lines.next() {
        if line == "# EOF" {
            assert!(lines.peek().is_none(), "text after # EOF:\n{body}");
            assert!(body.ends_with("# EOF\n"), "{body}");
            return families;
        }
        if let Some(help) = line.strip_prefix("# HELP ") {
            let name = help.split(' ').next().unwrap();
            let ty = lines
                .next()
                .and_then(|l| l.strip_prefix("# TYPE "))
                .unwrap();
            let (ty_name, ty) = ty.split_once(' ').unwrap();
            assert_eq!(ty_name, name, "{body}");
            families.push((name.to_owned(), ty.to_owned()));
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap();
        assert!(value.parse::<f64>().is_ok(), "{line}");
        let name = series.split('{').next().unwrap();
        let (family, ty) = families.last().expect("a sample before any # TYPE");
        let suffix = name
            .strip_prefix(family.as_str())
            .unwrap_or_else(|| panic!("{line}"));
        match ty.as_str() {
            "counter" => assert_eq!(suffix, "_total", "{line}"),
            "gauge" => assert_eq!(suffix, "", "{line}"),
            other => panic!("unexpected type {other}"),
        }
    }
    panic!("no # EOF:\n{body}");
}

#[tokio::test]
async fn metrics_are_served_as_openmetrics_under_their_names() {
    let answer = get("/metrics").await;
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(
        head.lines().any(
            |l| l == "content-type: application/openmetrics-text; version=1.0.0; charset=utf-8"
        ),
        "{head}"
    );
    let families = parse(body);
    for (name, ty) in [
        ("vtsnap_admission_bad_reviews", "counter"),
        ("vtsnap_admission_events_dropped", "counter"),
        ("vtsnap_admission_cache_synced", "gauge"),
        ("vtsnap_admission_snapshots_cached", "gauge"),
        ("vtsnap_admission_connections_open", "gauge"),
        ("vtsnap_admission_connections_closed", "counter"),
    ] {
        assert!(
            families.contains(&(name.to_owned(), ty.to_owned())),
            "{name} {ty} missing:\n{body}"
        );
    }
    assert!(
        body.contains("\nvtsnap_admission_cache_synced 1\n"),
        "{body}"
    );
    assert!(
        body.contains("\nvtsnap_admission_connections_closed_total{reason=\"evicted\"} 0\n"),
        "{body}"
    );
}
