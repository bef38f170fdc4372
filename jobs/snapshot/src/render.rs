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

/// Left-aligned columns, two spaces apart, each as wide as its widest cell; a header line,
/// then one line per row.
pub fn columns<const N: usize>(header: &[&str; N], rows: &[[String; N]]) -> String {
    let widths: Vec<usize> = (0..N)
        .map(|i| {
            rows.iter()
                .map(|r| r[i].len())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| {
        cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_owned()
    };
    let mut out = line(&header.map(String::from));
    out.push('\n');
    for r in rows {
        out.push_str(&line(r));
        out.push('\n');
    }
    out
}
