//! `kubectl vtsnap backup --wait` against the in-memory API, with a FAKE Job controller:
//! a cold snapshot keeps its Job quiet for minutes, and a watch broken meanwhile (a
//! client read timeout, a load balancer) must not end the wait.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use kubectl_vtsnap::act::{BackupError, InNamespace, ShardArg, backup};
use kubectl_vtsnap::decide::doctor::Install;
use serde_json::json;
use vtsnap_testkit::fake_kube::{FakeKube, Fault, FaultAction, Verb, is};

fn install() -> Install {
    Install {
        namespace: "vtsnap".into(),
        fullname: "vtsnap".into(),
    }
}

/// The chart's snapshot CronJob of `example/commerce/-`.
fn with_cron() -> FakeKube {
    let kube = FakeKube::new();
    kube.put_json(
        "batch",
        "cronjobs",
        json!({
            "apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "vtsnap-snapshot-example-commerce-x", "namespace": "vtsnap",
                "uid": "cron-uid",
                "labels": {"app.kubernetes.io/component": "snapshot", "vtsnap.io/cluster": "example",
                    "vtsnap.io/keyspace": "commerce", "vtsnap.io/shard": "x-x"}},
            "spec": {"schedule": "0 * * * *", "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "snapshot", "image": "vtsnap/vtsnap-snapshot:1",
                    "args": ["run", "--shard", "example/commerce/-"]}]}}}}}
        }),
    );
    kube
}

fn watches(kube: &FakeKube) -> usize {
    kube.log()
        .iter()
        .filter(|l| l.info.verb == Verb::Watch && l.info.plural == "jobs")
        .count()
}

/// FAKE Job controller: once the client has watched `after` times, marks the Job done.
async fn finish_job_after(kube: FakeKube, after: usize, condition: &'static str) {
    loop {
        if watches(&kube) >= after
            && let Some(job) = kube.list_json("batch", "jobs").into_iter().next()
        {
            let name = job["metadata"]["name"].as_str().unwrap().to_owned();
            kube.set_status(
                "batch",
                "jobs",
                "vtsnap",
                &name,
                json!({"conditions": [{"type": condition, "status": "True"}]}),
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn broken_watches_do_not_end_the_wait_for_the_job() {
    let kube = with_cron();
    kube.fault(
        Fault::on(is(Verb::Watch, "jobs"))
            .action(FaultAction::Drop)
            .times(2),
    );
    let controller = tokio::spawn(finish_job_after(kube.clone(), 3, "Complete"));
    let shard: ShardArg = "example/commerce/-".parse().unwrap();
    let out = backup(
        &kube.client(),
        &install(),
        &shard,
        None,
        Some(Duration::from_secs(120)),
        None,
    )
    .await
    .unwrap();
    controller.await.unwrap();
    assert_eq!(out.result, "succeeded", "{out:?}");
    assert!(out.job.starts_with("vtsnap-snapshot-example-commerce-x-"));
    assert!(watches(&kube) >= 3);
}

#[tokio::test]
async fn a_lasting_refusal_names_the_job_at_once() {
    let kube = with_cron();
    kube.fault(Fault::on(is(Verb::Watch, "jobs")).status(403).always());
    let shard: ShardArg = "example/commerce/-".parse().unwrap();
    let e = tokio::time::timeout(
        Duration::from_secs(60),
        backup(
            &kube.client(),
            &install(),
            &shard,
            None,
            Some(Duration::from_secs(600)),
            None,
        ),
    )
    .await
    .expect("still waiting on a refused watch")
    .unwrap_err();
    assert!(matches!(e, BackupError::Api { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("watch Job vtsnap-snapshot-example-commerce-x-"),
        "{e}"
    );
    assert_eq!(watches(&kube), 3, "a refusal is asked three times, no more");
}

/// Round three, item 4: with the cluster's name in two namespaces each shard has its own
/// CronJob; `backup` alone cannot tell them apart (it names both), and `-n` picks the
/// namespace's, by the CronJob's shard record.
#[tokio::test]
async fn a_cluster_named_in_two_namespaces_is_placed_by_its_namespace() {
    let kube = FakeKube::new();
    for ns in ["ns-a", "ns-b"] {
        kube.put_json(
            "batch",
            "cronjobs",
            json!({
                "apiVersion": "batch/v1", "kind": "CronJob",
                "metadata": {"name": format!("vtsnap-snap-{ns}-example-commerce-x-x"), "namespace": "vtsnap",
                    "uid": format!("cron-{ns}"),
                    "annotations": {"vtsnap.io/schedule-shard": format!("{ns}/example/commerce/-")},
                    "labels": {"app.kubernetes.io/component": "snapshot", "vtsnap.io/cluster": "example",
                        "vtsnap.io/keyspace": "commerce", "vtsnap.io/shard": "x-x"}},
                "spec": {"schedule": "0 * * * *", "jobTemplate": {"spec": {"template": {"spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "snapshot", "image": "vtsnap/vtsnap-snapshot:1",
                        "args": ["run", "--cluster", "example", "--cluster-namespace", ns]}]}}}}}
            }),
        );
    }
    let config = vtsnap_core::config::Config::from_yaml(
        "clusters:\n- name: example\n  namespace: ns-a\n- name: example\n  namespace: ns-b\n",
    )
    .unwrap();
    let shard: ShardArg = "example/commerce/-".parse().unwrap();
    let e = backup(&kube.client(), &install(), &shard, None, None, None)
        .await
        .unwrap_err();
    assert!(
        matches!(e, BackupError::SeveralCronJobs { n: 2, .. }),
        "{e}"
    );
    let only = InNamespace {
        namespace: "ns-b",
        config: &config,
    };
    let out = backup(&kube.client(), &install(), &shard, None, None, Some(&only))
        .await
        .unwrap();
    assert!(
        out.job
            .starts_with("vtsnap-snap-ns-b-example-commerce-x-x-"),
        "{out:?}"
    );
}
