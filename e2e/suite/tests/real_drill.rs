//! Restore drills against a real kube-apiserver and controller manager (docs/design.md
//! §5.9): the drill's PVC and Pod as the API server stores them; a drill killed after it
//! created them leaves them to the real garbage collector (they are owned by its Job); a
//! drill that cannot restore records why on the snapshot, with an Event, and removes what
//! it made; a run with nothing to drill creates nothing. No kubelet here: the drill Pod is
//! never scheduled (the node tier runs one).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use vtsnap_core::config::Config;
use vtsnap_core::coverage::{Coverage, Exactness};
use vtsnap_core::shard::{ShardName, ShardRef};
use vtsnap_core::snapshot::{ANN_DRILL, DrillOf, DrillResult, GROUP, VolumeSnapshot};
use vtsnap_drill::act;
use vtsnap_drill::decide::Refusal;
use vtsnap_drill::decide::objects::{self, Owner, Settings, Target};
use vtsnap_drill::report::Outcome;
use vtsnap_drill::run::{RunOptions, run};
use vtsnap_testkit::operator_objects::{operator_shard, pvc_template};
use vtsnap_testkit::real_kube::{RealKube, resource};

fn settings() -> Settings {
    Settings {
        mysqld_resources: json!({"requests": {"cpu": "100m", "memory": "128Mi"}}),
        deadline_seconds: 600,
        table_budget: "1m".into(),
        ready_timeout: "1m".into(),
        ..Settings::with_images("vtsnap/vtsnap-restore:test", "vtsnap/vtsnap-drill:test")
    }
}

/// A vtsnap VolumeSnapshot of `example/commerce/-` whose source PVC does not exist: the
/// snapshot controller leaves it unready, so a PVC restored from it never binds.
/// The shared unready snapshot, with the GTID position a drill reads.
fn unready_snapshot(ns: &str, name: &str) -> Value {
    let mut s = vtsnap_testkit::fixtures::unready_snapshot(ns, name);
    s["metadata"]["annotations"] = json!({"vtsnap.io/gtid-executed": "MariaDB/0-1-100"});
    s
}

/// What the drill's record names: the created snapshot's UID (an unready snapshot has no
/// cut yet: now stands in for it).
fn record_for(created: &Value) -> DrillOf {
    DrillOf {
        uid: created["metadata"]["uid"].as_str().unwrap().into(),
        cut: k8s_openapi::jiff::Timestamp::now(),
    }
}

fn target(ns: &str, snapshot: &str) -> Target {
    Target {
        shard: ShardRef {
            namespace: ns.into(),
            cluster: "example".into(),
            keyspace: "commerce".into(),
            shard: "-".parse().unwrap(),
        },
        snapshot: snapshot.into(),
        position: "MariaDB/0-1-100".into(),
        exactness: Exactness::Exact,
        storage_bytes: 1 << 30,
        storage_class: Some("vtsnap-btrfs".into()),
        mysqld_image: "vtsnap/mariadb:test".into(),
        pod_security: None,
        pin_to: None,
        sample_seed: 0,
    }
}

/// A Job that never runs (suspended): the owner the drill Job would be.
async fn owner_job(kube: &RealKube, ns: &str) -> Owner {
    let job = kube
        .create(json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "drill-job", "namespace": ns},
            "spec": {"suspend": true, "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "never-pulled"}]}}}}))
        .await;
    Owner {
        name: "drill-job".into(),
        uid: job["metadata"]["uid"].as_str().unwrap().into(),
        namespace: Some(ns.into()),
    }
}

fn pods() -> kube::core::ApiResource {
    resource("", "v1", "Pod", "pods")
}

fn pvcs() -> kube::core::ApiResource {
    resource("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims")
}

/// Where the drill is killed.
#[derive(Debug, Clone, Copy)]
enum KillAt {
    /// As soon as its PVC exists (its Pod may or may not be created yet).
    PvcCreated,
    /// Once its Pod exists (it waits for the PVC to bind).
    PodCreated,
}

async fn killed_drill_leaves_nothing(kill_at: KillAt) {
    let kube = RealKube::from_env().await;
    let ns = kube.namespace("drill-killed").await;
    let record_for = record_for(&kube.create(unready_snapshot(&ns.name, "s-1")).await);
    let owner = owner_job(&kube, &ns.name).await;
    let t = target(&ns.name, "s-1");
    let name = objects::drill_name(&t.shard, "20261203120000");
    let pvc = objects::pvc(&name, &t, Some(&owner));
    let pod = objects::pod(&name, &t, &settings(), Some(&owner));
    let client = kube.client();
    let (namespace, n) = (ns.name.clone(), name.clone());
    let drill = tokio::spawn(async move {
        act::drill(
            &client,
            &namespace,
            &n,
            "s-1",
            &record_for,
            &pvc,
            &pod,
            Duration::from_secs(600),
            None,
            &Coverage::Unknown {
                why: "not read".into(),
            },
        )
        .await
    });
    let first = match kill_at {
        KillAt::PvcCreated => pvcs(),
        KillAt::PodCreated => pods(),
    };
    // Each exists as the API server stores it, owned by the Job.
    let stored = kube
        .wait_for(
            &first,
            &ns.name,
            &name,
            "created",
            Duration::from_secs(60),
            |_| true,
        )
        .await;
    assert_eq!(
        stored["metadata"]["ownerReferences"][0]["uid"],
        owner.uid.as_str()
    );
    assert_eq!(stored["metadata"]["ownerReferences"][0]["kind"], "Job");
    // The drill is killed (as its Job's Pod would be), then its Job is deleted.
    drill.abort();
    assert!(drill.await.unwrap_err().is_cancelled());
    if let KillAt::PodCreated = kill_at {
        let claim = kube.get(&pvcs(), &ns.name, &name).await.unwrap();
        assert_eq!(claim["spec"]["dataSourceRef"]["name"], "s-1");
        let pod = kube.get(&pods(), &ns.name, &name).await.unwrap();
        assert_eq!(pod["spec"]["containers"][0]["args"][2], "--skip-networking");
    }
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(kube.client(), &ns.name);
    jobs.delete("drill-job", &kube::api::DeleteParams::background())
        .await
        .unwrap();
    kube.wait_gone(&pods(), &ns.name, &name, Duration::from_secs(120))
        .await;
    kube.wait_gone(&pvcs(), &ns.name, &name, Duration::from_secs(120))
        .await;
    // The snapshot is untouched: a killed drill records nothing.
    let snap = kube
        .get(
            &resource(GROUP, "v1", "VolumeSnapshot", "volumesnapshots"),
            &ns.name,
            "s-1",
        )
        .await
        .unwrap();
    assert!(
        snap["metadata"]["annotations"].get(ANN_DRILL).is_none(),
        "{kill_at:?}: {snap}"
    );
}

#[tokio::test]
async fn a_drill_killed_once_its_pvc_exists_leaves_it_to_the_garbage_collector() {
    killed_drill_leaves_nothing(KillAt::PvcCreated).await;
}

#[tokio::test]
async fn a_drill_killed_while_its_pod_waits_leaves_both_to_the_garbage_collector() {
    killed_drill_leaves_nothing(KillAt::PodCreated).await;
}

/// The chart's drill Job runs in the release's namespace, the drill's objects in the
/// shard's. The real garbage collector deletes a dependent whose owner is in another
/// namespace (event `OwnerRefInvalidNamespace`): the drill's PVC, made that way, would go
/// mid-drill. A control PVC made that way is the event waited for; the drill's, which
/// names its Job in annotations instead, outlives it.
#[tokio::test]
async fn a_drill_job_of_another_namespace_names_itself_and_the_collector_keeps_its_objects() {
    let kube = RealKube::from_env().await;
    let ns = kube.namespace("drill-elsewhere").await;
    let jobs_ns = kube.namespace("drill-jobs").await;
    kube.create(unready_snapshot(&ns.name, "s-1")).await;
    let owner = owner_job(&kube, &jobs_ns.name).await;
    let t = target(&ns.name, "s-1");
    let name = objects::drill_name(&t.shard, "20261203120000");
    let pvc = objects::pvc(&name, &t, Some(&owner));
    assert!(pvc["metadata"].get("ownerReferences").is_none(), "{pvc}");
    assert_eq!(
        pvc["metadata"]["annotations"][vtsnap_core::restore_pod::ANN_OWNER_JOB],
        format!("{}/drill-job", jobs_ns.name)
    );
    kube.create(pvc).await;
    let mut control = objects::pvc("control", &t, None);
    control["metadata"]["ownerReferences"] = json!([owner.reference()]);
    kube.create(control).await;
    kube.wait_gone(&pvcs(), &ns.name, "control", Duration::from_secs(120))
        .await;
    let kept = kube.get(&pvcs(), &ns.name, &name).await;
    assert!(
        kept.is_some_and(|p| p["metadata"]["deletionTimestamp"].is_null()),
        "the collector took the drill's PVC too"
    );
}

#[tokio::test]
async fn a_drill_that_cannot_restore_records_why_and_removes_what_it_made() {
    let kube = RealKube::from_env().await;
    let ns = kube.namespace("drill-unbound").await;
    let record_for = record_for(&kube.create(unready_snapshot(&ns.name, "s-1")).await);
    let owner = owner_job(&kube, &ns.name).await;
    let t = target(&ns.name, "s-1");
    let name = objects::drill_name(&t.shard, "20261203120001");
    let pvc = objects::pvc(&name, &t, Some(&owner));
    let pod = objects::pod(&name, &t, &settings(), Some(&owner));
    // The product's own limit: a PVC of an unready snapshot never binds.
    let done = act::drill(
        &kube.client(),
        &ns.name,
        &name,
        "s-1",
        &record_for,
        &pvc,
        &pod,
        Duration::from_secs(5),
        Some(owner.name.clone()),
        &Coverage::Covered,
    )
    .await
    .unwrap();
    assert_eq!(
        done.steps,
        [
            "pvc-created",
            "pod-created",
            "deadline",
            "pod-deleted",
            "persistentvolumeclaim-deleted",
            "recorded"
        ],
        "{done:?}"
    );
    assert!(done.left.is_empty(), "{done:?}");
    let snap = kube
        .get(
            &resource(GROUP, "v1", "VolumeSnapshot", "volumesnapshots"),
            &ns.name,
            "s-1",
        )
        .await
        .unwrap();
    // The record names the snapshot the real API server gave a UID (an unready
    // snapshot has no cut for it to count on; the binding itself is tested in core).
    let read = VolumeSnapshot::read(&snap).unwrap();
    let drill = read.drill_record.clone().unwrap().unwrap();
    assert_eq!(Some(drill.snapshot_uid.as_str()), read.uid.as_deref());
    assert_eq!(drill.result, DrillResult::Failed);
    assert!(drill.reason.unwrap().contains("never bound"), "{snap}");
    assert_eq!(drill.job.as_deref(), Some("drill-job"));
    let events: Api<Event> = Api::namespaced(kube.client(), &ns.name);
    let evs = events
        .list(&ListParams::default().fields("involvedObject.name=s-1"))
        .await
        .unwrap();
    assert!(
        evs.items
            .iter()
            .any(|e| e.reason.as_deref() == Some("DrillFailed")),
        "{:?}",
        evs.items
    );
    kube.wait_gone(&pods(), &ns.name, &name, Duration::from_secs(120))
        .await;
    kube.wait_gone(&pvcs(), &ns.name, &name, Duration::from_secs(120))
        .await;
}

#[tokio::test]
async fn a_run_with_nothing_to_drill_creates_nothing() {
    let kube = RealKube::from_env().await;
    let ns = kube.namespace("drill-refused").await;
    let mut shard = operator_shard();
    shard.namespace = ns.name.clone();
    let tablet = shard.tablet("replica", 1);
    kube.create(tablet.pvc(&pvc_template("1Gi"))).await;
    let mut pod = tablet.pod();
    pod["spec"]["schedulingGates"] = json!([{"name": "vtsnap.io/never"}]);
    kube.create(pod).await;
    // No vtctld answers: the shard's series is unknown, so no snapshot is chosen.
    let cfg = Config::from_yaml(&format!(
        "clusters:\n- name: example\n  namespace: {}\n  vtctld: \"127.0.0.1:1\"\n  restore: {{enabled: true}}\n",
        ns.name
    ))
    .unwrap();
    let opts = RunOptions {
        settings: settings(),
        owner: None,
        snapshot: None,
        plan_only: false,
    };
    let s = run(
        &kube.client(),
        &cfg,
        &ShardName::new("example", "commerce", "-"),
        &opts,
    )
    .await;
    assert_eq!(s.outcome, Outcome::Refused, "{s:?}");
    assert!(
        matches!(s.refusal, Some(Refusal::ShardSeries { .. })),
        "{s:?}"
    );
    assert_eq!(s.exit().code(), 3);
    let drills: Vec<Value> = kube
        .list(&pvcs(), &ns.name)
        .await
        .into_iter()
        .filter(|p| p["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "vtsnap-drill")
        .collect();
    assert!(drills.is_empty(), "{drills:?}");
    // A shard the config does not have is a usage error, before anything is read.
    let s = run(
        &kube.client(),
        &cfg,
        &ShardName::new("other", "commerce", "-"),
        &opts,
    )
    .await;
    assert_eq!(s.exit().code(), 2, "{s:?}");
}
