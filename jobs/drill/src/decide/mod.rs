//! Decide: which snapshot a shard's drill restores, and the objects that restore it
//! (docs/design.md §5.9). Pure: `plan` prints it, the tests call it without a client.
//!
//! The snapshot is the one a new tablet would get now: restore injection's own rule
//! (`vtsnap_core::snapshot::choice::choose`), so that a drill proves what a restore would
//! use. A snapshot named on the command line
//! is drilled if it is a ready snapshot of the shard, whatever its age.
//!
//! The drill's other decisions, each pure: the PVC and Pod it makes ([`objects`]), what
//! the Pod's end says of the snapshot ([`outcome`]), and the checker's verdict on the
//! restored server ([`verdict`]).

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use serde_json::Value;
use vtsnap_core::config::ResolvedRestore;
use vtsnap_core::coverage::{Coverage, Exactness, coverage};
use vtsnap_core::k8s_names::untrusted;
use vtsnap_core::quantity;
use vtsnap_core::snapshot::choice::{choose, shard_series};
use vtsnap_core::snapshot::{DrillOf, Phase, VolumeSnapshot};

use crate::observe::Observed;

pub mod objects;
pub mod outcome;
pub mod verdict;

#[cfg(test)]
mod tests;

use objects::{Owner, Settings, Target};

/// Why there is nothing to drill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "reason")]
pub enum Refusal {
    /// Another drill of the shard is under way (or its objects are not yet collected).
    DrillUnderWay { objects: Vec<String> },
    /// vtctld's view of the shard does not give one MySQL series.
    ShardSeries { detail: String },
    /// No snapshot a new tablet would get (each one's reason).
    NoUsableSnapshot { rejected: Vec<(String, String)> },
    /// The named snapshot is not a ready snapshot of this shard.
    NamedSnapshot { snapshot: String, detail: String },
    /// No tablet Pod with a mysqld container to take the image from.
    NoTabletImage,
    /// The tablet Pod has a field the drill Pod copies that does not read.
    TabletPodUnreadable { detail: String },
    /// The tablets' PVC is missing or its size does not read.
    NoTabletPvc { detail: String },
    /// The snapshot has no UID or no cut, so no record could name it.
    Unbindable { snapshot: String },
}

impl Refusal {
    /// In words, for the JSON line and the Event.
    pub fn words(&self) -> String {
        match self {
            Self::DrillUnderWay { objects } => {
                format!("a drill of the shard is under way: {}", objects.join(", "))
            }
            Self::ShardSeries { detail } => format!("the shard's MySQL series: {detail}"),
            Self::NoUsableSnapshot { rejected } if rejected.is_empty() => {
                "the shard has no snapshot".to_owned()
            }
            Self::NoUsableSnapshot { rejected } => format!(
                "no snapshot a new tablet would get: {}",
                rejected
                    .iter()
                    .map(|(n, r)| format!("{n}: {r}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            Self::NamedSnapshot { snapshot, detail } => {
                format!("snapshot {}: {detail}", untrusted(snapshot))
            }
            Self::NoTabletImage => {
                "no tablet Pod of the shard has a mysqld container to take the image from".into()
            }
            Self::TabletPodUnreadable { detail } => format!("the tablet Pod: {detail}"),
            Self::NoTabletPvc { detail } => format!("the tablets' PVC: {detail}"),
            Self::Unbindable { snapshot } => format!(
                "snapshot {} has no metadata.uid or status.creationTime for its record to name",
                untrusted(snapshot)
            ),
        }
    }
}

/// The decision.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "action")]
pub enum Plan {
    /// Restore `snapshot` into `pvc` and `pod` (both named `name`).
    Drill {
        name: String,
        snapshot: String,
        /// What the record will name (docs/design.md §5.9).
        #[serde(rename = "recordFor")]
        record_for: DrillOf,
        pvc: Value,
        pod: Value,
    },
    Nothing {
        refusal: Refusal,
    },
}

/// The decision for one shard at `now`.
pub fn plan(o: &Observed, s: &Settings, owner: Option<&Owner>, now: Timestamp) -> Plan {
    let bound = target(o, now).and_then(|t| {
        match readable(o, &t.snapshot).and_then(VolumeSnapshot::drill_of) {
            Some(of) => Ok((t, of)),
            None => Err(Refusal::Unbindable {
                snapshot: t.snapshot.clone(),
            }),
        }
    });
    match bound {
        Ok((t, record_for)) => {
            let name = objects::drill_name(&o.shard, &now.strftime("%Y%m%d%H%M%S").to_string());
            Plan::Drill {
                snapshot: t.snapshot.clone(),
                record_for,
                pvc: objects::pvc(&name, &t, owner),
                pod: objects::pod(&name, &t, s, owner),
                name,
            }
        }
        Err(refusal) => Plan::Nothing { refusal },
    }
}

fn target(o: &Observed, now: Timestamp) -> Result<Target, Refusal> {
    if !o.leftovers.is_empty() {
        return Err(Refusal::DrillUnderWay {
            objects: o.leftovers.clone(),
        });
    }
    let pvc = o.tablet_pvc.as_ref().ok_or_else(|| Refusal::NoTabletPvc {
        detail: "no tablet PVC of the shard was found".into(),
    })?;
    let requested = pvc.requested.clone().map_err(|e| Refusal::NoTabletPvc {
        detail: e.to_string(),
    })?;
    let snapshot = match &o.named {
        Some(name) => named(o, name)?,
        None => chosen(o, requested, now)?,
    };
    let (position, exactness) = match (&snapshot.gtid_executed, &snapshot.gtid_lower_bound) {
        (Some(p), _) => (p.clone(), Exactness::Exact),
        (None, Some(p)) => (p.clone(), Exactness::LowerBound),
        (None, None) => {
            return Err(Refusal::NamedSnapshot {
                snapshot: snapshot.name.clone(),
                detail: "records no position".into(),
            });
        }
    };
    let restore_bytes = snapshot
        .status
        .restore_size
        .as_deref()
        .and_then(|q| quantity::bytes(q).ok())
        .unwrap_or(0);
    let pod = o.tablet_pod.as_ref();
    let mysqld_image = pod
        .and_then(|p| p.mysqld_image.clone())
        .ok_or(Refusal::NoTabletImage)?;
    let pod_security = match pod.map(|p| &p.security) {
        None | Some(Ok(None)) => None,
        Some(Ok(Some(s))) => Some(s.clone()),
        Some(Err(e)) => {
            return Err(Refusal::TabletPodUnreadable {
                detail: e.to_string(),
            });
        }
    };
    Ok(Target {
        shard: o.shard.clone(),
        snapshot: snapshot.name.clone(),
        position,
        exactness,
        storage_bytes: requested.max(restore_bytes),
        storage_class: pvc.storage_class.clone(),
        mysqld_image,
        pod_security,
        pin_to: snapshot
            .source_node
            .clone()
            .filter(|_| o.restore.node_local)
            .map(|node| (o.restore.node_label.clone(), node)),
        // A new starting table each day: over the days, every table is checked.
        sample_seed: u64::try_from(now.as_second() / 86_400).unwrap_or(0),
    })
}

/// The shard's snapshot `name`, if it was read.
fn readable<'a>(o: &'a Observed, name: &str) -> Option<&'a VolumeSnapshot> {
    o.snapshots
        .iter()
        .filter_map(|s| s.as_ref().ok())
        .find(|s| s.name == name)
}

/// Whether a tablet restored from `snapshot` can still catch up from the primary.
pub fn catch_up(o: &Observed, snapshot: &str) -> Coverage {
    let Some(s) = readable(o, snapshot) else {
        return Coverage::Unknown {
            why: format!("snapshot {snapshot} is not among the shard's"),
        };
    };
    let (position, exactness) = match (&s.gtid_executed, &s.gtid_lower_bound) {
        (Some(p), _) => (Some(p.as_str()), Exactness::Exact),
        (None, p) => (p.as_deref(), Exactness::LowerBound),
    };
    match &o.purged {
        Ok(purged) => coverage(position, exactness, Some(purged)),
        Err(why) => Coverage::Unknown { why: why.clone() },
    }
}

/// The snapshot a new tablet would get now (restore policy as configured, except that
/// a drill needs no passed drill).
fn chosen(o: &Observed, requested: u128, now: Timestamp) -> Result<VolumeSnapshot, Refusal> {
    let series = shard_series(&o.state).map_err(|why| Refusal::ShardSeries {
        detail: why.to_string(),
    })?;
    let policy = ResolvedRestore {
        require_drill: false,
        ..o.restore.clone()
    };
    let choice = choose(&o.snapshots, series, &policy, requested, now).map_err(|rejected| {
        Refusal::NoUsableSnapshot {
            rejected: rejected
                .into_iter()
                .map(|(name, r)| (name, r.words()))
                .collect(),
        }
    })?;
    readable(o, &choice.name)
        .cloned()
        .ok_or_else(|| Refusal::NoUsableSnapshot {
            rejected: Vec::new(),
        })
}

/// The named snapshot, if it is a ready snapshot of the shard.
fn named(o: &Observed, name: &str) -> Result<VolumeSnapshot, Refusal> {
    let refuse = |detail: &str| Refusal::NamedSnapshot {
        snapshot: name.to_owned(),
        detail: detail.to_owned(),
    };
    let s = readable(o, name)
        .ok_or_else(|| refuse("is not a readable vtsnap snapshot of the shard"))?;
    if s.phase == Some(Phase::Failed) || !s.status.is_ready() {
        return Err(refuse("is not ready"));
    }
    Ok(s.clone())
}
