//! The CronJob controller's reading of schedules (robfig/cron v3 standard parser), and the
//! next run against hand-computed times, a simple model, and time zones.
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;

use super::*;

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn next(schedule: &str, after: &str) -> Option<String> {
    Schedule::parse(schedule)
        .unwrap()
        .next_after(t(after), &TimeZone::UTC)
        .map(|t| t.to_string())
}

#[test]
fn next_runs_of_common_schedules() {
    let at = "2026-12-01T10:07:30Z";
    for (schedule, want) in [
        ("* * * * *", "2026-12-01T10:08:00Z"),
        ("0 */6 * * *", "2026-12-01T12:00:00Z"),
        ("7 * * * *", "2026-12-01T11:07:00Z"),
        ("10 0,6,12,18 * * *", "2026-12-01T12:10:00Z"),
        ("@hourly", "2026-12-01T11:00:00Z"),
        ("@daily", "2026-12-02T00:00:00Z"),
        ("@weekly", "2026-12-06T00:00:00Z"),
        ("@monthly", "2027-01-01T00:00:00Z"),
        ("@yearly", "2027-01-01T00:00:00Z"),
        ("0 9 * * MON-FRI", "2026-12-02T09:00:00Z"),
        ("0 9 * DEC sat", "2026-12-05T09:00:00Z"),
        ("30 2 15 * *", "2026-12-15T02:30:00Z"),
        ("5/20 * * * *", "2026-12-01T10:25:00Z"),
        ("0 0 29 2 *", "2028-02-29T00:00:00Z"),
        // Both day fields restricted: either fires (the 13th, or a Friday).
        ("0 0 13 * 5", "2026-12-04T00:00:00Z"),
        // One of them `*`: both must hold.
        ("0 0 13 * *", "2026-12-13T00:00:00Z"),
        ("0 0 ? * 5", "2026-12-04T00:00:00Z"),
    ] {
        assert_eq!(next(schedule, at).as_deref(), Some(want), "{schedule}");
    }
    // February 30th never comes.
    assert_eq!(next("0 0 30 2 *", at), None);
    // Strictly after: a run at exactly `after` is not the next one.
    assert_eq!(
        next("0 12 * * *", "2026-12-01T12:00:00Z").as_deref(),
        Some("2026-12-02T12:00:00Z")
    );
}

#[test]
fn bad_schedules_are_refused_naming_what_is_wrong() {
    for (bad, says) in [
        ("", "0 fields"),
        ("* * * *", "4 fields"),
        ("* * * * * *", "6 fields"),
        ("60 * * * *", "minute: \"60\" is outside 0-59"),
        ("* 24 * * *", "hour"),
        ("* * 0 * *", "day-of-month"),
        ("* * * 13 *", "month"),
        ("* * * * 7", "day-of-week"),
        ("*/0 * * * *", "a step of 0"),
        ("5-1 * * * *", "ends before it starts"),
        ("x * * * *", "\"x\" is not a number"),
        ("+5 * * * *", "not a number"),
        ("1,,2 * * * *", "not a number"),
        ("* * * smarch *", "month"),
        ("@every 5m", "not a descriptor"),
        ("TZ=UTC 0 * * * *", "time zone"),
    ] {
        let e = Schedule::parse(bad).unwrap_err().to_string();
        assert!(e.contains(says), "{bad:?}: {e}");
    }
    let long = "1,".repeat(200) + " * * * *";
    assert_eq!(Schedule::parse(&long), Err(CronError::TooLong(long.len())));
}

#[test]
fn a_step_from_a_star_loses_the_star() {
    // robfig: `*/2` in day-of-week is a restriction (no star bit): either day fires.
    assert_eq!(
        next("0 0 1 * */2", "2026-12-01T10:00:00Z").as_deref(),
        Some("2026-12-03T00:00:00Z")
    );
    // `*/1` keeps the star: both must hold, so only the 1st.
    assert_eq!(
        next("0 0 1 * */1", "2026-12-01T10:00:00Z").as_deref(),
        Some("2027-01-01T00:00:00Z")
    );
}

#[test]
fn the_wall_clock_of_the_cronjob_s_time_zone_counts() {
    // Central European time as a POSIX rule (no tz database needed).
    let berlin = TimeZone::posix("CET-1CEST,M3.5.0,M10.5.0/3").unwrap();
    let s = Schedule::parse("0 3 * * *").unwrap();
    // 03:00 in Berlin is 02:00 UTC in winter.
    assert_eq!(
        s.next_after(t("2026-12-01T10:00:00Z"), &berlin),
        Some(t("2026-12-02T02:00:00Z"))
    );
    // 02:30 does not exist on 2027-03-28 in Berlin (clocks jump 02:00 → 03:00): it runs
    // at the later instant.
    let gap = Schedule::parse("30 2 28 3 *").unwrap();
    assert_eq!(
        gap.next_after(t("2027-03-27T00:00:00Z"), &berlin),
        Some(t("2027-03-28T01:30:00Z"))
    );
}

/// The model: every minute from `after`, the first whose fields all match.
fn model(s: &Schedule, after: Timestamp) -> Option<Timestamp> {
    let mut m = after.as_second() / 60 * 60 + 60;
    for _ in 0..(60 * 24 * 400) {
        let at = Timestamp::from_second(m).unwrap();
        let dt = at.to_zoned(TimeZone::UTC).datetime();
        let ok = s.minutes & (1 << dt.minute()) != 0
            && s.hours & (1 << dt.hour()) != 0
            && s.months & (1 << dt.month()) != 0
            && s.day_matches(dt.date());
        if ok {
            return Some(at);
        }
        m += 60;
    }
    None
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn next_after_is_the_models_first_match(
        minute in prop_oneof![Just("*".to_owned()), (0u32..60).prop_map(|v| v.to_string()), (1u32..30).prop_map(|v| format!("*/{v}"))],
        hour in prop_oneof![Just("*".to_owned()), (0u32..24).prop_map(|v| v.to_string()), (1u32..12).prop_map(|v| format!("{v}-23/3"))],
        dom in prop_oneof![Just("*".to_owned()), (1u32..32).prop_map(|v| v.to_string())],
        month in prop_oneof![Just("*".to_owned()), (1u32..13).prop_map(|v| v.to_string())],
        dow in prop_oneof![Just("*".to_owned()), Just("?".to_owned()), (0u32..7).prop_map(|v| v.to_string())],
        after in 1_700_000_000i64..1_900_000_000,
    ) {
        let s = Schedule::parse(&format!("{minute} {hour} {dom} {month} {dow}")).unwrap();
        let after = Timestamp::from_second(after).unwrap();
        let got = s.next_after(after, &TimeZone::UTC);
        // The model looks 400 days ahead; within that both agree.
        if let Some(want) = model(&s, after) {
            prop_assert_eq!(got, Some(want));
        } else if let Some(g) = got {
            prop_assert!(g.as_second() - after.as_second() > 400 * 86_400);
        }
    }
}

#[test]
fn a_schedule_that_never_fires_is_told_apart() {
    // Round three: Kubernetes takes these and never runs them.
    for never in [
        "0 0 30 2 *",
        "0 0 31 4 *",
        "0 0 30,31 2 ?",
        "0 0 31 2,4,6,9,11 *",
    ] {
        let s = Schedule::parse(never).unwrap();
        assert_eq!(s.check_fires(), Err(CronError::NeverFires), "{never}");
        assert!(
            s.next_after(t("2026-12-01T00:00:00Z"), &TimeZone::UTC)
                .is_none()
        );
    }
    // A leap day fires; a weekday restricted too widens the days (either fires); a day
    // that one allowed month has.
    for fires in [
        "0 0 29 2 *",
        "0 0 30 2 1",
        "0 0 31 * *",
        "0 0 30 2,3 *",
        "0 0 31 4 */2",
    ] {
        assert_eq!(
            Schedule::parse(fires).unwrap().check_fires(),
            Ok(()),
            "{fires}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// `check_fires` agrees with a search for the next run (which looks five years ahead,
    /// past a leap day).
    #[test]
    fn check_fires_agrees_with_next_after(
        dom in prop_oneof![Just("*".to_owned()), (28u32..32).prop_map(|v| v.to_string()), (29u32..32).prop_map(|v| format!("{v},30"))],
        month in prop_oneof![Just("*".to_owned()), (1u32..13).prop_map(|v| v.to_string()), (1u32..12).prop_map(|v| format!("{v},{}", v + 1))],
        dow in prop_oneof![Just("*".to_owned()), Just("?".to_owned()), (0u32..7).prop_map(|v| v.to_string())],
    ) {
        let s = Schedule::parse(&format!("0 0 {dom} {month} {dow}")).unwrap();
        let next = s.next_after(t("2026-12-01T00:00:00Z"), &TimeZone::UTC);
        prop_assert_eq!(s.check_fires().is_ok(), next.is_some());
    }
}
