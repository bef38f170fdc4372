//! `vtsnap-snapshot run` against a busy API server (docs/design.md §3.8): a 429 storm that
//! clears leaves the cold choreography as it is on a quiet server; one that never clears
//! ends the run with its normal failure, from the start with nothing touched, mid-hold
//! with the fence left for the node helper, which puts the tablet back.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use vtsnap_core::config::Config;
use vtsnap_core::fence::lease_name;
use vtsnap_core::reconcile::{Waited, wait_until};
use vtsnap_core::retry::RetryPolicy;
use vtsnap_core::shard::ShardName;
use vtsnap_core::snapshot::{GROUP, PLURAL};
use vtsnap_core::vtctld::TabletType;
use vtsnap_core::vtctld::messages::replicationdata::STATE_RUNNING;
use vtsnap_snapshot::run::{Outcome, ParkHook, RunOptions, Summary, run};
use vtsnap_testkit::fake_kube::{Fault, storm_every_other, storm_without_end};
use vtsnap_testkit::fake_shard::FakeShard;
use vtsnap_testkit::fixtures::shard;

/// The programs' bounds, with waits of milliseconds (`Retry-After` is capped by them).
const FAST: RetryPolicy = RetryPolicy {
    max_wait: Duration::from_millis(5),
    first_wait: Duration::from_millis(1),
    ..RetryPolicy::DEFAULT
};

fn config(w: &FakeShard) -> Config {
    Config::from_yaml(&format!(
        "clusters:\n- name: example\n  namespace: vitess\n  vtctld: \"{}\"\n  snapshot: {{cutTimeout: 2s, readyTimeout: 3s, maxHold: 10s}}\n",
        w.vt.endpoint()
    ))
    .unwrap()
}

fn opts(park_after: Option<ParkHook>) -> RunOptions {
    RunOptions {
        holder: "job-a".into(),
        lease_duration: Duration::from_secs(3),
        node_timeout: Duration::from_secs(5),
        poll: Duration::from_millis(20),
        park_after,
        ..RunOptions::default()
    }
}

async fn go(w: &FakeShard, park_after: Option<ParkHook>) -> Summary {
    run(
        &config(w),
        &ShardName::new("example", "commerce", "-"),
        &opts(park_after),
        w.kube.client_with_retries("snapshot", FAST),
    )
    .await
}

fn lease() -> String {
    lease_name("example", "commerce", "x-x")
}

fn lease_left(w: &FakeShard) -> bool {
    w.kube
        .get_json("coordination.k8s.io", "leases", "vitess", &lease())
        .is_some()
}

fn assert_tablet_whole(w: &FakeShard, alias: &str) {
    let t = w.vtctld.tablet(&alias.parse().unwrap()).unwrap();
    assert_eq!(t.tablet.r#type, TabletType::Replica as i32, "{alias}");
    assert_eq!(t.status.unwrap().io_state, STATE_RUNNING, "{alias}");
}

fn throttled(w: &FakeShard) -> usize {
    w.kube.log().iter().filter(|l| l.status == 429).count()
}

#[tokio::test]
async fn a_storm_that_clears_leaves_the_cold_snapshot_as_it_is() {
    let w = FakeShard::start(shard().replicas(3).primary(1)).await;
    w.kube.fault(storm_every_other(1));
    let s = go(&w, None).await;
    assert_eq!((s.exit_code, s.outcome), (0, Outcome::Done), "{s:?}");
    assert_eq!(w.kube.list_json(GROUP, PLURAL).len(), 1);
    assert!(!lease_left(&w));
    assert_tablet_whole(&w, s.target.as_deref().unwrap());
    assert!(throttled(&w) >= 5, "the storm did not blow");
}

#[tokio::test]
async fn a_storm_from_the_start_that_never_clears_touches_nothing() {
    let w = FakeShard::start(shard().replicas(3).primary(1)).await;
    w.kube.fault(storm_without_end(1));
    let s = go(&w, None).await;
    assert_eq!(s.exit_code, 1, "{s:?}");
    assert!(w.kube.writes().is_empty(), "{:?}", w.kube.writes());
    assert!(w.node.requests().is_empty(), "{:?}", w.node.requests());
    let vt_writes: Vec<String> = w
        .vtctld
        .calls()
        .into_iter()
        .filter(|c| c.starts_with("ChangeTabletType") || c.starts_with("StopReplication"))
        .collect();
    assert!(vt_writes.is_empty(), "{vt_writes:?}");
}

#[tokio::test]
async fn a_storm_mid_hold_that_never_clears_leaves_the_fence_to_the_node_helper() {
    let w = FakeShard::start(shard().replicas(3).primary(1)).await;
    let storm = Arc::new(AtomicBool::new(false));
    let on = storm.clone();
    w.kube.fault(
        Fault::on(move |_| on.load(Ordering::SeqCst))
            .throttle(1)
            .always(),
    );
    let hook = ParkHook(Arc::new(move |step: &str| {
        if step == "mysqld held" {
            storm.store(true, Ordering::SeqCst);
        }
        false
    }));
    let s = go(&w, Some(hook)).await;
    assert!(s.steps.iter().any(|x| x == "mysqld held"), "{s:?}");
    assert_eq!(s.exit_code, 4, "the fence could not be released: {s:?}");
    assert!(
        w.kube.list_json(GROUP, PLURAL).is_empty(),
        "no snapshot was cut"
    );
    assert!(lease_left(&w), "the fence is left for recovery");

    // The storm passes; the lease, unrenewed, expires and the node helper puts the tablet back.
    w.kube.clear_faults();
    let leases: Api<Lease> = Api::namespaced(w.kube.client(), "vitess");
    let gone = wait_until(&leases, &lease(), Duration::from_secs(30), |l| l.is_none()).await;
    assert!(matches!(gone, Waited::Met(None)), "{gone:?}");
    assert_eq!(w.node.recovered(), [lease()]);
    assert_tablet_whole(&w, s.target.as_deref().unwrap());
}
