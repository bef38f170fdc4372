//! The job side of the fence lease against the fake Kubernetes API.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use serde_json::json;
use vtsnap_core::fence::client::{self, FenceClientError, FenceSpec};
use vtsnap_core::fence::{
    ANN_NODE_ERROR, ANN_NODE_STATE, ANN_REQUEST, Fence, NodeState, Request, lease_name,
};
use vtsnap_core::vtctld::TabletType;
use vtsnap_testkit::fake_kube::{FakeKube, Fault, Verb, is};

fn spec(holder: &str, duration_secs: u64) -> FenceSpec {
    FenceSpec {
        namespace: "vitess".into(),
        name: lease_name("example", "commerce", "x-80"),
        holder: holder.into(),
        node: "node-2".into(),
        lease_duration: Duration::from_secs(duration_secs),
        target_pod: "pod".into(),
        target_pod_uid: "uid".into(),
        tablet_alias: "zone1-0000000101".parse().unwrap(),
        original_type: TabletType::Replica,
        vtctld: "vtctld:15999".into(),
        mode: "cold".into(),
        max_hold: Duration::from_secs(600),
    }
}

fn api(kube: &FakeKube) -> Api<Lease> {
    Api::namespaced(kube.client(), "vitess")
}

#[tokio::test]
async fn of_two_racing_jobs_exactly_one_gets_the_fence() {
    let kube = FakeKube::new();
    let (api_a, api_b) = (api(&kube), api(&kube));
    let (spec_a, spec_b) = (spec("job-a", 30), spec("job-b", 30));
    let (a, b) = tokio::join!(
        client::acquire(&api_a, &spec_a, Request::Probe),
        client::acquire(&api_b, &spec_b, Request::Probe)
    );
    let wins = [a.is_ok(), b.is_ok()].iter().filter(|w| **w).count();
    assert_eq!(wins, 1, "exactly one job must win: {a:?} / {b:?}");
    let loser = if a.is_ok() { b } else { a };
    assert!(
        matches!(loser, Err(FenceClientError::Held { .. })),
        "{loser:?}"
    );
    let l = api(&kube).get(&spec("x", 1).name).await.unwrap();
    let f = Fence::from_lease(&l).unwrap();
    assert_eq!(
        (f.request, f.original_type),
        (Request::Probe, TabletType::Replica)
    );
    assert_eq!(l.metadata.labels.unwrap()["vtsnap.io/node"], "node-2");
}

#[tokio::test]
async fn an_expired_fence_must_be_recovered_before_it_is_taken() {
    let kube = FakeKube::new();
    let l = client::acquire(&api(&kube), &spec("dead-job", 30), Request::Hold)
        .await
        .unwrap();
    // The holder's last renewal was an hour ago.
    let name = l.metadata.name.unwrap();
    let mut v = kube
        .get_json("coordination.k8s.io", "leases", "vitess", &name)
        .unwrap();
    v["spec"]["renewTime"] = json!("2026-01-01T00:00:00.000000Z");
    kube.put_json("coordination.k8s.io", "leases", v);
    let e = client::acquire(&api(&kube), &spec("next-job", 30), Request::Probe)
        .await
        .unwrap_err();
    assert!(
        matches!(e, FenceClientError::Expired { ref holder, .. } if holder == "dead-job"),
        "{e}"
    );
}

#[tokio::test]
async fn renewals_are_compare_and_swap_and_only_by_the_holder() {
    let kube = FakeKube::new();
    let a = api(&kube);
    let l = client::acquire(&a, &spec("job", 30), Request::Probe)
        .await
        .unwrap();
    let name = l.metadata.name.clone().unwrap();
    let renewed = client::renew(&a, &name, "job", Some(Request::Stop))
        .await
        .unwrap();
    let ann = renewed.metadata.annotations.as_ref().unwrap();
    assert_eq!(ann[ANN_REQUEST], "stop");
    assert_ne!(
        renewed.metadata.resource_version,
        l.metadata.resource_version
    );
    // A new request voids the node's answer to the previous one.
    let mut v = kube
        .get_json("coordination.k8s.io", "leases", "vitess", &name)
        .unwrap();
    v["metadata"]["annotations"][ANN_NODE_STATE] = json!("failed");
    v["metadata"]["annotations"][ANN_NODE_ERROR] = json!("boom");
    kube.put_json("coordination.k8s.io", "leases", v);
    let again = client::renew(&a, &name, "job", Some(Request::Hold))
        .await
        .unwrap();
    let ann = again.metadata.annotations.as_ref().unwrap();
    assert!(!ann.contains_key(ANN_NODE_STATE) && !ann.contains_key(ANN_NODE_ERROR));
    // Renewing without a new request keeps the node's answer.
    let mut v = kube
        .get_json("coordination.k8s.io", "leases", "vitess", &name)
        .unwrap();
    v["metadata"]["annotations"][ANN_NODE_STATE] = json!("held");
    kube.put_json("coordination.k8s.io", "leases", v);
    let kept = client::renew(&a, &name, "job", Some(Request::Hold))
        .await
        .unwrap();
    assert_eq!(
        kept.metadata.annotations.as_ref().unwrap()[ANN_NODE_STATE],
        "held"
    );
    // Someone else's lease is never renewed.
    let e = client::renew(&a, &name, "another-job", None)
        .await
        .unwrap_err();
    assert!(
        matches!(e, FenceClientError::Lost { ref holder, .. } if holder == "job"),
        "{e}"
    );
    // A stale delete is refused; a fresh one succeeds; a second one is already done.
    let stale = l.metadata.resource_version.as_deref();
    assert!(matches!(
        client::delete_if_unchanged(&a, &name, stale)
            .await
            .unwrap_err(),
        FenceClientError::Conflict { .. }
    ));
    let fresh = a.get(&name).await.unwrap().metadata.resource_version;
    client::delete_if_unchanged(&a, &name, fresh.as_deref())
        .await
        .unwrap();
    client::delete_if_unchanged(&a, &name, fresh.as_deref())
        .await
        .unwrap();
}

#[tokio::test]
async fn renewals_retry_conflicts_with_the_node_helper() {
    let kube = FakeKube::new();
    let a = api(&kube);
    let l = client::acquire(&a, &spec("job", 30), Request::Probe)
        .await
        .unwrap();
    let name = l.metadata.name.clone().unwrap();
    // Two writes land between our read and our replace: both are conflicts, retried.
    kube.fault(Fault::on(is(Verb::Update, "leases")).status(409).times(2));
    let r = client::renew(&a, &name, "job", Some(Request::Stop))
        .await
        .unwrap();
    assert_eq!(r.metadata.annotations.unwrap()[ANN_REQUEST], "stop");
    // A conflict that never ends is reported as a conflict, not as success.
    kube.fault(Fault::on(is(Verb::Update, "leases")).status(409).always());
    let e = client::renew(&a, &name, "job", None).await.unwrap_err();
    assert!(matches!(e, FenceClientError::Conflict { .. }), "{e}");
}

/// The "node" answers `stopped` on the lease `name`, `after` from now.
fn answer_later(kube: &FakeKube, name: &str, after: Duration) {
    let (k, n) = (kube.clone(), name.to_owned());
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        let mut v = k
            .get_json("coordination.k8s.io", "leases", "vitess", &n)
            .unwrap();
        v["metadata"]["annotations"][ANN_NODE_STATE] = json!("stopped");
        k.put_json("coordination.k8s.io", "leases", v);
    });
}

#[tokio::test]
async fn waiting_for_the_node_sees_its_answer_or_its_refusal() {
    let kube = FakeKube::new();
    let a = api(&kube);
    let l = client::acquire(&a, &spec("job", 30), Request::Stop)
        .await
        .unwrap();
    let name = l.metadata.name.clone().unwrap();
    // The "node" answers a little later.
    answer_later(&kube, &name, Duration::from_millis(500));
    let got = client::await_node(
        &a,
        &name,
        "job",
        NodeState::Stopped,
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    assert_eq!(got.metadata.annotations.unwrap()[ANN_NODE_STATE], "stopped");

    let mut v = kube
        .get_json("coordination.k8s.io", "leases", "vitess", &name)
        .unwrap();
    v["metadata"]["annotations"][ANN_NODE_STATE] = json!("refused");
    v["metadata"]["annotations"][ANN_NODE_ERROR] = json!("tablet zone1-0000000101 is the primary");
    kube.put_json("coordination.k8s.io", "leases", v);
    let e = client::await_node(&a, &name, "job", NodeState::Held, Duration::from_secs(10))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("is the primary"), "{e}");
}

#[tokio::test]
async fn an_unreadable_conflict_is_never_taken_as_free() {
    let kube = FakeKube::new();
    let a = api(&kube);
    client::acquire(&a, &spec("job-a", 30), Request::Probe)
        .await
        .unwrap();
    // The read that would tell whether the holder is alive fails: no fence is taken.
    kube.fault(Fault::on(is(Verb::Get, "leases")).status(503));
    let e = client::acquire(&a, &spec("job-b", 30), Request::Probe)
        .await
        .unwrap_err();
    assert!(matches!(e, FenceClientError::Kube { .. }), "{e}");
}

/// The node's answer arrives `after` (virtual time) into the wait; returns how long the
/// wait took, in virtual time.
async fn answered_after(kube: &FakeKube, after: Duration) -> Duration {
    answered_after_watches_end(kube, after, None).await
}

/// As [`answered_after`], with every open watch ended by the server at `watches_end`.
async fn answered_after_watches_end(
    kube: &FakeKube,
    after: Duration,
    watches_end: Option<Duration>,
) -> Duration {
    if let Some(at) = watches_end {
        let k = kube.clone();
        tokio::spawn(async move {
            tokio::time::sleep(at).await;
            k.drop_watches();
        });
    }
    let a = api(kube);
    let l = client::acquire(&a, &spec("job", 30), Request::Stop)
        .await
        .unwrap();
    let name = l.metadata.name.clone().unwrap();
    answer_later(kube, &name, after);
    let start = tokio::time::Instant::now();
    client::await_node(
        &a,
        &name,
        "job",
        NodeState::Stopped,
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    start.elapsed()
}

// Virtual time: the durations below are exact, not measured on a busy machine. 1,030 ms
// is between two 200 ms polls, so a wait that polls ends at 1,200 ms; one woken by the
// watch ends when the answer is written.
const ANSWER_AT: Duration = Duration::from_millis(1_030);

#[tokio::test(start_paused = true)]
async fn the_nodes_answer_wakes_the_wait_through_its_watch() {
    let kube = FakeKube::new();
    let took = answered_after(&kube, ANSWER_AT).await;
    assert!(
        took < ANSWER_AT + Duration::from_millis(50),
        "the wait did not wake on the watch event: {took:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn without_a_watch_the_wait_still_sees_the_answer_by_polling() {
    let kube = FakeKube::new();
    // 403, as a Role without `watch` answers: the open fails and is counted.
    kube.fault(Fault::on(is(Verb::Watch, "leases")).status(403).times(100));
    let before = vtsnap_core::reconcile::watch::fallbacks();
    let took = answered_after(&kube, ANSWER_AT).await;
    assert!(
        vtsnap_core::reconcile::watch::fallbacks() > before,
        "the refused watch was not counted as a fallback"
    );
    assert!(
        took >= Duration::from_millis(1_200) && took < Duration::from_millis(1_450),
        "a refused watch must fall back to the 200 ms poll: {took:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_watch_the_server_ends_is_opened_again() {
    let kube = FakeKube::new();
    let took = answered_after_watches_end(&kube, ANSWER_AT, Some(Duration::from_millis(500))).await;
    assert!(
        took < ANSWER_AT + Duration::from_millis(50),
        "after the server ended the watch, the wait fell back to polling: {took:?}"
    );
}
