//! Waiting on one object against the fake Kubernetes API: broken watches are watched
//! again, a lasting refusal ends the wait, the limit judges one last read, every watch
//! asks the server to end it before the client's read timeout would, and the wait reads
//! with GET and WATCH only (a Role without `list` suffices).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::json;
use vtsnap_core::cli::{ApiTimeouts, MAX_WATCH_SECONDS, client_with};
use vtsnap_core::reconcile::{Read, Waited, wait_until};
use vtsnap_testkit::fake_kube::{FakeKube, Fault, FaultAction, Verb, is};

/// A guard on tests whose wait must end by itself long before its limit: a regression
/// fails here instead of hanging.
const PROMPTLY: Duration = Duration::from_secs(60);

fn counter(n: u32) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "counter", "namespace": "ns"},
        "data": {"n": n.to_string()}
    })
}

fn with_counter(n: u32) -> FakeKube {
    let kube = FakeKube::new();
    kube.put_json("", "configmaps", counter(n));
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

/// `wait_until` on `counter`, failing the test if the wait outlives its limit.
async fn guarded_wait(
    api: &Api<ConfigMap>,
    limit: Duration,
    cond: fn(Option<&ConfigMap>) -> bool,
) -> Waited<ConfigMap> {
    tokio::time::timeout(
        PROMPTLY.max(limit + Duration::from_secs(30)),
        wait_until(api, "counter", limit, cond),
    )
    .await
    .expect("the wait outlived its limit")
}

async fn wait_for_five(api: &Api<ConfigMap>, limit: Duration) -> Waited<ConfigMap> {
    guarded_wait(api, limit, |c| n(c) == Some(5)).await
}

async fn wait_for_absence(api: &Api<ConfigMap>) -> Waited<ConfigMap> {
    guarded_wait(api, Duration::from_secs(20), |c| c.is_none()).await
}

#[tokio::test]
async fn broken_watches_are_watched_again_until_the_condition_holds() {
    let kube = with_counter(0);
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
    let got = wait_for_five(&api(&kube), Duration::from_secs(120)).await;
    let Waited::Met(cm) = got else {
        panic!("not met: {got:?}")
    };
    assert_eq!(n(cm.as_ref()), Some(5));
    assert!(requests(&kube, Verb::Watch) >= 4, "{:?}", kube.log());
}

/// The break that matters in production: an established watch on a quiet object, cut by
/// the client's own read timeout.
#[tokio::test]
async fn a_watch_cut_by_the_read_timeout_is_watched_again() {
    let kube = with_counter(0);
    let front = kube.serve_http().await;
    let client = client_with(
        front.config(),
        ApiTimeouts {
            connect: Duration::from_secs(5),
            read: Duration::from_secs(1),
            write: Duration::from_secs(5),
        },
    )
    .unwrap();
    // The first watch stays quiet past the read timeout; the change lands as the second
    // one starts.
    kube.fault(
        Fault::on(is(Verb::Watch, "configmaps"))
            .nth(2)
            .then_change(|k| {
                k.put_json("", "configmaps", counter(5));
            }),
    );
    let got = wait_for_five(&Api::namespaced(client, "ns"), Duration::from_secs(120)).await;
    assert!(matches!(&got, Waited::Met(Some(_))), "{got:?}");
    assert!(requests(&kube, Verb::Watch) >= 2);
}

#[tokio::test]
async fn every_watch_asks_the_server_to_end_it_before_the_read_timeout() {
    let kube = with_counter(0);
    kube.fault(
        Fault::on(is(Verb::Watch, "configmaps"))
            .nth(3)
            .then_change(|k| {
                k.put_json("", "configmaps", counter(5));
            }),
    );
    kube.fault(
        Fault::on(is(Verb::Watch, "configmaps"))
            .action(FaultAction::Drop)
            .times(2),
    );
    let got = wait_for_five(&api(&kube), Duration::from_secs(120)).await;
    assert!(matches!(&got, Waited::Met(Some(_))), "{got:?}");
    let asked: Vec<Option<u32>> = kube
        .log()
        .iter()
        .filter(|l| l.info.verb == Verb::Watch)
        .map(|l| {
            l.info
                .query
                .get("timeoutSeconds")
                .and_then(|t| t.parse().ok())
        })
        .collect();
    assert!(asked.len() >= 3, "{asked:?}");
    assert!(
        asked
            .iter()
            .all(|t| t.is_some_and(|t| t <= MAX_WATCH_SECONDS)),
        "{asked:?}"
    );
}

#[tokio::test]
async fn a_lasting_refusal_ends_the_wait() {
    for (verb, code) in [(Verb::Get, 403), (Verb::Watch, 401)] {
        let kube = with_counter(0);
        kube.fault(Fault::on(is(verb, "configmaps")).status(code).always());
        let got = wait_for_five(&api(&kube), Duration::from_secs(20)).await;
        let Waited::Refused(r) = got else {
            panic!("{verb:?} {code}: not refused: {got:?}")
        };
        assert_eq!(r.code, code);
        assert_eq!(r.to_string(), format!("{code} {}", r.message));
        assert!(r.message.contains("injected fault"), "{r:?}");
        assert_eq!(
            requests(&kube, verb),
            3,
            "{verb:?} {code}: asked three times"
        );
    }
}

/// A token being refreshed, or RBAC a moment behind a Role just applied: a refusal that
/// clears is waited past.
#[tokio::test]
async fn a_refusal_that_clears_is_waited_past() {
    let kube = with_counter(5);
    kube.fault(Fault::on(is(Verb::Get, "configmaps")).status(403).times(2));
    let got = wait_for_five(&api(&kube), Duration::from_secs(120)).await;
    assert!(matches!(&got, Waited::Met(Some(_))), "{got:?}");
    assert_eq!(requests(&kube, Verb::Get), 3);
}

#[tokio::test]
async fn a_server_error_is_not_a_refusal() {
    let kube = with_counter(5);
    kube.fault(Fault::on(is(Verb::Get, "configmaps")).status(500).times(4));
    let got = wait_for_five(&api(&kube), Duration::from_secs(120)).await;
    assert!(matches!(got, Waited::Met(Some(_))), "{got:?}");
    assert_eq!(requests(&kube, Verb::Get), 5);
}

#[tokio::test]
async fn the_limit_returns_the_object_as_read_then() {
    let kube = with_counter(0);
    let got = wait_for_five(&api(&kube), Duration::from_millis(300)).await;
    let Waited::TimedOut {
        last: Read::Present(cm),
        watch_error: None,
    } = got
    else {
        panic!("not timed out with the object: {got:?}")
    };
    assert_eq!(n(Some(&cm)), Some(0));
}

/// Watches failing until the limit: the last read decides (present or absent, the
/// condition held or not), a timeout names the watches' error, and the pauses between
/// watches grow (a hot loop would read dozens of times).
#[tokio::test]
async fn the_last_read_is_judged_by_the_condition() {
    type Cond = fn(Option<&ConfigMap>) -> bool;
    let five: Cond = |c| n(c) == Some(5);
    let gone: Cond = |c| c.is_none();
    for (start, cond, met) in [
        (Some(5), five, true),
        (Some(0), five, false),
        (None, gone, true),
        (None, five, false),
    ] {
        let kube = FakeKube::new();
        if let Some(start) = start {
            kube.put_json("", "configmaps", counter(start));
        }
        kube.fault(
            Fault::on(is(Verb::Watch, "configmaps"))
                .action(FaultAction::Drop)
                .always(),
        );
        let got = guarded_wait(&api(&kube), Duration::from_secs(1), cond).await;
        let case = format!("start {start:?}, met {met}");
        match got {
            Waited::Met(Some(cm)) if met && start.is_some() => {
                assert_eq!(n(Some(&cm)), start, "{case}");
            }
            Waited::Met(None) if met && start.is_none() => {}
            Waited::TimedOut {
                last,
                watch_error: Some(e),
            } if !met => {
                assert!(e.contains("watch"), "{case}: {e}");
                assert_eq!(last.present().is_some(), start.is_some(), "{case}");
                assert!(!matches!(last, Read::Unreadable(_)), "{case}");
            }
            other => panic!("{case}: {other:?}"),
        }
        let reads = requests(&kube, Verb::Get);
        assert!((1..=6).contains(&reads), "{case}: {reads} reads in 1 s");
        assert_eq!(requests(&kube, Verb::List), 0, "{case}");
    }
}

#[tokio::test]
async fn absence_can_be_the_condition() {
    let kube = FakeKube::new();
    let got = wait_for_absence(&api(&kube)).await;
    assert_eq!(got, Waited::Met(None));
}

/// Waiting for an object to go: the wait ends on its deletion, seen on the watch, not on
/// the list that still shows it.
#[tokio::test]
async fn a_wait_for_absence_ends_on_the_deletion() {
    let kube = with_counter(0);
    kube.fault(Fault::on(is(Verb::Watch, "configmaps")).then_change(|k| {
        k.remove("", "configmaps", "ns", "counter");
    }));
    let got = wait_for_absence(&api(&kube)).await;
    assert_eq!(got, Waited::Met(None));
    assert!(requests(&kube, Verb::Watch) >= 1, "ended before watching");
}

/// The snapshot job may get and watch its lease but not list leases
/// (charts/vtsnap/files/rbac.yaml): a wait must never need `list`.
#[tokio::test]
async fn a_wait_needs_no_list() {
    let kube = with_counter(0);
    kube.fault(Fault::on(is(Verb::List, "configmaps")).status(403).always());
    kube.fault(Fault::on(is(Verb::Watch, "configmaps")).then_change(|k| {
        k.put_json("", "configmaps", counter(5));
    }));
    let got = wait_for_five(&api(&kube), Duration::from_secs(20)).await;
    assert!(matches!(&got, Waited::Met(Some(_))), "{got:?}");
    assert_eq!(requests(&kube, Verb::List), 0, "{:?}", kube.log());
}

/// A watch from a resourceVersion the server no longer keeps (410 Gone) reads the object
/// again and watches from there, at once: it is neither a refusal nor a broken watch.
#[tokio::test(start_paused = true)]
async fn a_version_too_old_is_read_again() {
    let kube = with_counter(0);
    kube.fault(
        Fault::on(is(Verb::Watch, "configmaps"))
            .status(410)
            .times(1),
    );
    kube.fault(
        Fault::on(is(Verb::Watch, "configmaps"))
            .nth(2)
            .then_change(|k| {
                k.put_json("", "configmaps", counter(5));
            }),
    );
    let start = tokio::time::Instant::now();
    let got = wait_for_five(&api(&kube), Duration::from_secs(20)).await;
    assert!(matches!(&got, Waited::Met(Some(_))), "{got:?}");
    assert_eq!(requests(&kube, Verb::Get), 2, "{:?}", kube.log());
    assert_eq!(requests(&kube, Verb::Watch), 2, "{:?}", kube.log());
    assert!(
        start.elapsed() < Duration::from_millis(200),
        "paused after a 410"
    );
}

/// A watch the server ends (its timeout) is watched again from where it ended, at once and
/// without reading again.
#[tokio::test(start_paused = true)]
async fn a_watch_the_server_ends_resumes_where_it_ended() {
    let kube = with_counter(0);
    let k = kube.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        k.drop_watches();
        tokio::time::sleep(Duration::from_millis(300)).await;
        k.put_json("", "configmaps", counter(5));
    });
    let start = tokio::time::Instant::now();
    let got = wait_for_five(&api(&kube), Duration::from_secs(20)).await;
    assert!(matches!(&got, Waited::Met(Some(_))), "{got:?}");
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(600) && took < Duration::from_millis(650),
        "{took:?}"
    );
    assert_eq!(requests(&kube, Verb::Get), 1, "{:?}", kube.log());
    assert_eq!(requests(&kube, Verb::Watch), 2, "{:?}", kube.log());
}
