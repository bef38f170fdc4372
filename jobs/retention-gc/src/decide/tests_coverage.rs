//! Catch-up coverage in the GC's plan: snapshots the primary purged past are marked
//! unusable, the newest covered one survives every retention setting, and an unknown
//! changes nothing.

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;
use vtsnap_core::coverage::{Exactness, GtidSet, Purged, Text};
use vtsnap_core::reconcile::Read;
use vtsnap_core::snapshot::GtidFlavor;

use super::failed_restores::UnusableReason;
use super::tests::{State, cluster, config, now, reasons, snap};
use super::*;
use crate::observe::PrimaryBinlogs;

fn shard() -> ShardRef {
    ShardRef {
        namespace: "vitess".into(),
        cluster: "example".into(),
        keyspace: "commerce".into(),
        shard: KeyRange::from_safe_name("x-80").unwrap(),
    }
}

/// A ready snapshot `hours` old at MariaDB position `0-1-<seq>` (cold: exact).
fn at(name: &str, hours: i64, seq: u64) -> Snap {
    let mut s = snap(name, "commerce", "x-80", hours, State::Ready);
    s.position = Some(format!("MariaDB/0-1-{seq}"));
    s.exactness = Exactness::Exact;
    s
}

/// The primary's oldest binlog starts after `seq`; binlogs expire after `days`.
fn primary(seq: u64, days: u64) -> BTreeMap<ShardRef, Read<PrimaryBinlogs>> {
    let start = GtidSet::parse(GtidFlavor::Mariadb, &format!("0-1-{seq}"), Text::Server).unwrap();
    BTreeMap::from([(
        shard(),
        Read::Present(PrimaryBinlogs {
            purged: Purged::MariadbOldestBinlogStart(start),
            expiry: Some(Duration::from_secs(days * 86_400)),
        }),
    )])
}

fn inventory(snaps: Vec<Snap>, binlogs: BTreeMap<ShardRef, Read<PrimaryBinlogs>>) -> Inventory {
    Inventory {
        snapshots: snaps,
        clusters: cluster(&[("commerce", "-80")]),
        binlogs,
        ..Inventory::default()
    }
}

#[test]
fn snapshots_the_primary_purged_past_are_marked_and_fall_off_first() {
    // new (covered), mid (covered), old1 and old2 (the primary purged past them)
    let inv = inventory(
        vec![
            at("new", 1, 900),
            at("mid", 30, 500),
            at("old1", 60, 300),
            at("old2", 90, 100),
        ],
        primary(400, 7),
    );
    let p = plan(&config("  retention: {maxCount: 3}\n"), &inv, now(), None);
    let r = reasons(&p);
    assert_eq!(r["new"], ("newest-covered", false));
    assert_eq!(r["mid"], ("within-max-count", false));
    assert_eq!(r["old1"], ("within-max-count", false));
    assert_eq!(r["old2"], ("beyond-max-count", true));
    let marked: Vec<(&str, UnusableReason)> = p
        .restores
        .mark_unusable
        .iter()
        .map(|m| (m.snapshot.as_str(), m.reason))
        .collect();
    assert_eq!(
        marked,
        [
            ("old1", UnusableReason::NotCovered),
            ("old2", UnusableReason::NotCovered)
        ]
    );
    assert!(
        p.restores.mark_unusable[0].message.contains("0-1-400"),
        "{:?}",
        p.restores
    );
    let CoverageState::Known {
        newest_covered,
        headroom_seconds,
        not_covered,
        warning,
    } = &p.coverage[0].state
    else {
        panic!("{:?}", p.coverage)
    };
    assert_eq!(newest_covered.as_deref(), Some("new"));
    assert_eq!(*headroom_seconds, Some(7 * 86_400 - 3600));
    assert_eq!(not_covered, &["old1", "old2"]);
    // a week of binlogs left, snapshots 29 hours apart
    assert_eq!(warning, &None);
}

#[test]
fn only_ready_snapshots_are_judged() {
    let mut unready = at("cutting", 1, 100);
    unready.ready = false;
    let inv = inventory(vec![unready, at("good", 5, 900)], primary(400, 7));
    let p = plan(&config(""), &inv, now(), None);
    assert!(p.restores.mark_unusable.is_empty(), "{:?}", p.restores);
    let CoverageState::Known { not_covered, .. } = &p.coverage[0].state else {
        panic!("{:?}", p.coverage)
    };
    assert!(not_covered.is_empty());
}

#[test]
fn a_headroom_equal_to_the_interval_is_enough() {
    // a week of binlogs: the newest (1 h old) stays covered 167 h; the one before is
    // 167 h older (enough) or 168 h older (not)
    for (older, warned) in [(168, false), (169, true)] {
        let inv = inventory(vec![at("a", 1, 900), at("b", older, 800)], primary(400, 7));
        let p = plan(&config(""), &inv, now(), None);
        let CoverageState::Known { warning, .. } = &p.coverage[0].state else {
            panic!("{:?}", p.coverage)
        };
        assert_eq!(warning.is_some(), warned, "{older}: {warning:?}");
    }
}

#[test]
fn no_warning_while_the_headroom_outlasts_the_snapshot_interval() {
    // snapshots every 6 hours, a week of binlogs
    let inv = inventory(vec![at("a", 1, 900), at("b", 7, 800)], primary(400, 7));
    let p = plan(&config(""), &inv, now(), None);
    let CoverageState::Known { warning, .. } = &p.coverage[0].state else {
        panic!("{:?}", p.coverage)
    };
    assert_eq!(warning, &None);
    // snapshots ten days apart, a week of binlogs: the next one may come too late
    let inv = inventory(vec![at("a", 1, 900), at("b", 241, 800)], primary(400, 7));
    let p = plan(&config(""), &inv, now(), None);
    let CoverageState::Known { warning, .. } = &p.coverage[0].state else {
        panic!("{:?}", p.coverage)
    };
    assert!(
        warning
            .as_deref()
            .is_some_and(|w| w.contains("may come too late")),
        "{warning:?}"
    );
    // none covered: warned
    let inv = inventory(vec![at("a", 1, 100)], primary(400, 7));
    let p = plan(&config(""), &inv, now(), None);
    let CoverageState::Known { warning, .. } = &p.coverage[0].state else {
        panic!("{:?}", p.coverage)
    };
    assert!(
        warning
            .as_deref()
            .is_some_and(|w| w.contains("purged past every one"))
    );
}

#[test]
fn a_newer_snapshot_that_cannot_catch_up_never_pushes_out_the_covered_one() {
    // "lagging" is newest but was cut from a lagging replica, before what the primary kept
    let inv = inventory(
        vec![at("lagging", 1, 100), at("good", 20, 800)],
        primary(400, 7),
    );
    let p = plan(&config("  retention: {maxCount: 1}\n"), &inv, now(), None);
    let r = reasons(&p);
    assert_eq!(r["good"], ("newest-covered", false));
    assert_eq!(r["lagging"], ("beyond-max-count", true));
}

#[test]
fn with_none_covered_the_newest_ready_is_kept_and_the_plan_says_so() {
    let inv = inventory(vec![at("a", 1, 100), at("b", 5, 50)], primary(400, 7));
    let p = plan(&config("  retention: {maxCount: 1}\n"), &inv, now(), None);
    let r = reasons(&p);
    assert_eq!(r["a"], ("newest-ready", false));
    assert_eq!(r["b"], ("beyond-max-count", true));
    assert!(matches!(
        &p.coverage[0].state,
        CoverageState::Known {
            newest_covered: None,
            ..
        }
    ));
}

#[test]
fn an_unread_primary_or_an_unreadable_position_changes_nothing() {
    let snaps = vec![at("a", 1, 100), at("b", 5, 50)];
    let base = plan(
        &config("  retention: {maxCount: 1}\n"),
        &inventory(snaps.clone(), BTreeMap::new()),
        now(),
        None,
    );
    let mut odd = snaps.clone();
    odd[1].position = Some("MariaDB/garbage".into());
    for inv in [
        inventory(
            snaps.clone(),
            BTreeMap::from([(shard(), Read::Unreadable("vtctld down".into()))]),
        ),
        inventory(odd, primary(400, 7)),
    ] {
        let p = plan(&config("  retention: {maxCount: 1}\n"), &inv, now(), None);
        assert_eq!(reasons(&p), reasons(&base));
        assert!(p.restores.mark_unusable.is_empty(), "{:?}", p.restores);
        assert!(
            matches!(&p.coverage[0].state, CoverageState::Unknown { .. }),
            "{:?}",
            p.coverage
        );
    }
}

#[test]
fn an_online_snapshot_is_judged_at_its_lower_bound() {
    let mut online = at("online", 1, 300);
    online.exactness = Exactness::LowerBound;
    let p = plan(
        &config(""),
        &inventory(vec![online], primary(400, 7)),
        now(),
        None,
    );
    assert_eq!(p.restores.mark_unusable.len(), 1);
    assert!(p.restores.mark_unusable[0].message.contains("lower bound"));
}

prop_compose! {
    fn arb_ready()(i in 0u32..1000, hours in 0i64..24 * 30, seq in 1u64..1000, state in 0u8..10) -> Snap {
        let mut s = at(&format!("s{i}"), hours, seq);
        // a few unready or failed ones among them
        if state == 0 { s.ready = false; }
        if state == 1 { s.failed = true; s.ready = false; }
        s
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Whatever the retention: the newest covered snapshot is never deleted, and every
    /// ready snapshot the primary purged past is marked unusable (so no new tablet is
    /// offered one).
    #[test]
    fn the_newest_covered_survives_and_the_uncovered_are_never_offered(
        mut snaps in proptest::collection::vec(arb_ready(), 1..30),
        oldest in 1u64..1000,
        max_count in 1i64..6,
        max_age_days in proptest::option::of(1i64..40),
    ) {
        snaps.sort_by(|a, b| a.name.cmp(&b.name));
        snaps.dedup_by(|a, b| a.name == b.name);
        let inv = inventory(snaps.clone(), primary(oldest, 7));
        let max_age = max_age_days.map_or(String::new(), |d| format!(", maxAge: {d}d"));
        let p = plan(&config(&format!("  retention: {{maxCount: {max_count}{max_age}}}\n")), &inv, now(), None);
        let deleted: Vec<&str> = p.delete.iter().map(|i| i.name.as_str()).collect();
        let ready = || snaps.iter().filter(|s| s.ready && !s.failed);
        let covered = |s: &&Snap| s.position.as_deref().and_then(|x| x.rsplit('-').next()).and_then(|q| q.parse::<u64>().ok()).is_some_and(|q| q >= oldest);
        let newest_covered = ready().filter(covered).max_by(|a, b| a.created.cmp(&b.created).then(a.name.cmp(&b.name)));
        if let Some(n) = newest_covered {
            prop_assert!(!deleted.contains(&n.name.as_str()), "deleted the newest covered {}", n.name);
        }
        let marked: Vec<&str> = p.restores.mark_unusable.iter().map(|m| m.snapshot.as_str()).collect();
        for s in ready() {
            prop_assert_eq!(marked.contains(&s.name.as_str()), !covered(&s), "{}", s.name);
        }
        prop_assert_eq!(p.delete.len() + p.keep.len(), snaps.len());
    }
}

/// Audit item 3: the newest covered snapshot retention protects and the plan reports is
/// the newest covered one a restore would be given: one marked unusable (a node-local
/// restore that never provisioned, …), or one without a passed drill under
/// `restore.requireDrill`, is neither protected nor reported.
#[test]
fn the_newest_covered_snapshot_is_the_newest_covered_and_usable_one() {
    let marked = Snap {
        unusable: true,
        ..at("new", 1, 900)
    };
    let inv = inventory(
        vec![marked, at("mid", 30, 500), at("old", 60, 450)],
        primary(400, 7),
    );
    let p = plan(&config("  retention: {maxCount: 1}\n"), &inv, now(), None);
    let r = reasons(&p);
    assert_eq!(r["mid"], ("newest-covered", false));
    // The newest ready one is never deleted, usable or not (design §5.6).
    assert_eq!(r["new"], ("newest-ready", false));
    assert_eq!(r["old"], ("beyond-max-count", true));
    let newest = |p: &Plan| match &p.coverage[0].state {
        CoverageState::Known { newest_covered, .. } => newest_covered.clone(),
        CoverageState::Unknown { why } => panic!("{why}"),
    };
    assert_eq!(newest(&p).as_deref(), Some("mid"));
    // Under requireDrill only the drilled one is usable.
    let drilled = {
        let s = at("old", 60, 450);
        Snap {
            drill: Some(super::tests::drill_passed(&s, 59)),
            ..s
        }
    };
    let inv = inventory(vec![at("new", 1, 900), drilled], primary(400, 7));
    let p = plan(
        &config("  retention: {maxCount: 1}\n  restore: {enabled: true, requireDrill: true}\n"),
        &inv,
        now(),
        None,
    );
    assert_eq!(newest(&p).as_deref(), Some("old"));
    assert_eq!(reasons(&p)["old"], ("newest-covered", false));
    // A fresh snapshot the daily drill has not reached yet is not pushed out by the
    // drilled one: it is the newest ready.
    assert_eq!(reasons(&p)["new"], ("newest-ready", false));
    // Nothing usable: no newest covered, and the newest ready one is still kept.
    let inv = inventory(
        vec![Snap {
            unusable: true,
            ..at("new", 1, 900)
        }],
        primary(400, 7),
    );
    let p = plan(&config("  retention: {maxCount: 1}\n"), &inv, now(), None);
    assert_eq!(newest(&p), None);
    assert_eq!(reasons(&p)["new"], ("newest-ready", false));
}

/// Round three, item 12: a mark is cut to what the API server accepts, however many
/// intervals the primary purged past.
#[test]
fn a_not_covered_mark_is_cut_to_fit() {
    use crate::decide::failed_restores::MAX_MARK_BYTES;
    let mut s = snap("huge", "commerce", "x-80", 1, State::Ready);
    // 40,000 intervals of one server, every other sequence number.
    let set: Vec<String> = (0..40_000u64)
        .map(|i| format!("{}-{}", i * 2 + 1, i * 2 + 1))
        .collect();
    s.position = Some(format!(
        "MySQL56/3e11fa47-71ca-11e1-9e33-c80aa9429562:{}",
        set.join(":")
    ));
    let purged = GtidSet::parse(
        GtidFlavor::Mysql56,
        "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-100000,4e11fa47-71ca-11e1-9e33-c80aa9429562:1-5",
        Text::Server,
    )
    .unwrap();
    let binlogs = BTreeMap::from([(
        shard(),
        Read::Present(PrimaryBinlogs {
            purged: Purged::Mysql56(purged),
            expiry: None,
        }),
    )]);
    let p = plan(&config(""), &inventory(vec![s], binlogs), now(), None);
    let m = &p.restores.mark_unusable[0];
    assert!(m.message.len() <= MAX_MARK_BYTES, "{}", m.message.len());
    assert!(
        m.message.starts_with("the shard's primary purged binlogs"),
        "{}",
        &m.message[..80]
    );
    assert!(
        m.message.ends_with(" bytes)"),
        "{}",
        &m.message[m.message.len() - 40..]
    );
}
