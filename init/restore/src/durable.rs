//! Crash-safe file system steps: every change is either done or not, and is on disk
//! (data and directory entry) before the next step starts.

use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// Flushes a directory so the renames and removals in it survive a crash.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

fn parent(path: &Path) -> &Path {
    path.parent().unwrap_or_else(|| Path::new("."))
}

/// How an idempotent rename ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renamed {
    Now,
    Already,
}

/// Renames `from` to `to` unless that already happened. Both present, or neither, is an
/// error: the state is not one this program leaves behind, and guessing could lose data.
pub fn rename_once(from: &Path, to: &Path) -> io::Result<Renamed> {
    let from_there = fs::symlink_metadata(from).is_ok();
    let to_there = fs::symlink_metadata(to).is_ok();
    match (from_there, to_there) {
        (true, false) => {
            fs::rename(from, to)?;
            sync_dir(parent(to))?;
            if parent(from) != parent(to) {
                sync_dir(parent(from))?;
            }
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

fn tmp_name(path: &Path) -> std::path::PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    parent(path).join(format!(".{name}.vtsnap-tmp"))
}

/// Replaces the contents of `path` atomically (temp file, fsync, rename, fsync dir),
/// keeping its owner and mode. Does nothing if the contents are already `contents`.
pub fn replace_contents(path: &Path, contents: &[u8]) -> io::Result<bool> {
    let meta = fs::metadata(path)?;
    if fs::read(path)? == contents {
        return Ok(false);
    }
    write_new(path, contents, Some(&meta))?;
    Ok(true)
}

/// Writes `path` atomically; with `like`, the new file takes that owner and mode.
pub fn write_new(path: &Path, contents: &[u8], like: Option<&fs::Metadata>) -> io::Result<()> {
    let tmp = tmp_name(path);
    {
        let mut f = File::create(&tmp)?;
        f.write_all(contents)?;
        if let Some(m) = like {
            fs::set_permissions(&tmp, fs::Permissions::from_mode(m.mode() & 0o7777))?;
            std::os::unix::fs::chown(&tmp, Some(m.uid()), Some(m.gid()))?;
        }
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    sync_dir(parent(path))
}

/// Points the symlink `link` at `target` atomically (new link, then rename over the old).
pub fn retarget_symlink(link: &Path, target: &str) -> io::Result<bool> {
    if fs::read_link(link)?.as_os_str() == target {
        return Ok(false);
    }
    let meta = fs::symlink_metadata(link)?;
    let tmp = tmp_name(link);
    let _ = fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target, &tmp)?;
    std::os::unix::fs::lchown(&tmp, Some(meta.uid()), Some(meta.gid()))?;
    fs::rename(&tmp, link)?;
    sync_dir(parent(link))?;
    Ok(true)
}

/// Removes a file if it is there.
pub fn remove_if_present(path: &Path) -> io::Result<bool> {
    match fs::remove_file(path) {
        Ok(()) => {
            sync_dir(parent(path))?;
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rename_once_is_idempotent_and_refuses_conflicts() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        fs::write(&a, "x").unwrap();
        assert_eq!(rename_once(&a, &b).unwrap(), Renamed::Now);
        assert_eq!(rename_once(&a, &b).unwrap(), Renamed::Already);
        fs::write(&a, "y").unwrap();
        assert_eq!(
            rename_once(&a, &b).unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
        let c = d.path().join("c");
        assert_eq!(
            rename_once(&c, &d.path().join("e")).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }

    #[test]
    fn replace_contents_keeps_mode_and_skips_equal_contents() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("my.cnf");
        fs::write(&p, "old").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o640)).unwrap();
        assert!(replace_contents(&p, b"new").unwrap());
        assert_eq!(fs::read_to_string(&p).unwrap(), "new");
        assert_eq!(fs::metadata(&p).unwrap().mode() & 0o777, 0o640);
        assert!(!replace_contents(&p, b"new").unwrap());
        assert!(!tmp_name(&p).exists());
    }

    #[test]
    fn retarget_symlink_swaps_the_target() {
        let d = tempfile::tempdir().unwrap();
        let l = d.path().join("data");
        std::os::unix::fs::symlink("/vt/vtdataroot/data/vt_0000000001", &l).unwrap();
        assert!(retarget_symlink(&l, "/vt/vtdataroot/data/vt_0000000002").unwrap());
        assert_eq!(
            fs::read_link(&l).unwrap().to_str(),
            Some("/vt/vtdataroot/data/vt_0000000002")
        );
        assert!(!retarget_symlink(&l, "/vt/vtdataroot/data/vt_0000000002").unwrap());
    }
}
