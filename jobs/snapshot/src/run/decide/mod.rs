//! decide: from what was observed to the plan of one snapshot run. Pure: no client, no
//! clock, so the order of steps can be read, printed (`--dry-run`) and tested alone.

pub mod recovery;
pub mod select;
pub mod semi_sync;

pub use recovery::{FenceRecovery, ObservedFence};

use self::select::{Refusal, Target};
use serde::Serialize;
use vtsnap_core::config::{Mode, ResolvedPolicy, WaitFor};
use vtsnap_core::mysql_version::Flavor;
use vtsnap_core::shard::Shard;
use vtsnap_core::vtctld::TabletType;

/// One forward step of a run, in the order it is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    /// Online: GetFullStatus (the GTID lower bound) and the crash-safety variables.
    CheckOnlinePreconditions,
    /// Take the shard's fence lease (node helper, request channel, dead-man's switch).
    Fence,
    /// The node helper checks the tablet's volume layout.
    ProbeLayout,
    /// ChangeTabletType → DRAINED: vtgate stops routing to the tablet.
    Drain,
    StopReplication,
    /// GetFullStatus: the exact executed GTID set of the stopped replica.
    RecordPosition,
    /// The node helper stops mysqld through the pod's mysqlctld.
    StopMysqld,
    /// The node helper freezes the mysqld container so nothing restarts it.
    HoldMysqld,
    /// Online with `fsfreeze`: the node helper freezes the volume's file system.
    Fsfreeze,
    CreateSnapshot,
    /// Wait until the point in time is taken (`waitFor: cut`).
    WaitForCut,
    /// Wait until the snapshot is usable (`waitFor: ready`), still fenced.
    WaitForReady,
}

impl Step {
    /// The undo this step pushes: run in reverse order on every exit path.
    pub fn undo(self) -> Option<Undo> {
        match self {
            Step::Fence => Some(Undo::Unfence),
            Step::Drain => Some(Undo::RestoreType),
            Step::StopReplication => Some(Undo::StartReplication),
            Step::StopMysqld | Step::HoldMysqld | Step::Fsfreeze => Some(Undo::ReleaseNode),
            Step::CheckOnlinePreconditions
            | Step::ProbeLayout
            | Step::RecordPosition
            | Step::CreateSnapshot
            | Step::WaitForCut
            | Step::WaitForReady => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What puts the tablet back. Undo steps are each attempted even if an earlier one failed;
/// `Unfence` (deleting the lease) runs only when every other undo succeeded, else the lease
/// is left to expire so the node helper, the next run or the GC recovers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
#[serde(rename_all = "kebab-case")]
pub enum Undo {
    /// The node helper thaws what it froze and starts mysqld if it stopped it.
    ReleaseNode,
    StartReplication,
    /// ChangeTabletType back to the original type.
    RestoreType,
    /// Delete the fence lease (only if nobody changed it).
    Unfence,
}

impl Undo {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Outside the fence, after a clean unfence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AfterStep {
    /// Phase label `cut` and the cut-time annotation.
    LabelCut,
    /// Wait for `readyToUse` (bounded by `readyTimeout`), then phase `ready` or `failed`.
    WaitForReadyAndLabel,
}

/// One planned step and the undo it pushes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PlannedStep {
    pub step: Step,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undo: Option<Undo>,
}

/// The tablet the run acts on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlannedTarget {
    #[serde(flatten)]
    pub target: Target,
    /// The type the unfence restores.
    #[serde(serialize_with = "type_name")]
    pub original_type: TabletType,
}

fn type_name<S: serde::Serializer>(t: &TabletType, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(t.name())
}

/// Everything a run will do, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SnapshotPlan {
    /// Set in a dry run's plan when an expired fence would be recovered first; the real
    /// run recovers it, then chooses the target again on the shard as it is after that.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recover: Option<FenceRecovery>,
    pub shard: String,
    pub mode: Mode,
    pub wait_for: WaitFor,
    pub fsfreeze: bool,
    pub target: PlannedTarget,
    pub steps: Vec<PlannedStep>,
    /// The undo steps as they run after the last step (or after a failure, the prefix of
    /// them that was pushed), in this order.
    pub unwind: Vec<Undo>,
    pub after_unfence: Vec<AfterStep>,
}

/// Why no plan could be made. Nothing was touched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoPlan {
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error("{alias} has no tablet type in vtctld")]
    TargetTypeUnknown { alias: String },
    #[error(transparent)]
    SemiSyncAcks(#[from] semi_sync::AcksTooFew),
}

/// The run's plan for an observed shard under a resolved policy and mode.
pub fn decide(
    shard: &Shard,
    shard_name: &str,
    policy: &ResolvedPolicy,
    mode: Mode,
) -> Result<SnapshotPlan, NoPlan> {
    let target = select::select(shard, &policy.snapshot.target)?;
    let original_type = shard
        .tablet(&target.tablet_alias)
        .and_then(|t| t.vt_type)
        .filter(|t| *t != TabletType::Unknown)
        .ok_or_else(|| NoPlan::TargetTypeUnknown {
            alias: target.alias.clone(),
        })?;
    let wait_for = policy.snapshot.wait_for;
    let fsfreeze = mode == Mode::Online && policy.snapshot.fsfreeze;
    let wait = match wait_for {
        WaitFor::Cut => Step::WaitForCut,
        WaitFor::Ready => Step::WaitForReady,
    };
    let forward: Vec<Step> = match mode {
        Mode::Cold => vec![
            Step::Fence,
            Step::ProbeLayout,
            Step::Drain,
            Step::StopReplication,
            Step::RecordPosition,
            Step::StopMysqld,
            Step::HoldMysqld,
            Step::CreateSnapshot,
            wait,
        ],
        Mode::Online => {
            let mut s = vec![
                Step::CheckOnlinePreconditions,
                Step::Fence,
                Step::ProbeLayout,
            ];
            if fsfreeze {
                s.push(Step::Fsfreeze);
            }
            s.extend([Step::CreateSnapshot, wait]);
            s
        }
    };
    let steps: Vec<PlannedStep> = forward
        .iter()
        .map(|&step| PlannedStep {
            step,
            undo: step.undo(),
        })
        .collect();
    Ok(SnapshotPlan {
        recover: None,
        shard: shard_name.to_owned(),
        mode,
        wait_for,
        fsfreeze,
        target: PlannedTarget {
            target,
            original_type,
        },
        unwind: unwind_order(&forward),
        steps,
        after_unfence: vec![AfterStep::LabelCut, AfterStep::WaitForReadyAndLabel],
    })
}

/// The undo stack after `taken` steps, in the order it unwinds (last pushed first; a
/// repeated undo, such as the node release of stop and hold, runs once).
pub fn unwind_order(taken: &[Step]) -> Vec<Undo> {
    let mut stack: Vec<Undo> = Vec::new();
    for u in taken.iter().filter_map(|s| s.undo()) {
        if !stack.contains(&u) {
            stack.push(u);
        }
    }
    stack.reverse();
    stack
}

/// One crash-safety variable that does not hold for an online snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub variable: &'static str,
    pub value: String,
    pub needs: &'static [&'static str],
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}={} (needs {})",
            self.variable,
            self.value,
            self.needs.join(" or ")
        )
    }
}

/// The variables an online snapshot's crash safety rests on (docs/design.md §5.2), and the values
/// that satisfy each. MariaDB has no `gtid_mode`: its GTIDs are always on.
pub fn crash_safety_variables(flavor: Flavor) -> Vec<(&'static str, &'static [&'static str])> {
    let mut v: Vec<(&'static str, &'static [&'static str])> = vec![
        ("sync_binlog", &["1"]),
        ("innodb_flush_log_at_trx_commit", &["1"]),
        ("log_bin", &["1", "ON"]),
    ];
    if flavor == Flavor::Mysql {
        v.push(("gtid_mode", &["ON"]));
    }
    v
}

/// Checks the fetched values (in the order of [`crash_safety_variables`]; a missing value
/// counts as empty) and returns every variable that does not hold.
pub fn crash_safety(flavor: Flavor, values: &[Option<String>]) -> Vec<Violation> {
    crash_safety_variables(flavor)
        .into_iter()
        .enumerate()
        .filter_map(|(i, (variable, needs))| {
            let value = values.get(i).cloned().flatten().unwrap_or_default();
            (!needs.iter().any(|w| w.eq_ignore_ascii_case(&value))).then_some(Violation {
                variable,
                value,
                needs,
            })
        })
        .collect()
}

pub use vtsnap_core::snapshot::mode_label as mode_name;

/// The plan as text, for `run --dry-run`.
pub fn render(p: &SnapshotPlan) -> String {
    let mode = mode_name(p.mode);
    let t = &p.target.target;
    let mut out = format!(
        "plan: {mode} snapshot of {}\ntarget: {} (pod {}, pvc {}, node {}), original type {}\nsteps:\n",
        p.shard,
        t.alias,
        t.pod,
        t.pvc,
        t.node,
        p.target.original_type.name()
    );
    if let Some(r) = &p.recover {
        out.push_str(&format!(
            "first: {}; the target is then chosen again\n",
            r.describe()
        ));
    }
    for (i, s) in p.steps.iter().enumerate() {
        match s.undo {
            Some(u) => out.push_str(&format!(
                "  {:>2}. {:<28} undo: {}\n",
                i + 1,
                s.step.as_str(),
                u.as_str()
            )),
            None => out.push_str(&format!("  {:>2}. {}\n", i + 1, s.step.as_str())),
        }
    }
    out.push_str(&format!(
        "then undo, each attempted (the lease deleted only if all others succeeded): {}\n",
        p.unwind
            .iter()
            .map(|u| u.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    out.push_str(&format!(
        "then, outside the fence: {}\n",
        p.after_unfence
            .iter()
            .map(|a| match a {
                AfterStep::LabelCut => "label-cut",
                AfterStep::WaitForReadyAndLabel => "wait-for-ready-and-label",
            })
            .collect::<Vec<_>>()
            .join(", ")
    ));
    out
}

#[cfg(test)]
mod tests;
