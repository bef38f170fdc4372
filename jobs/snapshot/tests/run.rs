//! `run` against the fake Kubernetes API, the fake vtctld, the fake node helper and the
//! fake CSI snapshot controller (none of them can run for real here; the node helper's
//! real actions are tested in `node/tests`). Every case checks how the shard is left.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;
use vtsnap_core::shard::ShardName;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use serde_json::{Value, json};
use vtsnap_core::config::{Config, Mode};
use vtsnap_core::fence::{Request, lease_name};
use vtsnap_core::snapshot::{
    ANN_GTID_EXECUTED, ANN_GTID_LOWER_BOUND, GROUP, LABEL_MODE, LABEL_PHASE, PLURAL, Phase,
};
use vtsnap_core::vtctld::TabletType;
use vtsnap_core::vtctld::messages::replicationdata::STATE_RUNNING;
use vtsnap_snapshot::run::{Outcome, RunOptions, Step, Summary, run};
use vtsnap_testkit::fake_kube::{Fault, Verb, is};
use vtsnap_testkit::fake_shard::FakeShard;
use vtsnap_testkit::fixtures::{ShardFixture, shard};

type World = FakeShard;

const FAST: &str = "  snapshot: {cutTimeout: 2s, readyTimeout: 3s, maxHold: 10s}\n";

async fn world(fixture: ShardFixture) -> World {
    FakeShard::start(fixture).await
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

/// A run as the snapshot job's own account: every request it sends must be one the
/// chart's Role grants (charts/vtsnap/files/rbac.yaml).
async fn go(w: &World, extra: &str) -> Summary {
    let s = run(
        &config(w, extra),
        &ShardName::new("example", "commerce", "-"),
        &opts(),
        w.kube.client_as("snapshot"),
    )
    .await;
    assert_eq!(
        vtsnap_testkit::rbac::refused("snapshot", &w.kube.log()),
        Vec::<String>::new(),
        "the snapshot job sent requests its Role does not grant"
    );
    s
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
    assert_eq!((s.exit_code, s.outcome), (0, Outcome::Done), "{s:?}");
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
    assert_eq!(s.phase, Some(Phase::Ready));
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
    assert_eq!((s.exit_code, s.mode), (0, Some(Mode::Online)), "{s:?}");
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
    // Refused on the fence alone, before the shard is read: a vtctld that cannot be read
    // still gives exit 3, as two jobs on one shard must.
    assert_eq!(w.vtctld.calls(), Vec::<String>::new());
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
    let shard = ShardName::new("example", "commerce", "-");
    let (a, b) = tokio::join!(
        run(&cfg, &shard, &o1, w.kube.client()),
        run(&cfg, &shard, &o2, w.kube.client())
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
    assert_eq!((s.exit_code, s.phase), (0, Some(Phase::Ready)), "{s:?}");
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
        (4, Outcome::FailedUnfenceIncomplete),
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
        &ShardName::new("example", "commerce", "-"),
        &o,
        w.kube.client(),
    )
    .await;
    assert_eq!((s.exit_code, s.dry_run), (0, true));
    assert!(s.target.is_some());
    assert!(w.kube.writes().is_empty(), "{:?}", w.kube.writes());
    // The plan it would carry out, for the same target, in the JSON line and as text.
    let plan = s.plan.clone().expect("a dry run carries its plan");
    assert_eq!(Some(&plan.target.target.alias), s.target.as_ref());
    assert_eq!(plan.steps.first().map(|p| p.step), Some(Step::Fence));
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["plan"]["steps"][2]["step"], "drain");
    assert_eq!(json["plan"]["steps"][2]["undo"], "restore-type");
    let text = vtsnap_snapshot::run::decide::render(&plan);
    assert!(text.contains(s.target.as_deref().unwrap()), "{text}");
    // Without --dry-run the line has no plan.
    let real = go(&w, "").await;
    assert!(real.plan.is_none() && serde_json::to_value(&real).unwrap().get("plan").is_none());
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
        &ShardName::new("example", "commerce", "-"),
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

/// One injected fault.
enum Inject {
    Vtctld(&'static str, usize),
    Api(Verb, &'static str, u32, u16),
    Node(Request),
}

/// Every fault at every step of the cold choreography; whatever happens, the invariants
/// hold: the fault was hit; the tablet is back (type, replication) unless the exit is 4;
/// no fence is left except on exit 4, where it is left unrenewed for recovery; a snapshot is
/// labelled `ready` only if it really is.
#[tokio::test]
async fn the_invariants_hold_under_every_fault_at_every_step() {
    let cases: Vec<(&str, Inject)> = vec![
        ("drain", Inject::Vtctld("ChangeTabletType", 1)),
        ("stop replication", Inject::Vtctld("StopReplication", 1)),
        ("read position", Inject::Vtctld("GetFullStatus", 10)),
        ("start replication", Inject::Vtctld("StartReplication", 100)),
        ("discovery", Inject::Vtctld("ShardReplicationPositions", 10)),
        (
            "take the fence",
            Inject::Api(Verb::Create, "leases", 1, 500),
        ),
        ("lease write 1", Inject::Api(Verb::Update, "leases", 1, 500)),
        ("lease write 2", Inject::Api(Verb::Update, "leases", 2, 500)),
        ("lease write 3", Inject::Api(Verb::Update, "leases", 3, 503)),
        ("lease write 4", Inject::Api(Verb::Update, "leases", 4, 409)),
        ("lease read", Inject::Api(Verb::Get, "leases", 3, 500)),
        (
            "create snapshot",
            Inject::Api(Verb::Create, "volumesnapshots", 1, 500),
        ),
        (
            "read snapshot",
            Inject::Api(Verb::Get, "volumesnapshots", 1, 503),
        ),
        (
            "label snapshot",
            Inject::Api(Verb::Patch, "volumesnapshots", 1, 500),
        ),
        ("delete fence", Inject::Api(Verb::Delete, "leases", 1, 500)),
        ("list pods", Inject::Api(Verb::List, "pods", 1, 500)),
        ("node probe", Inject::Node(Request::Probe)),
        ("node stop", Inject::Node(Request::Stop)),
        ("node hold", Inject::Node(Request::Hold)),
        ("node release", Inject::Node(Request::Release)),
    ];
    for (what, inject) in cases {
        let w = world(shard().replicas(3).primary(1)).await;
        match &inject {
            Inject::Vtctld(m, n) => w.vtctld.fail(m, *n, tonic::Status::unavailable("injected")),
            Inject::Api(v, plural, nth, code) => w
                .kube
                .fault(Fault::on(is(*v, plural)).nth(*nth).status(*code)),
            Inject::Node(r) => w.node.set(|n| n.fail = Some((*r, "injected".into()))),
        }
        let o = RunOptions {
            node_timeout: Duration::from_secs(2),
            ..opts()
        };
        let s = run(
            &config(&w, ""),
            &ShardName::new("example", "commerce", "-"),
            &o,
            w.kube.client(),
        )
        .await;
        // The fault was reached.
        let hit = match &inject {
            Inject::Vtctld(m, _) => w.vtctld.calls().iter().any(|c| c.starts_with(m)),
            Inject::Api(v, plural, _, code) => w
                .kube
                .log()
                .iter()
                .any(|l| l.info.verb == *v && l.info.plural == *plural && l.status == *code),
            Inject::Node(r) => w
                .node
                .requests()
                .iter()
                .any(|x| x.ends_with(&format!(" {r}"))),
        };
        assert!(hit, "{what}: the fault was never reached: {s:?}");
        assert!([0, 1, 3, 4].contains(&s.exit_code), "{what}: {s:?}");
        if s.exit_code == 4 {
            assert!(
                lease_left(&w),
                "{what}: exit 4 must leave the fence for recovery"
            );
        } else {
            assert!(!lease_left(&w), "{what}: a fence is left: {s:?}");
            if let Some(t) = s.target.as_deref() {
                let tab = w.vtctld.tablet(&t.parse().unwrap()).unwrap();
                assert_eq!(
                    tab.tablet.r#type,
                    TabletType::Replica as i32,
                    "{what}: tablet not back to REPLICA: {s:?}"
                );
                assert_eq!(
                    tab.status.unwrap().io_state,
                    STATE_RUNNING,
                    "{what}: replication not running: {s:?}"
                );
            }
        }
        for snap in snapshots(&w) {
            if snap["metadata"]["labels"][LABEL_PHASE] == "ready" {
                assert_eq!(
                    snap["status"]["readyToUse"], true,
                    "{what}: labelled ready but not ready"
                );
            }
        }
    }
}

/// Puts another job's snapshot under every name this job could pick for `attempts`
/// attempts in the second before, of and after the moment the fault fires.
fn take_names(
    kube: &vtsnap_testkit::fake_kube::FakeKube,
    r: &vtsnap_core::shard::ShardRef,
    attempts: u32,
) {
    use k8s_openapi::jiff::{SignedDuration, Timestamp};
    use vtsnap_core::snapshot::snapshot_name;
    let now = Timestamp::now();
    for delta in [-1, 0, 1] {
        let at = now + SignedDuration::from_secs(delta);
        for attempt in 0..attempts {
            kube.put_json(
                GROUP,
                PLURAL,
                json!({
                    "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
                    "metadata": {"name": snapshot_name(r, at, attempt), "namespace": "vitess",
                                 "annotations": {"test/owner": "another-job"}},
                    "spec": {"source": {"persistentVolumeClaimName": "elsewhere"}}
                }),
            );
        }
    }
}

fn foreign_snapshots_untouched(w: &World) -> usize {
    let foreign: Vec<Value> = snapshots(w)
        .into_iter()
        .filter(|v| v["metadata"]["annotations"]["test/owner"] == "another-job")
        .collect();
    for v in &foreign {
        assert_eq!(
            v["spec"]["source"]["persistentVolumeClaimName"], "elsewhere",
            "another job's snapshot was changed: {v}"
        );
        assert!(
            v["metadata"]["labels"].get(LABEL_PHASE).is_none(),
            "another job's snapshot was adopted: {v}"
        );
    }
    foreign.len()
}

#[tokio::test]
async fn a_snapshot_name_already_taken_in_the_same_second_gets_the_next_name() {
    let w = world(shard().replicas(3).primary(1)).await;
    // The names are taken just before the job's create lands: the create gets a real 409.
    let r = w.fixture.shard_ref();
    w.kube.fault(
        Fault::on(is(Verb::Create, PLURAL)).then_change(move |kube| take_names(kube, &r, 1)),
    );
    let s = go(&w, "").await;
    assert_eq!((s.exit_code, s.outcome), (0, Outcome::Done), "{s:?}");
    let name = s.snapshot.clone().unwrap();
    assert!(name.ends_with("-1"), "{name}");
    assert_eq!(foreign_snapshots_untouched(&w), 3);
    let ours = w.kube.get_json(GROUP, PLURAL, "vitess", &name).unwrap();
    assert_eq!(ours["metadata"]["labels"][LABEL_PHASE], "ready");
    assert_tablet_whole(&w, &s);
    assert!(!lease_left(&w));
}

#[tokio::test]
async fn when_every_name_is_taken_the_job_fails_and_unfences() {
    use vtsnap_core::snapshot::NAME_ATTEMPTS;
    let w = world(shard().replicas(3).primary(1)).await;
    let r = w.fixture.shard_ref();
    w.kube.fault(
        Fault::on(is(Verb::Create, PLURAL))
            .then_change(move |kube| take_names(kube, &r, NAME_ATTEMPTS)),
    );
    let s = go(&w, "").await;
    assert_eq!((s.exit_code, s.outcome), (1, Outcome::Failed), "{s:?}");
    let err = s.error.clone().unwrap();
    assert_eq!(err.code, "snapshot-failed");
    assert!(err.message.contains("already exists"), "{}", err.message);
    assert_eq!(foreign_snapshots_untouched(&w), 3 * NAME_ATTEMPTS as usize);
    assert_eq!(
        snapshots(&w).len(),
        3 * NAME_ATTEMPTS as usize,
        "nothing of ours left"
    );
    assert_tablet_whole(&w, &s);
    assert!(!lease_left(&w));
}
