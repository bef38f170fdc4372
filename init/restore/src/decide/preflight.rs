//! Pre-flight: before the first change, look at everything the plan will touch and refuse
//! if any step could not be carried out — a name that cannot be journaled, a rename
//! target already there, a symlink or FIFO where a file is expected, a directory this
//! process cannot write, a file whose owner it cannot keep. A move that starts therefore
//! runs to its end; only an I/O error or a kill can stop it half-way.
//!
//! It decides, and reads nothing itself: it asks a [`VolumeView`], which observe answers
//! from the live volume ([`crate::observe::LiveVolume`]) and a test from a fake.
//!
//! Steps name paths as they are when the step runs (after the directory renames before
//! them); the pre-flight maps them back to where they are now.

use std::path::{Path, PathBuf};

use vtsnap_core::mycnf::{self, MyCnf};

use crate::beneath::{Kind, Meta};
use crate::binlog::MAX_INDEX_LEN;
use crate::decide::plan::{JOURNAL_NAME, Plan, Start, Step};
use crate::durable::tmp_name;
use crate::refusal::Refusal;

/// The volume as the pre-flight sees it: read-only questions, each answered or refused
/// as [`Refusal::Unreadable`] naming the path.
pub trait VolumeView {
    /// The entry at `rel` itself (a symlink is not followed); `None` if there is none.
    fn entry(&self, rel: &Path) -> Result<Option<Meta>, Refusal>;
    /// Whether this process may write `rel` (a directory: create, rename and remove names
    /// in it; a file: change its contents).
    fn writable(&self, rel: &Path) -> Result<bool, Refusal>;
    /// The contents of the regular file `rel`, refused if larger than `max` bytes.
    fn contents(&self, rel: &Path, max: u64) -> Result<Vec<u8>, Refusal>;
    /// Why the symlink at `rel` cannot be followed on the volume mounted at `mount` (it
    /// leaves the volume, or loops), if it cannot.
    fn escape(&self, mount: &str, rel: &Path) -> Option<Refusal>;
    /// Who this process is, as far as owners and permissions go.
    fn process(&self) -> &Process;
}

/// This process's effective user, group and supplementary groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
}

/// Why the entry at `rel` (of kind `found`) is not the `expected` kind: a symlink that
/// leaves the volume or loops (`escape` tells) is named as such, anything else is the
/// wrong type.
pub fn wrong_kind(
    rel: &Path,
    found: Kind,
    expected: Kind,
    escape: impl FnOnce() -> Option<Refusal>,
) -> Refusal {
    if found == Kind::Symlink
        && let Some(r) = escape()
    {
        return r;
    }
    Refusal::WrongFileType {
        path: rel.display().to_string(),
        found: found.as_str(),
        expected: expected.as_str(),
    }
}

struct Check<'a, V> {
    view: &'a V,
    mount: &'a str,
    /// Directory renames planned so far: (where it is now, where it will be).
    renamed: Vec<(PathBuf, PathBuf)>,
    /// Fresh, or a journaled plan being finished (each step may already be done).
    start: Start,
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

impl<V: VolumeView> Check<'_, V> {
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
        self.view.entry(p)
    }

    fn wrong_kind(&self, p: &Path, found: Kind, want: Kind) -> Refusal {
        wrong_kind(p, found, want, || self.view.escape(self.mount, p))
    }

    /// `p` (now) must be of kind `want`.
    fn is(&self, p: &Path, want: Kind) -> Result<Meta, Refusal> {
        match self.lstat(p)? {
            Some(m) if m.kind == want => Ok(m),
            Some(m) => Err(self.wrong_kind(p, m.kind, want)),
            None => Err(Refusal::Unreadable {
                path: shown(p),
                reason: "missing".into(),
            }),
        }
    }

    /// `p` (now) must be writable by this process.
    fn writable(&self, p: &Path) -> Result<(), Refusal> {
        if self.view.writable(p)? {
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
                self.view.process().uid
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
            Some(m) => Err(self.wrong_kind(&tmp, m.kind, Kind::File)),
        }
    }

    /// A rewritten file keeps its owner: this process must be able to give it that owner.
    fn can_keep_owner(&self, p: &Path, m: &Meta) -> Result<(), Refusal> {
        let me = self.view.process();
        let euid = me.uid;
        if euid == 0 {
            return Ok(());
        }
        let in_group = m.gid == me.gid || me.groups.contains(&m.gid);
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
        if self.start == Start::Resume
            && at_from.is_none()
            && let Some(m) = &at_to
        {
            if m.kind != want {
                return Err(self.wrong_kind(t, m.kind, want));
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
        if self.start == Start::Resume && self.lstat(&before)?.is_none() {
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
                let bytes = self.view.contents(&p, max)?;
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
                if self.start == Start::Resume && self.lstat(&p)?.is_none() {
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

/// Checks that every step of `plan` can be carried out on the volume as it is: from the
/// start, or ([`Start::Resume`]) each step either done by an earlier run or still to do,
/// so that finishing it cannot stop on a planted symlink, FIFO or name clash. `mount`
/// only tells a symlink that leaves the volume from one of the wrong type.
pub fn check(
    view: &impl VolumeView,
    mount: &str,
    plan: &Plan,
    start: Start,
) -> Result<(), Refusal> {
    let mut c = Check {
        view,
        mount,
        renamed: Vec::new(),
        start,
    };
    // The journal goes into the volume root first, and is removed from it at the end.
    c.writable(Path::new(""))?;
    if start == Start::Fresh {
        c.tmp_free(Path::new(JOURNAL_NAME))?;
    }
    c.steps(plan)
}

impl<V: VolumeView> Check<'_, V> {
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

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    use super::*;
    use crate::decide::POD_MOUNT;
    use crate::decide::fake::{FakeVolume, MYSQL, NEW, source, uid};
    use crate::decide::plan::plan;

    fn fresh_plan() -> Plan {
        plan(&source(), uid(NEW), 777)
    }

    fn check_fresh(v: &FakeVolume) -> Result<(), Refusal> {
        check(v, POD_MOUNT, &fresh_plan(), Start::Fresh)
    }

    #[test]
    fn the_plan_of_a_plain_volume_passes() {
        check_fresh(&FakeVolume::tablet_101()).unwrap();
    }

    #[test]
    fn a_volume_root_the_process_cannot_write_is_refused_as_dot() {
        let e = check_fresh(&FakeVolume::tablet_101().read_only("")).unwrap_err();
        assert!(
            matches!(&e, Refusal::NotWritable { path, reason } if path == "." && reason.contains("uid 999")),
            "{e}"
        );
        let e = check_fresh(&FakeVolume::tablet_101().read_only("vt_0000000101")).unwrap_err();
        assert!(
            matches!(&e, Refusal::NotWritable { path, .. } if path == "vt_0000000101"),
            "{e}"
        );
    }

    #[test]
    fn the_journal_temp_name_is_checked_only_for_a_fresh_plan() {
        // The name is `.<journal>.vtsnap-tmp` beside the journal.
        let planted = FakeVolume::tablet_101().dir("..vtsnap-restore.journal.vtsnap-tmp");
        assert!(matches!(
            check_fresh(&planted),
            Err(Refusal::WrongFileType { .. })
        ));
        let leftover = FakeVolume::tablet_101().file("..vtsnap-restore.journal.vtsnap-tmp", "");
        check_fresh(&leftover).unwrap();
        // Resumed: the journal is there already; only the steps are looked at.
        let half = FakeVolume::new()
            .dir("vt_0000000102")
            .file("vt_0000000102/my.cnf", crate::decide::fake::CNF)
            .dir("..vtsnap-restore.journal.vtsnap-tmp");
        check(&half, POD_MOUNT, &fresh_plan(), Start::Resume).unwrap();
    }

    #[test]
    fn a_rename_is_done_only_when_resuming_and_missing_on_both_sides_is_unreadable() {
        let half = FakeVolume::new()
            .dir("vt_0000000102")
            .file("vt_0000000102/my.cnf", crate::decide::fake::CNF);
        assert!(matches!(
            check_fresh(&half),
            Err(Refusal::Unreadable { path, .. }) if path == "vt_0000000101"
        ));
        check(&half, POD_MOUNT, &fresh_plan(), Start::Resume).unwrap();
        let done_as_file = FakeVolume::new().file("vt_0000000102", "");
        assert!(matches!(
            check(&done_as_file, POD_MOUNT, &fresh_plan(), Start::Resume),
            Err(Refusal::WrongFileType { path, .. }) if path == "vt_0000000102"
        ));
        let both = FakeVolume::tablet_101().dir("vt_0000000102");
        assert!(matches!(
            check(&both, POD_MOUNT, &fresh_plan(), Start::Resume),
            Err(Refusal::TargetExists { from, to }) if from == "vt_0000000101" && to == "vt_0000000102"
        ));
    }

    fn only(step: Step) -> Plan {
        Plan {
            steps: vec![step],
            ..fresh_plan()
        }
    }

    #[test]
    fn a_pending_file_rename_needs_a_writable_directory_and_a_done_one_does_not() {
        let rename = only(Step::RenameFile {
            from: "vt_0000000101/relay.000001".into(),
            to: "vt_0000000101/relay-new.000001".into(),
        });
        let pending = FakeVolume::tablet_101()
            .file("vt_0000000101/relay.000001", "")
            .read_only("vt_0000000101");
        assert!(matches!(
            check(&pending, POD_MOUNT, &rename, Start::Fresh),
            Err(Refusal::NotWritable { path, .. }) if path == "vt_0000000101"
        ));
        // Renamed by an earlier run: nothing left to write.
        let done = FakeVolume::tablet_101()
            .file("vt_0000000101/relay-new.000001", "")
            .read_only("vt_0000000101");
        check(&done, POD_MOUNT, &rename, Start::Resume).unwrap();
    }

    #[test]
    fn a_file_to_remove_may_be_gone_only_when_resuming() {
        let remove = only(Step::RemoveFile {
            path: "vt_0000000101/auto.cnf".into(),
            why: crate::decide::RemoveWhy::ServerUuidOfSource,
        });
        let gone = FakeVolume::tablet_101();
        check(&gone, POD_MOUNT, &remove, Start::Resume).unwrap();
        assert!(check(&gone, POD_MOUNT, &remove, Start::Fresh).is_err());
        let there = FakeVolume::tablet_101().file("vt_0000000101/auto.cnf", "");
        check(&there, POD_MOUNT, &remove, Start::Fresh).unwrap();
    }

    #[test]
    fn a_rewritten_file_must_keep_an_owner_this_process_can_give() {
        let cnf = "vt_0000000101/my.cnf";
        let other_user = FakeVolume::tablet_101().owned_by(cnf, 1000, MYSQL);
        assert!(matches!(
            check_fresh(&other_user),
            Err(Refusal::NotWritable { path, reason }) if path == cnf && reason.contains("owned by 1000:999")
        ));
        check_fresh(&other_user.clone().run_as(0, 0, &[])).unwrap();
        let other_group = FakeVolume::tablet_101().owned_by(cnf, MYSQL, 1000);
        assert!(check_fresh(&other_group).is_err());
        check_fresh(&other_group.clone().run_as(MYSQL, 5, &[1000])).unwrap();
        check_fresh(&other_group.run_as(MYSQL, 1000, &[])).unwrap();
    }

    #[test]
    fn a_symlink_is_named_for_where_it_leads_else_for_its_type() {
        let cnf = "vt_0000000101/my.cnf";
        let leaves = Refusal::SymlinkLeavesVolume {
            link: cnf.into(),
            target: "/etc/passwd".into(),
        };
        let v = FakeVolume::tablet_101().escaping_symlink(cnf, leaves.clone());
        assert_eq!(check_fresh(&v), Err(leaves));
        let v = FakeVolume::tablet_101().entry(cnf, Kind::Symlink);
        assert!(matches!(
            check_fresh(&v),
            Err(Refusal::WrongFileType {
                found: "symlink",
                expected: "regular file",
                ..
            })
        ));
    }

    #[test]
    fn a_my_cnf_that_cannot_be_rewritten_is_refused_before_any_change() {
        let cnf = "vt_0000000101/my.cnf";
        let v = FakeVolume::tablet_101().file(cnf, "datadir = /x\n");
        assert!(matches!(check_fresh(&v), Err(Refusal::BadMyCnf { .. })));
        let mut p = fresh_plan();
        p.steps.push(Step::RemoveFile {
            path: OsStr::from_bytes(b"vt_0000000102/\xff").into(),
            why: crate::decide::RemoveWhy::StaleRelayLog,
        });
        assert!(matches!(
            check(&FakeVolume::tablet_101(), POD_MOUNT, &p, Start::Fresh),
            Err(Refusal::BadFileName { .. })
        ));
    }
}
