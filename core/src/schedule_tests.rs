//! Staggered schedules: the window, the rewritten cron line (checked against the runs the
//! CronJob controller's parser gives), and the offsets' spread and stability.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;
use crate::cron::{TimeZone, Timestamp};

fn h(n: u64) -> Option<Duration> {
    Some(Duration::from_secs(n * 3600))
}

#[test]
fn the_default_spreads_over_six_hours_and_moves_every_run() {
    let s = Staggered::new(DEFAULT_SCHEDULE, None).unwrap();
    assert_eq!(s.window(), 360);
    assert_eq!(s.at(0), "0 */6 * * *");
    assert_eq!(s.at(17), "17 0,6,12,18 * * *");
    assert_eq!(s.at(61), "1 1,7,13,19 * * *");
    assert_eq!(s.at(359), "59 5,11,17,23 * * *");
    // An offset is taken within the window.
    assert_eq!(s.at(360 + 17), s.at(17));
}

#[test]
fn the_window_is_the_shortest_interval_or_what_is_asked() {
    let w = |sched: &str, stagger| Staggered::new(sched, stagger).unwrap().window();
    assert_eq!(w("30 2 * * *", None), 24 * 60);
    assert_eq!(w("@daily", None), 24 * 60);
    assert_eq!(w("0 1,2,9 * * *", None), 60);
    assert_eq!(w("0 */6 * * *", h(1)), 60);
    assert_eq!(w("0 * * * *", None), 60);
    // A schedule of some days: never past the midnight after its last run.
    assert_eq!(w("0 22 * * 1-5", None), 120);
    assert_eq!(w("30 3,20 * * 1-5", None), 210);
    // Off: as written.
    assert_eq!(w("0 */6 * * *", Some(Duration::ZERO)), 1);
    assert_eq!(
        Staggered::new("0 */6 * * *", Some(Duration::ZERO))
            .unwrap()
            .at(5),
        "0 */6 * * *"
    );
    // Every N minutes (N dividing the hour): its period, or what is asked up to it.
    assert_eq!(w("*/15 * * * *", None), 15);
    assert_eq!(w("5,35 * * * *", None), 30);
    assert_eq!(w("*/15 * * * *", Some(Duration::from_secs(300))), 5);
    assert_eq!(w("*/15 * * * *", Some(Duration::ZERO)), 1);
    // Other minute lists run as written unless a stagger is asked of them.
    for uneven in ["*/7 * * * *", "0,10,50 * * * *", "0-29/15 * * * *"] {
        assert_eq!(w(uneven, None), 1, "{uneven}");
        assert_eq!(Staggered::new(uneven, None).unwrap().at(3), uneven);
    }
}

#[test]
fn every_n_minutes_rotates_inside_its_slot_and_keeps_its_hours() {
    let s = Staggered::new(DEFAULT_PITR_SCHEDULE, None).unwrap();
    assert_eq!(s.at(0), "*/15 * * * *");
    assert_eq!(s.at(7), "7,22,37,52 * * * *");
    assert_eq!(s.at(14), "14,29,44,59 * * * *");
    assert_eq!(
        s.at(15 + 7),
        s.at(7),
        "an offset is taken within the window"
    );
    let s = Staggered::new("10,40 9-17 * * 1-5", None).unwrap();
    assert_eq!(s.window(), 30);
    assert_eq!(s.at(25), "5,35 9-17 * * 1-5", "wraps inside the slot");
    let lines: BTreeSet<String> = (0..15)
        .map(|o| Staggered::new("*/15 * * * *", None).unwrap().at(o))
        .collect();
    assert_eq!(lines.len(), 15, "every offset its own line");
}

#[test]
fn a_stagger_it_cannot_write_is_an_error_that_says_why() {
    let e = |sched: &str, stagger| Staggered::new(sched, stagger).unwrap_err().to_string();
    assert!(
        e("*/7 * * * *", h(1)).contains("one minute of the hour"),
        "{}",
        e("*/7 * * * *", h(1))
    );
    assert!(
        e("*/15 * * * *", h(1)).contains("shortest interval 15m"),
        "{}",
        e("*/15 * * * *", h(1))
    );
    assert!(
        e("0 22 * * 1-5", h(3)).contains("22:00 run"),
        "{}",
        e("0 22 * * 1-5", h(3))
    );
    assert!(e("0 */6 * * *", h(25)).contains("longer than a day"));
    assert!(e("61 * * * *", None).contains("minute"));
    assert!(e("@every 1h", None).contains("@every"));
    // Exactly to midnight is allowed: the last offset is the minute before it.
    let s = Staggered::new("0 22 * * 1-5", h(2)).unwrap();
    assert_eq!(s.at(119), "59 23 * * 1-5");
}

#[test]
fn a_stagger_longer_than_the_shortest_interval_is_refused() {
    // Round three's reproduction: offsets 6h apart gave two shards one line.
    let e = Staggered::new(DEFAULT_SCHEDULE, h(24)).unwrap_err();
    assert_eq!(
        e,
        StaggerError::LongerThanInterval {
            schedule: DEFAULT_SCHEDULE.to_owned(),
            stagger: Duration::from_secs(24 * 3600),
            interval: Duration::from_secs(6 * 3600),
        }
    );
    assert!(
        e.to_string()
            .starts_with("stagger 24h is longer than the schedule's shortest interval 6h"),
        "{e}"
    );
    // The interval across midnight counts for a schedule of every day; uneven hours give
    // their shortest gap.
    let e = |sched: &str, stagger| Staggered::new(sched, stagger).map(|s| s.window());
    assert!(matches!(
        e("0 1,23 * * *", h(3)),
        Err(StaggerError::LongerThanInterval { .. })
    ));
    assert!(matches!(
        e("0 1,2,9 * * *", h(2)),
        Err(StaggerError::LongerThanInterval { .. })
    ));
    // Up to the interval is allowed, and gives every offset its own line.
    assert_eq!(e("0 */6 * * *", h(6)), Ok(360));
    assert_eq!(e("30 2 * * *", h(24)), Ok(24 * 60));
    let s = Staggered::new("0 1,2,9 * * *", h(1)).unwrap();
    let lines: BTreeSet<String> = (0..s.window()).map(|o| s.at(o)).collect();
    assert_eq!(lines.len(), 60);
}

#[test]
fn the_hash_is_fnv_1a() {
    // FNV-1a 64 of "a" (the published test vector).
    assert_eq!(fnv1a("a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a(""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(
        preferred_offset("a", 360),
        (0xaf63_dc4c_8601_ec8c_u64 % 360) as u32
    );
    assert_eq!(preferred_offset("a", 0), 0);
}

#[test]
fn recorded_offsets_stay_and_new_shards_take_free_minutes() {
    let k = |s: &str| s.to_owned();
    // Two shards that hash to the same minute of a one-minute window... and of a larger one
    // they get distinct minutes.
    let got = assign(4, &[(k("a"), Some(1)), (k("b"), Some(1)), (k("c"), None)]);
    assert_eq!(got[0], 1, "the first by key keeps its minute");
    assert_ne!(got[1], 1);
    assert_eq!(got.iter().collect::<BTreeSet<_>>().len(), 3);
    // A recorded offset outside the window is assigned again (the window's end is outside).
    let got = assign(2, &[(k("a"), Some(7))]);
    assert!(got[0] < 2);
    let got = assign(2, &[(k("a"), Some(2)), (k("b"), Some(2))]);
    assert!(got.iter().all(|o| *o < 2), "{got:?}");
    // More shards than minutes: every one still gets a minute inside the window.
    let got = assign(2, &[(k("a"), None), (k("b"), None), (k("c"), None)]);
    assert!(got.iter().all(|o| *o < 2), "{got:?}");
    assert_eq!(got.iter().collect::<BTreeSet<_>>().len(), 2);
}

/// Runs of `schedule` from `from` for `days` days (UTC).
fn runs(schedule: &str, from: Timestamp, days: i64) -> BTreeSet<i64> {
    let s = Schedule::parse(schedule).unwrap();
    let end = from.as_second() + days * 86_400;
    let mut out = BTreeSet::new();
    let mut t = from;
    while let Some(n) = s.next_after(t, &TimeZone::UTC) {
        if n.as_second() >= end {
            break;
        }
        out.insert(n.as_second());
        t = n;
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The rewritten line fires exactly `offset` minutes after each run of the schedule
    /// (the CronJob controller's reading of both).
    #[test]
    fn a_staggered_line_is_the_schedule_moved_by_its_offset(
        minute in 0u32..60,
        hours in prop::collection::btree_set(0u32..24, 1..6),
        weekdays in prop::option::of(prop::collection::btree_set(0u32..7, 1..4)),
        seed in any::<u32>(),
    ) {
        let hours: Vec<String> = hours.iter().map(u32::to_string).collect();
        let dow = weekdays.map_or_else(|| "*".to_owned(), |d| d.iter().map(u32::to_string).collect::<Vec<_>>().join(","));
        let schedule = format!("{minute} {} * * {dow}", hours.join(","));
        let s = Staggered::new(&schedule, None).unwrap();
        let offset = seed % s.window();
        let shifted = s.at(offset);
        let from = Timestamp::from_second(1_796_083_200).unwrap(); // 2026-12-01T00:00:00Z
        let base = runs(&schedule, from, 12);
        let moved = runs(&shifted, from, 12);
        let shift = i64::from(offset) * 60;
        // Compared away from the edges of the span read.
        let inside = |t: i64| t >= from.as_second() + 2 * 86_400 && t < from.as_second() + 10 * 86_400;
        let want: BTreeSet<i64> = base.iter().map(|t| t + shift).filter(|t| inside(*t)).collect();
        let got: BTreeSet<i64> = moved.into_iter().filter(|t| inside(*t)).collect();
        prop_assert_eq!(got, want, "{} at {} is {}", schedule, offset, shifted);
    }

    /// Every N minutes, moved by an offset below N: each run `offset` minutes later, none
    /// leaving its hour.
    #[test]
    fn an_every_n_minutes_line_is_each_run_moved_by_its_offset(
        period in prop::sample::select(vec![2u32, 3, 4, 5, 6, 10, 12, 15, 20, 30]),
        first_seed in any::<u32>(),
        hours in prop::option::of(prop::collection::btree_set(0u32..24, 1..6)),
        seed in any::<u32>(),
    ) {
        let first = first_seed % period;
        let minutes: Vec<String> = (first..60).step_by(period as usize).map(|m| m.to_string()).collect();
        let hours = hours.map_or_else(|| "*".to_owned(), |h| h.iter().map(u32::to_string).collect::<Vec<_>>().join(","));
        let schedule = format!("{} {hours} * * *", minutes.join(","));
        let s = Staggered::new(&schedule, None).unwrap();
        prop_assert_eq!(s.window(), period);
        let offset = seed % period;
        let shifted = s.at(offset);
        let from = Timestamp::from_second(1_796_083_200).unwrap(); // 2026-12-01T00:00:00Z
        let base = runs(&schedule, from, 3);
        let moved = runs(&shifted, from, 3);
        let shift = i64::from(offset) * 60;
        // Each run moved later inside its slot (of `period` minutes from the hour).
        let slot = i64::from(period) * 60;
        // Compared away from the edges of the span read.
        let inside = |t: &i64| *t >= from.as_second() + 3600 && *t < from.as_second() + 2 * 86_400;
        let want: BTreeSet<i64> = base.iter().map(|t| {
            let start = t - t.rem_euclid(3600) + (t.rem_euclid(3600) / slot) * slot;
            start + (t - start + shift) % slot
        }).filter(inside).collect();
        let got: BTreeSet<i64> = moved.into_iter().filter(inside).collect();
        prop_assert!(got == want, "{} at {} is {}: {} runs, {} wanted", schedule, offset, shifted, got.len(), want.len());
    }

    /// Distinct minutes while they last; a shard added later moves no other; a second
    /// assignment from the recorded offsets changes nothing.
    #[test]
    fn offsets_spread_stay_put_and_are_idempotent(
        keys in prop::collection::btree_set("[a-z]{1,6}/-?[0-9a-f]{0,2}", 1..40),
        extra in "[a-z]{1,6}/-?[0-9a-f]{0,2}",
        window in 1u32..120,
    ) {
        let keys: Vec<String> = keys.into_iter().collect();
        let first = assign(window, &keys.iter().map(|k| (k.clone(), None)).collect::<Vec<_>>());
        prop_assert!(first.iter().all(|o| *o < window));
        let distinct = first.iter().collect::<BTreeSet<_>>().len();
        prop_assert_eq!(distinct, keys.len().min(window as usize));
        let recorded: Vec<(String, Option<u32>)> = keys.iter().cloned().zip(first.iter().map(|o| Some(*o))).collect();
        prop_assert_eq!(&assign(window, &recorded), &first);
        if !keys.contains(&extra) {
            let mut more = recorded.clone();
            more.push((extra.clone(), None));
            let again = assign(window, &more);
            prop_assert_eq!(&again[..keys.len()], &first[..]);
            if keys.len() < window as usize {
                prop_assert!(!first.contains(&again[keys.len()]));
            }
        }
    }
}
