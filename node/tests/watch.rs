//! The helper follows its leases with a watch (against the test kit's in-memory API server,
//! a fake): it answers without a resync, it never takes a stale copy for the truth, and it
//! follows again after its watch was dropped. Every helper here resyncs once an hour, so
//! whatever it does within a test, a watch event or a lease's expiry made it do.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};
use vtsnap_core::fence::*;
use vtsnap_node::cgroup::Roots;
use vtsnap_node::daemon::{self, DaemonConfig, Handle};
use vtsnap_testkit::fake_kube::{FakeKube, Fault, RequestInfo, Verb};

const NS: &str = "vitess";

fn now() -> String {
    Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S.%6fZ")
        .to_string()
}

/// A fence lease for node-a asking `request`, renewed now for `secs`. Its vtctld does not
/// answer, so any put-back the helper tried would fail and be reported.
fn lease(name: &str, request: &str, secs: u32) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": NS, "labels": {LABEL_NODE: "node-a"}, "annotations": {
            ANN_TARGET_POD: "example-vttablet-zone1-tablet", ANN_TARGET_POD_UID: "6f1d2c3b-0000-4000-8000-000000000001",
            ANN_TABLET_ALIAS: "zone1-0000000101", ANN_ORIGINAL_TYPE: "replica", ANN_VTCTLD: "127.0.0.1:1",
            ANN_MODE: "cold", ANN_REQUEST: request, ANN_MAX_HOLD: "600"}},
        "spec": {"holderIdentity": "snapshot-job", "leaseDurationSeconds": secs, "renewTime": now(), "acquireTime": now()}
    })
}

fn node_state(kube: &FakeKube, name: &str) -> Option<String> {
    kube.get_json("coordination.k8s.io", "leases", NS, name)?["metadata"]["annotations"]
        [ANN_NODE_STATE]
        .as_str()
        .map(str::to_owned)
}

async fn watching_helper(kube: &FakeKube, dir: &std::path::Path) -> Handle {
    let cfg = DaemonConfig {
        node: "node-a".into(),
        kubelet_dir: dir.join("kubelet"),
        roots: Roots::default(),
        // The tests run on the host: its `/` is the node root.
        host_root: "/".into(),
        state_dir: dir.join("state"),
        resync: Duration::from_secs(3600),
        listen: None,
        start_timeout: Duration::from_secs(5),
        shutdown_timeout: Duration::from_secs(5),
    };
    daemon::start(cfg, kube.client_as("node")).await.unwrap()
}

async fn until(what: &str, limit: Duration, cond: impl Fn() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Requests to the lease `name` the helper made since log entry `from`, as `VERB`.
fn lease_requests(kube: &FakeKube, name: &str, from: usize) -> Vec<Verb> {
    kube.log()[from..]
        .iter()
        .filter(|l| l.info.plural == "leases" && l.info.name.as_deref() == Some(name))
        .map(|l| l.info.verb)
        .collect()
}

/// One call for a lease as it reached the API server: what, when, and how many passes
/// the helper had completed then (the pass that made it ends when the count goes past that).
struct Call {
    verb: Verb,
    at: Timestamp,
    passes_before: u64,
}

/// Records every request for lease `name` from now on.
fn requests_for(kube: &FakeKube, name: &'static str, h: &Handle) -> Arc<Mutex<Vec<Call>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (log, metrics) = (seen.clone(), h.metrics.clone());
    kube.observe(
        move |r| r.plural == "leases" && r.name.as_deref() == Some(name),
        move |r, _| {
            log.lock().unwrap().push(Call {
                verb: r.verb,
                at: Timestamp::now(),
                passes_before: metrics.cycles(),
            });
        },
    );
    seen
}

/// The job renews lease `fence` now, for ten minutes.
fn renew(kube: &FakeKube) {
    let mut renewed = kube
        .get_json("coordination.k8s.io", "leases", NS, "fence")
        .unwrap();
    renewed["spec"]["renewTime"] = json!(now());
    renewed["spec"]["leaseDurationSeconds"] = json!(600);
    kube.put_json("coordination.k8s.io", "leases", renewed);
}

/// When lease `name` expires as the API server holds it now.
fn expiry(kube: &FakeKube, name: &str) -> Timestamp {
    let l = kube
        .get_json("coordination.k8s.io", "leases", NS, name)
        .unwrap();
    let renewed: Timestamp = l["spec"]["renewTime"].as_str().unwrap().parse().unwrap();
    renewed
        .checked_add(SignedDuration::from_secs(
            l["spec"]["leaseDurationSeconds"].as_i64().unwrap(),
        ))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_is_answered_through_the_watch_without_a_resync() {
    let kube = FakeKube::new();
    let dir = tempfile::tempdir().unwrap();
    let h = watching_helper(&kube, dir.path()).await;
    // Written after the helper listed and began to watch: only a watch event can bring it.
    until("the watch", Duration::from_secs(30), || {
        kube.log()
            .iter()
            .any(|l| l.info.plural == "leases" && l.info.verb == Verb::Watch)
    })
    .await;
    kube.put_json("coordination.k8s.io", "leases", lease("l1", "release", 60));
    until("the answer", Duration::from_secs(10), || {
        node_state(&kube, "l1").as_deref() == Some("released")
    })
    .await;
    // The store was a hint; the answer was decided from a fresh read.
    assert!(lease_requests(&kube, "l1", 0).contains(&Verb::Get));
    // Leases of other nodes never reach it.
    let mut other = lease("l2", "release", 60);
    other["metadata"]["labels"][LABEL_NODE] = json!("node-b");
    kube.put_json("coordination.k8s.io", "leases", other);
    kube.put_json("coordination.k8s.io", "leases", lease("l3", "release", 60));
    until("the third answer", Duration::from_secs(10), || {
        node_state(&kube, "l3").is_some()
    })
    .await;
    assert_eq!(node_state(&kube, "l2"), None);
    assert!(lease_requests(&kube, "l2", 0).is_empty());
    assert_eq!(
        vtsnap_testkit::rbac::refused("node", &kube.log()),
        Vec::<String>::new(),
        "requests its ClusterRole does not grant"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_the_watch_missed_is_not_taken_for_an_expiry() {
    let kube = FakeKube::new();
    let dir = tempfile::tempdir().unwrap();
    // Long enough that the helper answers well before it, even on a loaded machine.
    kube.put_json(
        "coordination.k8s.io",
        "leases",
        lease("fence", "release", 5),
    );
    let h = watching_helper(&kube, dir.path()).await;
    until("the answer", Duration::from_secs(10), || {
        node_state(&kube, "fence").as_deref() == Some("released")
    })
    .await;
    // The watch breaks and cannot be resumed; the job renews meanwhile. The renewal lands
    // as the helper asks to watch again, so its old watch has surely ended and none
    // brings it. The helper's copy still says the lease expires 5 s after it was written.
    let copy_expires = expiry(&kube, "fence");
    let is_watch = |r: &RequestInfo| r.verb == Verb::Watch;
    kube.fault(Fault::on(is_watch).then_change(renew).status(500));
    kube.fault(Fault::on(is_watch).always().status(500));
    let from = kube.log().len();
    let requests = requests_for(&kube, "fence", &h);
    kube.drop_watches();
    until("the renewal", Duration::from_secs(60), || {
        expiry(&kube, "fence") > copy_expires
    })
    .await;
    // The copy's expiry wakes a pass that reads the lease afresh: it is renewed. Other
    // passes (the answer's own watch event wakes one) may come first: only this read, made
    // when the copy says expired, matters.
    let read_at_expiry = || {
        requests
            .lock()
            .unwrap()
            .iter()
            .find(|r| r.verb == Verb::Get && r.at > copy_expires)
            .map(|r| r.passes_before)
    };
    let deleted = || lease_requests(&kube, "fence", from).contains(&Verb::Delete);
    until(
        "a fresh read after the copy's expiry",
        Duration::from_secs(60),
        || read_at_expiry().is_some() || deleted(),
    )
    .await;
    if let Some(before) = read_at_expiry() {
        // Whatever the pass that read it decided is done once it ends.
        until("the end of that pass", Duration::from_secs(60), || {
            h.metrics.cycles() > before
        })
        .await;
    }
    let seen = lease_requests(&kube, "fence", from);
    assert!(
        read_at_expiry().is_some(),
        "no fresh read at expiry: {seen:?}"
    );
    assert!(
        !seen.contains(&Verb::Delete),
        "a renewed lease was deleted: {seen:?}"
    );
    assert!(
        kube.get_json("coordination.k8s.io", "leases", NS, "fence")
            .is_some()
    );
    assert_eq!(node_state(&kube, "fence").as_deref(), Some("released"));
    assert!(h.metrics.watch_failures() > 0);
    assert!(!h.metrics.api_ok(), "a broken watch is reported");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_dropped_watch_the_helper_follows_new_requests_again() {
    let kube = FakeKube::new();
    let dir = tempfile::tempdir().unwrap();
    let h = watching_helper(&kube, dir.path()).await;
    until("the first list", Duration::from_secs(10), || {
        h.metrics.cycles() > 0
    })
    .await;
    // Two watch requests fail after the connection drops; the watcher backs off and resumes.
    kube.fault(Fault::on(|r| r.verb == Verb::Watch).times(2).status(500));
    kube.drop_watches();
    until("the failed watch is seen", Duration::from_secs(10), || {
        h.metrics.watch_failures() >= 1
    })
    .await;
    kube.put_json(
        "coordination.k8s.io",
        "leases",
        lease("after", "release", 60),
    );
    until(
        "the answer after the watch came back",
        Duration::from_secs(30),
        || node_state(&kube, "after").as_deref() == Some("released"),
    )
    .await;
    assert!(h.metrics.api_ok());
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_that_expires_is_acted_on_at_its_expiry_with_no_event() {
    let kube = FakeKube::new();
    let dir = tempfile::tempdir().unwrap();
    kube.put_json(
        "coordination.k8s.io",
        "leases",
        lease("fence", "release", 3),
    );
    let expires = expiry(&kube, "fence");
    let h = watching_helper(&kube, dir.path()).await;
    let requests = requests_for(&kube, "fence", &h);
    until("the answer", Duration::from_secs(10), || {
        node_state(&kube, "fence").as_deref() == Some("released")
    })
    .await;
    let answered = requests.lock().unwrap().len();
    // Nobody renews. At expiry the helper recovers the fence: its vtctld does not answer,
    // so the put-back fails and is reported on the lease (kept for the next try). The
    // helper resyncs once an hour: acting within the wait below, its expiry woke it.
    until("the expiry is acted on", Duration::from_secs(60), || {
        node_state(&kube, "fence").as_deref() == Some("failed")
    })
    .await;
    // Passes woken by the answer's own watch event may read the lease again; nothing is
    // written to it before it expires.
    for r in requests.lock().unwrap()[answered..]
        .iter()
        .filter(|r| r.verb.is_write())
    {
        assert!(
            r.at > expires,
            "{:?} at {}, before the lease expired at {expires}",
            r.verb,
            r.at
        );
    }
    assert_eq!(
        vtsnap_testkit::rbac::refused("node", &kube.log()),
        Vec::<String>::new(),
        "requests its ClusterRole does not grant"
    );
    h.stop().await;
}
