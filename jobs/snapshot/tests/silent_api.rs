//! Every API call has a timeout (docs/design.md §6: an uncertain read never leads to a destructive
//! step). The API server starts accepting requests and never answering while the tablet is
//! held: the job, with the binaries' client timeouts over real sockets, ends within its
//! bound, and the fence it could not release is released by the node helper once the lease
//! expires.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use vtsnap_core::shard::ShardName;

use vtsnap_core::cli::{ApiTimeouts, client_with};
use vtsnap_core::config::Config;
use vtsnap_core::fence::lease_name;
use vtsnap_core::vtctld::TabletType;
use vtsnap_core::vtctld::messages::replicationdata::STATE_RUNNING;
use vtsnap_snapshot::run::{ParkHook, RunOptions, run};
use vtsnap_testkit::fake_kube::Fault;
use vtsnap_testkit::fake_shard::FakeShard;
use vtsnap_testkit::fixtures::shard;

#[tokio::test]
async fn a_silent_api_server_mid_hold_ends_the_job_and_the_node_helper_releases() {
    let w = FakeShard::start(shard().replicas(3).primary(1)).await;
    let front = w.kube.serve_http().await;
    let bound = Duration::from_secs(1);
    let client = client_with(
        front.config(),
        ApiTimeouts {
            connect: bound,
            read: bound,
            write: bound,
        },
    )
    .unwrap();
    // Once set, every request over HTTP is accepted and never answered (an hour's delay).
    // The fake node helper and snapshotter read the fake's state directly and go on.
    let silent = Arc::new(AtomicBool::new(false));
    let s = silent.clone();
    w.kube.fault(
        Fault::on(move |_| s.load(Ordering::SeqCst))
            .delay(Duration::from_secs(3600))
            .always(),
    );
    let config = Config::from_yaml(&format!(
        "clusters:\n- name: example\n  namespace: vitess\n  vtctld: \"{}\"\n  snapshot: {{cutTimeout: 5s, readyTimeout: 5s, maxHold: 60s}}\n",
        w.vt.endpoint()
    ))
    .unwrap();
    let opts = RunOptions {
        lease_duration: Duration::from_secs(3),
        node_timeout: Duration::from_secs(5),
        poll: Duration::from_millis(50),
        park_after: Some(ParkHook(Arc::new(move |step: &str| {
            if step == "mysqld held" {
                silent.store(true, Ordering::SeqCst);
            }
            false
        }))),
        ..RunOptions::default()
    };

    let started = Instant::now();
    // Without timeouts the job would wait the hour out; the test gives up far sooner.
    let s = tokio::time::timeout(
        Duration::from_secs(120),
        run(
            &config,
            &ShardName::new("example", "commerce", "-"),
            &opts,
            client,
        ),
    )
    .await
    .expect("the job hung on the silent API server");
    let took = started.elapsed();
    // A handful of calls, each bounded by the timeouts: seconds, not an hour.
    assert!(
        took < Duration::from_secs(30),
        "the job took {took:?}: {s:?}"
    );
    assert!(s.steps.iter().any(|x| x == "mysqld held"), "{s:?}");
    assert_eq!(s.exit_code, 4, "the fence could not be released: {s:?}");
    assert!(s.snapshot.is_none(), "no snapshot was created: {s:?}");

    // The lease is left unrenewed; the node helper's dead-man's switch puts the tablet back.
    let lease = lease_name("example", "commerce", "x-x");
    let alias = s.target.clone().unwrap().parse().unwrap();
    let begin = Instant::now();
    while w
        .kube
        .get_json("coordination.k8s.io", "leases", "vitess", &lease)
        .is_some()
    {
        assert!(
            begin.elapsed() < Duration::from_secs(20),
            "the node helper did not release the fence; recovered {:?}",
            w.node.recovered()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(w.node.recovered(), [lease]);
    let t = w.vtctld.tablet(&alias).unwrap();
    assert_eq!(t.tablet.r#type, TabletType::Replica as i32);
    assert_eq!(t.status.unwrap().io_state, STATE_RUNNING);
}
