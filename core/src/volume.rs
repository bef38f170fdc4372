//! A tablet data volume as the node (or an init container) sees it, and the container
//! paths that point into it.
//!
//! Inside a tablet pod the volume's `vtdataroot` directory is mounted at `/vt/vtdataroot`;
//! my.cnf and Vitess's symlinks use those container paths. [`Volume`] maps them onto the
//! directory we actually have and follows symlinks component by component, refusing any
//! path that leaves the volume.

use std::fs;
use std::path::{Component, Path, PathBuf};

/// Why a path cannot be followed inside the volume.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VolumeError {
    #[error("symlink {link} -> {target} leaves the volume")]
    LeavesVolume { link: String, target: String },
    #[error("symlink {link} is part of a loop (more than 40 links to follow)")]
    SymlinkLoop { link: String },
    #[error("cannot read {path}: {reason}")]
    Unreadable { path: String, reason: String },
}

/// The volume as mounted, and the container path it is mounted at.
#[derive(Debug, Clone)]
pub struct Volume {
    pub dir: PathBuf,
}

/// A path relative to the volume directory, with no `..` and no symlinks left in it.
pub type VolPath = PathBuf;

impl Volume {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    pub fn abs(&self, rel: &Path) -> PathBuf {
        self.dir.join(rel)
    }

    /// Maps a container path (as written in my.cnf or a symlink) into the volume.
    /// `mount` is the container path of the volume directory (e.g. `/vt/vtdataroot`).
    pub fn container_to_rel(mount: &str, path: &str) -> Option<VolPath> {
        let rest = Path::new(path).strip_prefix(mount).ok()?;
        normalize(rest)
    }

    /// Follows symlinks component by component, as the kernel would inside the pod.
    /// Components that do not exist yet are fine at the tail (a log not written yet).
    pub fn resolve(&self, mount: &str, rel: &Path) -> Result<VolPath, VolumeError> {
        let mut done = PathBuf::new();
        let mut todo: Vec<std::ffi::OsString> = rel
            .components()
            .rev()
            .map(|c| c.as_os_str().to_owned())
            .collect();
        let mut hops = 0;
        while let Some(c) = todo.pop() {
            if c == ".." {
                if !done.pop() {
                    return Err(VolumeError::LeavesVolume {
                        link: rel.display().to_string(),
                        target: "..".into(),
                    });
                }
                continue;
            }
            if c == "." {
                continue;
            }
            let next = done.join(&c);
            let meta = match fs::symlink_metadata(self.abs(&next)) {
                Ok(m) => m,
                Err(_) => {
                    done = next;
                    continue;
                }
            };
            if !meta.file_type().is_symlink() {
                done = next;
                continue;
            }
            hops += 1;
            let target = fs::read_link(self.abs(&next)).map_err(|e| VolumeError::Unreadable {
                path: next.display().to_string(),
                reason: e.to_string(),
            })?;
            let t = target.to_string_lossy().into_owned();
            let leaves = || VolumeError::LeavesVolume {
                link: next.display().to_string(),
                target: t.clone(),
            };
            if hops > 40 {
                return Err(VolumeError::SymlinkLoop {
                    link: next.display().to_string(),
                });
            }
            let base = if target.is_absolute() {
                Self::container_to_rel(mount, &t).ok_or_else(leaves)?
            } else {
                let joined = done.join(&target);
                normalize(&joined).ok_or_else(leaves)?
            };
            done = PathBuf::new();
            for comp in base.components().rev() {
                todo.push(comp.as_os_str().to_owned());
            }
        }
        Ok(done)
    }
}

/// Lexically normalizes a relative path; `None` if it climbs above its start.
fn normalize(p: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir | Component::RootDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_follows_links_and_refuses_escapes() {
        let d = tempfile::tempdir().unwrap();
        let vol = Volume::new(d.path());
        fs::create_dir_all(d.path().join("vt_0000000001")).unwrap();
        fs::create_dir_all(d.path().join("data/vt_0000000001")).unwrap();
        std::os::unix::fs::symlink(
            "/vt/vtdataroot/data/vt_0000000001",
            d.path().join("vt_0000000001/data"),
        )
        .unwrap();
        std::os::unix::fs::symlink("../data/vt_0000000001", d.path().join("vt_0000000001/rel"))
            .unwrap();
        std::os::unix::fs::symlink("/var/lib/mysql", d.path().join("vt_0000000001/out")).unwrap();
        std::os::unix::fs::symlink("../../../etc", d.path().join("vt_0000000001/up")).unwrap();
        let m = "/vt/vtdataroot";
        assert_eq!(
            vol.resolve(m, Path::new("vt_0000000001/data/ibdata1"))
                .unwrap(),
            PathBuf::from("data/vt_0000000001/ibdata1")
        );
        assert_eq!(
            vol.resolve(m, Path::new("vt_0000000001/rel")).unwrap(),
            PathBuf::from("data/vt_0000000001")
        );
        assert!(matches!(
            vol.resolve(m, Path::new("vt_0000000001/out/x")),
            Err(VolumeError::LeavesVolume { .. })
        ));
        assert!(matches!(
            vol.resolve(m, Path::new("vt_0000000001/up")),
            Err(VolumeError::LeavesVolume { .. })
        ));
    }

    #[test]
    fn container_paths_map_only_under_the_mount() {
        assert_eq!(
            Volume::container_to_rel("/vt/vtdataroot", "/vt/vtdataroot/vt_1/data"),
            Some(PathBuf::from("vt_1/data"))
        );
        assert_eq!(
            Volume::container_to_rel("/vt/vtdataroot", "/vt/vtdataroot2/x"),
            None
        );
        assert_eq!(
            Volume::container_to_rel("/vt/vtdataroot", "/vt/vtdataroot/../x"),
            None
        );
    }
}
