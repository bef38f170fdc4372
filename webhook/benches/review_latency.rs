//! Review latency of the admission webhook with 10 and 1,000 (and, without `--quick`,
//! 10,000) of vtsnap's VolumeSnapshots in its watch-backed cache (10 per shard), over
//! HTTPS on a kept-alive connection, as the API server calls it. The caches are fed by
//! the test kit's in-memory API server (a fake). Prints a Markdown table of p50, p99 and
//! max; checks the shape, not the clock: p99 at 1,000 snapshots must stay within 3× of
//! p99 at 10 (a review reads its shard's few snapshots, never the whole cache).
//!
//! `cargo bench -p vtsnap-admission --bench review_latency [-- --quick]`

// A measurement program: a failed unwrap ends it with a message, which is what we want.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::json;
use vtsnap_admission::cache::Caches;
use vtsnap_admission::decide::Settings;
use vtsnap_admission::inventory::Inventory;
use vtsnap_admission::server::{App, serve};
use vtsnap_admission::tls::{Reloading, server_config};
use vtsnap_core::config::Config;
use vtsnap_core::shard::ShardRef;
use vtsnap_core::snapshot::choice::{ShardState, TabletVersion};
use vtsnap_testkit::fake_kube::FakeKube;
use vtsnap_testkit::https::{Connection, TestCert};
use vtsnap_testkit::operator_objects::{operator_shard, pvc_template};

struct Latency {
    snapshots: usize,
    reviews: usize,
    p50: Duration,
    p99: Duration,
    max: Duration,
}

fn shard_name(i: usize) -> String {
    // Key ranges of a 4-hex-digit split, so every shard is distinct.
    format!("{:04x}-{:04x}", i, i + 1)
}

async fn measure(snapshots: usize, reviews: usize) -> Latency {
    let kube = FakeKube::new();
    let now = Timestamp::now();
    for i in 0..snapshots {
        let shard = if i < 10 {
            "-".to_owned()
        } else {
            shard_name(i / 10)
        };
        let s = operator_shard().named("commerce", &shard);
        let cut = now - SignedDuration::from_mins(i64::try_from(i % 10).unwrap() * 30 + 5);
        kube.put_json(
            "snapshot.storage.k8s.io",
            "volumesnapshots",
            s.snapshot(&format!("s-{i:06}"), cut).object(),
        );
    }
    let config = Arc::new(
        Config::from_yaml(
            "clusters:\n- name: example\n  namespace: vitess\n  restore: {enabled: true}\n",
        )
        .unwrap(),
    );
    let (caches, _) = Caches::start(&kube.client(), &BTreeSet::from(["vitess".to_owned()]));
    let start = Instant::now();
    while !caches.synced() || caches.snapshot_count() < snapshots {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the cache never filled"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let key = ShardRef {
        namespace: "vitess".into(),
        cluster: "example".into(),
        keyspace: "commerce".into(),
        shard: "-".parse().unwrap(),
    };
    caches.shard_states().write().unwrap().insert(
        key.clone(),
        ShardState {
            key,
            primary: Some("zone1-0000000101".into()),
            tablets: vec![TabletVersion {
                alias: "zone1-0000000101".into(),
                version: Some("8.0.36".into()),
            }],
            refreshed_at: Timestamp::now(),
            error: None,
        },
    );
    let cert = TestCert::new(&["127.0.0.1"]);
    let dir = tempfile::tempdir().unwrap();
    let (c, k) = cert.write(dir.path());
    let tls = server_config(Reloading::load(&c, &k).unwrap()).unwrap();
    let settings = Settings {
        restore_image: None,
        shard_state_max_age: Duration::from_secs(3600),
    };
    let (app, _events) = App::new(config, settings, caches, kube.client());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(serve(listener, tls, app, async {
        let _ = stopped.await;
    }));
    let pvc = operator_shard()
        .tablet("replica", 4)
        .pvc(&pvc_template("100Gi"));
    // A dry run: the decision is the whole review, and no Event is queued.
    let body = serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u", "kind": {"group": "", "version": "v1", "kind": "PersistentVolumeClaim"},
                    "operation": "CREATE", "namespace": "vitess", "dryRun": true, "object": pvc}}))
    .unwrap();
    let mut conn = Connection::open(addr, &cert).await.unwrap();
    let opened = Instant::now();
    // Warm up, and check the answer is the real one.
    let a = conn.send("POST", "/mutate", body.clone()).await.unwrap();
    assert!(a.body.contains("restored-from-snapshot"), "{}", a.body);
    let mut times = Vec::with_capacity(reviews);
    for i in 0..reviews {
        let t = Instant::now();
        let a = conn
            .send("POST", "/mutate", body.clone())
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "review {i} of {snapshots}, {:?} after the connection opened: {e}",
                    opened.elapsed()
                )
            });
        times.push(t.elapsed());
        assert_eq!(a.status, 200);
    }
    let _ = stop.send(());
    times.sort();
    let at = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
    Latency {
        snapshots,
        reviews,
        p50: at(0.50),
        p99: at(0.99),
        max: *times.last().unwrap(),
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let quick = std::env::args().any(|a| a == "--quick");
    let (sizes, reviews): (&[usize], usize) = if quick {
        (&[10, 1000], 300)
    } else {
        (&[10, 1000, 10_000], 2000)
    };
    let mut rows = Vec::new();
    for &n in sizes {
        rows.push(measure(n, reviews).await);
    }
    println!("| snapshots cached | reviews | p50 | p99 | max |");
    println!("|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {} |",
            r.snapshots,
            r.reviews,
            ms(r.p50),
            ms(r.p99),
            ms(r.max)
        );
    }
    let ratio = rows[1].p99.as_secs_f64() / rows[0].p99.as_secs_f64().max(1e-6);
    println!("\np99 at 1,000 snapshots / p99 at 10: {ratio:.2} (must stay within 3)");
    if ratio > 3.0 {
        eprintln!("review latency grows with the cache: {ratio:.2}× from 10 to 1,000 snapshots");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
