//! `vtsnap-gc plan` from dumps with broken or hostile objects: what cannot be read
//! completely is skipped (never deleted, counted or recovered) and reported.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const NOW: &str = "2026-11-29T12:00:00Z";

/// A ready snapshot of `example/commerce/<shard>` created at `created`.
fn snap(name: &str, shard: &str, created: &str) -> Value {
    json!({
        "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
        "metadata": {"name": name, "namespace": "vitess", "creationTimestamp": created, "labels": {
            "app.kubernetes.io/managed-by": "vtsnap", "vtsnap.io/cluster": "example", "vtsnap.io/keyspace": "commerce",
            "vtsnap.io/shard": shard, "vtsnap.io/phase": "ready", "vtsnap.io/mode": "cold"}},
        "spec": {"source": {"persistentVolumeClaimName": "pvc"}},
        "status": {"boundVolumeSnapshotContentName": "c", "creationTime": created, "readyToUse": true}
    })
}

/// The VitessCluster with the given shards of `commerce` (`parts` equal parts).
fn cluster(parts: u64) -> Value {
    json!({"apiVersion": "planetscale.com/v2", "kind": "VitessCluster",
           "metadata": {"name": "example", "namespace": "vitess", "uid": "uid-1"},
           "spec": {"keyspaces": [{"name": "commerce", "partitionings": [{"equal": {"parts": parts}}]}]}})
}

/// A fence lease renewed a minute before NOW.
fn lease(name: &str, duration: Value) -> Value {
    json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": "vitess", "labels": {"app.kubernetes.io/managed-by": "vtsnap"}},
        "spec": {"holderIdentity": "job", "leaseDurationSeconds": duration, "renewTime": "2026-11-29T11:59:00.000000Z"}})
}

struct Dump {
    dir: tempfile::TempDir,
}

impl Dump {
    fn new(config_extra: &str, items: &[Value]) -> Self {
        Self::raw(
            config_extra,
            &serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "List", "items": items}))
                .unwrap(),
        )
    }

    fn raw(config_extra: &str, dump: &[u8]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("cfg.yaml"),
            format!("clusters:\n- name: example\n  namespace: vitess\n{config_extra}"),
        )
        .unwrap();
        std::fs::write(dir.path().join("dump.json"), dump).unwrap();
        Self { dir }
    }

    fn run(&self, output: &str) -> Output {
        Command::new(env!("CARGO_BIN_EXE_vtsnap-gc"))
            .args(["plan", "--config"])
            .arg(self.dir.path().join("cfg.yaml"))
            .arg("--objects")
            .arg(self.dir.path().join("dump.json"))
            .args(["--now", NOW, "--output", output])
            .output()
            .unwrap()
    }

    fn plan(&self) -> Value {
        let out = self.run("json");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

fn names(p: &Value, list: &str) -> Vec<(String, String)> {
    p[list]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["name"].as_str().unwrap().to_owned(),
                i["reason"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn skipped(p: &Value) -> Vec<(String, String)> {
    p["skipped"]
        .as_array()
        .unwrap_or_else(|| panic!("no skipped list: {p}"))
        .iter()
        .map(|i| {
            (
                i["name"].as_str().unwrap().to_owned(),
                i["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn pair(a: &str, b: &str) -> (String, String) {
    (a.to_owned(), b.to_owned())
}

/// Three ready snapshots, newest first; `newest` is the newest one, broken by the caller.
fn three(newest: Value) -> Vec<Value> {
    vec![
        newest,
        snap("mid", "x-x", "2026-11-28T00:00:00Z"),
        snap("old", "x-x", "2026-11-27T00:00:00Z"),
        cluster(1),
    ]
}

#[test]
fn a_missing_or_garbage_creation_timestamp_is_skipped_not_taken_for_1970() {
    for created in [json!(null), json!("yesterday"), json!(12), json!("")] {
        let mut newest = snap("newest", "x-x", "2026-11-29T00:00:00Z");
        newest["metadata"]["creationTimestamp"] = created.clone();
        let p = Dump::new("  retention: {maxCount: 1}\n", &three(newest)).plan();
        assert_eq!(
            names(&p, "delete"),
            [pair("old", "beyond-max-count")],
            "{created}: {p}"
        );
        assert_eq!(
            names(&p, "keep"),
            [pair("mid", "newest-ready")],
            "{created}: {p}"
        );
        assert_eq!(skipped(&p), [pair("newest", "unreadable")], "{created}");
        assert!(
            p["skipped"][0]["message"]
                .as_str()
                .unwrap()
                .contains("creationTimestamp"),
            "{p}"
        );
        assert_eq!(p["skipped"][0]["kind"], "VolumeSnapshot");
    }
}

/// Round three, item 13: a `vtsnap.io/drill` that does not read counts as no record; it
/// never strands its snapshot (before, the snapshot was skipped by every run, forever).
#[test]
fn an_unreadable_drill_record_counts_as_none_and_strands_nothing() {
    let mut newest = snap("newest", "x-x", "2026-11-29T00:00:00Z");
    newest["metadata"]["annotations"] =
        json!({"vtsnap.io/drill": "{\"result\":\"passed\",\"at\":"});
    let p = Dump::new("  retention: {maxCount: 1}\n", &three(newest)).plan();
    assert!(p["skipped"].as_array().is_none_or(Vec::is_empty), "{p}");
    assert_eq!(names(&p, "keep"), [pair("newest", "newest-ready")], "{p}");
    assert_eq!(
        names(&p, "delete"),
        [
            pair("mid", "beyond-max-count"),
            pair("old", "beyond-max-count")
        ],
        "{p}"
    );
}

#[test]
fn a_creation_time_in_the_future_is_skipped_and_does_not_push_the_newest_out() {
    let future = snap("future", "x-x", "9999-01-01T00:00:00Z");
    let p = Dump::new("  retention: {maxCount: 1}\n", &three(future)).plan();
    assert_eq!(names(&p, "keep"), [pair("mid", "newest-ready")], "{p}");
    assert_eq!(
        names(&p, "delete"),
        [pair("old", "beyond-max-count")],
        "{p}"
    );
    assert_eq!(skipped(&p), [pair("future", "created-in-the-future")]);
}

#[test]
fn a_ready_to_use_that_is_not_a_boolean_is_skipped_not_unready() {
    for ready in [json!("true"), json!(1), json!("false")] {
        // Old enough that a snapshot taken for unready would be deleted as unready-expired.
        let mut newest = snap("newest", "x-x", "2026-11-20T00:00:00Z");
        newest["status"]["readyToUse"] = ready.clone();
        let items = vec![
            newest,
            snap("older", "x-x", "2026-11-19T00:00:00Z"),
            cluster(1),
        ];
        let p = Dump::new("", &items).plan();
        assert_eq!(names(&p, "delete"), [], "{ready}: {p}");
        assert_eq!(names(&p, "keep"), [pair("older", "newest-ready")], "{p}");
        assert_eq!(skipped(&p), [pair("newest", "unreadable")], "{ready}");
        assert!(
            p["skipped"][0]["message"]
                .as_str()
                .unwrap()
                .contains("status.readyToUse"),
            "{p}"
        );
    }
}

#[test]
fn two_objects_with_one_name_are_both_skipped() {
    let items = vec![
        snap("twin", "x-x", "2026-11-29T00:00:00Z"),
        snap("twin", "x-x", "2026-11-01T00:00:00Z"),
        snap("other", "x-x", "2026-11-28T00:00:00Z"),
        snap("oldest", "x-x", "2026-11-27T00:00:00Z"),
        cluster(1),
    ];
    let p = Dump::new("  retention: {maxCount: 1}\n", &items).plan();
    assert_eq!(names(&p, "keep"), [pair("other", "newest-ready")], "{p}");
    assert_eq!(
        names(&p, "delete"),
        [pair("oldest", "beyond-max-count")],
        "{p}"
    );
    assert_eq!(
        skipped(&p),
        [pair("twin", "duplicate"), pair("twin", "duplicate")]
    );
    // The same for a readable and an unreadable copy, and for leases.
    let mut broken = snap("twin", "x-x", "2026-11-01T00:00:00Z");
    broken["metadata"]["labels"]["vtsnap.io/phase"] = json!("Ready");
    let items = vec![
        snap("twin", "x-x", "2020-01-01T00:00:00Z"),
        broken,
        snap("other", "x-x", "2026-11-28T00:00:00Z"),
        lease("fence", json!(1)),
        lease("fence", json!(1)),
        cluster(1),
    ];
    let p = Dump::new("  retention: {maxCount: 1}\n", &items).plan();
    assert_eq!(names(&p, "delete"), [], "{p}");
    assert!(p["recover_fences"].as_array().unwrap().is_empty(), "{p}");
    assert_eq!(
        skipped(&p),
        [
            pair("fence", "duplicate"),
            pair("fence", "duplicate"),
            pair("twin", "unreadable"),
            pair("twin", "duplicate"),
        ],
        "{p}"
    );
}

#[test]
fn a_lease_whose_duration_cannot_be_read_is_never_recovered() {
    for d in [
        json!(9_223_372_036_854_775_807_i64),
        json!(18_446_744_073_709_551_615_u64),
        json!(1e30),
        json!(-5),
        json!(0),
        json!(2_147_483_648_i64),
        json!("30"),
        json!(null),
    ] {
        let p = Dump::new("", &[lease("fence", d.clone()), cluster(1)]).plan();
        assert!(
            p["recover_fences"].as_array().unwrap().is_empty(),
            "{d}: {p}"
        );
        assert_eq!(skipped(&p), [pair("fence", "unreadable")], "{d}");
        assert_eq!(p["skipped"][0]["kind"], "Lease");
        assert!(
            p["skipped"][0]["message"]
                .as_str()
                .unwrap()
                .contains("spec.leaseDurationSeconds"),
            "{p}"
        );
    }
    // Readable: expired after 30 s, live for an hour.
    let p = Dump::new(
        "",
        &[
            lease("dead", json!(30)),
            lease("live", json!(3600)),
            cluster(1),
        ],
    )
    .plan();
    assert_eq!(
        p["recover_fences"],
        json!([{"namespace": "vitess", "name": "dead"}])
    );
    assert_eq!(skipped(&p), []);
}

#[test]
fn a_lease_without_a_readable_renew_time_is_never_recovered() {
    for renew in [json!(null), json!("a minute ago"), json!(5)] {
        let mut l = lease("fence", json!(30));
        l["spec"]["renewTime"] = renew.clone();
        let p = Dump::new("", &[l, cluster(1)]).plan();
        assert!(
            p["recover_fences"].as_array().unwrap().is_empty(),
            "{renew}: {p}"
        );
        assert_eq!(skipped(&p), [pair("fence", "unreadable")], "{renew}");
    }
}

#[test]
fn an_empty_name_is_never_planned() {
    let mut nameless = snap("", "x-x", "2026-01-01T00:00:00Z");
    nameless["status"]["readyToUse"] = json!(false);
    let mut dead = lease("", json!(1));
    dead["spec"]["renewTime"] = json!("2020-01-01T00:00:00Z");
    let items = vec![
        nameless,
        dead,
        snap("s", "x-x", "2026-11-28T00:00:00Z"),
        cluster(1),
    ];
    let p = Dump::new("  retention: {maxCount: 1}\n", &items).plan();
    assert_eq!(names(&p, "delete"), [], "{p}");
    assert!(p["recover_fences"].as_array().unwrap().is_empty(), "{p}");
    assert_eq!(
        skipped(&p),
        [pair("", "unreadable"), pair("", "unreadable")],
        "{p}"
    );
}

#[test]
fn a_removed_shard_with_a_skipped_snapshot_is_not_deleted_as_removed() {
    let cfg = "  deletionPolicy: {whenScaled: Delete, gracePeriod: 1h}\n";
    // `-` was resharded into two; its snapshots are days old.
    let gone = || {
        vec![
            snap("gone-1", "x-x", "2026-11-20T00:00:00Z"),
            snap("gone-2", "x-x", "2026-11-19T00:00:00Z"),
            cluster(2),
        ]
    };
    let p = Dump::new(cfg, &gone()).plan();
    assert_eq!(names(&p, "delete").len(), 2, "the control: {p}");
    // A snapshot of `-` without a creationTimestamp may be its newest: the grace period
    // is unknown. So is one whose shard label cannot be read.
    let mut undated = snap("undated", "x-x", "");
    undated["metadata"]["creationTimestamp"] = json!(null);
    let mut unlabelled = snap("unlabelled", "x-x", "2026-11-28T00:00:00Z");
    unlabelled["metadata"]["labels"]["vtsnap.io/shard"] = json!(7);
    for sibling in [undated, unlabelled] {
        let mut items = gone();
        items.push(sibling.clone());
        let p = Dump::new(cfg, &items).plan();
        assert_eq!(names(&p, "delete"), [], "{sibling}: {p}");
        assert_eq!(
            names(&p, "keep"),
            [
                pair("gone-1", "skipped-in-shard"),
                pair("gone-2", "skipped-in-shard")
            ]
        );
    }
    // One of another shard does not hold it.
    let mut items = gone();
    let mut elsewhere = snap("elsewhere", "x-80", "");
    elsewhere["metadata"]["creationTimestamp"] = json!(null);
    items.push(elsewhere);
    let p = Dump::new(cfg, &items).plan();
    assert_eq!(names(&p, "delete").len(), 2, "{p}");
}

#[test]
fn the_table_lists_what_was_skipped() {
    let mut newest = snap("newest", "x-x", "2026-11-29T00:00:00Z");
    newest["status"]["readyToUse"] = json!("true");
    let out = Dump::new("", &three(newest)).run("table");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.lines().any(
            |l| l.starts_with("SKIP    vitess/newest  VolumeSnapshot unreadable: ")
                && l.contains("status.readyToUse")
        ),
        "{text}"
    );
    assert!(text.ends_with(", 1 skipped\n"), "{text}");
}

#[test]
fn a_dump_over_the_size_cap_is_refused_without_reading_it() {
    let d = Dump::raw("", b"");
    // Sparse: refused by its size, not read.
    let f = std::fs::File::create(d.dir.path().join("dump.json")).unwrap();
    f.set_len(vtsnap_gc::observe::MAX_DUMP_BYTES + 1).unwrap();
    let t = Instant::now();
    let out = d.run("json");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!(
            "dump.json is larger than {} bytes, the most a dump may have",
            vtsnap_gc::observe::MAX_DUMP_BYTES
        )),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[test]
fn deep_nesting_is_refused_quickly() {
    let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    for (dump, code) in [
        // Inside an item and as an item: past serde_json's recursion limit.
        (
            format!(
                r#"{{"items": [{{"kind": "VolumeSnapshot", "x": {}}}]}}"#,
                deep(1_000_000)
            ),
            2,
        ),
        (format!(r#"{{"items": [{}]}}"#, deep(1_000_000)), 2),
        // Outside `items`: skipped over without recursion.
        (
            format!(r#"{{"other": {}, "items": []}}"#, deep(1_000_000)),
            0,
        ),
    ] {
        let d = Dump::raw("", dump.as_bytes());
        let t = Instant::now();
        let out = d.run("json");
        let took = t.elapsed();
        assert_eq!(
            out.status.code(),
            Some(code),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // About a second on a loaded machine; a parse that recursed or went quadratic on a
        // million levels would not end for hours.
        assert!(took < Duration::from_secs(60), "{took:?}");
    }
}

#[test]
fn a_vitess_cluster_whose_spec_cannot_be_read_removes_no_shard() {
    let cfg = "  deletionPolicy: {whenScaled: Delete, gracePeriod: 1h, whenDeleted: Delete}\n";
    let items = |c: Value| {
        vec![
            snap("a", "x-x", "2026-11-20T00:00:00Z"),
            snap("b", "x-x", "2026-11-19T00:00:00Z"),
            c,
        ]
    };
    // The control: `-` is gone from a readable spec of two shards.
    let p = Dump::new(cfg, &items(cluster(2))).plan();
    assert_eq!(names(&p, "delete").len(), 2, "the control: {p}");
    let mut parts_text = cluster(1);
    parts_text["spec"]["keyspaces"][0]["partitionings"][0]["equal"]["parts"] = json!("1");
    let mut no_name = cluster(1);
    no_name["spec"]["keyspaces"][0]["name"] = json!(null);
    let mut keyspaces_object = cluster(1);
    keyspaces_object["spec"]["keyspaces"] = json!({"name": "commerce"});
    let mut no_uid = cluster(1);
    no_uid["metadata"]["uid"] = json!(null);
    // Round three, item 8: the operator's CRD allows this; listing its shards would
    // allocate 51 GB. Refused by name, with the value and the bound.
    let huge = cluster(2_147_483_647);
    for (broken, field) in [
        (
            huge,
            "equal.parts is 2147483647 (keyspace \"commerce\"), not a whole number from 1 to 65536",
        ),
        (parts_text, "equal.parts"),
        (no_name, "spec.keyspaces[0].name"),
        (keyspaces_object, "spec.keyspaces"),
        (no_uid, "metadata.uid"),
    ] {
        let p = Dump::new(cfg, &items(broken.clone())).plan();
        assert_eq!(names(&p, "delete"), [], "{broken}: {p}");
        assert_eq!(skipped(&p), [pair("example", "unreadable")], "{p}");
        let message = p["skipped"][0]["message"].as_str().unwrap();
        assert!(message.contains(field), "{field}: {message}");
        assert_eq!(p["skipped"][0]["kind"], "VitessCluster");
        // Its UID is unknown: no ownerReference is added in its name.
        assert_eq!(p["owner_refs"]["add"], json!([]), "{p}");
    }
}

#[test]
fn a_pending_pvc_whose_source_cannot_be_read_holds_its_namespace() {
    let cfg = "  retention: {maxCount: 1}\n";
    let pvc = |source: Value| {
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
               "metadata": {"name": "new-tablet", "namespace": "vitess"},
               "spec": {"dataSourceRef": source}, "status": {"phase": "Pending"}})
    };
    let mut items = three(snap("newest", "x-x", "2026-11-29T00:00:00Z"));
    // The control: a readable source holds only the one it names.
    items.push(pvc(
        json!({"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "old"}),
    ));
    let p = Dump::new(cfg, &items).plan();
    assert_eq!(
        names(&p, "delete"),
        [pair("mid", "beyond-max-count")],
        "{p}"
    );
    for source in [
        json!({"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot"}),
        json!({"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": 7}),
        json!({"kind": ["VolumeSnapshot"], "name": "mid"}),
        json!("mid"),
    ] {
        let mut items = three(snap("newest", "x-x", "2026-11-29T00:00:00Z"));
        items.push(pvc(source.clone()));
        let p = Dump::new(cfg, &items).plan();
        assert_eq!(names(&p, "delete"), [], "{source}: {p}");
        assert!(
            names(&p, "keep").contains(&pair("mid", "maybe-in-use-source")),
            "{p}"
        );
        assert_eq!(skipped(&p), [pair("new-tablet", "unreadable")], "{p}");
    }
    // A phase that is not a string may be Pending.
    let mut items = three(snap("newest", "x-x", "2026-11-29T00:00:00Z"));
    let mut odd = pvc(json!({"kind": "VolumeSnapshot", "name": "old"}));
    odd["status"]["phase"] = json!(1);
    items.push(odd);
    let p = Dump::new(cfg, &items).plan();
    assert_eq!(names(&p, "delete"), [], "{p}");
    // A Bound PVC holds nothing, whatever its source says.
    let mut items = three(snap("newest", "x-x", "2026-11-29T00:00:00Z"));
    let mut bound = pvc(json!("garbage"));
    bound["status"]["phase"] = json!("Bound");
    items.push(bound);
    let p = Dump::new(cfg, &items).plan();
    assert_eq!(names(&p, "delete").len(), 2, "{p}");
}

#[test]
fn an_unreadable_pvc_holds_only_its_own_namespace_unless_that_is_unknown() {
    let cfg = "  retention: {maxCount: 1}\n";
    let pvc = |ns: Value| {
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
               "metadata": {"name": "new-tablet", "namespace": ns},
               "spec": {"dataSourceRef": {"kind": "VolumeSnapshot"}}})
    };
    let with = |p: Value| {
        let mut items = three(snap("newest", "x-x", "2026-11-29T00:00:00Z"));
        items.push(p);
        Dump::new(cfg, &items).plan()
    };
    // Another namespace's broken PVC holds nothing here and is not this config's to list.
    let p = with(pvc(json!("elsewhere")));
    assert_eq!(names(&p, "delete").len(), 2, "{p}");
    assert_eq!(skipped(&p), [], "{p}");
    // One whose own namespace is unknown may name a snapshot anywhere.
    for ns in [json!(null), json!(""), json!(3)] {
        let p = with(pvc(ns.clone()));
        assert_eq!(names(&p, "delete"), [], "{ns}: {p}");
        assert_eq!(skipped(&p), [pair("new-tablet", "unreadable")], "{ns}: {p}");
    }
}

#[test]
fn a_vitess_cluster_seen_twice_is_not_used_whichever_copy_comes_first() {
    let cfg = "  deletionPolicy: {whenScaled: Delete, gracePeriod: 1h}\n";
    let mut broken = cluster(2);
    broken["spec"]["keyspaces"] = json!("garbage");
    for clusters in [
        vec![cluster(2), cluster(2)],
        vec![cluster(2), broken.clone()],
        vec![broken.clone(), cluster(2)],
    ] {
        let mut items = vec![
            snap("a", "x-x", "2026-11-20T00:00:00Z"),
            snap("b", "x-x", "2026-11-19T00:00:00Z"),
        ];
        items.extend(clusters);
        let p = Dump::new(cfg, &items).plan();
        assert_eq!(names(&p, "delete"), [], "{p}");
        assert!(!skipped(&p).is_empty(), "{p}");
    }
}
