//! Which snapshot a new tablet of a shard would be restored from: the newest one that is
//! usable. Restore injection (the admission webhook) gives it to a new tablet PVC; a drill
//! restores it to prove that it restores. Usable means:
//! - ready (`readyToUse`), not `failed`, not marked unusable by the GC;
//! - with no impossible time (in the future, or out of order, beyond clock skew);
//! - younger than `restore.maxSnapshotAge` (its cut, else its creation);
//! - of the volume layout vtsnap writes;
//! - of the same flavor and MySQL `major.minor` as every tablet of the shard that vtctld
//!   reported a version for (the primary among them: [`shard_series`]);
//! - with a `restoreSize` that fits the PVC's requested storage;
//! - taken of a tablet PVC of the shard its labels name;
//! - for node-local drivers, with a known source node that a `nodeSelector` can name
//!   ([`unpinnable`]: the Pod is pinned there);
//! - under `restore.requireDrill`, whose last drill passed (`vtsnap.io/drill`, at a time
//!   that can be true).
//!
//! Pure: the snapshots and vtctld's word on the shard are read by the caller
//! ([`crate::discover::versions`]).

use std::collections::BTreeSet;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use super::{
    ANN_MYSQL_FLAVOR, ANN_MYSQL_VERSION, DrillResult, Layout, Phase, SnapshotRead, VolumeSnapshot,
};
use crate::config::ResolvedRestore;
use crate::k8s_names::{self, untrusted};
use crate::mysql_version::Series;
use crate::quantity;
use crate::shard::ShardRef;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_hostile;

/// One tablet's MySQL version as vtctld's `GetFullStatus` reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TabletVersion {
    pub alias: String,
    /// `None`: the tablet did not answer.
    pub version: Option<String>,
}

/// What vtctld said about a shard at `refreshed_at` (the webhook's `GET /debug/shards`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardState {
    pub key: ShardRef,
    /// The shard record's primary.
    pub primary: Option<String>,
    pub tablets: Vec<TabletVersion>,
    pub refreshed_at: Timestamp,
    /// Why the last refresh failed (the state is then empty).
    pub error: Option<String>,
}

/// Why the shard's MySQL series is not known from vtctld's word.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SeriesUnknown {
    #[error("the shard has no primary to catch up from")]
    NoPrimary,
    #[error("tablet {alias} reports version {version:?}, which does not read as major.minor")]
    VersionUnreadable { alias: String, version: String },
    #[error("the primary {primary} did not report its MySQL version")]
    PrimaryUnreported { primary: String },
    #[error("the shard's tablets run {first} and {second} (an upgrade in progress?)")]
    SeriesDiffer { first: Series, second: Series },
    #[error("no tablet reported a version")]
    NoneReported,
}

/// Why a snapshot was passed over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "reason")]
pub enum Rejection {
    Unreadable {
        detail: String,
    },
    NotReady,
    Failed,
    MarkedUnusable {
        why: String,
    },
    /// A time it records cannot be true (in the future, out of order).
    ImpossibleTime {
        detail: String,
    },
    TooOld {
        age_seconds: i64,
    },
    AgeUnknown,
    /// No `vtsnap.io/layout` (an unknown one does not read at all).
    LayoutUnknown,
    NoFlavor,
    NoVersion,
    /// The recorded flavor or version does not read, or they disagree.
    SeriesUnreadable {
        detail: String,
    },
    OtherSeries {
        snapshot: String,
        shard: String,
    },
    SizeUnknown,
    SizeUnreadable {
        detail: String,
    },
    TooSmall {
        restore_bytes: u128,
        requested_bytes: u128,
    },
    /// Taken of a volume that is not a tablet PVC of the labelled shard.
    SourceNotOfShard {
        detail: String,
    },
    SourceNodeUnknown,
    /// The source node cannot be a `nodeSelector` value (node-local restore).
    SourceNodeUnpinnable {
        node: String,
        detail: String,
    },
    /// `restore.requireDrill` and no drill of it passed; `discounted`: why the record it
    /// carries counts for nothing (made for another snapshot, before its cut, …).
    NotDrilled {
        #[serde(skip_serializing_if = "Option::is_none")]
        discounted: Option<String>,
    },
    /// `restore.requireDrill` and its last drill failed.
    DrillFailed {
        why: String,
    },
}

impl Rejection {
    /// In words, as the Event and the audit annotation say it.
    pub fn words(&self) -> String {
        match self {
            Self::Unreadable { detail } => format!("unreadable ({detail})"),
            Self::NotReady => "not ready".into(),
            Self::Failed => "failed".into(),
            Self::MarkedUnusable { why } => format!("marked unusable: {}", untrusted(why)),
            Self::ImpossibleTime { detail } => format!("impossible time: {detail}"),
            Self::TooOld { age_seconds } => format!("too old ({}h)", age_seconds / 3600),
            Self::AgeUnknown => "no cut or creation time".into(),
            Self::LayoutUnknown => "no vtsnap.io/layout recorded".into(),
            Self::NoFlavor => format!("no MySQL flavor recorded ({ANN_MYSQL_FLAVOR})"),
            Self::NoVersion => format!("no MySQL version recorded ({ANN_MYSQL_VERSION})"),
            Self::SeriesUnreadable { detail } => detail.clone(),
            Self::OtherSeries { snapshot, shard } => format!("{snapshot}, the shard runs {shard}"),
            Self::SizeUnknown => "no restoreSize".into(),
            Self::SizeUnreadable { detail } => format!("restoreSize unreadable: {detail}"),
            Self::TooSmall {
                restore_bytes,
                requested_bytes,
            } => format!("needs {restore_bytes} bytes, the PVC asks for {requested_bytes}"),
            Self::SourceNotOfShard { detail } => {
                format!("not taken of a tablet PVC of this shard: {detail}")
            }
            Self::SourceNodeUnknown => "no source node recorded (node-local restore)".into(),
            Self::SourceNodeUnpinnable { node, detail } => format!(
                "source node {} cannot be pinned with a nodeSelector ({detail}; node-local restore)",
                untrusted(node)
            ),
            Self::NotDrilled { discounted: None } => {
                "no passed drill (restore.requireDrill)".into()
            }
            Self::NotDrilled {
                discounted: Some(why),
            } => format!("no passed drill: {} (restore.requireDrill)", untrusted(why)),
            Self::DrillFailed { why } => {
                format!(
                    "its drill failed: {} (restore.requireDrill)",
                    untrusted(why)
                )
            }
        }
    }
}

/// The snapshot chosen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Choice {
    pub name: String,
    pub cut: Timestamp,
    pub series: String,
    pub restore_bytes: u128,
    pub source_node: Option<String>,
}

/// When the point in time was taken: the recorded cut, else the snapshot's creation.
fn cut_of(s: &VolumeSnapshot) -> Option<Timestamp> {
    s.cut_time
        .or_else(|| {
            s.status
                .creation_time
                .as_deref()
                .and_then(|t| t.parse().ok())
        })
        .or(s.created)
}

fn series_of(s: &VolumeSnapshot) -> Result<Series, Rejection> {
    let flavor = s.mysql_flavor.as_deref().ok_or(Rejection::NoFlavor)?;
    let version = s.mysql_version.as_deref().ok_or(Rejection::NoVersion)?;
    Series::recorded(flavor, version).map_err(|e| Rejection::SeriesUnreadable {
        detail: e.to_string(),
    })
}

/// Why a node name cannot be a `nodeSelector` value: the API refuses a Pod whose selector
/// value is not a label value (at most 63 characters), though node names may be longer.
pub fn unpinnable(node: &str) -> Option<String> {
    let as_name = k8s_names::dns_subdomain(node)
        .err()
        .map(|e| format!("not a node name: {e}"));
    let as_value = || {
        k8s_names::label_value(node)
            .err()
            .map(|e| format!("not a label value: {e}"))
    };
    as_name.or_else(as_value)
}

/// Judges one snapshot.
fn judge(
    read: &SnapshotRead,
    shard: Series,
    policy: &ResolvedRestore,
    requested: u128,
    now: Timestamp,
) -> Result<Choice, (String, Rejection)> {
    let s = match read {
        Ok(s) => s,
        Err(e) => {
            return Err((
                String::new(),
                Rejection::Unreadable {
                    detail: e.to_string(),
                },
            ));
        }
    };
    let reject = |r| Err((s.name.clone(), r));
    if s.phase == Some(Phase::Failed) {
        return reject(Rejection::Failed);
    }
    if !s.status.is_ready() {
        return reject(Rejection::NotReady);
    }
    if let Some(why) = &s.unusable {
        return reject(Rejection::MarkedUnusable { why: why.clone() });
    }
    if let Some(p) = s.impossible_time(now) {
        return reject(Rejection::ImpossibleTime {
            detail: p.to_string(),
        });
    }
    let Some(cut) = cut_of(s) else {
        return reject(Rejection::AgeUnknown);
    };
    let age = now.duration_since(cut);
    let max =
        SignedDuration::try_from(policy.max_snapshot_age.get()).unwrap_or(SignedDuration::MAX);
    if age >= max {
        return reject(Rejection::TooOld {
            age_seconds: age.as_secs(),
        });
    }
    if s.layout != Some(Layout::V1) {
        return reject(Rejection::LayoutUnknown);
    }
    let series = match series_of(s) {
        Ok(series) => series,
        Err(r) => return reject(r),
    };
    if series != shard {
        return reject(Rejection::OtherSeries {
            snapshot: series.to_string(),
            shard: shard.to_string(),
        });
    }
    let Some(size) = s.status.restore_size.as_deref() else {
        return reject(Rejection::SizeUnknown);
    };
    let restore_bytes = match quantity::bytes(size) {
        Ok(b) => b,
        Err(e) => {
            return reject(Rejection::SizeUnreadable {
                detail: e.to_string(),
            });
        }
    };
    if restore_bytes > requested {
        return reject(Rejection::TooSmall {
            restore_bytes,
            requested_bytes: requested,
        });
    }
    if let Err(e) = s.source_of_its_shard() {
        return reject(Rejection::SourceNotOfShard {
            detail: e.to_string(),
        });
    }
    if policy.node_local {
        let node = s.source_node.as_deref().unwrap_or_default();
        if node.is_empty() {
            return reject(Rejection::SourceNodeUnknown);
        }
        if let Some(detail) = unpinnable(node) {
            return reject(Rejection::SourceNodeUnpinnable {
                node: node.to_owned(),
                detail,
            });
        }
    }
    if policy.require_drill
        && let Some(r) = undrilled(s, now)
    {
        return reject(r);
    }
    Ok(Choice {
        name: s.name.clone(),
        cut,
        series: series.to_string(),
        restore_bytes,
        source_node: s.source_node.clone(),
    })
}

/// Why a snapshot has no drill that proves it restores, if it has none.
fn undrilled(s: &VolumeSnapshot, now: Timestamp) -> Option<Rejection> {
    match s.drill(now) {
        Some(Ok(d)) if d.result == DrillResult::Passed => None,
        Some(Ok(d)) => Some(Rejection::DrillFailed {
            why: d.reason.clone().unwrap_or_default(),
        }),
        Some(Err(why)) => Some(Rejection::NotDrilled {
            discounted: Some(why.to_string()),
        }),
        None => Some(Rejection::NotDrilled { discounted: None }),
    }
}

/// The newest usable snapshot (by cut; the name breaks a tie), or why none is.
pub fn choose(
    snapshots: &[SnapshotRead],
    shard: Series,
    policy: &ResolvedRestore,
    requested: u128,
    now: Timestamp,
) -> Result<Choice, Vec<(String, Rejection)>> {
    let mut usable = Vec::new();
    let mut rejected = Vec::new();
    for s in snapshots {
        match judge(s, shard, policy, requested, now) {
            Ok(c) => usable.push(c),
            Err(r) => rejected.push(r),
        }
    }
    usable
        .into_iter()
        .max_by(|a, b| a.cut.cmp(&b.cut).then_with(|| a.name.cmp(&b.name)))
        .ok_or(rejected)
}

/// The shard's series from vtctld's last word: every tablet that reported a version must
/// agree, and the primary must be among them.
pub fn shard_series(state: &ShardState) -> Result<Series, SeriesUnknown> {
    let Some(primary) = &state.primary else {
        return Err(SeriesUnknown::NoPrimary);
    };
    let mut seen = BTreeSet::new();
    let mut primary_reported = false;
    for t in &state.tablets {
        let Some(v) = &t.version else { continue };
        let Some(s) = Series::parse(v) else {
            return Err(SeriesUnknown::VersionUnreadable {
                alias: t.alias.clone(),
                version: v.clone(),
            });
        };
        primary_reported |= &t.alias == primary;
        seen.insert(s);
    }
    if !primary_reported {
        return Err(SeriesUnknown::PrimaryUnreported {
            primary: primary.clone(),
        });
    }
    let mut it = seen.into_iter();
    match (it.next(), it.next()) {
        (Some(s), None) => Ok(s),
        (Some(first), Some(second)) => Err(SeriesUnknown::SeriesDiffer { first, second }),
        (None, _) => Err(SeriesUnknown::NoneReported),
    }
}
