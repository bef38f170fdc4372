//! The textfile `vtsnap-gc run --metrics-file` writes, read back from disk by a strict
//! parser of the Prometheus text format: the `vtsnap_gc_*` gauges docs/gc.md lists, each
//! unlabelled, with the run's counts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use vtsnap_gc::decide::{Plan, SkipReason, Skipped};
use vtsnap_gc::metrics::registry;
use vtsnap_gc::observe::Kind as ObjectKind;
use vtsnap_gc::report::{GcReport, GcRun};
use vtsnap_testkit::prom_parse::{Format, Kind, parse};

fn skipped(name: &str) -> Skipped {
    Skipped {
        kind: ObjectKind::Lease,
        namespace: "ns".into(),
        name: name.into(),
        reason: SkipReason::Unreadable,
        message: format!("Lease ns/{name}: spec.renewTime is missing"),
    }
}

/// The file a run with `r` writes, as each gauge's value.
fn written(r: &GcReport, now: i64) -> BTreeMap<String, f64> {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("vtsnap-gc.prom");
    vtsnap_core::metrics::write_textfile(&p, &registry(r, now));
    let text = std::fs::read_to_string(&p).unwrap();
    let e = parse(&text, Format::Text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    e.families
        .iter()
        .map(|f| {
            assert_eq!(f.kind, Kind::Gauge, "{f:?}");
            assert!(f.help.as_deref().is_some_and(|h| !h.is_empty()), "{f:?}");
            assert_eq!(f.samples.len(), 1, "{f:?}");
            let s = &f.samples[0];
            assert_eq!(s.name, f.name);
            assert!(s.labels.is_empty(), "{s:?}");
            (f.name.clone(), s.value)
        })
        .collect()
}

#[test]
fn every_gauge_with_the_runs_counts() {
    let mut run = GcRun::new(
        false,
        Plan {
            skipped: vec![skipped("a"), skipped("b"), skipped("c")],
            ..Plan::default()
        },
        vec!["other: boom".into()],
    );
    run.deleted = vec!["ns/s1".into(), "ns/s2".into()];
    run.owner_refs_changed = 4;
    run.fences_recovered = vec!["ns/f".into()];
    run.marked_unusable = vec!["ns/s3".into()];
    run.unstuck = ["p1", "p2", "p3", "p4", "p5"]
        .map(|p| format!("ns/{p}"))
        .to_vec();
    let mut r = GcReport::new(run);
    r.exit_code = 1;
    let want: BTreeMap<String, f64> = [
        ("vtsnap_gc_last_run_timestamp_seconds", 1_700_000_123.0),
        ("vtsnap_gc_last_exit_code", 1.0),
        ("vtsnap_gc_snapshots_deleted", 2.0),
        ("vtsnap_gc_snapshots_kept", 0.0),
        ("vtsnap_gc_owner_references_changed", 4.0),
        ("vtsnap_gc_fences_recovered", 1.0),
        ("vtsnap_gc_snapshots_marked_unusable", 1.0),
        ("vtsnap_gc_restores_unstuck", 5.0),
        ("vtsnap_gc_unreadable_namespaces", 1.0),
        ("vtsnap_gc_skipped_objects", 3.0),
    ]
    .into_iter()
    .map(|(n, v)| (n.to_owned(), v))
    .collect();
    assert_eq!(written(&r, 1_700_000_123), want);
}

#[test]
fn a_clean_run_is_all_zeros_but_its_time() {
    let r = GcReport::new(GcRun::new(true, Plan::default(), Vec::new()));
    let got = written(&r, 42);
    assert_eq!(got.len(), 10, "{got:?}");
    for (name, v) in &got {
        let want = if name == "vtsnap_gc_last_run_timestamp_seconds" {
            42.0
        } else {
            0.0
        };
        assert_eq!(*v, want, "{name}");
    }
}

/// The coverage headroom of each shard whose newest covered snapshot has one, labelled by
/// shard; a shard whose coverage is unknown has no series (there is no value to give).
#[test]
fn coverage_headroom_per_shard() {
    use vtsnap_gc::decide::{CoverageState, ShardCoverage};
    let shard = |s: &str, state| ShardCoverage {
        namespace: "vitess".into(),
        cluster: "example".into(),
        keyspace: "commerce".into(),
        shard: s.into(),
        state,
    };
    let plan = Plan {
        coverage: vec![
            shard(
                "-80",
                CoverageState::Known {
                    newest_covered: Some("a".into()),
                    headroom_seconds: Some(86_400),
                    not_covered: vec![],
                    warning: None,
                },
            ),
            shard(
                "80-",
                CoverageState::Unknown {
                    why: "vtctld down".into(),
                },
            ),
        ],
        ..Plan::default()
    };
    let r = GcReport::new(GcRun::new(false, plan, Vec::new()));
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("vtsnap-gc.prom");
    vtsnap_core::metrics::write_textfile(&p, &registry(&r, 1));
    let text = std::fs::read_to_string(&p).unwrap();
    let e = parse(&text, Format::Text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let f = e
        .family("vtsnap_gc_coverage_headroom_seconds")
        .unwrap_or_else(|| panic!("no headroom family:\n{text}"));
    assert_eq!(f.kind, Kind::Gauge);
    assert_eq!(f.samples.len(), 1, "{f:?}");
    let s = &f.samples[0];
    assert_eq!(s.value, 86_400.0);
    let labels: Vec<(&str, &str)> = s
        .labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        labels,
        [
            ("cluster", "example"),
            ("keyspace", "commerce"),
            ("namespace", "vitess"),
            ("shard", "-80")
        ]
    );
}
