//! `list`: the snapshot inventory, per shard, from the VolumeSnapshot label schema
//! (docs/design.md §4.3). Reads only.

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;
use serde::Serialize;
use serde_json::Value;
use vtsnap_core::config::Config;
use vtsnap_core::labels;
use vtsnap_core::snapshot::{self, Phase, VolumeSnapshot};

use vtsnap_core::exit::Exit;

#[derive(Debug, thiserror::Error)]
pub enum ListError {
    #[error("cluster {0:?} is not in the config")]
    UnknownCluster(String),
    #[error("listing VolumeSnapshots in namespace {namespace}: {source}")]
    Kube {
        namespace: String,
        source: kube::Error,
    },
}

impl ListError {
    pub fn exit(&self) -> Exit {
        match self {
            Self::UnknownCluster(_) => Exit::Usage,
            Self::Kube { .. } => Exit::Failed,
        }
    }
}

/// One snapshot in the inventory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    pub namespace: String,
    pub name: String,
    pub cluster: String,
    pub keyspace: String,
    pub shard: String,
    /// The phase label, or what the status says when the label is missing or behind.
    pub phase: String,
    pub mode: String,
    pub age_seconds: Option<i64>,
    /// Exact position (cold) or lower bound (online, prefixed `>=`).
    pub gtid: Option<String>,
    pub size: Option<String>,
    pub source_tablet: Option<String>,
    pub cut_time: Option<String>,
}

/// Which snapshots to list.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub cluster: Option<String>,
    pub keyspace: Option<String>,
    /// A key range (`-80`), compared by SafeName.
    pub shard: Option<String>,
}

/// Builds one row from a snapshot (pure).
pub fn row(s: &VolumeSnapshot, now: Timestamp) -> Row {
    let status = &s.status;
    let phase = match (s.phase, status.is_ready(), status.is_cut()) {
        (Some(Phase::Failed), _, _) => "failed",
        (_, true, _) => "ready",
        (_, false, true) => "cut",
        (_, _, _) if status.error.is_some() => "error",
        _ => "pending",
    };
    let gtid = s
        .gtid_executed
        .clone()
        .or_else(|| s.gtid_lower_bound.as_ref().map(|g| format!(">={g}")));
    Row {
        namespace: s.namespace.clone(),
        name: s.name.clone(),
        cluster: s.cluster.clone(),
        keyspace: s.keyspace.clone(),
        shard: s.shard.safe_name(),
        phase: phase.to_owned(),
        mode: s
            .mode
            .map(snapshot::mode_label)
            .unwrap_or_default()
            .to_owned(),
        age_seconds: s.created.map(|c| (now.as_second() - c.as_second()).max(0)),
        gtid,
        size: status.restore_size.clone(),
        source_tablet: s.source_tablet.as_ref().map(ToString::to_string),
        cut_time: s
            .cut_time
            .map(|t| t.to_string())
            .or_else(|| status.creation_time.clone()),
    }
}

/// Lists the snapshots of the configured clusters (or one of them), newest first per shard.
pub async fn list(
    config: &Config,
    filter: &Filter,
    kube: kube::Client,
) -> Result<Vec<Row>, ListError> {
    let clusters: Vec<_> = match &filter.cluster {
        Some(c) => {
            let found: Vec<_> = config.clusters.iter().filter(|x| &x.name == c).collect();
            if found.is_empty() {
                return Err(ListError::UnknownCluster(c.clone()));
            }
            found
        }
        None => config.clusters.iter().collect(),
    };
    let now = Timestamp::now();
    let safe_shard = filter.shard.as_ref().map(|s| {
        s.parse::<vtsnap_core::naming::KeyRange>()
            .map(|k| k.safe_name())
            .unwrap_or_else(|_| s.clone())
    });
    let mut rows = Vec::new();
    for c in clusters {
        let mut pairs = vec![
            (labels::MANAGED_BY, labels::MANAGED_BY_VTSNAP),
            (snapshot::LABEL_CLUSTER, c.name.as_str()),
        ];
        if let Some(k) = &filter.keyspace {
            pairs.push((snapshot::LABEL_KEYSPACE, k));
        }
        if let Some(s) = &safe_shard {
            pairs.push((snapshot::LABEL_SHARD, s));
        }
        let api = snapshot::api(&kube, &c.namespace);
        let lp = ListParams::default().labels(&labels::selector(&pairs));
        let objs = vtsnap_core::reconcile::list::all(&api, &lp)
            .await
            .map_err(|source| ListError::Kube {
                namespace: c.namespace.clone(),
                source,
            })?;
        for o in objs {
            let v = serde_json::to_value(&o).unwrap_or(Value::Null);
            // An object that does not read is not shown as something it is not.
            match VolumeSnapshot::read(&v) {
                Ok(s) => rows.push(row(&s, now)),
                Err(e) => tracing::warn!(error = %e, "skipping an unreadable VolumeSnapshot"),
            }
        }
    }
    rows.sort_by(|a, b| {
        (&a.cluster, &a.keyspace, &a.shard, a.age_seconds).cmp(&(
            &b.cluster,
            &b.keyspace,
            &b.shard,
            b.age_seconds,
        ))
    });
    Ok(rows)
}

fn age(s: Option<i64>) -> String {
    match s {
        None => "-".into(),
        Some(s) if s < 120 => format!("{s}s"),
        Some(s) if s < 7200 => format!("{}m", s / 60),
        Some(s) if s < 172_800 => format!("{}h", s / 3600),
        Some(s) => format!("{}d", s / 86400),
    }
}

/// The inventory as a table.
pub fn table(rows: &[Row]) -> String {
    let header = [
        "SHARD", "NAME", "PHASE", "AGE", "MODE", "GTID", "SIZE", "SOURCE",
    ];
    let body: Vec<[String; 8]> = rows
        .iter()
        .map(|r| {
            [
                format!("{}/{}/{}", r.cluster, r.keyspace, r.shard),
                r.name.clone(),
                r.phase.clone(),
                age(r.age_seconds),
                r.mode.clone(),
                r.gtid.clone().unwrap_or_else(|| "-".into()),
                r.size.clone().unwrap_or_else(|| "-".into()),
                r.source_tablet.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    let mut out = crate::render::columns(&header, &body);
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for r in rows {
        *counts.entry(r.phase.as_str()).or_default() += 1;
    }
    let summary: Vec<String> = counts.iter().map(|(p, n)| format!("{n} {p}")).collect();
    out.push_str(&format!(
        "{} snapshots: {}\n",
        rows.len(),
        if summary.is_empty() {
            "none".into()
        } else {
            summary.join(", ")
        }
    ));
    out
}
