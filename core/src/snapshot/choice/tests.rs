//! Every rule of the choice, on snapshots shaped as the snapshot job writes them
//! ([`crate::snapshot::build`], then what the API server and the job add), and the
//! fixtures `tests_hostile` shares. The webhook's tests hold what it makes of a choice
//! (the patch, the codes, the Event).

use std::collections::BTreeMap;

use k8s_openapi::jiff::SignedDuration;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::config::{Config, resolve_in};
use crate::naming::{TabletAlias, tablet_pod_name, tablet_uid};
use crate::snapshot::{
    ANN_CUT_TIME, ANN_DRILL, ANN_GTID_EXECUTED, ANN_UNUSABLE, LABEL_PHASE, NewSnapshot, build,
};

const NOW: &str = "2026-12-01T12:00:00Z";

pub(super) fn now() -> Timestamp {
    NOW.parse().unwrap()
}

pub(super) fn hours_ago(h: f64) -> Timestamp {
    let secs = (h * 3600.0) as i64;
    now().checked_sub(SignedDuration::from_secs(secs)).unwrap()
}

/// Shard `range` of keyspace `commerce` of cluster `vitess/example`.
pub(super) fn shard_ref(range: &str) -> ShardRef {
    ShardRef {
        namespace: "vitess".into(),
        cluster: "example".into(),
        keyspace: "commerce".into(),
        shard: range.parse().unwrap(),
    }
}

/// Tablet `replica-<index>` of shard `range`, and its PVC (vitess-operator's names).
pub(super) fn tablet(range: &str, index: u32) -> (TabletAlias, String) {
    let shard = shard_ref(range);
    let alias = TabletAlias {
        cell: "zone1".into(),
        uid: tablet_uid("zone1", "commerce", &shard.shard, "replica", index),
    };
    let pvc = tablet_pod_name("example", &alias);
    (alias, pvc)
}

/// The restore policy of shard `-` with the cluster's `restore:` block `block`.
pub(super) fn policy(block: &str) -> ResolvedRestore {
    let yaml = format!("clusters:\n- name: example\n  namespace: vitess\n  restore: {block}\n");
    let cfg = Config::from_yaml(&yaml).unwrap_or_else(|e| panic!("{e}"));
    resolve_in(&cfg.clusters[0], "commerce", "-").restore
}

pub(super) fn enabled() -> ResolvedRestore {
    policy("{enabled: true}")
}

pub(super) fn node_local() -> ResolvedRestore {
    policy("{enabled: true, nodeLocal: true, nodeLabel: topology.topolvm.io/node}")
}

/// The series the shard runs (its tablets report 8.0.36).
pub(super) fn mysql80() -> Series {
    Series::parse("8.0.36").unwrap()
}

pub(super) const GI: u128 = 1 << 30;

/// A snapshot of shard `-` cut `age_h` hours ago, taken of its second replica's PVC.
pub(super) struct Snap {
    pub(super) name: String,
    /// The shard its labels name.
    pub(super) range: &'static str,
    pub(super) age_h: f64,
    pub(super) ready: bool,
    pub(super) phase: &'static str,
    pub(super) version: &'static str,
    pub(super) flavor: &'static str,
    pub(super) size: Option<&'static str>,
    pub(super) node: &'static str,
    pub(super) unusable: Option<&'static str>,
    pub(super) drill: Option<String>,
}

pub(super) fn snap(name: &str, age_h: f64) -> Snap {
    Snap {
        name: name.into(),
        range: "-",
        age_h,
        ready: true,
        phase: "ready",
        version: "8.0.36",
        flavor: "mysql",
        size: Some("64Gi"),
        node: "node-2",
        unusable: None,
        drill: None,
    }
}

impl Snap {
    pub(super) fn object(&self) -> Value {
        let shard = shard_ref(self.range);
        let (alias, pvc) = tablet(self.range, 2);
        let source_tablet = alias.to_string();
        let none = BTreeMap::new();
        let gtid = if self.flavor == "mariadb" {
            "MariaDB/0-1-100"
        } else {
            "MySQL56/3e11fa47-71ca-11e1-9e33-c80aa9429562:1-100"
        };
        let mut o = build(&NewSnapshot {
            shard: &shard,
            name: self.name.clone(),
            class: None,
            source_pvc: &pvc,
            source_tablet: &source_tablet,
            source_uid: alias.uid.get(),
            source_node: self.node,
            mode: "cold",
            gtid: (ANN_GTID_EXECUTED, gtid),
            mysql_version: self.version,
            mysql_flavor: self.flavor,
            extra_labels: &none,
            extra_annotations: &none,
            owner: None,
        });
        let cut = hours_ago(self.age_h).to_string();
        o["metadata"]["creationTimestamp"] = json!(cut);
        o["metadata"]["uid"] = json!(format!("uid-{}", self.name));
        o["metadata"]["labels"][LABEL_PHASE] = json!(self.phase);
        o["metadata"]["annotations"][ANN_CUT_TIME] = json!(cut);
        if let Some(u) = self.unusable {
            o["metadata"]["annotations"][ANN_UNUSABLE] = json!(u);
        }
        if let Some(d) = &self.drill {
            o["metadata"]["annotations"][ANN_DRILL] = json!(d);
        }
        o["status"] = json!({"boundVolumeSnapshotContentName": format!("c-{}", self.name),
            "creationTime": cut, "readyToUse": self.ready});
        if let Some(s) = self.size {
            o["status"]["restoreSize"] = json!(s);
        }
        o
    }
}

/// The shard's snapshot objects, read.
pub(super) fn read(objects: &[Value]) -> Vec<SnapshotRead> {
    objects.iter().map(VolumeSnapshot::read).collect()
}

/// The choice among `snaps` for a PVC of `requested` bytes of a shard on MySQL 8.0.
pub(super) fn choice(
    snaps: &[Snap],
    policy: &ResolvedRestore,
    requested: u128,
) -> Result<Choice, Vec<(String, Rejection)>> {
    let objects: Vec<Value> = snaps.iter().map(Snap::object).collect();
    choose(&read(&objects), mysql80(), policy, requested, now())
}

/// The name of the snapshot chosen, if one is.
pub(super) fn chosen(r: &Result<Choice, Vec<(String, Rejection)>>) -> Option<&str> {
    r.as_ref().ok().map(|c| c.name.as_str())
}

/// Why each was passed over, as the webhook's Event says it: `name: words`, `; `-joined.
pub(super) fn said(r: &Result<Choice, Vec<(String, Rejection)>>) -> String {
    let Err(rejected) = r else {
        panic!("{r:?} was chosen")
    };
    rejected
        .iter()
        .map(|(n, r)| {
            if n.is_empty() {
                r.words()
            } else {
                format!("{n}: {}", r.words())
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// What vtctld says of a shard whose tablets report `versions`, the first the primary's.
fn state(versions: &[&str]) -> ShardState {
    ShardState {
        key: shard_ref("-"),
        primary: Some("zone1-0000000101".into()),
        tablets: versions
            .iter()
            .enumerate()
            .map(|(i, v)| TabletVersion {
                alias: format!("zone1-{:010}", 101 + i),
                version: Some((*v).to_owned()),
            })
            .collect(),
        refreshed_at: hours_ago(0.01),
        error: None,
    }
}

#[test]
fn the_newest_usable_snapshot_is_chosen_with_its_cut_series_and_size() {
    let c = choice(
        &[snap("s-old", 30.0), snap("s-new", 2.0), snap("s-mid", 10.0)],
        &enabled(),
        100 * GI,
    )
    .unwrap();
    assert_eq!(
        c,
        Choice {
            name: "s-new".into(),
            cut: hours_ago(2.0),
            series: "mysql 8.0".into(),
            restore_bytes: 68_719_476_736,
            source_node: Some("node-2".into()),
        }
    );
}

/// Each rule, broken by a snapshot newer than a good one: what the rejection says.
fn rule_cases() -> Vec<(&'static str, Snap, &'static str)> {
    vec![
        (
            "other series",
            Snap {
                version: "8.4.3",
                ..snap("s-bad", 1.0)
            },
            "mysql 8.4, the shard runs mysql 8.0",
        ),
        (
            "other flavor",
            Snap {
                version: "10.11.18-MariaDB",
                flavor: "mariadb",
                ..snap("s-bad", 1.0)
            },
            "mariadb 10.11, the shard runs mysql 8.0",
        ),
        (
            "flavor contradicts version",
            Snap {
                flavor: "mariadb",
                ..snap("s-bad", 1.0)
            },
            "flavor mariadb with version \"8.0.36\", which is not a mariadb version",
        ),
        ("too old", snap("s-bad", 48.0), "too old (48h)"),
        (
            "too small",
            Snap {
                size: Some("101Gi"),
                ..snap("s-bad", 1.0)
            },
            "needs 108447924224 bytes, the PVC asks for 107374182400",
        ),
        (
            "no restoreSize",
            Snap {
                size: None,
                ..snap("s-bad", 1.0)
            },
            "no restoreSize",
        ),
        (
            "unreadable restoreSize",
            Snap {
                size: Some("lots"),
                ..snap("s-bad", 1.0)
            },
            "restoreSize unreadable",
        ),
        (
            "not ready",
            Snap {
                ready: false,
                phase: "cut",
                ..snap("s-bad", 1.0)
            },
            "not ready",
        ),
        (
            "failed",
            Snap {
                phase: "failed",
                ..snap("s-bad", 1.0)
            },
            "failed",
        ),
        (
            "marked unusable",
            Snap {
                unusable: Some("binlog purged"),
                ..snap("s-bad", 1.0)
            },
            "marked unusable: \"binlog purged\"",
        ),
    ]
}

/// One rule at a time: the snapshot that breaks it is passed over for an older good one,
/// and alone it is named with why.
#[test]
fn every_rule_passes_over_the_snapshot_that_breaks_it() {
    for (what, bad, _) in rule_cases() {
        let c = choice(&[bad, snap("s-good", 20.0)], &enabled(), 100 * GI);
        assert_eq!(chosen(&c), Some("s-good"), "{what}: {c:#?}");
    }
    for (what, bad, words) in rule_cases() {
        let c = choice(&[bad], &enabled(), 100 * GI);
        let said = said(&c);
        assert!(said.contains(&format!("s-bad: {words}")), "{what}: {said}");
    }
    // Another shard's snapshot is not this shard's.
    let other = Snap {
        range: "-80",
        ..snap("s-bad", 1.0)
    };
    assert!(!VolumeSnapshot::is_of_shard(
        &other.object(),
        &shard_ref("-")
    ));
    assert!(VolumeSnapshot::is_of_shard(
        &other.object(),
        &shard_ref("-80")
    ));
    assert!(VolumeSnapshot::is_of_shard(
        &snap("s", 1.0).object(),
        &shard_ref("-")
    ));
    let mut elsewhere = snap("s", 1.0).object();
    elsewhere["metadata"]["namespace"] = json!("other");
    assert!(!VolumeSnapshot::is_of_shard(&elsewhere, &shard_ref("-")));
    assert_eq!(choose(&[], mysql80(), &enabled(), GI, now()), Err(vec![]));
}

#[test]
fn the_age_limit_and_the_size_fit_are_exact_at_their_bounds() {
    let c = choice(&[snap("s", 47.99)], &enabled(), 64 * GI);
    assert_eq!(
        chosen(&c),
        Some("s"),
        "just younger than 48h, exactly the size"
    );
    let c = choice(&[snap("s", 48.0)], &enabled(), 64 * GI);
    assert_eq!(chosen(&c), None, "48h is too old");
    let c = choice(&[snap("s", 1.0)], &enabled(), 68_719_476_735);
    assert_eq!(chosen(&c), None, "one byte short");
    let six_hours = policy("{enabled: true, maxSnapshotAge: 6h}");
    let c = choice(&[snap("s", 6.5), snap("t", 5.5)], &six_hours, 64 * GI);
    assert_eq!(chosen(&c), Some("t"));
}

#[test]
fn ties_on_the_cut_go_to_the_later_name() {
    let c = choice(&[snap("s-a", 3.0), snap("s-b", 3.0)], &enabled(), 100 * GI);
    assert_eq!(chosen(&c), Some("s-b"));
    let c = choice(&[snap("s-b", 3.0), snap("s-a", 3.0)], &enabled(), 100 * GI);
    assert_eq!(chosen(&c), Some("s-b"), "whatever the order");
}

#[test]
fn an_unreadable_snapshot_is_passed_over_and_named() {
    let mut bad = snap("s-bad", 1.0).object();
    bad["metadata"]["annotations"][ANN_CUT_TIME] = json!("yesterday");
    let objects = [bad.clone(), snap("s-good", 5.0).object()];
    let c = choose(&read(&objects), mysql80(), &enabled(), 100 * GI, now());
    assert_eq!(chosen(&c), Some("s-good"));
    let c = choose(&read(&[bad]), mysql80(), &enabled(), 100 * GI, now());
    let said = said(&c);
    assert!(
        said.starts_with("unreadable (VolumeSnapshot vitess/s-bad"),
        "unnamed, the reason names it: {said}"
    );
}

#[test]
fn the_shards_series_is_the_one_every_tablet_that_answered_runs() {
    let with = |f: &dyn Fn(&mut ShardState)| {
        let mut s = state(&["8.0.36", "8.0.36"]);
        f(&mut s);
        shard_series(&s)
    };
    assert_eq!(with(&|_| {}), Ok(mysql80()));
    assert_eq!(with(&|s| s.primary = None), Err(SeriesUnknown::NoPrimary));
    assert_eq!(
        with(&|s| s.tablets[0].version = None),
        Err(SeriesUnknown::PrimaryUnreported {
            primary: "zone1-0000000101".into()
        }),
        "the primary did not answer"
    );
    assert_eq!(
        with(&|s| s.tablets[1].version = None),
        Ok(mysql80()),
        "a replica that did not answer does not count"
    );
    let differ = with(&|s| s.tablets[1].version = Some("8.4.3".into())).unwrap_err();
    assert!(matches!(differ, SeriesUnknown::SeriesDiffer { .. }));
    assert_eq!(
        differ.to_string(),
        "the shard's tablets run mysql 8.0 and mysql 8.4 (an upgrade in progress?)"
    );
    let unreadable = with(&|s| s.tablets[1].version = Some("eight".into())).unwrap_err();
    assert_eq!(
        unreadable.to_string(),
        "tablet zone1-0000000102 reports version \"eight\", which does not read as major.minor"
    );
    let none = with(&|s| s.tablets.clear()).unwrap_err();
    assert_eq!(
        none.to_string(),
        "the primary zone1-0000000101 did not report its MySQL version"
    );
    assert_eq!(
        with(&|s| s.primary = None).unwrap_err().to_string(),
        "the shard has no primary to catch up from"
    );
    assert_eq!(
        SeriesUnknown::NoneReported.to_string(),
        "no tablet reported a version"
    );
}

// ---- a property: whatever the snapshots, the one chosen is usable and the newest ------

fn arb_snap() -> impl Strategy<Value = (f64, bool, bool, u8, u8, bool)> {
    (
        0.0f64..100.0,
        any::<bool>(),
        any::<bool>(),
        0u8..3,
        60u8..70,
        any::<bool>(),
    )
}

proptest! {
    #[test]
    fn the_chosen_snapshot_is_usable_and_no_usable_one_is_newer(specs in proptest::collection::vec(arb_snap(), 0..12)) {
        let versions = ["8.0.36", "8.4.3", "10.11.18-MariaDB"];
        let snaps: Vec<Snap> = specs.iter().enumerate().map(|(i, (age, ready, failed, v, size_gi, unusable))| Snap {
            ready: *ready,
            phase: if *failed { "failed" } else if *ready { "ready" } else { "cut" },
            version: versions[usize::from(*v)],
            flavor: if *v == 2 { "mariadb" } else { "mysql" },
            size: Some(Box::leak(format!("{size_gi}Gi").into_boxed_str())),
            unusable: unusable.then_some("purged"),
            ..snap(&format!("s{i:02}"), *age)
        }).collect();
        let usable = |s: &Snap| s.ready && s.phase == "ready" && s.unusable.is_none()
            && s.age_h < 48.0 && s.version == "8.0.36" && s.size.is_some_and(|z| z.trim_end_matches("Gi").parse::<u32>().unwrap() <= 64);
        let c = choice(&snaps, &enabled(), 64 * GI);
        match chosen(&c) {
            Some(name) => {
                let chosen = snaps.iter().find(|s| s.name == name).unwrap();
                prop_assert!(usable(chosen), "chose an unusable snapshot {name}");
                prop_assert!(snaps.iter().filter(|s| usable(s)).all(|s| s.age_h >= chosen.age_h - 1e-6 || s.name == name));
            }
            None => prop_assert!(!snaps.iter().any(usable), "none chosen though one was usable: {c:?}"),
        }
    }
}

/// `restore.requireDrill`: only a snapshot whose last drill passed (at a time that can be
/// true) is offered; without it, drills change nothing.
#[test]
fn require_drill_offers_only_snapshots_whose_drill_passed() {
    // Each record names its own snapshot (`uid-<name>`, cut `age_h` hours ago).
    let record = |name: &str, age_h: f64, h: f64, result: &str| {
        let (at, cut) = (hours_ago(h), hours_ago(age_h));
        Some(format!(
            r#"{{"result":"{result}","at":"{at}","snapshotUid":"uid-{name}","cut":"{cut}","rto":{{"pvcBoundMs":1,"restoreMs":2,"mysqldReadyMs":3}}}}"#
        ))
        .map(|r| {
            if result == "failed" {
                r.replace(r#""rto""#, r#""reason":"table shop.orders: corrupt","rto""#)
            } else {
                r
            }
        })
    };
    let snaps = || {
        vec![
            Snap {
                drill: record("s-failed", 1.0, 0.5, "failed"),
                ..snap("s-failed", 1.0)
            },
            snap("s-undrilled", 2.0),
            Snap {
                drill: record("s-future", 3.0, -1.0, "passed"),
                ..snap("s-future", 3.0)
            },
            Snap {
                drill: record("s-drilled", 5.0, 4.0, "passed"),
                ..snap("s-drilled", 5.0)
            },
            snap("s-old", 6.0),
        ]
    };
    let required = policy("{enabled: true, requireDrill: true}");
    let c = choice(&snaps(), &required, 100 * GI);
    assert_eq!(chosen(&c), Some("s-drilled"), "{c:#?}");
    // Off (the default): the newest usable one, drilled or not.
    let c = choice(&snaps(), &enabled(), 100 * GI);
    assert_eq!(chosen(&c), Some("s-failed"), "{c:#?}");
    // None passed: each reason is named.
    let mut none = snaps();
    none.retain(|s| s.name != "s-drilled");
    let said = said(&choice(&none, &required, 100 * GI));
    for want in [
        "s-failed: its drill failed: \"table shop.orders: corrupt\" (restore.requireDrill)",
        "s-undrilled: no passed drill (restore.requireDrill)",
        "s-future: no passed drill: \"its record is dated",
    ] {
        assert!(said.contains(want), "{want}: {said}");
    }
}

/// Round three, item 1: with `restore.requireDrill`, a record dated before its snapshot
/// existed, or copied from another snapshot, proves nothing: the older snapshot whose own
/// drill passed is offered instead of the newer one carrying such a record.
#[test]
fn require_drill_ignores_records_not_made_for_the_snapshot() {
    let passed = |name: &str, cut_h: f64, at: &str| {
        Some(format!(
            r#"{{"result":"passed","at":"{at}","snapshotUid":"uid-{name}","cut":"{}"}}"#,
            hours_ago(cut_h)
        ))
    };
    let older = passed("s-older", 5.0, &hours_ago(4.0).to_string());
    let required = policy("{enabled: true, requireDrill: true}");
    for (newest, want) in [
        // Dated 2020, long before the snapshot was cut.
        (
            passed("s-newest", 1.0, "2020-01-01T00:00:00Z"),
            "before the snapshot's cut",
        ),
        // s-older's record, copied verbatim.
        (older.clone(), "made for another snapshot"),
        // A record of an earlier version that names no snapshot.
        (
            Some(r#"{"result":"passed","at":"2026-11-29T11:00:00Z"}"#.into()),
            "missing field `snapshotUid`",
        ),
    ] {
        let snaps = vec![
            Snap {
                drill: newest,
                ..snap("s-newest", 1.0)
            },
            Snap {
                drill: older.clone(),
                ..snap("s-older", 5.0)
            },
        ];
        let c = choice(&snaps, &required, 100 * GI);
        assert_eq!(chosen(&c), Some("s-older"), "{want}: {c:#?}");
        // Without the older one, nothing is offered, and why is said.
        let said = said(&choice(&snaps[..1], &required, 100 * GI));
        assert!(said.contains(want), "{want}: {said}");
        // With requireDrill off, such a record neither helps nor strands the snapshot.
        let c = choice(&snaps, &enabled(), 100 * GI);
        assert_eq!(chosen(&c), Some("s-newest"));
    }
    // Round three, item 13: an unreadable record strands nothing: with requireDrill off
    // the snapshot is offered; with it on, it is simply not drilled.
    let snaps = vec![Snap {
        drill: Some("{not json".into()),
        ..snap("s-garbled", 1.0)
    }];
    let c = choice(&snaps, &enabled(), 100 * GI);
    assert_eq!(chosen(&c), Some("s-garbled"), "{c:#?}");
    let said = said(&choice(&snaps, &required, 100 * GI));
    assert!(
        said.contains("s-garbled: no passed drill: \"its record is not a drill record"),
        "{said}"
    );
}
