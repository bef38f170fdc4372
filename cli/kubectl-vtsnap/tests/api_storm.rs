//! `kubectl vtsnap status`'s reads against a busy API server (docs/design.md §3.8): under
//! a 429 storm that clears, the status is the one a quiet server gives; under one that
//! never clears the command's first read fails with the server's answer (the plugin's
//! exit 1, one line), having written nothing.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kubectl_vtsnap::decide::status::{self, Status};
use kubectl_vtsnap::observe::{find_install, parse_config, status_seen};
use serde_json::json;
use vtsnap_core::retry::RetryPolicy;
use vtsnap_testkit::fake_kube::{FakeKube, storm_every_other, storm_without_end};
use vtsnap_testkit::fake_vtctld::FakeVtctld;
use vtsnap_testkit::fixtures::shard;
use vtsnap_testkit::grpc::Running;

/// The programs' bounds, with waits of milliseconds (`Retry-After` is capped by them).
const FAST: RetryPolicy = RetryPolicy {
    max_wait: Duration::from_millis(5),
    first_wait: Duration::from_millis(1),
    ..RetryPolicy::DEFAULT
};

/// A shard with its tablets and an install whose config names its cluster.
async fn world() -> (FakeKube, FakeVtctld, Running) {
    let kube = FakeKube::new();
    let vtctld = FakeVtctld::new();
    shard().replicas(3).primary(1).install(&kube, &vtctld);
    let vt = vtctld.serve().await;
    let config = format!(
        "clusters:\n- name: example\n  namespace: vitess\n  vtctld: \"{}\"\n",
        vt.endpoint()
    );
    kube.put_json(
        "",
        "configmaps",
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "vtsnap-config", "namespace": "vtsnap-system",
                         "labels": {"app.kubernetes.io/name": "vtsnap"}},
            "data": {"config.yaml": config}}),
    );
    (kube, vtctld, vt)
}

/// What `status` reads and decides, as the plugin does it.
async fn status_of(kube: &kube::Client) -> Result<Status, String> {
    let (install, text) = find_install(kube, None).await?.expect("an install");
    let config = parse_config(&text)?;
    let seen = status_seen(kube, &install, &config).await?;
    let now = Timestamp::from_second(1_796_000_000).unwrap();
    Ok(status::status(&config, &seen, now))
}

#[tokio::test]
async fn a_storm_that_clears_gives_the_status_of_a_quiet_server() {
    let (kube, _vtctld, _vt) = world().await;
    let quiet = status_of(&kube.client()).await.unwrap();
    kube.fault(storm_every_other(1));
    let stormy = status_of(&kube.client_with_retries("plugin", FAST)).await;
    assert_eq!(stormy, Ok(quiet));
    assert!(kube.log().iter().filter(|l| l.status == 429).count() >= 3);
}

#[tokio::test]
async fn a_storm_that_never_clears_fails_with_the_servers_answer() {
    let (kube, _vtctld, _vt) = world().await;
    kube.fault(storm_without_end(1));
    let e = status_of(&kube.client_with_retries("plugin", FAST))
        .await
        .unwrap_err();
    assert!(e.contains("429") || e.contains("TooManyRequests"), "{e}");
    assert!(kube.writes().is_empty(), "{:?}", kube.writes());
    // The first read had its whole bound of tries, and the command stopped there.
    let tries = kube.log().len();
    assert_eq!(tries, FAST.tries as usize, "{:?}", kube.log());
}
