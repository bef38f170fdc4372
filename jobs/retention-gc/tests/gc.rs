//! `vtsnap-gc` against the fake Kubernetes API (with fault injection), and `plan` offline.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};
use vtsnap_core::config::Config;
use vtsnap_core::fence::lease_name;
use vtsnap_core::snapshot::{GROUP, PLURAL};
use vtsnap_gc::act::{GcOptions, run};
use vtsnap_testkit::fake_kube::{FakeKube, Fault, Verb, is};
use vtsnap_testkit::fake_node::{FakeNodeHelper, NodeScript};
use vtsnap_testkit::fake_vtctld::FakeVtctld;
use vtsnap_testkit::fixtures::shard;

fn ago(hours: i64) -> String {
    Timestamp::from_second(Timestamp::now().as_second() - hours * 3600)
        .unwrap()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn snap_obj(name: &str, shard: &str, hours: i64) -> Value {
    json!({
        "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
        "metadata": {"name": name, "namespace": "vitess", "creationTimestamp": ago(hours), "labels": {
            "app.kubernetes.io/managed-by": "vtsnap", "vtsnap.io/cluster": "example", "vtsnap.io/keyspace": "commerce",
            "vtsnap.io/shard": shard, "vtsnap.io/phase": "ready", "vtsnap.io/mode": "cold"}},
        "spec": {"source": {"persistentVolumeClaimName": "pvc"}},
        "status": {"boundVolumeSnapshotContentName": "c", "creationTime": ago(hours), "readyToUse": true}
    })
}

fn cluster_obj() -> Value {
    json!({"apiVersion": "planetscale.com/v2", "kind": "VitessCluster",
           "metadata": {"name": "example", "namespace": "vitess", "uid": "c1a55e5e-0000-4000-8000-000000000001"},
           "spec": {"keyspaces": [{"name": "commerce", "partitionings": [{"equal": {"parts": 1}}]}]}})
}

/// `n` ready snapshots of shard `-`, one per hour, and the VitessCluster.
fn world(n: usize) -> FakeKube {
    let kube = FakeKube::new();
    kube.put_json("planetscale.com", "vitessclusters", cluster_obj());
    for i in 0..n {
        kube.put_json(
            GROUP,
            PLURAL,
            snap_obj(
                &format!("snap-{i:04}"),
                "x-x",
                i64::try_from(i).unwrap() + 1,
            ),
        );
    }
    kube
}

fn config(extra: &str) -> Config {
    Config::from_yaml(&format!(
        "clusters:\n- name: example\n  namespace: vitess\n  retention: {{maxCount: 3}}\n{extra}"
    ))
    .unwrap()
}

fn opts(dry_run: bool) -> GcOptions {
    GcOptions {
        dry_run,
        only_cluster: None,
        node_timeout: Duration::from_secs(2),
    }
}

#[tokio::test]
async fn retention_deletes_beyond_max_count() {
    let kube = world(5);
    let r = run(&config(""), &opts(false), kube.client_as("gc")).await;
    assert_eq!(r.exit_code, 0, "{r:?}");
    assert_eq!(r.run.deleted, ["vitess/snap-0003", "vitess/snap-0004"]);
    assert_eq!(kube.list_json(GROUP, PLURAL).len(), 3);
    let events: Vec<Value> = kube.events();
    assert_eq!(events.len(), 2);
    for e in events {
        assert_eq!(
            (e["regarding"]["kind"].as_str(), e["reason"].as_str()),
            (Some("VitessCluster"), Some("SnapshotDeleted"))
        );
    }
    assert_eq!(
        vtsnap_testkit::rbac::refused("gc", &kube.log()),
        Vec::<String>::new(),
        "requests its Role does not grant"
    );
}

#[tokio::test]
async fn an_unreadable_snapshot_is_never_deleted() {
    let kube = world(4);
    // Older than all and ready: beyond maxCount, were it readable.
    let mut bad = snap_obj("snap-unreadable", "x-x", 10);
    bad["metadata"]["labels"]["vtsnap.io/phase"] = json!("Ready");
    kube.put_json(GROUP, PLURAL, bad);
    let r = run(&config(""), &opts(false), kube.client_as("gc")).await;
    assert_eq!(r.run.deleted, ["vitess/snap-0003"], "{r:?}");
    assert!(
        kube.get_json(GROUP, PLURAL, "vitess", "snap-unreadable")
            .is_some()
    );
    assert!(
        r.run
            .plan
            .delete
            .iter()
            .chain(&r.run.plan.keep)
            .all(|i| i.name != "snap-unreadable"),
        "{r:?}"
    );
    // Reported in the JSON line, with the field, and the run is not failed for it.
    let line = serde_json::to_value(&r).unwrap();
    assert_eq!(
        line["plan"]["skipped"][0]["name"], "snap-unreadable",
        "{line}"
    );
    assert_eq!(line["plan"]["skipped"][0]["reason"], "unreadable");
    assert!(
        line["plan"]["skipped"][0]["message"]
            .as_str()
            .unwrap()
            .contains("vtsnap.io/phase"),
        "{line}"
    );
    assert_eq!(r.exit_code, 0);
}

#[tokio::test]
async fn a_list_that_fails_half_way_through_its_pages_deletes_nothing() {
    // 600 snapshots: two pages of 500. The second page fails.
    let kube = world(600);
    kube.fault(
        Fault::on(is(Verb::List, "volumesnapshots"))
            .nth(2)
            .status(500),
    );
    let r = run(&config(""), &opts(false), kube.client_as("gc")).await;
    assert_eq!(r.exit_code, 1, "{r:?}");
    assert_eq!(r.run.unreadable.len(), 1);
    assert!(r.run.plan.delete.is_empty() && r.run.deleted.is_empty());
    assert!(kube.writes().is_empty(), "{:?}", kube.writes());
    assert!(
        kube.log()
            .iter()
            .any(|l| l.info.verb == Verb::List && l.status == 500),
        "the fault was reached"
    );
}

#[tokio::test]
async fn owner_reference_sync_is_retried_on_conflict() {
    let kube = world(2);
    kube.fault(
        Fault::on(is(Verb::Update, "volumesnapshots"))
            .nth(1)
            .status(409),
    );
    let r = run(
        &config("  deletionPolicy: {whenDeleted: Delete}\n"),
        &opts(false),
        kube.client_as("gc"),
    )
    .await;
    assert_eq!((r.exit_code, r.run.owner_refs_changed), (0, 2), "{r:?}");
    for s in kube.list_json(GROUP, PLURAL) {
        assert_eq!(
            s["metadata"]["ownerReferences"][0]["uid"],
            "c1a55e5e-0000-4000-8000-000000000001"
        );
    }
    // The policy flips back: the references are removed.
    let r = run(
        &config("  deletionPolicy: {whenDeleted: Retain}\n"),
        &opts(false),
        kube.client_as("gc"),
    )
    .await;
    assert_eq!(r.run.owner_refs_changed, 2, "{r:?}");
    for s in kube.list_json(GROUP, PLURAL) {
        assert!(
            s["metadata"]["ownerReferences"]
                .as_array()
                .is_none_or(Vec::is_empty),
            "{s}"
        );
    }
    assert_eq!(
        vtsnap_testkit::rbac::refused("gc", &kube.log()),
        Vec::<String>::new(),
        "requests its Role does not grant"
    );
}

#[tokio::test]
async fn a_delete_that_returns_404_is_done() {
    let kube = world(4);
    kube.fault(
        Fault::on(is(Verb::Delete, "volumesnapshots"))
            .always()
            .status(404),
    );
    let r = run(&config(""), &opts(false), kube.client_as("gc")).await;
    assert_eq!(r.exit_code, 0, "{r:?}");
    assert_eq!(r.run.deleted, ["vitess/snap-0003"]);
}

#[tokio::test]
async fn expired_fences_are_recovered() {
    let fixture = shard().replicas(3).primary(1);
    let kube = world(1);
    let vtctld = FakeVtctld::new();
    fixture.install(&kube, &vtctld);
    let vt = vtctld.serve().await;
    let _node = FakeNodeHelper::start(
        &kube,
        "",
        NodeScript {
            dead: true,
            ..NodeScript::default()
        },
        Duration::from_millis(20),
    );
    let name = lease_name("example", "commerce", "x-x");
    kube.put_json("coordination.k8s.io", "leases", json!({
        "metadata": {"name": name, "namespace": "vitess", "labels": {"app.kubernetes.io/managed-by": "vtsnap", "vtsnap.io/node": "node-2"},
            "annotations": {"vtsnap.io/target-pod": "p", "vtsnap.io/target-pod-uid": "u", "vtsnap.io/tablet-alias": fixture.alias(2).to_string(),
            "vtsnap.io/original-type": "replica", "vtsnap.io/vtctld": vt.endpoint(), "vtsnap.io/mode": "cold",
            "vtsnap.io/request": "hold", "vtsnap.io/max-hold-seconds": "60"}},
        "spec": {"holderIdentity": "dead-job", "leaseDurationSeconds": 30, "renewTime": "2026-01-01T00:00:00.000000Z"}
    }));
    let r = run(&config(""), &opts(false), kube.client_as("gc")).await;
    assert_eq!(r.exit_code, 0, "{r:?}");
    assert_eq!(r.run.fences_recovered, [format!("vitess/{name}")]);
    assert!(
        kube.get_json("coordination.k8s.io", "leases", "vitess", &name)
            .is_none()
    );
    assert!(
        vtctld
            .calls()
            .contains(&format!("ChangeTabletType {} REPLICA", fixture.alias(2)))
    );
    assert_eq!(
        vtsnap_testkit::rbac::refused("gc", &kube.log()),
        Vec::<String>::new(),
        "requests its Role does not grant"
    );
}

#[tokio::test]
async fn dry_run_changes_nothing() {
    let kube = world(6);
    let r = run(
        &config("  deletionPolicy: {whenDeleted: Delete}\n"),
        &opts(true),
        kube.client_as("gc"),
    )
    .await;
    assert_eq!(r.exit_code, 0);
    assert_eq!(r.run.plan.delete.len(), 3);
    assert_eq!(r.run.plan.owner_refs.add.len(), 3);
    assert!(r.run.deleted.is_empty());
    assert!(kube.writes().is_empty(), "{:?}", kube.writes());
}

#[test]
fn plans_offline_from_a_dump_reproducibly() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("cfg.yaml");
    std::fs::write(
        &cfg,
        "clusters:\n- name: example\n  namespace: vitess\n  retention: {maxCount: 1}\n",
    )
    .unwrap();
    let mut items: Vec<Value> = (0..3)
        .map(|i| snap_obj(&format!("s{i}"), "x-x", i + 1))
        .collect();
    for (i, it) in items.iter_mut().enumerate() {
        it["metadata"]["creationTimestamp"] = json!(format!("2026-11-2{}T00:00:00Z", 8 - i));
    }
    items.push(cluster_obj());
    items.push(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "new-tablet", "namespace": "vitess"},
        "spec": {"dataSourceRef": {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "s2"}}, "status": {"phase": "Pending"}}));
    let dump = dir.path().join("dump.json");
    std::fs::write(
        &dump,
        serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "List", "items": items})).unwrap(),
    )
    .unwrap();
    let plan = || {
        let out = Command::new(env!("CARGO_BIN_EXE_vtsnap-gc"))
            .args(["plan", "--config"])
            .arg(&cfg)
            .arg("--objects")
            .arg(&dump)
            .args(["--now", "2026-11-29T12:00:00Z", "--output", "json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let p = plan();
    assert_eq!(p, plan(), "the same dump and time give the same plan");
    assert_eq!(
        p["delete"],
        json!([{"namespace": "vitess", "name": "s1", "reason": "beyond-max-count"}])
    );
    let keep: Vec<(&str, &str)> = p["keep"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| (k["name"].as_str().unwrap(), k["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(keep, [("s0", "newest-ready"), ("s2", "in-use-source")]);
    for k in ["owner_refs", "recover_fences"] {
        assert!(p.get(k).is_some(), "{p}");
    }
}
