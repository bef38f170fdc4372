//! File system access that cannot leave the volume.
//!
//! Every path is relative and made of plain names only (no `..`, no root), and it is
//! walked one component at a time from a handle on the volume root with `O_NOFOLLOW`: a
//! symlink anywhere on the way is an error, never followed. That is what `openat2` with
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` does, done by hand so it also works where a
//! container's seccomp profile blocks `openat2`. Observe resolves Vitess's symlinks into
//! plain volume paths first (`Volume::resolve`); everything after that goes through here.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Access, AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

/// What kind of thing a directory entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Fifo,
    Socket,
    Device,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::File => "regular file",
            Kind::Dir => "directory",
            Kind::Symlink => "symlink",
            Kind::Fifo => "FIFO",
            Kind::Socket => "socket",
            Kind::Device => "device",
        }
    }

    fn of(ft: FileType) -> Self {
        match ft {
            FileType::RegularFile => Kind::File,
            FileType::Directory => Kind::Dir,
            FileType::Symlink => Kind::Symlink,
            FileType::Fifo => Kind::Fifo,
            FileType::Socket => Kind::Socket,
            _ => Kind::Device,
        }
    }
}

/// An entry's type, owner, mode and size (as `lstat` sees it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    pub kind: Kind,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub len: u64,
}

impl Meta {
    fn of(st: &rustix::fs::Stat) -> Self {
        Self {
            kind: Kind::of(FileType::from_raw_mode(st.st_mode)),
            mode: st.st_mode & 0o7777,
            uid: st.st_uid,
            gid: st.st_gid,
            len: u64::try_from(st.st_size).unwrap_or(0),
        }
    }
}

/// A handle on the volume root.
#[derive(Debug)]
pub struct Root {
    fd: OwnedFd,
    dir: PathBuf,
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// The plain names of a relative path; anything else (`..`, `/`, `.`) is an error.
fn names(rel: &Path) -> io::Result<Vec<&OsStr>> {
    rel.components()
        .map(|c| match c {
            Component::Normal(n) => Ok(n),
            _ => Err(invalid(format!(
                "{} is not a plain path inside the volume",
                rel.display()
            ))),
        })
        .collect()
}

/// What a regular file is opened for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenFor {
    Reading,
    /// Reading and writing.
    Writing,
}

/// How a directory is held while walking to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DirHandle {
    /// `O_PATH`: enough to walk on and to name entries by.
    PathOnly,
    /// Open for reading: to list it or fsync it.
    Readable,
}

/// Splits `rel` into its parent and its last name.
fn split(rel: &Path) -> io::Result<(&Path, &OsStr)> {
    let name = rel
        .file_name()
        .ok_or_else(|| invalid(format!("{} names no file", rel.display())))?;
    Ok((rel.parent().unwrap_or(Path::new("")), name))
}

fn not_found(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound
}

impl Root {
    /// Opens the volume root (the directory the operator gave; it may itself be a symlink).
    pub fn open(dir: &Path) -> io::Result<Self> {
        let fd = rustix::fs::open(
            dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Self {
            fd,
            dir: dir.to_owned(),
        })
    }

    /// The root as a path, for messages and for `Volume::resolve`.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Opens directory `rel` ("" is the root) without following any symlink: readable
    /// for listing or fsync, or an `O_PATH` handle (needs only search permission).
    fn walk(&self, rel: &Path, handle: DirHandle) -> io::Result<OwnedFd> {
        let mut cur = rustix::fs::openat(
            &self.fd,
            ".",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let mut done = PathBuf::new();
        for name in names(rel)? {
            done.push(name);
            cur = match rustix::fs::openat(
                &cur,
                name,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            ) {
                Ok(fd) => fd,
                Err(Errno::NOTDIR | Errno::LOOP) => {
                    let kind = rustix::fs::statat(&cur, name, AtFlags::SYMLINK_NOFOLLOW)
                        .map(|st| Meta::of(&st).kind.as_str())
                        .unwrap_or("non-directory");
                    return Err(io::Error::new(
                        io::ErrorKind::NotADirectory,
                        format!("{} is a {kind}, not followed", done.display()),
                    ));
                }
                Err(e) => return Err(e.into()),
            };
        }
        if handle == DirHandle::Readable {
            return Ok(rustix::fs::openat(
                &cur,
                ".",
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )?);
        }
        Ok(cur)
    }

    fn parent(&self, rel: &Path) -> io::Result<(OwnedFd, OsString)> {
        let (parent, name) = split(rel)?;
        Ok((self.walk(parent, DirHandle::PathOnly)?, name.to_owned()))
    }

    /// What is at `rel` (the entry itself, not a symlink's target); `None` if nothing is.
    pub fn lstat(&self, rel: &Path) -> io::Result<Option<Meta>> {
        if rel.as_os_str().is_empty() {
            return Ok(Some(Meta::of(&rustix::fs::fstat(&self.fd)?)));
        }
        let (dir, name) = match self.parent(rel) {
            Ok(p) => p,
            Err(e) if not_found(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        match rustix::fs::statat(&dir, &name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(Meta::of(&st))),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The names in directory `rel`, sorted.
    pub fn list(&self, rel: &Path) -> io::Result<Vec<OsString>> {
        let fd = self.walk(rel, DirHandle::Readable)?;
        let mut out = Vec::new();
        for entry in rustix::fs::Dir::read_from(&fd)? {
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name != b"." && name != b".." {
                out.push(OsStr::from_bytes(name).to_owned());
            }
        }
        out.sort();
        Ok(out)
    }

    /// Opens the regular file `rel` for reading (or reading and writing). A symlink, a
    /// FIFO, a device or a directory is an error, and opening never blocks.
    pub fn open_file(&self, rel: &Path, open: OpenFor) -> io::Result<(File, Meta)> {
        let (dir, name) = self.parent(rel)?;
        // Look before opening: opening some devices has side effects.
        let st = rustix::fs::statat(&dir, &name, AtFlags::SYMLINK_NOFOLLOW)?;
        let kind = Meta::of(&st).kind;
        let not_file = |kind: Kind| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{} is a {}, not a regular file",
                    rel.display(),
                    kind.as_str()
                ),
            )
        };
        if kind != Kind::File {
            return Err(not_file(kind));
        }
        let access = match open {
            OpenFor::Reading => OFlags::RDONLY,
            OpenFor::Writing => OFlags::RDWR,
        };
        let fd = rustix::fs::openat(
            &dir,
            &name,
            access | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        // Checked again on the open file: the entry may have been swapped in between.
        let meta = Meta::of(&rustix::fs::fstat(&fd)?);
        if meta.kind != Kind::File {
            return Err(not_file(meta.kind));
        }
        Ok((File::from(fd), meta))
    }

    /// Reads the regular file `rel` if it is at most `max` bytes.
    pub fn read_small(&self, rel: &Path, max: u64) -> io::Result<(Vec<u8>, Meta)> {
        let (f, meta) = self.open_file(rel, OpenFor::Reading)?;
        let too_large = |len: u64| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is {len} bytes, more than the {max} read", rel.display()),
            )
        };
        if meta.len > max {
            return Err(too_large(meta.len));
        }
        let mut buf = Vec::with_capacity(usize::try_from(meta.len).unwrap_or(0));
        f.take(max.saturating_add(1)).read_to_end(&mut buf)?;
        if buf.len() as u64 > max {
            return Err(too_large(buf.len() as u64));
        }
        Ok((buf, meta))
    }

    /// The text of the symlink `rel`.
    pub fn read_link(&self, rel: &Path) -> io::Result<OsString> {
        let (dir, name) = self.parent(rel)?;
        let t = rustix::fs::readlinkat(&dir, &name, Vec::new())?;
        Ok(OsStr::from_bytes(t.as_bytes()).to_owned())
    }

    /// Creates `rel` as a new, empty file (mode 0600); an existing entry of any kind,
    /// a symlink included, is an error.
    pub fn create_new(&self, rel: &Path) -> io::Result<File> {
        let (dir, name) = self.parent(rel)?;
        let fd = rustix::fs::openat(
            &dir,
            &name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )?;
        Ok(File::from(fd))
    }

    /// Creates the symlink `rel` pointing at `target` (the text is not interpreted).
    pub fn symlink(&self, target: &str, rel: &Path) -> io::Result<()> {
        let (dir, name) = self.parent(rel)?;
        Ok(rustix::fs::symlinkat(target, &dir, &name)?)
    }

    /// Sets the owner of the entry `rel` itself (a symlink is not followed).
    pub fn lchown(&self, rel: &Path, uid: u32, gid: u32) -> io::Result<()> {
        let (dir, name) = self.parent(rel)?;
        Ok(rustix::fs::chownat(
            &dir,
            &name,
            Some(rustix::fs::Uid::from_raw(uid)),
            Some(rustix::fs::Gid::from_raw(gid)),
            AtFlags::SYMLINK_NOFOLLOW,
        )?)
    }

    pub fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (fdir, fname) = self.parent(from)?;
        let (tdir, tname) = self.parent(to)?;
        Ok(rustix::fs::renameat(&fdir, &fname, &tdir, &tname)?)
    }

    /// Removes the non-directory entry `rel` (a symlink itself, never its target).
    pub fn unlink(&self, rel: &Path) -> io::Result<()> {
        let (dir, name) = self.parent(rel)?;
        Ok(rustix::fs::unlinkat(&dir, &name, AtFlags::empty())?)
    }

    /// Writes out everything changed on the volume's file system (`syncfs`).
    pub fn sync_volume(&self) -> io::Result<()> {
        Ok(rustix::fs::syncfs(&self.fd)?)
    }

    /// Flushes directory `rel` so the renames and removals in it survive a crash.
    pub fn sync_dir(&self, rel: &Path) -> io::Result<()> {
        Ok(rustix::fs::fsync(self.walk(rel, DirHandle::Readable)?)?)
    }

    /// Whether this process may write `rel` (a directory: create, rename and remove
    /// entries in it; a file: change its contents), by its effective ids.
    pub fn writable(&self, rel: &Path) -> io::Result<bool> {
        let (dir, name) = if rel.as_os_str().is_empty() {
            (self.walk(rel, DirHandle::PathOnly)?, OsString::from("."))
        } else {
            self.parent(rel)?
        };
        let is_dir = self.lstat(rel)?.is_some_and(|m| m.kind == Kind::Dir);
        let want = if is_dir {
            Access::WRITE_OK | Access::EXEC_OK
        } else {
            Access::WRITE_OK
        };
        match rustix::fs::accessat(
            &dir,
            &name,
            want,
            AtFlags::EACCESS | AtFlags::SYMLINK_NOFOLLOW,
        ) {
            Ok(()) => Ok(true),
            Err(Errno::ACCESS | Errno::PERM | Errno::ROFS | Errno::TXTBSY) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn never_follows_a_symlink_or_climbs_out() {
        let d = tempfile::tempdir().unwrap();
        let vol = d.path().join("v");
        let out = d.path().join("out");
        std::fs::create_dir_all(vol.join("a")).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("f"), "outside").unwrap();
        symlink(&out, vol.join("a/link")).unwrap();
        symlink(out.join("f"), vol.join("a/flink")).unwrap();
        let root = Root::open(&vol).unwrap();

        assert!(
            root.open_file(Path::new("a/link/f"), OpenFor::Reading)
                .is_err()
        );
        assert!(
            root.open_file(Path::new("a/flink"), OpenFor::Reading)
                .is_err()
        );
        assert!(
            root.open_file(Path::new("../out/f"), OpenFor::Reading)
                .is_err()
        );
        assert!(
            root.open_file(Path::new("/etc/passwd"), OpenFor::Reading)
                .is_err()
        );
        assert!(root.create_new(Path::new("a/flink")).is_err());
        assert!(root.create_new(Path::new("a/link/new")).is_err());
        assert_eq!(
            root.lstat(Path::new("a/link")).unwrap().unwrap().kind,
            Kind::Symlink
        );
        root.unlink(Path::new("a/flink")).unwrap();
        assert_eq!(std::fs::read_to_string(out.join("f")).unwrap(), "outside");
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 1);
    }

    #[test]
    fn reads_only_small_regular_files() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("f"), "12345").unwrap();
        let root = Root::open(d.path()).unwrap();
        assert_eq!(root.read_small(Path::new("f"), 5).unwrap().0, b"12345");
        assert!(root.read_small(Path::new("f"), 4).is_err());
        assert!(root.read_small(Path::new(""), 4).is_err());
    }
}
