use super::*;

fn cfg(yaml: &str) -> Config {
    Config::from_yaml(yaml).unwrap_or_else(|e| panic!("config should be valid:\n{e}"))
}

fn errors(yaml: &str) -> Vec<String> {
    Config::from_yaml(yaml)
        .expect_err("config should be invalid")
        .0
        .iter()
        .map(ToString::to_string)
        .collect()
}

const BASE: &str = "clusters:\n- name: example\n  namespace: vitess\n";

#[test]
fn an_empty_config_resolves_to_the_documented_defaults() {
    let c = cfg(BASE);
    let r = c.resolve("example", "commerce", "-80").unwrap();
    assert_eq!(r.snapshot.mode, Mode::Cold);
    assert_eq!(r.snapshot.target.tablet_type, TargetType::Replica);
    assert!(!r.snapshot.target.allow_single_replica);
    assert_eq!(r.snapshot.wait_for, WaitFor::Cut);
    assert_eq!(r.deletion_policy.when_deleted, Lifecycle::Retain);
    assert_eq!(r.deletion_policy.when_scaled, Lifecycle::Delete);
    assert_eq!(r.retention.max_count, defaults::MAX_COUNT);
    assert_eq!(r.retention.max_age, None);
    assert_eq!(r.restore.max_snapshot_age, GoDuration::secs(48 * 3600));
    assert_eq!(r.vtbackup, VtbackupStorage::InheritFirstPool);
    assert_eq!(c.clusters[0].vtctld, "auto");
}

#[test]
fn a_child_that_sets_one_field_inherits_the_others() {
    let c = cfg(&format!(
        "{BASE}  deletionPolicy: {{whenDeleted: Delete, whenScaled: Retain, gracePeriod: 1h}}\n  \
         keyspaces:\n    commerce:\n      shards:\n        \"-80\":\n          deletionPolicy: {{whenDeleted: Retain}}\n"
    ));
    let r = c.resolve("example", "commerce", "-80").unwrap();
    assert_eq!(r.deletion_policy.when_deleted, Lifecycle::Retain);
    assert_eq!(
        r.deletion_policy.when_scaled,
        Lifecycle::Retain,
        "inherited from the cluster"
    );
    assert_eq!(r.deletion_policy.grace_period, GoDuration::secs(3600));
    // A sibling shard and the keyspace level keep the cluster's choice.
    let r = c.resolve("example", "commerce", "80-").unwrap();
    assert_eq!(r.deletion_policy.when_deleted, Lifecycle::Delete);
}

#[test]
fn shard_over_keyspace_over_cluster() {
    let c = cfg(&format!(
        "{BASE}  retention: {{maxCount: 3, maxAge: 30d}}\n  \
         keyspaces:\n    commerce:\n      retention: {{maxCount: 5}}\n      \
         shards:\n        \"-80\": {{retention: {{maxCount: 9}}}}\n"
    ));
    assert_eq!(
        c.resolve("example", "commerce", "-80")
            .unwrap()
            .retention
            .max_count,
        9
    );
    assert_eq!(
        c.resolve("example", "commerce", "80-")
            .unwrap()
            .retention
            .max_count,
        5
    );
    assert_eq!(
        c.resolve("example", "customer", "-")
            .unwrap()
            .retention
            .max_count,
        3
    );
    let age = c
        .resolve("example", "commerce", "-80")
        .unwrap()
        .retention
        .max_age;
    assert_eq!(
        age,
        Some(GoDuration::secs(30 * 86400)),
        "maxAge inherited through two levels"
    );
}

#[test]
fn nested_target_fields_merge_one_by_one() {
    let c = cfg(&format!(
        "{BASE}  snapshot: {{target: {{tabletType: rdonly, maxLag: 10s}}}}\n  \
         keyspaces:\n    commerce:\n      snapshot: {{target: {{allowSingleReplica: true}}}}\n"
    ));
    let t = c
        .resolve("example", "commerce", "-")
        .unwrap()
        .snapshot
        .target;
    assert_eq!(t.tablet_type, TargetType::Rdonly);
    assert!(t.allow_single_replica);
    assert_eq!(t.max_lag, GoDuration::secs(10));
}

#[test]
fn labels_and_annotations_merge_key_by_key() {
    let c = cfg(&format!(
        "{BASE}  snapshot: {{labels: {{team: db, tier: gold}}}}\n  \
         keyspaces:\n    commerce:\n      snapshot: {{labels: {{tier: silver}}}}\n"
    ));
    let l = c
        .resolve("example", "commerce", "-")
        .unwrap()
        .snapshot
        .labels;
    assert_eq!(l.get("team").map(String::as_str), Some("db"));
    assert_eq!(l.get("tier").map(String::as_str), Some("silver"));
}

#[test]
fn absent_empty_and_null_blocks_are_the_same() {
    let parent =
        format!("{BASE}  deletionPolicy: {{whenDeleted: Delete}}\n  keyspaces:\n    commerce:\n");
    let variants = [
        format!("{parent}      shards: {{}}\n"),
        format!("{parent}      deletionPolicy: {{}}\n"),
        format!("{parent}      deletionPolicy: null\n"),
        format!("{parent}      deletionPolicy: {{whenDeleted: null}}\n"),
        format!("{parent}      shards:\n        \"-\": {{}}\n"),
        format!("{parent}      shards:\n        \"-\": {{deletionPolicy: {{}}}}\n"),
    ];
    let want = cfg(&variants[0])
        .resolve("example", "commerce", "-")
        .unwrap();
    assert_eq!(want.deletion_policy.when_deleted, Lifecycle::Delete);
    for v in &variants {
        assert_eq!(
            cfg(v).resolve("example", "commerce", "-").unwrap(),
            want,
            "{v}"
        );
    }
    // With nothing at any level: the defaults, not an empty value.
    let none = cfg(&format!("{BASE}  deletionPolicy: {{}}\n"))
        .resolve("example", "k", "-")
        .unwrap();
    assert_eq!(none.deletion_policy.when_deleted, Lifecycle::Retain);
    assert_eq!(none.deletion_policy.when_scaled, Lifecycle::Delete);
}

#[test]
fn vtbackup_choices_exclude_each_other_within_a_block() {
    let e = errors(&format!(
        "{BASE}  keyspaces:\n    commerce:\n      vtbackup:\n        useEmptyDirForInitialBackup: true\n        \
         dataVolumeClaimTemplate: {{accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Gi}}}}}}\n"
    ));
    assert_eq!(
        e,
        vec![
            "clusters[0].keyspaces.commerce.vtbackup: useEmptyDirForInitialBackup: true and dataVolumeClaimTemplate are mutually exclusive"
        ]
    );
}

#[test]
fn the_more_specific_vtbackup_choice_replaces_the_other() {
    let tmpl = "{storageClassName: cheap, accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}}";
    let c = cfg(&format!(
        "{BASE}  vtbackup: {{dataVolumeClaimTemplate: {tmpl}}}\n  keyspaces:\n    commerce:\n      \
         vtbackup: {{useEmptyDirForInitialBackup: true}}\n      shards:\n        \"-80\": {{vtbackup: {{dataVolumeClaimTemplate: {{storageClassName: fast, resources: {{requests: {{storage: 1Gi}}}}}}}}}}\n        \
         \"80-\": {{vtbackup: {{useEmptyDirForInitialBackup: false}}}}\n        \"c0-\": {{vtbackup: {{}}}}\n    customer: {{}}\n"
    ));
    assert!(
        matches!(c.resolve("example", "customer", "-").unwrap().vtbackup, VtbackupStorage::Template(ref t) if t["storageClassName"] == "cheap")
    );
    assert_eq!(
        c.resolve("example", "commerce", "-").unwrap().vtbackup,
        VtbackupStorage::EmptyDirForInitialBackup
    );
    assert!(
        matches!(c.resolve("example", "commerce", "-80").unwrap().vtbackup, VtbackupStorage::Template(ref t) if t["storageClassName"] == "fast")
    );
    // An explicit false is a choice: back to the historical behaviour, not the cluster template.
    assert_eq!(
        c.resolve("example", "commerce", "80-").unwrap().vtbackup,
        VtbackupStorage::InheritFirstPool
    );
    // An empty block makes no choice.
    assert_eq!(
        c.resolve("example", "commerce", "c0-").unwrap().vtbackup,
        VtbackupStorage::EmptyDirForInitialBackup
    );
}

#[test]
fn errors_name_the_path_of_the_bad_field() {
    let e = errors(&format!(
        "{BASE}  keyspaces:\n    commerce:\n      shards:\n        \"-80\":\n          retention: {{maxCount: 0}}\n"
    ));
    assert_eq!(
        e,
        vec!["clusters[0].keyspaces.commerce.shards.-80.retention.maxCount: must be ≥ 1"]
    );
    let e = errors(&format!(
        "{BASE}  keyspaces:\n    commerce:\n      shards:\n        \"-80\":\n          retention: {{maxCont: 3}}\n"
    ));
    assert_eq!(e.len(), 1);
    assert!(
        e[0].starts_with(
            "clusters[0].keyspaces.commerce.shards.-80.retention.maxCont: unknown field `maxCont`"
        ),
        "{e:?}"
    );
    assert!(e[0].contains("line 8"), "{e:?}");
    let e = errors(&format!("{BASE}  snapshot: {{mode: hot}}\n"));
    assert!(
        e[0].starts_with("clusters[0].snapshot.mode: unknown variant `hot`"),
        "{e:?}"
    );
    let e = errors(&format!("{BASE}  snapshot: {{cutTimeout: soon}}\n"));
    assert!(
        e[0].starts_with("clusters[0].snapshot.cutTimeout: \"soon\" is not a duration"),
        "{e:?}"
    );
}

#[test]
fn validation_reports_every_error() {
    let e = errors(
        "clusters:\n- name: Example\n  namespace: vitess\n  vtctld: nowhere\n  \
         snapshot: {maxHold: 1m, labels: {vtsnap.io/phase: x}}\n  keyspaces:\n    commerce:\n      \
         shards:\n        \"80-40\": {}\n- name: Example\n  namespace: vitess\n",
    );
    let want = [
        "clusters[0].name: must be a lowercase DNS label (the VitessCluster name)",
        "clusters[0].vtctld: must be `auto` or host:port",
        "clusters[0].snapshot.labels.vtsnap.io/phase: is set by vtsnap itself and cannot be configured",
        "clusters[0].snapshot.cutTimeout: resolves to 5m which exceeds snapshot.maxHold 1m: a cold cut must end inside the hold",
        "clusters[0].keyspaces.commerce.shards.80-40: shard \"80-40\": start must be below end",
        "clusters[1].name: cluster vitess/Example is listed twice",
    ];
    for w in want {
        assert!(
            e.iter().any(|x| x == w),
            "missing {w:?} in:\n{}",
            e.join("\n")
        );
    }
}

#[test]
fn unknown_clusters_are_a_lookup_error() {
    assert_eq!(
        cfg(BASE).resolve("other", "k", "-").unwrap_err(),
        LookupError::UnknownCluster("other".into())
    );
}

/// One cluster name in two namespaces (round three, item 4): a shard's Job names the
/// namespace, and without it the lookup refuses, naming the flag that picks one.
#[test]
fn a_cluster_name_in_two_namespaces_is_picked_by_its_namespace() {
    let c = cfg(
        "clusters:\n- name: example\n  namespace: ns-a\n- name: example\n  namespace: ns-b\n\
                 - name: other\n  namespace: ns-a\n",
    );
    let named = |ns: Option<&str>| {
        c.shard(&ShardName::new("example", "commerce", "-").in_namespace(ns))
            .map(|s| s.shard.namespace)
    };
    assert_eq!(named(Some("ns-b")).unwrap(), "ns-b");
    assert_eq!(named(Some("ns-a")).unwrap(), "ns-a");
    let e = named(None).unwrap_err().to_string();
    assert_eq!(
        e,
        "cluster \"example\" is in more than one namespace of the config (ns-a, ns-b): name one with --cluster-namespace"
    );
    let e = named(Some("ns-c")).unwrap_err().to_string();
    assert_eq!(
        e,
        "cluster \"example\" is not in the config in namespace \"ns-c\" (it is in ns-a, ns-b)"
    );
    // A name in one namespace needs no namespace, and a wrong one given is refused.
    assert_eq!(c.cluster_named("other", None).unwrap().namespace, "ns-a");
    assert_eq!(
        c.cluster_named("other", Some("ns-b")).unwrap_err(),
        LookupError::NotInNamespace {
            name: "other".into(),
            namespace: "ns-b".into(),
            configured: vec!["ns-a".into()],
        }
    );
    assert_eq!(
        c.cluster_named("nope", Some("ns-a")).unwrap_err(),
        LookupError::UnknownCluster("nope".into())
    );
}

/// The worked example of docs/config.md, row by row.
#[test]
fn the_documented_worked_example_resolves_as_documented() {
    let c = cfg(
        "clusters:\n- name: example\n  namespace: vitess\n  deletionPolicy: {whenDeleted: Delete, gracePeriod: 24h}\n  \
                 retention: {maxCount: 7}\n  keyspaces:\n    commerce:\n      deletionPolicy: {whenScaled: Retain}\n      \
                 shards:\n        \"-80\":\n          deletionPolicy: {whenDeleted: Retain}\n          retention: {maxAge: 14d}\n",
    );
    let row = |ks: &str, sh: &str| {
        let r = c.resolve("example", ks, sh).unwrap();
        (
            r.deletion_policy.when_deleted,
            r.deletion_policy.when_scaled,
            r.deletion_policy.grace_period,
            r.retention.max_count,
            r.retention.max_age,
        )
    };
    let day = GoDuration::secs(86400);
    assert_eq!(
        row("commerce", "-80"),
        (
            Lifecycle::Retain,
            Lifecycle::Retain,
            day,
            7,
            Some(GoDuration::secs(14 * 86400))
        )
    );
    assert_eq!(
        row("commerce", "80-"),
        (Lifecycle::Delete, Lifecycle::Retain, day, 7, None)
    );
    assert_eq!(
        row("customer", "-"),
        (Lifecycle::Delete, Lifecycle::Delete, day, 7, None)
    );
}

/// The path part of each error line.
fn paths(e: &[String]) -> Vec<&str> {
    e.iter()
        .map(|l| l.split_once(": ").map_or(l.as_str(), |(p, _)| p))
        .collect()
}

#[test]
fn every_parse_error_is_reported_with_its_path() {
    let e = errors(&format!(
        "{BASE}  keyspaces:\n    commerce:\n      shards:\n        \"-40\": {{snapshot: {{mode: onlne}}}}\n        \
         40-80: {{retention: {{maxCount: 0}}}}\n        80-:\n          retention: {{maxCont: 3}}\n"
    ));
    assert_eq!(
        e,
        [
            "clusters[0].keyspaces.commerce.shards.-40.snapshot.mode: unknown variant `onlne`, expected `cold` or `online` at line 7 column 34",
            "clusters[0].keyspaces.commerce.shards.80-.retention.maxCont: unknown field `maxCont`, expected one of `maxCount`, `maxAge`, `failedMaxAge` at line 10 column 23",
            "clusters[0].keyspaces.commerce.shards.40-80.retention.maxCount: must be ≥ 1",
        ]
    );
}

#[test]
fn a_bad_duration_does_not_hide_other_errors() {
    let e = errors(
        "clusters:\n- name: a\n  namespace: vitess\n  snapshot: {cutTimeout: soon, maxHold: 1m}\n  \
         keyspaces:\n    commerce:\n      retention: {maxAge: 3x}\n      shards:\n        80-40: {}\n\
         - name: b\n  namespace: vitess\n  snapshot: {maxHold: 1m}\n",
    );
    assert_eq!(
        e,
        [
            "clusters[0].snapshot.cutTimeout: \"soon\" is not a duration like 90s, 10m, 1h30m or 2d at line 4 column 13",
            "clusters[0].keyspaces.commerce.retention.maxAge: \"3x\" is not a duration like 90s, 10m, 1h30m or 2d at line 7 column 18",
            "clusters[0].keyspaces.commerce.shards.80-40: shard \"80-40\": start must be below end",
            // The default cut timeout against a 1m hold: judged where cutTimeout is unset, not
            // in cluster a, whose cutTimeout could not be read.
            "clusters[1].snapshot.cutTimeout: resolves to 5m which exceeds snapshot.maxHold 1m: a cold cut must end inside the hold",
        ]
    );
}

#[test]
fn several_bad_values_in_one_block_are_each_reported() {
    let e = errors(&format!(
        "{BASE}  snapshot: {{mode: hot, fsfreeze: maybe, target: {{tabletType: x, maxLag: y}}, labels: {{vtsnap.io/x: a}}}}\n  \
         bogus: 1\n  retention: {{maxCount: 0}}\n"
    ));
    assert_eq!(
        paths(&e),
        [
            "clusters[0].snapshot.mode",
            "clusters[0].snapshot.fsfreeze",
            // A duration error points at its mapping, which comes first.
            "clusters[0].snapshot.target.maxLag",
            "clusters[0].snapshot.target.tabletType",
            "clusters[0].bogus",
            "clusters[0].snapshot.labels.vtsnap.io/x",
            "clusters[0].retention.maxCount",
        ],
        "{e:#?}"
    );
    assert!(e[4].contains("unknown field `bogus`"), "{e:#?}");
}

#[test]
fn a_cluster_that_cannot_be_read_leaves_the_others_checked() {
    let e = errors(
        "clusters:\n- namespace: [a]\n  retention: {maxCount: 0}\n- foo\n- name: b\n  namespace: vitess\n  \
         vtctld: nowhere\n",
    );
    assert_eq!(
        e,
        [
            "clusters[0]: missing field `name` at line 2 column 3",
            "clusters[0].namespace: invalid type: sequence, expected a string at line 2 column 14",
            "clusters[1]: invalid type: string \"foo\", expected struct ClusterConfig at line 4 column 3",
            "clusters[0].retention.maxCount: must be ≥ 1",
            "clusters[2].vtctld: must be `auto` or host:port",
        ]
    );
}

#[test]
fn text_that_is_not_yaml_is_one_error() {
    let e = errors("clusters:\n- name: a\n  namespace: x\n  snapshot: [\n");
    assert_eq!(e.len(), 1, "{e:#?}");
}

/// The piece-by-piece read must see a valid file exactly as the strict read does.
#[test]
fn the_piecewise_read_agrees_with_the_strict_one() {
    let texts = [
        BASE.to_owned(),
        format!(
            "{BASE}  vtctld: vtctld:15999\n  snapshot: {{mode: online, labels: {{tier: 1, on: yes}}, target: {{maxLag: 10s}}}}\n  \
             deletionPolicy: null\n  keyspaces:\n    commerce:\n      restore: {{pools: [replica, rdonly]}}\n      shards:\n        \
             -80: {{retention: {{maxCount: 3}}}}\n        80-: {{}}\n        c0-:\n    customer:\n      \
             vtbackup: {{dataVolumeClaimTemplate: {{resources: {{requests: {{storage: 10Gi}}}}}}}}\n"
        ),
    ];
    for t in texts {
        let strict = cfg(&t);
        let p = partial::partial(&t, 0).expect("within the budget");
        assert!(p.errors.is_empty(), "{t}\n{:?}", p.errors);
        assert_eq!(p.config, strict, "{t}");
    }
}

/// Everything here parses, and the Kubernetes API or Vitess would refuse it only once a
/// tablet is fenced: validation must refuse it first, each at its path.
#[test]
fn what_the_api_would_reject_is_refused_up_front() {
    let long = "v".repeat(64);
    let e = errors(&format!(
        "{BASE}  snapshot:\n    volumeSnapshotClassName: ../../etc\n    \
         labels: {{\"a b\": x, \"\": x, VTSNAP.IO/y: x, long: {long}, spaced: \"a b\", empty: \"\"}}\n    \
         annotations: {{\"\": x, ok/fine: \"any text at all\"}}\n  \
         restore: {{pools: [primary, bogus, externalreplica, replica, rdonly]}}\n  \
         keyspaces:\n    commerce:\n      shards:\n        \"-8\": {{}}\n        \"8-\": {{}}\n        \"-80\": {{}}\n"
    ));
    let want = [
        "clusters[0].snapshot.volumeSnapshotClassName: \"../../etc\" is not a VolumeSnapshotClass name: must be a lowercase DNS subdomain: lowercase letters, digits, '-' and '.', each part starting and ending with a letter or digit",
        "clusters[0].snapshot.labels.\"\": key \"\" is not a valid labels key: must not be empty",
        "clusters[0].snapshot.labels.VTSNAP.IO/y: key \"VTSNAP.IO/y\" is not a valid labels key: prefix \"VTSNAP.IO\" (before '/'): must be a lowercase DNS subdomain: lowercase letters, digits, '-' and '.', each part starting and ending with a letter or digit",
        "clusters[0].snapshot.labels.a b: key \"a b\" is not a valid labels key: must consist of letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
        "clusters[0].snapshot.labels.long: value \"vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv\" is not a valid label value: must be at most 63 characters (is 64)",
        "clusters[0].snapshot.labels.spaced: value \"a b\" is not a valid label value: must consist of letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
        "clusters[0].snapshot.annotations.\"\": key \"\" is not a valid annotations key: must not be empty",
        "clusters[0].restore.pools[0]: \"primary\" is a tablet type, not a pool type (pools are `replica` or `rdonly`)",
        "clusters[0].restore.pools[1]: \"bogus\" is not a tablet pool type (pools are `replica` or `rdonly`)",
        "clusters[0].restore.pools[2]: \"externalreplica\" is a pool of externally managed MySQL: it has no data volume to restore (pools are `replica` or `rdonly`)",
        "clusters[0].keyspaces.commerce.shards.-8: shard \"-8\": bound \"8\" has an odd number of hex digits (each byte is two)",
        "clusters[0].keyspaces.commerce.shards.8-: shard \"8-\": bound \"8\" has an odd number of hex digits (each byte is two)",
    ];
    assert_eq!(e, want, "{e:#?}");
}

#[test]
fn fsfreeze_with_a_cold_mode_is_reported_where_the_combination_is_made() {
    // At the cluster: fsfreeze with the default mode (cold).
    let e = errors(&format!("{BASE}  snapshot: {{fsfreeze: true}}\n"));
    assert_eq!(
        e,
        [
            "clusters[0].snapshot.fsfreeze: is for online snapshots only, and this level resolves to mode cold (set mode: online, or leave fsfreeze out)"
        ]
    );
    // At a shard that turns an online, fsfreezing keyspace cold; the levels that inherit
    // the combination do not repeat it.
    let e = errors(&format!(
        "{BASE}  snapshot: {{mode: online, fsfreeze: true}}\n  keyspaces:\n    commerce:\n      \
         shards:\n        \"-80\": {{snapshot: {{mode: cold}}}}\n        \"80-\": {{}}\n    \
         customer:\n      snapshot: {{fsfreeze: true, mode: cold}}\n      shards:\n        \"-\": {{}}\n"
    ));
    assert_eq!(
        e,
        [
            "clusters[0].keyspaces.commerce.shards.-80.snapshot.mode: cold, with fsfreeze: true inherited: fsfreeze is for online snapshots only (set fsfreeze: false here)",
            "clusters[0].keyspaces.customer.snapshot.fsfreeze: is for online snapshots only, and this level resolves to mode cold (set mode: online, or leave fsfreeze out)",
        ]
    );
    // Online with fsfreeze, or cold without it, is fine; so is a cold shard that turns it off.
    cfg(&format!(
        "{BASE}  snapshot: {{mode: online, fsfreeze: true}}\n  keyspaces:\n    commerce:\n      \
         shards:\n        \"-80\": {{snapshot: {{mode: cold, fsfreeze: false}}}}\n"
    ));
    cfg(&format!(
        "{BASE}  snapshot: {{mode: cold, fsfreeze: false}}\n"
    ));
}

#[test]
fn configured_annotations_must_leave_room_for_vtsnaps_own() {
    let limit = crate::k8s_names::ANNOTATIONS_TOTAL_MAX - validate::RESERVED_ANNOTATION_BYTES;
    // Two levels, each under the limit, that merge to more.
    let half = "x".repeat(limit / 2);
    let e = errors(&format!(
        "{BASE}  snapshot: {{annotations: {{a: {half}}}}}\n  keyspaces:\n    commerce:\n      \
         snapshot: {{annotations: {{bb: {half}}}}}\n"
    ));
    assert_eq!(e.len(), 1, "{e:#?}");
    assert!(
        e[0].starts_with(&format!(
            "clusters[0].keyspaces.commerce.snapshot.annotations: resolve to {} bytes, more than {limit}",
            limit + 3
        )),
        "{e:#?}"
    );
    // Exactly at the limit is fine.
    let fits = "x".repeat(limit - 1);
    cfg(&format!(
        "{BASE}  snapshot: {{annotations: {{a: {fits}}}}}\n"
    ));
}

#[test]
fn max_count_out_of_range_says_which_way() {
    let e = errors(&format!("{BASE}  retention: {{maxCount: 4294967296}}\n"));
    assert_eq!(
        e,
        ["clusters[0].retention.maxCount: 4294967296 is too large (at most 4294967295)"]
    );
    let e = errors(&format!("{BASE}  retention: {{maxCount: -1}}\n"));
    assert_eq!(e, ["clusters[0].retention.maxCount: must be ≥ 1"]);
    let r = cfg(&format!("{BASE}  retention: {{maxCount: 4294967295}}\n"))
        .resolve("example", "k", "-")
        .unwrap();
    assert_eq!(r.retention.max_count, u32::MAX);
    let r = cfg(&format!("{BASE}  retention: {{maxCount: 1}}\n"))
        .resolve("example", "k", "-")
        .unwrap();
    assert_eq!(r.retention.max_count, 1);
}

#[test]
fn an_empty_file_is_not_a_config() {
    for text in ["", "\n", "# only a comment\n", "clusters: []\n"] {
        assert_eq!(
            errors(text),
            ["clusters: lists no cluster (is the file empty?)"],
            "{text:?}"
        );
    }
}

fn load_error(path: &std::path::Path) -> String {
    Config::load(path)
        .expect_err("the file must be refused")
        .to_string()
}

#[test]
fn only_regular_files_are_read() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    // Opening a FIFO with no writer would wait forever: refused before opening.
    let started = std::time::Instant::now();
    assert_eq!(
        load_error(&fifo),
        format!("{} is not a regular file (a FIFO)", fifo.display())
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert_eq!(
        load_error(d.path()),
        format!("{} is not a regular file (a directory)", d.path().display())
    );
    assert_eq!(
        load_error(std::path::Path::new("/dev/zero")),
        "/dev/zero is not a regular file (a character device)"
    );
    // A symlink to a regular file (how a ConfigMap is mounted) is read.
    let real = d.path().join("real.yaml");
    std::fs::write(&real, BASE).unwrap();
    let link = d.path().join("config.yaml");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    assert_eq!(Config::load(&link).unwrap().clusters[0].name, "example");
}

#[test]
fn a_file_over_the_size_cap_is_refused_without_reading_it_all() {
    let d = tempfile::tempdir().unwrap();
    let big = d.path().join("big.yaml");
    // Valid YAML all the way: only the cap refuses it.
    let mut text = BASE.to_owned();
    text.push_str("  snapshot:\n    annotations:\n");
    let mut i = 0;
    while text.len() as u64 <= MAX_BYTES {
        text.push_str(&format!("      k{i}: v\n"));
        i += 1;
    }
    std::fs::write(&big, &text).unwrap();
    assert_eq!(
        load_error(&big),
        format!(
            "{} is larger than 1048576 bytes, the most a config file may have",
            big.display()
        )
    );
    // A sparse 8 GiB file: refused as quickly.
    let sparse = d.path().join("sparse.yaml");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(8 << 30)
        .unwrap();
    let started = std::time::Instant::now();
    assert!(load_error(&sparse).contains("is larger than"));
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    // Just under the cap is read.
    let fits = d.path().join("fits.yaml");
    let mut text = format!("{BASE}# ");
    text.push_str(&"x".repeat(usize::try_from(MAX_BYTES).unwrap() - text.len() - 1));
    text.push('\n');
    std::fs::write(&fits, &text).unwrap();
    assert!(Config::load(&fits).is_ok());
}

#[test]
fn deep_nesting_is_refused_quickly() {
    for deep in [
        format!("{BASE}  snapshot: {{labels: {}}}}}\n", "[".repeat(100_000)),
        format!("clusters:\n{}x\n", "- ".repeat(100_000)),
        format!(
            "{BASE}  vtbackup: {{dataVolumeClaimTemplate: {}}}}}\n",
            "{a: ".repeat(50_000)
        ),
    ] {
        let started = std::time::Instant::now();
        let e = errors(&deep);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].ends_with("nested deeper than 100 levels, the most a config may have"),
            "{e:?}"
        );
    }
    // A PVC template nested as deep as a real one is fine.
    cfg(&format!(
        "{BASE}  keyspaces:\n    commerce:\n      shards:\n        \"-80\":\n          vtbackup:\n            \
         dataVolumeClaimTemplate:\n              resources:\n                requests:\n                  storage: 10Gi\n"
    ));
}

/// Every documented default (docs/config.md), exactly: a changed default is a changed
/// product, never a refactoring.
#[test]
fn every_default_is_the_documented_value() {
    let r = cfg(BASE).resolve("example", "commerce", "-80").unwrap();
    let s = &r.snapshot;
    assert_eq!(s.volume_snapshot_class_name, None);
    assert_eq!(s.cut_timeout, GoDuration::secs(300), "cutTimeout 5m");
    assert_eq!(s.ready_timeout, GoDuration::secs(21_600), "readyTimeout 6h");
    assert_eq!(s.max_hold, GoDuration::secs(600), "maxHold 10m");
    assert_eq!(s.target.max_lag, GoDuration::secs(30), "maxLag 30s");
    assert!(!s.fsfreeze);
    assert!(s.labels.is_empty() && s.annotations.is_empty(), "{s:?}");
    assert_eq!(r.retention.max_count, 7);
    assert_eq!(
        r.retention.failed_max_age,
        GoDuration::secs(86_400),
        "failedMaxAge 24h"
    );
    assert_eq!(
        r.deletion_policy.grace_period,
        GoDuration::secs(259_200),
        "gracePeriod 72h"
    );
    assert!(!r.restore.enabled);
    assert!(r.restore.pools.is_empty());
    assert_eq!(
        r.restore.max_snapshot_age,
        GoDuration::secs(172_800),
        "maxSnapshotAge 48h"
    );
}

/// The admission webhook decides from this: each restore field inherits on its own.
#[test]
fn restore_fields_inherit_one_by_one() {
    let c = cfg(&format!(
        "{BASE}  restore: {{enabled: true, pools: [replica], maxSnapshotAge: 24h}}\n  keyspaces:\n    commerce:\n      \
         restore: {{pools: [rdonly]}}\n      shards:\n        \"-80\": {{restore: {{enabled: false}}}}\n        \
         \"80-\": {{restore: {{maxSnapshotAge: 12h}}}}\n"
    ));
    let restore = |ks: &str, sh: &str| c.resolve("example", ks, sh).unwrap().restore;
    let day = GoDuration::secs(86_400);
    let r = restore("commerce", "-80");
    assert_eq!(
        (r.enabled, r.pools, r.max_snapshot_age),
        (false, vec!["rdonly".to_owned()], day)
    );
    let r = restore("commerce", "80-");
    assert_eq!(
        (r.enabled, r.pools, r.max_snapshot_age),
        (true, vec!["rdonly".to_owned()], GoDuration::secs(43_200))
    );
    let r = restore("customer", "-");
    assert_eq!(
        (r.enabled, r.pools, r.max_snapshot_age),
        (true, vec!["replica".to_owned()], day)
    );
}

#[test]
fn every_duration_that_bounds_something_must_be_greater_than_zero() {
    let e = errors(&format!(
        "{BASE}  snapshot: {{cutTimeout: 0s, readyTimeout: 0s, maxHold: 0s, target: {{maxLag: 0s}}}}\n  \
         retention: {{maxAge: 0s, failedMaxAge: 0s}}\n  restore: {{maxSnapshotAge: 0s, binlogRetention: 0s, pendingTimeout: 0s}}\n"
    ));
    for field in [
        "snapshot.cutTimeout",
        "snapshot.readyTimeout",
        "snapshot.maxHold",
        "snapshot.target.maxLag",
        "retention.maxAge",
        "retention.failedMaxAge",
        "restore.maxSnapshotAge",
        "restore.binlogRetention",
        "restore.pendingTimeout",
    ] {
        let want = format!("clusters[0].{field}: must be greater than 0");
        assert!(e.contains(&want), "missing {want:?} in {e:#?}");
    }
    cfg(&format!(
        "{BASE}  snapshot: {{cutTimeout: 1s, readyTimeout: 1s, maxHold: 1s, target: {{maxLag: 1ms}}}}\n  \
         retention: {{maxAge: 1s, failedMaxAge: 1s}}\n  restore: {{maxSnapshotAge: 1s, binlogRetention: 2s, pendingTimeout: 1s}}\n"
    ));
}

#[test]
fn node_local_restores_default_off_on_the_hostname_label_and_inherit_one_by_one() {
    let c = cfg(&format!(
        "{BASE}  restore: {{nodeLocal: true, pendingTimeout: 5m}}\n  keyspaces:\n    commerce:\n      \
         restore: {{nodeLabel: topology.topolvm.io/node}}\n      shards:\n        \"-80\": {{restore: {{nodeLocal: false}}}}\n"
    ));
    let restore = |ks: &str, sh: &str| c.resolve("example", ks, sh).unwrap().restore;
    let r = restore("customer", "-");
    assert_eq!(
        (r.node_local, r.node_label.as_str(), r.pending_timeout),
        (true, "kubernetes.io/hostname", GoDuration::secs(300))
    );
    let r = restore("commerce", "80-");
    assert_eq!(
        (r.node_local, r.node_label.as_str()),
        (true, "topology.topolvm.io/node")
    );
    let r = restore("commerce", "-80");
    assert_eq!(
        (r.node_local, r.node_label.as_str(), r.pending_timeout),
        (false, "topology.topolvm.io/node", GoDuration::secs(300))
    );
    let d = cfg(BASE).resolve("example", "k", "-").unwrap().restore;
    assert_eq!(
        (
            d.node_local,
            d.node_label.as_str(),
            d.pending_timeout,
            d.binlog_retention
        ),
        (
            false,
            "kubernetes.io/hostname",
            GoDuration::secs(900),
            GoDuration::secs(259_200)
        )
    );
    assert_eq!(
        errors(&format!(
            "{BASE}  restore: {{nodeLabel: \"not a label\"}}\n"
        )),
        [
            "clusters[0].restore.nodeLabel: \"not a label\" is not a label key: must consist of letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
        ]
    );
}

#[test]
fn pools_opt_in_when_enabled_and_listed_or_when_no_pool_is_listed() {
    let r = |y: &str| {
        cfg(&format!("{BASE}{y}"))
            .resolve("example", "k", "-")
            .unwrap()
            .restore
    };
    assert!(!r("").opts_in("replica"), "off by default");
    let all = r("  restore: {enabled: true}\n");
    assert!(all.opts_in("replica") && all.opts_in("rdonly"));
    let some = r("  restore: {enabled: true, pools: [rdonly]}\n");
    assert!(some.opts_in("rdonly") && !some.opts_in("replica"));
    let off = r("  restore: {enabled: false, pools: [rdonly]}\n");
    assert!(!off.opts_in("rdonly"));
}

#[test]
fn snapshots_must_be_younger_than_the_binlogs_are_kept_and_the_level_that_breaks_it_is_named() {
    // The default (48h of 72h) holds.
    cfg(BASE);
    cfg(&format!("{BASE}  restore: {{maxSnapshotAge: 71h}}\n"));
    assert_eq!(
        errors(&format!("{BASE}  restore: {{maxSnapshotAge: 72h}}\n")),
        [
            "clusters[0].restore.maxSnapshotAge: maxSnapshotAge 72h must be below binlogRetention 72h: a replica restored from an older snapshot cannot catch up (its position is no longer in the primary's binlogs)"
        ]
    );
    // A shorter retention on a keyspace breaks the inherited age there, and only there.
    let e = errors(&format!(
        "{BASE}  keyspaces:\n    commerce:\n      restore: {{binlogRetention: 24h}}\n      shards:\n        \"-80\": {{retention: {{maxCount: 2}}}}\n"
    ));
    assert_eq!(
        e,
        [
            "clusters[0].keyspaces.commerce.restore.binlogRetention: maxSnapshotAge 48h must be below binlogRetention 24h: a replica restored from an older snapshot cannot catch up (its position is no longer in the primary's binlogs)"
        ]
    );
    cfg(&format!(
        "{BASE}  restore: {{binlogRetention: 168h, maxSnapshotAge: 120h}}\n"
    ));
}

#[test]
fn vtctld_is_auto_or_a_host_and_a_port() {
    for ok in [
        "auto",
        "vtctld:15999",
        "10.0.0.1:1",
        "example-vtctld.vitess.svc:65535",
    ] {
        assert_eq!(
            cfg(&format!("{BASE}  vtctld: \"{ok}\"\n")).clusters[0].vtctld,
            ok
        );
    }
    for bad in [
        "nowhere",
        ":15999",
        "vtctld:0",
        "vtctld:65536",
        "vtctld:",
        "vtctld:x",
    ] {
        assert_eq!(
            errors(&format!("{BASE}  vtctld: \"{bad}\"\n")),
            ["clusters[0].vtctld: must be `auto` or host:port"],
            "{bad}"
        );
    }
}

#[test]
fn boundaries_of_the_cross_field_rules() {
    // A cut timeout equal to the hold still ends inside it.
    cfg(&format!(
        "{BASE}  snapshot: {{cutTimeout: 10m, maxHold: 10m}}\n"
    ));
    // The owner label is vtsnap's too.
    assert_eq!(
        errors(&format!(
            "{BASE}  snapshot: {{labels: {{app.kubernetes.io/managed-by: me}}}}\n"
        )),
        [
            "clusters[0].snapshot.labels.app.kubernetes.io/managed-by: is set by vtsnap itself and cannot be configured"
        ]
    );
    // A vtbackup choice of `false` with a template is no conflict; a template that is
    // not a mapping is.
    cfg(&format!(
        "{BASE}  vtbackup: {{useEmptyDirForInitialBackup: false, dataVolumeClaimTemplate: {{storageClassName: x, resources: {{requests: {{storage: 1Gi}}}}}}}}\n"
    ));
    assert_eq!(
        errors(&format!(
            "{BASE}  vtbackup: {{dataVolumeClaimTemplate: 5}}\n"
        )),
        [
            "clusters[0].vtbackup.dataVolumeClaimTemplate: is a number, not a PersistentVolumeClaim spec (a mapping)"
        ]
    );
    // A mode that is only ever online or cold never trips the fsfreeze rule.
    cfg(&format!(
        "{BASE}  snapshot: {{mode: online}}\n  keyspaces:\n    commerce:\n      shards:\n        \"-80\": {{snapshot: {{mode: cold}}}}\n"
    ));
}

#[test]
fn the_configured_annotations_get_192_kib() {
    // The key `a` is one byte.
    let at = |n: usize| {
        format!(
            "{BASE}  snapshot: {{annotations: {{a: {}}}}}\n",
            "x".repeat(n - 1)
        )
    };
    cfg(&at(196_608));
    let e = errors(&at(196_609));
    assert_eq!(
        e,
        [
            "clusters[0].snapshot.annotations: resolve to 196609 bytes, more than 196608: the API allows 262144 for all of an object's annotations, and vtsnap's own need the rest"
        ]
    );
}

#[test]
fn a_bad_fsfreeze_value_is_reported_once_not_judged_with_the_mode() {
    let e = errors(&format!(
        "{BASE}  snapshot: {{mode: online, fsfreeze: true}}\n  keyspaces:\n    commerce:\n      \
         snapshot: {{mode: cold, fsfreeze: maybe}}\n"
    ));
    assert_eq!(
        paths(&e),
        ["clusters[0].keyspaces.commerce.snapshot.fsfreeze"],
        "{e:#?}"
    );
    assert!(e[0].contains("invalid type"), "{e:#?}");
}

#[test]
fn an_empty_class_name_says_how_to_get_the_default() {
    assert_eq!(
        errors(&format!(
            "{BASE}  snapshot: {{volumeSnapshotClassName: \"\"}}\n"
        )),
        [
            "clusters[0].snapshot.volumeSnapshotClassName: must not be empty (leave it out for the default class)"
        ]
    );
    let c = cfg(&format!(
        "{BASE}  snapshot: {{volumeSnapshotClassName: csi-hostpath.snapclass}}\n"
    ));
    let r = c.resolve("example", "k", "-").unwrap();
    assert_eq!(
        r.snapshot.volume_snapshot_class_name.as_deref(),
        Some("csi-hostpath.snapclass")
    );
}

/// Reading piece by piece parses the text once per piece: a large file with many pieces
/// and one error must not take minutes (it took over five for this one).
#[test]
fn a_large_file_with_an_error_is_reported_quickly() {
    let mut text = String::from("clusters:\n");
    let mut i = 0;
    while text.len() < 200_000 {
        text.push_str(&format!(
            "- name: c{i}\n  namespace: vitess\n  retention: {{maxCount: 3}}\n"
        ));
        i += 1;
    }
    text.push_str("- name: bad\n  namespace: vitess\n  bogus: 1\n");
    let started = std::time::Instant::now();
    let e = errors(&text);
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_secs(60), "{took:?}");
    assert_eq!(e.len(), 2, "{e:#?}");
    assert!(
        e[0].starts_with(&format!("clusters[{i}].bogus: unknown field `bogus`")),
        "{e:#?}"
    );
    assert!(
        e[1].contains("further errors were not searched for"),
        "{e:#?}"
    );
}

#[test]
fn schedules_merge_by_level_and_bad_ones_are_named_where_set() {
    let c = cfg(&format!(
        "{BASE}  snapshot: {{schedule: \"0 */4 * * *\", stagger: 1h}}\n  \
         keyspaces:\n    commerce:\n      shards:\n        \"-80\": {{snapshot: {{suspend: true}}}}\n        \
         \"80-\": {{snapshot: {{schedule: \"30 2 * * *\"}}}}\n"
    ));
    let r = c.resolve("example", "commerce", "-80").unwrap();
    assert_eq!(
        (r.snapshot.schedule.as_str(), r.snapshot.suspend),
        ("0 */4 * * *", true)
    );
    assert_eq!(r.snapshot.stagger, Some(GoDuration::secs(3600)));
    let r = c.resolve("example", "commerce", "80-").unwrap();
    assert_eq!(
        (r.snapshot.schedule.as_str(), r.snapshot.suspend),
        ("30 2 * * *", false)
    );
    // The default: every six hours, spread over the period.
    let r = cfg(BASE).resolve("example", "c", "-").unwrap();
    assert_eq!(
        (r.snapshot.schedule.as_str(), r.snapshot.stagger),
        (crate::schedule::DEFAULT_SCHEDULE, None)
    );
    // A line that is not cron, at the level that writes it.
    let e = errors(&format!(
        "{BASE}  keyspaces:\n    commerce:\n      snapshot: {{schedule: \"every 6h\"}}\n"
    ));
    assert!(
        e.iter().any(
            |m| m.contains("clusters[0].keyspaces.commerce.snapshot.schedule")
                && m.contains("not a cron line")
        ),
        "{e:?}"
    );
    // A stagger that would push a weekday run onto Saturday, where the stagger is set
    // (the schedule is the cluster's).
    let e = errors(&format!(
        "{BASE}  snapshot: {{schedule: \"0 23 * * 1-5\"}}\n  \
         keyspaces:\n    commerce:\n      shards:\n        \"-80\": {{snapshot: {{stagger: 2h}}}}\n"
    ));
    assert!(
        e.iter()
            .any(|m| m.contains("shards.-80.snapshot.stagger") && m.contains("past midnight")),
        "{e:?}"
    );
}

#[test]
fn drill_schedules_merge_by_level_and_bad_ones_are_named_where_set() {
    let c = cfg(&format!(
        "{BASE}  drill: {{schedule: \"0 2 * * *\", stagger: 4h}}\n  \
         keyspaces:\n    commerce:\n      drill: {{suspend: true}}\n      shards:\n        \
         \"80-\": {{drill: {{enabled: false}}}}\n"
    ));
    let r = c.resolve("example", "commerce", "-80").unwrap();
    assert_eq!(
        (r.drill.schedule.as_str(), r.drill.suspend, r.drill.enabled),
        ("0 2 * * *", true, true)
    );
    assert_eq!(r.drill.stagger, Some(GoDuration::secs(4 * 3600)));
    let r = c.resolve("example", "commerce", "80-").unwrap();
    assert_eq!((r.drill.enabled, r.drill.suspend), (false, true));
    // The default: daily, spread over the day, on; the snapshot block is not read.
    let r = cfg(&format!("{BASE}  snapshot: {{schedule: \"0 1 * * *\"}}\n"))
        .resolve("example", "c", "-")
        .unwrap();
    assert_eq!(
        (r.drill.schedule.as_str(), r.drill.stagger, r.drill.enabled),
        (crate::schedule::DEFAULT_DRILL_SCHEDULE, None, true)
    );
    let e = errors(&format!(
        "{BASE}  keyspaces:\n    commerce:\n      drill: {{schedule: \"daily\"}}\n"
    ));
    assert!(
        e.iter().any(
            |m| m.contains("clusters[0].keyspaces.commerce.drill.schedule")
                && m.contains("not a cron line")
        ),
        "{e:?}"
    );
    let e = errors(&format!(
        "{BASE}  drill: {{schedule: \"0 23 * * 1-5\"}}\n  \
         keyspaces:\n    commerce:\n      shards:\n        \"-80\": {{drill: {{stagger: 2h}}}}\n"
    ));
    assert!(
        e.iter()
            .any(|m| m.contains("shards.-80.drill.stagger") && m.contains("past midnight")),
        "{e:?}"
    );
    // Unknown fields of the block are refused, named.
    let e = errors(&format!("{BASE}  drill: {{every: 1d}}\n"));
    assert!(
        e.iter().any(|m| m.contains("clusters[0].drill.every")),
        "{e:?}"
    );
}

#[test]
fn the_pitr_block_merges_by_level_is_off_by_default_and_bad_values_are_named() {
    let c = cfg(&format!(
        "{BASE}  pitr: {{enabled: true, schedule: \"*/10 * * * *\", window: 72h}}\n  \
         keyspaces:\n    commerce:\n      pitr: {{allowPrimary: true}}\n      shards:\n        \
         \"80-\": {{pitr: {{enabled: false}}}}\n"
    ));
    let r = c.resolve("example", "commerce", "-80").unwrap();
    assert_eq!(
        (
            r.pitr.enabled,
            r.pitr.schedule.as_str(),
            r.pitr.allow_primary,
            r.pitr.window
        ),
        (
            true,
            "*/10 * * * *",
            true,
            Some(GoDuration::secs(72 * 3600))
        )
    );
    let r = c.resolve("example", "commerce", "80-").unwrap();
    assert_eq!((r.pitr.enabled, r.pitr.allow_primary), (false, true));
    let r = c.resolve("example", "customer", "-").unwrap();
    assert!(!r.pitr.allow_primary && r.pitr.enabled);
    // Off, every 15 minutes, no window, never on the primary.
    let r = cfg(BASE).resolve("example", "c", "-").unwrap();
    assert_eq!(
        (
            r.pitr.enabled,
            r.pitr.schedule.as_str(),
            r.pitr.window,
            r.pitr.allow_primary
        ),
        (false, crate::schedule::DEFAULT_PITR_SCHEDULE, None, false)
    );
    for (block, words) in [
        ("pitr: {schedule: \"often\"}", "clusters[0].pitr.schedule"),
        (
            "pitr: {window: 0s}",
            "clusters[0].pitr.window: must be greater than 0",
        ),
        ("pitr: {every: 1h}", "clusters[0].pitr.every"),
        (
            "pitr: {schedule: \"*/30 * * * *\", stagger: 2h}",
            "clusters[0].pitr.stagger",
        ),
    ] {
        let e = errors(&format!("{BASE}  {block}\n"));
        assert!(e.iter().any(|m| m.contains(words)), "{block}: {e:?}");
    }
}
