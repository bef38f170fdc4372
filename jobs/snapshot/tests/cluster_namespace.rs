//! One cluster name in two namespaces (review round three, item 4): the Job of such a
//! shard names the namespace (`--cluster-namespace`, as the schedule reconciler's CronJob
//! passes it), and `plan` and `run` work on that namespace's cluster; without it they
//! refuse with exit 2 and name the flag. The binary meets the in-memory API over HTTP.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};
use vtsnap_core::config::Config;
use vtsnap_snapshot::schedule::reconcile;
use vtsnap_testkit::fake_kube::FakeKube;
use vtsnap_testkit::fake_vtctld::FakeVtctld;
use vtsnap_testkit::fixtures::shard;
use vtsnap_testkit::grpc::closed_endpoint;

fn kubeconfig(dir: &Path, url: &str) -> PathBuf {
    let p = dir.join("kubeconfig");
    std::fs::write(
        &p,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: fake\n\
             clusters: [{{name: fake, cluster: {{server: \"{url}\"}}}}]\n\
             users: [{{name: nobody, user: {{}}}}]\n\
             contexts: [{{name: fake, context: {{cluster: fake, user: nobody}}}}]\n"
        ),
    )
    .unwrap();
    p
}

/// Runs the binary off the runtime's threads (the API's HTTP front runs on them).
async fn snapshot(args: Vec<String>, kubeconfig: PathBuf) -> Output {
    tokio::task::spawn_blocking(move || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_vtsnap-snapshot"));
        cmd.args(&args)
            .env("KUBECONFIG", &kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST");
        for k in [
            "VTSNAP_CONFIG",
            "VTSNAP_CLUSTER",
            "VTSNAP_CLUSTER_NAMESPACE",
            "VTSNAP_DRY_RUN",
            "VTSNAP_OUTPUT",
        ] {
            cmd.env_remove(k);
        }
        cmd.output().unwrap()
    })
    .await
    .unwrap()
}

fn last_json(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap_or_else(|e| {
        panic!(
            "{e}: {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn plan_and_run_work_on_the_cluster_of_the_namespace_named() {
    // `example` in ns-a and ns-b; only ns-b's shard exists, and ns-a's vtctld answers
    // nothing: a plan of ns-a's shard cannot choose a target.
    let mut f = shard().replicas(3).primary(1);
    f.namespace = "ns-b".into();
    let (kube, vtctld) = (FakeKube::new(), FakeVtctld::new());
    f.install(&kube, &vtctld);
    let server = vtctld.serve().await;
    let front = kube.serve_http().await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "clusters:\n- name: example\n  namespace: ns-a\n  vtctld: \"{}\"\n\
             - name: example\n  namespace: ns-b\n  vtctld: \"{}\"\n",
            closed_endpoint().await,
            server.endpoint()
        ),
    )
    .unwrap();
    let kc = kubeconfig(dir.path(), &front.url());
    let args = |verb: &str, namespace: Option<&str>| {
        let mut a: Vec<String> = [
            verb,
            "--config",
            config.to_str().unwrap(),
            "--cluster",
            "example",
            "--keyspace",
            "commerce",
            "--shard=-",
            "--output",
            "json",
        ]
        .map(str::to_owned)
        .to_vec();
        if let Some(ns) = namespace {
            a.extend(["--cluster-namespace".to_owned(), ns.to_owned()]);
        }
        a
    };

    let out = snapshot(args("plan", Some("ns-b")), kc.clone()).await;
    let report = last_json(&out);
    assert_eq!(out.status.code(), Some(0), "{report:#}");
    assert_eq!(report["shard"]["namespace"], "ns-b", "{report:#}");
    assert!(report["target"]["alias"].is_string(), "{report:#}");

    // Without the namespace: refused before anything is read, naming the flag (the JSON
    // line of `run` included, which is what a failed Job's log shows).
    for verb in ["plan", "run"] {
        let out = snapshot(args(verb, None), kc.clone()).await;
        let j = last_json(&out);
        assert_eq!(out.status.code(), Some(2), "{verb}: {j:#}");
        if verb == "run" {
            assert_eq!(j["outcome"], "usage", "{j:#}");
        }
        assert_eq!(
            j["error"]["message"],
            "cluster \"example\" is in more than one namespace of the config (ns-a, ns-b): \
             name one with --cluster-namespace",
            "{verb}: {j:#}"
        );
    }
    // A namespace the name is not configured in.
    let out = snapshot(args("plan", Some("ns-c")), kc.clone()).await;
    assert_eq!(out.status.code(), Some(2));
    let j = last_json(&out);
    assert!(
        j["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not in the config in namespace \"ns-c\" (it is in ns-a, ns-b)"),
        "{j:#}"
    );
    assert!(
        kube.writes().is_empty(),
        "plans and refusals write nothing: {:?}",
        kube.writes()
    );
}

/// The whole way: the CronJob the schedule reconciler makes for ns-b's shard starts a
/// Job whose arguments place that shard (before, every such Job exited 2).
#[tokio::test(flavor = "multi_thread")]
async fn the_reconciler_s_cronjob_args_place_their_shard() {
    let mut f = shard().replicas(3).primary(1);
    f.namespace = "ns-b".into();
    let (kube, vtctld) = (FakeKube::new(), FakeVtctld::new());
    f.install(&kube, &vtctld);
    let cronjob = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "template"},
        "spec": {"schedule": "0 0 1 1 *", "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "snapshot", "image": "vtsnap/vtsnap-snapshot:0.1.0", "args": ["run"]}]}}}}}});
    kube.put_json(
        "",
        "configmaps",
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "vtsnap-snapshot-schedule", "namespace": "vtsnap", "uid": "cm-uid"},
            "data": {"fullname": "vtsnap", "cronjob.json": cronjob.to_string(), "overrides.json": "[]"}}),
    );
    for ns in ["ns-a", "ns-b"] {
        kube.put_json(
            "planetscale.com",
            "vitessclusters",
            json!({"apiVersion": "planetscale.com/v2", "kind": "VitessCluster",
                "metadata": {"name": "example", "namespace": ns},
                "spec": {"keyspaces": [{"name": "commerce", "partitionings": [{"equal": {"parts": 1}}]}]}}),
        );
    }
    let server = vtctld.serve().await;
    let text = format!(
        "clusters:\n- name: example\n  namespace: ns-a\n  vtctld: \"{}\"\n\
         - name: example\n  namespace: ns-b\n  vtctld: \"{}\"\n",
        closed_endpoint().await,
        server.endpoint()
    );
    let (plan, _) = reconcile(
        &kube.client(),
        &Config::from_yaml(&text).unwrap(),
        "vtsnap",
        "vtsnap-snapshot-schedule",
    )
    .await;
    assert!(plan.problems.is_empty(), "{plan:#?}");
    let made = kube
        .get_json(
            "batch",
            "cronjobs",
            "vtsnap",
            "vtsnap-snap-ns-b-example-commerce-x-x",
        )
        .expect("ns-b's CronJob");
    let container = &made["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0];
    let job_args: Vec<String> = serde_json::from_value(container["args"].clone()).unwrap();
    assert_eq!(job_args[0], "run");

    // The Job's own arguments, with `plan` for `run` (what a run observes and decides
    // first), against the same API and vtctld.
    let front = kube.serve_http().await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, &text).unwrap();
    let mut args = vec!["plan".to_owned()];
    args.extend(job_args[1..].iter().cloned());
    args.extend(["--config".to_owned(), config.to_str().unwrap().to_owned()]);
    args.extend(["--output".to_owned(), "json".to_owned()]);
    let out = snapshot(args, kubeconfig(dir.path(), &front.url())).await;
    let report = last_json(&out);
    assert_eq!(out.status.code(), Some(0), "{job_args:?}: {report:#}");
    assert_eq!(report["shard"]["namespace"], "ns-b", "{report:#}");
}
