//! The node helper's answer on the lease survives the job's renewals: a version conflict
//! is answered on the fresh version of the same request, never dropped (a lost `failed`
//! once let a later cycle report `stopped` for a mysqld that was still running).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use serde_json::json;
use vtsnap_core::fence::*;
use vtsnap_node::cgroup::Roots;
use vtsnap_node::daemon::{self, DaemonConfig};
use vtsnap_testkit::fake_kube::{FakeKube, Fault, Verb, is};

const NS: &str = "vitess";
const LEASE: &str = "vtsnap-example-commerce-x-x";

fn lease(kube: &FakeKube, request: &str) {
    let now = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S.%6fZ")
        .to_string();
    kube.put_json("coordination.k8s.io", "leases", json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": LEASE, "namespace": NS, "labels": {LABEL_NODE: "node-a"}, "annotations": {
            ANN_TARGET_POD: "gone-pod", ANN_TARGET_POD_UID: "uid", ANN_TABLET_ALIAS: "zone1-0000000102",
            ANN_ORIGINAL_TYPE: "replica", ANN_VTCTLD: "127.0.0.1:1", ANN_MODE: "cold",
            ANN_REQUEST: request, ANN_MAX_HOLD: "600"}},
        "spec": {"holderIdentity": "snapshot-job", "leaseDurationSeconds": 30, "renewTime": now, "acquireTime": now}
    }));
}

fn node_state(kube: &FakeKube) -> Option<String> {
    kube.get_json("coordination.k8s.io", "leases", NS, LEASE)?["metadata"]["annotations"]
        [ANN_NODE_STATE]
        .as_str()
        .map(str::to_owned)
}

/// The node helper on node-a with a one-hour resync: what it does in a test's time, its
/// first pass, a watch event or a retry after a failure made it do.
async fn one_cycle_daemon(kube: &FakeKube, dir: &std::path::Path) -> daemon::Handle {
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
    daemon::start(cfg, kube.client()).await.unwrap()
}

#[tokio::test]
async fn a_conflicting_report_is_written_again_on_the_fresh_version() {
    let kube = FakeKube::new();
    lease(&kube, "probe");
    // The job's renewal lands between the node's read and its answer.
    kube.fault(Fault::on(is(Verb::Patch, "leases")).status(409));
    let dir = tempfile::tempdir().unwrap();
    let _h = one_cycle_daemon(&kube, dir.path()).await;
    let start = Instant::now();
    while node_state(&kube).is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the refusal never reached the lease: {:?}",
            kube.log()
                .iter()
                .map(|l| format!("{:?} {} {}", l.info.verb, l.info.plural, l.status))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The pod does not exist: a refusal, answered in the first cycle despite the conflict.
    assert_eq!(node_state(&kube).as_deref(), Some("refused"));
    let lease_calls: Vec<(Verb, u16)> = kube
        .log()
        .iter()
        .filter(|l| l.info.plural == "leases" && l.info.name.is_some())
        .map(|l| (l.info.verb, l.status))
        .collect();
    // The fresh read the pass decides from, the conflict, the re-read, the answer; then
    // at most fresh reads (the answer's own watch event wakes a pass that finds it done).
    assert_eq!(
        lease_calls[..4],
        [
            (Verb::Get, 200),
            (Verb::Patch, 409),
            (Verb::Get, 200),
            (Verb::Patch, 200)
        ],
        "{lease_calls:?}"
    );
    assert!(
        lease_calls[4..].iter().all(|c| *c == (Verb::Get, 200)),
        "{lease_calls:?}"
    );
}

#[tokio::test]
async fn an_answer_to_a_request_that_changed_meanwhile_is_not_written() {
    let kube = FakeKube::new();
    lease(&kube, "probe");
    // The job changes its request while the answer is in flight: it lands just before the
    // answer does, so the answer meets a newer version.
    kube.fault(Fault::on(is(Verb::Patch, "leases")).then_change(|k| {
        let mut v = k
            .get_json("coordination.k8s.io", "leases", NS, LEASE)
            .unwrap();
        v["metadata"]["annotations"][ANN_REQUEST] = json!("release");
        k.put_json("coordination.k8s.io", "leases", v);
    }));
    let dir = tempfile::tempdir().unwrap();
    let _h = one_cycle_daemon(&kube, dir.path()).await;
    let start = Instant::now();
    // The node gives up on the stale answer; the next pass answers the new request.
    while node_state(&kube).is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the new request was never answered: {:?}",
            kube.log()
                .iter()
                .map(|l| format!("{:?} {} {}", l.info.verb, l.info.plural, l.status))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        node_state(&kube).as_deref(),
        Some("released"),
        "a refusal of `probe` must not be written as the answer to `release`"
    );
    let lease_calls: Vec<(Verb, u16)> = kube
        .log()
        .iter()
        .filter(|l| l.info.plural == "leases" && l.info.name.is_some())
        .map(|l| (l.info.verb, l.status))
        .collect();
    // The answer to `probe` met the change and was not written; the node read the lease
    // again before it answered `release`.
    let patches: Vec<u16> = lease_calls
        .iter()
        .filter(|c| c.0 == Verb::Patch)
        .map(|c| c.1)
        .collect();
    assert_eq!(
        patches,
        [409, 200],
        "one conflict, then the answer to `release` only"
    );
    let conflict = lease_calls.iter().position(|c| *c == (Verb::Patch, 409));
    assert!(
        lease_calls[conflict.unwrap()..].contains(&(Verb::Get, 200)),
        "no re-read after the conflict: {lease_calls:?}"
    );
}

#[tokio::test]
async fn a_probe_answer_that_meets_a_renewal_is_written_on_the_fresh_version() {
    let kube = FakeKube::new();
    lease(&kube, "probe");
    let dir = tempfile::tempdir().unwrap();
    // The target's volume, as kubelet mounts it, with a single-volume layout.
    let vtdataroot = dir
        .path()
        .join("kubelet/pods/uid/volumes/kubernetes.io~csi/pv-1/mount/vtdataroot");
    std::fs::create_dir_all(&vtdataroot).unwrap();
    vtsnap_testkit::layout::TabletLayout::mariadb(102)
        .write(&vtdataroot)
        .unwrap();
    // The job's renewal lands between the node's read and its answer.
    kube.fault(Fault::on(is(Verb::Patch, "leases")).status(409));
    let _h = one_cycle_daemon(&kube, dir.path()).await;
    let start = Instant::now();
    while node_state(&kube).is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the probe never reached the lease"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Answered `probed` on the fresh version: a conflict is not a failed probe.
    assert_eq!(node_state(&kube).as_deref(), Some("probed"));
    let ann = kube
        .get_json("coordination.k8s.io", "leases", NS, LEASE)
        .unwrap()["metadata"]["annotations"]
        .clone();
    assert!(
        ann[vtsnap_node::daemon::ANN_NODE_PROBE]
            .as_str()
            .is_some_and(|p| !p.is_empty()),
        "{ann}"
    );
    let patches: Vec<u16> = kube
        .log()
        .iter()
        .filter(|l| l.info.plural == "leases" && l.info.verb == Verb::Patch)
        .map(|l| l.status)
        .collect();
    assert_eq!(patches, [409, 200]);
}
