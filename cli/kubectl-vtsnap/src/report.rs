//! How the plugin prints: a table for people (colour only on a terminal), JSON or YAML
//! for scripts (`-o`).

use serde::Serialize;

use vtsnap_snapshot::render::{CELL_MAX, cut};

use crate::decide::doctor::{Check, Level};
use crate::decide::status::{Coverage, NextRun, Status};

/// `-o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
    Yaml,
}

/// Whether the table may use colour (stdout is a terminal and `NO_COLOR` is unset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Colour {
    On,
    Off,
}

impl Colour {
    pub fn detect() -> Self {
        use std::io::IsTerminal;
        if std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none() {
            Self::On
        } else {
            Self::Off
        }
    }

    fn paint(self, level: Level, text: &str) -> String {
        let code = match level {
            Level::Fail => "31",
            Level::Warn => "33",
            Level::Pass => "32",
        };
        match self {
            Self::On => format!("\x1b[{code}m{text}\x1b[0m"),
            Self::Off => text.to_owned(),
        }
    }
}

/// JSON (pretty) or YAML of anything the plugin reports.
pub fn structured<T: Serialize>(value: &T, format: Format) -> String {
    let out = match format {
        Format::Yaml => serde_yaml_ng::to_string(value).map_err(|e| e.to_string()),
        Format::Json | Format::Table => serde_json::to_string_pretty(value)
            .map(|s| s + "\n")
            .map_err(|e| e.to_string()),
    };
    out.unwrap_or_else(|e| format!("cannot print the report: {e}\n"))
}

/// Columns padded to their widest cell. Callers cut cells with [`cut`] before painting them;
/// the pad is capped as well, so no cell can ask the formatter for a width beyond its limit.
fn columns(rows: &[Vec<String>]) -> String {
    let width = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..width)
        .map(|i| {
            rows.iter()
                .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
                .max()
                .unwrap_or(0)
                .min(CELL_MAX)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<w$}", w = widths[i]))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[derive(Serialize)]
struct DoctorReport<'a> {
    checks: &'a [Check],
    pass: usize,
    warn: usize,
    fail: usize,
}

pub fn doctor(checks: &[Check], format: Format, colour: Colour) -> String {
    let count = |l: Level| checks.iter().filter(|c| c.level == l).count();
    let (pass, warn, fail) = (count(Level::Pass), count(Level::Warn), count(Level::Fail));
    if format != Format::Table {
        return structured(
            &DoctorReport {
                checks,
                pass,
                warn,
                fail,
            },
            format,
        );
    }
    let mut out = String::new();
    for c in checks {
        let level: &'static str = c.level.into();
        out.push_str(&format!(
            "{} {:<20} {}\n",
            colour.paint(c.level, &format!("{level:<4}")),
            c.check,
            c.message
        ));
        if let Some(fix) = &c.fix {
            out.push_str(&format!("     {:<20} fix: {fix}\n", ""));
        }
    }
    out.push_str(&format!("{pass} pass, {warn} warn, {fail} fail\n"));
    out
}

fn age(seconds: i64) -> String {
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

pub fn status(st: &Status, format: Format, colour: Colour) -> String {
    if format != Format::Table {
        return structured(st, format);
    }
    // Arrays of one length: a cell cannot be added without its heading.
    const HEADINGS: [&str; 14] = [
        "SHARD", "NEWEST", "AGE", "MODE", "READY", "COVERED", "DRILL", "PITR", "SCHEDULE",
        "NEXT RUN", "LAST RUN", "FENCE", "RESTORES", "PROBLEMS",
    ];
    let mut rows = vec![HEADINGS.map(str::to_owned).to_vec()];
    for s in &st.shards {
        let newest = s.newest.as_ref();
        let row: [String; 14] = [
            s.shard.to_string(),
            newest.map_or_else(|| "-".to_owned(), |n| n.name.clone()),
            newest.map_or_else(|| "-".to_owned(), |n| age(n.age_seconds)),
            newest.map_or_else(|| "-".to_owned(), |n| n.mode.clone()),
            s.ready_snapshots.to_string(),
            match &s.coverage {
                Coverage::Covered {
                    headroom_seconds: Some(h),
                    ..
                } => format!("yes, {} left", age(i64::try_from(*h).unwrap_or(i64::MAX))),
                Coverage::Covered { .. } => "yes".to_owned(),
                Coverage::NoneCovered => "no".to_owned(),
                Coverage::Unknown { .. } => "?".to_owned(),
            },
            s.last_drill.as_ref().map_or_else(
                || "-".to_owned(),
                |d| match d.rto_ms {
                    Some(ms) if d.reason.is_none() => format!(
                        "{} {} ago, RTO {:.1}s",
                        d.result,
                        age(d.age_seconds),
                        ms as f64 / 1000.0
                    ),
                    _ => format!("{} {} ago", d.result, age(d.age_seconds)),
                },
            ),
            s.recoverable.as_ref().map_or_else(
                || "-".to_owned(),
                |r| match (r.spans.first(), r.spans.last(), r.end_age_seconds) {
                    (Some(first), Some(_), Some(end)) => format!(
                        "{} to {} ago{}",
                        first.from,
                        age(end),
                        if r.spans.len() > 1 {
                            format!(" ({} spans)", r.spans.len())
                        } else {
                            String::new()
                        }
                    ),
                    _ => "none".to_owned(),
                },
            ),
            match (&s.schedule, s.suspended) {
                (Some(c), false) => c.clone(),
                (Some(c), true) => format!("{c} (suspended)"),
                (None, _) => "-".to_owned(),
            },
            match &s.next_run {
                NextRun::At { in_seconds, .. } => format!("in {}", age(*in_seconds)),
                NextRun::Never => "never".to_owned(),
                NextRun::Unknown { .. } => "?".to_owned(),
            },
            s.last_run
                .as_ref()
                .map_or_else(|| "-".to_owned(), |r| format!("{} {}", r.job, r.result)),
            s.fence.as_ref().map_or_else(
                || "-".to_owned(),
                |f| format!("{} until {}", f.holder, f.expires),
            ),
            s.restores.len().to_string(),
            if s.problems.is_empty() {
                "none".to_owned()
            } else {
                s.problems.join("; ")
            },
        ];
        // Cut before painting: a cut must not drop the colour's reset.
        let mut row = row.map(|c| cut(&c).into_owned());
        let level = if s.problems.is_empty() {
            Level::Pass
        } else {
            Level::Fail
        };
        // The last cell: PROBLEMS.
        let problems = row.len() - 1;
        row[problems] = colour.paint(level, &row[problems]);
        rows.push(row.to_vec());
    }
    let mut out = columns(&rows);
    if !st.nodes.is_empty() {
        let mut nodes = vec![
            ["NODE", "TABLETS", "NODE HELPER"]
                .map(str::to_owned)
                .to_vec(),
        ];
        for n in &st.nodes {
            nodes.push(vec![
                cut(&n.node).into_owned(),
                n.tablets.to_string(),
                if n.helper_ready {
                    colour.paint(Level::Pass, "ready")
                } else {
                    colour.paint(Level::Fail, "missing or not ready")
                },
            ]);
        }
        out.push('\n');
        out.push_str(&columns(&nodes));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard_with_problem(problem: String) -> Status {
        use crate::decide::status::ShardStatus;
        Status {
            shards: vec![ShardStatus {
                shard: vtsnap_core::shard::ShardRef {
                    namespace: "vitess".into(),
                    cluster: "example".into(),
                    keyspace: "commerce".into(),
                    shard: vtsnap_core::naming::KeyRange {
                        start: String::new(),
                        end: String::new(),
                    },
                },
                newest: None,
                ready_snapshots: 0,
                coverage: Coverage::NoneCovered,
                schedule: None,
                suspended: false,
                next_run: NextRun::Never,
                last_run: None,
                last_drill: None,
                recoverable: None,
                fence: None,
                restores: vec![],
                problems: vec![problem],
            }],
            nodes: vec![crate::decide::status::NodeStatus {
                node: "n".repeat(70_000),
                tablets: 1,
                helper_ready: true,
            }],
        }
    }

    #[test]
    fn a_70_kb_unusable_reason_is_cut_in_the_table_and_whole_in_json() {
        // Round three item 7: a 70 KB `vtsnap.io/unusable` made `status` panic with
        // "Formatting argument out of range" (a padding width over 65,535).
        let reason = format!("the newest snapshot is unusable: {}", "u".repeat(70_000));
        let st = shard_with_problem(reason.clone());
        for colour in [Colour::Off, Colour::On] {
            let t = status(&st, Format::Table, colour);
            let lines: Vec<&str> = t.lines().collect();
            assert!(lines[1].starts_with("vitess/example/commerce/-  -"), "{t}");
            assert!(
                lines.iter().all(|l| l.chars().count() < 2 * CELL_MAX),
                "{t}"
            );
            let cut_reason = format!("{}…", &reason[..CELL_MAX - 1]);
            let shown = match colour {
                Colour::Off => cut_reason,
                Colour::On => format!("\x1b[31m{cut_reason}\x1b[0m"),
            };
            assert!(lines[1].ends_with(&shown), "{t}");
            assert!(lines[4].starts_with(&format!("{}…  1", "n".repeat(CELL_MAX - 1))));
        }
        let j: serde_json::Value =
            serde_json::from_str(&status(&st, Format::Json, Colour::Off)).unwrap_or_default();
        assert_eq!(j["shards"][0]["problems"][0], reason.as_str());
    }

    #[test]
    fn a_doctor_table_names_each_check_with_its_fix_and_counts_them() {
        let checks = vec![
            Check {
                check: "rbac",
                level: Level::Fail,
                message: "snapshot may not watch leases".into(),
                fix: Some("helm upgrade".into()),
            },
            Check {
                check: "config",
                level: Level::Pass,
                message: "valid".into(),
                fix: None,
            },
        ];
        let t = doctor(&checks, Format::Table, Colour::Off);
        assert_eq!(
            t,
            "fail rbac                 snapshot may not watch leases\n                          fix: helm upgrade\npass config               valid\n1 pass, 0 warn, 1 fail\n"
        );
        let j: serde_json::Value =
            serde_json::from_str(&doctor(&checks, Format::Json, Colour::Off)).unwrap_or_default();
        assert_eq!(j["fail"], 1);
        assert_eq!(j["checks"][0]["fix"], "helm upgrade");
        assert!(doctor(&checks, Format::Yaml, Colour::Off).contains("level: fail"));
        assert!(doctor(&checks, Format::Table, Colour::On).contains("\x1b[31mfail\x1b[0m"));
    }
}
