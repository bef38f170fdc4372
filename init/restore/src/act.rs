//! Act: carry out a plan, one idempotent step at a time, under a journal.
//!
//! The journal is written and synced before the first change and removed after the last;
//! every step checks whether it already happened, so a run killed anywhere is finished by
//! the next run. A named fault point follows each step (`restore.journal-written`,
//! `restore.step-<n>`), so tests can stop the process exactly there.

use std::io;
use std::path::Path;

use serde::Serialize;
use vtsnap_core::fault;
use vtsnap_core::mycnf::{self, MyCnf, replace_uid_refs};

use crate::beneath::{OpenFor, Root};
use crate::binlog;
use crate::decide::Decision;
use crate::decide::plan::{Plan, Start, Step};
use crate::durable::{self, Renamed};
use crate::journal::{self, Journal};

/// Whether a run changes the volume (`--dry-run` does not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Apply,
    DryRun,
}

impl Mode {
    pub fn from_dry_run(dry_run: bool) -> Self {
        if dry_run { Self::DryRun } else { Self::Apply }
    }
}

/// What happened to one step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepResult {
    Planned,
    Done,
    /// An earlier, interrupted run had already done it.
    AlreadyDone,
}

#[derive(Debug, Clone, Serialize)]
pub struct StepReport {
    #[serde(flatten)]
    pub step: Step,
    pub result: StepResult,
}

/// A step failed half-way; the journal stays so the next run can finish.
#[derive(Debug, thiserror::Error)]
#[error("step {index} ({op}) on {path}: {source}")]
pub struct ApplyError {
    pub index: usize,
    pub op: &'static str,
    pub path: String,
    #[source]
    pub source: io::Error,
}

fn step_path(step: &Step) -> &Path {
    match step {
        Step::RenameDir { from, .. } | Step::RenameFile { from, .. } => from,
        Step::RetargetSymlink { link, .. } => link,
        Step::PatchBinlogCheckpoints { file, .. } => file,
        Step::RewriteIndex { path }
        | Step::RemoveFile { path, .. }
        | Step::RewriteMyCnf { path } => path,
    }
}

fn done(changed: bool) -> StepResult {
    if changed {
        StepResult::Done
    } else {
        StepResult::AlreadyDone
    }
}

fn invalid(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

/// Rewrites a small text file with `f`, keeping owner and mode.
fn rewrite_text(
    root: &Root,
    path: &Path,
    max: u64,
    f: impl FnOnce(&str) -> io::Result<String>,
) -> io::Result<bool> {
    let (bytes, meta) = root.read_small(path, max)?;
    let text = std::str::from_utf8(&bytes).map_err(invalid)?;
    let new = f(text)?;
    durable::replace_contents(root, path, &bytes, &meta, new.as_bytes())
}

fn run_step(root: &Root, plan: &Plan, step: &Step) -> io::Result<StepResult> {
    match step {
        Step::RenameDir { from, to } | Step::RenameFile { from, to } => {
            Ok(done(durable::rename_once(root, from, to)? == Renamed::Now))
        }
        Step::RetargetSymlink { link, target } => {
            Ok(done(durable::retarget_symlink(root, link, target)?))
        }
        Step::PatchBinlogCheckpoints { file, offsets } => {
            let (f, _) = root.open_file(file, OpenFor::Writing)?;
            let n = binlog::patch_checkpoints(
                &f,
                &file.display().to_string(),
                offsets,
                &plan.from.log_file_prefix(),
                &plan.to.log_file_prefix(),
            )
            .map_err(io::Error::other)?;
            Ok(done(n > 0))
        }
        Step::RewriteIndex { path } => Ok(done(rewrite_text(
            root,
            path,
            binlog::MAX_INDEX_LEN,
            |text| {
                Ok(text
                    .split_inclusive('\n')
                    .map(|line| replace_uid_refs(line, plan.from, plan.to))
                    .collect())
            },
        )?)),
        Step::RemoveFile { path, .. } => Ok(done(durable::remove_file_if_present(root, path)?)),
        Step::RewriteMyCnf { path } => Ok(done(rewrite_text(
            root,
            path,
            mycnf::MAX_LEN as u64,
            |text| {
                let cnf = MyCnf::parse(text).map_err(invalid)?;
                let (new, _) = cnf
                    .rewrite(plan.from, plan.to, plan.server_id)
                    .map_err(invalid)?;
                Ok(new)
            },
        )?)),
    }
}

/// Carries out what was decided on the volume at `root`; a dry run only lists the steps.
pub fn act(root: &Root, decision: &Decision, mode: Mode) -> Result<Vec<StepReport>, ApplyError> {
    match (decision, mode) {
        (Decision::Leave { .. }, _) => Ok(Vec::new()),
        (Decision::Move { plan, .. }, Mode::DryRun) => Ok(planned(plan)),
        (Decision::Move { plan, start }, Mode::Apply) => {
            let resumed = *start == Start::Resume;
            let span = tracing::info_span!("move", from = %plan.from, to = %plan.to, resumed);
            let _g = span.enter();
            apply(root, plan, *start)
        }
    }
}

/// Executes `plan` on the volume at `root`. A resumed plan's journal is already there.
pub fn apply(root: &Root, plan: &Plan, start: Start) -> Result<Vec<StepReport>, ApplyError> {
    let journal_err = |source| ApplyError {
        index: 0,
        op: "journal",
        path: journal::JOURNAL_NAME.to_owned(),
        source,
    };
    if start == Start::Fresh {
        journal::write(root, &Journal::new(plan.clone())).map_err(journal_err)?;
    }
    fault::point("restore.journal-written");
    let mut reports = Vec::with_capacity(plan.steps.len());
    for (index, step) in plan.steps.iter().enumerate() {
        let span = tracing::info_span!("step", index, op = step.op());
        let _g = span.enter();
        let result = run_step(root, plan, step).map_err(|source| ApplyError {
            index,
            op: step.op(),
            path: step_path(step).display().to_string(),
            source,
        })?;
        tracing::info!(path = %step_path(step).display(), ?result, "step finished");
        reports.push(StepReport {
            step: step.clone(),
            result,
        });
        fault::point(&format!("restore.step-{index}"));
    }
    // Every step on disk before the journal goes: until then a power loss leaves the
    // journal, and the rerun finishes whatever did not reach the disk.
    root.sync_volume().map_err(|source| ApplyError {
        index: plan.steps.len(),
        op: "syncfs",
        path: ".".to_owned(),
        source,
    })?;
    fault::point("restore.synced");
    journal::remove(root).map_err(journal_err)?;
    Ok(reports)
}

/// The plan as a report, for `--dry-run`.
pub fn planned(plan: &Plan) -> Vec<StepReport> {
    plan.steps
        .iter()
        .map(|s| StepReport {
            step: s.clone(),
            result: StepResult::Planned,
        })
        .collect()
}
