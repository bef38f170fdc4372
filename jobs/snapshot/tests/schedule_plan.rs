//! `vtsnap-snapshot schedule plan --objects`: the reconciler's decision from a dump, as an
//! SRE runs it before trusting it. vtctld is not asked offline, so a CronJob of a shard
//! gone from the spec is kept, never planned for deletion; a bad dump or template is a
//! clear error.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};

use serde_json::{Value, json};

fn schedule_plan(dir: &std::path::Path, items: &[Value]) -> Output {
    let dump = dir.join("dump.json");
    std::fs::write(
        &dump,
        json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string(),
    )
    .unwrap();
    plan_file(dir, &dump)
}

fn plan_file(dir: &std::path::Path, dump: &std::path::Path) -> Output {
    plan_with(
        dir,
        dump,
        "clusters:\n- name: example\n  namespace: vitess\n",
    )
}

fn plan_with(dir: &std::path::Path, dump: &std::path::Path, config_text: &str) -> Output {
    let config = dir.join("config.yaml");
    std::fs::write(&config, config_text).unwrap();
    Command::new(env!("CARGO_BIN_EXE_vtsnap-snapshot"))
        .args(["schedule", "plan", "--config"])
        .arg(&config)
        .args([
            "--template",
            "vtsnap-snapshot-schedule",
            "--output",
            "json",
            "--objects",
        ])
        .arg(dump)
        .env_remove("VTSNAP_CONFIG")
        .env_remove("VTSNAP_NAMESPACE")
        .output()
        .unwrap()
}

fn template() -> Value {
    let cronjob = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "template"},
        "spec": {"schedule": "0 0 1 1 *", "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "snapshot", "image": "vtsnap/vtsnap-snapshot:0.1.0", "args": ["run"]}]}}}}}});
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "vtsnap-snapshot-schedule", "namespace": "vtsnap", "uid": "cm-uid"},
        "data": {"fullname": "vtsnap", "cronjob.json": cronjob.to_string(), "overrides.json": "[]"}})
}

fn vitess_cluster(parts: u64) -> Value {
    json!({"apiVersion": "planetscale.com/v2", "kind": "VitessCluster",
        "metadata": {"name": "example", "namespace": "vitess"},
        "spec": {"keyspaces": [{"name": "commerce", "partitionings": [{"equal": {"parts": parts}}]}]}})
}

/// A CronJob the reconciler made for `shard` (label, owner, record).
fn ours(name: &str, shard: &str) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": name, "namespace": "vtsnap", "uid": format!("uid-{name}"), "resourceVersion": "7",
            "labels": {"app.kubernetes.io/managed-by": "vtsnap-schedule"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "vtsnap-snapshot-schedule", "uid": "cm-uid"}],
            "annotations": {"vtsnap.io/schedule-shard": format!("vitess/example/commerce/{shard}"),
                            "vtsnap.io/stagger-minutes": "3", "vtsnap.io/spec-hash": "old"}},
        "spec": {"schedule": "3 */6 * * *"}})
}

fn json_of(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {stdout}{}", String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn a_reshard_planned_from_a_dump_creates_and_never_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let out = schedule_plan(
        dir.path(),
        &[
            template(),
            vitess_cluster(2),
            ours("vtsnap-snap-example-commerce-x-x", "-"),
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan = json_of(&out);
    assert_eq!(
        (plan["created"].as_u64(), plan["deleted"].as_u64()),
        (Some(2), Some(0)),
        "{plan:#}"
    );
    let old = plan["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "vtsnap-snap-example-commerce-x-x")
        .unwrap();
    assert_eq!(
        (old["action"].as_str(), old["reason"].as_str()),
        (Some("keep"), Some("vtctld-unknown")),
        "{old:#}"
    );
    assert!(
        old["message"]
            .as_str()
            .unwrap()
            .contains("not asked offline"),
        "{old:#}"
    );
}

#[test]
fn bad_dumps_and_templates_are_named() {
    let dir = tempfile::tempdir().unwrap();
    // Not JSON: a usage error naming the file.
    let dump = dir.path().join("not-json");
    std::fs::write(&dump, "{").unwrap();
    let out = plan_file(dir.path(), &dump);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not JSON"),
        "{out:?}"
    );
    // No template: nothing decided, exit 1, the problem named.
    let out = schedule_plan(dir.path(), &[vitess_cluster(1)]);
    assert_eq!(out.status.code(), Some(1));
    let plan = json_of(&out);
    assert!(plan["decisions"].as_array().unwrap().is_empty());
    assert!(
        plan["problems"][0]
            .as_str()
            .unwrap()
            .contains("no ConfigMap vtsnap-snapshot-schedule"),
        "{plan:#}"
    );
    // A template without a snapshot container: refused as a whole.
    let mut t = template();
    t["data"]["cronjob.json"] = json!(json!({"kind": "CronJob", "spec": {}}).to_string());
    let out = schedule_plan(dir.path(), &[t, vitess_cluster(1)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        json_of(&out)["problems"][0]
            .as_str()
            .unwrap()
            .contains("exactly one container named snapshot")
    );
    // A VitessCluster whose spec cannot be read: no CronJob made for it.
    let mut vc = vitess_cluster(1);
    vc["spec"]["keyspaces"][0]["partitionings"] = json!("all");
    let out = schedule_plan(dir.path(), &[template(), vc]);
    assert_eq!(out.status.code(), Some(1));
    let plan = json_of(&out);
    assert_eq!(plan["created"].as_u64(), Some(0), "{plan:#}");
}

fn decisions(plan: &Value) -> Vec<(String, String, String)> {
    plan["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let s = |k: &str| d[k].as_str().unwrap_or_default().to_owned();
            (s("name"), s("action"), s("reason"))
        })
        .collect()
}

/// Audit item 4 and review round three, item 15: an offline plan printed `duplicate`
/// deletions, though the docs said it deletes nothing. It prints exactly what
/// docs/schedule.md says: no `shard-gone` (vtctld not asked), a second CronJob of a shard
/// kept, and `drills-off` the one deletion (drills off needs no vtctld).
#[test]
fn an_offline_plan_deletes_only_drills_that_are_off() {
    let dir = tempfile::tempdir().unwrap();
    let mut drill = ours("vtsnap-drill-example-commerce-x-x", "-");
    drill["metadata"]["annotations"]["vtsnap.io/schedule-kind"] = json!("drill");
    let out = schedule_plan(
        dir.path(),
        &[
            template(),
            vitess_cluster(1),
            ours("vtsnap-snap-example-commerce-x-x", "-"),
            ours("old-vtsnap-snap-example-commerce-x-x", "-"),
            ours("vtsnap-snap-example-commerce-x-80", "-80"),
            drill,
        ],
    );
    let plan = json_of(&out);
    assert_eq!(out.status.code(), Some(0), "{plan:#}");
    let row = |n: &str, a: &str, r: &str| (n.to_owned(), a.to_owned(), r.to_owned());
    assert_eq!(
        decisions(&plan),
        [
            row("old-vtsnap-snap-example-commerce-x-x", "keep", "duplicate"),
            row("vtsnap-drill-example-commerce-x-x", "delete", "drills-off"),
            row(
                "vtsnap-snap-example-commerce-x-80",
                "keep",
                "vtctld-unknown"
            ),
            row("vtsnap-snap-example-commerce-x-x", "update", "changed"),
        ],
        "{plan:#}"
    );
}

/// Review round three, item 4: `example` in two namespaces, `commerce` in each: one
/// CronJob name was planned twice. Each shard's name now carries its namespace.
#[test]
fn one_cluster_name_in_two_namespaces_plans_two_names() {
    let dir = tempfile::tempdir().unwrap();
    let in_ns = |ns: &str| {
        let mut vc = vitess_cluster(1);
        vc["metadata"]["namespace"] = json!(ns);
        vc
    };
    let dump = dir.path().join("dump.json");
    std::fs::write(
        &dump,
        json!({"kind": "List", "items": [template(), in_ns("ns-a"), in_ns("ns-b")]}).to_string(),
    )
    .unwrap();
    let out = plan_with(
        dir.path(),
        &dump,
        "clusters:\n- name: example\n  namespace: ns-a\n- name: example\n  namespace: ns-b\n",
    );
    let plan = json_of(&out);
    assert_eq!(out.status.code(), Some(0), "{plan:#}");
    let names: Vec<String> = decisions(&plan).into_iter().map(|d| d.0).collect();
    assert_eq!(
        names,
        [
            "vtsnap-snap-ns-a-example-commerce-x-x",
            "vtsnap-snap-ns-b-example-commerce-x-x"
        ],
        "{plan:#}"
    );
    assert_eq!(plan["created"].as_u64(), Some(2));
}
