//! Snapshot schedules that follow the shards (docs/design.md §5.8): a shard's CronJob runs
//! its policy's `snapshot.schedule` moved later by a stagger offset, so the shards of one
//! cluster do not all fence a replica at the same minute.
//!
//! A schedule of every N minutes (N dividing the hour, e.g. the binlog archive's
//! `*/15 * * * *`) is staggered by rotating its minutes inside each N-minute slot.
//!
//! The offset of a shard is a whole number of minutes below the stagger window. A shard
//! keeps the offset its CronJob records; a new shard starts at a hash of its name and takes
//! the next free minute. So offsets are distinct while there are no more shards than
//! minutes in the window, and adding a shard moves no other shard.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::cron::{CronError, Schedule, fields_of};
use crate::duration::GoDuration;

/// The schedule when a policy sets none: every six hours.
pub const DEFAULT_SCHEDULE: &str = "0 */6 * * *";
/// A drill's schedule when a policy sets none: daily (spread over the day by the stagger).
pub const DEFAULT_DRILL_SCHEDULE: &str = "0 3 * * *";
/// The binlog archive's: an increment every 15 minutes (Vitess's MySQL keeps binlogs 3 days).
pub const DEFAULT_PITR_SCHEDULE: &str = "*/15 * * * *";
const DAY_MINUTES: u32 = 24 * 60;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StaggerError {
    #[error(transparent)]
    Cron(#[from] CronError),
    #[error(
        "a staggered schedule runs at one minute of the hour (e.g. \"0 */6 * * *\") or every N minutes with N dividing 60 (e.g. \"*/15 * * * *\"), not {minute:?}; set its stagger: 0s to run {schedule:?} as written"
    )]
    MinuteNotOne { schedule: String, minute: String },
    #[error("stagger {} is longer than a day", GoDuration(*.0))]
    LongerThanADay(Duration),
    #[error(
        "stagger {} is longer than the schedule's shortest interval {} ({schedule:?}): shards whose offsets differ by the interval would run at the same minutes; use a stagger of at most {}",
        GoDuration(*stagger), GoDuration(*interval), GoDuration(*interval)
    )]
    LongerThanInterval {
        schedule: String,
        stagger: Duration,
        interval: Duration,
    },
    #[error(
        "stagger {} would move the {hour:02}:{minute:02} run of {schedule:?} past midnight, onto a day its day fields do not allow: use a smaller stagger or a schedule for every day",
        GoDuration(*stagger)
    )]
    PastMidnight {
        schedule: String,
        stagger: Duration,
        hour: u32,
        minute: u32,
    },
}

/// A schedule and the window its shards' offsets spread over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Staggered {
    /// The schedule as written; its minute and hour fields are rewritten per offset.
    schedule: String,
    /// The minutes of the hour it runs at, as far as the stagger moves them.
    minutes: Minutes,
    hours: u64,
    /// Day-of-month, month and day-of-week, as written.
    days: String,
    /// Offsets are `0..window` minutes; 1 means no stagger.
    window: u32,
}

/// The minute field's shape, as far as a stagger can move it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Minutes {
    /// Not staggered: run as written.
    AsWritten,
    /// One minute of the hour: moved later, into the next hours when it carries.
    One(u32),
    /// Every `period` minutes from `first` (`first < period`, `period` divides 60): each
    /// run moved later inside its slot, so the hours stay as written.
    Every {
        first: u32,
        period: u32,
        /// The hour field as written.
        hours: String,
    },
}

/// `Some((first, period))` when `minutes` (ascending) are every `period` minutes of the
/// hour from `first`, with more than one run an hour.
fn periodic(minutes: &[u32]) -> Option<(u32, u32)> {
    let (&first, &second) = (minutes.first()?, minutes.get(1)?);
    let period = second - first;
    let evenly = minutes.windows(2).all(|w| w[1] - w[0] == period);
    let whole_hour = u32::try_from(minutes.len()).ok()? * period == 60;
    (evenly && whole_hour).then_some((first, period))
}

fn hours_of(bits: u64) -> Vec<u32> {
    (0..24).filter(|h| bits & (1 << h) != 0).collect()
}

impl Staggered {
    /// `stagger`: the window (`None`: the shortest interval between two runs; zero: none).
    pub fn new(schedule: &str, stagger: Option<Duration>) -> Result<Self, StaggerError> {
        let parsed = Schedule::parse(schedule)?;
        let fields = fields_of(schedule.trim())?;
        let days = fields[2..].join(" ");
        let minutes: Vec<u32> = (0..60)
            .filter(|m| parsed.minutes() & (1 << m) != 0)
            .collect();
        let hours = hours_of(parsed.hours());
        let plain = |window| Self {
            schedule: schedule.trim().to_owned(),
            minutes: Minutes::AsWritten,
            hours: parsed.hours(),
            days: days.clone(),
            window,
        };
        if stagger.is_some_and(|s| s.as_secs() < 60) {
            return Ok(plain(1));
        }
        if let Some((first, period)) = periodic(&minutes) {
            let window = match stagger {
                None => period,
                Some(s) => {
                    let w = u32::try_from(s.as_secs() / 60).unwrap_or(u32::MAX);
                    if w > period {
                        return Err(StaggerError::LongerThanInterval {
                            schedule: schedule.trim().to_owned(),
                            stagger: s,
                            interval: Duration::from_secs(u64::from(period) * 60),
                        });
                    }
                    w
                }
            };
            return Ok(Self {
                minutes: Minutes::Every {
                    first,
                    period,
                    hours: fields[1].to_owned(),
                },
                window: window.max(1),
                ..plain(1)
            });
        }
        let [minute] = minutes.as_slice() else {
            return match stagger {
                None => Ok(plain(1)),
                Some(_) => Err(StaggerError::MinuteNotOne {
                    schedule: schedule.trim().to_owned(),
                    minute: fields[0].to_owned(),
                }),
            };
        };
        let minute = *minute;
        let (first, last) = match (hours.first(), hours.last()) {
            (Some(f), Some(l)) => (*f, *l),
            _ => return Ok(plain(1)),
        };
        // Minutes from the day's last run to midnight: a run moved further lands on the
        // next day, which a schedule restricted to some days may not allow.
        let to_midnight = DAY_MINUTES - (last * 60 + minute);
        // The shortest interval between two runs (across midnight too when every day runs):
        // offsets a whole interval apart give the same line (docs/design.md §5.8).
        let mut interval = hours.windows(2).map(|p| (p[1] - p[0]) * 60).min();
        if parsed.every_day() {
            let wrap = (first + 24 - last) * 60;
            interval = Some(interval.map_or(wrap, |g| g.min(wrap)));
        }
        let window = match stagger {
            Some(s) => {
                if s.as_secs() > u64::from(DAY_MINUTES) * 60 {
                    return Err(StaggerError::LongerThanADay(s));
                }
                let w = u32::try_from(s.as_secs() / 60).unwrap_or(DAY_MINUTES);
                if let Some(i) = interval
                    && w > i
                {
                    return Err(StaggerError::LongerThanInterval {
                        schedule: schedule.trim().to_owned(),
                        stagger: s,
                        interval: Duration::from_secs(u64::from(i) * 60),
                    });
                }
                if !parsed.every_day() && w > to_midnight {
                    return Err(StaggerError::PastMidnight {
                        schedule: schedule.trim().to_owned(),
                        stagger: s,
                        hour: last,
                        minute,
                    });
                }
                w
            }
            None if parsed.every_day() => interval.unwrap_or(DAY_MINUTES),
            None => interval.map_or(to_midnight, |g| g.min(to_midnight)),
        };
        Ok(Self {
            schedule: schedule.trim().to_owned(),
            minutes: Minutes::One(minute),
            hours: parsed.hours(),
            days,
            window: window.max(1),
        })
    }

    /// How many offsets (minutes) the shards spread over.
    pub fn window(&self) -> u32 {
        self.window
    }

    /// The cron line of the shard at `offset` (taken modulo the window): every run moved
    /// `offset` minutes later.
    pub fn at(&self, offset: u32) -> String {
        let offset = offset % self.window;
        if offset == 0 {
            return self.schedule.clone();
        }
        let minute = match &self.minutes {
            Minutes::AsWritten => return self.schedule.clone(),
            Minutes::One(minute) => *minute,
            Minutes::Every {
                first,
                period,
                hours,
            } => {
                let start = (first + offset) % period;
                let minutes: Vec<String> = (start..60)
                    .step_by(*period as usize)
                    .map(|m| m.to_string())
                    .collect();
                return format!("{} {hours} {}", minutes.join(","), self.days);
            }
        };
        let total = minute + offset;
        let carry = total / 60;
        let hours: BTreeSet<u32> = hours_of(self.hours)
            .into_iter()
            .map(|h| (h + carry) % 24)
            .collect();
        let hours = if hours.len() == 24 {
            "*".to_owned()
        } else {
            hours
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        format!("{} {hours} {}", total % 60, self.days)
    }
}

/// FNV-1a (64 bits) of `key`: stable across builds and platforms, unlike std's hasher.
fn fnv1a(key: &str) -> u64 {
    key.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Where a shard's offset search starts.
pub fn preferred_offset(key: &str, window: u32) -> u32 {
    u32::try_from(fnv1a(key) % u64::from(window.max(1))).unwrap_or(0)
}

/// The offsets of a group of shards, in the order given: `(key, the offset its CronJob
/// records)`. A recorded offset inside the window that no earlier shard holds is kept;
/// the others take the first free minute from their preferred one (in key order), or
/// their preferred one when every minute is taken.
pub fn assign(window: u32, shards: &[(String, Option<u32>)]) -> Vec<u32> {
    let window = window.max(1);
    let mut out: Vec<Option<u32>> = vec![None; shards.len()];
    let mut taken: BTreeSet<u32> = BTreeSet::new();
    let mut order: Vec<usize> = (0..shards.len()).collect();
    order.sort_by(|a, b| shards[*a].0.cmp(&shards[*b].0));
    for &i in &order {
        if let Some(o) = shards[i].1
            && o < window
            && taken.insert(o)
        {
            out[i] = Some(o);
        }
    }
    for &i in &order {
        if out[i].is_some() {
            continue;
        }
        let start = preferred_offset(&shards[i].0, window);
        let free = (0..window)
            .map(|k| (start + k) % window)
            .find(|o| !taken.contains(o));
        let o = free.unwrap_or(start);
        taken.insert(o);
        out[i] = Some(o);
    }
    out.into_iter().map(Option::unwrap_or_default).collect()
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
