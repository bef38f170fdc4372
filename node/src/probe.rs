//! The layout probe (docs/design.md §5.3): a tablet can be snapshotted consistently only if its
//! data directory, InnoDB data and redo directories, binlogs and relay logs all live on the
//! one volume being snapshotted — inside the PVC mount and on its file system.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use vtsnap_core::mycnf::MyCnf;
use vtsnap_core::naming::TabletUid;
use vtsnap_core::volume::{Volume, VolumeError};

/// The container path the tablet's `vtdataroot` is mounted at.
pub const MOUNT: &str = "/vt/vtdataroot";

/// The my.cnf keys that hold data a snapshot must capture atomically, and whether the
/// value names a file whose directory matters (binlog and relay-log base names).
const DATA_KEYS: [(&str, bool); 5] = [
    ("datadir", false),
    ("innodb_data_home_dir", false),
    ("innodb_log_group_home_dir", false),
    ("log_bin", true),
    ("relay_log", true),
];

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("{path}: no tablet directory {dir}")]
    NoTablet { path: String, dir: String },
    #[error("{path}: {reason}")]
    MyCnf { path: String, reason: String },
    #[error(
        "my.cnf {key} = {value} is outside the volume mounted at {MOUNT}: a multi-volume tablet"
    )]
    OffVolume { key: String, value: String },
    #[error(
        "my.cnf {key} resolves to {path}, on another file system than the volume: a multi-volume tablet"
    )]
    OtherFilesystem { key: String, path: String },
    #[error(transparent)]
    Volume(#[from] VolumeError),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProbedPath {
    pub key: String,
    pub value: String,
    /// Where it resolves, relative to the volume's vtdataroot.
    pub resolved: String,
}

/// A layout that passed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Layout {
    pub paths: Vec<ProbedPath>,
    pub restore_in_progress: bool,
    pub server_id: Option<u32>,
}

/// Reads my.cnf without ever blocking: a FIFO (or anything but a regular file) is an
/// error, not a read that waits for a writer; so is a file larger than any real my.cnf.
fn read_mycnf(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let meta = f.metadata()?;
    let bad = |msg: String| std::io::Error::new(std::io::ErrorKind::InvalidData, msg);
    if !meta.is_file() {
        return Err(bad("not a regular file".into()));
    }
    let max = vtsnap_core::mycnf::MAX_LEN as u64;
    if meta.len() > max {
        return Err(bad(format!(
            "{} bytes, more than the {max} read",
            meta.len()
        )));
    }
    let mut text = String::new();
    f.take(max + 1).read_to_string(&mut text)?;
    Ok(text)
}

/// Probes the tablet `uid` on the volume whose `vtdataroot` directory is `vtdataroot`.
pub fn probe(vtdataroot: &Path, uid: TabletUid) -> Result<Layout, ProbeError> {
    let tdir = vtdataroot.join(uid.tablet_dir_name());
    if !tdir.is_dir() {
        return Err(ProbeError::NoTablet {
            path: vtdataroot.display().to_string(),
            dir: uid.tablet_dir_name(),
        });
    }
    let cnf_path = tdir.join("my.cnf");
    let text = read_mycnf(&cnf_path).map_err(|e| ProbeError::MyCnf {
        path: cnf_path.display().to_string(),
        reason: e.to_string(),
    })?;
    let cnf = MyCnf::parse(&text).map_err(|e| ProbeError::MyCnf {
        path: cnf_path.display().to_string(),
        reason: e.to_string(),
    })?;
    let vol = Volume::new(vtdataroot);
    let dev = std::fs::metadata(vtdataroot)
        .map_err(|e| ProbeError::MyCnf {
            path: vtdataroot.display().to_string(),
            reason: e.to_string(),
        })?
        .dev();
    let datadir = cnf.get("datadir").unwrap_or_default().to_owned();
    let mut paths = Vec::new();
    for (key, is_file) in DATA_KEYS {
        let Some(value) = cnf.get(key).filter(|v| !v.is_empty()) else {
            continue;
        };
        let abs = if value.starts_with('/') {
            value.to_owned()
        } else {
            format!("{datadir}/{value}")
        };
        let rel = Volume::container_to_rel(MOUNT, &abs).ok_or_else(|| ProbeError::OffVolume {
            key: key.to_owned(),
            value: value.to_owned(),
        })?;
        let dir_rel = if is_file {
            rel.parent().map(Path::to_path_buf).unwrap_or_default()
        } else {
            rel
        };
        let resolved = vol.resolve(MOUNT, &dir_rel)?;
        let host: PathBuf = vol.abs(&resolved);
        // A directory not created yet would be created on the volume itself.
        let existing = host.ancestors().find(|p| p.exists()).unwrap_or(vtdataroot);
        let d = std::fs::metadata(existing)
            .map_err(|e| ProbeError::MyCnf {
                path: existing.display().to_string(),
                reason: e.to_string(),
            })?
            .dev();
        if d != dev {
            return Err(ProbeError::OtherFilesystem {
                key: key.to_owned(),
                path: host.display().to_string(),
            });
        }
        paths.push(ProbedPath {
            key: key.to_owned(),
            value: value.to_owned(),
            resolved: resolved.display().to_string(),
        });
    }
    Ok(Layout {
        paths,
        restore_in_progress: tdir.join("restore_in_progress").exists(),
        server_id: cnf.server_id(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_my_cnf_is_an_error_not_a_hang() {
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join(TabletUid::new(7).tablet_dir_name());
        std::fs::create_dir(&t).unwrap();
        let st = std::process::Command::new("mkfifo")
            .arg(t.join("my.cnf"))
            .status()
            .unwrap();
        assert!(st.success());
        let (tx, rx) = std::sync::mpsc::channel();
        let root = d.path().to_path_buf();
        std::thread::spawn(move || tx.send(probe(&root, TabletUid::new(7)).is_err()));
        let failed = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("probe hung on a FIFO my.cnf");
        assert!(failed);
    }
}
