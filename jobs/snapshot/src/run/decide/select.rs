//! Which tablet to snapshot (docs/design.md §5.1 step 2), as a pure function of the shard and the
//! resolved policy. Every refusal is its own variant with a stable code.

use serde::Serialize;

use vtsnap_core::config::{ResolvedTarget, TargetType};
use vtsnap_core::naming::TabletAlias;
use vtsnap_core::shard::{Shard, Tablet};
use vtsnap_core::vtctld::TabletType;

/// The chosen tablet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Target {
    pub alias: String,
    #[serde(skip)]
    pub tablet_alias: TabletAlias,
    pub pod: String,
    pub pod_uid: String,
    pub node: String,
    pub pvc: String,
    pub lag_seconds: u32,
    pub position: String,
}

/// Why one candidate was passed over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "kebab-case")]
pub enum Rejection {
    PodMissing,
    PodNotReady,
    PodTerminating,
    NoNode,
    PvcMissing,
    ReplicationStatusUnknown,
    ReplicationStopped {
        io_running: bool,
        sql_running: bool,
    },
    LagUnknown,
    Lagging {
        lag_seconds: u32,
        max_lag_seconds: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rejected {
    pub alias: String,
    #[serde(flatten)]
    pub why: Rejection,
}

/// Why no tablet may be snapshotted now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "code", rename_all = "kebab-case")]
pub enum Refusal {
    #[error("the shard has no primary (a drained tablet could not be changed back)")]
    NoPrimary,
    #[error(
        "the primary is uncertain: the shard record says {shard_primary:?}, tablet types say {typed_primaries:?}"
    )]
    PrimaryUncertain {
        shard_primary: Option<String>,
        typed_primaries: Vec<String>,
    },
    #[error("no {tablet_type} tablet in the shard")]
    NoCandidates { tablet_type: &'static str },
    #[error(
        "{alias} is the only {tablet_type} tablet; set snapshot.target.allowSingleReplica to take it anyway"
    )]
    SingleReplica {
        alias: String,
        tablet_type: &'static str,
    },
    #[error("no {tablet_type} tablet is healthy enough: {}", describe(.rejected))]
    NoHealthyCandidate {
        tablet_type: &'static str,
        rejected: Vec<Rejected>,
    },
    #[error(
        "{alias} is the only healthy {tablet_type} tablet; taking it would leave none serving \
         ({}); set snapshot.target.allowSingleReplica to take it anyway",
        describe(.rejected)
    )]
    NoOtherHealthyReplica {
        alias: String,
        tablet_type: &'static str,
        rejected: Vec<Rejected>,
    },
}

fn describe(r: &[Rejected]) -> String {
    r.iter()
        .map(|x| {
            format!(
                "{} {}",
                x.alias,
                serde_json::to_value(&x.why)
                    .ok()
                    .and_then(|v| v["reason"].as_str().map(str::to_owned))
                    .unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl Refusal {
    pub fn code(&self) -> &'static str {
        match self {
            Self::NoPrimary => "no-primary",
            Self::PrimaryUncertain { .. } => "primary-uncertain",
            Self::NoCandidates { .. } => "no-candidates",
            Self::SingleReplica { .. } => "single-replica",
            Self::NoHealthyCandidate { .. } => "no-healthy-candidate",
            Self::NoOtherHealthyReplica { .. } => "no-other-healthy-replica",
        }
    }
}

fn vt_type(t: TargetType) -> (TabletType, &'static str) {
    match t {
        TargetType::Replica => (TabletType::Replica, "replica"),
        TargetType::Rdonly => (TabletType::Rdonly, "rdonly"),
    }
}

/// Checks one candidate; `Ok` carries the parts of the target.
fn check(t: &Tablet, target: &ResolvedTarget) -> Result<Target, Rejection> {
    let pod = t.pod.as_ref().ok_or(Rejection::PodMissing)?;
    if pod.terminating {
        return Err(Rejection::PodTerminating);
    }
    if !pod.ready {
        return Err(Rejection::PodNotReady);
    }
    let node = pod.node.clone().ok_or(Rejection::NoNode)?;
    let pvc = t.pvc.clone().ok_or(Rejection::PvcMissing)?;
    let r = t
        .replication
        .as_ref()
        .ok_or(Rejection::ReplicationStatusUnknown)?;
    if !(r.io_running && r.sql_running) {
        return Err(Rejection::ReplicationStopped {
            io_running: r.io_running,
            sql_running: r.sql_running,
        });
    }
    if r.lag_unknown {
        return Err(Rejection::LagUnknown);
    }
    let max = target.max_lag.get().as_secs();
    if u64::from(r.lag_seconds) > max {
        return Err(Rejection::Lagging {
            lag_seconds: r.lag_seconds,
            max_lag_seconds: max,
        });
    }
    Ok(Target {
        alias: t.alias.to_string(),
        tablet_alias: t.alias.clone(),
        pod: pod.name.clone(),
        pod_uid: pod.uid.clone(),
        node,
        pvc,
        lag_seconds: r.lag_seconds,
        position: r.position.clone(),
    })
}

/// Picks the snapshot target: never the primary; the configured type; Pod ready; replication
/// running under the lag limit; another healthy tablet of that type left serving unless
/// `allowSingleReplica`. Most caught-up first, ties by lowest UID.
pub fn select(shard: &Shard, target: &ResolvedTarget) -> Result<Target, Refusal> {
    let primary = shard.primary.as_ref().ok_or(Refusal::NoPrimary)?;
    let typed: Vec<&TabletAlias> = shard
        .tablets
        .iter()
        .filter(|t| t.vt_type == Some(TabletType::Primary))
        .map(|t| &t.alias)
        .collect();
    if typed.iter().any(|a| *a != primary)
        || shard
            .tablet(primary)
            .is_some_and(|t| t.vt_type != Some(TabletType::Primary))
    {
        return Err(Refusal::PrimaryUncertain {
            shard_primary: Some(primary.to_string()),
            typed_primaries: typed.iter().map(ToString::to_string).collect(),
        });
    }

    let (want, type_name) = vt_type(target.tablet_type);
    let candidates: Vec<&Tablet> = shard
        .tablets
        .iter()
        .filter(|t| t.vt_type == Some(want) && &t.alias != primary)
        .collect();
    match candidates.as_slice() {
        [] => {
            return Err(Refusal::NoCandidates {
                tablet_type: type_name,
            });
        }
        [only] if !target.allow_single_replica => {
            return Err(Refusal::SingleReplica {
                alias: only.alias.to_string(),
                tablet_type: type_name,
            });
        }
        _ => {}
    }

    let mut healthy = Vec::new();
    let mut rejected = Vec::new();
    for t in candidates {
        match check(t, target) {
            Ok(x) => healthy.push(x),
            Err(why) => rejected.push(Rejected {
                alias: t.alias.to_string(),
                why,
            }),
        }
    }
    healthy.sort_by(|a, b| {
        a.lag_seconds
            .cmp(&b.lag_seconds)
            .then(a.tablet_alias.uid.cmp(&b.tablet_alias.uid))
    });
    match healthy.len() {
        0 => Err(Refusal::NoHealthyCandidate {
            tablet_type: type_name,
            rejected,
        }),
        1 if !target.allow_single_replica => Err(Refusal::NoOtherHealthyReplica {
            alias: healthy[0].alias.clone(),
            tablet_type: type_name,
            rejected,
        }),
        _ => Ok(healthy.swap_remove(0)),
    }
}

#[cfg(test)]
mod tests;
