//! `vtsnap-drill run` against a busy API server (docs/design.md §3.8): under a 429 storm
//! that clears the drill passes, is recorded and leaves nothing, as on a quiet server;
//! under one that never clears it fails (exit 1), having made and recorded nothing.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};
use vtsnap_core::config::Config;
use vtsnap_core::restore_pod::CONTAINER as RESTORE_CONTAINER;
use vtsnap_core::retry::RetryPolicy;
use vtsnap_core::shard::ShardName;
use vtsnap_core::snapshot::{ANN_DRILL, GROUP, PLURAL};
use vtsnap_drill::decide::objects::{CHECKER_CONTAINER, Owner, Settings};
use vtsnap_drill::report::Outcome;
use vtsnap_drill::run::{RunOptions, run};
use vtsnap_testkit::fake_kube::{FakeKube, storm_every_other, storm_without_end};
use vtsnap_testkit::fake_vtctld::FakeVtctld;
use vtsnap_testkit::fixtures::shard;
use vtsnap_testkit::grpc::Running;
use vtsnap_testkit::operator_objects::{VtsnapSnapshot, operator_shard};

/// The programs' bounds, with waits of milliseconds (`Retry-After` is capped by them).
const FAST: RetryPolicy = RetryPolicy {
    max_wait: Duration::from_millis(5),
    first_wait: Duration::from_millis(1),
    ..RetryPolicy::DEFAULT
};

const PASSED: &str = r#"{"verdict":{"passed":true,"tablesTotal":2,"tablesChecked":2,"sampled":false},"mysqldReadyMs":900}"#;

/// FAKE kubelet: binds the drill's PVC and runs its Pod to a passed check. It writes to
/// the fake's objects directly, so the storm is the drill's alone.
async fn fake_kubelet(kube: FakeKube) {
    let ours = |plural| {
        kube.list_json("", plural)
            .into_iter()
            .find(|p| p["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "vtsnap-drill")
    };
    loop {
        if let (Some(mut pvc), Some(mut pod)) = (ours("persistentvolumeclaims"), ours("pods")) {
            pvc["status"] = json!({"phase": "Bound"});
            kube.put_json("", "persistentvolumeclaims", pvc);
            let done = |name: &str, message: &str, from: &str, to: &str| {
                json!({"name": name, "state": {"terminated": {"exitCode": 0, "message": message,
                    "reason": "Completed", "startedAt": from, "finishedAt": to}}})
            };
            pod["status"] = json!({"phase": "Succeeded",
                "initContainerStatuses": [done(RESTORE_CONTAINER, "", "2026-12-03T10:00:00Z", "2026-12-03T10:00:01Z")],
                "containerStatuses": [done("mysqld", "", "2026-12-03T10:00:01Z", "2026-12-03T10:00:09Z"),
                                      done(CHECKER_CONTAINER, PASSED, "2026-12-03T10:00:01Z", "2026-12-03T10:00:09Z")]});
            kube.put_json("", "pods", pod);
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn world() -> (FakeKube, Config, FakeVtctld, Running) {
    let kube = FakeKube::new();
    let vtctld = FakeVtctld::new();
    shard().replicas(3).primary(1).install(&kube, &vtctld);
    let vt = vtctld.serve().await;
    let cut = Timestamp::now() - SignedDuration::from_hours(2);
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
    (kube, config, vtctld, vt)
}

fn options() -> RunOptions {
    RunOptions {
        settings: Settings {
            mysqld_resources: json!({"requests": {"cpu": "500m", "memory": "1Gi"}}),
            deadline_seconds: 600,
            table_budget: "1m".into(),
            ready_timeout: "1m".into(),
            ..Settings::with_images("vtsnap/vtsnap-restore:1", "vtsnap/vtsnap-drill:1")
        },
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

fn record(kube: &FakeKube) -> Value {
    kube.get_json(GROUP, PLURAL, "vitess", "s-1").unwrap()["metadata"]["annotations"][ANN_DRILL]
        .clone()
}

#[tokio::test]
async fn a_storm_that_clears_leaves_the_drill_as_it_is() {
    let (kube, config, _vtctld, _vt) = world().await;
    kube.fault(storm_every_other(1));
    let kubelet = tokio::spawn(fake_kubelet(kube.clone()));
    let name = ShardName::new("example", "commerce", "-");
    let client = kube.client_with_retries("drill", FAST);
    let s = run(&client, &config, &name, &options()).await;
    kubelet.abort();
    assert_eq!(
        s.outcome,
        Outcome::Passed,
        "{}",
        serde_json::to_string(&s).unwrap()
    );
    assert_eq!(s.exit().code(), 0);
    assert!(record(&kube).as_str().unwrap().contains("\"passed\""));
    assert!(
        drill_objects(&kube).is_empty(),
        "{:?}",
        drill_objects(&kube)
    );
    assert!(kube.log().iter().filter(|l| l.status == 429).count() >= 3);
}

#[tokio::test]
async fn a_storm_that_never_clears_fails_and_makes_nothing() {
    let (kube, config, _vtctld, _vt) = world().await;
    kube.fault(storm_without_end(1));
    let name = ShardName::new("example", "commerce", "-");
    let client = kube.client_with_retries("drill", FAST);
    let s = run(&client, &config, &name, &options()).await;
    assert_eq!(s.exit().code(), 1, "{}", serde_json::to_string(&s).unwrap());
    assert!(kube.writes().is_empty(), "{:?}", kube.writes());
    assert!(drill_objects(&kube).is_empty());
    assert_eq!(record(&kube), Value::Null);
}
