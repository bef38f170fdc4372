//! Waiting on one object against the fake Kubernetes API: broken watches are watched
//! again, a refusal ends the wait at once, and the limit returns the object as read.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::json;
use vtsnap_core::reconcile::{Read, Waited, wait_until};
use vtsnap_testkit::fake_kube::{FakeKube, Fault, FaultAction, Verb, is};

fn counter(n: u32) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "counter", "namespace": "ns"},
        "data": {"n": n.to_string()}
    })
}

fn with_counter() -> FakeKube {
    let kube = FakeKube::new();
    kube.put_json("", "configmaps", counter(0));
    kube
}

fn api(kube: &FakeKube) -> Api<ConfigMap> {
    Api::namespaced(kube.client(), "ns")
}

fn n(cm: Option<&ConfigMap>) -> Option<u32> {
    cm?.data.as_ref()?.get("n")?.parse().ok()
}

fn requests(kube: &FakeKube, verb: Verb) -> usize {
    kube.log()
        .iter()
        .filter(|l| l.info.verb == verb && l.info.plural == "configmaps")
        .count()
}

#[tokio::test]
async fn broken_watches_are_watched_again_until_the_condition_holds() {
    let kube = with_counter();
    // Three watches break as a dropped connection would; the fourth finds the change
    // another writer made meanwhile.
    kube.fault(
        Fault::on(is(Verb::Watch, "configmaps"))
            .action(FaultAction::Drop)
            .times(3),
    );
    kube.fault(
        Fault::on(is(Verb::Watch, "configmaps"))
            .nth(4)
            .then_change(|k| {
                k.put_json("", "configmaps", counter(5));
            }),
    );
    let got = wait_until(&api(&kube), "counter", Duration::from_secs(120), |c| {
        n(c) == Some(5)
    })
    .await;
    let Waited::Met(cm) = got else {
        panic!("not met: {got:?}")
    };
    assert_eq!(n(cm.as_ref()), Some(5));
    assert!(requests(&kube, Verb::Watch) >= 4, "{:?}", kube.log());
}

#[tokio::test]
async fn a_refused_watch_ends_the_wait_at_once() {
    let kube = with_counter();
    kube.fault(Fault::on(is(Verb::List, "configmaps")).status(403).always());
    let got = wait_until(&api(&kube), "counter", Duration::from_secs(20), |c| {
        n(c) == Some(5)
    })
    .await;
    let Waited::Refused(why) = got else {
        panic!("not refused: {got:?}")
    };
    assert!(why.starts_with("403"), "{why}");
    assert_eq!(
        requests(&kube, Verb::List),
        1,
        "a refusal is not asked again"
    );
}

#[tokio::test]
async fn a_server_error_is_not_a_refusal() {
    let kube = with_counter();
    kube.fault(Fault::on(is(Verb::List, "configmaps")).status(500).times(2));
    let got = wait_until(&api(&kube), "counter", Duration::from_secs(120), |c| {
        n(c) == Some(0)
    })
    .await;
    assert!(matches!(got, Waited::Met(Some(_))), "{got:?}");
    assert_eq!(requests(&kube, Verb::List), 3);
}

#[tokio::test]
async fn the_limit_returns_the_object_as_read_then() {
    let kube = with_counter();
    let got = wait_until(&api(&kube), "counter", Duration::from_millis(300), |c| {
        n(c) == Some(5)
    })
    .await;
    let Waited::TimedOut(Read::Present(cm)) = got else {
        panic!("not timed out with the object: {got:?}")
    };
    assert_eq!(n(Some(&cm)), Some(0));
}

#[tokio::test]
async fn absence_can_be_the_condition() {
    let kube = FakeKube::new();
    let got = wait_until(&api(&kube), "counter", Duration::from_secs(120), |c| {
        c.is_none()
    })
    .await;
    assert_eq!(got, Waited::Met(None));
}
