//! Recovering an expired fence (docs/design.md §5.4) against the fake API, the fake vtctld and the
//! fake node helper: the tablet ends in its original type with replication running, and the
//! lease is gone — or, if vtctld cannot be reached, the lease stays for the next try.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use serde_json::json;
use vtsnap_core::fence::client::{self, FenceClientError, FenceSpec};
use vtsnap_core::fence::{Request, lease_name};
use vtsnap_core::vtctld::TabletType;
use vtsnap_core::vtctld::VtctldClient;
use vtsnap_core::vtctld::client::CallLimits;
use vtsnap_core::vtctld::messages::replicationdata::STATE_RUNNING;
use vtsnap_testkit::fake_kube::FakeKube;
use vtsnap_testkit::fake_node::{FakeNodeHelper, NodeScript};
use vtsnap_testkit::fake_vtctld::FakeVtctld;
use vtsnap_testkit::fixtures::{ShardFixture, shard};
use vtsnap_testkit::grpc::Running;

struct World {
    kube: FakeKube,
    vtctld: FakeVtctld,
    vt: Running,
    fixture: ShardFixture,
}

/// A shard whose tablet 2 a dead job left DRAINED with replication stopped, under an
/// expired fence.
async fn world() -> World {
    let fixture = shard().replicas(3).primary(1);
    let kube = FakeKube::new();
    let vtctld = FakeVtctld::new();
    fixture.install(&kube, &vtctld);
    let vt = vtctld.serve().await;
    let c = VtctldClient::new(&vt.endpoint(), CallLimits::default()).unwrap();
    c.change_tablet_type(&fixture.alias(2), TabletType::Drained)
        .await
        .unwrap();
    c.stop_replication(&fixture.alias(2)).await.unwrap();
    let spec = FenceSpec {
        namespace: "vitess".into(),
        name: lease_name("example", "commerce", "x-x"),
        holder: "dead-job".into(),
        node: "node-2".into(),
        lease_duration: Duration::from_secs(30),
        target_pod: fixture.tablet(2).pod,
        target_pod_uid: "uid".into(),
        tablet_alias: fixture.alias(2),
        original_type: TabletType::Replica,
        vtctld: vt.endpoint(),
        mode: "cold".into(),
        max_hold: Duration::from_secs(600),
    };
    let l = client::acquire(&api(&kube), &spec, Request::Hold)
        .await
        .unwrap();
    let mut v = kube
        .get_json(
            "coordination.k8s.io",
            "leases",
            "vitess",
            l.metadata.name.as_deref().unwrap(),
        )
        .unwrap();
    v["spec"]["renewTime"] = json!("2026-01-01T00:00:00.000000Z");
    kube.put_json("coordination.k8s.io", "leases", v);
    World {
        kube,
        vtctld,
        vt,
        fixture,
    }
}

fn api(kube: &FakeKube) -> Api<Lease> {
    Api::namespaced(kube.client(), "vitess")
}

async fn lease(w: &World) -> Lease {
    api(&w.kube)
        .get(&lease_name("example", "commerce", "x-x"))
        .await
        .unwrap()
}

fn assert_restored(w: &World) {
    let t = w.vtctld.tablet(&w.fixture.alias(2)).unwrap();
    assert_eq!(t.tablet.r#type, TabletType::Replica as i32);
    assert_eq!(t.status.unwrap().io_state, STATE_RUNNING);
}

#[tokio::test]
async fn a_live_node_helper_recovers_the_expired_fence() {
    let w = world().await;
    let node = FakeNodeHelper::start(
        &w.kube,
        "node-2",
        NodeScript::default(),
        Duration::from_millis(20),
    );
    let r = client::recover(&api(&w.kube), &lease(&w).await, Duration::from_secs(10))
        .await
        .unwrap();
    assert!(r.node_released && r.tablet_restored, "{r:?}");
    assert_restored(&w);
    assert!(
        api(&w.kube).get_opt(&r.lease).await.unwrap().is_none(),
        "the lease must be gone"
    );
    // An expired lease is the node helper's to recover, whoever else is trying.
    assert_eq!(node.recovered(), vec![r.lease.clone()]);
}

#[tokio::test]
async fn a_dead_node_helper_does_not_block_the_tablet_restore() {
    let w = world().await;
    let _node = FakeNodeHelper::start(
        &w.kube,
        "node-2",
        NodeScript {
            dead: true,
            ..NodeScript::default()
        },
        Duration::from_millis(20),
    );
    let r = client::recover(&api(&w.kube), &lease(&w).await, Duration::from_millis(600))
        .await
        .unwrap();
    assert!(!r.node_released && r.tablet_restored, "{r:?}");
    assert_restored(&w);
    assert!(api(&w.kube).get_opt(&r.lease).await.unwrap().is_none());
}

#[tokio::test]
async fn a_failed_restore_keeps_the_lease_for_the_next_try() {
    let w = world().await;
    let _node = FakeNodeHelper::start(
        &w.kube,
        "node-2",
        NodeScript {
            dead: true,
            ..NodeScript::default()
        },
        Duration::from_millis(20),
    );
    w.vtctld.fail(
        "ChangeTabletType",
        1,
        tonic::Status::unavailable("vtctld restarting"),
    );
    let l = lease(&w).await;
    let e = client::recover(&api(&w.kube), &l, Duration::from_millis(300))
        .await
        .unwrap_err();
    assert!(matches!(e, FenceClientError::Restore { .. }), "{e}");
    assert!(
        api(&w.kube)
            .get_opt(l.metadata.name.as_deref().unwrap())
            .await
            .unwrap()
            .is_some(),
        "the fence must stay"
    );
    // The next try succeeds and is idempotent.
    let r = client::recover(&api(&w.kube), &lease(&w).await, Duration::from_millis(300))
        .await
        .unwrap();
    assert!(r.tablet_restored);
    assert_restored(&w);
    let _ = &w.vt;
}
