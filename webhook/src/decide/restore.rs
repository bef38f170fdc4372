//! Restore injection: a new tablet PVC of an opted-in pool gets `dataSourceRef` (and
//! `dataSource`) to the newest snapshot of its shard that is usable:
//! - ready (`readyToUse`), not `failed`, not marked unusable by the GC;
//! - with no impossible time (in the future, or out of order, beyond clock skew);
//! - younger than `restore.maxSnapshotAge` (its cut, else its creation);
//! - of the volume layout vtsnap writes;
//! - of the same flavor and MySQL `major.minor` as every tablet of the shard that vtctld
//!   reported a version for (the primary among them);
//! - with a `restoreSize` that fits the PVC's requested storage;
//! - taken of a tablet PVC of the shard its labels name;
//! - for node-local drivers, with a known source node that a `nodeSelector` can name
//!   (the Pod is pinned there);
//! - under `restore.requireDrill`, whose last drill passed (`vtsnap.io/drill`, at a time
//!   that can be true).
//!
//! Nothing usable: the PVC is left as created (normal provisioning) and an Event says why.

use std::collections::BTreeSet;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde::Serialize;
use serde_json::{Value, json};
use vtsnap_core::config::ResolvedRestore;
use vtsnap_core::k8s_names::untrusted;
use vtsnap_core::mysql_version::Series;
use vtsnap_core::naming::TabletUid;
use vtsnap_core::quantity;
use vtsnap_core::shard::ShardRef;
use vtsnap_core::snapshot::{
    ANN_MYSQL_FLAVOR, ANN_MYSQL_VERSION, DrillResult, GROUP, Layout, Phase, VolumeSnapshot,
};

use super::pod::unpinnable;
use super::{Code, Decision, EventNote, Settings, Severity, name_of};
use crate::observe::{Inventory, ShardState, SnapshotRead};
use crate::patch::{self, Op};

pub use vtsnap_core::restored::{ANN_RESTORE_NODE, ANN_RESTORE_REASON, ANN_RESTORED_FROM};

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
pub fn shard_series(state: &ShardState) -> Result<Series, (Code, String)> {
    let Some(primary) = &state.primary else {
        return Err((
            Code::ShardHasNoPrimary,
            "the shard has no primary to catch up from".into(),
        ));
    };
    let mut seen = BTreeSet::new();
    let mut primary_reported = false;
    for t in &state.tablets {
        let Some(v) = &t.version else { continue };
        let Some(s) = Series::parse(v) else {
            return Err((
                Code::ShardVersionUnknown,
                format!(
                    "tablet {} reports version {v:?}, which does not read as major.minor",
                    t.alias
                ),
            ));
        };
        primary_reported |= &t.alias == primary;
        seen.insert(s);
    }
    if !primary_reported {
        return Err((
            Code::ShardVersionUnknown,
            format!("the primary {primary} did not report its MySQL version"),
        ));
    }
    let mut it = seen.into_iter();
    match (it.next(), it.next()) {
        (Some(s), None) => Ok(s),
        (Some(a), Some(b)) => Err((
            Code::ShardVersionsDiffer,
            format!("the shard's tablets run {a} and {b} (an upgrade in progress?)"),
        )),
        (None, _) => Err((
            Code::ShardVersionUnknown,
            "no tablet reported a version".into(),
        )),
    }
}

fn skipped(d: &mut Decision, code: Code, message: String, pvc: &str) {
    d.event = Some(EventNote::new(
        "RestoreSkipped",
        format!("PVC {pvc} provisioned normally: {message}"),
        Severity::Normal,
    ));
    d.push(code, message);
}

/// The PVC's requested storage in bytes, or what is wrong with it.
pub fn requested_bytes(pvc: &Value) -> Result<u128, String> {
    const FIELD: &str = "spec.resources.requests.storage";
    match pvc.pointer("/spec/resources/requests/storage") {
        None | Some(Value::Null) => Err(format!("{FIELD} is missing")),
        Some(Value::String(q)) => quantity::bytes(q).map_err(|e| format!("{FIELD}: {e}")),
        Some(Value::Number(n)) => Err(format!(
            "{FIELD} is the number {n}, not a quantity string (\"{n}\")"
        )),
        Some(other) => Err(format!(
            "{FIELD} is {}, not a quantity string",
            super::kind_of(other)
        )),
    }
}

/// The PVC's tablet, if a snapshot of the shard records that it was re-provisioned, and
/// that snapshot.
fn reprovisioned(pvc: &Value, snapshots: &[SnapshotRead]) -> Option<(TabletUid, String)> {
    let uid: TabletUid = pvc
        .pointer("/metadata/labels")?
        .get(vtsnap_core::labels::TABLET_UID)?
        .as_str()?
        .parse()
        .ok()?;
    snapshots
        .iter()
        .filter_map(|s| s.as_ref().ok())
        .find(|s| s.reprovisioned.contains_key(&uid))
        .map(|s| (uid, s.name.clone()))
}

/// The decision for a new tablet PVC.
pub fn tablet_pvc(
    pvc: &Value,
    shard: &ShardRef,
    policy: &ResolvedRestore,
    pool: &str,
    settings: &Settings,
    inventory: &dyn Inventory,
    now: Timestamp,
) -> Decision {
    if !policy.enabled {
        return Decision::note(
            Code::RestoreDisabled,
            "restore is not enabled for this shard",
        );
    }
    if !policy.opts_in(pool) {
        return Decision::note(
            Code::PoolNotOptedIn,
            format!("pool {pool:?} is not in restore.pools {:?}", policy.pools),
        );
    }
    let name = name_of(pvc);
    let mut d = Decision::default();
    if ["dataSource", "dataSourceRef"].iter().any(|f| {
        pvc.pointer(&format!("/spec/{f}"))
            .is_some_and(|v| !v.is_null())
    }) {
        d.push(
            Code::HasDataSource,
            "the PVC already names a data source (the pool's template sets one): left as it is",
        );
        return d;
    }
    let requested = match requested_bytes(pvc) {
        Ok(b) => b,
        Err(why) => {
            skipped(&mut d, Code::SizeUnreadable, why, name);
            return d;
        }
    };
    let Some(state) = inventory.shard_state(shard) else {
        skipped(
            &mut d,
            Code::ShardStateUnknown,
            format!("vtctld has not been read for shard {shard} yet"),
            name,
        );
        return d;
    };
    if let Some(e) = &state.error {
        skipped(
            &mut d,
            Code::ShardStateUnknown,
            format!("vtctld could not be read for shard {shard}: {e}"),
            name,
        );
        return d;
    }
    let age = now.duration_since(state.refreshed_at);
    let max = SignedDuration::try_from(settings.shard_state_max_age).unwrap_or(SignedDuration::MAX);
    if age > max {
        skipped(
            &mut d,
            Code::ShardStateStale,
            format!(
                "vtctld was last read for shard {shard} {}s ago (more than {}s)",
                age.as_secs(),
                max.as_secs()
            ),
            name,
        );
        return d;
    }
    let series = match shard_series(&state) {
        Ok(s) => s,
        Err((code, why)) => {
            skipped(&mut d, code, why, name);
            return d;
        }
    };
    let snapshots = inventory.snapshots(shard);
    if let Some((uid, from)) = reprovisioned(pvc, &snapshots) {
        skipped(
            &mut d,
            Code::TabletReprovisioned,
            format!(
                "tablet {uid} was re-provisioned after a restore from snapshot {} could not catch up: it restores from the regular backup",
                untrusted(&from)
            ),
            name,
        );
        return d;
    }
    match choose(&snapshots, series, policy, requested, now) {
        Err(rejected) => {
            let why = if rejected.is_empty() {
                format!("shard {shard} has no snapshot")
            } else {
                let each: Vec<String> = rejected
                    .iter()
                    .map(|(n, r)| {
                        if n.is_empty() {
                            r.words()
                        } else {
                            format!("{n}: {}", r.words())
                        }
                    })
                    .collect();
                format!("no usable snapshot of shard {shard}: {}", each.join("; "))
            };
            skipped(&mut d, Code::NoUsableSnapshot, why, name);
        }
        Ok(c) => {
            let source = json!({"apiGroup": GROUP, "kind": "VolumeSnapshot", "name": c.name});
            d.patch.push(Op::Add {
                path: "/spec/dataSource".into(),
                value: source.clone(),
            });
            d.patch.push(Op::Add {
                path: "/spec/dataSourceRef".into(),
                value: source,
            });
            let reason = format!(
                "newest usable snapshot of shard {shard}: cut {}, {}, {} bytes ≤ the PVC's {requested}",
                c.cut, c.series, c.restore_bytes
            );
            let mut annotations = vec![
                (ANN_RESTORED_FROM, c.name.clone()),
                (ANN_RESTORE_REASON, reason.clone()),
            ];
            if policy.node_local
                && let Some(node) = &c.source_node
            {
                annotations.push((ANN_RESTORE_NODE, node.clone()));
            }
            let mut obj = pvc.clone();
            for (k, v) in annotations {
                let ops = patch::set_entry(&obj, "/metadata/annotations", k, json!(v));
                obj = patch::apply(&obj, &ops).unwrap_or(obj);
                d.patch.extend(ops);
            }
            d.event = Some(EventNote::new(
                "RestoreInjected",
                format!(
                    "PVC {name} will be provisioned from VolumeSnapshot {}: {reason}",
                    c.name
                ),
                Severity::Normal,
            ));
            d.push(Code::RestoredFromSnapshot, format!("{}: {reason}", c.name));
        }
    }
    d
}
