//! Pre-flight: before the first change, look at everything the plan will touch and refuse
//! if any step could not be carried out — a name that cannot be journaled, a rename
//! target already there, a symlink or FIFO where a file is expected, a directory this
//! process cannot write, a file whose owner it cannot keep. A move that starts therefore
//! runs to its end; only an I/O error or a kill can stop it half-way.
//!
//! Steps name paths as they are when the step runs (after the directory renames before
//! them); the pre-flight maps them back to where they are now.

use std::path::{Path, PathBuf};

use rustix::process::{getegid, geteuid, getgroups};

use crate::beneath::{Kind, Meta, Root};
use crate::binlog::MAX_INDEX_LEN;
use crate::decide::{Plan, Step};
use crate::durable::tmp_name;
use crate::journal::JOURNAL_NAME;
use crate::mycnf::{self, MyCnf};
use crate::observe::{Volume, wrong_kind};
use crate::refusal::Refusal;

struct Check<'a> {
    root: &'a Root,
    vol: Volume,
    mount: &'a str,
    /// Directory renames planned so far: (where it is now, where it will be).
    renamed: Vec<(PathBuf, PathBuf)>,
    /// A journaled plan being finished: each step may already be done.
    resumed: bool,
}

/// Where a rename stands: still to do, or done by an earlier run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RenameState {
    Pending,
    Done,
}

fn shown(p: &Path) -> String {
    p.display().to_string()
}

impl Check<'_> {
    /// Where `p` (as named at step time) is now.
    fn now(&self, p: &Path) -> PathBuf {
        for (from, to) in self.renamed.iter().rev() {
            if let Ok(rest) = p.strip_prefix(to) {
                return from.join(rest);
            }
        }
        p.to_path_buf()
    }

    fn lstat(&self, p: &Path) -> Result<Option<Meta>, Refusal> {
        self.root.lstat(p).map_err(|e| Refusal::Unreadable {
            path: shown(p),
            reason: e.to_string(),
        })
    }

    /// `p` (now) must be of kind `want`.
    fn is(&self, p: &Path, want: Kind) -> Result<Meta, Refusal> {
        match self.lstat(p)? {
            Some(m) if m.kind == want => Ok(m),
            Some(m) => Err(wrong_kind(&self.vol, self.mount, p, m.kind, want)),
            None => Err(Refusal::Unreadable {
                path: shown(p),
                reason: "missing".into(),
            }),
        }
    }

    /// `p` (now) must be writable by this process.
    fn writable(&self, p: &Path) -> Result<(), Refusal> {
        let ok = self.root.writable(p).map_err(|e| Refusal::Unreadable {
            path: shown(p),
            reason: e.to_string(),
        })?;
        if ok {
            return Ok(());
        }
        Err(Refusal::NotWritable {
            path: if p.as_os_str().is_empty() {
                ".".into()
            } else {
                shown(p)
            },
            reason: format!(
                "this process (uid {}) may not write here",
                geteuid().as_raw()
            ),
        })
    }

    fn parent_writable(&self, p: &Path) -> Result<(), Refusal> {
        self.writable(p.parent().unwrap_or(Path::new("")))
    }

    /// The temporary name a replacement of `p` (as named at step time) uses: nothing, or
    /// a leftover regular file, may be there; a symlink or anything else is refused.
    fn tmp_free(&self, p: &Path) -> Result<(), Refusal> {
        let tmp = self.now(&tmp_name(p));
        match self.lstat(&tmp)? {
            None => Ok(()),
            Some(m) if m.kind == Kind::File => Ok(()),
            Some(m) => Err(wrong_kind(&self.vol, self.mount, &tmp, m.kind, Kind::File)),
        }
    }

    /// A rewritten file keeps its owner: this process must be able to give it that owner.
    fn can_keep_owner(&self, p: &Path, m: &Meta) -> Result<(), Refusal> {
        let euid = geteuid().as_raw();
        if euid == 0 {
            return Ok(());
        }
        let in_group = m.gid == getegid().as_raw()
            || getgroups().is_ok_and(|g| g.iter().any(|g| g.as_raw() == m.gid));
        if m.uid == euid && in_group {
            return Ok(());
        }
        Err(Refusal::NotWritable {
            path: shown(p),
            reason: format!(
                "owned by {}:{}; this process (uid {euid}) cannot give the rewritten file that owner",
                m.uid, m.gid
            ),
        })
    }

    /// A rename of `from` to `to` (both now), of an entry of kind `want`: to do (the
    /// source there, the target not), or, when resuming, done (the other way round).
    fn rename(&self, f: &Path, t: &Path, want: Kind) -> Result<RenameState, Refusal> {
        let (at_from, at_to) = (self.lstat(f)?, self.lstat(t)?);
        if self.resumed
            && at_from.is_none()
            && let Some(m) = &at_to
        {
            if m.kind != want {
                return Err(wrong_kind(&self.vol, self.mount, t, m.kind, want));
            }
            return Ok(RenameState::Done);
        }
        self.is(f, want)?;
        if at_to.is_some() {
            return Err(Refusal::TargetExists {
                from: shown(f),
                to: shown(t),
            });
        }
        Ok(RenameState::Pending)
    }

    /// Where the file a step names at step time (`path`) is now: before the plan's file
    /// renames, or, when resuming, wherever an earlier run left it.
    fn file_now(&self, plan: &Plan, path: &Path) -> Result<PathBuf, Refusal> {
        let before = self.now(&self.before_file_renames(plan, path));
        if self.resumed && self.lstat(&before)?.is_none() {
            return Ok(self.now(path));
        }
        Ok(before)
    }

    fn step(&mut self, plan: &Plan, step: &Step) -> Result<(), Refusal> {
        match step {
            Step::RenameDir { from, to } => {
                let (f, t) = (self.now(from), self.now(to));
                if self.rename(&f, &t, Kind::Dir)? == RenameState::Pending {
                    self.parent_writable(&f)?;
                    self.parent_writable(&t)?;
                    self.renamed.push((from.clone(), to.clone()));
                }
            }
            Step::RetargetSymlink { link, .. } => {
                let l = self.now(link);
                self.is(&l, Kind::Symlink)?;
                self.tmp_free(link)?;
                self.parent_writable(&l)?;
            }
            Step::RenameFile { from, to } => {
                let (f, t) = (self.now(from), self.now(to));
                if self.rename(&f, &t, Kind::File)? == RenameState::Pending {
                    self.parent_writable(&f)?;
                }
            }
            Step::PatchBinlogCheckpoints { file, .. } => {
                // Patched after its rename: look for it under its current name.
                let f = self.file_now(plan, file)?;
                self.is(&f, Kind::File)?;
                self.writable(&f)?;
            }
            Step::RewriteIndex { path } | Step::RewriteMyCnf { path } => {
                let p = self.file_now(plan, path)?;
                let m = self.is(&p, Kind::File)?;
                let max = if matches!(step, Step::RewriteMyCnf { .. }) {
                    mycnf::MAX_LEN as u64
                } else {
                    MAX_INDEX_LEN
                };
                let (bytes, _) =
                    self.root
                        .read_small(&p, max)
                        .map_err(|e| Refusal::Unreadable {
                            path: shown(&p),
                            reason: e.to_string(),
                        })?;
                let text = String::from_utf8(bytes).map_err(|_| Refusal::BadFileName {
                    path: shown(&p),
                    reason: "contents are not valid UTF-8; cannot be rewritten".into(),
                })?;
                if matches!(step, Step::RewriteMyCnf { .. }) {
                    let bad = |reason: String| Refusal::BadMyCnf {
                        path: shown(&p),
                        reason,
                    };
                    MyCnf::parse(&text)
                        .and_then(|c| c.rewrite(plan.from, plan.to, plan.server_id))
                        .map_err(|e| bad(e.to_string()))?;
                }
                self.tmp_free(path)?;
                self.parent_writable(&p)?;
                self.can_keep_owner(&p, &m)?;
            }
            Step::RemoveFile { path, .. } => {
                let p = self.now(path);
                if self.resumed && self.lstat(&p)?.is_none() {
                    return Ok(());
                }
                self.is(&p, Kind::File)?;
                self.parent_writable(&p)?;
            }
        }
        Ok(())
    }

    /// The name `path` has before the plan's file renames (the index is renamed before
    /// it is rewritten, the last binlog before it is patched).
    fn before_file_renames(&self, plan: &Plan, path: &Path) -> PathBuf {
        plan.steps
            .iter()
            .find_map(|s| match s {
                Step::RenameFile { from, to } if to == path => Some(from.clone()),
                _ => None,
            })
            .unwrap_or_else(|| path.to_path_buf())
    }
}

/// Checks that every step of a fresh `plan` can be carried out on the volume as it is.
pub fn check(root: &Root, mount: &str, plan: &Plan) -> Result<(), Refusal> {
    let mut c = Check {
        root,
        vol: Volume::new(root.path()),
        mount,
        renamed: Vec::new(),
        resumed: false,
    };
    // The journal goes first, into the volume root.
    c.writable(Path::new(""))?;
    c.tmp_free(Path::new(JOURNAL_NAME))?;
    c.steps(plan)
}

/// Checks that every step of a journaled `plan` is either done or can still be carried
/// out, so that finishing it cannot stop on a planted symlink, FIFO or name clash.
/// `mount` only tells a symlink that leaves the volume from one of the wrong type.
pub fn check_resume(root: &Root, mount: &str, plan: &Plan) -> Result<(), Refusal> {
    let mut c = Check {
        root,
        vol: Volume::new(root.path()),
        mount,
        renamed: Vec::new(),
        resumed: true,
    };
    // The journal is removed at the end: the volume root must stay writable.
    c.writable(Path::new(""))?;
    c.steps(plan)
}

impl Check<'_> {
    fn steps(&mut self, plan: &Plan) -> Result<(), Refusal> {
        for step in &plan.steps {
            for p in step_paths(step) {
                if p.to_str().is_none() {
                    return Err(Refusal::BadFileName {
                        path: p.to_string_lossy().into_owned(),
                        reason: "the name is not valid UTF-8".into(),
                    });
                }
            }
            self.step(plan, step)?;
        }
        Ok(())
    }
}

fn step_paths(step: &Step) -> Vec<&Path> {
    match step {
        Step::RenameDir { from, to } | Step::RenameFile { from, to } => vec![from, to],
        Step::RetargetSymlink { link, .. } => vec![link],
        Step::PatchBinlogCheckpoints { file, .. } => vec![file],
        Step::RewriteIndex { path }
        | Step::RemoveFile { path, .. }
        | Step::RewriteMyCnf { path } => vec![path],
    }
}
