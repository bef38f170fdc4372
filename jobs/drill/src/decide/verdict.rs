//! Decide, for the checker: what the restored server showed, judged against what the
//! snapshot recorded (docs/design.md §5.9). Pure: the probe gathers, this says passed or
//! failed and why, naming the table or the missing transactions.

use serde::Serialize;
use vtsnap_core::coverage::{Exactness, GtidSet, Text};
use vtsnap_core::k8s_names::{cut_to_bytes, escape_controls};

/// At most this many failed tables are named in a reason.
pub const NAMED_TABLES: usize = 5;

/// A reason is cut to this many bytes: the verdict travels in a container's termination
/// message (4096 bytes at most), every byte of it possibly escaped in JSON.
pub const MAX_REASON_BYTES: usize = 1024;

/// What the snapshot promises about the restored server's position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expectation {
    /// The recorded position (`vtsnap.io/gtid-executed`, or `gtid-lower-bound` online).
    pub position: GtidSet,
    pub exactness: Exactness,
}

impl Expectation {
    /// From the snapshot's annotation value (a Vitess position).
    pub fn parse(position: &str, exactness: Exactness) -> Result<Self, String> {
        GtidSet::parse_position(position, Text::Strict)
            .map(|position| Self {
                position,
                exactness,
            })
            .map_err(|e| format!("the recorded position {position:?} does not read: {e}"))
    }
}

/// One table's `CHECK TABLE … QUICK`, as the server answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TableCheck {
    /// `schema.table`.
    pub table: String,
    /// `None`: every row said OK. Else the server's words (or the query's error).
    pub problem: Option<String>,
}

/// What the probe saw on the restored server.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Observed {
    /// The server's executed set as it printed it (`gtid_binlog_pos` / `gtid_executed`).
    pub position: Option<String>,
    /// The tables of the user schemas.
    pub tables_total: usize,
    pub checks: Vec<TableCheck>,
}

/// Where a drill's check failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Failure {
    /// The server did not answer on its socket in time (crash recovery failed or hung).
    NotReady,
    /// The position could not be read, or does not read as a GTID set.
    PositionUnreadable,
    /// Cold: the restored position differs from the recorded one.
    PositionDiffers,
    /// Online: transactions of the recorded lower bound are missing.
    PositionBehind,
    /// A table did not open or check.
    TableCorrupt,
}

/// The checker's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    pub passed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub tables_total: usize,
    pub tables_checked: usize,
    /// Not every table was checked within the budget.
    pub sampled: bool,
}

impl Verdict {
    fn failed(failure: Failure, reason: String, o: &Observed) -> Self {
        Self {
            passed: false,
            failure: Some(failure),
            reason: Some(cut_to_bytes(&reason, MAX_REASON_BYTES).to_owned()),
            ..Self::counts(o)
        }
    }

    fn counts(o: &Observed) -> Self {
        Self {
            passed: true,
            failure: None,
            reason: None,
            tables_total: o.tables_total,
            tables_checked: o.checks.len(),
            sampled: o.checks.len() < o.tables_total,
        }
    }

    /// The server never answered.
    pub fn not_ready(why: &str) -> Self {
        Self::failed(
            Failure::NotReady,
            format!(
                "mysqld did not answer on its socket: {}",
                escape_controls(why)
            ),
            &Observed::default(),
        )
    }
}

/// The position first (a wrong position is a wrong restore, whatever the tables), then
/// the tables.
pub fn judge(expect: &Expectation, o: &Observed) -> Verdict {
    if let Err((failure, reason)) = position(expect, o.position.as_deref()) {
        return Verdict::failed(failure, reason, o);
    }
    let bad: Vec<&TableCheck> = o.checks.iter().filter(|c| c.problem.is_some()).collect();
    if let Some(first) = bad.first() {
        let mut reason = format!(
            "table {}: {}",
            escape_controls(&first.table),
            escape_controls(first.problem.as_deref().unwrap_or_default())
        );
        let others: Vec<String> = bad[1..]
            .iter()
            .take(NAMED_TABLES - 1)
            .map(|c| escape_controls(&c.table).into_owned())
            .collect();
        if !others.is_empty() {
            reason.push_str(&format!("; also {}", others.join(", ")));
        }
        if bad.len() > NAMED_TABLES {
            reason.push_str(&format!(" and {} more", bad.len() - NAMED_TABLES));
        }
        return Verdict::failed(Failure::TableCorrupt, reason, o);
    }
    Verdict::counts(o)
}

fn position(expect: &Expectation, seen: Option<&str>) -> Result<(), (Failure, String)> {
    let Some(seen) = seen else {
        return Err((
            Failure::PositionUnreadable,
            "the restored server did not report its GTID position".to_owned(),
        ));
    };
    let restored = GtidSet::parse(expect.position.flavor(), seen, Text::Server).map_err(|e| {
        (
            Failure::PositionUnreadable,
            format!(
                "the restored position {:?} does not read: {e}",
                escape_controls(seen)
            ),
        )
    })?;
    if let Some(missing) = lacking(&expect.position, &restored) {
        let failure = match expect.exactness {
            Exactness::Exact => Failure::PositionDiffers,
            Exactness::LowerBound => Failure::PositionBehind,
        };
        return Err((
            failure,
            format!(
                "the restored server lacks {missing} of the recorded position (it has {:?})",
                escape_controls(seen)
            ),
        ));
    }
    if expect.exactness == Exactness::Exact
        && let Some(extra) = lacking(&restored, &expect.position)
    {
        return Err((
            Failure::PositionDiffers,
            format!(
                "the restored server has {extra} beyond the recorded position (a cold snapshot is exact)"
            ),
        ));
    }
    Ok(())
}

/// What of `a` is not in `b`, when anything is (both of one flavor: `b` was read as
/// `a`'s).
fn lacking(a: &GtidSet, b: &GtidSet) -> Option<String> {
    a.missing_from(b).filter(|m| !m.is_empty())
}

/// Whether the rows of one `CHECK TABLE` say the table is sound: every row's `Msg_type`
/// is `status` (or `note`/`info`), and the last `status` says OK; else the words of the
/// first row that is not.
pub fn table_problem(rows: &[(String, String)]) -> Option<String> {
    let mut status_ok = false;
    for (kind, text) in rows {
        match kind.to_ascii_lowercase().as_str() {
            "status" => {
                status_ok = text.eq_ignore_ascii_case("ok")
                    || text.eq_ignore_ascii_case("table is already up to date");
                if !status_ok {
                    return Some(format!("{kind}: {text}"));
                }
            }
            "note" | "info" => {}
            _ => return Some(format!("{kind}: {text}")),
        }
    }
    (!status_ok).then(|| "CHECK TABLE returned no status".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cold(p: &str) -> Expectation {
        Expectation::parse(p, Exactness::Exact).unwrap()
    }

    fn online(p: &str) -> Expectation {
        Expectation::parse(p, Exactness::LowerBound).unwrap()
    }

    fn seen(position: &str, checks: &[(&str, Option<&str>)], total: usize) -> Observed {
        Observed {
            position: Some(position.into()),
            tables_total: total,
            checks: checks
                .iter()
                .map(|(t, p)| TableCheck {
                    table: (*t).into(),
                    problem: p.map(str::to_owned),
                })
                .collect(),
        }
    }

    #[test]
    fn a_cold_restore_passes_only_at_exactly_its_position() {
        let e = cold("MariaDB/0-1-100");
        let v = judge(&e, &seen("0-1-100", &[("shop.orders", None)], 1));
        assert!(v.passed, "{v:?}");
        assert_eq!((v.tables_total, v.tables_checked, v.sampled), (1, 1, false));
        let behind = judge(&e, &seen("0-1-99", &[], 0));
        assert_eq!(behind.failure, Some(Failure::PositionDiffers));
        assert!(behind.reason.unwrap().contains("lacks 0-1-100"));
        let ahead = judge(&e, &seen("0-1-101", &[], 0));
        assert_eq!(ahead.failure, Some(Failure::PositionDiffers));
        assert!(
            ahead
                .reason
                .unwrap()
                .contains("beyond the recorded position")
        );
        let other_domain = judge(&e, &seen("0-1-100,1-1-5", &[], 0));
        assert_eq!(other_domain.failure, Some(Failure::PositionDiffers));
        let m = cold("MySQL56/3e11fa47-71ca-11e1-9e33-c80aa9429562:1-100");
        assert!(
            judge(
                &m,
                &seen("3E11FA47-71CA-11E1-9E33-C80AA9429562:1-100\n", &[], 0)
            )
            .passed
        );
        assert!(
            !judge(
                &m,
                &seen("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-99", &[], 0)
            )
            .passed
        );
    }

    #[test]
    fn an_online_restore_passes_at_or_beyond_its_lower_bound() {
        let e = online("MariaDB/0-1-100");
        assert!(judge(&e, &seen("0-1-100", &[], 0)).passed);
        assert!(judge(&e, &seen("0-1-140", &[], 0)).passed);
        let v = judge(&e, &seen("0-1-99", &[], 0));
        assert_eq!(v.failure, Some(Failure::PositionBehind));
    }

    #[test]
    fn an_unreadable_position_fails_and_says_so() {
        let e = cold("MariaDB/0-1-100");
        let none = judge(&e, &Observed::default());
        assert_eq!(none.failure, Some(Failure::PositionUnreadable));
        let garbage = judge(&e, &seen("0-1-1\u{1b}[2J", &[], 0));
        assert_eq!(garbage.failure, Some(Failure::PositionUnreadable));
        assert!(garbage.reason.unwrap().contains("\\u{1b}"), "escaped");
        assert!(Expectation::parse("nonsense", Exactness::Exact).is_err());
    }

    #[test]
    fn a_damaged_table_fails_the_drill_by_name_after_the_position() {
        let e = cold("MariaDB/0-1-100");
        let checks = [
            ("shop.customers", None),
            (
                "shop.orders",
                Some("error: Table 'orders' is marked as crashed"),
            ),
            ("shop.items", Some("Error: Tablespace is missing")),
        ];
        let v = judge(&e, &seen("0-1-100", &checks, 10));
        assert_eq!(v.failure, Some(Failure::TableCorrupt));
        assert_eq!(
            v.reason.as_deref(),
            Some("table shop.orders: error: Table 'orders' is marked as crashed; also shop.items")
        );
        assert_eq!((v.tables_total, v.tables_checked, v.sampled), (10, 3, true));
        // A wrong position is reported before any table.
        let v = judge(&e, &seen("0-1-5", &checks, 3));
        assert_eq!(v.failure, Some(Failure::PositionDiffers));
        // Many: five named, the rest counted.
        let many: Vec<(String, Option<&str>)> = (0..8)
            .map(|i| (format!("db.t{i}"), Some("corrupt")))
            .collect();
        let many: Vec<(&str, Option<&str>)> = many.iter().map(|(t, p)| (t.as_str(), *p)).collect();
        let reason = judge(&e, &seen("0-1-100", &many, 8)).reason.unwrap();
        assert_eq!(
            reason,
            "table db.t0: corrupt; also db.t1, db.t2, db.t3, db.t4 and 3 more"
        );
        // Exactly as many as are named: none more.
        let reason = judge(&e, &seen("0-1-100", &many[..NAMED_TABLES], 8))
            .reason
            .unwrap();
        assert_eq!(
            reason,
            "table db.t0: corrupt; also db.t1, db.t2, db.t3, db.t4"
        );
    }

    #[test]
    fn a_long_reason_fits_a_termination_message_as_json() {
        let e = cold("MariaDB/0-1-100");
        let table = "é\"".repeat(2000);
        let v = judge(
            &e,
            &seen("0-1-100", &[(table.as_str(), Some("\\ broken"))], 1),
        );
        let report = crate::check::CheckReport {
            verdict: v,
            mysqld_ready_ms: Some(1),
        };
        let json = report.to_json();
        assert!(
            json.len() <= crate::decide::objects::MAX_RESULT_BYTES,
            "{}",
            json.len()
        );
        assert!(serde_json::from_str::<serde_json::Value>(&json).is_ok());
    }

    #[test]
    fn check_table_rows_are_read_as_mysql_and_mariadb_print_them() {
        let rows = |r: &[(&str, &str)]| -> Vec<(String, String)> {
            r.iter().map(|(a, b)| ((*a).into(), (*b).into())).collect()
        };
        assert_eq!(table_problem(&rows(&[("status", "OK")])), None);
        assert_eq!(
            table_problem(&rows(&[
                (
                    "note",
                    "The storage engine for the table doesn't support check"
                ),
                ("status", "OK")
            ])),
            None
        );
        assert_eq!(
            table_problem(&rows(&[("status", "Table is already up to date")])),
            None
        );
        assert_eq!(
            table_problem(&rows(&[
                ("Error", "Tablespace is missing"),
                ("status", "Operation failed")
            ])),
            Some("Error: Tablespace is missing".into())
        );
        assert_eq!(
            table_problem(&rows(&[
                ("warning", "1 client is using the table"),
                ("status", "OK")
            ])),
            Some("warning: 1 client is using the table".into())
        );
        assert_eq!(
            table_problem(&rows(&[("status", "Corrupt")])),
            Some("status: Corrupt".into())
        );
        assert_eq!(
            table_problem(&[]),
            Some("CHECK TABLE returned no status".into())
        );
    }
}
