//! A snapshot job killed after each step of the cold choreography (the run is parked at the
//! step and its task aborted: its renewals stop with it), then recovered by each of the
//! three paths of docs/design.md §5.4: the node helper when the lease expires, the next job run,
//! and the recovery the GC runs (`fence::client::recover`). Every path must leave the tablet
//! in its original type with replication running and no fence behind.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;
use vtsnap_core::shard::ShardName;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use vtsnap_core::config::Config;
use vtsnap_core::fence::client;
use vtsnap_core::fence::{Fence, lease_name};
use vtsnap_core::vtctld::TabletType;
use vtsnap_core::vtctld::messages::replicationdata::STATE_RUNNING;
use vtsnap_snapshot::run::{ParkHook, RunOptions, run};
use vtsnap_testkit::fake_shard::FakeShard;
use vtsnap_testkit::fixtures::shard;

/// The steps after which the job is killed (prefixes of the run's step names).
const STEPS: [&str; 8] = [
    "fence acquired",
    "layout probed",
    "tablet DRAINED",
    "replication stopped",
    "mysqld stopped",
    "mysqld held",
    "VolumeSnapshot",
    "snapshot cut",
];

type World = FakeShard;

async fn world() -> World {
    FakeShard::start(shard().replicas(3).primary(1)).await
}

fn config(w: &World) -> Config {
    Config::from_yaml(&format!(
        "clusters:\n- name: example\n  namespace: vitess\n  vtctld: \"{}\"\n  snapshot: {{cutTimeout: 2s, readyTimeout: 3s, maxHold: 10s}}\n",
        w.vt.endpoint()
    ))
    .unwrap()
}

fn opts(park_at: Option<&'static str>, parked: Arc<Mutex<bool>>) -> RunOptions {
    RunOptions {
        holder: "job".into(),
        lease_duration: Duration::from_secs(1),
        node_timeout: Duration::from_secs(3),
        poll: Duration::from_millis(20),
        park_after: park_at.map(|p| {
            ParkHook(Arc::new(move |step: &str| {
                let hit = step.starts_with(p);
                if hit {
                    *parked.lock().unwrap() = true;
                }
                hit
            }))
        }),
        ..RunOptions::default()
    }
}

fn leases(w: &World) -> Api<Lease> {
    Api::namespaced(w.kube.client(), "vitess")
}

fn lease_json(w: &World) -> Option<serde_json::Value> {
    w.kube.get_json(
        "coordination.k8s.io",
        "leases",
        "vitess",
        &lease_name("example", "commerce", "x-x"),
    )
}

async fn until(what: &str, f: impl Fn() -> bool) {
    for _ in 0..1000 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting until {what}");
}

/// Runs a job, kills it right after `step` (with `node_dies`, the node helper dies with
/// it), and waits until its fence has expired.
async fn kill_after(w: &World, step: &'static str, node_dies: bool) {
    let parked = Arc::new(Mutex::new(false));
    let cfg = config(w);
    let o = opts(Some(step), parked.clone());
    let kube = w.kube.client();
    let task = tokio::spawn(async move {
        run(&cfg, &ShardName::new("example", "commerce", "-"), &o, kube).await
    });
    until(&format!("the job reaches {step:?}"), || {
        *parked.lock().unwrap()
    })
    .await;
    task.abort();
    let _ = task.await;
    if node_dies {
        w.node.set(|n| n.dead = true);
    }
    until("the fence expires", || {
        lease_json(w).is_none_or(|v| {
            let l: Lease = serde_json::from_value(v).unwrap();
            Fence::from_lease(&l).is_ok_and(|f| f.expired(k8s_openapi::jiff::Timestamp::now()))
        })
    })
    .await;
}

/// Every tablet of the shard is as it began.
fn assert_whole(w: &World, step: &str) {
    for n in 2..=3 {
        let a = w.fixture.alias(n);
        let t = w.vtctld.tablet(&a).unwrap();
        assert_eq!(
            t.tablet.r#type,
            TabletType::Replica as i32,
            "after a kill at {step:?}, {a} is not REPLICA"
        );
        assert_eq!(
            t.status.unwrap().io_state,
            STATE_RUNNING,
            "after a kill at {step:?}, {a} does not replicate"
        );
    }
}

#[tokio::test]
async fn the_node_helper_recovers_a_killed_job_at_every_step() {
    for step in STEPS {
        let w = world().await;
        kill_after(&w, step, false).await;
        until(
            &format!("the node helper removes the fence (kill at {step:?})"),
            || lease_json(&w).is_none(),
        )
        .await;
        assert_whole(&w, step);
        assert_eq!(
            w.node.recovered().len(),
            1,
            "kill at {step:?}: the node helper did the recovery"
        );
    }
}

#[tokio::test]
async fn the_next_job_recovers_a_killed_job_at_every_step() {
    for step in STEPS {
        // The node helper is down: only the next run can restore the tablet.
        let w = world().await;
        kill_after(&w, step, true).await;
        let o = RunOptions {
            node_timeout: Duration::from_millis(500),
            ..opts(None, Arc::default())
        };
        let s = run(
            &config(&w),
            &ShardName::new("example", "commerce", "-"),
            &o,
            w.kube.client(),
        )
        .await;
        assert!(
            s.recovered_fence.is_some(),
            "kill at {step:?}: the next run did not recover the fence: {s:?}"
        );
        // With the node helper down, the next run's own snapshot cannot pass the layout probe.
        assert_eq!(s.exit_code, 1, "kill at {step:?}: {s:?}");
        assert!(
            lease_json(&w).is_none(),
            "kill at {step:?}: a fence is left"
        );
        assert_whole(&w, step);
    }
}

#[tokio::test]
async fn the_gc_recovery_restores_a_killed_job_at_every_step() {
    for step in STEPS {
        let w = world().await;
        kill_after(&w, step, true).await;
        let l = leases(&w)
            .get(&lease_name("example", "commerce", "x-x"))
            .await
            .unwrap();
        let r = client::recover(&leases(&w), &l, Duration::from_millis(300))
            .await
            .unwrap();
        assert!(r.tablet_restored, "kill at {step:?}: {r:?}");
        assert!(
            lease_json(&w).is_none(),
            "kill at {step:?}: a fence is left"
        );
        assert_whole(&w, step);
    }
}
