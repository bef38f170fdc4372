//! Crash-safe file system steps: every change is atomic (done or not, never half) and
//! idempotent, and new contents are on disk before the name points at them. The steps do
//! not make their directory entries durable one by one: the journal is durable before
//! the first step, so after a power loss any subset of the steps may have reached the
//! disk and the rerun completes the rest; [`crate::act::apply`] makes them all durable
//! with one `syncfs` before it removes the journal. (One sync instead of one or two per
//! step: under write load each directory fsync can wait for a whole file system commit.)
//! All of them go through [`Root`], so none can reach outside the volume.

use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::beneath::{Kind, Meta, Root};

fn parent(path: &Path) -> &Path {
    path.parent().unwrap_or_else(|| Path::new(""))
}

/// How an idempotent rename ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renamed {
    Now,
    Already,
}

/// Renames `from` to `to` unless that already happened. Both present, or neither, is an
/// error: the state is not one this program leaves behind, and guessing could lose data.
pub fn rename_once(root: &Root, from: &Path, to: &Path) -> io::Result<Renamed> {
    let from_there = root.lstat(from)?.is_some();
    let to_there = root.lstat(to)?.is_some();
    match (from_there, to_there) {
        (true, false) => {
            root.rename(from, to)?;
            Ok(Renamed::Now)
        }
        (false, true) => Ok(Renamed::Already),
        (true, true) => Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("both {} and {} exist", from.display(), to.display()),
        )),
        (false, false) => Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("neither {} nor {} exists", from.display(), to.display()),
        )),
    }
}

/// The temporary name a replacement of `path` is written under, next to it.
pub fn tmp_name(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    parent(path).join(format!(".{name}.vtsnap-tmp"))
}

/// Removes a temporary file a killed run left (the entry itself: a symlink is removed,
/// never followed).
fn clear_tmp(root: &Root, tmp: &Path) -> io::Result<()> {
    match root.unlink(tmp) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Replaces the contents of `path` (now `old`, with owner and mode `meta`) by `new`
/// atomically, keeping owner and mode. Does nothing if they are already equal.
pub fn replace_contents(
    root: &Root,
    path: &Path,
    old: &[u8],
    meta: &Meta,
    new: &[u8],
) -> io::Result<bool> {
    if old == new {
        return Ok(false);
    }
    write_new(root, path, new, Some(meta))?;
    Ok(true)
}

/// Writes `path` atomically (temp file created with `O_EXCL | O_NOFOLLOW`, fsync, rename);
/// with `like`, the new file takes that owner and mode, set on the open file. The data is
/// synced before the rename, so the name never points at a file whose contents were lost;
/// the rename itself becomes durable with the next sync of its directory or file system.
pub fn write_new(root: &Root, path: &Path, contents: &[u8], like: Option<&Meta>) -> io::Result<()> {
    let tmp = tmp_name(path);
    clear_tmp(root, &tmp)?;
    {
        let mut f = root.create_new(&tmp)?;
        f.write_all(contents)?;
        if let Some(m) = like {
            // Owner first: a chown clears set-id bits that the mode then restores.
            std::os::unix::fs::fchown(&f, Some(m.uid), Some(m.gid))?;
            f.set_permissions(std::fs::Permissions::from_mode(m.mode))?;
        }
        f.sync_all()?;
    }
    root.rename(&tmp, path)
}

/// Points the symlink `link` at `target` atomically (new link, then rename over the old).
pub fn retarget_symlink(root: &Root, link: &Path, target: &str) -> io::Result<bool> {
    let meta = root
        .lstat(link)?
        .filter(|m| m.kind == Kind::Symlink)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is not a symlink", link.display()),
            )
        })?;
    if root.read_link(link)?.as_os_str() == target {
        return Ok(false);
    }
    let tmp = tmp_name(link);
    clear_tmp(root, &tmp)?;
    root.symlink(target, &tmp)?;
    root.lchown(&tmp, meta.uid, meta.gid)?;
    root.rename(&tmp, link)?;
    Ok(true)
}

/// Removes a regular file if it is there; anything else in its place is an error.
pub fn remove_file_if_present(root: &Root, path: &Path) -> io::Result<bool> {
    match root.lstat(path)? {
        None => Ok(false),
        Some(m) if m.kind == Kind::File => {
            root.unlink(path)?;
            Ok(true)
        }
        Some(m) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} is a {}, not a regular file; not removed",
                path.display(),
                m.kind.as_str()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn rename_once_is_idempotent_and_refuses_conflicts() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::open(d.path()).unwrap();
        let (a, b) = (Path::new("a"), Path::new("b"));
        fs::write(d.path().join(a), "x").unwrap();
        assert_eq!(rename_once(&root, a, b).unwrap(), Renamed::Now);
        assert_eq!(rename_once(&root, a, b).unwrap(), Renamed::Already);
        fs::write(d.path().join(a), "y").unwrap();
        assert_eq!(
            rename_once(&root, a, b).unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
        assert_eq!(
            rename_once(&root, Path::new("c"), Path::new("e"))
                .unwrap_err()
                .kind(),
            io::ErrorKind::NotFound
        );
    }

    #[test]
    fn replace_contents_keeps_mode_and_skips_equal_contents() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::open(d.path()).unwrap();
        let p = Path::new("my.cnf");
        fs::write(d.path().join(p), "old").unwrap();
        fs::set_permissions(d.path().join(p), fs::Permissions::from_mode(0o640)).unwrap();
        let (old, meta) = root.read_small(p, 100).unwrap();
        assert!(replace_contents(&root, p, &old, &meta, b"new").unwrap());
        assert_eq!(fs::read_to_string(d.path().join(p)).unwrap(), "new");
        assert_eq!(
            fs::metadata(d.path().join(p)).unwrap().mode() & 0o777,
            0o640
        );
        assert!(!replace_contents(&root, p, b"new", &meta, b"new").unwrap());
        assert!(!d.path().join(tmp_name(p)).exists());
    }

    #[test]
    fn a_planted_temp_symlink_is_removed_not_followed() {
        let d = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        fs::write(out.path().join("victim"), "outside").unwrap();
        let root = Root::open(d.path()).unwrap();
        std::os::unix::fs::symlink(out.path().join("victim"), d.path().join(".j.vtsnap-tmp"))
            .unwrap();
        write_new(&root, Path::new("j"), b"journal", None).unwrap();
        assert_eq!(fs::read_to_string(d.path().join("j")).unwrap(), "journal");
        assert_eq!(
            fs::read_to_string(out.path().join("victim")).unwrap(),
            "outside"
        );
    }

    #[test]
    fn retarget_symlink_swaps_the_target() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::open(d.path()).unwrap();
        let l = Path::new("data");
        std::os::unix::fs::symlink("/vt/vtdataroot/data/vt_0000000001", d.path().join(l)).unwrap();
        assert!(retarget_symlink(&root, l, "/vt/vtdataroot/data/vt_0000000002").unwrap());
        assert_eq!(
            fs::read_link(d.path().join(l)).unwrap().to_str(),
            Some("/vt/vtdataroot/data/vt_0000000002")
        );
        assert!(!retarget_symlink(&root, l, "/vt/vtdataroot/data/vt_0000000002").unwrap());
    }
}
