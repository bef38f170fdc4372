//! The schedule reconciler on the real API server, as its own ServiceAccount with only the
//! chart's rules: a reshard gets its new shards' CronJobs in one run while the old
//! shard's stays; the old one goes only once the shard is gone from the spec and from
//! vtctld and no Job of it runs; a CronJob a person made, even one wearing the
//! reconciler's label, is never touched; a second run changes nothing. Each shard's drill
//! and binlog-archive CronJobs (the chart's drills and archive are on) follow the same
//! shards through the same gate.

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use vtsnap_core::config::Config;
use vtsnap_core::reconcile::apis::vitess_clusters;
use vtsnap_snapshot::schedule::decide::{Action, Plan, Reason};
use vtsnap_snapshot::schedule::{act, decide, observe, reconcile};
use vtsnap_testkit::fake_vtctld::FakeVtctld;
use vtsnap_testkit::real_kube::{RealKube, resource};

const FULL: &str = "t-vtsnap";

async fn run(as_schedule: &kube::Client, config: &Config, ns: &str) -> Plan {
    let (plan, outcomes) = reconcile(
        as_schedule,
        config,
        ns,
        &format!("{FULL}-snapshot-schedule"),
    )
    .await;
    assert!(
        outcomes.iter().all(|o| o.error.is_none()),
        "{plan:#?}\n{outcomes:#?}"
    );
    plan
}

fn on(plan: &Plan, name: &str) -> (Action, Reason) {
    plan.decisions
        .iter()
        .find(|d| d.name == name)
        .map(|d| (d.action, d.reason))
        .unwrap_or_else(|| panic!("no decision on {name}: {plan:#?}"))
}

/// The keyspace's partitionings replaced by `parts` equal ones each.
async fn partitionings(kube: &RealKube, ns: &str, parts: &[u64]) {
    let api = vitess_clusters(&kube.client(), ns);
    let vc = api.get("example").await.unwrap();
    let mut spec = serde_json::to_value(&vc).unwrap()["spec"].clone();
    let template = spec["keyspaces"][0]["partitionings"][0]["equal"]["shardTemplate"].clone();
    spec["keyspaces"][0]["partitionings"] = parts
        .iter()
        .map(|p| json!({"equal": {"parts": p, "shardTemplate": template}}))
        .collect();
    api.patch(
        "example",
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": spec})),
    )
    .await
    .unwrap();
}

pub async fn reshard(
    kube: &RealKube,
    as_schedule: &kube::Client,
    config: &Config,
    system: &str,
    vitess: &str,
    vtctld: &FakeVtctld,
) {
    let crons = resource("batch", "v1", "CronJob", "cronjobs");
    let old = format!("{FULL}-snap-example-commerce-x-x");
    let low = format!("{FULL}-snap-example-commerce-x-80");
    let high = format!("{FULL}-snap-example-commerce-80-x");
    let drill = |shard: &str| format!("{FULL}-drill-example-commerce-{shard}");
    let archive = |shard: &str| format!("{FULL}-pitr-example-commerce-{shard}");

    // A second run changes nothing.
    let p = run(as_schedule, config, system).await;
    assert_eq!(on(&p, &old), (Action::Keep, Reason::UpToDate));
    assert_eq!(on(&p, &drill("x-x")), (Action::Keep, Reason::UpToDate));
    assert_eq!(on(&p, &archive("x-x")), (Action::Keep, Reason::UpToDate));
    assert_eq!(p.decisions.len(), 3, "{p:#?}");

    // A person's CronJob that looks like one of the reconciler's (its label, a record of a
    // shard no spec has) but is not owned by the template: never written, never deleted.
    let hand_name = format!("{FULL}-snap-example-lookup-x-x");
    kube.create(json!({"apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": hand_name, "namespace": system,
            "labels": {"app.kubernetes.io/managed-by": "vtsnap-schedule"},
            "annotations": {"vtsnap.io/schedule-shard": format!("{vitess}/example/lookup/-")}},
        "spec": {"schedule": "0 0 31 2 *", "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "by-hand:1"}]}}}}}}))
        .await;
    let hand_version = |c: Option<Value>| c.unwrap()["metadata"]["resourceVersion"].clone();
    let hand = hand_version(kube.get(&crons, system, &hand_name).await);

    // The reshard: -80 and 80- beside -. One run makes both; - is kept.
    partitionings(kube, vitess, &[1, 2]).await;
    let p = run(as_schedule, config, system).await;
    assert_eq!(on(&p, &high), (Action::Create, Reason::NewShard));
    assert_eq!(on(&p, &low), (Action::Create, Reason::NewShard));
    assert_eq!(on(&p, &old), (Action::Keep, Reason::UpToDate));
    for shard in ["x-80", "80-x"] {
        assert_eq!(on(&p, &drill(shard)), (Action::Create, Reason::NewShard));
        assert_eq!(on(&p, &archive(shard)), (Action::Create, Reason::NewShard));
    }
    assert!(
        p.decisions.iter().all(|d| d.name != hand_name),
        "not its own: not even decided on: {p:#?}"
    );
    let made = kube.get(&crons, system, &high).await.unwrap();
    assert_eq!(
        made["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "vtsnap-schedule"
    );
    assert_eq!(
        made["spec"]["jobTemplate"]["spec"]["template"]["spec"]["serviceAccountName"],
        format!("{FULL}-snapshot"),
        "the chart's template governs the Pod"
    );
    let managers: Vec<&str> = made["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert_eq!(managers, ["vtsnap-schedule"]);

    // The chart's overrides now suspend 80-: an update, applied with the version read as
    // its precondition, so an edit made between the read and the write is not overwritten
    // blind (409); the next run applies over it.
    let cms: Api<DynamicObject> = Api::namespaced_with(
        kube.client(),
        system,
        &resource("", "v1", "ConfigMap", "configmaps"),
    );
    let overrides = json!([{"cluster": "example", "keyspace": "commerce", "shard": "-", "schedule": "0 0 31 2 *"},
        {"cluster": "example", "keyspace": "commerce", "shard": "80-", "suspend": true}]);
    cms.patch(
        &format!("{FULL}-snapshot-schedule"),
        &PatchParams::default(),
        &Patch::Merge(&json!({"data": {"overrides.json": overrides.to_string()}})),
    )
    .await
    .unwrap();
    let template = format!("{FULL}-snapshot-schedule");
    let seen = observe::observe(as_schedule, config, system, &template).await;
    let p = decide::plan(config, &seen);
    assert_eq!(on(&p, &high), (Action::Update, Reason::Changed));
    let cronjobs: Api<DynamicObject> = Api::namespaced_with(kube.client(), system, &crons);
    cronjobs
        .patch(
            &high,
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"labels": {"edited": "by-hand"}}})),
        )
        .await
        .unwrap();
    let outcomes = act::act(as_schedule, system, &p).await;
    let refused = outcomes.iter().find(|o| o.name == high).unwrap();
    assert!(
        refused
            .error
            .as_deref()
            .is_some_and(|e| e.contains("409") || e.contains("Conflict")),
        "{refused:?}"
    );
    assert_eq!(
        kube.get(&crons, system, &high).await.unwrap()["spec"]["suspend"],
        false,
        "not written"
    );
    let p = run(as_schedule, config, system).await;
    assert_eq!(on(&p, &high), (Action::Update, Reason::Changed));
    assert_eq!(
        kube.get(&crons, system, &high).await.unwrap()["spec"]["suspend"],
        true
    );

    // The old partitioning leaves the spec; vtctld still has the shard: kept.
    partitionings(kube, vitess, &[2]).await;
    let p = run(as_schedule, config, system).await;
    assert_eq!(on(&p, &old), (Action::Keep, Reason::StillInVtctld));
    assert_eq!(on(&p, &drill("x-x")), (Action::Keep, Reason::StillInVtctld));
    assert_eq!(
        on(&p, &archive("x-x")),
        (Action::Keep, Reason::StillInVtctld)
    );

    // vtctld drops it, but a Job of the old CronJob runs (no kubelet finishes it): kept.
    vtctld.with(|s| s.shards.retain(|(_, shard), _| shard != "-"));
    let uid = kube.get(&crons, system, &old).await.unwrap()["metadata"]["uid"].clone();
    let job = format!("{old}-manual");
    kube.create(json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": job, "namespace": system, "ownerReferences": [{"apiVersion": "batch/v1",
            "kind": "CronJob", "name": old, "uid": uid, "controller": true}]},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "never-runs:1"}]}}}}))
    .await;
    let p = run(as_schedule, config, system).await;
    assert_eq!(on(&p, &old), (Action::Keep, Reason::JobRunning));
    // The old shard's drill and archive CronJobs run no Job: they go now.
    for gone in [drill("x-x"), archive("x-x")] {
        assert_eq!(on(&p, &gone), (Action::Delete, Reason::ShardGone));
        assert!(kube.get(&crons, system, &gone).await.is_none());
    }

    // The Job is gone: so is the old CronJob.
    let jobs: Api<DynamicObject> = Api::namespaced_with(
        kube.client(),
        system,
        &resource("batch", "v1", "Job", "jobs"),
    );
    jobs.delete(&job, &DeleteParams::background())
        .await
        .unwrap();
    let p = run(as_schedule, config, system).await;
    assert_eq!(on(&p, &old), (Action::Delete, Reason::ShardGone));
    assert!(kube.get(&crons, system, &old).await.is_none());

    // The person's CronJob was never written to, nor deleted.
    assert_eq!(
        hand_version(kube.get(&crons, system, &hand_name).await),
        hand
    );
    let p = run(as_schedule, config, system).await;
    assert!(
        p.decisions
            .iter()
            .all(|d| (d.action, d.reason) == (Action::Keep, Reason::UpToDate)),
        "{p:#?}"
    );
    assert_eq!(p.decisions.len(), 6);
}
