//! Observe: read the volume into a plain value. Reads only; never changes anything.
//!
//! The volume is the directory the tablet pod mounts at `/vt/vtdataroot` (PVC subPath
//! `vtdataroot`). Paths inside my.cnf and inside symlinks are container paths under that
//! mount; [`Volume`] maps them onto the directory we were given and refuses any path that
//! leaves it.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use vtsnap_core::naming::TabletUid;

use crate::binlog::{self, LastBinlog};
use crate::journal::{self, Journal};
use crate::mycnf::MyCnf;
use crate::refusal::Refusal;
pub use vtsnap_core::volume::{VolPath, Volume};

/// Directories under the tablet directory that Vitess may turn into symlinks to
/// `$VTDATAROOT/<name>/vt_<uid>` (`go/vt/mysqlctl/mycnf_gen.go`, `TopLevelDirs`).
pub const TOP_LEVEL_DIRS: [&str; 4] = ["data", "innodb", "relay-logs", "bin-logs"];

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

fn list_dir(vol: &Volume, rel: &Path) -> Result<Vec<String>, Refusal> {
    let abs = vol.abs(rel);
    let mut names = Vec::new();
    for entry in fs::read_dir(&abs).map_err(|e| unreadable(&abs, &e))? {
        let entry = entry.map_err(|e| unreadable(&abs, &e))?;
        names.push(entry.file_name().to_string_lossy().into_owned());
    }
    names.sort();
    Ok(names)
}

/// Reads the volume. `mine` is the UID of the tablet this pod runs.
pub fn observe(vol: &Volume, mine: TabletUid) -> Result<Observed, Refusal> {
    if let Some(j) = journal::read(&vol.dir)? {
        return Ok(Observed::Resume(j));
    }
    let names = list_dir(vol, Path::new(""))?;
    let mut tablets = Vec::new();
    for name in &names {
        if name.starts_with("vt_") {
            let uid = TabletUid::from_tablet_dir_name(name)
                .ok_or_else(|| Refusal::StrangeTabletDir { name: name.clone() })?;
            tablets.push(uid);
        }
    }
    let others: Vec<TabletUid> = tablets.iter().copied().filter(|u| *u != mine).collect();
    let has_mine = tablets.contains(&mine);
    match (has_mine, others.as_slice()) {
        (false, []) => Ok(Observed::Empty),
        (true, []) => {
            let rip = vol
                .abs(Path::new(&mine.tablet_dir_name()))
                .join("restore_in_progress");
            Ok(Observed::Own {
                restore_in_progress: rip.exists(),
            })
        }
        (true, [other, ..]) => Err(Refusal::BothPresent {
            old: *other,
            new: mine,
        }),
        (false, [one]) => {
            observe_move(vol, *one, mine, &names).map(|m| Observed::Move(Box::new(m)))
        }
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

fn observe_move(
    vol: &Volume,
    from: TabletUid,
    to: TabletUid,
    root_names: &[String],
) -> Result<MoveSource, Refusal> {
    let tdir = PathBuf::from(from.tablet_dir_name());
    let tmeta =
        fs::symlink_metadata(vol.abs(&tdir)).map_err(|e| unreadable(&vol.abs(&tdir), &e))?;
    if !tmeta.is_dir() {
        return Err(Refusal::TabletDirNotADirectory {
            name: tdir.display().to_string(),
        });
    }

    // my.cnf: must be there and parse; it tells where everything else is.
    let mycnf = tdir.join("my.cnf");
    let text = fs::read_to_string(vol.abs(&mycnf)).map_err(|e| unreadable(&vol.abs(&mycnf), &e))?;
    let cnf = MyCnf::parse(&text).map_err(|e| Refusal::BadMyCnf {
        path: mycnf.display().to_string(),
        reason: e.to_string(),
    })?;
    let datadir = cnf.get("datadir").ok_or_else(|| Refusal::BadMyCnf {
        path: mycnf.display().to_string(),
        reason: "no datadir".into(),
    })?;
    let marker = format!("/{}", from.tablet_dir_name());
    let mount = match datadir.find(&marker) {
        Some(i) if datadir.starts_with('/') => datadir[..i].to_owned(),
        _ => {
            return Err(Refusal::BadMyCnf {
                path: mycnf.display().to_string(),
                reason: format!(
                    "datadir {datadir:?} is not inside {}",
                    from.tablet_dir_name()
                ),
            });
        }
    };
    let mount = if mount.is_empty() {
        "/".to_owned()
    } else {
        mount
    };

    // Symlinked children of the tablet directory must stay on the volume.
    let mut top_links = Vec::new();
    for name in list_dir(vol, &tdir)? {
        let link = tdir.join(&name);
        let meta =
            fs::symlink_metadata(vol.abs(&link)).map_err(|e| unreadable(&vol.abs(&link), &e))?;
        if !meta.file_type().is_symlink() {
            continue;
        }
        let target = vol.resolve(&mount, &link)?;
        let text = fs::read_link(vol.abs(&link))
            .map_err(|e| unreadable(&vol.abs(&link), &e))?
            .to_string_lossy()
            .into_owned();
        if !vol.abs(&target).exists() {
            return Err(Refusal::DanglingSymlink {
                link: link.display().to_string(),
                target: text,
            });
        }
        if target
            .file_name()
            .is_some_and(|n| n == from.tablet_dir_name().as_str())
        {
            top_links.push(TopDirLink {
                link,
                target_text: text,
                target,
            });
        }
    }

    // Every `<top>/vt_*` on the volume must be one of ours and linked from the tablet.
    for top in TOP_LEVEL_DIRS {
        if !root_names.iter().any(|n| n == top) || !vol.abs(Path::new(top)).is_dir() {
            continue;
        }
        for name in list_dir(vol, Path::new(top))? {
            if !name.starts_with("vt_") {
                continue;
            }
            let p = Path::new(top).join(&name);
            if name == to.tablet_dir_name() {
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

    let prefix = from.log_file_prefix();
    let log_dir = |key: &str| -> Result<Option<LogDir>, Refusal> {
        let Some(path) = data_path(vol, &cnf, &mount, key, datadir)? else {
            return Ok(None);
        };
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let base = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let dotted = format!("{base}.");
        let files = if vol.abs(&dir).is_dir() {
            list_dir(vol, &dir)?
                .into_iter()
                .filter(|n| n.starts_with(&dotted))
                .collect()
        } else {
            Vec::new()
        };
        Ok(Some(LogDir { dir, base, files }))
    };
    let binlogs = log_dir("log_bin")?;
    let relay_logs = log_dir("relay_log")?;

    // The binlog index: explicit key, else `<log-bin>.index`.
    let binlog_index = match data_path(vol, &cnf, &mount, "log_bin_index", datadir)? {
        Some(p) => Some(p),
        None => data_path(vol, &cnf, &mount, "log_bin", datadir)?
            .map(|b| PathBuf::from(format!("{}.index", b.display()))),
    }
    .filter(|p| vol.abs(p).is_file());

    let last_binlog = match (&binlog_index, &binlogs) {
        (Some(index), Some(dir)) => last_binlog(vol, index, dir, &prefix)?,
        _ => None,
    };

    let mut relay_files = Vec::new();
    for key in ["relay_log_index", "relay_log_info_file"] {
        if let Some(p) = data_path(vol, &cnf, &mount, key, datadir)? {
            let inside_relay_dir = relay_logs.as_ref().is_some_and(|r| {
                p.parent() == Some(r.dir.as_path())
                    && p.file_name()
                        .is_some_and(|n| r.files.iter().any(|f| f.as_str() == n))
            });
            if vol.abs(&p).is_file() && !inside_relay_dir {
                relay_files.push(p);
            }
        }
    }
    if cnf.get("relay_log_info_file").is_none() {
        // Server default: relay-log.info in the datadir.
        let d = data_path(vol, &cnf, &mount, "datadir", datadir)?.unwrap_or_default();
        let p = d.join("relay-log.info");
        if vol.abs(&p).is_file() {
            relay_files.push(p);
        }
    }

    let data = data_path(vol, &cnf, &mount, "datadir", datadir)?.unwrap_or_default();
    let auto_cnf = Some(data.join("auto.cnf")).filter(|p| vol.abs(p).is_file());

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
        restore_in_progress: vol.abs(&tdir).join("restore_in_progress").exists(),
    })
}

/// Scans the binlog the index lists last; a crash image needs its checkpoints patched.
fn last_binlog(
    vol: &Volume,
    index: &Path,
    dir: &LogDir,
    prefix: &str,
) -> Result<Option<(VolPath, LastBinlog)>, Refusal> {
    let text = fs::read_to_string(vol.abs(index)).map_err(|e| unreadable(&vol.abs(index), &e))?;
    let Some(last) = text.lines().map(str::trim).rfind(|l| !l.is_empty()) else {
        return Ok(None);
    };
    let name = Path::new(last)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned());
    let Some(name) = name else { return Ok(None) };
    let path = dir.dir.join(&name);
    if !vol.abs(&path).is_file() {
        return Err(Refusal::Unreadable {
            path: path.display().to_string(),
            reason: format!("listed last in {} but missing", index.display()),
        });
    }
    let scan = binlog::scan_last(&vol.abs(&path), prefix).map_err(|e| Refusal::BadBinlog {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    Ok(Some((path, scan)))
}
