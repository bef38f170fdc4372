//! The GET → change → replace loop against the fake Kubernetes API.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::cell::Cell;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::json;
use vtsnap_core::reconcile::{Change, Outcome, ReplaceError, replace_with_retry};
use vtsnap_testkit::fake_kube::{FakeKube, Fault, Verb, is};

/// Why a test's `change` refuses.
#[derive(Debug, thiserror::Error)]
#[error("the map is frozen")]
struct Frozen;

/// A fake holding the ConfigMap `ns/counter` with `n: "0"`.
fn with_counter() -> FakeKube {
    let kube = FakeKube::new();
    kube.put_json("", "configmaps", counter(0));
    kube
}

fn counter(n: u32) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "counter", "namespace": "ns"},
        "data": {"n": n.to_string()}
    })
}

fn api(kube: &FakeKube) -> Api<ConfigMap> {
    Api::namespaced(kube.client(), "ns")
}

fn n(cm: &ConfigMap) -> u32 {
    cm.data.as_ref().unwrap()["n"].parse().unwrap()
}

/// Adds one to `n`, counting its calls in `calls`.
fn increment(calls: &Cell<usize>) -> impl FnMut(&mut ConfigMap) -> Change<Frozen> + '_ {
    |cm| {
        calls.set(calls.get() + 1);
        let next = n(cm) + 1;
        cm.data
            .get_or_insert_with(Default::default)
            .insert("n".into(), next.to_string());
        Change::Replace
    }
}

fn updates(kube: &FakeKube) -> usize {
    kube.log()
        .iter()
        .filter(|l| l.info.verb == Verb::Update)
        .count()
}

#[tokio::test]
async fn someone_elses_writes_are_read_again_and_the_change_made_on_the_latest() {
    let kube = with_counter();
    // Twice, another writer sets n to 10 between our read and our replace: a real stale
    // resourceVersion, so the API server itself answers 409.
    kube.fault(
        Fault::on(is(Verb::Update, "configmaps"))
            .times(2)
            .then_change(|k| {
                k.put_json("", "configmaps", counter(10));
            }),
    );
    let calls = Cell::new(0);
    let out = replace_with_retry(&api(&kube), "counter", 3, increment(&calls))
        .await
        .unwrap();
    let Outcome::Replaced(stored) = out else {
        panic!("not replaced: {out:?}")
    };
    assert_eq!(n(&stored), 11, "the change is made on the fresh read");
    assert_eq!(calls.get(), 3);
    assert_eq!(updates(&kube), 3);
}

#[tokio::test]
async fn conflicts_past_the_tries_name_the_object_and_the_last_conflict() {
    let kube = with_counter();
    kube.fault(
        Fault::on(is(Verb::Update, "configmaps"))
            .status(409)
            .always(),
    );
    let calls = Cell::new(0);
    let e = replace_with_retry(&api(&kube), "counter", 4, increment(&calls))
        .await
        .unwrap_err();
    assert_eq!(calls.get(), 4);
    assert_eq!(updates(&kube), 4, "no fifth write");
    match &e {
        ReplaceError::Conflicts { name, tries, last } => {
            assert_eq!((name.as_str(), *tries), ("counter", 4));
            assert!(
                matches!(last, kube::Error::Api(s) if s.code == 409),
                "{last}"
            );
        }
        other => panic!("not a conflict: {other}"),
    }
    assert!(
        e.to_string()
            .starts_with("counter kept changing under us (4 tries"),
        "{e}"
    );
    let stored = api(&kube).get("counter").await.unwrap();
    assert_eq!(n(&stored), 0, "nothing was written");
}

#[tokio::test]
async fn zero_tries_still_try_once() {
    let kube = with_counter();
    kube.fault(
        Fault::on(is(Verb::Update, "configmaps"))
            .status(409)
            .always(),
    );
    let calls = Cell::new(0);
    let e = replace_with_retry(&api(&kube), "counter", 0, increment(&calls))
        .await
        .unwrap_err();
    assert!(matches!(e, ReplaceError::Conflicts { tries: 1, .. }), "{e}");
    assert_eq!(calls.get(), 1);
}

#[tokio::test]
async fn a_missing_object_is_gone_and_never_changed() {
    let kube = FakeKube::new();
    let calls = Cell::new(0);
    let e = replace_with_retry(&api(&kube), "counter", 3, increment(&calls))
        .await
        .unwrap_err();
    match &e {
        ReplaceError::Gone { name, source } => {
            assert_eq!(name, "counter");
            assert!(
                matches!(source, kube::Error::Api(s) if s.code == 404),
                "{source}"
            );
        }
        other => panic!("not gone: {other}"),
    }
    assert_eq!(calls.get(), 0);
    assert!(kube.writes().is_empty());
}

#[tokio::test]
async fn a_change_that_leaves_the_object_writes_nothing() {
    let kube = with_counter();
    let out = replace_with_retry(&api(&kube), "counter", 3, |_: &mut ConfigMap| {
        Change::<Frozen>::Leave
    })
    .await
    .unwrap();
    assert!(matches!(&out, Outcome::Left(cm) if n(cm) == 0), "{out:?}");
    assert!(kube.writes().is_empty());
}

#[tokio::test]
async fn a_change_that_gives_up_stops_with_its_reason_and_writes_nothing() {
    let kube = with_counter();
    let e = replace_with_retry(&api(&kube), "counter", 3, |_: &mut ConfigMap| {
        Change::GiveUp(Frozen)
    })
    .await
    .unwrap_err();
    assert!(
        matches!(e, ReplaceError::GaveUp { reason: Frozen, .. }),
        "{e}"
    );
    assert_eq!(e.to_string(), "counter: the map is frozen");
    assert!(kube.writes().is_empty());
}

#[tokio::test]
async fn another_failure_of_the_write_is_reported_as_the_write() {
    let kube = with_counter();
    kube.fault(
        Fault::on(is(Verb::Update, "configmaps"))
            .status(500)
            .always(),
    );
    let calls = Cell::new(0);
    let e = replace_with_retry(&api(&kube), "counter", 3, increment(&calls))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, ReplaceError::Write { source: kube::Error::Api(s), .. } if s.code == 500),
        "{e}"
    );
    assert_eq!(calls.get(), 1, "only a conflict is tried again");
}
