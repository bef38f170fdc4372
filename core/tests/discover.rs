//! Shard discovery against the fake vtctld, where real vtctld's rules matter: its
//! ShardReplicationPositions fails whole when one replica's status cannot be read (its
//! mysqld is down), and one sick tablet must not hide the others.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use vtsnap_core::discover::{build, observe};
use vtsnap_core::shard::Issue;
use vtsnap_core::vtctld::VtctldClient;
use vtsnap_core::vtctld::client::CallLimits;
use vtsnap_testkit::fake_kube::FakeKube;
use vtsnap_testkit::fake_vtctld::FakeVtctld;
use vtsnap_testkit::fixtures::shard;

/// Real vtctld's words when tablet 3's mysqld is down (Vitess 24).
fn mysqld_down(rpc: &str) -> tonic::Status {
    tonic::Status::unknown(format!(
        "rpc error: code = Unavailable desc = TabletManager.{rpc} on zone1-0000000103: \
         net.Dial(/vt/socket/mysql.sock) to local server failed (errno 2002) (sqlstate HY000)"
    ))
}

#[tokio::test]
async fn a_replica_whose_status_cannot_be_read_does_not_hide_the_others() {
    let fixture = shard().replicas(3).primary(1);
    let kube = FakeKube::new();
    let vtctld = FakeVtctld::new();
    fixture.install(&kube, &vtctld);
    let vt = vtctld.serve().await;
    let client = VtctldClient::new(&vt.endpoint(), CallLimits::default()).unwrap();
    vtctld.fail(
        "ShardReplicationPositions",
        1,
        tonic::Status::unknown(format!(
            "ReplicationStatus(zone1-0000000103) failed: {}",
            mysqld_down("ReplicationStatus").message()
        )),
    );
    vtctld.fail("GetFullStatus", 1, mysqld_down("FullStatus"));

    let observed = observe(&kube.client(), &client, &fixture.shard_ref())
        .await
        .expect("one tablet's failure is not the shard's");
    let s = build(&fixture.shard_ref(), &observed);

    let with_status: Vec<_> = s
        .tablets
        .iter()
        .filter(|t| t.replication.is_some())
        .map(|t| t.alias.clone())
        .collect();
    let without: Vec<_> = s
        .issues
        .iter()
        .filter_map(|i| match i {
            Issue::NoReplicationStatus { alias } => Some(alias.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(with_status.len(), 1, "{:?}", s.tablets);
    assert_eq!(without.len(), 1, "{:?}", s.issues);
    assert_ne!(with_status[0].to_string(), without[0]);
    let calls = vtctld.calls();
    assert_eq!(
        calls
            .iter()
            .filter(|c| c.starts_with("GetFullStatus"))
            .count(),
        2,
        "each replica read once, the primary not at all: {calls:?}"
    );
    assert!(
        !calls
            .iter()
            .any(|c| c == &format!("GetFullStatus {}", fixture.alias(1))),
        "{calls:?}"
    );
}

#[tokio::test]
async fn when_the_positions_answer_no_tablet_is_read_one_by_one() {
    let fixture = shard().replicas(3).primary(1);
    let kube = FakeKube::new();
    let vtctld = FakeVtctld::new();
    fixture.install(&kube, &vtctld);
    let vt = vtctld.serve().await;
    let client = VtctldClient::new(&vt.endpoint(), CallLimits::default()).unwrap();
    let observed = observe(&kube.client(), &client, &fixture.shard_ref())
        .await
        .unwrap();
    let s = build(&fixture.shard_ref(), &observed);
    assert!(s.issues.is_empty(), "{:?}", s.issues);
    assert!(
        !vtctld
            .calls()
            .iter()
            .any(|c| c.starts_with("GetFullStatus")),
        "{:?}",
        vtctld.calls()
    );
}
