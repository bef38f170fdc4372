//! What only the fake has (scripted failures, the call log, states a real shard cannot be
//! put in on demand). What it shares with real vtctld is held by the contract suite
//! (`testkit/tests/vtctld_contract.rs`).

use vtsnap_core::vtctld::client::CallLimits;
use vtsnap_core::vtctld::messages::replicationdata::STATE_STOPPED;
use vtsnap_core::vtctld::{VtctldClient, VtctldError};

use super::*;
use crate::fixtures::shard;

async fn setup() -> (
    FakeVtctld,
    Running,
    VtctldClient,
    crate::fixtures::ShardFixture,
) {
    let f = shard().replicas(3).primary(1);
    let fake = FakeVtctld::new();
    f.install(&crate::fake_kube::FakeKube::new(), &fake);
    let server = fake.serve().await;
    let client = VtctldClient::new(
        &server.endpoint(),
        CallLimits {
            read_attempts: 1,
            ..CallLimits::default()
        },
    )
    .unwrap();
    (fake, server, client, f)
}

fn rpc_error<T: std::fmt::Debug>(r: Result<T, VtctldError>) -> (tonic::Code, String) {
    match r {
        Err(VtctldError::Rpc { code, message, .. }) => (code, message),
        other => panic!("expected an RPC error, got {other:?}"),
    }
}

#[tokio::test]
async fn scripted_failures_fire_then_clear_and_calls_are_logged() {
    let (fake, _s, c, f) = setup().await;
    fake.fail("GetTablets", 2, tonic::Status::unavailable("down"));
    assert!(c.get_tablets("commerce", "-").await.is_err());
    assert!(c.get_tablets("commerce", "-").await.is_err());
    assert!(c.get_tablets("commerce", "-").await.is_ok());
    c.change_tablet_type(&f.alias(2), TabletType::Drained)
        .await
        .unwrap();
    let calls = fake.calls();
    assert_eq!(
        calls.last().unwrap(),
        &format!("ChangeTabletType {} DRAINED", f.alias(2))
    );
    assert_eq!(
        calls.iter().filter(|c| c.starts_with("GetTablets")).count(),
        3
    );
}

#[tokio::test]
async fn without_a_primary_no_type_changes_and_no_replication_starts() {
    let (fake, _s, c, f) = setup().await;
    fake.with(|s| s.shards.values_mut().for_each(|sh| sh.primary = None));
    for (code, message) in [
        rpc_error(c.change_tablet_type(&f.alias(2), TabletType::Drained).await),
        rpc_error(c.start_replication(&f.alias(2)).await),
    ] {
        assert_eq!(code, tonic::Code::FailedPrecondition, "{message}");
        assert!(
            message.contains("no primary tablet for shard commerce/-"),
            "{message}"
        );
    }
    assert_eq!(fake.tablet_type(&f.alias(2)), Some(TabletType::Replica));
}

#[tokio::test]
async fn the_primarys_mysqld_down_fails_the_positions_whole() {
    let (fake, _s, c, f) = setup().await;
    fake.set_mysqld_down(&f.alias(1), true);
    let (code, message) = rpc_error(c.shard_replication_positions("commerce", "-").await);
    assert_eq!(code, tonic::Code::Unknown);
    assert!(
        message.contains(&format!("PrimaryPosition({}) failed", f.alias(1))),
        "{message}"
    );
    assert!(message.contains("(errno 2002)"), "{message}");
    // Every failed read is named, not only the first.
    fake.set_mysqld_down(&f.alias(3), true);
    let (_, message) = rpc_error(c.shard_replication_positions("commerce", "-").await);
    assert!(
        message.contains(&format!("ReplicationStatus({}) failed", f.alias(3))),
        "{message}"
    );
    // The primary comes back with no replication to stop.
    fake.set_mysqld_down(&f.alias(1), false);
    assert!(fake.tablet(&f.alias(1)).unwrap().status.is_none());
    c.stop_replication(&f.alias(1)).await.unwrap();
}

#[tokio::test]
async fn a_replica_type_tablet_without_replication_fails_the_positions() {
    let (fake, _s, c, f) = setup().await;
    fake.with(|s| {
        let sh = s.shards.values_mut().next().unwrap();
        sh.tablets.get_mut(&f.alias(3).to_string()).unwrap().status = None;
    });
    let (code, message) = rpc_error(c.shard_replication_positions("commerce", "-").await);
    assert_eq!(code, tonic::Code::Unknown);
    assert!(message.contains("no replication status"), "{message}");
    // Its own status still answers, without replication.
    let full = c.get_full_status(&f.alias(3)).await.unwrap();
    assert!(full.replication_status.is_none());
}

#[tokio::test]
async fn a_replica_stays_stopped_when_its_mysqld_comes_back_until_started() {
    let (fake, _s, c, f) = setup().await;
    fake.set_mysqld_down(&f.alias(2), true);
    fake.set_mysqld_down(&f.alias(2), true);
    fake.set_mysqld_down(&f.alias(2), false);
    let s = c
        .get_full_status(&f.alias(2))
        .await
        .unwrap()
        .replication_status
        .unwrap();
    assert_eq!((s.io_state, s.sql_state), (STATE_STOPPED, STATE_STOPPED));
    assert!(s.replication_lag_unknown);
    // Bringing up a mysqld that is up changes nothing.
    c.start_replication(&f.alias(2)).await.unwrap();
    fake.set_mysqld_down(&f.alias(2), false);
    let s = fake.tablet(&f.alias(2)).unwrap().status.unwrap();
    assert!(!s.replication_lag_unknown, "{s:?}");
}

#[tokio::test]
#[should_panic(expected = "no tablet")]
async fn taking_down_an_unknown_tablet_is_a_test_bug() {
    let (fake, _s, _c, _f) = setup().await;
    fake.set_mysqld_down(&"zone1-0000000999".parse().unwrap(), true);
}
