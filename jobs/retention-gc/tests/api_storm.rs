//! `vtsnap-gc run` against a busy API server (docs/design.md §3.8): under a 429 storm that
//! clears it does exactly what it does on a quiet one; under one that does not clear it
//! ends with its normal failure, having deleted nothing.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};
use vtsnap_core::config::Config;
use vtsnap_core::retry::RetryPolicy;
use vtsnap_core::snapshot::{GROUP, PLURAL};
use vtsnap_gc::act::{GcOptions, run};
use vtsnap_testkit::fake_kube::{FakeKube, storm_every_other, storm_without_end};

/// The programs' bounds, with waits of milliseconds (`Retry-After` is capped by them).
const FAST: RetryPolicy = RetryPolicy {
    max_wait: Duration::from_millis(5),
    first_wait: Duration::from_millis(1),
    ..RetryPolicy::DEFAULT
};

fn ago(hours: i64) -> String {
    Timestamp::from_second(Timestamp::now().as_second() - hours * 3600)
        .unwrap()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn snap_obj(name: &str, hours: i64) -> Value {
    json!({
        "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
        "metadata": {"name": name, "namespace": "vitess", "creationTimestamp": ago(hours), "labels": {
            "app.kubernetes.io/managed-by": "vtsnap", "vtsnap.io/cluster": "example", "vtsnap.io/keyspace": "commerce",
            "vtsnap.io/shard": "x-x", "vtsnap.io/phase": "ready", "vtsnap.io/mode": "cold"}},
        "spec": {"source": {"persistentVolumeClaimName": "pvc"}},
        "status": {"boundVolumeSnapshotContentName": "c", "creationTime": ago(hours), "readyToUse": true}
    })
}

/// Five ready snapshots of one shard, maxCount 3: two to delete.
fn world() -> FakeKube {
    let kube = FakeKube::new();
    kube.put_json(
        "planetscale.com",
        "vitessclusters",
        json!({"apiVersion": "planetscale.com/v2", "kind": "VitessCluster",
               "metadata": {"name": "example", "namespace": "vitess", "uid": "c1a55e5e-0000-4000-8000-000000000001"},
               "spec": {"keyspaces": [{"name": "commerce", "partitionings": [{"equal": {"parts": 1}}]}]}}),
    );
    for i in 0..5 {
        kube.put_json(GROUP, PLURAL, snap_obj(&format!("snap-{i}"), i + 1));
    }
    kube
}

fn config() -> Config {
    Config::from_yaml(
        "clusters:\n- name: example\n  namespace: vitess\n  retention: {maxCount: 3}\n",
    )
    .unwrap()
}

fn opts() -> GcOptions {
    GcOptions {
        dry_run: false,
        only_cluster: None,
        node_timeout: Duration::from_secs(2),
    }
}

fn throttled(kube: &FakeKube) -> usize {
    kube.log().iter().filter(|l| l.status == 429).count()
}

#[tokio::test]
async fn a_storm_that_clears_changes_nothing_of_the_run() {
    let kube = world();
    kube.fault(storm_every_other(1));
    let r = run(&config(), &opts(), kube.client_with_retries("gc", FAST)).await;
    assert_eq!(r.exit_code, 0, "{r:?}");
    assert_eq!(r.run.deleted, ["vitess/snap-3", "vitess/snap-4"]);
    assert_eq!(kube.list_json(GROUP, PLURAL).len(), 3);
    assert!(throttled(&kube) >= 3, "the storm did not blow");
}

#[tokio::test]
async fn a_storm_that_does_not_clear_fails_the_run_and_deletes_nothing() {
    let kube = world();
    kube.fault(storm_without_end(1));
    let r = run(&config(), &opts(), kube.client_with_retries("gc", FAST)).await;
    assert_eq!(r.exit_code, 1, "{r:?}");
    assert!(r.run.deleted.is_empty(), "{r:?}");
    assert_eq!(kube.list_json(GROUP, PLURAL).len(), 5);
    assert!(kube.writes().is_empty(), "{:?}", kube.writes());
    // Each read had its whole bound of tries, no more.
    assert_eq!(throttled(&kube) % FAST.tries as usize, 0);
}
