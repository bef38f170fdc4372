//! The schedule reconciler against a busy API server (docs/design.md §3.8): under a 429
//! storm that clears it creates the shard's CronJob as on a quiet server; under one that
//! does not clear it ends with its normal failure (exit 1), having created nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::{Value, json};
use vtsnap_core::config::Config;
use vtsnap_core::exit::Exit;
use vtsnap_core::retry::RetryPolicy;
use vtsnap_snapshot::schedule::{reconcile, report};
use vtsnap_testkit::fake_kube::{FakeKube, storm_every_other, storm_without_end};

/// The programs' bounds, with waits of milliseconds (`Retry-After` is capped by them).
const FAST: RetryPolicy = RetryPolicy {
    max_wait: Duration::from_millis(5),
    first_wait: Duration::from_millis(1),
    ..RetryPolicy::DEFAULT
};

fn template() -> Value {
    let cronjob = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "template"},
        "spec": {"schedule": "0 0 1 1 *", "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "snapshot", "image": "vtsnap/vtsnap-snapshot:0.1.0", "args": ["run"]}]}}}}}});
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "vtsnap-snapshot-schedule", "namespace": "vtsnap", "uid": "cm-uid"},
        "data": {"fullname": "vtsnap", "cronjob.json": cronjob.to_string(), "overrides.json": "[]"}})
}

fn world() -> FakeKube {
    let kube = FakeKube::new();
    kube.put_json("", "configmaps", template());
    kube.put_json(
        "planetscale.com",
        "vitessclusters",
        json!({"apiVersion": "planetscale.com/v2", "kind": "VitessCluster",
            "metadata": {"name": "example", "namespace": "vitess"},
            "spec": {"keyspaces": [{"name": "commerce", "partitionings": [{"equal": {"parts": 1}}]}]}}),
    );
    kube
}

fn config() -> Config {
    Config::from_yaml("clusters:\n- name: example\n  namespace: vitess\n").unwrap()
}

fn cronjobs(kube: &FakeKube) -> Vec<String> {
    kube.list_json("batch", "cronjobs")
        .iter()
        .map(|c| c["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

async fn reconcile_once(kube: &FakeKube) -> Exit {
    let client = kube.client_with_retries("schedule", FAST);
    let (plan, outcomes) =
        reconcile(&client, &config(), "vtsnap", "vtsnap-snapshot-schedule").await;
    report::exit(&plan, &outcomes)
}

#[tokio::test]
async fn a_storm_that_clears_creates_the_shards_cronjob() {
    let kube = world();
    kube.fault(storm_every_other(1));
    assert_eq!(reconcile_once(&kube).await, Exit::Ok);
    assert_eq!(cronjobs(&kube), ["vtsnap-snap-example-commerce-x-x"]);
    assert!(kube.log().iter().filter(|l| l.status == 429).count() >= 3);
}

#[tokio::test]
async fn a_storm_that_does_not_clear_fails_and_creates_nothing() {
    let kube = world();
    kube.fault(storm_without_end(1));
    assert_eq!(reconcile_once(&kube).await, Exit::Failed);
    assert!(cronjobs(&kube).is_empty());
    assert!(kube.writes().is_empty(), "{:?}", kube.writes());
}
