//! Human-readable output of `plan`.

use std::fmt::Write as _;

use vtsnap_core::config::{Lifecycle, Mode, ResolvedPolicy, TargetType, VtbackupStorage, WaitFor};

use crate::plan::PlanReport;

fn policy_lines(p: &ResolvedPolicy) -> Vec<String> {
    let s = &p.snapshot;
    let mode = match s.mode {
        Mode::Cold => "cold",
        Mode::Online => "online",
    };
    let ty = match s.target.tablet_type {
        TargetType::Replica => "replica",
        TargetType::Rdonly => "rdonly",
    };
    let wait = match s.wait_for {
        WaitFor::Cut => "cut",
        WaitFor::Ready => "ready",
    };
    let life = |l: Lifecycle| match l {
        Lifecycle::Retain => "Retain",
        Lifecycle::Delete => "Delete",
    };
    let vtb = match &p.vtbackup {
        VtbackupStorage::InheritFirstPool => "inherit-first-pool".to_owned(),
        VtbackupStorage::EmptyDirForInitialBackup => "empty-dir-for-initial-backup".to_owned(),
        VtbackupStorage::Template(_) => "template".to_owned(),
    };
    vec![
        format!(
            "snapshot  mode={mode} class={} target={ty} allowSingleReplica={} maxLag={} waitFor={wait} cutTimeout={} readyTimeout={} maxHold={} fsfreeze={}",
            s.volume_snapshot_class_name
                .as_deref()
                .unwrap_or("(default)"),
            s.target.allow_single_replica,
            s.target.max_lag,
            s.cut_timeout,
            s.ready_timeout,
            s.max_hold,
            s.fsfreeze
        ),
        format!(
            "retention maxCount={} maxAge={} failedMaxAge={}",
            p.retention.max_count,
            p.retention
                .max_age
                .map(|d| d.to_string())
                .unwrap_or_else(|| "-".into()),
            p.retention.failed_max_age
        ),
        format!(
            "deletion  whenDeleted={} whenScaled={} gracePeriod={}",
            life(p.deletion_policy.when_deleted),
            life(p.deletion_policy.when_scaled),
            p.deletion_policy.grace_period
        ),
        format!(
            "restore   enabled={} pools={} maxSnapshotAge={}",
            p.restore.enabled,
            if p.restore.pools.is_empty() {
                "(all)".to_owned()
            } else {
                p.restore.pools.join(",")
            },
            p.restore.max_snapshot_age
        ),
        format!("vtbackup  storage={vtb}"),
    ]
}

/// The plan as a table.
pub fn table(r: &PlanReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "shard   {}", r.shard);
    let _ = writeln!(out, "vtctld  {}", r.vtctld);
    let _ = writeln!(out, "policy");
    for l in policy_lines(&r.policy) {
        let _ = writeln!(out, "  {l}");
    }
    let _ = writeln!(out);
    let header = ["ALIAS", "TYPE", "POOL", "READY", "LAG", "NODE", "PVC"];
    let rows: Vec<[String; 7]> = r
        .tablets
        .iter()
        .map(|t| {
            let lag = match (t.replicating, t.lag_seconds) {
                (Some(false), _) => "stopped".to_owned(),
                (_, Some(l)) => format!("{l}s"),
                _ => "-".to_owned(),
            };
            [
                t.alias.clone(),
                t.vt_type.clone().unwrap_or_else(|| "?".into()),
                t.pool.clone().unwrap_or_else(|| "-".into()),
                if t.pod.is_none() {
                    "no pod".into()
                } else if t.ready {
                    "yes".into()
                } else {
                    "no".into()
                },
                lag,
                t.node.clone().unwrap_or_else(|| "-".into()),
                t.pvc.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    out.push_str(&columns(&header, &rows));
    let _ = writeln!(out);
    match (&r.target, &r.refusal) {
        (Some(t), _) => {
            let _ = writeln!(
                out,
                "target  {} (pod {}, node {}, pvc {}, lag {}s)",
                t.alias, t.pod, t.node, t.pvc, t.lag_seconds
            );
        }
        (None, Some(f)) => {
            let _ = writeln!(out, "refused {}: {}", f.code, f.message);
        }
        (None, None) => {}
    }
    if !r.issues.is_empty() {
        let _ = writeln!(out, "issues");
        for i in &r.issues {
            let _ = writeln!(out, "  {}", serde_json::to_string(i).unwrap_or_default());
        }
    }
    out
}

/// The widest a table cell is printed, in characters: a longer one (a GTID set of many
/// servers, a hostile annotation) is cut and ends with [`CUT_MARK`]; `--output json`
/// prints it whole. It also keeps every padding width far below the formatter's limit.
pub const CELL_MAX: usize = 256;

/// Ends a cell that was cut to [`CELL_MAX`].
pub const CUT_MARK: char = '…';

/// `cell` as printed: whole, or its first `CELL_MAX - 1` characters and [`CUT_MARK`].
pub fn cut(cell: &str) -> std::borrow::Cow<'_, str> {
    match cell.char_indices().nth(CELL_MAX) {
        None => cell.into(),
        Some(_) => {
            let mut s: String = cell.chars().take(CELL_MAX - 1).collect();
            s.push(CUT_MARK);
            s.into()
        }
    }
}

/// Left-aligned columns, two spaces apart, each as wide as its widest cell (cells cut to
/// [`CELL_MAX`] characters); a header line, then one line per row.
pub fn columns<const N: usize>(header: &[&str; N], rows: &[[String; N]]) -> String {
    let cells: Vec<[std::borrow::Cow<'_, str>; N]> = std::iter::once(header.map(Into::into))
        .chain(rows.iter().map(|r| std::array::from_fn(|i| cut(&r[i]))))
        .collect();
    let widths: [usize; N] = std::array::from_fn(|i| {
        cells
            .iter()
            .map(|r| r[i].chars().count())
            .max()
            .unwrap_or(0)
    });
    let mut out = String::new();
    for r in &cells {
        let line = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ");
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_longer_than_the_formatter_allows_is_cut_not_a_panic() {
        // Round three item 7: a 66 KB `gtid-executed` made `list` panic with "Formatting
        // argument out of range" (a padding width over 65,535).
        let gtid = format!("0-1-{}", "9".repeat(66_000));
        let rows = [
            ["s1".to_owned(), gtid],
            ["s2".to_owned(), "0-1-5".to_owned()],
        ];
        let t = columns(&["NAME", "GTID"], &rows);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3);
        let long = format!("s1    0-1-{}{CUT_MARK}", "9".repeat(CELL_MAX - 5));
        assert_eq!(lines[1], long);
        assert_eq!(lines[1].chars().count(), 6 + CELL_MAX);
        assert_eq!(lines[2], "s2    0-1-5");
    }

    #[test]
    fn cells_up_to_the_bound_are_whole_and_widths_count_characters() {
        let exact = "é".repeat(CELL_MAX);
        assert_eq!(cut(&exact), exact.as_str());
        let over = "é".repeat(CELL_MAX + 1);
        assert_eq!(cut(&over).chars().count(), CELL_MAX);
        assert!(cut(&over).ends_with(CUT_MARK));
        let t = columns(&["A", "B"], &[["é".to_owned(), "x".to_owned()]]);
        assert_eq!(t, "A  B\né  x\n");
    }
}
