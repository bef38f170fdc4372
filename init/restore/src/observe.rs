//! Observe: read the volume (the tablet directories, my.cnf, binlogs, a journal an
//! earlier run left), the new server-id's randomness and this process's identity into
//! [`Observed`]. Reads only; never changes anything. The pre-flight's later questions
//! about the volume are answered here too, by [`LiveVolume`].
//!
//! The volume is the directory the tablet pod mounts at `/vt/vtdataroot` (PVC subPath
//! `vtdataroot`). Paths inside my.cnf and inside symlinks are container paths under that
//! mount; [`Volume`] maps them onto the directory we were given and refuses any path that
//! leaves it.

use std::ffi::OsString;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::process::{getegid, geteuid, getgroups};
use vtsnap_core::mycnf::{self, MyCnf};
use vtsnap_core::naming::TabletUid;
pub use vtsnap_core::volume::{VolPath, Volume};

use crate::beneath::{Kind, Meta, OpenFor, Root};
use crate::binlog::{self, LastBinlog};
use crate::decide::plan::{
    LogDir, LogFile, MoveSource, SERVER_ID_END, SERVER_ID_MIN, TopDirLink, relay_log_file,
};
use crate::decide::preflight::{Process, VolumeView, wrong_kind};
use crate::decide::{Found, NewServerId, Observed, POD_MOUNT};
use crate::journal;
use crate::refusal::Refusal;

/// Directories under the tablet directory that Vitess may turn into symlinks to
/// `$VTDATAROOT/<name>/vt_<uid>` (`go/vt/mysqlctl/mycnf_gen.go`, `TopLevelDirs`).
pub const TOP_LEVEL_DIRS: [&str; 4] = ["data", "innodb", "relay-logs", "bin-logs"];

/// Why the volume could not be observed.
#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    #[error("bad usage: --vtdataroot {} is not a directory ({source})", path.display())]
    NotADirectory { path: PathBuf, source: io::Error },
    #[error("refusing to change the volume: {0}")]
    Refused(#[from] Refusal),
    #[error("cannot pick a random server-id: {0}")]
    Random(#[source] io::Error),
}

/// Reads the volume at `vtdataroot` for tablet `mine`; `server_id` is the one asked for
/// by flag, else one is drawn at random for a move.
pub fn observe(
    vtdataroot: &Path,
    mine: TabletUid,
    server_id: Option<u32>,
) -> Result<Observed<LiveVolume>, ObserveError> {
    let root = Root::open(vtdataroot).map_err(|source| ObserveError::NotADirectory {
        path: vtdataroot.to_path_buf(),
        source,
    })?;
    let found = found(&root, mine, server_id)?;
    Ok(Observed {
        mine,
        found,
        volume: LiveVolume::new(root),
    })
}

/// A random server-id in [100, 2^31) that differs from `old`.
pub fn random_server_id(old: Option<u32>) -> io::Result<u32> {
    let mut f = std::fs::File::open("/dev/urandom")?;
    loop {
        let mut b = [0u8; 4];
        f.read_exact(&mut b)?;
        let id = server_id_from(u32::from_le_bytes(b));
        if Some(id) != old {
            return Ok(id);
        }
    }
}

/// The server-id a random draw maps to, in [`SERVER_ID_MIN`, `SERVER_ID_END`).
fn server_id_from(draw: u32) -> u32 {
    SERVER_ID_MIN + draw % (SERVER_ID_END - SERVER_ID_MIN)
}

/// The volume as it is, for the pre-flight's questions ([`VolumeView`]), and the handle
/// act changes it through.
#[derive(Debug)]
pub struct LiveVolume {
    root: Root,
    vol: Volume,
    process: Process,
}

impl LiveVolume {
    pub fn new(root: Root) -> Self {
        let process = Process {
            uid: geteuid().as_raw(),
            gid: getegid().as_raw(),
            // Unknown groups grant nothing: the pre-flight then refuses rather than fails.
            groups: getgroups()
                .map(|g| g.iter().map(|g| g.as_raw()).collect())
                .unwrap_or_default(),
        };
        Self {
            vol: Volume::new(root.path()),
            root,
            process,
        }
    }

    pub fn root(&self) -> &Root {
        &self.root
    }
}

impl VolumeView for LiveVolume {
    fn entry(&self, rel: &Path) -> Result<Option<Meta>, Refusal> {
        lstat(&self.root, rel)
    }

    fn writable(&self, rel: &Path) -> Result<bool, Refusal> {
        self.root.writable(rel).map_err(|e| unreadable(rel, &e))
    }

    fn contents(&self, rel: &Path, max: u64) -> Result<Vec<u8>, Refusal> {
        let (bytes, _) = self
            .root
            .read_small(rel, max)
            .map_err(|e| unreadable(rel, &e))?;
        Ok(bytes)
    }

    fn escape(&self, mount: &str, rel: &Path) -> Option<Refusal> {
        self.vol.resolve(mount, rel).err().map(Refusal::from)
    }

    fn process(&self) -> &Process {
        &self.process
    }
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

/// [`wrong_kind`], telling a symlink that leaves the volume seen from `mount`.
fn mismatch(vol: &Volume, mount: &str, rel: &Path, found: Kind, expected: Kind) -> Refusal {
    wrong_kind(rel, found, expected, || {
        vol.resolve(mount, rel).err().map(Refusal::from)
    })
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
        Some(m) => Err(mismatch(vol, mount, rel, m.kind, want)),
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

/// Reads what the volume holds. `mine` is the UID of the tablet this pod runs.
fn found(root: &Root, mine: TabletUid, server_id: Option<u32>) -> Result<Found, ObserveError> {
    if let Some(j) = journal::read(root)? {
        return Ok(Found::Resume(j.plan));
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
        (false, []) => Ok(Found::Empty),
        (true, []) => {
            let rip = Path::new(&mine.tablet_dir_name()).join("restore_in_progress");
            Ok(Found::Own {
                restore_in_progress: lstat(root, &rip)?.is_some(),
            })
        }
        (true, [other, ..]) => Err(Refusal::BothPresent {
            old: *other,
            new: mine,
        }
        .into()),
        (false, [one]) => {
            let source = Box::new(observe_move(root, *one, mine)?);
            let server_id = match server_id {
                Some(id) => NewServerId::Given(id),
                None => NewServerId::Drawn(
                    random_server_id(source.old_server_id).map_err(ObserveError::Random)?,
                ),
            };
            Ok(Found::Move { source, server_id })
        }
        (false, several) => Err(Refusal::SeveralTablets {
            uids: several.to_vec(),
        }
        .into()),
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
            return Err(mismatch(vol, POD_MOUNT, path, m.kind, Kind::File));
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
        .open_file(&path, OpenFor::Reading)
        .map_err(|e| unreadable(&path, &e))?;
    let scan = binlog::scan_last(&file, &path.display().to_string(), prefix)
        .map_err(|e| bad(&path, e.to_string()))?;
    Ok(Some((path, scan)))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::{random_server_id, server_id_from};
    use crate::decide::plan::{SERVER_ID_END, SERVER_ID_MIN};

    /// Every draw lands in the range, and the range is used from end to end.
    #[test]
    fn a_draw_maps_onto_the_whole_server_id_range() {
        let span = SERVER_ID_END - SERVER_ID_MIN;
        assert_eq!(server_id_from(0), SERVER_ID_MIN);
        assert_eq!(server_id_from(span - 1), SERVER_ID_END - 1);
        assert_eq!(server_id_from(span), SERVER_ID_MIN);
        assert_eq!(server_id_from(span + 7), SERVER_ID_MIN + 7);
        assert!(server_id_from(u32::MAX) < SERVER_ID_END);
    }

    /// A drawn server-id is spread over the whole range: two replicas restored from one
    /// snapshot must not pick the same id by a skewed draw (32 draws from 2^31 values
    /// repeat with a chance of about 2^-22).
    #[test]
    fn server_ids_are_drawn_from_the_whole_range_and_never_the_old_one() {
        let ids: Vec<u32> = (0..32)
            .map(|_| random_server_id(Some(SERVER_ID_MIN)).unwrap())
            .collect();
        assert!(
            ids.iter()
                .all(|id| (SERVER_ID_MIN + 1..SERVER_ID_END).contains(id)),
            "{ids:?}"
        );
        let distinct: BTreeSet<u32> = ids.iter().copied().collect();
        assert!(distinct.len() >= 30, "{ids:?}");
    }
}
