use crate::coverage::Text;
use crate::naming::TabletAlias;
use crate::pitr::manifest::Compression;
use crate::snapshot::GtidFlavor;

use super::*;

const U: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
const V: &str = "4f22ab58-82db-22f2-af44-d91bb0530673";

fn at(hms: &str) -> Timestamp {
    format!("2026-12-07T{hms}Z").parse().unwrap()
}

fn set(s: &str) -> GtidSet {
    GtidSet::parse(GtidFlavor::Mysql56, s, Text::Server).unwrap()
}

fn u(range: &str) -> GtidSet {
    set(&format!("{U}:{range}"))
}

fn inc(name: &str, from: GtidSet, to: GtidSet, first: &str, last: &str) -> Increment {
    Increment {
        name: name.into(),
        tablet: TabletAlias::new("zone1", 102),
        from,
        to,
        purged: u("1-10"),
        first_commit: at(first),
        last_commit: at(last),
        // Started just after its last commit, as an increment is.
        started: at(last) + k8s_openapi::jiff::SignedDuration::from_secs(1),
        compression: Compression::Gzip,
        files: Vec::new(),
    }
}

fn base(name: &str, gtid: GtidSet, cut: &str) -> Base {
    Base {
        name: name.into(),
        gtid,
        exactness: Exactness::Exact,
        cut: at(cut),
    }
}

/// A cold snapshot at 1-100 cut at 10:00, and three increments after it; the first
/// starts before the snapshot's position (its binlog began earlier).
fn scene() -> (Base, Vec<Increment>) {
    (
        base("snap-10", u("1-100"), "10:00:00"),
        vec![
            inc("a", u("1-90"), u("1-150"), "09:59:00", "10:10:00"),
            inc("b", u("1-150"), u("1-200"), "10:10:01", "10:20:00"),
            inc("c", u("1-200"), u("1-260"), "10:20:01", "10:30:00"),
        ],
    )
}

fn names(p: &Plan) -> Vec<&str> {
    p.increments.iter().map(String::as_str).collect()
}

#[test]
fn a_base_reaches_as_far_as_the_archive_follows_it_in_any_order() {
    let (b, mut archive) = scene();
    archive.reverse();
    let r = reach(&b, &archive);
    let followed: Vec<&str> = r.increments.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(followed, ["a", "b", "c"]);
    assert_eq!(r.holds, u("1-260"));
    assert_eq!(r.last_commit, Some(at("10:30:00")));
    assert_eq!(r.gap, None);
    // Nothing follows a base the archive already passed.
    let late = base("snap-late", u("1-260"), "10:31:00");
    let r = reach(&late, &archive);
    assert!(r.increments.is_empty() && r.gap.is_none(), "{r:?}");
}

#[test]
fn a_time_target_takes_increments_up_to_the_one_that_reaches_it() {
    let (b, archive) = scene();
    for (t, want) in [
        ("10:00:00", vec!["a"]),
        ("10:10:00", vec!["a"]),
        ("10:10:01", vec!["a", "b"]),
        ("10:15:00", vec!["a", "b"]),
        ("10:30:00", vec!["a", "b", "c"]),
    ] {
        let p = plan(&b, &archive, &Target::Before(at(t))).unwrap();
        assert_eq!(names(&p), want, "{t}");
        assert_eq!(p.base, "snap-10");
        assert_eq!(p.base_check, BaseCheck::Recorded);
    }
    let e = plan(&b, &archive, &Target::Before(at("10:30:01"))).unwrap_err();
    assert_eq!(
        e.to_string(),
        "the archive carries it from 2026-12-07T10:00:00Z to 2026-12-07T10:30:00Z; \
         the target 2026-12-07T10:30:01Z is outside"
    );
    let e = plan(&b, &archive, &Target::Before(at("09:59:59"))).unwrap_err();
    assert!(
        matches!(e, Refusal::CutAfterTarget { .. }),
        "{e}: the snapshot holds what was committed up to its cut"
    );
    let e = plan(&b, &[], &Target::Before(at("10:00:00"))).unwrap_err();
    assert_eq!(e, Refusal::NoIncrement);
}

#[test]
fn a_gtid_target_is_inclusive_and_the_base_must_be_within_it() {
    let (b, archive) = scene();
    let p = plan(&b, &archive, &Target::Through(u("1-175"))).unwrap();
    assert_eq!(names(&p), ["a", "b"]);
    let p = plan(&b, &archive, &Target::Through(u("1-150"))).unwrap();
    assert_eq!(names(&p), ["a"], "150 is a's last: inclusive");
    let p = plan(&b, &archive, &Target::Through(u("1-100"))).unwrap();
    assert!(p.increments.is_empty(), "the base is the target");
    let e = plan(&b, &archive, &Target::Through(u("1-99"))).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("it holds transactions past the target: {U}:100")
    );
    let e = plan(&b, &archive, &Target::Through(u("1-300"))).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("the archive ends before the target: it lacks {U}:261-300")
    );
    let maria = GtidSet::parse(GtidFlavor::Mariadb, "0-1-5", Text::Strict).unwrap();
    assert!(matches!(
        plan(&b, &archive, &Target::Through(maria)).unwrap_err(),
        Refusal::HoldsBeyondTarget { .. }
    ));
}

#[test]
fn a_missing_increment_is_a_gap_named_by_its_transactions() {
    let (b, mut archive) = scene();
    archive.remove(1);
    let r = reach(&b, &archive);
    assert_eq!(r.increments.len(), 1);
    let gap = Gap {
        after: "a".into(),
        next: "c".into(),
        missing: format!("{U}:151-200"),
    };
    assert_eq!(r.gap.as_ref(), Some(&gap));
    for target in [Target::Before(at("10:25:00")), Target::Through(u("1-210"))] {
        let e = plan(&b, &archive, &target).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "the archive stops at a before the target: c would follow and {U}:151-200 are missing"
            )
        );
    }
    // Before the gap, it still recovers.
    let p = plan(&b, &archive, &Target::Before(at("10:05:00"))).unwrap();
    assert_eq!(names(&p), ["a"]);
    // A gap right after the base names the base.
    let e = plan(&b, &archive[1..], &Target::Before(at("10:25:00"))).unwrap_err();
    assert!(
        e.to_string().starts_with("the archive stops at snap-10 "),
        "{e}"
    );
    assert_eq!(window(std::slice::from_ref(&b), &archive).len(), 1);
}

#[test]
fn a_reparent_continues_the_chain_and_another_history_is_not_followed() {
    let (b, mut archive) = scene();
    let after = set(&format!("{U}:1-260,{V}:1-50"));
    archive.push(inc("d", u("1-260"), after.clone(), "10:30:01", "10:40:00"));
    let r = reach(&b, &archive);
    assert_eq!(r.holds, after);
    assert_eq!(r.increments.len(), 4);
    // An increment of a history without 101-120 (errant, or another shard's) that would
    // otherwise follow: not taken, and named as another history.
    let (b, mut archive) = scene();
    archive.truncate(1);
    let mut other = inc(
        "x",
        u("1-150"),
        set(&format!("{U}:1-100:121-200")),
        "10:10:01",
        "10:20:00",
    );
    other.purged = u("1-10");
    archive.push(other);
    let r = reach(&b, &archive);
    assert_eq!(r.increments.len(), 1);
    let e = plan(&b, &archive, &Target::Before(at("10:15:00"))).unwrap_err();
    assert!(
        e.to_string()
            .ends_with("x would follow and no GTIDs (its history is another one) are missing"),
        "{e}"
    );
}

#[test]
fn the_newest_base_that_reaches_the_target_is_chosen() {
    let (newer, archive) = scene();
    let older = base("snap-09", u("1-50"), "09:00:00");
    let mut archive = archive;
    archive.insert(0, inc("o", u("1-40"), u("1-95"), "08:59:00", "09:58:00"));
    let bases = [older.clone(), newer.clone()];
    let p = choose(&bases, &archive, &Target::Before(at("10:15:00")), None).unwrap();
    assert_eq!((p.base.as_str(), names(&p)), ("snap-10", vec!["a", "b"]));
    let p = choose(&bases, &archive, &Target::Before(at("09:30:00")), None).unwrap();
    assert_eq!((p.base.as_str(), names(&p)), ("snap-09", vec!["o"]));
    // Forced: only that one, refused with its reason.
    let e = choose(
        &bases,
        &archive,
        &Target::Before(at("09:30:00")),
        Some("snap-10"),
    )
    .unwrap_err();
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].0, "snap-10");
    assert!(matches!(e[0].1, Refusal::CutAfterTarget { .. }));
    // None reaches: each says why, newest first.
    let e = choose(&bases, &archive, &Target::Before(at("11:00:00")), None).unwrap_err();
    let said: Vec<&str> = e.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(said, ["snap-10", "snap-09"]);
    // The window spans both bases' reach as one.
    assert_eq!(
        window(&bases, &archive),
        [Span {
            from: at("09:00:00"),
            to: at("10:30:00")
        }]
    );
}

#[test]
fn an_online_base_is_checked_after_restore_against_a_gtid_target() {
    let (mut b, archive) = scene();
    b.exactness = Exactness::LowerBound;
    let p = plan(&b, &archive, &Target::Through(u("1-175"))).unwrap();
    assert_eq!(p.base_check, BaseCheck::WithinTargetAfterRestore);
    let p = plan(&b, &archive, &Target::Before(at("10:15:00"))).unwrap();
    assert_eq!(p.base_check, BaseCheck::Recorded);
}

#[test]
fn windows_with_a_hole_stay_apart() {
    let (b, mut archive) = scene();
    archive.remove(1);
    let later = base("snap-1025", u("1-205"), "10:25:00");
    assert_eq!(
        window(&[b, later], &archive),
        [
            Span {
                from: at("10:00:00"),
                to: at("10:10:00")
            },
            Span {
                from: at("10:25:00"),
                to: at("10:30:00")
            }
        ]
    );
}

/// One source's linear history: a base at `1-b`, increments each `(from, to]` with their
/// last commit at second `to`. The model: from `b`, an increment that starts at or before
/// what is held and ends past it is followed, until none is; a GTID target `1-t` is
/// reachable when `b <= t <= reached`, a time target `s` when `b <= s <= reached`.
fn model_reach(b: u64, incs: &[(u64, u64)]) -> u64 {
    let mut held = b;
    while let Some(&(_, to)) = incs.iter().find(|&&(from, to)| from <= held && to > held) {
        held = to;
    }
    held
}

fn linear(b: u64, incs: &[(u64, u64)]) -> (Base, Vec<Increment>) {
    let base = Base {
        name: "base".into(),
        gtid: if b == 0 {
            GtidSet::empty(GtidFlavor::Mysql56)
        } else {
            u(&format!("1-{b}"))
        },
        exactness: Exactness::Exact,
        cut: at("00:00:00") + k8s_openapi::jiff::SignedDuration::from_secs(b as i64),
    };
    let archive = incs
        .iter()
        .enumerate()
        .map(|(n, &(from, to))| {
            let mut i = inc(
                &format!("i{n:02}"),
                if from == 0 {
                    GtidSet::empty(GtidFlavor::Mysql56)
                } else {
                    u(&format!("1-{from}"))
                },
                u(&format!("1-{to}")),
                "00:00:00",
                "00:00:00",
            );
            let second =
                |s: u64| at("00:00:00") + k8s_openapi::jiff::SignedDuration::from_secs(s as i64);
            i.purged = GtidSet::empty(GtidFlavor::Mysql56);
            i.first_commit = second(from + 1);
            i.last_commit = second(to);
            i.started = second(to);
            i
        })
        .collect();
    (base, archive)
}

proptest::proptest! {
    #[test]
    fn the_chain_agrees_with_the_model_of_a_linear_history(
        b in 0u64..40,
        spans in proptest::collection::vec((0u64..60, 1u64..20), 0..8),
        t in 1u64..80,
    ) {
        let incs: Vec<(u64, u64)> = spans.iter().map(|&(from, len)| (from, from + len)).collect();
        let (base, archive) = linear(b, &incs);
        let reached = model_reach(b, &incs);
        let r = reach(&base, &archive);
        let held = if reached == 0 { GtidSet::empty(GtidFlavor::Mysql56) } else { u(&format!("1-{reached}")) };
        proptest::prop_assert_eq!(&r.holds, &held);
        // A GTID target.
        let plan_gtid = plan(&base, &archive, &Target::Through(u(&format!("1-{t}"))));
        proptest::prop_assert_eq!(plan_gtid.is_ok(), b <= t && t <= reached, "{:?}", plan_gtid);
        if let Ok(p) = &plan_gtid {
            // The increments named, applied to the base, hold the target, and the last
            // one is needed.
            let mut got = base.gtid.clone();
            for name in &p.increments {
                let i = archive.iter().find(|i| &i.name == name).unwrap();
                got = got.union(&i.to).unwrap();
            }
            let target = u(&format!("1-{t}"));
            proptest::prop_assert!(target.is_subset_of(&got), "{:?}", p);
        }
        // A time target: commits are at second = transaction number.
        let when = at("00:00:00") + k8s_openapi::jiff::SignedDuration::from_secs(t as i64);
        let plan_time = plan(&base, &archive, &Target::Before(when));
        let last = r.last_commit.map(|c| c.as_second() - at("00:00:00").as_second());
        let reachable = last.is_some_and(|l| b <= t && (t as i64) <= l);
        proptest::prop_assert_eq!(plan_time.is_ok(), reachable, "{:?}", plan_time);
    }
}
