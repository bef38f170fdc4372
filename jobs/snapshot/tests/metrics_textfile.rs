//! The textfile `--metrics-file` writes, read back from disk by a strict parser of the
//! Prometheus text format: the families docs/snapshot.md lists, with their types, the
//! shard's labels on every sample, and the run's values.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use vtsnap_core::config::Mode;
use vtsnap_snapshot::metrics::registry;
use vtsnap_snapshot::run::{Outcome, Summary};
use vtsnap_testkit::prom_parse::{Exposition, Format, Kind, parse};

const NOW: i64 = 1_700_000_000;

/// The file a run of `cluster/keyspace/shard` writes, parsed.
fn written(s: &Summary, cluster: &str, keyspace: &str, shard: &str) -> Exposition {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("vtsnap.prom");
    vtsnap_core::metrics::write_textfile(&p, &registry(s, cluster, keyspace, shard, NOW));
    let text = std::fs::read_to_string(&p).unwrap();
    parse(&text, Format::Text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// Every family's one sample: its value, after checking it carries exactly `labels`.
fn values(e: &Exposition, labels: &[(&str, &str)]) -> BTreeMap<String, f64> {
    let want: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    e.families
        .iter()
        .filter(|f| f.name != "vtsnap_snapshot_last_outcome")
        .map(|f| {
            assert_eq!(f.kind, Kind::Gauge, "{f:?}");
            assert!(f.help.as_deref().is_some_and(|h| !h.is_empty()), "{f:?}");
            assert_eq!(f.samples.len(), 1, "{f:?}");
            let s = &f.samples[0];
            assert_eq!(s.name, f.name);
            assert_eq!(s.labels, want, "{f:?}");
            (f.name.clone(), s.value)
        })
        .collect()
}

fn outcome(e: &Exposition) -> Vec<BTreeMap<String, String>> {
    let f = e.family("vtsnap_snapshot_last_outcome").unwrap();
    assert_eq!(f.kind, Kind::Gauge);
    assert!(f.samples.iter().all(|s| s.value == 1.0), "{f:?}");
    f.label_sets()
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn a_done_cold_run() {
    let s = Summary {
        outcome: Outcome::Done,
        exit_code: 0,
        mode: Some(Mode::Cold),
        fence_window_ms: Some(1500),
        cut_latency_ms: Some(250),
        ready_latency_ms: Some(4000),
        ..Summary::default()
    };
    let shard = [
        ("cluster", "example"),
        ("keyspace", "commerce"),
        ("shard", "-80"),
    ];
    let e = written(&s, "example", "commerce", "-80");
    let want: BTreeMap<String, f64> = [
        ("vtsnap_snapshot_last_run_timestamp_seconds", NOW as f64),
        ("vtsnap_snapshot_last_success_timestamp_seconds", NOW as f64),
        ("vtsnap_snapshot_last_exit_code", 0.0),
        ("vtsnap_snapshot_fence_window_seconds", 1.5),
        ("vtsnap_snapshot_cut_latency_seconds", 0.25),
        ("vtsnap_snapshot_ready_latency_seconds", 4.0),
    ]
    .into_iter()
    .map(|(n, v)| (n.to_owned(), v))
    .collect();
    assert_eq!(values(&e, &shard), want);
    assert_eq!(
        outcome(&e),
        vec![labels(&[
            ("cluster", "example"),
            ("keyspace", "commerce"),
            ("shard", "-80"),
            ("outcome", "done"),
            ("mode", "cold"),
        ])]
    );
    assert_eq!(e.families.len(), 7);
}

#[test]
fn a_refused_online_run_exports_no_success_and_no_latencies() {
    let s = Summary {
        outcome: Outcome::Refused,
        exit_code: 3,
        mode: Some(Mode::Online),
        ..Summary::default()
    };
    // Label values the format must escape come back as they were.
    let cluster = "a\"b\\c\nd";
    let e = written(&s, cluster, "k", "-");
    let shard = [("cluster", cluster), ("keyspace", "k"), ("shard", "-")];
    let want: BTreeMap<String, f64> = [
        ("vtsnap_snapshot_last_run_timestamp_seconds", NOW as f64),
        ("vtsnap_snapshot_last_exit_code", 3.0),
    ]
    .into_iter()
    .map(|(n, v)| (n.to_owned(), v))
    .collect();
    assert_eq!(values(&e, &shard), want);
    assert_eq!(
        outcome(&e),
        vec![labels(&[
            ("cluster", cluster),
            ("keyspace", "k"),
            ("shard", "-"),
            ("outcome", "refused"),
            ("mode", "online"),
        ])]
    );
}

#[test]
fn a_dry_run_is_no_success() {
    let s = Summary {
        outcome: Outcome::Done,
        exit_code: 0,
        dry_run: true,
        ..Summary::default()
    };
    let e = written(&s, "e", "k", "-");
    assert!(
        e.family("vtsnap_snapshot_last_success_timestamp_seconds")
            .is_none()
    );
    // A run that stopped before its mode was known: the mode label is empty.
    assert_eq!(outcome(&e)[0]["mode"], "");
}
