//! The journal: the whole plan, written (durably) before the first change and removed
//! after the last. A run that finds it finishes that plan instead of observing afresh,
//! because a half-moved volume is deliberately not a layout `observe` accepts.
//!
//! A journal read back is checked like a fresh plan: every path relative and plain, and
//! every step of the one shape the planner makes (the tablet directory, binlog names,
//! only relay logs, their bookkeeping and `auto.cnf` removed). A hand-made journal can
//! therefore do nothing a real move would not.

use std::io;
use std::path::{Component, Path};

use serde::{Deserialize, Serialize};
use vtsnap_core::mycnf::replace_uid_refs;
use vtsnap_core::naming::TabletUid;

use crate::beneath::{Kind, Root};
pub use crate::decide::plan::JOURNAL_NAME;
use crate::decide::plan::{Plan, SERVER_ID_END, SERVER_ID_MIN, Step, may_remove};
use crate::durable;
use crate::refusal::Refusal;

const VERSION: u32 = 1;
/// The largest journal read; a plan of 100,000 binlogs is about 20 MiB.
pub const MAX_LEN: u64 = 64 << 20;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Journal {
    pub version: u32,
    pub plan: Plan,
}

/// Why a journal read back cannot be finished.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("not a journal: {0}")]
    Syntax(#[from] serde_json::Error),
    #[error("version {0} is not {VERSION}")]
    Version(u32),
    #[error("moves tablet vt_{:010} onto itself", .0.get())]
    SameTablet(TabletUid),
    #[error("server-id {0} is outside [{SERVER_ID_MIN}, {SERVER_ID_END})")]
    ServerId(u32),
    #[error("step {index} ({op}) is not one this program plans: {why}")]
    Step {
        index: usize,
        op: &'static str,
        why: String,
    },
}

impl Journal {
    pub fn new(plan: Plan) -> Self {
        Self {
            version: VERSION,
            plan,
        }
    }
}

/// Parses and checks a journal's bytes.
pub fn parse(bytes: &[u8]) -> Result<Journal, JournalError> {
    let j: Journal = serde_json::from_slice(bytes)?;
    if j.version != VERSION {
        return Err(JournalError::Version(j.version));
    }
    validate(&j.plan)?;
    Ok(j)
}

fn plain(p: &Path) -> Result<(), String> {
    let ok = !p.as_os_str().is_empty() && p.components().all(|c| matches!(c, Component::Normal(_)));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{} is not a plain path inside the volume",
            p.display()
        ))
    }
}

fn name(p: &Path) -> &str {
    p.file_name().and_then(|n| n.to_str()).unwrap_or("")
}

fn check_step(plan: &Plan, step: &Step) -> Result<(), String> {
    let (from, to) = (plan.from, plan.to);
    let tdir_to = to.tablet_dir_name();
    match step {
        Step::RenameDir { from: a, to: b } => {
            plain(a)?;
            plain(b)?;
            if name(a) != from.tablet_dir_name() || *b != a.with_file_name(&tdir_to) {
                return Err(format!(
                    "{} -> {} is not vt_<from> -> vt_<to>",
                    a.display(),
                    b.display()
                ));
            }
        }
        Step::RetargetSymlink { link, target } => {
            plain(link)?;
            let comps: Vec<_> = link.components().collect();
            if comps.len() != 2 || link.parent() != Some(Path::new(&tdir_to)) {
                return Err(format!("{} is not a child of {tdir_to}", link.display()));
            }
            if name(Path::new(target)) != tdir_to {
                return Err(format!("target {target} does not end in {tdir_to}"));
            }
        }
        Step::RenameFile { from: a, to: b } => {
            plain(a)?;
            plain(b)?;
            let (na, nb) = (name(a), name(b));
            if a.parent() != b.parent() || !na.contains(&from.log_file_prefix()) {
                return Err(format!(
                    "{} is not a log of vt_{:010}",
                    a.display(),
                    from.get()
                ));
            }
            if nb != replace_uid_refs(na, from, to) {
                return Err(format!("{} is not the new name of {na}", b.display()));
            }
        }
        Step::PatchBinlogCheckpoints { file, offsets } => {
            plain(file)?;
            let n = name(file);
            let numbered = n
                .rsplit_once('.')
                .is_some_and(|(_, d)| !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit()));
            if !numbered || offsets.iter().any(|o| *o < 4) {
                return Err(format!("{} is not a numbered binlog", file.display()));
            }
        }
        Step::RewriteIndex { path } => {
            plain(path)?;
            if !name(path).ends_with(".index") {
                return Err(format!("{} is not an index", path.display()));
            }
        }
        Step::RemoveFile { path, why } => {
            plain(path)?;
            if !may_remove(name(path), *why, None) {
                return Err(format!("{} is never removed", path.display()));
            }
        }
        Step::RewriteMyCnf { path } => {
            if *path != Path::new(&tdir_to).join("my.cnf") {
                return Err(format!("{} is not {tdir_to}/my.cnf", path.display()));
            }
        }
    }
    Ok(())
}

/// Checks a plan read back from disk (see the module comment).
pub fn validate(plan: &Plan) -> Result<(), JournalError> {
    if plan.from == plan.to {
        return Err(JournalError::SameTablet(plan.from));
    }
    if !(SERVER_ID_MIN..SERVER_ID_END).contains(&plan.server_id) {
        return Err(JournalError::ServerId(plan.server_id));
    }
    for (index, step) in plan.steps.iter().enumerate() {
        check_step(plan, step).map_err(|why| JournalError::Step {
            index,
            op: step.op(),
            why,
        })?;
    }
    Ok(())
}

/// Reads the journal if there is one. A journal that is not a regular file, is too
/// large or does not check out is refused.
pub fn read(root: &Root) -> Result<Option<Journal>, Refusal> {
    let p = Path::new(JOURNAL_NAME);
    let bad = |reason: String| Refusal::BadJournal {
        path: JOURNAL_NAME.to_owned(),
        reason,
    };
    match root.lstat(p).map_err(|e| bad(e.to_string()))? {
        None => return Ok(None),
        Some(m) if m.kind != Kind::File => {
            return Err(Refusal::WrongFileType {
                path: JOURNAL_NAME.to_owned(),
                found: m.kind.as_str(),
                expected: Kind::File.as_str(),
            });
        }
        Some(_) => {}
    }
    let (bytes, _) = root
        .read_small(p, MAX_LEN)
        .map_err(|e| bad(e.to_string()))?;
    parse(&bytes).map(Some).map_err(|e| bad(e.to_string()))
}

/// Writes the journal and makes it durable (data and name) before any step runs.
pub fn write(root: &Root, j: &Journal) -> io::Result<()> {
    let text = serde_json::to_vec_pretty(j).map_err(io::Error::other)?;
    durable::write_new(root, Path::new(JOURNAL_NAME), &text, None)?;
    root.sync_dir(Path::new(""))
}

/// Removes the journal durably. Only after every step is on disk (see `apply`).
pub fn remove(root: &Root) -> io::Result<bool> {
    let removed = durable::remove_file_if_present(root, Path::new(JOURNAL_NAME))?;
    root.sync_dir(Path::new(""))?;
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::plan::RemoveWhy;
    use std::path::PathBuf;

    fn plan(steps: Vec<Step>) -> Plan {
        Plan {
            from: TabletUid::new(101),
            to: TabletUid::new(202),
            server_id: 4242,
            old_server_id: None,
            restore_in_progress: false,
            steps,
        }
    }

    #[test]
    fn steps_of_a_real_move_pass() {
        let p = plan(vec![
            Step::RenameDir {
                from: "data/vt_0000000101".into(),
                to: "data/vt_0000000202".into(),
            },
            Step::RetargetSymlink {
                link: "vt_0000000202/data".into(),
                target: "/vt/vtdataroot/data/vt_0000000202".into(),
            },
            Step::RenameFile {
                from: "vt_0000000202/bin-logs/vt-0000000101-bin.000001".into(),
                to: "vt_0000000202/bin-logs/vt-0000000202-bin.000001".into(),
            },
            Step::RemoveFile {
                path: "vt_0000000202/relay-logs/vt-0000000202-relay-bin.000001".into(),
                why: RemoveWhy::StaleRelayLog,
            },
            Step::RewriteMyCnf {
                path: "vt_0000000202/my.cnf".into(),
            },
        ]);
        validate(&p).unwrap();
    }

    #[test]
    fn paths_that_leave_or_name_other_files_fail() {
        let bad = [
            Step::RemoveFile {
                path: "/etc/passwd.000001".into(),
                why: RemoveWhy::StaleRelayLog,
            },
            Step::RemoveFile {
                path: "vt_0000000202/data/vt_commerce/t0.ibd".into(),
                why: RemoveWhy::StaleRelayLog,
            },
            Step::RemoveFile {
                path: "vt_0000000202/my.cnf".into(),
                why: RemoveWhy::ServerUuidOfSource,
            },
            Step::RenameFile {
                from: "../../../x/vt-0000000101-bin.000001".into(),
                to: "../../../x/vt-0000000202-bin.000001".into(),
            },
            Step::RenameDir {
                from: "vt_0000000101".into(),
                to: "elsewhere/vt_0000000202".into(),
            },
            Step::RewriteMyCnf {
                path: PathBuf::from("vt_0000000202/../my.cnf"),
            },
        ];
        for s in bad {
            assert!(validate(&plan(vec![s.clone()])).is_err(), "{s:?} passed");
        }
    }
}
