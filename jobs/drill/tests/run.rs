//! `vtsnap-drill run` against the in-memory API and the fake vtctld, with a FAKE kubelet
//! (docs/design.md §7: the node tier runs the real one): the drill's objects are made,
//! judged from what the kubelet reports, recorded on the snapshot and removed; every
//! request it sends is one the chart's `drill` Role grants; a drill killed at any of its
//! steps leaves only what its Job owns.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};
use vtsnap_core::config::Config;
use vtsnap_core::restore_pod::CONTAINER as RESTORE_CONTAINER;
use vtsnap_core::shard::ShardName;
use vtsnap_core::snapshot::{ANN_DRILL, DrillRecord, DrillResult, GROUP, PLURAL, VolumeSnapshot};
use vtsnap_drill::decide::objects::{CHECKER_CONTAINER, Owner, Settings};
use vtsnap_drill::report::Outcome;
use vtsnap_drill::run::{RunOptions, run};
use vtsnap_testkit::fake_kube::{FakeKube, Fault, Verb, is};
use vtsnap_testkit::fake_vtctld::FakeVtctld;
use vtsnap_testkit::fixtures::shard;
use vtsnap_testkit::operator_objects::{VtsnapSnapshot, operator_shard};

fn settings() -> Settings {
    Settings {
        mysqld_resources: json!({"requests": {"cpu": "500m", "memory": "1Gi"}}),
        deadline_seconds: 600,
        table_budget: "1m".into(),
        ready_timeout: "1m".into(),
        ..Settings::with_images("vtsnap/vtsnap-restore:1", "vtsnap/vtsnap-drill:1")
    }
}

/// What the checker's termination message says.
fn report(passed: bool) -> String {
    if passed {
        r#"{"verdict":{"passed":true,"tablesTotal":2,"tablesChecked":2,"sampled":false},"mysqldReadyMs":900}"#.into()
    } else {
        r#"{"verdict":{"passed":false,"failure":"table-corrupt","reason":"table shop.orders: corrupt"},"mysqldReadyMs":900}"#.into()
    }
}

/// FAKE kubelet: binds the drill's PVC and runs its Pod to the end (the init container,
/// then the checker with `message`), as the real ones report it.
async fn fake_kubelet(kube: FakeKube, message: String) {
    loop {
        let pvc = kube
            .list_json("", "persistentvolumeclaims")
            .into_iter()
            .find(|p| p["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "vtsnap-drill");
        let pod = kube
            .list_json("", "pods")
            .into_iter()
            .find(|p| p["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "vtsnap-drill");
        if let (Some(mut pvc), Some(mut pod)) = (pvc, pod) {
            pvc["status"] = json!({"phase": "Bound"});
            kube.put_json("", "persistentvolumeclaims", pvc);
            let done = |name: &str, code: i64, message: &str, from: &str, to: &str| {
                json!({"name": name, "state": {"terminated": {"exitCode": code, "message": message,
                    "reason": "Completed", "startedAt": from, "finishedAt": to}}})
            };
            pod["status"] = json!({"phase": "Succeeded",
                "initContainerStatuses": [done(RESTORE_CONTAINER, 0, "", "2026-12-03T10:00:00Z", "2026-12-03T10:00:01Z")],
                "containerStatuses": [done("mysqld", 0, "", "2026-12-03T10:00:01Z", "2026-12-03T10:00:09Z"),
                                      done(CHECKER_CONTAINER, 0, &message, "2026-12-03T10:00:01Z", "2026-12-03T10:00:09Z")]});
            kube.put_json("", "pods", pod);
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

struct World {
    kube: FakeKube,
    config: Config,
    _vtctld: FakeVtctld,
    _vt: vtsnap_testkit::grpc::Running,
}

async fn world() -> World {
    let kube = FakeKube::new();
    let vtctld = FakeVtctld::new();
    shard().replicas(3).primary(1).install(&kube, &vtctld);
    let vt = vtctld.serve().await;
    let cut = Timestamp::now() - SignedDuration::from_hours(2);
    // A MariaDB snapshot, as the fixture's tablets run MariaDB 10.11.
    let snapshot = VtsnapSnapshot {
        version: "10.11.18-MariaDB".into(),
        flavor: "mariadb",
        size: Some("10Gi".into()),
        ..operator_shard().snapshot("s-1", cut)
    };
    kube.put_json(GROUP, PLURAL, snapshot.object());
    let config = Config::from_yaml(&format!(
        "clusters:\n- name: example\n  namespace: vitess\n  vtctld: \"{}\"\n  restore: {{enabled: true}}\n",
        vt.endpoint()
    ))
    .unwrap();
    World {
        kube,
        config,
        _vtctld: vtctld,
        _vt: vt,
    }
}

fn options() -> RunOptions {
    RunOptions {
        settings: settings(),
        owner: Some(Owner {
            name: "drill-29467".into(),
            uid: "job-uid".into(),
            namespace: None,
        }),
        snapshot: None,
        plan_only: false,
    }
}

fn drill_objects(kube: &FakeKube) -> Vec<Value> {
    ["pods", "persistentvolumeclaims"]
        .into_iter()
        .flat_map(|plural| kube.list_json("", plural))
        .filter(|o| o["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "vtsnap-drill")
        .collect()
}

#[tokio::test]
async fn a_drill_that_passes_is_recorded_and_leaves_nothing_with_only_its_roles_verbs() {
    let w = world().await;
    let kubelet = tokio::spawn(fake_kubelet(w.kube.clone(), report(true)));
    let name = ShardName::new("example", "commerce", "-");
    let s = run(&w.kube.client_as("drill"), &w.config, &name, &options()).await;
    kubelet.abort();
    assert_eq!(
        s.outcome,
        Outcome::Passed,
        "{}",
        serde_json::to_string(&s).unwrap()
    );
    assert_eq!(s.snapshot.as_deref(), Some("s-1"));
    let d = s.drill.as_ref().unwrap();
    let rto = d.rto.unwrap();
    assert_eq!((rto.restore_ms, rto.mysqld_ready_ms), (1000, 900));
    assert_eq!(d.job.as_deref(), Some("drill-29467"));
    assert_eq!(s.exit().code(), 0);
    let snap = w.kube.get_json(GROUP, PLURAL, "vitess", "s-1").unwrap();
    let recorded =
        DrillRecord::parse(snap["metadata"]["annotations"][ANN_DRILL].as_str().unwrap()).unwrap();
    assert_eq!(recorded.result, DrillResult::Passed);
    // It names the snapshot it was made for, and counts there.
    assert_eq!(recorded.snapshot_uid, "uid-s-1");
    let read = VolumeSnapshot::read(&snap).unwrap();
    assert_eq!(Some(recorded.of()), read.drill_of());
    assert!(read.counted_drill(Timestamp::now()).is_some());
    assert!(
        drill_objects(&w.kube).is_empty(),
        "{:?}",
        drill_objects(&w.kube)
    );
    let refused = vtsnap_testkit::rbac::refused("drill", &w.kube.log());
    assert!(
        refused.is_empty(),
        "requests the drill Role does not grant: {refused:?}"
    );
}

/// Round three, item 13: a snapshot whose `vtsnap.io/drill` does not read is still a
/// snapshot of the shard: the next drill runs and replaces the record.
#[tokio::test]
async fn an_unreadable_record_is_replaced_by_the_next_drill() {
    let w = world().await;
    let mut snap = w.kube.get_json(GROUP, PLURAL, "vitess", "s-1").unwrap();
    snap["metadata"]["annotations"][ANN_DRILL] = json!("{\"result\":\"passed\",\"at\":\"2020");
    w.kube.put_json(GROUP, PLURAL, snap);
    let kubelet = tokio::spawn(fake_kubelet(w.kube.clone(), report(true)));
    let name = ShardName::new("example", "commerce", "-");
    // Named, as an SRE re-drilling it would (the rule's own choice is tested above).
    let named = RunOptions {
        snapshot: Some("s-1".into()),
        ..options()
    };
    let s = run(&w.kube.client_as("drill"), &w.config, &name, &named).await;
    kubelet.abort();
    assert_eq!(
        s.outcome,
        Outcome::Passed,
        "{}",
        serde_json::to_string(&s).unwrap()
    );
    let snap = w.kube.get_json(GROUP, PLURAL, "vitess", "s-1").unwrap();
    let read = VolumeSnapshot::read(&snap).unwrap();
    assert_eq!(
        read.counted_drill(Timestamp::now()).map(|d| d.result),
        Some(DrillResult::Passed),
        "{snap}"
    );
}

#[tokio::test]
async fn a_drill_that_fails_says_why_and_exits_1() {
    let w = world().await;
    let kubelet = tokio::spawn(fake_kubelet(w.kube.clone(), report(false)));
    let name = ShardName::new("example", "commerce", "-");
    let s = run(&w.kube.client_as("drill"), &w.config, &name, &options()).await;
    kubelet.abort();
    assert_eq!(s.outcome, Outcome::Failed, "{s:?}");
    assert_eq!(s.exit().code(), 1);
    assert_eq!(
        s.drill.unwrap().reason.as_deref(),
        Some("table shop.orders: corrupt")
    );
    let snap = w.kube.get_json(GROUP, PLURAL, "vitess", "s-1").unwrap();
    assert!(
        snap["metadata"]["annotations"][ANN_DRILL]
            .as_str()
            .unwrap()
            .contains("\"failed\"")
    );
    assert!(drill_objects(&w.kube).is_empty());
}

/// A Job whose Role lost the watch verb: the run says so at once, records nothing on the
/// snapshot (the snapshot was not judged) and removes what it made.
#[tokio::test]
async fn a_refused_watch_fails_the_run_at_once_and_removes_what_it_made() {
    let w = world().await;
    w.kube.fault(
        Fault::on(is(Verb::Watch, "persistentvolumeclaims"))
            .status(403)
            .always(),
    );
    let name = ShardName::new("example", "commerce", "-");
    let s = tokio::time::timeout(
        Duration::from_secs(60),
        run(&w.kube.client_as("drill"), &w.config, &name, &options()),
    )
    .await
    .expect("still waiting on a refused watch");
    assert_eq!(s.outcome, Outcome::Error, "{s:?}");
    assert_eq!(s.exit().code(), 1);
    let error = s.error.as_ref().unwrap();
    assert_eq!(error.code, "watch-refused", "{error:?}");
    assert!(
        error.message.contains("PersistentVolumeClaim vitess/"),
        "{error:?}"
    );
    assert!(s.left.is_empty(), "{s:?}");
    assert!(s.steps.is_empty(), "the error line says it all: {s:?}");
    let snap = w.kube.get_json(GROUP, PLURAL, "vitess", "s-1").unwrap();
    assert!(snap["metadata"]["annotations"].get(ANN_DRILL).is_none());
    assert!(
        drill_objects(&w.kube).is_empty(),
        "{:?}",
        drill_objects(&w.kube)
    );
}

#[tokio::test]
async fn plan_creates_nothing_and_names_the_snapshot() {
    let w = world().await;
    let name = ShardName::new("example", "commerce", "-");
    let opts = RunOptions {
        plan_only: true,
        ..options()
    };
    let s = run(&w.kube.client_as("drill"), &w.config, &name, &opts).await;
    assert_eq!(s.outcome, Outcome::Planned, "{s:?}");
    assert_eq!(
        s.snapshot.as_deref(),
        Some("s-1"),
        "{}",
        serde_json::to_string(&s).unwrap()
    );
    assert!(drill_objects(&w.kube).is_empty());
    assert!(w.kube.writes().is_empty(), "{:?}", w.kube.writes());
}

/// Where a drill is killed: just before one of its writes, which never lands.
#[derive(Debug, Clone, Copy)]
struct KillPoint {
    verb: Verb,
    plural: &'static str,
    /// The drill's record is on the snapshot by then.
    recorded: bool,
}

const KILL_POINTS: [KillPoint; 6] = [
    KillPoint {
        verb: Verb::Create,
        plural: "persistentvolumeclaims",
        recorded: false,
    },
    KillPoint {
        verb: Verb::Create,
        plural: "pods",
        recorded: false,
    },
    // The Pod finished and was judged; nothing is removed yet.
    KillPoint {
        verb: Verb::Delete,
        plural: "pods",
        recorded: false,
    },
    KillPoint {
        verb: Verb::Delete,
        plural: "persistentvolumeclaims",
        recorded: false,
    },
    KillPoint {
        verb: Verb::Patch,
        plural: "volumesnapshots",
        recorded: false,
    },
    KillPoint {
        verb: Verb::Create,
        plural: "events",
        recorded: true,
    },
];

/// A drill killed at each of its steps (its write held until the kill): what it leaves is
/// owned by its Job, for the garbage collector; the snapshot carries a record only once
/// it was written; the next drill waits for the leftovers, and runs once they are gone.
#[tokio::test]
async fn a_drill_killed_at_each_step_leaves_only_what_its_job_owns() {
    for point in KILL_POINTS {
        let w = world().await;
        let reached = std::sync::Arc::new(tokio::sync::Notify::new());
        let signal = reached.clone();
        w.kube.fault(
            Fault::on(is(point.verb, point.plural))
                .then_change(move |_| signal.notify_one())
                .delay(Duration::from_secs(3600)),
        );
        let kubelet = tokio::spawn(fake_kubelet(w.kube.clone(), report(true)));
        let (client, config) = (w.kube.client_as("drill"), w.config.clone());
        let drill = tokio::spawn(async move {
            run(
                &client,
                &config,
                &ShardName::new("example", "commerce", "-"),
                &options(),
            )
            .await
        });
        reached.notified().await;
        // Killed, as its Job's Pod would be.
        drill.abort();
        assert!(drill.await.unwrap_err().is_cancelled(), "{point:?}");
        kubelet.abort();
        w.kube.clear_faults();

        let left = drill_objects(&w.kube);
        for o in &left {
            assert_eq!(
                (
                    &o["metadata"]["ownerReferences"][0]["kind"],
                    &o["metadata"]["ownerReferences"][0]["uid"]
                ),
                (&json!("Job"), &json!("job-uid")),
                "{point:?}: {o}"
            );
        }
        let snap = w.kube.get_json(GROUP, PLURAL, "vitess", "s-1").unwrap();
        assert_eq!(
            snap["metadata"]["annotations"].get(ANN_DRILL).is_some(),
            point.recorded,
            "{point:?}: {snap}"
        );

        // The next drill: refused while anything is left, as a run would see it.
        let name = ShardName::new("example", "commerce", "-");
        if !left.is_empty() {
            let s = run(&w.kube.client_as("drill"), &w.config, &name, &options()).await;
            assert_eq!(s.outcome, Outcome::Refused, "{point:?}: {s:?}");
            assert_eq!(s.exit().code(), 3);
            // The garbage collector removes what the deleted Job owned.
            for o in &left {
                let plural = if o["kind"] == "Pod" {
                    "pods"
                } else {
                    "persistentvolumeclaims"
                };
                let name = o["metadata"]["name"].as_str().unwrap();
                w.kube.remove("", plural, "vitess", name).unwrap();
            }
        }
        let kubelet = tokio::spawn(fake_kubelet(w.kube.clone(), report(true)));
        let s = run(&w.kube.client_as("drill"), &w.config, &name, &options()).await;
        kubelet.abort();
        assert_eq!(s.outcome, Outcome::Passed, "{point:?}: {s:?}");
        assert!(drill_objects(&w.kube).is_empty(), "{point:?}");
    }
}
