//! One cluster name in two namespaces (review round three, item 4): a drill names the
//! namespace with `--cluster-namespace`, as the schedule reconciler's drill CronJob passes
//! it; without it the drill refuses with exit 2 and names the flag. Offline (`plan
//! --objects`), where `--shard-state` must be the chosen namespace's shard.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};

use serde_json::json;

fn drill_plan(dir: &std::path::Path, namespace: Option<&str>) -> Output {
    let config = dir.join("config.yaml");
    std::fs::write(
        &config,
        "clusters:\n- name: example\n  namespace: ns-a\n- name: example\n  namespace: ns-b\n",
    )
    .unwrap();
    let objects = dir.join("dump.json");
    std::fs::write(&objects, json!({"kind": "List", "items": []}).to_string()).unwrap();
    // vtctld's view of ns-b's shard (the webhook's /debug/shards entry).
    let state = dir.join("shard.json");
    std::fs::write(
        &state,
        json!({"key": {"namespace": "ns-b", "cluster": "example", "keyspace": "commerce", "shard": "-"},
            "primary": null, "tablets": [], "refreshed_at": "2026-12-01T00:00:00Z", "error": null})
        .to_string(),
    )
    .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vtsnap-drill"));
    cmd.arg("plan")
        .arg("--config")
        .arg(&config)
        .arg("--objects")
        .arg(&objects)
        .arg("--shard-state")
        .arg(&state)
        .args([
            "--cluster",
            "example",
            "--keyspace",
            "commerce",
            "--shard=-",
            "--restore-image",
            "r:1",
            "--checker-image",
            "c:1",
        ]);
    for k in [
        "VTSNAP_CONFIG",
        "VTSNAP_CLUSTER_NAMESPACE",
        "VTSNAP_OBJECTS",
    ] {
        cmd.env_remove(k);
    }
    if let Some(ns) = namespace {
        cmd.args(["--cluster-namespace", ns]);
    }
    cmd.output().unwrap()
}

#[test]
fn a_drill_works_on_the_cluster_of_the_namespace_named() {
    let dir = tempfile::tempdir().unwrap();
    let stderr = |o: &Output| String::from_utf8_lossy(&o.stderr).into_owned();
    // ns-b: the shard state is its shard's, so the plan is decided (not a usage error).
    let out = drill_plan(dir.path(), Some("ns-b"));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(line["outcome"], "planned", "{line:#}");
    // ns-a: the same state is another shard's.
    let out = drill_plan(dir.path(), Some("ns-a"));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--shard-state is of ns-b/example/commerce/-, not of this shard"),
        "{}",
        stderr(&out)
    );
    // Neither: refused, naming the flag.
    let out = drill_plan(dir.path(), None);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(
            "cluster \"example\" is in more than one namespace of the config (ns-a, ns-b): \
             name one with --cluster-namespace"
        ),
        "{}",
        stderr(&out)
    );
}
