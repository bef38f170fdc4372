//! One CronJob name rule: the chart's (`vtsnap.shardCronjobName`, used when the schedule
//! reconciler is off) and the reconciler's (`schedule::names::cronjob_name`) name every
//! generated shard the same, snapshot and drill alike, and label it the same. The real helm
//! renders the chart (`make tools` builds it); the shards are generated: release names of
//! every length around the 40-character cut, cluster and keyspace names with upper case,
//! punctuation and non-ASCII letters, key ranges of every shape.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError, TestRunner};
use serde_json::{Value, json};
use vtsnap_core::shard::ShardRef;
use vtsnap_snapshot::schedule::names::{Kind, NameForm, cronjob_name};
use vtsnap_testkit::helm;

/// One generated shard entry of the chart's values.
#[derive(Debug, Clone)]
struct Entry {
    cluster: String,
    keyspace: String,
    shard: String,
}

fn name_chars() -> impl Strategy<Value = String> {
    // Letters the two lower-casings might treat apart, and what a name cannot hold.
    let odd = prop::sample::select(vec![
        'A', 'Z', 'Ä', 'İ', 'K', 'ß', 'É', '_', '.', '-', ' ', 'é', '9', 'q',
    ]);
    let plain = prop::sample::select(('a'..='z').chain('0'..='9').collect::<Vec<_>>());
    prop::collection::vec(prop_oneof![4 => plain, 1 => odd], 1..24)
        .prop_map(|c| c.into_iter().collect())
}

fn hex_bound() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select("0123456789abcdef".chars().collect::<Vec<_>>()),
        1..5,
    )
    .prop_map(|c| c.into_iter().collect())
}

fn key_range() -> impl Strategy<Value = String> {
    (prop::option::of(hex_bound()), prop::option::of(hex_bound())).prop_filter_map(
        "a key range",
        |(start, end)| {
            let text = format!("{}-{}", start.unwrap_or_default(), end.unwrap_or_default());
            text.parse::<vtsnap_core::naming::KeyRange>()
                .ok()
                .map(|_| text)
        },
    )
}

fn entries() -> impl Strategy<Value = (String, Vec<Entry>)> {
    let release = (0usize..3, 1usize..=47).prop_map(|(with, len)| {
        // Releases that say vtsnap keep their name, others get `-vtsnap`; both are cut at 40
        // (helm allows 53).
        let body = "r".repeat(len);
        match with {
            0 => format!("vtsnap{body}"),
            1 => format!("{body}vtsnap"),
            _ => body,
        }
    });
    let entry =
        (name_chars(), name_chars(), key_range()).prop_map(|(cluster, keyspace, shard)| Entry {
            cluster,
            keyspace,
            shard,
        });
    (release, prop::collection::vec(entry, 1..30))
}

/// The kinds whose per-shard CronJobs the chart renders itself (without the reconciler);
/// the binlog archive's are made by the reconciler only.
const CHART_KINDS: [Kind; 2] = [Kind::Snapshot, Kind::Drill];

fn render(release: &str, values: &Value) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("values.json");
    std::fs::write(&file, values.to_string()).unwrap();
    let out = helm::helm()
        .args(["template", release])
        .arg(helm::chart())
        .args(["-n", "vtsnap", "-f"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The rendered objects of `kind`, as JSON.
fn objects(manifest: &str, kind: &str) -> Vec<Value> {
    manifest
        .split("\n---")
        .filter_map(|doc| serde_yaml_ng::from_str::<Value>(doc).ok())
        .filter(|o| o["kind"] == kind)
        .collect()
}

fn check(release: &str, entries: &[Entry]) -> Result<(), TestCaseError> {
    let namespace = "vitess";
    // Each cluster once in the config; entries the program would name alike are dropped
    // (the chart refuses two shards of one name, tested in scripts/chart.sh).
    let clusters: BTreeSet<&str> = entries.iter().map(|e| e.cluster.as_str()).collect();
    let config = json!({"clusters": clusters.iter().map(|c| json!({"name": c, "namespace": namespace})).collect::<Vec<_>>()});
    let fullname = {
        let on = render(
            release,
            &json!({"config": config, "snapshot": {"reconcile": {"enabled": true}}}),
        );
        let cm = objects(&on, "ConfigMap")
            .into_iter()
            .find(|o| o["data"]["fullname"].is_string())
            .expect("the schedule template's ConfigMap");
        cm["data"]["fullname"].as_str().unwrap().to_owned()
    };
    let mut want: BTreeMap<String, (Kind, ShardRef)> = BTreeMap::new();
    let mut kept = Vec::new();
    for e in entries {
        let key = ShardRef {
            namespace: namespace.into(),
            cluster: e.cluster.clone(),
            keyspace: e.keyspace.clone(),
            shard: e.shard.parse().unwrap(),
        };
        let names = CHART_KINDS.map(|k| cronjob_name(&fullname, k, &key, NameForm::Short));
        if names.iter().any(|n| want.contains_key(n)) {
            continue;
        }
        for (k, n) in CHART_KINDS.into_iter().zip(names) {
            want.insert(n, (k, key.clone()));
        }
        kept.push(json!({"cluster": e.cluster, "keyspace": e.keyspace, "shard": e.shard}));
    }
    let off = render(
        release,
        &json!({
            "config": config,
            "snapshot": {"reconcile": {"enabled": false}, "shards": kept},
            "drill": {"enabled": true, "shards": kept},
        }),
    );
    let mut got: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for o in objects(&off, "CronJob") {
        let labels = o["metadata"]["labels"].clone();
        if labels.get(vtsnap_core::shard::LABEL_SHARD).is_none() {
            continue; // the GC's and other programs' CronJobs
        }
        got.insert(
            o["metadata"]["name"].as_str().unwrap().to_owned(),
            serde_json::from_value(labels).unwrap(),
        );
    }
    prop_assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "fullname {}",
        fullname
    );
    for (name, (_, key)) in &want {
        let labels = &got[name];
        for (k, v) in key.labels() {
            prop_assert_eq!(labels.get(k), Some(&v), "{} {}", name, k);
        }
    }
    Ok(())
}

#[test]
fn the_chart_and_the_reconciler_name_every_shard_alike() {
    let mut runner = TestRunner::new(RunnerConfig {
        // Each case renders the chart twice (under half a second): up to 29 shards each.
        cases: 32,
        failure_persistence: None,
        ..RunnerConfig::default()
    });
    runner
        .run(&entries(), |(release, entries)| check(&release, &entries))
        .unwrap();
}
