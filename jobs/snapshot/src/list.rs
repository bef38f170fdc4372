//! `list`: the snapshot inventory, per shard, from the VolumeSnapshot label schema
//! (docs/design.md §4.3). Reads only.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use vtsnap_core::shard::{LABEL_CLUSTER, LABEL_KEYSPACE, LABEL_SHARD};

use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;
use serde::Serialize;
use serde_json::Value;
use vtsnap_core::config::{ClusterConfig, Config};
use vtsnap_core::coverage::{
    Coverage, Exactness, PrimaryBinlogs, coverage, headroom, read_primary,
};
use vtsnap_core::labels;
use vtsnap_core::naming::KeyRange;
use vtsnap_core::snapshot::{self, Phase, VolumeSnapshot};
use vtsnap_core::vtctld::VtctldClient;
use vtsnap_core::vtctld::client::CallLimits;

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
    /// Whether a new tablet could still catch up from it (ready snapshots only; see
    /// docs/design.md §5.7): the shard's primary is read through vtctld.
    pub covered: Option<Covered>,
    /// How long it stays covered (the primary's binlog expiry minus its age).
    pub headroom_seconds: Option<u64>,
}

/// Catch-up coverage as `list` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Covered {
    Yes,
    No,
    /// The primary was not read, or its answer or the position did not read.
    Unknown,
}

/// A ready snapshot's coverage against its shard's primary (pure): `None` when not ready.
pub fn coverage_of(
    s: &VolumeSnapshot,
    primary: &Result<PrimaryBinlogs, String>,
    now: Timestamp,
) -> (Option<Covered>, Option<u64>) {
    if !s.status.is_ready() || s.phase == Some(Phase::Failed) {
        return (None, None);
    }
    let (position, exactness) = match (&s.gtid_executed, &s.gtid_lower_bound) {
        (Some(p), _) => (Some(p.as_str()), Exactness::Exact),
        (None, Some(p)) => (Some(p.as_str()), Exactness::LowerBound),
        (None, None) => (None, Exactness::Exact),
    };
    let Ok(binlogs) = primary else {
        return (Some(Covered::Unknown), None);
    };
    match coverage(position, exactness, Some(&binlogs.purged)) {
        Coverage::Covered => {
            let age = s.created.map_or(0, |c| {
                u64::try_from(now.as_second() - c.as_second()).unwrap_or(0)
            });
            let left = binlogs
                .expiry
                .and_then(|e| headroom(Duration::from_secs(age), e))
                .map(|h| h.as_secs());
            (Some(Covered::Yes), left)
        }
        Coverage::NotCovered { .. } => (Some(Covered::No), None),
        Coverage::Unknown { .. } => (Some(Covered::Unknown), None),
    }
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
        covered: None,
        headroom_seconds: None,
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
    let safe_shard = filter
        .shard
        .as_deref()
        .map(vtsnap_core::naming::safe_shard_name);
    let mut rows = Vec::new();
    for c in clusters {
        let mut pairs = vec![
            (labels::MANAGED_BY, labels::MANAGED_BY_VTSNAP),
            (LABEL_CLUSTER, c.name.as_str()),
        ];
        if let Some(k) = &filter.keyspace {
            pairs.push((LABEL_KEYSPACE, k));
        }
        if let Some(s) = &safe_shard {
            pairs.push((LABEL_SHARD, s));
        }
        let api = vtsnap_core::reconcile::apis::volume_snapshots(&kube, &c.namespace);
        let lp = ListParams::default().labels(&labels::selector(&pairs));
        let objs = vtsnap_core::reconcile::list::all(&api, &lp)
            .await
            .map_err(|source| ListError::Kube {
                namespace: c.namespace.clone(),
                source,
            })?;
        let mut read = Vec::new();
        for o in objs {
            let v = serde_json::to_value(&o).unwrap_or(Value::Null);
            // An object that does not read is not shown as something it is not.
            match VolumeSnapshot::read(&v) {
                Ok(s) => read.push(s),
                Err(e) => tracing::warn!(error = %e, "skipping an unreadable VolumeSnapshot"),
            }
        }
        let primaries = read_primaries(&kube, c, &read).await;
        for s in &read {
            let mut r = row(s, now);
            if let Some(p) = primaries.get(&(s.keyspace.clone(), s.shard.clone())) {
                (r.covered, r.headroom_seconds) = coverage_of(s, p, now);
            }
            rows.push(r);
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

/// Each shard's primary with a ready snapshot among `snaps`, read once through the
/// cluster's vtctld; an unreachable vtctld makes every shard's coverage unknown.
async fn read_primaries(
    kube: &kube::Client,
    c: &ClusterConfig,
    snaps: &[VolumeSnapshot],
) -> BTreeMap<(String, KeyRange), Result<PrimaryBinlogs, String>> {
    let shards: BTreeSet<(String, KeyRange)> = snaps
        .iter()
        .filter(|s| s.status.is_ready())
        .map(|s| (s.keyspace.clone(), s.shard.clone()))
        .collect();
    let mut out = BTreeMap::new();
    if shards.is_empty() {
        return out;
    }
    let vtctld = vtsnap_core::discover::vtctld_endpoint(kube, &c.namespace, &c.name, &c.vtctld)
        .await
        .map_err(|e| e.to_string())
        .and_then(|e| VtctldClient::new(&e, CallLimits::default()).map_err(|e| e.to_string()));
    for (keyspace, shard) in shards {
        let read = match &vtctld {
            Ok(v) => read_primary(v, &keyspace, &shard).await,
            Err(e) => Err(format!("no vtctld: {e}")),
        };
        if let Err(e) = &read {
            tracing::warn!(keyspace = %keyspace, shard = %shard, error = %e, "the primary was not read: coverage unknown");
        }
        out.insert((keyspace, shard), read);
    }
    out
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
        "SHARD", "NAME", "PHASE", "AGE", "MODE", "GTID", "SIZE", "SOURCE", "COVERED", "HEADROOM",
    ];
    let body: Vec<[String; 10]> = rows
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
                match r.covered {
                    None => "-",
                    Some(Covered::Yes) => "yes",
                    Some(Covered::No) => "no",
                    Some(Covered::Unknown) => "?",
                }
                .to_owned(),
                age(r
                    .headroom_seconds
                    .map(|h| i64::try_from(h).unwrap_or(i64::MAX))),
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
