//! The cron parser on arbitrary text: never a panic; a schedule it reads fires, if at all,
//! strictly after the time asked and on a minute boundary, in UTC and in a zone with DST.
//! Its staggered lines (the schedule reconciler's) are cron lines the same parser reads.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vtsnap_core::cron::{Schedule, TimeZone, Timestamp};
use vtsnap_core::schedule::Staggered;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(schedule) = Schedule::parse(text) else {
        return;
    };
    let after = Timestamp::from_second(1_800_000_017).unwrap_or(Timestamp::UNIX_EPOCH);
    let zones = [
        TimeZone::UTC,
        TimeZone::posix("CET-1CEST,M3.5.0,M10.5.0/3").unwrap_or(TimeZone::UTC),
    ];
    for tz in &zones {
        if let Some(next) = schedule.next_after(after, tz) {
            assert!(next > after, "{text:?}: {next} is not after {after}");
            assert_eq!(next.as_second() % 60, 0, "{text:?}: {next} is not on a minute");
        }
    }
    let stagger = std::time::Duration::from_secs(60 * (data.len() as u64 % 1500));
    for s in [Staggered::new(text, None), Staggered::new(text, Some(stagger))]
        .into_iter()
        .flatten()
    {
        assert!(s.window() >= 1);
        for offset in [0, 1, s.window() / 2, s.window() - 1, s.window()] {
            let line = s.at(offset);
            assert!(Schedule::parse(&line).is_ok(), "{text:?} at {offset}: {line:?}");
        }
    }
});
