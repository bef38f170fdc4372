//! The replay: what runs beside the recovered mysqld, and the check of what it did
//! (docs/pitr.md §4). Pure: the caller runs the script where the binlogs and the server's
//! socket are (the recovery Pod's mysqld container) and reads `gtid_executed`.
//!
//! As Vitess applies its own incrementals (`go/vt/mysqlctl/mysqld.go`, `ApplyBinlogFile`):
//! one `mysqlbinlog … | mysql` per binlog in order, with `TZ=UTC` (mysqlbinlog reads
//! `--stop-datetime` in its own time zone), `--stop-datetime` for a time (it stops at the
//! first event at or after it: exclusive) or `--include-gtids` for a set (inclusive).
//! Transactions the server already holds are skipped by it (GTID auto-skip), so
//! `--skip-gtids` is never given. The time is taken at whole seconds, as Vitess does.

use std::path::PathBuf;

use k8s_openapi::jiff::Timestamp;
use k8s_openapi::jiff::tz::TimeZone;
use vtsnap_core::coverage::{Exactness, GtidSet};
use vtsnap_core::pitr::chain::{Base, Target};
use vtsnap_core::pitr::manifest::Increment;

/// How the script reaches the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Client {
    pub socket: String,
    pub user: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScriptError {
    #[error("{0:?} cannot be quoted for the shell (it holds a quote or a newline)")]
    Unquotable(String),
}

fn quoted(s: &str) -> Result<String, ScriptError> {
    if s.contains(['\'', '\n', '\0']) {
        return Err(ScriptError::Unquotable(s.to_owned()));
    }
    Ok(format!("'{s}'"))
}

/// `--stop-datetime`'s text of `t`: UTC, whole seconds.
pub fn stop_datetime(t: Timestamp) -> String {
    t.to_zoned(TimeZone::UTC)
        .strftime("%Y-%m-%d %H:%M:%S")
        .to_string()
}

/// What the script checks on the server itself, with `GTID_SUBSET`, before and after the
/// replay ([`guard`]); a failed check ends it with exit 3 and the reason on stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guard {
    /// Before: the restored base must be within this (an online base, a GTID target).
    pub base_within: Option<GtidSet>,
    /// After: the server holds nothing outside this (the base, the increments, the target).
    pub end_within: GtidSet,
    /// After: the server holds all of this (a GTID target).
    pub end_holds: Option<GtidSet>,
}

/// The checks of a replay of `increments` (their `to`s) onto `base` to `target`.
pub fn guard(base: &Base, increments: &[&Increment], target: &Target) -> Guard {
    match target {
        Target::Through(g) => Guard {
            base_within: (base.exactness == Exactness::LowerBound).then(|| g.clone()),
            end_within: g.clone(),
            end_holds: Some(g.clone()),
        },
        Target::Before(_) => Guard {
            base_within: None,
            end_within: increments.iter().fold(base.gtid.clone(), |held, i| {
                held.union(&i.to).unwrap_or_else(|| i.to.clone())
            }),
            end_holds: None,
        },
    }
}

/// What the script writes once the replay passed its checks (the recovery Pod's result,
/// docs/pitr.md §8): one JSON object with the bytes replayed, when the last transaction
/// applied began (a time target), and the server's `gtid_executed`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Where, as the server's container sees it.
    pub path: String,
    pub bytes: u64,
    /// Unix seconds.
    pub last_transaction: Option<u32>,
}

/// The bash script that replays `files` in order up to `target`, checked by `guard`, and
/// then writes `report` if asked.
pub fn script(
    files: &[PathBuf],
    target: &Target,
    client: &Client,
    guard: &Guard,
    report: Option<&Report>,
) -> Result<String, ScriptError> {
    let stop = match target {
        Target::Before(t) => format!("--stop-datetime={}", quoted(&stop_datetime(*t))?),
        Target::Through(g) => format!("--include-gtids={}", quoted(&g.to_string())?),
    };
    let mysql = format!(
        "mysql --no-defaults -S {} -u {}",
        quoted(&client.socket)?,
        quoted(&client.user)?
    );
    let subset = |a: &str, b: &str| format!("SELECT GTID_SUBSET({a}, {b})");
    let executed = "@@global.gtid_executed";
    let mut s = String::from("set -euo pipefail\nexport TZ=UTC\n");
    s.push_str(&format!(
        "check() {{ [ \"$({mysql} -N -B -e \"$2\")\" = 1 ] || {{ echo \"vtsnap-pitr: $1\" >&2; exit 3; }}; }}\n"
    ));
    if let Some(g) = &guard.base_within {
        let g = quoted(&g.to_string())?;
        s.push_str(&format!(
            "check 'the restored base holds transactions past the target' \"{}\"\n",
            subset(executed, &g)
        ));
    }
    // A Vitess tablet's server may start read-only; the replay writes.
    s.push_str(&format!("{mysql} -e 'SET GLOBAL super_read_only = OFF'\n"));
    for f in files {
        let path = quoted(&f.to_string_lossy())?;
        s.push_str(&format!("mysqlbinlog {stop} {path} | {mysql}\n"));
    }
    let within = quoted(&guard.end_within.to_string())?;
    s.push_str(&format!(
        "check 'the server holds transactions past the target or the archive' \"{}\"\n",
        subset(executed, &within)
    ));
    if let Some(g) = &guard.end_holds {
        let g = quoted(&g.to_string())?;
        s.push_str(&format!(
            "check 'the replay stopped short of the target' \"{}\"\n",
            subset(&g, executed)
        ));
    }
    if let Some(r) = report {
        // GTID sets hold only [0-9a-z:,_-] and the newlines between sources: JSON as is.
        s.push_str(&format!(
            "gtid=$({mysql} -N -B -e 'SELECT REPLACE(@@global.gtid_executed, CHAR(10), \"\")')\n"
        ));
        let last = r
            .last_transaction
            .map_or_else(|| "null".to_owned(), |t| t.to_string());
        s.push_str(&format!(
            "printf '{{\"bytes\":{},\"lastTransaction\":{last},\"gtidExecuted\":\"%s\"}}\\n' \"$gtid\" > {}\n",
            r.bytes,
            quoted(&r.path)?
        ));
    }
    Ok(s)
}

#[cfg(test)]
#[path = "replay_tests.rs"]
mod tests;
