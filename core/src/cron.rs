//! Cron schedules as the Kubernetes CronJob controller reads them: its parser is
//! robfig/cron v3's standard one (`cron.ParseStandard`; `parser.go` there). Five fields,
//! minute hour day-of-month month day-of-week, each `*` or `?`, a value, a range `a-b`,
//! a step (`*/n`, `a-b/n`, `a/n` = `a-max/n`), or a comma list of them; month names
//! `jan`–`dec` and weekday names `sun`–`sat` in any case; weekdays 0–6 (Sunday 0); the
//! descriptors `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`,
//! `@hourly`. When day-of-month and day-of-week are both restricted a day matching either
//! fires; when one is `*` or `?` (without a step above 1) both must match (robfig's
//! `dayMatches` and its star bit). `TZ=` prefixes and `@every` are refused: Kubernetes
//! refuses the first, and an interval is not a calendar.

use k8s_openapi::jiff::ToSpan;
use k8s_openapi::jiff::civil::{Date, DateTime};
/// The time types of [`Schedule::next_after`] (for callers without their own jiff).
pub use k8s_openapi::jiff::{Timestamp, tz::TimeZone};

/// The longest schedule read (a real one is a few dozen bytes).
pub const MAX_LEN: usize = 256;
/// How far ahead a next run is looked for: a schedule such as `0 0 29 2 1` (February
/// 29th or a Monday) fires within this; `0 0 30 2 *` never does.
const HORIZON_DAYS: i64 = 5 * 366;

/// A parsed schedule: the values each field allows, as bit sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    minutes: u64,
    hours: u64,
    days: u64,
    months: u64,
    weekdays: u64,
    /// Day-of-month or day-of-week was `*`/`?` (robfig's star bit).
    day_star: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CronError {
    #[error("a schedule of {0} bytes is too long (at most {MAX_LEN})")]
    TooLong(usize),
    #[error("{0} fields, not 5 (minute hour day-of-month month day-of-week)")]
    FieldCount(usize),
    #[error("{0:?} is not a descriptor this reads (@yearly, @monthly, @weekly, @daily, @hourly)")]
    Descriptor(String),
    #[error("a time zone in the schedule is not allowed (use the CronJob's timeZone)")]
    TimeZonePrefix,
    #[error("{field}: {why}")]
    Field { field: &'static str, why: String },
    #[error(
        "never fires: no month it allows has a day of the month it allows (e.g. February 30th), and its day-of-week field is `*` (a restricted one would fire on those weekdays too)"
    )]
    NeverFires,
}

struct Spec {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const MONTHS: &[&str] = &[
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const WEEKDAYS: &[&str] = &["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

const FIELDS: [Spec; 5] = [
    Spec {
        name: "minute",
        min: 0,
        max: 59,
        names: &[],
    },
    Spec {
        name: "hour",
        min: 0,
        max: 23,
        names: &[],
    },
    Spec {
        name: "day-of-month",
        min: 1,
        max: 31,
        names: &[],
    },
    Spec {
        name: "month",
        min: 1,
        max: 12,
        names: MONTHS,
    },
    Spec {
        name: "day-of-week",
        min: 0,
        max: 6,
        names: WEEKDAYS,
    },
];

fn field_error(spec: &Spec, why: String) -> CronError {
    CronError::Field {
        field: spec.name,
        why,
    }
}

/// A value: digits only, or a name of the field (names count from the field's minimum).
fn value(text: &str, spec: &Spec) -> Result<u32, CronError> {
    let lower = text.to_ascii_lowercase();
    if let Some(i) = spec.names.iter().position(|n| *n == lower) {
        return Ok(spec.min + u32::try_from(i).unwrap_or(u32::MAX));
    }
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) || text.len() > 3 {
        return Err(field_error(spec, format!("{text:?} is not a number")));
    }
    text.parse()
        .map_err(|_| field_error(spec, format!("{text:?} is not a number")))
}

/// One field: its bit set, and whether it was `*`/`?` without a step above 1.
fn field(text: &str, spec: &Spec) -> Result<(u64, bool), CronError> {
    let mut bits = 0u64;
    let mut star = false;
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => (r, Some(s)),
            None => (part, None),
        };
        let any = range == "*" || range == "?";
        let (lo, mut hi) = if any {
            (spec.min, spec.max)
        } else if let Some((a, b)) = range.split_once('-') {
            (value(a, spec)?, value(b, spec)?)
        } else {
            let v = value(range, spec)?;
            (v, v)
        };
        let step = match step {
            None => 1,
            Some(s) => {
                let n = value(
                    s,
                    &Spec {
                        names: &[],
                        ..*spec
                    },
                )
                .map_err(|_| field_error(spec, format!("step {s:?} is not a number")))?;
                // `a/n` is `a-max/n`.
                if !any && !range.contains('-') {
                    hi = spec.max;
                }
                n
            }
        };
        if step == 0 {
            return Err(field_error(spec, "a step of 0".into()));
        }
        if lo < spec.min || hi > spec.max {
            return Err(field_error(
                spec,
                format!("{part:?} is outside {}-{}", spec.min, spec.max),
            ));
        }
        if lo > hi {
            return Err(field_error(spec, format!("{part:?} ends before it starts")));
        }
        star |= any && step == 1;
        let mut v = lo;
        while v <= hi {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok((bits, star))
}

/// The five fields of a schedule, a descriptor (`@daily`) written out; `text` trimmed.
pub fn fields_of(text: &str) -> Result<Vec<&str>, CronError> {
    let expanded = match text {
        "@yearly" | "@annually" => "0 0 1 1 *",
        "@monthly" => "0 0 1 * *",
        "@weekly" => "0 0 * * 0",
        "@daily" | "@midnight" => "0 0 * * *",
        "@hourly" => "0 * * * *",
        d if d.starts_with('@') => return Err(CronError::Descriptor(d.to_owned())),
        t => t,
    };
    Ok(expanded.split_whitespace().collect())
}

impl Schedule {
    /// The minutes it runs at, as bits 0–59.
    pub fn minutes(&self) -> u64 {
        self.minutes
    }

    /// The hours it runs at, as bits 0–23.
    pub fn hours(&self) -> u64 {
        self.hours
    }

    /// Whether it runs on every day of every month (its day and month fields allow all).
    pub fn every_day(&self) -> bool {
        let all_days = (1..=31).all(|d| self.days & (1 << d) != 0);
        let all_weekdays = (0..=6).all(|d| self.weekdays & (1 << d) != 0);
        let all_months = (1..=12).all(|m| self.months & (1 << m) != 0);
        // With the star bit both must match (both allow all); without it either does.
        let days = if self.day_star {
            all_days && all_weekdays
        } else {
            all_days || all_weekdays
        };
        days && all_months
    }

    pub fn parse(text: &str) -> Result<Self, CronError> {
        if text.len() > MAX_LEN {
            return Err(CronError::TooLong(text.len()));
        }
        let text = text.trim();
        if text.starts_with("TZ=") || text.starts_with("CRON_TZ=") {
            return Err(CronError::TimeZonePrefix);
        }
        let fields = fields_of(text)?;
        let [minute, hour, dom, month, dow] = fields.as_slice() else {
            return Err(CronError::FieldCount(fields.len()));
        };
        let (minutes, _) = field(minute, &FIELDS[0])?;
        let (hours, _) = field(hour, &FIELDS[1])?;
        let (days, dom_star) = field(dom, &FIELDS[2])?;
        let (months, _) = field(month, &FIELDS[3])?;
        let (weekdays, dow_star) = field(dow, &FIELDS[4])?;
        Ok(Self {
            minutes,
            hours,
            days,
            months,
            weekdays,
            day_star: dom_star || dow_star,
        })
    }

    /// `Err(NeverFires)` when no date matches its day and month fields (`0 0 30 2 *`,
    /// `0 0 31 4 *`). Kubernetes accepts such a CronJob and never runs it.
    pub fn check_fires(&self) -> Result<(), CronError> {
        // Days of each month, February in a leap year (robfig fires on February 29th).
        const MONTH_DAYS: [u32; 13] = [0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
        // Both day fields restricted: either fires, and every month has every weekday.
        if !self.day_star {
            return Ok(());
        }
        // Otherwise both must match; a month has every weekday, so the day of the month decides.
        let fits = (0u32..).zip(MONTH_DAYS).any(|(m, len)| {
            self.months & (1 << m) != 0 && (1..=len).any(|d| self.days & (1 << d) != 0)
        });
        if fits {
            Ok(())
        } else {
            Err(CronError::NeverFires)
        }
    }

    fn day_matches(&self, d: Date) -> bool {
        let dom = self.days & (1 << d.day()) != 0;
        let dow = self.weekdays & (1 << d.weekday().to_sunday_zero_offset()) != 0;
        if self.day_star {
            dom && dow
        } else {
            dom || dow
        }
    }

    /// The first run strictly after `after`, with the wall clock of `tz`; `None` when it
    /// does not fire within five years (e.g. February 30th).
    pub fn next_after(&self, after: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        let start = after.to_zoned(tz.clone()).datetime();
        let first_day = start.date();
        for offset in 0..HORIZON_DAYS {
            let day = first_day.checked_add(offset.days()).ok()?;
            if self.months & (1 << day.month()) == 0 || !self.day_matches(day) {
                continue;
            }
            for hour in 0..24i8 {
                if self.hours & (1 << hour) == 0 {
                    continue;
                }
                for minute in 0..60i8 {
                    if self.minutes & (1 << minute) == 0 {
                        continue;
                    }
                    let at = DateTime::new(day.year(), day.month(), day.day(), hour, minute, 0, 0)
                        .ok()?;
                    if at <= start {
                        continue;
                    }
                    // A wall-clock time in a DST gap runs at the later instant.
                    let t = tz.to_ambiguous_timestamp(at).later().ok()?;
                    if t > after {
                        return Some(t);
                    }
                }
            }
        }
        None
    }
}

#[cfg(test)]
#[path = "cron_tests.rs"]
mod tests;
