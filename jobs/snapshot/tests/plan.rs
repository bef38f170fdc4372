//! `plan` against the fake Kubernetes API and the fake vtctld (neither can run for real
//! here), with shards built by the test kit's fixtures.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use vtsnap_core::shard::ShardName;

use serde_json::Value;
use vtsnap_core::config::Config;
use vtsnap_core::exit::Exit;
use vtsnap_core::vtctld::TabletType;
use vtsnap_snapshot::plan::{PlanReport, plan};
use vtsnap_snapshot::run::RunError;
use vtsnap_testkit::fake_kube::FakeKube;
use vtsnap_testkit::fake_vtctld::FakeVtctld;
use vtsnap_testkit::fixtures::{ShardFixture, shard};
use vtsnap_testkit::grpc::{Running, closed_endpoint};

struct World {
    kube: FakeKube,
    vtctld: FakeVtctld,
    _server: Running,
    config: Config,
}

fn config_for(endpoint: &str, extra: &str) -> Config {
    Config::from_yaml(&format!(
        "clusters:\n- name: example\n  namespace: vitess\n  vtctld: \"{endpoint}\"\n{extra}"
    ))
    .unwrap()
}

async fn world(fixture: &ShardFixture) -> World {
    let kube = FakeKube::new();
    let vtctld = FakeVtctld::new();
    fixture.install(&kube, &vtctld);
    let server = vtctld.serve().await;
    let config = config_for(&server.endpoint(), "");
    World {
        kube,
        vtctld,
        _server: server,
        config,
    }
}

async fn run(w: &World, f: &ShardFixture) -> PlanReport {
    plan(
        &w.config,
        &ShardName::new(&f.cluster, &f.keyspace, &f.shard.to_string()),
        w.kube.client(),
    )
    .await
    .unwrap()
}

fn refusal(r: &PlanReport) -> &str {
    r.refusal.as_ref().map(|x| x.code).unwrap_or("(none)")
}

/// The most caught-up candidates in UID order: what the plan must pick among equals.
fn lowest_uid(f: &ShardFixture, numbers: &[usize]) -> String {
    numbers
        .iter()
        .map(|n| f.alias(*n))
        .min_by_key(|a| a.uid)
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn a_healthy_shard_gets_a_target() {
    let f = shard().replicas(3).primary(1);
    let w = world(&f).await;
    let r = run(&w, &f).await;
    assert_eq!(r.exit(), Exit::Ok, "{:?}", r.refusal);
    let t = r.target.as_ref().unwrap();
    assert_eq!(t.alias, lowest_uid(&f, &[2, 3]));
    assert_eq!(r.tablets.len(), 3);
    assert!(r.issues.is_empty(), "{:?}", r.issues);
    let chosen = f
        .tablets()
        .into_iter()
        .find(|x| x.alias.to_string() == t.alias)
        .unwrap();
    assert_eq!(
        (t.pod.as_str(), t.pvc.as_str(), t.node.as_str()),
        (
            chosen.pod.as_str(),
            chosen.pod.as_str(),
            chosen.node.as_str()
        )
    );
    // plan reads and never writes.
    assert!(w.kube.writes().is_empty());
    assert!(
        w.vtctld
            .calls()
            .iter()
            .all(|c| c.starts_with("Get") || c.starts_with("ShardReplicationPositions")),
        "{:?}",
        w.vtctld.calls()
    );
}

#[tokio::test]
async fn the_json_report_has_the_documented_shape() {
    let f = shard().replicas(3).primary(1);
    let w = world(&f).await;
    let v: Value = serde_json::to_value(run(&w, &f).await).unwrap();
    for k in ["policy", "tablets", "target", "refusal"] {
        assert!(v.get(k).is_some(), "missing {k}: {v}");
    }
    for k in ["alias", "type", "ready", "lag_seconds", "node", "pvc"] {
        assert!(
            v["tablets"][0].get(k).is_some(),
            "tablet row lacks {k}: {}",
            v["tablets"][0]
        );
    }
    assert_eq!(v["policy"]["snapshot"]["mode"], "cold");
    assert_eq!(v["policy"]["deletionPolicy"]["whenDeleted"], "Retain");
    assert!(v["refusal"].is_null());
    assert_eq!(
        v["tablets"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["type"] == "primary")
            .count(),
        1
    );
}

#[tokio::test]
async fn no_replica_is_refused() {
    let f = shard().replicas(1).primary(1);
    let r = run(&world(&f).await, &f).await;
    assert_eq!((r.exit(), refusal(&r)), (Exit::Refused, "no-candidates"));
    assert!(r.target.is_none());
}

#[tokio::test]
async fn a_single_replica_is_refused_unless_allowed() {
    let f = shard().replicas(2).primary(1);
    let mut w = world(&f).await;
    let r = run(&w, &f).await;
    assert_eq!((r.exit(), refusal(&r)), (Exit::Refused, "single-replica"));
    let endpoint = w._server.endpoint();
    w.config = config_for(
        &endpoint,
        "  keyspaces:\n    commerce:\n      shards:\n        \"-\": {snapshot: {target: {allowSingleReplica: true}}}\n",
    );
    let r = run(&w, &f).await;
    assert_eq!(r.target.unwrap().alias, f.alias(2).to_string());
}

#[tokio::test]
async fn a_lagging_replica_is_passed_over() {
    let f = shard().replicas(4).primary(1).lagging(2, 120).lagging(3, 5);
    let r = run(&world(&f).await, &f).await;
    // 2 lags past the 30 s limit; 4 is more caught up than 3.
    assert_eq!(r.target.unwrap().alias, f.alias(4).to_string());

    let f = shard().replicas(3).primary(1).lagging(2, 120);
    let r = run(&world(&f).await, &f).await;
    assert_eq!(refusal(&r), "no-other-healthy-replica");
    let details = serde_json::to_value(&r.refusal.unwrap().details).unwrap();
    assert_eq!(details["rejected"][0]["reason"], "lagging");
    assert_eq!(details["rejected"][0]["lag_seconds"], 120);
}

#[tokio::test]
async fn a_replica_with_replication_stopped_is_passed_over() {
    let f = shard()
        .replicas(5)
        .primary(1)
        .replication_stopped(2)
        .replication_stopped(3);
    let r = run(&world(&f).await, &f).await;
    assert_eq!(r.target.unwrap().alias, lowest_uid(&f, &[4, 5]));
    let f = shard()
        .replicas(3)
        .primary(1)
        .replication_stopped(2)
        .replication_stopped(3);
    let r = run(&world(&f).await, &f).await;
    assert_eq!(refusal(&r), "no-healthy-candidate");
    assert!(r.refusal.unwrap().message.contains("replication-stopped"));
}

#[tokio::test]
async fn a_not_ready_pod_is_passed_over() {
    let f = shard().replicas(4).primary(1).not_ready(2);
    let r = run(&world(&f).await, &f).await;
    assert_eq!(r.target.as_ref().unwrap().alias, lowest_uid(&f, &[3, 4]));
    assert!(
        !r.tablets
            .iter()
            .find(|t| t.alias == f.alias(2).to_string())
            .unwrap()
            .ready
    );
}

#[tokio::test]
async fn pods_missing_pending_terminating_or_unknown_are_reported_not_fatal() {
    let f = shard()
        .replicas(7)
        .primary(1)
        .pod_missing(2)
        .pending(3)
        .terminating(4)
        .unknown_to_vtctld(5);
    let w = world(&f).await;
    let r = run(&w, &f).await;
    assert_eq!(
        r.target.unwrap().alias,
        lowest_uid(&f, &[6, 7]),
        "only tablets 6 and 7 are healthy replicas"
    );
    let codes: Vec<String> = r
        .issues
        .iter()
        .map(|i| {
            serde_json::to_value(i).unwrap()["code"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    for c in [
        "pod-missing",
        "pod-pending",
        "pod-terminating",
        "not-in-vtctld",
    ] {
        assert!(codes.iter().any(|x| x == c), "missing issue {c}: {codes:?}");
    }
}

#[tokio::test]
async fn a_tablet_without_its_pvc_is_passed_over() {
    let f = shard().replicas(4).primary(1).pvc_missing(2);
    let r = run(&world(&f).await, &f).await;
    assert_eq!(r.target.as_ref().unwrap().alias, lowest_uid(&f, &[3, 4]));
    let v = serde_json::to_value(&r.issues).unwrap();
    assert!(
        v.as_array()
            .unwrap()
            .iter()
            .any(|i| i["code"] == "pvc-missing" && i["alias"] == f.alias(2).to_string()),
        "{v}"
    );
}

#[tokio::test]
async fn the_primary_is_never_chosen_even_when_labelled_replica() {
    // The primary's pool label says `replica`, as vitess-operator labels it.
    let f = shard().replicas(3).primary(1);
    let r = run(&world(&f).await, &f).await;
    let primary = f.alias(1).to_string();
    assert_eq!(
        r.tablets
            .iter()
            .find(|t| t.alias == primary)
            .unwrap()
            .pool
            .as_deref(),
        Some("replica")
    );
    assert_ne!(r.target.unwrap().alias, primary);
}

#[tokio::test]
async fn a_primary_that_disagrees_with_vtctld_is_refused() {
    // The shard record says 1; vtctld's tablet list says 2 is PRIMARY (mid-reparent).
    let f = shard()
        .replicas(4)
        .primary(1)
        .vtctld_type(2, TabletType::Primary);
    let r = run(&world(&f).await, &f).await;
    assert_eq!(
        (r.exit(), refusal(&r)),
        (Exit::Refused, "primary-uncertain")
    );
    // The shard record names 1, but vtctld lists 1 as a replica.
    let f = shard()
        .replicas(4)
        .primary(1)
        .vtctld_type(1, TabletType::Replica);
    let r = run(&world(&f).await, &f).await;
    assert_eq!(refusal(&r), "primary-uncertain");
}

#[tokio::test]
async fn vtctld_unreachable_is_an_error_never_a_target() {
    let f = shard().replicas(3).primary(1);
    let kube = FakeKube::new();
    f.install(&kube, &FakeVtctld::new());
    let config = config_for(&closed_endpoint().await, "");
    let e = plan(
        &config,
        &ShardName::new("example", "commerce", "-"),
        kube.client(),
    )
    .await
    .unwrap_err();
    assert_eq!(e.exit(), Exit::Failed);
    assert_eq!(e.code(), "vtctld-unavailable");
    assert!(
        matches!(e, RunError::Discovery(_) | RunError::VtctldUnavailable(_)),
        "{e}"
    );
}

#[tokio::test]
async fn vtctld_errors_are_errors_too() {
    let f = shard().replicas(3).primary(1);
    let w = world(&f).await;
    // (a failed ShardReplicationPositions is read tablet by tablet instead: see
    // core's discover tests; the tablet list has no such fallback)
    w.vtctld
        .fail("GetTablets", 5, tonic::Status::internal("topo down"));
    let e = plan(
        &w.config,
        &ShardName::new("example", "commerce", "-"),
        w.kube.client(),
    )
    .await
    .unwrap_err();
    assert_eq!(e.exit(), Exit::Failed);
}

#[tokio::test]
async fn transient_vtctld_read_failures_are_retried() {
    let f = shard().replicas(3).primary(1);
    let w = world(&f).await;
    w.vtctld
        .fail("GetTablets", 1, tonic::Status::unavailable("blip"));
    let r = run(&w, &f).await;
    assert!(r.target.is_some());
    assert_eq!(
        w.vtctld
            .calls()
            .iter()
            .filter(|c| c.starts_with("GetTablets"))
            .count(),
        2
    );
}

#[tokio::test]
async fn padded_and_unpadded_tablet_uid_labels_both_work() {
    for f in [
        shard().replicas(3).primary(1),
        shard().replicas(3).primary(1).unpadded_uid_labels(),
    ] {
        let r = run(&world(&f).await, &f).await;
        assert!(r.issues.is_empty(), "{:?}", r.issues);
        assert!(
            r.tablets
                .iter()
                .all(|t| t.pod.is_some() && t.vt_type.is_some())
        );
        assert!(r.target.is_some());
    }
}

#[tokio::test]
async fn vtctld_is_found_from_its_service() {
    let f = shard().replicas(3).primary(1);
    let kube = FakeKube::new();
    f.install(&kube, &FakeVtctld::new());
    let got = vtsnap_core::discover::find_vtctld(&kube.client(), "vitess", "example")
        .await
        .unwrap();
    assert_eq!(got, "example-zone1-vtctld-6e7ab2a8.vitess.svc:15999");
    let e = vtsnap_core::discover::find_vtctld(&kube.client(), "vitess", "other")
        .await
        .unwrap_err();
    assert!(e.to_string().contains("no vtctld Service"), "{e}");
}

#[tokio::test]
async fn unknown_clusters_and_bad_shards_are_usage_errors() {
    let f = shard().replicas(3).primary(1);
    let w = world(&f).await;
    let e = plan(
        &w.config,
        &ShardName::new("nope", "commerce", "-"),
        w.kube.client(),
    )
    .await
    .unwrap_err();
    assert_eq!(e.exit(), Exit::Usage);
    let e = plan(
        &w.config,
        &ShardName::new("example", "commerce", "80"),
        w.kube.client(),
    )
    .await
    .unwrap_err();
    assert_eq!((e.exit(), e.code()), (Exit::Usage, "bad-shard"));
}

#[test]
fn validate_reports_every_error_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.yaml");
    std::fs::write(&good, "clusters:\n- name: example\n  namespace: vitess\n").unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "clusters:\n- name: example\n  namespace: vitess\n  retention: {maxCount: 0}\n  keyspaces:\n    commerce:\n      shards:\n        \"80-40\": {}\n").unwrap();
    let run = |p: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_vtsnap-snapshot"))
            .args(["validate", "--config"])
            .arg(p)
            .output()
            .unwrap()
    };
    let ok = run(&good);
    assert_eq!(ok.status.code(), Some(0));
    let out = run(&bad);
    assert_eq!(out.status.code(), Some(2));
    let lines: Vec<String> = String::from_utf8_lossy(&out.stderr)
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(
        lines,
        [
            "clusters[0].retention.maxCount: must be ≥ 1",
            "clusters[0].keyspaces.commerce.shards.80-40: shard \"80-40\": start must be below end",
        ]
    );
    let missing = run(&dir.path().join("missing.yaml"));
    assert_eq!(missing.status.code(), Some(2));
}
