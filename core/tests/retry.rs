//! The client's retry layer against the in-memory API (docs/design.md §3.8): reads go
//! through 429 storms and 5xx, `Retry-After` is honoured up to the cap (measured on
//! tokio's paused clock), a write is repeated on a 5xx only under its precondition, and a
//! storm that does not clear ends with its last answer once the bound is spent.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions, WatchParams};
use serde_json::json;
use tokio::time::Instant;
use vtsnap_core::cli::{ApiTimeouts, client_with};
use vtsnap_core::metrics::{ApiRetryLabels, api_retries};
use vtsnap_core::retry::RetryPolicy;
use vtsnap_testkit::fake_kube::{FakeKube, Fault, Verb, is};

const POLICY: RetryPolicy = RetryPolicy::DEFAULT;

fn config_map(name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns"},
        "data": {"n": "1"}
    })
}

fn with_config_map() -> FakeKube {
    let kube = FakeKube::new();
    kube.put_json("", "configmaps", config_map("c"));
    kube
}

fn api(kube: &FakeKube) -> Api<ConfigMap> {
    Api::namespaced(kube.client_with_retries("test", POLICY), "ns")
}

fn requests(kube: &FakeKube, verb: Verb) -> usize {
    kube.log()
        .iter()
        .filter(|l| l.info.verb == verb && l.info.plural == "configmaps")
        .count()
}

fn code_of(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

fn retries(verb: &'static str, code: &'static str) -> u64 {
    api_retries()
        .get_or_create(&ApiRetryLabels { verb, code })
        .get()
}

#[tokio::test(start_paused = true)]
async fn a_read_goes_through_a_429_storm_that_clears() {
    let kube = with_config_map();
    kube.fault(Fault::on(is(Verb::Get, "configmaps")).throttle(1).times(3));
    let counted = retries("get", "429");
    let started = Instant::now();
    let cm = api(&kube).get("c").await.unwrap();
    assert_eq!(cm.data.unwrap()["n"], "1");
    assert_eq!(requests(&kube, Verb::Get), 4);
    // Each wait at least the server's Retry-After, none longer than the cap.
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(3), "{took:?}");
    assert!(took <= 3 * POLICY.max_wait, "{took:?}");
    assert!(retries("get", "429") >= counted + 3);
}

#[tokio::test(start_paused = true)]
async fn retry_after_is_honoured() {
    let kube = with_config_map();
    kube.fault(Fault::on(is(Verb::Get, "configmaps")).throttle(7));
    let started = Instant::now();
    api(&kube).get("c").await.unwrap();
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(7), "{took:?}");
    assert!(took < Duration::from_millis(7_100), "{took:?}");
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_past_the_cap_waits_the_cap() {
    let kube = with_config_map();
    kube.fault(Fault::on(is(Verb::Get, "configmaps")).throttle(3600));
    let started = Instant::now();
    api(&kube).get("c").await.unwrap();
    assert_eq!(started.elapsed(), POLICY.max_wait);
}

#[tokio::test(start_paused = true)]
async fn a_read_is_retried_on_5xx_and_a_dropped_connection() {
    let kube = with_config_map();
    kube.fault(Fault::on(is(Verb::List, "configmaps")).status(503));
    kube.fault(Fault::on(is(Verb::List, "configmaps")).nth(2).status(500));
    kube.fault(
        Fault::on(is(Verb::List, "configmaps"))
            .nth(3)
            .drop_connection(),
    );
    let got = api(&kube).list(&Default::default()).await.unwrap();
    assert_eq!(got.items.len(), 1);
    assert_eq!(requests(&kube, Verb::List), 4);
}

#[tokio::test(start_paused = true)]
async fn a_storm_that_does_not_clear_ends_with_its_last_answer() {
    let kube = with_config_map();
    kube.fault(Fault::on(is(Verb::Get, "configmaps")).throttle(1).always());
    let started = Instant::now();
    let e = api(&kube).get("c").await.unwrap_err();
    assert_eq!(code_of(&e), Some(429), "{e:?}");
    assert_eq!(requests(&kube, Verb::Get), POLICY.tries as usize);
    assert!(
        started.elapsed() <= POLICY.budget,
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn the_budget_ends_it_before_the_tries_do() {
    let kube = with_config_map();
    // 10 s per wait against a 30 s budget: three waits, four attempts of six.
    kube.fault(Fault::on(is(Verb::Get, "configmaps")).throttle(10).always());
    let started = Instant::now();
    let e = api(&kube).get("c").await.unwrap_err();
    assert_eq!(code_of(&e), Some(429), "{e:?}");
    assert_eq!(requests(&kube, Verb::Get), 4);
    assert_eq!(started.elapsed(), Duration::from_secs(30));
}

#[tokio::test(start_paused = true)]
async fn a_write_without_a_precondition_is_not_repeated_on_5xx() {
    let kube = with_config_map();
    let api = api(&kube);
    for (nth, code) in [(1, 500), (2, 503), (3, 504)] {
        for verb in [Verb::Update, Verb::Patch, Verb::Create, Verb::Delete] {
            kube.fault(Fault::on(is(verb, "configmaps")).nth(nth).status(code));
        }
    }
    let mut blind: ConfigMap = serde_json::from_value(config_map("c")).unwrap();
    blind.metadata.resource_version = None;
    let patch = Patch::Merge(json!({"data": {"n": "2"}}));
    let created: ConfigMap = serde_json::from_value(config_map("d")).unwrap();
    for _ in [500, 503, 504] {
        let e = api
            .replace("c", &PostParams::default(), &blind)
            .await
            .unwrap_err();
        assert!(matches!(code_of(&e), Some(500..)), "{e:?}");
        let e = api
            .patch("c", &PatchParams::default(), &patch)
            .await
            .unwrap_err();
        assert!(matches!(code_of(&e), Some(500..)), "{e:?}");
        let e = api
            .create(&PostParams::default(), &created)
            .await
            .unwrap_err();
        assert!(matches!(code_of(&e), Some(500..)), "{e:?}");
        let e = api.delete("c", &DeleteParams::default()).await.unwrap_err();
        assert!(matches!(code_of(&e), Some(500..)), "{e:?}");
    }
    for verb in [Verb::Update, Verb::Patch, Verb::Create, Verb::Delete] {
        assert_eq!(requests(&kube, verb), 3, "{verb:?}");
    }
    assert!(kube.writes().is_empty(), "{:?}", kube.writes());
}

#[tokio::test(start_paused = true)]
async fn a_write_with_a_precondition_is_repeated_on_5xx() {
    let kube = with_config_map();
    let api = api(&kube);
    kube.fault(Fault::on(is(Verb::Update, "configmaps")).status(503));
    let mut cm = api.get("c").await.unwrap();
    assert!(cm.metadata.resource_version.is_some());
    cm.data.as_mut().unwrap().insert("n".into(), "2".into());
    let cm = api.replace("c", &PostParams::default(), &cm).await.unwrap();
    assert_eq!(requests(&kube, Verb::Update), 2);

    kube.fault(Fault::on(is(Verb::Patch, "configmaps")).status(500));
    let rv = cm.metadata.resource_version.clone().unwrap();
    let patch = Patch::Merge(json!({"metadata": {"resourceVersion": rv}, "data": {"n": "3"}}));
    api.patch("c", &PatchParams::default(), &patch)
        .await
        .unwrap();
    assert_eq!(requests(&kube, Verb::Patch), 2);

    kube.fault(Fault::on(is(Verb::Delete, "configmaps")).status(504));
    let counted = retries("delete", "504");
    let uid = api.get("c").await.unwrap().metadata.uid;
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid,
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    api.delete("c", &dp).await.unwrap();
    assert_eq!(requests(&kube, Verb::Delete), 2);
    assert!(api.get_opt("c").await.unwrap().is_none());
    assert!(retries("delete", "504") > counted);
}

#[tokio::test(start_paused = true)]
async fn a_throttled_create_is_sent_again_and_makes_one_object() {
    let kube = FakeKube::new();
    let api = api(&kube);
    kube.fault(
        Fault::on(is(Verb::Create, "configmaps"))
            .throttle(1)
            .times(2),
    );
    let cm: ConfigMap = serde_json::from_value(config_map("c")).unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
    assert_eq!(requests(&kube, Verb::Create), 3);
    assert_eq!(kube.writes(), ["Create configmaps ns/c"]);
}

#[tokio::test(start_paused = true)]
async fn a_watch_open_is_retried_but_a_410_is_the_callers() {
    let kube = with_config_map();
    let api = api(&kube);
    kube.fault(Fault::on(is(Verb::Watch, "configmaps")).status(410));
    let e = api.watch(&WatchParams::default(), "0").await.err().unwrap();
    assert_eq!(code_of(&e), Some(410), "{e:?}");
    assert_eq!(requests(&kube, Verb::Watch), 1);

    kube.fault(
        Fault::on(is(Verb::Watch, "configmaps"))
            .throttle(1)
            .times(2),
    );
    let counted = retries("watch", "429");
    let opened = api.watch(&WatchParams::default().timeout(1), "0").await;
    assert!(opened.is_ok(), "{:?}", opened.err());
    assert_eq!(requests(&kube, Verb::Watch), 4);
    assert!(retries("watch", "429") >= counted + 2);
}

/// The programs' client (`client_with`, over HTTP): kube's own retry is off, so a 503 on
/// a write without a precondition reaches the caller after one attempt, and a throttled
/// read goes through. Real time: `Retry-After: 0` keeps the waits to the backoff's.
#[tokio::test]
async fn every_programs_client_has_the_layer() {
    let kube = with_config_map();
    let front = kube.serve_http().await;
    let client = client_with(front.config(), ApiTimeouts::DEFAULT).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, "ns");

    kube.fault(Fault::on(is(Verb::Get, "configmaps")).throttle(0).times(2));
    api.get("c").await.unwrap();
    assert_eq!(requests(&kube, Verb::Get), 3);

    kube.fault(Fault::on(is(Verb::Update, "configmaps")).status(503));
    let mut blind: ConfigMap = serde_json::from_value(config_map("c")).unwrap();
    blind.metadata.resource_version = None;
    let e = api
        .replace("c", &PostParams::default(), &blind)
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), Some(503), "{e:?}");
    assert_eq!(requests(&kube, Verb::Update), 1);
}

/// A server that is not there (connection refused) is not busy: the call fails at once,
/// as it did before the layer, and the caller's own handling (the next run, a wait's
/// pause) applies. On a paused clock any backoff would show as elapsed time (the counter
/// is shared with the other tests of this binary, so it cannot tell).
#[tokio::test(start_paused = true)]
async fn an_unreachable_server_is_not_retried() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let config = kube::Config::new(format!("http://127.0.0.1:{port}").parse().unwrap());
    let api: Api<ConfigMap> =
        Api::namespaced(client_with(config, ApiTimeouts::DEFAULT).unwrap(), "ns");
    let started = tokio::time::Instant::now();
    let e = api.get("c").await.unwrap_err();
    assert!(code_of(&e).is_none(), "{e:?}");
    // The first backoff is 250 ms: no wait at all means no retry.
    assert!(
        started.elapsed() < Duration::from_millis(250),
        "waited {:?} of virtual time: it was retried",
        started.elapsed()
    );
}
