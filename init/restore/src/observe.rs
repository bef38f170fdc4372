//! Observe: read the volume into a plain value. Reads only; never changes anything.
//!
//! The volume is the directory the tablet pod mounts at `/vt/vtdataroot` (PVC subPath
//! `vtdataroot`). Paths inside my.cnf and inside symlinks are container paths under that
//! mount; [`Volume`] maps them onto the directory we were given and refuses any path that
//! leaves it.

use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use vtsnap_core::naming::TabletUid;

use crate::beneath::{Kind, Meta, Root};
use crate::binlog::{self, LastBinlog};
use crate::decide::{LogDir, MoveSource, TopDirLink, is_numbered_log};
use crate::journal::{self, Journal};
use crate::mycnf::{self, MyCnf};
use crate::refusal::Refusal;
pub use vtsnap_core::volume::{VolPath, Volume};

/// Directories under the tablet directory that Vitess may turn into symlinks to
/// `$VTDATAROOT/<name>/vt_<uid>` (`go/vt/mysqlctl/mycnf_gen.go`, `TopLevelDirs`).
pub const TOP_LEVEL_DIRS: [&str; 4] = ["data", "innodb", "relay-logs", "bin-logs"];

/// Where vitess-operator mounts the volume; my.cnf's datadir tells the mount actually
/// used, so this only classifies a symlink met before that is known (a symlinked my.cnf,
/// or anything a resumed run finds: the journal does not record the mount).
pub const POD_MOUNT: &str = vtsnap_core::restore_pod::VTDATAROOT;

/// What the volume holds, as far as the restore is concerned.
#[derive(Debug, Clone)]
pub enum Observed {
    /// No tablet directory: a fresh volume, normal provisioning.
    Empty,
    /// Only this tablet's own directory: a same-UID replacement.
    Own { restore_in_progress: bool },
    /// An interrupted earlier run left its journal: finish it.
    Resume(Journal),
    /// Exactly one other tablet's directory.
    Move(Box<MoveSource>),
}

fn unreadable(path: &Path, e: &io::Error) -> Refusal {
    Refusal::Unreadable {
        path: path.display().to_string(),
        reason: e.to_string(),
    }
}

fn lstat(root: &Root, rel: &Path) -> Result<Option<Meta>, Refusal> {
    root.lstat(rel).map_err(|e| unreadable(rel, &e))
}

fn list_dir(root: &Root, rel: &Path) -> Result<Vec<OsString>, Refusal> {
    root.list(rel).map_err(|e| unreadable(rel, &e))
}

/// Why the entry at `rel` (of kind `found`) is not the `expected` kind: a symlink that
/// leaves the volume or loops is named as such, anything else is the wrong type.
pub fn wrong_kind(vol: &Volume, mount: &str, rel: &Path, found: Kind, expected: Kind) -> Refusal {
    if found == Kind::Symlink
        && let Err(e) = vol.resolve(mount, rel)
    {
        return e.into();
    }
    Refusal::WrongFileType {
        path: rel.display().to_string(),
        found: found.as_str(),
        expected: expected.as_str(),
    }
}

/// The entry at `rel` if it is of kind `want`; `None` if absent; refused if it is
/// anything else (a symlink included: the restore never acts through one).
fn expect(
    root: &Root,
    vol: &Volume,
    mount: &str,
    rel: &Path,
    want: Kind,
) -> Result<Option<Meta>, Refusal> {
    match lstat(root, rel)? {
        None => Ok(None),
        Some(m) if m.kind == want => Ok(Some(m)),
        Some(m) => Err(wrong_kind(vol, mount, rel, m.kind, want)),
    }
}

fn utf8(dir: &Path, name: &OsString) -> Result<String, Refusal> {
    name.to_str()
        .map(str::to_owned)
        .ok_or_else(|| Refusal::BadFileName {
            path: dir.join(name).display().to_string(),
            reason: "the name is not valid UTF-8; the restore cannot record it in its journal"
                .into(),
        })
}

/// Reads the volume. `mine` is the UID of the tablet this pod runs.
pub fn observe(root: &Root, mine: TabletUid) -> Result<Observed, Refusal> {
    if let Some(j) = journal::read(root)? {
        return Ok(Observed::Resume(j));
    }
    let names = list_dir(root, Path::new(""))?;
    let mut tablets = Vec::new();
    for name in &names {
        if name.as_bytes().starts_with(b"vt_") {
            let lossy = name.to_string_lossy();
            let uid = TabletUid::from_tablet_dir_name(&lossy).ok_or_else(|| {
                Refusal::StrangeTabletDir {
                    name: lossy.clone().into_owned(),
                }
            })?;
            tablets.push(uid);
        }
    }
    let others: Vec<TabletUid> = tablets.iter().copied().filter(|u| *u != mine).collect();
    let has_mine = tablets.contains(&mine);
    match (has_mine, others.as_slice()) {
        (false, []) => Ok(Observed::Empty),
        (true, []) => {
            let rip = Path::new(&mine.tablet_dir_name()).join("restore_in_progress");
            Ok(Observed::Own {
                restore_in_progress: lstat(root, &rip)?.is_some(),
            })
        }
        (true, [other, ..]) => Err(Refusal::BothPresent {
            old: *other,
            new: mine,
        }),
        (false, [one]) => observe_move(root, *one, mine).map(|m| Observed::Move(Box::new(m))),
        (false, several) => Err(Refusal::SeveralTablets {
            uids: several.to_vec(),
        }),
    }
}

/// A my.cnf path key resolved onto the volume; `None` when the key is absent, and a
/// refusal when it names data that lives off the volume.
fn data_path(
    vol: &Volume,
    cnf: &MyCnf,
    mount: &str,
    key: &str,
    datadir: &str,
) -> Result<Option<VolPath>, Refusal> {
    let Some(v) = cnf.get(key) else {
        return Ok(None);
    };
    if v.is_empty() {
        return Ok(None);
    }
    let abs = if v.starts_with('/') {
        v.to_owned()
    } else {
        format!("{datadir}/{v}")
    };
    let rel = Volume::container_to_rel(mount, &abs).ok_or_else(|| Refusal::OffVolume {
        key: key.to_owned(),
        value: v.to_owned(),
        mount: mount.to_owned(),
    })?;
    Ok(Some(vol.resolve(mount, &rel)?))
}

fn bad_cnf(path: &Path, reason: String) -> Refusal {
    Refusal::BadMyCnf {
        path: path.display().to_string(),
        reason,
    }
}

/// Reads and parses my.cnf: a regular file of at most [`mycnf::MAX_LEN`] bytes.
fn read_mycnf(root: &Root, vol: &Volume, path: &Path) -> Result<MyCnf, Refusal> {
    // No mount is known yet: a symlinked my.cnf is refused by type (or as leaving).
    match lstat(root, path)? {
        None => {
            return Err(Refusal::Unreadable {
                path: path.display().to_string(),
                reason: "no such file".into(),
            });
        }
        Some(m) if m.kind != Kind::File => {
            return Err(wrong_kind(vol, POD_MOUNT, path, m.kind, Kind::File));
        }
        Some(m) if m.len > mycnf::MAX_LEN as u64 => {
            return Err(bad_cnf(
                path,
                mycnf::MyCnfError::TooLarge {
                    len: usize::try_from(m.len).unwrap_or(usize::MAX),
                }
                .to_string(),
            ));
        }
        Some(_) => {}
    }
    let (bytes, _) = root
        .read_small(path, mycnf::MAX_LEN as u64)
        .map_err(|e| unreadable(path, &e))?;
    let text = String::from_utf8(bytes).map_err(|_| bad_cnf(path, "not valid UTF-8".into()))?;
    MyCnf::parse(&text).map_err(|e| bad_cnf(path, e.to_string()))
}

fn observe_move(root: &Root, from: TabletUid, to: TabletUid) -> Result<MoveSource, Refusal> {
    let vol = &Volume::new(root.path());
    let tdir = PathBuf::from(from.tablet_dir_name());
    let tmeta = lstat(root, &tdir)?;
    if !tmeta.is_some_and(|m| m.kind == Kind::Dir) {
        return Err(Refusal::TabletDirNotADirectory {
            name: tdir.display().to_string(),
        });
    }

    // my.cnf: must be there and parse; it tells where everything else is.
    let mycnf = tdir.join("my.cnf");
    let cnf = read_mycnf(root, vol, &mycnf)?;
    let datadir = cnf
        .get("datadir")
        .ok_or_else(|| bad_cnf(&mycnf, "no datadir".into()))?;
    let marker = format!("/{}", from.tablet_dir_name());
    let mount = match datadir.find(&marker) {
        Some(i) if datadir.starts_with('/') => datadir[..i].to_owned(),
        _ => {
            return Err(bad_cnf(
                &mycnf,
                format!(
                    "datadir {datadir:?} is not inside {}",
                    from.tablet_dir_name()
                ),
            ));
        }
    };
    let mount = if mount.is_empty() {
        "/".to_owned()
    } else {
        mount
    };

    // Symlinked children of the tablet directory must stay on the volume.
    let mut top_links = Vec::new();
    for name in list_dir(root, &tdir)? {
        let link = tdir.join(&name);
        let Some(meta) = lstat(root, &link)? else {
            continue;
        };
        if meta.kind != Kind::Symlink {
            continue;
        }
        let target = vol.resolve(&mount, &link)?;
        let text = root
            .read_link(&link)
            .map_err(|e| unreadable(&link, &e))?
            .to_string_lossy()
            .into_owned();
        if lstat(root, &target)?.is_none() {
            return Err(Refusal::DanglingSymlink {
                link: link.display().to_string(),
                target: text,
            });
        }
        if target
            .file_name()
            .is_some_and(|n| n == from.tablet_dir_name().as_str())
        {
            utf8(&tdir, &name)?;
            top_links.push(TopDirLink {
                link,
                target_text: text,
                target,
            });
        }
    }

    // Every `<top>/vt_*` on the volume must be one of ours and linked from the tablet.
    for top in TOP_LEVEL_DIRS {
        if !lstat(root, Path::new(top))?.is_some_and(|m| m.kind == Kind::Dir) {
            continue;
        }
        for name in list_dir(root, Path::new(top))? {
            if !name.as_bytes().starts_with(b"vt_") {
                continue;
            }
            let p = Path::new(top).join(&name);
            if name == to.tablet_dir_name().as_str() {
                return Err(Refusal::BothPresent { old: from, new: to });
            }
            if !top_links.iter().any(|l| l.target == p) {
                return Err(Refusal::UnlinkedTopDir {
                    path: p.display().to_string(),
                });
            }
        }
    }

    // The data-bearing directories must resolve onto the volume.
    for key in [
        "datadir",
        "innodb_data_home_dir",
        "innodb_log_group_home_dir",
    ] {
        data_path(vol, &cnf, &mount, key, datadir)?;
    }

    // A log directory and the files in it the move acts on: each a regular file with a
    // UTF-8 name. `keep` sorts the names starting with `<base>.`: act on it, pass over
    // it, or refuse the whole volume (the setting points at something that is no log).
    let log_dir =
        |key: &str, keep: &dyn Fn(&str, &str) -> LogFile| -> Result<Option<LogDir>, Refusal> {
            let Some(path) = data_path(vol, &cnf, &mount, key, datadir)? else {
                return Ok(None);
            };
            let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
            let base = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let dotted = format!("{base}.");
            let mut files = Vec::new();
            if expect(root, vol, &mount, &dir, Kind::Dir)?.is_some() {
                for name in list_dir(root, &dir)? {
                    if !name.as_bytes().starts_with(dotted.as_bytes()) {
                        continue;
                    }
                    let name = utf8(&dir, &name)?;
                    match keep(&name, &base) {
                        LogFile::Keep => {}
                        LogFile::Skip => continue,
                        LogFile::NotALog => {
                            return Err(bad_cnf(
                                &mycnf,
                                format!(
                                    "{key} names {}/{base}, but {name} there is not a log of it; \
                                     the setting points at something else",
                                    dir.display()
                                ),
                            ));
                        }
                    }
                    expect(root, vol, &mount, &dir.join(&name), Kind::File)?;
                    files.push(name);
                }
            }
            Ok(Some(LogDir { dir, base, files }))
        };
    let binlogs = log_dir("log_bin", &|_, _| LogFile::Keep)?;
    // Only numbered relay logs and the relay index are ever removed, and a relay-log base
    // that also names something else (a table's `.ibd`, `my.cnf`) is refused.
    let relay_logs = log_dir("relay_log", &relay_log_file)?;
    if let (Some(b), Some(r)) = (&binlogs, &relay_logs)
        && b.dir == r.dir
        && b.base == r.base
    {
        return Err(bad_cnf(
            &mycnf,
            format!(
                "log-bin and relay-log both name {}/{}",
                b.dir.display(),
                b.base
            ),
        ));
    }

    // The binlog index: explicit key, else `<log-bin>.index`.
    let binlog_index = match data_path(vol, &cnf, &mount, "log_bin_index", datadir)? {
        Some(p) => Some(p),
        None => data_path(vol, &cnf, &mount, "log_bin", datadir)?
            .map(|b| PathBuf::from(format!("{}.index", b.display()))),
    };
    let binlog_index = match binlog_index {
        Some(p) => expect(root, vol, &mount, &p, Kind::File)?.map(|_| p),
        None => None,
    };

    let last_binlog = match (&binlog_index, &binlogs) {
        (Some(index), Some(dir)) => {
            last_binlog(root, vol, &mount, index, dir, &from.log_file_prefix())?
        }
        _ => None,
    };

    let mut relay_files = Vec::new();
    let mut relay_file = |p: VolPath, suffix: &str| -> Result<(), Refusal> {
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let inside_relay_dir = relay_logs
            .as_ref()
            .is_some_and(|r| p.parent() == Some(r.dir.as_path()) && r.files.contains(&name));
        if inside_relay_dir {
            return Ok(());
        }
        if !(name.len() > suffix.len() && name.ends_with(suffix)) {
            return Err(bad_cnf(
                &mycnf,
                format!(
                    "{} does not end in {suffix}; the restore removes only relay-log bookkeeping",
                    p.display()
                ),
            ));
        }
        if expect(root, vol, &mount, &p, Kind::File)?.is_some() {
            relay_files.push(p);
        }
        Ok(())
    };
    if let Some(p) = data_path(vol, &cnf, &mount, "relay_log_index", datadir)? {
        relay_file(p, ".index")?;
    }
    match data_path(vol, &cnf, &mount, "relay_log_info_file", datadir)? {
        Some(p) => relay_file(p, ".info")?,
        None => {
            // Unset or empty: the server's default, relay-log.info in the datadir.
            let d = data_path(vol, &cnf, &mount, "datadir", datadir)?.unwrap_or_default();
            relay_file(d.join("relay-log.info"), ".info")?;
        }
    }
    if let Some(b) = &binlogs
        && let Some(p) = relay_files.iter().find(|p| {
            p.parent() == Some(b.dir.as_path())
                && p.file_name()
                    .is_some_and(|n| b.files.iter().any(|f| n == f.as_str()))
        })
    {
        return Err(bad_cnf(
            &mycnf,
            format!(
                "{} is both a binlog file and relay-log bookkeeping",
                p.display()
            ),
        ));
    }

    let data = data_path(vol, &cnf, &mount, "datadir", datadir)?.unwrap_or_default();
    let auto = data.join("auto.cnf");
    let auto_cnf = expect(root, vol, &mount, &auto, Kind::File)?.map(|_| auto);

    Ok(MoveSource {
        from,
        mount,
        mycnf,
        old_server_id: cnf.server_id(),
        top_links,
        binlogs,
        binlog_index,
        last_binlog,
        relay_logs,
        relay_files,
        auto_cnf,
        restore_in_progress: lstat(root, &tdir.join("restore_in_progress"))?.is_some(),
    })
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

/// Scans the binlog the index lists last; a crash image needs its checkpoints patched.
fn last_binlog(
    root: &Root,
    vol: &Volume,
    mount: &str,
    index: &Path,
    dir: &LogDir,
    prefix: &str,
) -> Result<Option<(VolPath, LastBinlog)>, Refusal> {
    let bad = |path: &Path, reason: String| Refusal::BadBinlog {
        path: path.display().to_string(),
        reason,
    };
    let (bytes, _) = root
        .read_small(index, binlog::MAX_INDEX_LEN)
        .map_err(|e| unreadable(index, &e))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| bad(index, "binlog index is not valid UTF-8".into()))?;
    let Some(name) = binlog::last_index_entry(&text) else {
        return Ok(None);
    };
    let path = dir.dir.join(name);
    if expect(root, vol, mount, &path, Kind::File)?.is_none() {
        return Err(Refusal::Unreadable {
            path: path.display().to_string(),
            reason: format!("listed last in {} but missing", index.display()),
        });
    }
    let (file, _) = root
        .open_file(&path, false)
        .map_err(|e| unreadable(&path, &e))?;
    let scan = binlog::scan_last(&file, &path.display().to_string(), prefix)
        .map_err(|e| bad(&path, e.to_string()))?;
    Ok(Some((path, scan)))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
