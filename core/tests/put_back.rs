//! The one "put the tablet back" (core::fence::put_back) against the fake vtctld: the order
//! of its calls, every step attempted after a failure, and a PRIMARY never retyped.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use vtsnap_core::fence::put_back::{
    PutBackError, TabletChanges, describe, put_tablet_back, put_tablet_back_at,
};
use vtsnap_core::vtctld::client::CallLimits;
use vtsnap_core::vtctld::messages::replicationdata::STATE_RUNNING;
use vtsnap_core::vtctld::{TabletType, VtctldClient};
use vtsnap_testkit::fake_kube::FakeKube;
use vtsnap_testkit::fake_vtctld::FakeVtctld;
use vtsnap_testkit::fixtures::shard;

/// Tablet 2 of a healthy shard, drained with replication stopped.
async fn drained() -> (FakeVtctld, vtsnap_testkit::grpc::Running, VtctldClient) {
    let fixture = shard().replicas(3).primary(1);
    let vtctld = FakeVtctld::new();
    fixture.install(&FakeKube::new(), &vtctld);
    let vt = vtctld.serve().await;
    let c = VtctldClient::new(&vt.endpoint(), CallLimits::default()).unwrap();
    c.change_tablet_type(&fixture.alias(2), TabletType::Drained)
        .await
        .unwrap();
    c.stop_replication(&fixture.alias(2)).await.unwrap();
    (vtctld, vt, c)
}

fn calls_after_setup(v: &FakeVtctld) -> Vec<String> {
    v.calls().into_iter().skip(2).collect()
}

#[tokio::test]
async fn replication_first_then_the_original_type() {
    let (v, _vt, c) = drained().await;
    let a = shard().replicas(3).primary(1).alias(2);
    let problems = put_tablet_back(&c, &a, TabletType::Replica, TabletChanges::ALL).await;
    assert!(problems.is_empty(), "{}", describe(&problems));
    let calls = calls_after_setup(&v);
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(calls[0].starts_with("StartReplication"), "{calls:?}");
    assert!(
        calls[1].starts_with("ChangeTabletType") && calls[1].ends_with("REPLICA"),
        "{calls:?}"
    );
    assert_eq!(v.tablet_type(&a), Some(TabletType::Replica));
    assert_eq!(
        v.tablet(&a).unwrap().status.unwrap().io_state,
        STATE_RUNNING
    );
}

#[tokio::test]
async fn a_failed_start_replication_still_restores_the_type() {
    let (v, _vt, c) = drained().await;
    let a = shard().replicas(3).primary(1).alias(2);
    v.fail(
        "StartReplication",
        1,
        tonic::Status::unavailable("injected"),
    );
    let problems = put_tablet_back(&c, &a, TabletType::Replica, TabletChanges::ALL).await;
    assert_eq!(problems.len(), 1, "{}", describe(&problems));
    assert!(matches!(problems[0], PutBackError::StartReplication { .. }));
    assert!(describe(&problems).contains(&a.to_string()));
    assert_eq!(v.tablet_type(&a), Some(TabletType::Replica));
}

#[tokio::test]
async fn only_what_changed_is_undone_and_a_primary_is_never_retyped() {
    let (v, _vt, c) = drained().await;
    let a = shard().replicas(3).primary(1).alias(2);
    assert!(
        put_tablet_back(&c, &a, TabletType::Replica, TabletChanges::NONE)
            .await
            .is_empty()
    );
    let only_type = TabletChanges {
        replication_stopped: false,
        type_changed: true,
    };
    assert!(
        put_tablet_back(&c, &a, TabletType::Rdonly, only_type)
            .await
            .is_empty()
    );
    assert!(
        put_tablet_back(&c, &a, TabletType::Primary, TabletChanges::ALL)
            .await
            .is_empty()
    );
    let calls = calls_after_setup(&v);
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(
        calls[0].starts_with("ChangeTabletType") && calls[0].ends_with("RDONLY"),
        "{calls:?}"
    );
    assert!(calls[1].starts_with("StartReplication"), "{calls:?}");
}

#[tokio::test]
async fn an_unusable_vtctld_address_is_a_named_problem() {
    let a = shard().replicas(3).primary(1).alias(2);
    let problems = put_tablet_back_at(
        "not an address",
        &a,
        TabletType::Replica,
        TabletChanges::ALL,
    )
    .await;
    assert_eq!(problems.len(), 1);
    assert!(
        matches!(problems[0], PutBackError::Vtctld { .. }),
        "{}",
        describe(&problems)
    );
}
