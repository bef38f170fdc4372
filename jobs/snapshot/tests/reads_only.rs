//! `run --dry-run`, `plan` and `list` never write, also when the shard has an expired fence
//! lease (docs/snapshot.md): the dry run says it would recover that fence, and the lease, the
//! tablet and the request channel to the node helper stay as they were. No node helper runs
//! here, so nothing but the command under test could change the lease.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::{Value, json};
use vtsnap_core::config::Config;
use vtsnap_core::fence::lease_name;
use vtsnap_core::shard::ShardName;
use vtsnap_core::vtctld::TabletType;
use vtsnap_snapshot::run::{RunOptions, run};
use vtsnap_testkit::fake_kube::FakeKube;
use vtsnap_testkit::fake_vtctld::FakeVtctld;
use vtsnap_testkit::fixtures::{ShardFixture, shard};
use vtsnap_testkit::grpc::Running;

struct World {
    kube: FakeKube,
    vtctld: FakeVtctld,
    vt: Running,
    fixture: ShardFixture,
}

/// A primary and three replicas; a dead job left replica 2 drained, replication stopped, under a fence
/// that expired long ago with a `hold` request on it.
async fn a_shard_with_an_expired_fence() -> World {
    let fixture = shard().replicas(4).primary(1);
    let (kube, vtctld) = (FakeKube::new(), FakeVtctld::new());
    fixture.install(&kube, &vtctld);
    let vt = vtctld.serve().await;
    let dead = fixture.alias(2);
    vtctld.with(|s| {
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
    kube.put_json("coordination.k8s.io", "leases", json!({
        "metadata": {"name": lease_name("example", "commerce", "x-x"), "namespace": "vitess", "labels": {"vtsnap.io/node": "node-2"},
            "annotations": {"vtsnap.io/target-pod": "p", "vtsnap.io/target-pod-uid": "u", "vtsnap.io/tablet-alias": dead.to_string(),
            "vtsnap.io/original-type": "replica", "vtsnap.io/vtctld": vt.endpoint(), "vtsnap.io/mode": "cold",
            "vtsnap.io/request": "hold", "vtsnap.io/max-hold-seconds": "60"}},
        "spec": {"holderIdentity": "dead-job", "leaseDurationSeconds": 30, "renewTime": "2026-01-01T00:00:00.000000Z"}
    }));
    World {
        kube,
        vtctld,
        vt,
        fixture,
    }
}

fn config(w: &World) -> Config {
    Config::from_yaml(&format!(
        "clusters:\n- name: example\n  namespace: vitess\n  vtctld: \"{}\"\n",
        w.vt.endpoint()
    ))
    .unwrap()
}

fn lease(w: &World) -> Value {
    w.kube
        .get_json(
            "coordination.k8s.io",
            "leases",
            "vitess",
            &lease_name("example", "commerce", "x-x"),
        )
        .expect("the fence lease is still there")
}

/// The lease, the dead job's tablet and the API are as they were.
fn assert_untouched(w: &World, before: &Value) {
    let after = lease(w);
    assert_eq!(
        after["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"],
        "the lease was written"
    );
    assert_eq!(
        after["metadata"]["annotations"]["vtsnap.io/request"], "hold",
        "the node helper was asked for something"
    );
    assert!(w.kube.writes().is_empty(), "{:?}", w.kube.writes());
    assert_eq!(
        w.vtctld.tablet_type(&w.fixture.alias(2)),
        Some(TabletType::Drained),
        "the dead job's tablet was put back: {:?}",
        w.vtctld.calls()
    );
}

#[tokio::test]
async fn a_dry_run_with_an_expired_fence_says_it_would_recover_it_and_writes_nothing() {
    let w = a_shard_with_an_expired_fence().await;
    let before = lease(&w);
    let o = RunOptions {
        dry_run: true,
        holder: "job-a".into(),
        // Bounds the old, writing dry run's wait for a node helper that is not there.
        node_timeout: Duration::from_secs(1),
        ..RunOptions::default()
    };
    let s = run(
        &config(&w),
        &ShardName::new("example", "commerce", "-"),
        &o,
        w.kube.client(),
    )
    .await;
    assert_untouched(&w, &before);
    assert_eq!((s.exit_code, s.dry_run), (0, true), "{s:?}");
    assert!(s.recovered_fence.is_none(), "{s:?}");
    let lease = lease_name("example", "commerce", "x-x");
    assert!(
        s.steps[0].starts_with(&format!(
            "dry run: would recover the expired fence {lease} (held by \"dead-job\")"
        )),
        "{:?}",
        s.steps
    );
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["plan"]["recover"]["lease"], lease.as_str());
    assert_eq!(
        json["plan"]["recover"]["tablet"],
        w.fixture.alias(2).to_string()
    );
    let text = vtsnap_snapshot::run::decide::render(s.plan.as_ref().unwrap());
    assert!(
        text.contains(&format!("first: recover the expired fence {lease}")),
        "{text}"
    );
}

#[tokio::test]
async fn plan_and_list_with_an_expired_fence_write_nothing() {
    let w = a_shard_with_an_expired_fence().await;
    let before = lease(&w);
    let cfg = config(&w);
    let report = vtsnap_snapshot::plan::plan(
        &cfg,
        &ShardName::new("example", "commerce", "-"),
        w.kube.client(),
    )
    .await
    .unwrap();
    assert!(report.target.is_some(), "{report:?}");
    let rows = vtsnap_snapshot::list::list(
        &cfg,
        &vtsnap_snapshot::list::Filter::default(),
        w.kube.client(),
    )
    .await
    .unwrap();
    assert!(rows.is_empty(), "{rows:?}");
    assert_untouched(&w, &before);
}
