//! `vtsnap-gc run` judging catch-up coverage, against the in-memory API and the fake vtctld
//! (docs/design.md §7: no vtctld or MySQL 8 here; the fake answers `SELECT @@var` from the
//! shard fixture's variables): a snapshot the primary purged past is marked unusable before
//! any restore picks it, a covered one is kept as the newest covered, and a primary that
//! cannot be read, or answers garbage, changes nothing.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use vtsnap_core::config::Config;
use vtsnap_core::snapshot::{ANN_UNUSABLE, GROUP, PLURAL};
use vtsnap_gc::act::{GcOptions, run};
use vtsnap_gc::decide::CoverageState;
use vtsnap_testkit::fake_kube::FakeKube;
use vtsnap_testkit::fake_vtctld::FakeVtctld;
use vtsnap_testkit::fixtures::shard;
use vtsnap_testkit::operator_objects::operator_shard;

const UUID: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";

struct World {
    kube: FakeKube,
    vtctld: FakeVtctld,
    config: Config,
    _vt: vtsnap_testkit::grpc::Running,
}

/// One ready snapshot `s-1` at `UUID:1-100` (MySQL, cold); the primary reports `purged`.
async fn world(purged: &str) -> World {
    let kube = FakeKube::new();
    let vtctld = FakeVtctld::new();
    shard()
        .replicas(3)
        .primary(1)
        .variable("version", "8.0.36")
        .variable("gtid_purged", purged)
        .variable("binlog_expire_logs_seconds", "604800")
        .install(&kube, &vtctld);
    let vt = vtctld.serve().await;
    let cut = Timestamp::now() - SignedDuration::from_hours(2);
    kube.put_json(
        GROUP,
        PLURAL,
        operator_shard().snapshot("s-1", cut).object(),
    );
    let config = Config::from_yaml(&format!(
        "clusters:\n- name: example\n  namespace: vitess\n  vtctld: \"{}\"\n",
        vt.endpoint()
    ))
    .unwrap();
    World {
        kube,
        vtctld,
        config,
        _vt: vt,
    }
}

fn opts() -> GcOptions {
    GcOptions {
        dry_run: false,
        only_cluster: None,
        node_timeout: Duration::from_secs(2),
    }
}

impl World {
    fn unusable(&self) -> Option<String> {
        self.kube
            .get_json(GROUP, PLURAL, "vitess", "s-1")
            .and_then(|s| {
                s["metadata"]["annotations"][ANN_UNUSABLE]
                    .as_str()
                    .map(str::to_owned)
            })
    }
}

#[tokio::test]
async fn a_snapshot_the_primary_purged_past_is_marked_before_any_restore() {
    let w = world(&format!("{UUID}:1-150")).await;
    let r = run(&w.config, &opts(), w.kube.client_as("gc")).await;
    assert_eq!(r.exit_code, 0, "{r:?}");
    assert_eq!(r.run.marked_unusable, ["vitess/s-1"]);
    let why = w.unusable().expect("marked");
    assert!(why.contains(&format!("{UUID}:101-150")), "{why}");
    let event = w
        .kube
        .events()
        .into_iter()
        .find(|e| e["reason"] == "SnapshotUnusable")
        .expect("an Event");
    assert_eq!(event["type"], "Warning");
    // the only ready snapshot: kept all the same (nothing better to keep)
    assert_eq!(r.run.plan.keep[0].reason.as_str(), "newest-ready");
    assert!(
        w.vtctld
            .calls()
            .iter()
            .any(|c| c.contains("ExecuteFetchAsDBA")),
        "{:?}",
        w.vtctld.calls()
    );
    assert_eq!(
        vtsnap_testkit::rbac::refused("gc", &w.kube.log()),
        Vec::<String>::new(),
        "requests its Role does not grant"
    );
}

#[tokio::test]
async fn a_covered_snapshot_is_kept_as_the_newest_covered_with_its_headroom() {
    let w = world(&format!("{UUID}:1-50")).await;
    let r = run(&w.config, &opts(), w.kube.client_as("gc")).await;
    assert_eq!(r.exit_code, 0, "{r:?}");
    assert!(r.run.marked_unusable.is_empty());
    assert!(w.unusable().is_none());
    assert_eq!(r.run.plan.keep[0].reason.as_str(), "newest-covered");
    let CoverageState::Known {
        newest_covered,
        headroom_seconds: Some(h),
        ..
    } = &r.run.plan.coverage[0].state
    else {
        panic!("{:?}", r.run.plan.coverage)
    };
    assert_eq!(newest_covered.as_deref(), Some("s-1"));
    // a week of binlogs, a snapshot two hours old
    assert!((604_800 - 7300..=604_800 - 7100).contains(h), "{h}");
}

#[tokio::test]
async fn a_primary_that_fails_or_answers_garbage_changes_nothing() {
    // ExecuteFetchAsDBA fails
    let w = world(&format!("{UUID}:1-150")).await;
    w.vtctld
        .fail("ExecuteFetchAsDBA", 10, tonic::Status::unavailable("down"));
    let r = run(&w.config, &opts(), w.kube.client_as("gc")).await;
    assert_eq!(r.exit_code, 0, "{r:?}");
    assert!(r.run.marked_unusable.is_empty() && w.unusable().is_none());
    assert!(matches!(
        r.run.plan.coverage[0].state,
        CoverageState::Unknown { .. }
    ));
    // and a purged set that does not read
    for garbage in ["not a gtid set", "3e11fa47:1-5", &format!("{UUID}:0-5")] {
        let w = world(garbage).await;
        let r = run(&w.config, &opts(), w.kube.client_as("gc")).await;
        assert!(r.run.marked_unusable.is_empty(), "{garbage}: {r:?}");
        assert!(w.unusable().is_none());
        let CoverageState::Unknown { why } = &r.run.plan.coverage[0].state else {
            panic!("{garbage}: {:?}", r.run.plan.coverage)
        };
        assert!(why.contains("gtid_purged"), "{why}");
    }
}

/// A FAKE primary that never answers ExecuteFetchAsDBA (a hung mysqld behind vtctld).
struct Hung;

impl vtsnap_testkit::fake_vtctld::Backend for Hung {
    fn stop_replication(
        &self,
        _: vtsnap_core::naming::TabletAlias,
    ) -> futures::future::BoxFuture<'static, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }
    fn start_replication(
        &self,
        _: vtsnap_core::naming::TabletAlias,
    ) -> futures::future::BoxFuture<'static, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }
    fn position(
        &self,
        _: vtsnap_core::naming::TabletAlias,
    ) -> futures::future::BoxFuture<'static, Option<String>> {
        Box::pin(async { None })
    }
    fn execute_fetch(
        &self,
        _: vtsnap_core::naming::TabletAlias,
        _: String,
    ) -> futures::future::BoxFuture<'static, Option<vtsnap_testkit::fake_vtctld::FetchResult>> {
        Box::pin(futures::future::pending())
    }
}

/// A primary that does not answer: the read times out (vtctld client limits), the shard's
/// coverage is unknown and nothing is marked; the run ends.
#[tokio::test]
async fn a_primary_that_never_answers_times_out_and_changes_nothing() {
    let w = world(&format!("{UUID}:1-150")).await;
    w.vtctld.set_backend(std::sync::Arc::new(Hung));
    let r = run(&w.config, &opts(), w.kube.client_as("gc")).await;
    assert_eq!(r.exit_code, 0, "{r:?}");
    assert!(r.run.marked_unusable.is_empty() && w.unusable().is_none());
    let CoverageState::Unknown { why } = &r.run.plan.coverage[0].state else {
        panic!("{:?}", r.run.plan.coverage)
    };
    assert!(why.contains("SELECT @@version"), "{why}");
}
