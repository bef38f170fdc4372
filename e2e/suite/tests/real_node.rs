//! The real node helper (`vtsnap-node run`, in-process) following its fence leases on a
//! real API server: it answers the job's request in the lease, and when the job stops
//! renewing, its dead-man's switch puts the tablet back and deletes the lease. vtctld is
//! the fake (nothing real can serve it here); no mysqld is needed for these requests.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use vtsnap_testkit::real_kube::RealKube;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_helper_answers_its_lease_and_recovers_it_when_the_job_stops_renewing() {
    let kube = RealKube::from_env().await;
    let ns = kube.namespace("node").await;
    common::node_helper_answers_and_recovers(&kube, &ns.name, kube.client()).await;
}
