//! `/metrics` of the node helper scraped over HTTP as Prometheus does, and the body read by
//! a strict OpenMetrics parser: every family docs/node.md lists, with its type, labels and
//! values after known events — and nothing else.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use vtsnap_node::daemon::http::{self, Limits};
use vtsnap_node::daemon::metrics::{Cause, Metrics};
use vtsnap_testkit::prom_parse::{Exposition, Format, Kind, parse};

/// One GET on the real listener; the status line, the headers and the body.
async fn scrape(m: &Metrics) -> (String, Vec<String>, String) {
    let limits = Limits {
        max_connections: 4,
        header_read_timeout: Duration::from_secs(5),
        connection_timeout: Duration::from_secs(15),
    };
    let (addr, task) = http::serve("127.0.0.1:0".parse().unwrap(), m.clone(), limits)
        .await
        .unwrap();
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_string(&mut answer))
        .await
        .unwrap()
        .unwrap();
    task.abort();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    let mut lines = head.lines();
    let status = lines.next().unwrap().to_owned();
    (
        status,
        lines.map(str::to_lowercase).collect(),
        body.to_owned(),
    )
}

async fn scrape_parsed(m: &Metrics) -> Exposition {
    let (status, headers, body) = scrape(m).await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        headers.iter().any(
            |h| h == "content-type: application/openmetrics-text; version=1.0.0; charset=utf-8"
        ),
        "{headers:?}"
    );
    parse(&body, Format::OpenMetrics).unwrap_or_else(|e| panic!("{e}\n{body}"))
}

/// The value of the family's one unlabelled sample.
fn single(e: &Exposition, family: &str, sample: &str) -> f64 {
    let f = e.family(family).unwrap_or_else(|| panic!("no {family}"));
    assert_eq!(f.samples.len(), 1, "{f:?}");
    f.value(sample, &[]).unwrap_or_else(|| panic!("{f:?}"))
}

#[tokio::test]
async fn every_documented_family_with_its_type_labels_and_values() {
    let m = Metrics::default();
    m.set_holds_active(2);
    m.set_unreadable_entries(3);
    m.set_registry_set_aside(true);
    m.released(Cause::Watchdog, 1500);
    m.released(Cause::Request, 40);
    m.released(Cause::Expiry, 700_000);
    m.cycle();
    m.cycle();
    m.watch_failed();
    let e = scrape_parsed(&m).await;

    let want: BTreeMap<String, Kind> = [
        ("vtsnap_node_holds_active", Kind::Gauge),
        ("vtsnap_node_hold_duration_seconds", Kind::Histogram),
        ("vtsnap_node_last_hold_duration_seconds", Kind::Gauge),
        ("vtsnap_node_releases", Kind::Counter),
        ("vtsnap_node_reconcile_cycles", Kind::Counter),
        ("vtsnap_node_lease_watch_failures", Kind::Counter),
        ("vtsnap_node_registry_unreadable_entries", Kind::Gauge),
        ("vtsnap_node_registry_set_aside", Kind::Gauge),
    ]
    .into_iter()
    .map(|(n, k)| (n.to_owned(), k))
    .collect();
    assert_eq!(e.kinds(), want);
    for f in &e.families {
        assert!(f.help.as_deref().is_some_and(|h| !h.is_empty()), "{f:?}");
    }

    assert_eq!(
        single(&e, "vtsnap_node_holds_active", "vtsnap_node_holds_active"),
        2.0
    );
    assert_eq!(
        single(
            &e,
            "vtsnap_node_registry_unreadable_entries",
            "vtsnap_node_registry_unreadable_entries"
        ),
        3.0
    );
    assert_eq!(
        single(
            &e,
            "vtsnap_node_registry_set_aside",
            "vtsnap_node_registry_set_aside"
        ),
        1.0
    );
    assert_eq!(
        single(
            &e,
            "vtsnap_node_reconcile_cycles",
            "vtsnap_node_reconcile_cycles_total"
        ),
        2.0
    );
    assert_eq!(
        single(
            &e,
            "vtsnap_node_lease_watch_failures",
            "vtsnap_node_lease_watch_failures_total"
        ),
        1.0
    );
    // The most recent hold: 700 s.
    assert_eq!(
        single(
            &e,
            "vtsnap_node_last_hold_duration_seconds",
            "vtsnap_node_last_hold_duration_seconds"
        ),
        700.0
    );

    // Every cause, from the start, and nothing else.
    let releases = e.family("vtsnap_node_releases").unwrap();
    assert_eq!(releases.samples.len(), 4, "{releases:?}");
    for (cause, n) in [
        ("request", 1.0),
        ("expiry", 1.0),
        ("deleted", 0.0),
        ("watchdog", 1.0),
    ] {
        assert_eq!(
            releases.value("vtsnap_node_releases_total", &[("cause", cause)]),
            Some(n),
            "{cause}: {releases:?}"
        );
    }

    // The histogram: 0.04 s, 1.5 s and 700 s (above the last bucket, 600 s).
    let h = e.family("vtsnap_node_hold_duration_seconds").unwrap();
    let name = "vtsnap_node_hold_duration_seconds";
    assert_eq!(h.value(&format!("{name}_count"), &[]), Some(3.0));
    assert_eq!(h.value(&format!("{name}_sum"), &[]), Some(701.54));
    let buckets: Vec<(String, f64)> = h
        .samples
        .iter()
        .filter(|s| s.name == format!("{name}_bucket"))
        .map(|s| (s.labels["le"].clone(), s.value))
        .collect();
    let want: Vec<(String, f64)> = [
        ("0.1", 1.0),
        ("0.5", 1.0),
        ("1.0", 1.0),
        ("2.5", 2.0),
        ("5.0", 2.0),
        ("10.0", 2.0),
        ("30.0", 2.0),
        ("60.0", 2.0),
        ("120.0", 2.0),
        ("300.0", 2.0),
        ("600.0", 2.0),
        ("+Inf", 3.0),
    ]
    .into_iter()
    .map(|(le, n)| (le.to_owned(), n))
    .collect();
    assert_eq!(buckets, want);
}

#[tokio::test]
async fn a_fresh_helper_exports_zeros() {
    let e = scrape_parsed(&Metrics::default()).await;
    assert_eq!(e.families.len(), 8);
    for f in &e.families {
        for s in &f.samples {
            assert_eq!(s.value, 0.0, "{s:?}");
        }
    }
    let h = e.family("vtsnap_node_hold_duration_seconds").unwrap();
    assert_eq!(h.samples.len(), 11 + 1 + 2, "{h:?}");
}
