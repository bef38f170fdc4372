use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;
use crate::observe::{Cluster, LeaseRef};
use vtsnap_core::coverage::Exactness;
use vtsnap_core::snapshot::{DrillOf, DrillRecord, DrillSeen, Rto};

pub(super) const NOW: &str = "2026-11-29T12:00:00Z";

pub(super) fn now() -> Timestamp {
    NOW.parse().unwrap()
}

/// What a test snapshot's status and phase say.
#[derive(Debug, Clone, Copy)]
pub(super) enum State {
    Ready,
    Unready,
    /// Labelled `failed`.
    Failed,
}

/// A snapshot of `keyspace/shard` (SafeName) taken `hours` ago.
pub(super) fn snap(name: &str, keyspace: &str, shard: &str, hours: i64, state: State) -> Snap {
    Snap {
        namespace: "vitess".into(),
        name: name.into(),
        cluster: "example".into(),
        keyspace: keyspace.into(),
        shard: KeyRange::from_safe_name(shard).unwrap(),
        created: Timestamp::from_second(now().as_second() - hours * 3600).unwrap(),
        failed: matches!(state, State::Failed),
        ready: matches!(state, State::Ready),
        cluster_owners: vec![],
        unusable: false,
        position: None,
        exactness: Exactness::Exact,
        drill: None,
        reprovisioned: BTreeMap::new(),
    }
}

/// A record that its drill passed `passed_h` hours ago, made for `s` (its UID is its
/// name here, its cut its creation).
pub(super) fn drill_passed(s: &Snap, passed_h: i64) -> DrillSeen {
    let of = DrillOf {
        uid: format!("uid-{}", s.name),
        cut: s.created,
    };
    let at = Timestamp::from_second(now().as_second() - passed_h * 3600).unwrap();
    DrillSeen {
        record: Ok(DrillRecord::passed(&of, at, Rto::default(), None)),
        of: Some(of),
    }
}

pub(super) fn cluster(shards: &[(&str, &str)]) -> BTreeMap<ObjectKey, Cluster> {
    BTreeMap::from([(
        ObjectKey::new("vitess", "example"),
        Cluster {
            uid: "cluster-uid".into(),
            shards: shards
                .iter()
                .map(|(k, s)| ((*k).into(), (*s).into()))
                .collect(),
        },
    )])
}

pub(super) fn config(extra: &str) -> Config {
    Config::from_yaml(&format!(
        "clusters:\n- name: example\n  namespace: vitess\n{extra}"
    ))
    .unwrap()
}

pub(super) fn reasons(p: &Plan) -> BTreeMap<String, (&'static str, bool)> {
    p.delete
        .iter()
        .map(|i| (i.name.clone(), (i.reason.as_str(), true)))
        .chain(
            p.keep
                .iter()
                .map(|i| (i.name.clone(), (i.reason.as_str(), false))),
        )
        .collect()
}

#[test]
fn max_count_counts_only_ready_snapshots() {
    let inv = Inventory {
        snapshots: vec![
            snap("r1", "commerce", "x-x", 1, State::Ready),
            snap("cut", "commerce", "x-x", 2, State::Unready),
            snap("r2", "commerce", "x-x", 3, State::Ready),
            snap("bad", "commerce", "x-x", 4, State::Failed),
            snap("r3", "commerce", "x-x", 5, State::Ready),
            snap("r4", "commerce", "x-x", 6, State::Ready),
        ],
        clusters: cluster(&[("commerce", "-")]),
        ..Inventory::default()
    };
    let p = plan(&config("  retention: {maxCount: 2}\n"), &inv, now(), None);
    let r = reasons(&p);
    assert_eq!(r["r1"], ("newest-ready", false));
    assert_eq!(r["r2"], ("within-max-count", false));
    assert_eq!(r["r3"], ("beyond-max-count", true));
    assert_eq!(r["r4"], ("beyond-max-count", true));
    assert_eq!(
        r["cut"],
        ("not-ready-yet", false),
        "an unready snapshot never counts and is kept while young"
    );
    assert_eq!(r["bad"], ("failed-within-max-age", false));
}

#[test]
fn within_one_second_the_later_name_is_the_newer_snapshot() {
    // Three snapshots the API server stamped in the same second: the job names them by
    // its own clock and, on a clash, with a `-<attempt>` suffix.
    let names = [
        "example-commerce-x-x-20261202084854",
        "example-commerce-x-x-20261202084855",
        "example-commerce-x-x-20261202084855-1",
    ];
    let r = reasons_of(
        "  retention: {maxCount: 1}\n",
        names
            .iter()
            .map(|n| snap(n, "commerce", "x-x", 1, State::Ready))
            .collect(),
        &[("commerce", "-")],
    );
    assert_eq!(r[names[2]], ("newest-ready", false));
    assert_eq!(r[names[1]], ("beyond-max-count", true));
    assert_eq!(r[names[0]], ("beyond-max-count", true));
}

#[test]
fn the_newest_ready_snapshot_is_kept_when_all_are_old() {
    let inv = Inventory {
        snapshots: vec![
            snap("a", "commerce", "x-x", 24 * 40, State::Ready),
            snap("b", "commerce", "x-x", 24 * 50, State::Ready),
        ],
        clusters: cluster(&[("commerce", "-")]),
        ..Inventory::default()
    };
    let r = reasons(&plan(
        &config("  retention: {maxAge: 7d}\n"),
        &inv,
        now(),
        None,
    ));
    assert_eq!(r["a"], ("newest-ready", false));
    assert_eq!(r["b"], ("beyond-max-age", true));
}

/// Round three, item 2: s-a's passed record copied onto the newer s-b does not make s-b
/// the newest drilled one (it names s-a), so retention keeps s-a, whose own record it is,
/// and deletes s-b beyond `maxCount`; a record dated before its snapshot's cut counts for
/// nothing either.
#[test]
fn a_copied_drill_record_does_not_steal_the_newest_drilled_protection() {
    let ready = |name: &str, hours: i64| snap(name, "commerce", "x-x", hours, State::Ready);
    let (a, b, c) = (ready("s-a", 36), ready("s-b", 30), ready("s-c", 24));
    let of_a = drill_passed(&a, 35);
    let copied = DrillSeen {
        record: of_a.record.clone(),
        of: drill_passed(&b, 0).of,
    };
    let snaps = vec![
        Snap {
            drill: Some(of_a),
            ..a
        },
        Snap {
            drill: Some(copied),
            ..b
        },
        c,
    ];
    let r = reasons_of("  retention: {maxCount: 1}\n", snaps, &[("commerce", "-")]);
    assert_eq!(r["s-a"], ("newest-drilled", false));
    assert_eq!(r["s-b"], ("beyond-max-count", true));
    assert_eq!(r["s-c"], ("newest-ready", false));
    // Its own record, but dated before its cut (a record of 2020): no proof.
    let old = ready("s-old", 30);
    let mut before = drill_passed(&old, 0);
    if let Ok(r) = &mut before.record {
        r.at = "2020-01-01T00:00:00Z".parse().unwrap();
    }
    let r = reasons_of(
        "  retention: {maxCount: 1}\n",
        vec![
            Snap {
                drill: Some(before),
                ..old
            },
            ready("s-new", 1),
        ],
        &[("commerce", "-")],
    );
    assert_eq!(r["s-old"], ("beyond-max-count", true));
}

/// The newest ready snapshot whose drill passed is never deleted, even beyond `maxCount`
/// and `maxAge`; only the newest such one, and only a pass that can be true.
#[test]
fn the_newest_drilled_snapshot_is_kept_beyond_every_limit() {
    let drilled = |name: &str, hours: i64, passed_h: i64| {
        let s = snap(name, "commerce", "x-x", hours, State::Ready);
        Snap {
            drill: Some(drill_passed(&s, passed_h)),
            ..s
        }
    };
    let snaps = vec![
        snap("r1", "commerce", "x-x", 1, State::Ready),
        snap("r2", "commerce", "x-x", 2, State::Ready),
        // Its drill "passed" two hours from now: no proof.
        drilled("future", 3, -2),
        drilled("d1", 24 * 10, 24 * 9),
        drilled("d2", 24 * 20, 24 * 19),
        snap("r3", "commerce", "x-x", 24 * 30, State::Ready),
    ];
    let r = reasons_of(
        "  retention: {maxCount: 2, maxAge: 7d}\n",
        snaps,
        &[("commerce", "-")],
    );
    assert_eq!(r["r1"], ("newest-ready", false));
    assert_eq!(r["r2"], ("within-max-count", false));
    assert_eq!(r["future"], ("beyond-max-count", true));
    assert_eq!(r["d1"], ("newest-drilled", false));
    assert_eq!(r["d2"], ("beyond-max-count", true));
    assert_eq!(r["r3"], ("beyond-max-count", true));
    // Within the limits it keeps its ordinary reason; the newest ready one stays newest.
    let r = reasons_of(
        "  retention: {maxCount: 5}\n",
        vec![
            drilled("d1", 1, 0),
            snap("r1", "commerce", "x-x", 2, State::Ready),
            drilled("d2", 3, 2),
        ],
        &[("commerce", "-")],
    );
    assert_eq!(r["d1"], ("newest-ready", false));
    assert_eq!(r["d2"], ("within-max-count", false));
    // A removed shard's drilled snapshot goes with the shard after its grace period.
    let r = reasons_of(
        "",
        vec![drilled("d1", 24 * 30, 24 * 29)],
        &[("commerce", "-80"), ("commerce", "80-")],
    );
    assert_eq!(r["d1"], ("shard-removed", true));
    // Two drilled at the same second: the later name is the newer one.
    let r = reasons_of(
        "  retention: {maxCount: 1}\n",
        vec![
            snap("r0", "commerce", "x-x", 1, State::Ready),
            drilled("d-a", 5, 4),
            drilled("d-b", 5, 4),
        ],
        &[("commerce", "-")],
    );
    assert_eq!(r["d-b"], ("newest-drilled", false));
    assert_eq!(r["d-a"], ("beyond-max-count", true));
}

#[test]
fn an_in_use_source_is_kept_whatever_else_applies() {
    let inv = Inventory {
        snapshots: vec![
            snap("new", "commerce", "x-x", 1, State::Ready),
            snap("old", "commerce", "x-x", 24 * 90, State::Ready),
            snap("bad", "commerce", "x-x", 24 * 90, State::Failed),
        ],
        in_use: BTreeSet::from([
            ObjectKey::new("vitess", "old"),
            ObjectKey::new("vitess", "bad"),
        ]),
        clusters: cluster(&[("commerce", "-")]),
        ..Inventory::default()
    };
    let r = reasons(&plan(
        &config("  retention: {maxCount: 1}\n"),
        &inv,
        now(),
        None,
    ));
    assert_eq!(r["old"], ("in-use-source", false));
    assert_eq!(r["bad"], ("in-use-source", false));
}

#[test]
fn shards_and_keyspaces_are_planned_apart() {
    let inv = Inventory {
        snapshots: vec![
            snap("a1", "commerce", "x-80", 1, State::Ready),
            snap("a2", "commerce", "x-80", 2, State::Ready),
            snap("b1", "commerce", "80-x", 3, State::Ready),
            snap("c1", "customer", "x-80", 4, State::Ready),
        ],
        clusters: cluster(&[
            ("commerce", "-80"),
            ("commerce", "80-"),
            ("customer", "-80"),
        ]),
        ..Inventory::default()
    };
    let r = reasons(&plan(
        &config("  retention: {maxCount: 1}\n"),
        &inv,
        now(),
        None,
    ));
    assert_eq!(r["a1"], ("newest-ready", false));
    assert_eq!(r["a2"], ("beyond-max-count", true));
    assert_eq!(
        r["b1"],
        ("newest-ready", false),
        "another shard's snapshots do not count"
    );
    assert_eq!(
        r["c1"],
        ("newest-ready", false),
        "another keyspace's snapshots do not count"
    );
}

#[test]
fn a_removed_shard_is_kept_within_its_grace_period_then_deleted() {
    let mk = |hours| Inventory {
        snapshots: vec![
            snap("gone-1", "commerce", "x-x", hours, State::Ready),
            snap("gone-2", "commerce", "x-x", hours + 24, State::Ready),
        ],
        // Resharded: `-` became `-80` and `80-`.
        clusters: cluster(&[("commerce", "-80"), ("commerce", "80-")]),
        ..Inventory::default()
    };
    let cfg = config("  deletionPolicy: {gracePeriod: 48h}\n");
    let r = reasons(&plan(&cfg, &mk(10), now(), None));
    assert_eq!(r["gone-1"], ("within-grace-period", false));
    let r = reasons(&plan(&cfg, &mk(72), now(), None));
    assert_eq!(
        r["gone-1"],
        ("shard-removed", true),
        "past the grace period even the newest goes"
    );
    assert_eq!(r["gone-2"], ("shard-removed", true));
}

#[test]
fn a_shard_level_retain_overrides_a_keyspace_delete() {
    let inv = Inventory {
        snapshots: vec![
            snap("keep-me", "commerce", "x-80", 24 * 10, State::Ready),
            snap("drop-me", "commerce", "80-x", 24 * 10, State::Ready),
        ],
        clusters: cluster(&[("commerce", "-")]),
        ..Inventory::default()
    };
    let cfg = config(
        "  keyspaces:\n    commerce:\n      deletionPolicy: {whenScaled: Delete, gracePeriod: 1h}\n      \
         shards:\n        \"-80\": {deletionPolicy: {whenScaled: Retain}}\n",
    );
    let r = reasons(&plan(&cfg, &inv, now(), None));
    assert_eq!(r["keep-me"], ("newest-ready", false));
    assert_eq!(r["drop-me"], ("shard-removed", true));
}

#[test]
fn owner_references_follow_when_deleted_both_ways() {
    let mut owned = snap("owned", "commerce", "x-x", 1, State::Ready);
    owned.cluster_owners = vec!["cluster-uid".into()];
    let inv = Inventory {
        snapshots: vec![owned, snap("free", "commerce", "x-x", 2, State::Ready)],
        clusters: cluster(&[("commerce", "-")]),
        ..Inventory::default()
    };
    let p = plan(
        &config("  deletionPolicy: {whenDeleted: Delete}\n"),
        &inv,
        now(),
        None,
    );
    assert_eq!(
        p.owner_refs
            .add
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>(),
        ["free"]
    );
    assert!(p.owner_refs.remove.is_empty());
    let p = plan(
        &config("  deletionPolicy: {whenDeleted: Retain}\n"),
        &inv,
        now(),
        None,
    );
    assert_eq!(
        p.owner_refs
            .remove
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>(),
        ["owned"]
    );
    assert!(p.owner_refs.add.is_empty());
}

#[test]
fn failed_snapshots_go_after_failed_max_age_whatever_the_policy() {
    let inv = Inventory {
        snapshots: vec![
            snap("new", "commerce", "x-x", 1, State::Ready),
            snap("bad", "commerce", "x-x", 30, State::Failed),
        ],
        clusters: cluster(&[("commerce", "-")]),
        ..Inventory::default()
    };
    for extra in [
        "",
        "  deletionPolicy: {whenDeleted: Retain, whenScaled: Retain}\n  retention: {maxCount: 100}\n",
    ] {
        let r = reasons(&plan(&config(extra), &inv, now(), None));
        assert_eq!(r["bad"], ("failed-expired", true), "{extra}");
    }
}

#[test]
fn unready_snapshots_that_never_became_ready_expire() {
    let inv = Inventory {
        snapshots: vec![
            snap("young", "commerce", "x-x", 1, State::Unready),
            snap("stale", "commerce", "x-x", 24 * 3, State::Unready),
        ],
        clusters: cluster(&[("commerce", "-")]),
        ..Inventory::default()
    };
    let r = reasons(&plan(&config(""), &inv, now(), None));
    assert_eq!(r["young"], ("not-ready-yet", false));
    assert_eq!(r["stale"], ("unready-expired", true));
}

#[test]
fn expired_fences_are_recovered_and_other_clusters_are_left_alone() {
    let mut other = snap("theirs", "commerce", "x-x", 24 * 400, State::Ready);
    other.cluster = "other".into();
    let inv = Inventory {
        snapshots: vec![other],
        leases: vec![
            LeaseRef {
                namespace: "vitess".into(),
                name: "dead".into(),
                expiry: Expiry::Expired,
            },
            LeaseRef {
                namespace: "vitess".into(),
                name: "live".into(),
                expiry: Expiry::Live,
            },
            LeaseRef {
                namespace: "elsewhere".into(),
                name: "x".into(),
                expiry: Expiry::Expired,
            },
        ],
        ..Inventory::default()
    };
    let p = plan(&config(""), &inv, now(), None);
    assert_eq!(
        p.recover_fences,
        vec![FenceItem {
            namespace: "vitess".into(),
            name: "dead".into()
        }]
    );
    assert!(
        p.delete.is_empty() && p.keep.is_empty(),
        "snapshots of unconfigured clusters are out of scope"
    );
}

/// `snap` created `secs` seconds before now (negative: after).
pub(super) fn snap_secs(name: &str, shard: &str, secs: i64, state: State) -> Snap {
    let mut s = snap(name, "commerce", shard, 0, state);
    s.created = Timestamp::from_second(now().as_second() - secs).unwrap();
    s
}

/// Every snapshot's reason, when `snaps` of a cluster with `shards` are planned under `extra`.
fn reasons_of(
    extra: &str,
    snaps: Vec<Snap>,
    shards: &[(&str, &str)],
) -> BTreeMap<String, (&'static str, bool)> {
    let inv = Inventory {
        snapshots: snaps,
        clusters: cluster(shards),
        ..Inventory::default()
    };
    reasons(&plan(&config(extra), &inv, now(), None))
}

/// The reason of the one snapshot `name`, as [`reasons_of`] gives it.
fn reason_of(
    extra: &str,
    snaps: Vec<Snap>,
    shards: &[(&str, &str)],
    name: &str,
) -> (&'static str, bool) {
    reasons_of(extra, snaps, shards)[name]
}

pub(super) const H: i64 = 3600;

#[test]
fn every_age_limit_is_exclusive_to_the_second() {
    let limits = "  snapshot: {readyTimeout: 1h}\n  retention: {failedMaxAge: 2h, maxAge: 3h, maxCount: 10}\n";
    let one = |s: Snap| reason_of(limits, vec![s], &[("commerce", "-")], "s");
    assert_eq!(
        one(snap_secs("s", "x-x", 2 * H, State::Failed)),
        ("failed-within-max-age", false)
    );
    assert_eq!(
        one(snap_secs("s", "x-x", 2 * H + 1, State::Failed)),
        ("failed-expired", true)
    );
    assert_eq!(
        one(snap_secs("s", "x-x", H - 1, State::Unready)),
        ("not-ready-yet", false)
    );
    assert_eq!(
        one(snap_secs("s", "x-x", H, State::Unready)),
        ("unready-within-max-age", false)
    );
    assert_eq!(
        one(snap_secs("s", "x-x", 3 * H, State::Unready)),
        ("unready-within-max-age", false)
    );
    assert_eq!(
        one(snap_secs("s", "x-x", 3 * H + 1, State::Unready)),
        ("unready-expired", true)
    );
    let two = |age| {
        reason_of(
            limits,
            vec![
                snap_secs("new", "x-x", 0, State::Ready),
                snap_secs("s", "x-x", age, State::Ready),
            ],
            &[("commerce", "-")],
            "s",
        )
    };
    assert_eq!(two(3 * H), ("within-max-count", false));
    assert_eq!(two(3 * H + 1), ("beyond-max-age", true));
    // A removed shard: the grace period from its newest snapshot.
    let removed = |age| {
        reason_of(
            "  deletionPolicy: {whenScaled: Delete, gracePeriod: 5h}\n",
            vec![snap_secs("s", "x-x", age, State::Ready)],
            &[("commerce", "-80"), ("commerce", "80-")],
            "s",
        )
    };
    assert_eq!(removed(5 * H), ("within-grace-period", false));
    assert_eq!(removed(5 * H + 1), ("shard-removed", true));
}

#[test]
fn reasons_print_as_in_the_json() {
    for r in [
        Reason::BeyondMaxCount,
        Reason::SkippedInShard,
        Reason::InUseSource,
    ] {
        assert_eq!(
            r.to_string(),
            serde_json::to_value(r).unwrap().as_str().unwrap()
        );
    }
    assert_eq!(Reason::SkippedInShard.to_string(), "skipped-in-shard");
    for r in [
        SkipReason::Unreadable,
        SkipReason::Duplicate,
        SkipReason::CreatedInTheFuture,
    ] {
        assert_eq!(
            r.as_str(),
            serde_json::to_value(r).unwrap().as_str().unwrap()
        );
    }
}

prop_compose! {
    fn arb_snap()(i in 0u32..10_000, shard in 0usize..3, hours in 0i64..24 * 60, ready in any::<bool>(), failed in proptest::bool::weighted(0.1)) -> Snap {
        let shards = ["x-80", "80-x", "x-x"];
        let state = if failed { State::Failed } else if ready { State::Ready } else { State::Unready };
        snap(&format!("s{i}"), "commerce", shards[shard], hours, state)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Whatever the inventory and policy: the newest ready snapshot of a shard that still
    /// exists, and any snapshot a Pending PVC is provisioned from, are never deleted.
    #[test]
    fn never_deletes_the_newest_ready_or_an_in_use_source(
        mut snaps in proptest::collection::vec(arb_snap(), 0..60),
        max_count in 1i64..5,
        in_use_pick in proptest::collection::vec(any::<prop::sample::Index>(), 0..5),
        scaled_delete in any::<bool>(),
    ) {
        snaps.sort_by(|a, b| a.name.cmp(&b.name));
        snaps.dedup_by(|a, b| a.name == b.name);
        let in_use: BTreeSet<ObjectKey> = if snaps.is_empty() { BTreeSet::new() } else {
            in_use_pick.iter().map(|ix| ObjectKey::new("vitess", &snaps[ix.index(snaps.len())].name)).collect()
        };
        // `-80` and `80-` exist; `-` was resharded away.
        let inv = Inventory { snapshots: snaps.clone(), in_use: in_use.clone(), clusters: cluster(&[("commerce", "-80"), ("commerce", "80-")]), ..Inventory::default() };
        let when_scaled = if scaled_delete { "Delete" } else { "Retain" };
        let cfg = config(&format!("  retention: {{maxCount: {max_count}, maxAge: 3d}}\n  deletionPolicy: {{whenScaled: {when_scaled}, gracePeriod: 1h}}\n"));
        let p = plan(&cfg, &inv, now(), None);
        let deleted: BTreeSet<&str> = p.delete.iter().map(|i| i.name.as_str()).collect();
        for shard in ["x-80", "80-x"] {
            let newest = snaps.iter().filter(|s| s.shard.safe_name() == shard && s.ready && !s.failed).max_by(|a, b| a.created.cmp(&b.created).then(a.name.cmp(&b.name)));
            if let Some(n) = newest {
                prop_assert!(!deleted.contains(n.name.as_str()), "deleted the newest ready {} of {shard}", n.name);
            }
        }
        for ObjectKey { name, .. } in &in_use {
            prop_assert!(!deleted.contains(name.as_str()), "deleted in-use source {name}");
        }
        // Every snapshot in scope is accounted for exactly once.
        prop_assert_eq!(p.delete.len() + p.keep.len(), snaps.len());
    }
}

#[test]
fn reason_names_are_the_same_in_the_table_and_the_json() {
    use Reason::*;
    for r in [
        InUseSource,
        MaybeInUseSource,
        FailedExpired,
        FailedWithinMaxAge,
        ShardRemoved,
        WithinGracePeriod,
        NotReadyYet,
        UnreadyExpired,
        UnreadyWithinMaxAge,
        NewestReady,
        NewestCovered,
        NewestDrilled,
        PitrBase,
        BeyondMaxCount,
        BeyondMaxAge,
        WithinMaxCount,
        SkippedInShard,
    ] {
        assert_eq!(serde_json::to_value(r).unwrap(), r.as_str(), "{r:?}");
    }
    assert_eq!(MaybeInUseSource.as_str(), "maybe-in-use-source");
    for s in [
        SkipReason::Unreadable,
        SkipReason::Duplicate,
        SkipReason::CreatedInTheFuture,
    ] {
        assert_eq!(serde_json::to_value(s).unwrap(), s.as_str(), "{s:?}");
    }
}

/// `pitr.window` keeps the base of the oldest promised point: the newest usable snapshot
/// cut at or before `now - window` (here 3 days: `d4` at 4 days; `d2` is newer than the
/// promise, `d5` older than the base), or the oldest usable one when none is old enough;
/// only while the archive is on, and never an unusable one.
#[test]
fn the_base_of_the_oldest_promised_point_is_kept() {
    let ready = |n: &str, days: i64| snap(n, "commerce", "x-x", days * 24, State::Ready);
    let snaps = || {
        vec![
            ready("d0", 0),
            ready("d2", 2),
            ready("d4", 4),
            ready("d5", 5),
        ]
    };
    let retention = "  retention: {maxCount: 1}\n";
    let r = reasons_of(
        &format!("{retention}  pitr: {{enabled: true, window: 72h}}\n"),
        snaps(),
        &[("commerce", "-")],
    );
    assert_eq!(r["d0"], ("newest-ready", false));
    assert_eq!(r["d2"], ("beyond-max-count", true));
    assert_eq!(r["d4"], ("pitr-base", false));
    assert_eq!(r["d5"], ("beyond-max-count", true));
    // Off, or no window: nothing kept for it.
    for pitr in ["pitr: {window: 72h}", "pitr: {enabled: true}"] {
        let r = reasons_of(
            &format!("{retention}  {pitr}\n"),
            snaps(),
            &[("commerce", "-")],
        );
        assert_eq!(r["d4"], ("beyond-max-count", true), "{pitr}");
    }
    // None old enough: the oldest, which reaches furthest back.
    let r = reasons_of(
        &format!("{retention}  pitr: {{enabled: true, window: 240h}}\n"),
        snaps(),
        &[("commerce", "-")],
    );
    assert_eq!(r["d5"], ("pitr-base", false));
    assert_eq!(r["d4"], ("beyond-max-count", true));
    // An unusable snapshot is no base: the next older one is kept.
    let mut marked = snaps();
    marked[2].unusable = true;
    let r = reasons_of(
        &format!("{retention}  pitr: {{enabled: true, window: 72h}}\n"),
        marked,
        &[("commerce", "-")],
    );
    assert_eq!(r["d4"], ("beyond-max-count", true));
    assert_eq!(r["d5"], ("pitr-base", false));
}
