//! `run` against the fake Kubernetes API, the fake vtctld, the fake node helper and the
//! fake CSI snapshot controller (none of them can run for real here; the node helper's
//! real actions are tested in `node/tests`). Every case checks how the shard is left.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use serde_json::{Value, json};
use vtsnap_core::config::Config;
use vtsnap_core::fence::{Request, lease_name};
use vtsnap_core::snapshot::{
    ANN_GTID_EXECUTED, ANN_GTID_LOWER_BOUND, GROUP, LABEL_MODE, LABEL_PHASE, PLURAL,
};
use vtsnap_core::vtctld::TabletType;
use vtsnap_core::vtctld::messages::replicationdata::STATE_RUNNING;
use vtsnap_snapshot::run::{RunOptions, Summary, run};
use vtsnap_testkit::fake_kube::{FakeKube, Fault, Verb, is};
use vtsnap_testkit::fake_node::{FakeNodeHelper, NodeScript};
use vtsnap_testkit::fake_snapshotter::{Behaviour, FakeSnapshotter};
use vtsnap_testkit::fake_vtctld::FakeVtctld;
use vtsnap_testkit::fixtures::{ShardFixture, shard};
use vtsnap_testkit::grpc::Running;

struct World {
    kube: FakeKube,
    vtctld: FakeVtctld,
    vt: Running,
    node: FakeNodeHelper,
    snapshotter: FakeSnapshotter,
    fixture: ShardFixture,
}

const FAST: &str = "  snapshot: {cutTimeout: 2s, readyTimeout: 3s, maxHold: 10s}\n";

async fn world(fixture: ShardFixture) -> World {
    let kube = FakeKube::new();
    let vtctld = FakeVtctld::new();
    fixture.install(&kube, &vtctld);
    let vt = vtctld.serve().await;
    let node = FakeNodeHelper::start(&kube, "", NodeScript::default(), Duration::from_millis(20));
    let snapshotter =
        FakeSnapshotter::start(&kube, Behaviour::default(), Duration::from_millis(20));
    World {
        kube,
        vtctld,
        vt,
        node,
        snapshotter,
        fixture,
    }
}

fn config(w: &World, extra: &str) -> Config {
    Config::from_yaml(&format!(
        "clusters:\n- name: example\n  namespace: vitess\n  vtctld: \"{}\"\n{FAST}{extra}",
        w.vt.endpoint()
    ))
    .unwrap()
}

fn opts() -> RunOptions {
    RunOptions {
        holder: "job-a".into(),
        lease_duration: Duration::from_secs(3),
        node_timeout: Duration::from_secs(5),
        poll: Duration::from_millis(20),
        ..RunOptions::default()
    }
}

async fn go(w: &World, extra: &str) -> Summary {
    run(
        &config(w, extra),
        "example",
        "commerce",
        "-",
        &opts(),
        w.kube.client(),
    )
    .await
}

fn lease_left(w: &World) -> bool {
    w.kube
        .get_json(
            "coordination.k8s.io",
            "leases",
            "vitess",
            &lease_name("example", "commerce", "x-x"),
        )
        .is_some()
}

fn snapshots(w: &World) -> Vec<Value> {
    w.kube.list_json(GROUP, PLURAL)
}

/// The target ends as it began: original type, replication running.
fn assert_tablet_whole(w: &World, s: &Summary) {
    let alias = s.target.as_deref().expect("a target");
    let t = w.vtctld.tablet(&alias.parse().unwrap()).unwrap();
    assert_eq!(
        t.tablet.r#type,
        TabletType::Replica as i32,
        "{alias} not back to REPLICA: {:?}",
        w.vtctld.calls()
    );
    assert_eq!(
        t.status.unwrap().io_state,
        STATE_RUNNING,
        "{alias} replication not running"
    );
}

fn vt_calls_for(w: &World, alias: &str) -> Vec<String> {
    // Writes only: reads (Get*, ShardReplicationPositions, ExecuteFetchAsDBA) are left out.
    w.vtctld
        .calls()
        .into_iter()
        .filter(|c| {
            c.contains(alias)
                && !c.starts_with("Get")
                && !c.starts_with("ShardReplication")
                && !c.starts_with("ExecuteFetchAsDBA")
        })
        .collect()
}

#[tokio::test]
async fn a_cold_snapshot_follows_the_choreography_exactly() {
    let w = world(shard().replicas(3).primary(1)).await;
    let s = go(&w, "").await;
    assert_eq!((s.exit_code, s.outcome), (0, "done"), "{s:?}");
    let t = s.target.clone().unwrap();
    assert_eq!(
        vt_calls_for(&w, &t),
        [
            format!("ChangeTabletType {t} DRAINED"),
            format!("StopReplication {t}"),
            format!("StartReplication {t}"),
            format!("ChangeTabletType {t} REPLICA")
        ]
    );
    assert!(w.vtctld.calls().contains(&format!("GetFullStatus {t}")));
    let reqs: Vec<String> = w
        .node
        .requests()
        .iter()
        .map(|r| r.rsplit(' ').next().unwrap().to_owned())
        .collect();
    assert_eq!(reqs, ["probe", "stop", "hold", "release"]);
    let snaps = snapshots(&w);
    assert_eq!(snaps.len(), 1);
    let snap = &snaps[0];
    assert_eq!(snap["metadata"]["labels"][LABEL_PHASE], "ready");
    assert_eq!(snap["metadata"]["labels"][LABEL_MODE], "cold");
    assert_eq!(
        snap["metadata"]["annotations"][ANN_GTID_EXECUTED], "MariaDB/0-100-1000",
        "the exact position when stopped"
    );
    assert_eq!(s.gtid.as_deref(), Some("MariaDB/0-100-1000"));
    assert_eq!(s.phase, Some("ready"));
    assert!(
        s.fence_window_ms.is_some() && s.cut_latency_ms.is_some() && s.ready_latency_ms.is_some()
    );
    assert!(
        !lease_left(&w),
        "the fence must be deleted after a clean unfence"
    );
    assert_tablet_whole(&w, &s);
}

#[tokio::test]
async fn an_online_snapshot_never_touches_type_or_replication() {
    let w = world(shard().replicas(3).primary(1)).await;
    let s = go(
        &w,
        "  keyspaces:\n    commerce:\n      snapshot: {mode: online}\n",
    )
    .await;
    assert_eq!((s.exit_code, s.mode), (0, "online"), "{s:?}");
    let t = s.target.clone().unwrap();
    assert!(vt_calls_for(&w, &t).is_empty(), "{:?}", w.vtctld.calls());
    let snap = &snapshots(&w)[0];
    assert_eq!(
        snap["metadata"]["annotations"][ANN_GTID_LOWER_BOUND],
        "MariaDB/0-100-1000"
    );
    assert_eq!(snap["metadata"]["labels"][LABEL_MODE], "online");
    assert_eq!(
        snap["metadata"]["annotations"]["vtsnap.io/mysql-version"],
        "10.11.18-MariaDB"
    );
    assert_eq!(
        w.node.requests().len(),
        1,
        "only the layout probe: {:?}",
        w.node.requests()
    );
    assert_eq!(s.fence_window_ms, Some(0));
    assert!(!lease_left(&w));
}

#[tokio::test]
async fn online_preconditions_refuse_with_the_reason() {
    for (var, value) in [
        ("sync_binlog", "0"),
        ("innodb_flush_log_at_trx_commit", "2"),
        ("log_bin", "0"),
    ] {
        let w = world(shard().replicas(3).primary(1).variable(var, value)).await;
        let s = go(
            &w,
            "  keyspaces:\n    commerce:\n      snapshot: {mode: online}\n",
        )
        .await;
        assert_eq!(s.exit_code, 3, "{var}: {s:?}");
        let e = s.error.unwrap();
        assert_eq!(e.code, "online-precondition");
        assert!(
            e.message.contains(&format!("{var}={value}")),
            "{}",
            e.message
        );
        assert!(snapshots(&w).is_empty() && !lease_left(&w) && w.node.requests().is_empty());
    }
}

#[tokio::test]
async fn a_live_fence_refuses_and_touches_nothing() {
    let w = world(shard().replicas(3).primary(1)).await;
    w.kube.put_json("coordination.k8s.io", "leases", json!({
        "metadata": {"name": lease_name("example", "commerce", "x-x"), "namespace": "vitess", "annotations": {
            "vtsnap.io/target-pod": "p", "vtsnap.io/target-pod-uid": "u", "vtsnap.io/tablet-alias": "zone1-0000000001",
            "vtsnap.io/original-type": "replica", "vtsnap.io/vtctld": "v:1", "vtsnap.io/mode": "cold",
            "vtsnap.io/request": "hold", "vtsnap.io/max-hold-seconds": "60"}},
        "spec": {"holderIdentity": "other-job", "leaseDurationSeconds": 3600,
                 "renewTime": k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S.%6fZ").to_string()}
    }));
    let s = go(&w, "").await;
    assert_eq!(
        (s.exit_code, s.error.as_ref().unwrap().code),
        (3, "fenced"),
        "{s:?}"
    );
    assert!(snapshots(&w).is_empty());
    assert!(
        !w.vtctld
            .calls()
            .iter()
            .any(|c| c.starts_with("ChangeTabletType") || c.starts_with("StopReplication"))
    );
}

#[tokio::test]
async fn of_two_jobs_on_one_shard_one_runs_and_the_other_exits_3() {
    let w = world(shard().replicas(3).primary(1)).await;
    w.snapshotter.set(|b| b.cut_after = 10);
    let cfg = config(&w, "");
    let (o1, o2) = (
        opts(),
        RunOptions {
            holder: "job-b".into(),
            ..opts()
        },
    );
    let (a, b) = tokio::join!(
        run(&cfg, "example", "commerce", "-", &o1, w.kube.client()),
        run(&cfg, "example", "commerce", "-", &o2, w.kube.client())
    );
    let mut codes = [a.exit_code, b.exit_code];
    codes.sort_unstable();
    assert_eq!(codes, [0, 3], "{a:?}\n{b:?}");
    assert_eq!(snapshots(&w).len(), 1);
    assert!(!lease_left(&w));
}

#[tokio::test]
async fn an_expired_fence_is_recovered_first() {
    let w = world(shard().replicas(3).primary(1)).await;
    // A dead job left tablet 2 drained with replication stopped under a fence that expired.
    let dead = w.fixture.alias(2);
    w.vtctld.with(|s| {
        let t = s
            .shards
            .values_mut()
            .next()
            .unwrap()
            .tablets
            .get_mut(&dead.to_string())
            .unwrap();
        t.tablet.r#type = TabletType::Drained as i32;
        t.status.as_mut().unwrap().io_state = 1;
        t.status.as_mut().unwrap().sql_state = 1;
    });
    w.kube.put_json("coordination.k8s.io", "leases", json!({
        "metadata": {"name": lease_name("example", "commerce", "x-x"), "namespace": "vitess", "labels": {"vtsnap.io/node": "node-2"},
            "annotations": {"vtsnap.io/target-pod": "p", "vtsnap.io/target-pod-uid": "u", "vtsnap.io/tablet-alias": dead.to_string(),
            "vtsnap.io/original-type": "replica", "vtsnap.io/vtctld": w.vt.endpoint(), "vtsnap.io/mode": "cold",
            "vtsnap.io/request": "hold", "vtsnap.io/max-hold-seconds": "60"}},
        "spec": {"holderIdentity": "dead-job", "leaseDurationSeconds": 30, "renewTime": "2026-01-01T00:00:00.000000Z"}
    }));
    let s = go(&w, "").await;
    assert_eq!(s.exit_code, 0, "{s:?}");
    assert!(s.recovered_fence.is_some(), "{s:?}");
    assert_eq!(
        w.vtctld.tablet_type(&dead),
        Some(TabletType::Replica),
        "the dead job's tablet is restored"
    );
}

#[tokio::test]
async fn a_failed_drain_leaves_the_tablet_untouched() {
    let w = world(shard().replicas(3).primary(1)).await;
    w.vtctld.fail(
        "ChangeTabletType",
        1,
        tonic::Status::unavailable("topo down"),
    );
    let s = go(&w, "").await;
    assert_eq!(
        (s.exit_code, s.error.as_ref().unwrap().code),
        (1, "drain-failed"),
        "{s:?}"
    );
    assert_tablet_whole(&w, &s);
    assert!(!lease_left(&w) && snapshots(&w).is_empty());
}

#[tokio::test]
async fn a_failed_stop_replication_is_unfenced() {
    let w = world(shard().replicas(3).primary(1)).await;
    w.vtctld
        .fail("StopReplication", 1, tonic::Status::internal("boom"));
    let s = go(&w, "").await;
    assert_eq!(s.exit_code, 1, "{s:?}");
    assert_tablet_whole(&w, &s);
    assert!(!lease_left(&w));
}

#[tokio::test]
async fn a_failed_node_stop_is_unfenced() {
    let w = world(shard().replicas(3).primary(1)).await;
    w.node
        .set(|n| n.fail = Some((Request::Stop, "mysqlctld socket missing".into())));
    let s = go(&w, "").await;
    assert_eq!(
        (s.exit_code, s.error.as_ref().unwrap().code),
        (1, "node-stop-failed"),
        "{s:?}"
    );
    assert!(
        s.error
            .as_ref()
            .unwrap()
            .message
            .contains("mysqlctld socket missing")
    );
    assert!(snapshots(&w).is_empty());
    assert!(!lease_left(&w));
    assert_tablet_whole(&w, &s);
}

#[tokio::test]
async fn a_snapshot_error_that_clears_is_waited_out() {
    let w = world(shard().replicas(3).primary(1)).await;
    w.snapshotter.set(|b| b.error_polls = 5);
    let s = go(&w, "").await;
    assert_eq!((s.exit_code, s.phase), (0, Some("ready")), "{s:?}");
}

#[tokio::test]
async fn a_snapshot_error_that_persists_fails_at_the_cut_timeout_and_is_never_ready() {
    let w = world(shard().replicas(3).primary(1)).await;
    w.snapshotter.set(|b| b.error_forever = true);
    let s = go(&w, "").await;
    assert_eq!(
        (s.exit_code, s.error.as_ref().unwrap().code),
        (1, "cut-timeout"),
        "{s:?}"
    );
    assert!(
        s.error
            .as_ref()
            .unwrap()
            .message
            .contains("injected snapshot error")
    );
    assert_tablet_whole(&w, &s);
    assert!(!lease_left(&w));
    assert_eq!(
        snapshots(&w)[0]["metadata"]["labels"][LABEL_PHASE],
        "failed"
    );
}

#[tokio::test]
async fn a_cut_that_never_comes_times_out() {
    let w = world(shard().replicas(3).primary(1)).await;
    w.snapshotter.set(|b| b.cut_after = 100_000);
    let s = go(&w, "").await;
    assert_eq!(
        (s.exit_code, s.error.as_ref().unwrap().code),
        (1, "cut-timeout")
    );
    assert_tablet_whole(&w, &s);
    assert!(!lease_left(&w));
}

#[tokio::test]
async fn a_cut_but_never_ready_snapshot_is_marked_failed() {
    let w = world(shard().replicas(3).primary(1)).await;
    w.snapshotter.set(|b| b.ready_after = None);
    let s = go(&w, "").await;
    assert_eq!(
        (s.exit_code, s.error.as_ref().unwrap().code),
        (1, "ready-timeout")
    );
    assert_eq!(
        snapshots(&w)[0]["metadata"]["labels"][LABEL_PHASE],
        "failed"
    );
    assert_tablet_whole(&w, &s);
}

#[tokio::test]
async fn an_incomplete_unfence_exits_4_and_leaves_the_lease_for_recovery() {
    let w = world(shard().replicas(3).primary(1)).await;
    w.vtctld.fail(
        "StartReplication",
        100,
        tonic::Status::unavailable("tablet unreachable"),
    );
    let s = go(&w, "").await;
    assert_eq!(
        (s.exit_code, s.outcome),
        (4, "failed-unfence-incomplete"),
        "{s:?}"
    );
    assert!(
        lease_left(&w),
        "the lease is left to expire and be recovered"
    );
    // It is no longer renewed: it expires, and the node helper recovers it.
    let l: Lease = Api::namespaced(w.kube.client(), "vitess")
        .get(&lease_name("example", "commerce", "x-x"))
        .await
        .unwrap();
    let renewed = l.spec.unwrap().renew_time.unwrap().0;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let l: Lease = Api::namespaced(w.kube.client(), "vitess")
        .get(&lease_name("example", "commerce", "x-x"))
        .await
        .unwrap();
    assert_eq!(
        l.spec.unwrap().renew_time.unwrap().0,
        renewed,
        "a left lease must not be renewed"
    );
}

#[tokio::test]
async fn an_api_error_taking_the_fence_fails_without_touching_anything() {
    let w = world(shard().replicas(3).primary(1)).await;
    w.kube
        .fault(Fault::on(is(Verb::Create, "leases")).status(500));
    let s = go(&w, "").await;
    assert_eq!(
        (s.exit_code, s.error.as_ref().unwrap().code),
        (1, "fence-failed"),
        "{s:?}"
    );
    assert!(
        !w.vtctld
            .calls()
            .iter()
            .any(|c| c.starts_with("ChangeTabletType") || c.starts_with("StopReplication"))
    );
    assert!(snapshots(&w).is_empty());
}

#[tokio::test]
async fn conflicts_and_5xx_on_lease_writes_are_retried() {
    let w = world(shard().replicas(3).primary(1)).await;
    w.kube
        .fault(Fault::on(is(Verb::Update, "leases")).nth(2).status(409));
    w.kube.fault(
        Fault::on(is(Verb::Get, "volumesnapshots"))
            .nth(1)
            .times(2)
            .status(503),
    );
    let s = go(&w, "").await;
    assert_eq!(s.exit_code, 0, "{s:?}");
    assert_tablet_whole(&w, &s);
}

#[tokio::test]
async fn dry_run_changes_nothing() {
    let w = world(shard().replicas(3).primary(1)).await;
    let o = RunOptions {
        dry_run: true,
        ..opts()
    };
    let s = run(
        &config(&w, ""),
        "example",
        "commerce",
        "-",
        &o,
        w.kube.client(),
    )
    .await;
    assert_eq!((s.exit_code, s.dry_run), (0, true));
    assert!(s.target.is_some());
    assert!(w.kube.writes().is_empty(), "{:?}", w.kube.writes());
}

#[tokio::test]
async fn when_deleted_delete_makes_the_vitesscluster_the_owner() {
    let w = world(shard().replicas(3).primary(1)).await;
    w.kube.put_json("planetscale.com", "vitessclusters", json!({
        "apiVersion": "planetscale.com/v2", "kind": "VitessCluster",
        "metadata": {"name": "example", "namespace": "vitess", "uid": "0c1a55e5-0000-4000-8000-000000000042"}
    }));
    let s = go(&w, "  deletionPolicy: {whenDeleted: Delete}\n").await;
    assert_eq!(s.exit_code, 0, "{s:?}");
    let owner = &snapshots(&w)[0]["metadata"]["ownerReferences"][0];
    assert_eq!(
        (owner["kind"].as_str(), owner["name"].as_str()),
        (Some("VitessCluster"), Some("example"))
    );
    assert_eq!(owner["uid"], "0c1a55e5-0000-4000-8000-000000000042");
}

#[tokio::test]
async fn an_online_snapshot_with_fsfreeze_freezes_around_the_cut() {
    let w = world(shard().replicas(3).primary(1)).await;
    let s = go(
        &w,
        "  keyspaces:\n    commerce:\n      snapshot: {mode: online, fsfreeze: true}\n",
    )
    .await;
    assert_eq!(s.exit_code, 0, "{s:?}");
    let reqs: Vec<String> = w
        .node
        .requests()
        .iter()
        .map(|r| r.rsplit(' ').next().unwrap().to_owned())
        .collect();
    assert_eq!(reqs, ["probe", "fsfreeze", "release"]);
    assert!(
        vt_calls_for(&w, s.target.as_deref().unwrap()).is_empty(),
        "still never touches type or replication"
    );
    assert!(!lease_left(&w));
}

#[tokio::test]
async fn a_node_helper_that_dies_mid_fence_leaves_the_lease_for_recovery() {
    let w = world(shard().replicas(3).primary(1)).await;
    w.node.set(|n| n.silent_from = Some(Request::Hold));
    let o = RunOptions {
        node_timeout: Duration::from_millis(800),
        ..opts()
    };
    let s = run(
        &config(&w, ""),
        "example",
        "commerce",
        "-",
        &o,
        w.kube.client(),
    )
    .await;
    assert_eq!(s.exit_code, 4, "{s:?}");
    assert_eq!(
        s.error.as_ref().map(|e| e.code),
        Some("node-hold-failed"),
        "{s:?}"
    );
    assert!(
        lease_left(&w),
        "without the node's release the fence must stay for recovery"
    );
    // The vtctld part of the unfence was still done.
    let t = s.target.clone().unwrap();
    assert!(
        w.vtctld
            .calls()
            .contains(&format!("ChangeTabletType {t} REPLICA")),
        "{:?}",
        w.vtctld.calls()
    );
    assert!(snapshots(&w).is_empty());
}
