//! Job → helper reaction latency: from the moment a fence lease asking `release` is written
//! to the moment `vtsnap-node run` writes its answer (`node-state: released`) back. The
//! leases live in the test kit's in-memory API server (a fake); the helper is the real
//! daemon, in-process. Prints a Markdown table of p50, p99 and max.
//!
//! The shape check (the clock is not asserted): the helper follows its leases with a watch,
//! so its reaction must not depend on how often it resyncs. p99 must stay under a tenth of
//! the resync period it is given here.
//!
//! `cargo bench -p vtsnap-lab --bench node_reaction [-- --quick]`

// A measurement program: a failed unwrap ends it with a message, which is what we want.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use vtsnap_core::fence::*;
use vtsnap_node::cgroup::Roots;
use vtsnap_node::daemon::{self, DaemonConfig};
use vtsnap_testkit::fake_kube::FakeKube;

/// The helper's resync period in this bench: long, so that only the watch can explain a
/// fast reaction.
const RESYNC: Duration = Duration::from_secs(5);

fn lease(name: &str) -> serde_json::Value {
    let now = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S.%6fZ")
        .to_string();
    json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": "vitess", "labels": {LABEL_NODE: "node-a"}, "annotations": {
            ANN_TARGET_POD: "example-vttablet-zone1-tablet", ANN_TARGET_POD_UID: "6f1d2c3b-0000-4000-8000-000000000001",
            ANN_TABLET_ALIAS: "zone1-0000000101", ANN_ORIGINAL_TYPE: "replica", ANN_VTCTLD: "127.0.0.1:1",
            ANN_MODE: "cold", ANN_REQUEST: "release", ANN_MAX_HOLD: "600"}},
        "spec": {"holderIdentity": "snapshot-job", "leaseDurationSeconds": 60, "renewTime": now, "acquireTime": now}
    })
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[tokio::main]
async fn main() -> ExitCode {
    let quick = std::env::args().any(|a| a == "--quick");
    let samples = if quick { 20 } else { 200 };
    let kube = FakeKube::new();
    let dir = tempfile::tempdir().unwrap();
    let answered: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
    let a = answered.clone();
    kube.observe(
        |r| {
            r.plural == "leases"
                && r.verb.is_write()
                && r.verb != vtsnap_testkit::fake_kube::Verb::Create
        },
        move |r, _| {
            if let Some(name) = &r.name {
                a.lock().unwrap().push((name.clone(), Instant::now()));
            }
        },
    );
    let cfg = DaemonConfig {
        node: "node-a".into(),
        kubelet_dir: dir.path().join("kubelet"),
        roots: Roots::default(),
        host_root: "/".into(),
        state_dir: dir.path().join("state"),
        resync: RESYNC,
        listen: None,
        start_timeout: Duration::from_secs(10),
        shutdown_timeout: Duration::from_secs(10),
    };
    let h = daemon::start(cfg, kube.client()).await.unwrap();
    let mut took = Vec::with_capacity(samples);
    for i in 0..samples {
        let name = format!("vtsnap-bench-{i:04}");
        let written = Instant::now();
        kube.put_json("coordination.k8s.io", "leases", lease(&name));
        let limit = written + RESYNC * 4;
        let at = loop {
            if let Some(t) = answered
                .lock()
                .unwrap()
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, t)| *t)
            {
                break t;
            }
            assert!(
                Instant::now() < limit,
                "the helper never answered lease {name}"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        took.push(at - written);
        // Spread the writes over the helper's own timing (so a poll would show its average).
        tokio::time::sleep(Duration::from_millis(17 + (i as u64 * 37) % 100)).await;
    }
    h.stop().await;
    took.sort();
    let (p50, p99, max) = (
        percentile(&took, 0.5),
        percentile(&took, 0.99),
        took[took.len() - 1],
    );
    println!("| samples | resync | p50 | p99 | max |");
    println!("|---:|---:|---:|---:|---:|");
    println!(
        "| {samples} | {:.0} s | {:.1} ms | {:.1} ms | {:.1} ms |",
        RESYNC.as_secs_f64(),
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        max.as_secs_f64() * 1e3
    );
    if p99 * 10 > RESYNC {
        eprintln!(
            "reaction: p99 {p99:?} is not under a tenth of the resync period {RESYNC:?}: the helper is not following a watch"
        );
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
