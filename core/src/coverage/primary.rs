//! What a shard's primary no longer holds in its binlogs, read through vtctld's
//! `ExecuteFetchAsDBA` on the shard record's primary (docs/design.md §5.7):
//! - MySQL: `@@global.gtid_purged` and `@@global.binlog_expire_logs_seconds`;
//! - MariaDB: `SHOW BINARY LOGS` (the oldest is the first row), then
//!   `BINLOG_GTID_POS('<oldest>', 4)` (the position at its start) and
//!   `@@global.expire_logs_days`.
//!
//! Every answer is hostile until checked: a failed call, an unexpected shape, a binlog
//! name that is not a plain file name or a set that does not read is an error, and
//! nothing is decided on it.

use std::time::Duration;

use crate::coverage::{GtidSet, Purged, Text};
use crate::naming::{KeyRange, TabletAlias};
use crate::snapshot::GtidFlavor;
use crate::vtctld::VtctldClient;

/// The primary's binlogs, as far as coverage goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrimaryBinlogs {
    pub purged: Purged,
    /// How long a binlog is kept; `None` when it was not read, zero when binlogs do not
    /// expire by time.
    pub expiry: Option<Duration>,
}

/// The longest binlog file name read (MySQL and MariaDB allow at most 255 characters).
const MAX_BINLOG_NAME: usize = 255;

/// Reads the primary of `keyspace/shard` (its shard record's) through vtctld.
pub async fn read_primary(
    v: &VtctldClient,
    keyspace: &str,
    shard: &KeyRange,
) -> Result<PrimaryBinlogs, String> {
    let record = v
        .get_shard(keyspace, &shard.to_string())
        .await
        .map_err(|e| format!("GetShard: {e}"))?;
    let primary: TabletAlias = record
        .primary_alias
        .as_ref()
        .map(TabletAlias::from)
        .ok_or("the shard record names no primary")?;
    read_primary_at(v, &primary).await
}

/// [`read_primary`] for a caller that already read the shard record's primary (one
/// `GetShard` fewer).
pub async fn read_primary_at(
    v: &VtctldClient,
    primary: &TabletAlias,
) -> Result<PrimaryBinlogs, String> {
    let fetch = |query: String| async move {
        v.execute_fetch_as_dba(primary, &query, 1000)
            .await
            .map(|r| r.rows.iter().map(|row| row.cells()).collect::<Vec<_>>())
            .map_err(|e| format!("{query}: {e}"))
    };
    let version = one_row(
        fetch("SELECT @@version".into()).await?,
        1,
        "SELECT @@version",
    )?;
    let flavor = match version[0].as_deref() {
        Some(v) if v.contains("MariaDB") => GtidFlavor::Mariadb,
        Some(_) => GtidFlavor::Mysql56,
        None => return Err("SELECT @@version: NULL".into()),
    };
    match flavor {
        GtidFlavor::Mysql56 => {
            let q = "SELECT @@global.gtid_purged, @@global.binlog_expire_logs_seconds";
            let row = one_row(fetch(q.into()).await?, 2, q)?;
            let purged = GtidSet::parse(GtidFlavor::Mysql56, text(&row[0], q)?, Text::Server)
                .map_err(|e| format!("{q}: gtid_purged: {e}"))?;
            Ok(PrimaryBinlogs {
                purged: Purged::Mysql56(purged),
                expiry: seconds(row[1].as_deref()),
            })
        }
        GtidFlavor::Mariadb => {
            let logs = fetch("SHOW BINARY LOGS".into()).await?;
            let oldest = logs
                .first()
                .and_then(|r| r.first().cloned().flatten())
                .ok_or("SHOW BINARY LOGS: no binlog")?;
            let oldest = plain_file_name(&oldest)?;
            let q = format!("SELECT BINLOG_GTID_POS('{oldest}', 4), @@global.expire_logs_days");
            let row = one_row(fetch(q.clone()).await?, 2, &q)?;
            let start = GtidSet::parse(GtidFlavor::Mariadb, text(&row[0], &q)?, Text::Server)
                .map_err(|e| format!("{q}: {e}"))?;
            Ok(PrimaryBinlogs {
                purged: Purged::MariadbOldestBinlogStart(start),
                expiry: days(row[1].as_deref()),
            })
        }
    }
}

/// The one row of a query, with exactly `width` cells.
fn one_row(
    rows: Vec<Vec<Option<String>>>,
    width: usize,
    query: &str,
) -> Result<Vec<Option<String>>, String> {
    match <[Vec<Option<String>>; 1]>::try_from(rows) {
        Ok([row]) if row.len() == width => Ok(row),
        Ok([row]) => Err(format!("{query}: {} columns, not {width}", row.len())),
        Err(rows) => Err(format!("{query}: {} rows, not 1", rows.len())),
    }
}

fn text<'a>(cell: &'a Option<String>, query: &str) -> Result<&'a str, String> {
    cell.as_deref().ok_or_else(|| format!("{query}: NULL"))
}

/// A binlog file name embedded in SQL: a plain file name, or refused.
fn plain_file_name(name: &str) -> Result<&str, String> {
    let plain = !name.is_empty()
        && name.len() <= MAX_BINLOG_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && !name.starts_with('.');
    if plain {
        Ok(name)
    } else {
        Err(format!(
            "SHOW BINARY LOGS: {:?} is not a plain binlog file name",
            name.escape_debug().to_string()
        ))
    }
}

/// `binlog_expire_logs_seconds`: a whole number of seconds (0: no expiry by time).
fn seconds(v: Option<&str>) -> Option<Duration> {
    v?.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// `expire_logs_days`: days, possibly fractional (MariaDB), at most 99.
fn days(v: Option<&str>) -> Option<Duration> {
    let d: f64 = v?.trim().parse().ok()?;
    (d.is_finite() && (0.0..=99.0).contains(&d)).then(|| Duration::from_secs_f64(d * 86_400.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_of_the_wrong_shape_are_refused() {
        assert!(one_row(vec![], 1, "q").is_err());
        assert!(one_row(vec![vec![None], vec![None]], 1, "q").is_err());
        assert!(one_row(vec![vec![None, None]], 1, "q").is_err());
        assert_eq!(
            one_row(vec![vec![Some("x".into())]], 1, "q").unwrap(),
            [Some("x".into())]
        );
    }

    #[test]
    fn only_plain_binlog_names_reach_sql() {
        assert_eq!(
            plain_file_name("vt-0000000101-bin.000003"),
            Ok("vt-0000000101-bin.000003")
        );
        for bad in [
            "",
            "x'); DROP TABLE t; --",
            "../bin.1",
            ".hidden",
            "a b",
            "a\\b",
        ] {
            assert!(plain_file_name(bad).is_err(), "{bad:?}");
        }
        assert!(plain_file_name(&"a".repeat(256)).is_err());
    }

    #[test]
    fn expiry_settings_read_strictly() {
        assert_eq!(
            seconds(Some("2592000")),
            Some(Duration::from_secs(2_592_000))
        );
        assert_eq!(seconds(Some("-1")), None);
        assert_eq!(seconds(Some("x")), None);
        assert_eq!(days(Some("7")), Some(Duration::from_secs(7 * 86_400)));
        assert_eq!(days(Some("0.5")), Some(Duration::from_secs(43_200)));
        assert_eq!(days(Some("100")), None);
        assert_eq!(days(Some("NaN")), None);
        assert_eq!(days(None), None);
    }
}
