//! The plan: a pure function from the tablet found on the volume ([`MoveSource`]) to the
//! ordered steps of its move, and the rules for which files a move may touch. No file
//! system access here; the plan is a value that `--dry-run` prints and the journal keeps.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use vtsnap_core::naming::TabletUid;
use vtsnap_core::volume::VolPath;

use vtsnap_core::mycnf::replace_uid_refs;

use crate::binlog::LastBinlog;

/// Lowest server-id Vitess hands out (`go/vt/mysqlctl/mycnf_gen.go`, RandomizeMysqlServerID):
/// 0 is reserved and 1–99 are used by Vitess's own binlog connections.
pub const SERVER_ID_MIN: u32 = 100;
/// Server-ids stay below 2^31 (semi-sync logs print them as signed 32-bit).
pub const SERVER_ID_END: u32 = 1 << 31;

/// Where a fresh plan is written, in the volume root, before its first step (the journal
/// that keeps it is `crate::journal`).
pub const JOURNAL_NAME: &str = ".vtsnap-restore.journal";

/// A tablet-directory child that is a symlink into `<top>/vt_<old>` on the volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopDirLink {
    /// The link, e.g. `vt_0000000101/data`.
    pub link: VolPath,
    /// The link's text, e.g. `/vt/vtdataroot/data/vt_0000000101`.
    pub target_text: String,
    /// Where it points on the volume, e.g. `data/vt_0000000101`.
    pub target: VolPath,
}

/// A log directory (binlogs or relay logs) and the log files in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogDir {
    pub dir: VolPath,
    /// The log base name from my.cnf, e.g. `vt-0000000101-bin`.
    pub base: String,
    /// File names in `dir` that start with `<base>.` (numbered logs, index, state).
    pub files: Vec<String>,
}

/// Everything the planner needs to move tablet `from` onto this volume.
#[derive(Debug, Clone)]
pub struct MoveSource {
    pub from: TabletUid,
    pub mount: String,
    pub mycnf: VolPath,
    pub old_server_id: Option<u32>,
    pub top_links: Vec<TopDirLink>,
    pub binlogs: Option<LogDir>,
    pub binlog_index: Option<VolPath>,
    pub last_binlog: Option<(VolPath, LastBinlog)>,
    pub relay_logs: Option<LogDir>,
    /// Relay-log bookkeeping files that exist: the relay index (if outside `relay_logs`)
    /// and the relay-log info file.
    pub relay_files: Vec<VolPath>,
    pub auto_cnf: Option<VolPath>,
    pub restore_in_progress: bool,
}

/// One idempotent change. Paths are relative to the volume directory and are where the
/// thing is at the moment the step runs (after the steps before it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Step {
    RenameDir {
        from: PathBuf,
        to: PathBuf,
    },
    RetargetSymlink {
        link: PathBuf,
        target: String,
    },
    RenameFile {
        from: PathBuf,
        to: PathBuf,
    },
    /// Rewrites the file names in a crash image's binlog checkpoint events (see `binlog`).
    PatchBinlogCheckpoints {
        file: PathBuf,
        offsets: Vec<u64>,
    },
    RewriteIndex {
        path: PathBuf,
    },
    RemoveFile {
        path: PathBuf,
        why: RemoveWhy,
    },
    RewriteMyCnf {
        path: PathBuf,
    },
}

/// Why a file is removed: the only three kinds of file the restore ever deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RemoveWhy {
    /// A numbered relay log or the relay-log index.
    StaleRelayLog,
    /// The relay-log index or info file named in my.cnf.
    StaleRelayLogInfo,
    /// MySQL's `auto.cnf`, which holds the source's server_uuid.
    ServerUuidOfSource,
}

/// `<base>.<digits>`: a numbered binlog or relay log of `base`.
pub fn is_numbered_log(name: &str, base: &str) -> bool {
    name.strip_prefix(base)
        .and_then(|r| r.strip_prefix('.'))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// How the move treats a file named `<log base>.<suffix>` in a log directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFile {
    /// Part of the log: the move acts on it.
    Keep,
    /// The server's own bookkeeping of the log: left as it is.
    Skip,
    /// Not part of any log: the setting names something else.
    NotALog,
}

/// Sorts a file whose name starts with `<base>.` in the relay-log directory. Besides the
/// numbered logs and the index, MySQL writes `<index>_crash_safe` and `<base>.~rec~`
/// while it rewrites the index (`sql/binlog.cc`), and the info file may share the base.
pub fn relay_log_file(name: &str, base: &str) -> LogFile {
    if is_numbered_log(name, base) || name == format!("{base}.index") {
        return LogFile::Keep;
    }
    match name.strip_prefix(base).and_then(|r| r.strip_prefix('.')) {
        Some("index_crash_safe" | "~rec~" | "info") => LogFile::Skip,
        _ => LogFile::NotALog,
    }
}

/// Whether the restore may delete a file named `name` for `why` (`base` is the relay-log
/// base name, if known). Checked when planning and again on a journal read back.
pub fn may_remove(name: &str, why: RemoveWhy, base: Option<&str>) -> bool {
    let numbered_any = || {
        name.rsplit_once('.').is_some_and(|(b, n)| {
            !b.is_empty() && !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit())
        })
    };
    match why {
        RemoveWhy::StaleRelayLog => match base {
            Some(b) => is_numbered_log(name, b) || name == format!("{b}.index"),
            None => numbered_any() || (name.len() > ".index".len() && name.ends_with(".index")),
        },
        RemoveWhy::StaleRelayLogInfo => {
            (name.len() > ".info".len() && name.ends_with(".info"))
                || (name.len() > ".index".len() && name.ends_with(".index"))
        }
        RemoveWhy::ServerUuidOfSource => name == "auto.cnf",
    }
}

impl Step {
    pub fn op(&self) -> &'static str {
        match self {
            Self::RenameDir { .. } => "rename-dir",
            Self::RetargetSymlink { .. } => "retarget-symlink",
            Self::RenameFile { .. } => "rename-file",
            Self::PatchBinlogCheckpoints { .. } => "patch-binlog-checkpoints",
            Self::RewriteIndex { .. } => "rewrite-index",
            Self::RemoveFile { .. } => "remove-file",
            Self::RewriteMyCnf { .. } => "rewrite-my-cnf",
        }
    }
}

/// Where a plan starts: fresh (its journal is still to be written) or resumed (an earlier,
/// interrupted run wrote the journal, and each step may already be done).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    Fresh,
    Resume,
}

/// The move of one volume from tablet `from` to tablet `to`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub from: TabletUid,
    pub to: TabletUid,
    pub server_id: u32,
    pub old_server_id: Option<u32>,
    pub restore_in_progress: bool,
    pub steps: Vec<Step>,
}

/// Where a path of the old layout is once the directories named after `from` are renamed.
fn moved(p: &Path, from: TabletUid, to: TabletUid) -> PathBuf {
    PathBuf::from(replace_uid_refs(&p.to_string_lossy(), from, to))
}

/// Plans the move. `server_id` is the new server-id, chosen by the caller.
pub fn plan(src: &MoveSource, to: TabletUid, server_id: u32) -> Plan {
    let from = src.from;
    let mv = |p: &Path| moved(p, from, to);
    let mut steps = Vec::new();

    // Directories first (Vitess's symlinked top-level dirs, then the tablet directory),
    // so every later step names the final location.
    for l in &src.top_links {
        steps.push(Step::RenameDir {
            from: l.target.clone(),
            to: mv(&l.target),
        });
    }
    let tdir = PathBuf::from(from.tablet_dir_name());
    steps.push(Step::RenameDir {
        from: tdir.clone(),
        to: mv(&tdir),
    });
    for l in &src.top_links {
        steps.push(Step::RetargetSymlink {
            link: mv(&l.link),
            target: replace_uid_refs(&l.target_text, from, to),
        });
    }

    // Binlogs keep their contents and numbering; only names change.
    if let Some(b) = &src.binlogs {
        let dir = mv(&b.dir);
        for f in &b.files {
            let new = replace_uid_refs(f, from, to);
            if new != *f {
                steps.push(Step::RenameFile {
                    from: dir.join(f),
                    to: dir.join(new),
                });
            }
        }
    }
    if let Some((file, scan)) = &src.last_binlog
        && scan.in_use
        && !scan.checkpoints_to_patch.is_empty()
    {
        steps.push(Step::PatchBinlogCheckpoints {
            file: mv(file),
            offsets: scan.checkpoints_to_patch.clone(),
        });
    }
    if let Some(index) = &src.binlog_index {
        steps.push(Step::RewriteIndex { path: mv(index) });
    }

    // Relay logs are a copy of the source's binlog that the new replica re-fetches
    // through GTID auto-positioning; the old ones and their bookkeeping go.
    if let Some(r) = &src.relay_logs {
        let dir = mv(&r.dir);
        for f in &r.files {
            steps.push(Step::RemoveFile {
                path: dir.join(f),
                why: RemoveWhy::StaleRelayLog,
            });
        }
    }
    // Only the directories move; these files keep their names until they are removed.
    let moved_dir = |p: &Path| match (p.parent(), p.file_name()) {
        (Some(d), Some(n)) => mv(d).join(n),
        _ => mv(p),
    };
    for p in &src.relay_files {
        steps.push(Step::RemoveFile {
            path: moved_dir(p),
            why: RemoveWhy::StaleRelayLogInfo,
        });
    }
    if let Some(a) = &src.auto_cnf {
        steps.push(Step::RemoveFile {
            path: moved_dir(a),
            why: RemoveWhy::ServerUuidOfSource,
        });
    }

    // my.cnf last: once it names the new tablet, everything it points at is in place.
    steps.push(Step::RewriteMyCnf {
        path: mv(&src.mycnf),
    });

    Plan {
        from,
        to,
        server_id,
        old_server_id: src.old_server_id,
        restore_in_progress: src.restore_in_progress,
        steps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_relay_logs_their_bookkeeping_and_auto_cnf_may_be_removed() {
        use RemoveWhy::*;
        let b = Some("vt-0000000101-relay-bin");
        for (name, why, base, want) in [
            ("vt-0000000101-relay-bin.000001", StaleRelayLog, b, true),
            ("vt-0000000101-relay-bin.index", StaleRelayLog, b, true),
            ("vt-0000000101-relay-bin.info", StaleRelayLog, b, false),
            ("other-relay-bin.000001", StaleRelayLog, b, false),
            ("t0.ibd", StaleRelayLog, b, false),
            // Without a known base: any numbered log or any index, nothing else.
            ("x.000001", StaleRelayLog, None, true),
            ("x.index", StaleRelayLog, None, true),
            (".index", StaleRelayLog, None, false),
            (".000001", StaleRelayLog, None, false),
            ("x.", StaleRelayLog, None, false),
            ("x.00a", StaleRelayLog, None, false),
            ("x.ibd", StaleRelayLog, None, false),
            ("relay-log.info", StaleRelayLogInfo, None, true),
            ("x.index", StaleRelayLogInfo, None, true),
            (".info", StaleRelayLogInfo, None, false),
            (".index", StaleRelayLogInfo, None, false),
            ("info", StaleRelayLogInfo, None, false),
            ("my.cnf", StaleRelayLogInfo, None, false),
            ("relay-log.info.bak", StaleRelayLogInfo, None, false),
            ("auto.cnf", ServerUuidOfSource, None, true),
            ("auto.cnf.bak", ServerUuidOfSource, None, false),
            ("my.cnf", ServerUuidOfSource, None, false),
        ] {
            assert_eq!(may_remove(name, why, base), want, "{name} {why:?} {base:?}");
        }
    }

    #[test]
    fn relay_log_files_are_sorted_by_suffix() {
        let b = "vt-0000000101-relay-bin";
        for (name, want) in [
            ("vt-0000000101-relay-bin.000001", LogFile::Keep),
            ("vt-0000000101-relay-bin.index", LogFile::Keep),
            ("vt-0000000101-relay-bin.index_crash_safe", LogFile::Skip),
            ("vt-0000000101-relay-bin.~rec~", LogFile::Skip),
            ("vt-0000000101-relay-bin.info", LogFile::Skip),
            ("vt-0000000101-relay-bin.", LogFile::NotALog),
            ("vt-0000000101-relay-bin.00a1", LogFile::NotALog),
            ("vt-0000000101-relay-bin.ibd", LogFile::NotALog),
            ("vt-0000000101-relay-bin.index.bak", LogFile::NotALog),
        ] {
            assert_eq!(relay_log_file(name, b), want, "{name}");
        }
        assert_eq!(relay_log_file("t0.ibd", "t0"), LogFile::NotALog);
        assert_eq!(relay_log_file("my.cnf", "my"), LogFile::NotALog);
    }

    #[test]
    fn every_steps_op_is_its_json_tag() {
        let p = PathBuf::from("a");
        for step in [
            Step::RenameDir {
                from: p.clone(),
                to: p.clone(),
            },
            Step::RetargetSymlink {
                link: p.clone(),
                target: "t".into(),
            },
            Step::RenameFile {
                from: p.clone(),
                to: p.clone(),
            },
            Step::PatchBinlogCheckpoints {
                file: p.clone(),
                offsets: vec![4],
            },
            Step::RewriteIndex { path: p.clone() },
            Step::RemoveFile {
                path: p.clone(),
                why: RemoveWhy::StaleRelayLog,
            },
            Step::RewriteMyCnf { path: p.clone() },
        ] {
            let json = serde_json::to_value(&step).unwrap();
            assert_eq!(json["op"], step.op(), "{step:?}");
        }
    }
}
