//! FIFREEZE / FITHAW on a mounted file system (the same ioctls `fsfreeze(8)` uses).
//!
//! While frozen, every write to the file system blocks, so a snapshot taken now sees a
//! clean, quiesced file system. The root file system of the node is always refused.

// The ioctls are the only way to freeze a file system; nix generates thin `unsafe`
// wrappers for them, called below on a file descriptor we own.
#![allow(unsafe_code)]

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

// linux/fs.h: #define FIFREEZE _IOWR('X', 119, int), FITHAW _IOWR('X', 120, int)
nix::ioctl_readwrite!(fifreeze, b'X', 119, libc::c_int);
nix::ioctl_readwrite!(fithaw, b'X', 120, libc::c_int);

#[derive(Debug, thiserror::Error)]
pub enum FsFreezeError {
    #[error("mount {path} not found: {reason}")]
    NotFound { path: String, reason: String },
    #[error("{path} is not a mount point")]
    NotAMountPoint { path: String },
    #[error("refusing to freeze the node's root file system ({path})")]
    RootFilesystem { path: String },
    #[error(
        "refusing to freeze: cannot tell whether it is the node's root file system ({root}: {reason})"
    )]
    RootUnknown { root: String, reason: String },
    #[error("{op} on {path}: {reason}")]
    Ioctl {
        op: &'static str,
        path: String,
        reason: String,
    },
}

/// Where the node's root file system is seen from the node helper: PID 1's root. In the
/// DaemonSet (hostPID) PID 1 is the node's init, so this is the node's `/`; the
/// container's own `/` is only its overlay, and a volume bind-mounted from the node's root
/// would pass a check against `/` alone. `--host-root` names another path (tests on a
/// host whose `/` is the node's).
pub const NODE_ROOT: &str = "/proc/1/root";

/// Checks that `mount` is a mount point on neither `/`'s file system nor `host_root`'s.
/// A root that cannot be read refuses the mount: the node's root must be ruled out, never
/// assumed away.
pub fn check_mount(mount: &Path, host_root: &Path) -> Result<(), FsFreezeError> {
    let meta = check_mount_point(mount)?;
    for root in [Path::new("/"), host_root] {
        let r = std::fs::metadata(root).map_err(|e| FsFreezeError::RootUnknown {
            root: root.display().to_string(),
            reason: e.to_string(),
        })?;
        if meta.dev() == r.dev() {
            return Err(FsFreezeError::RootFilesystem {
                path: mount.display().to_string(),
            });
        }
    }
    Ok(())
}

/// Checks that `mount` is a mount point; its metadata.
fn check_mount_point(mount: &Path) -> Result<std::fs::Metadata, FsFreezeError> {
    let p = || mount.display().to_string();
    let meta = std::fs::metadata(mount).map_err(|e| FsFreezeError::NotFound {
        path: p(),
        reason: e.to_string(),
    })?;
    let parent = mount.parent().unwrap_or(Path::new("/"));
    let pmeta = std::fs::metadata(parent).map_err(|e| FsFreezeError::NotFound {
        path: p(),
        reason: e.to_string(),
    })?;
    if meta.dev() == pmeta.dev() && meta.ino() != pmeta.ino() {
        return Err(FsFreezeError::NotAMountPoint { path: p() });
    }
    Ok(meta)
}

/// A mounted file system held open ([`open`]): freezing and thawing through it need no new
/// file descriptor, so a hold keeps it from the freeze on (docs/design.md §6).
#[derive(Debug)]
pub struct Mount {
    path: PathBuf,
    file: File,
}

/// Checks `mount` ([`check_mount`]) and opens it, to freeze it.
pub fn open(mount: &Path, host_root: &Path) -> Result<Mount, FsFreezeError> {
    check_mount(mount, host_root)?;
    open_mount_point(mount)
}

/// Opens a mount point to thaw it (or to keep a frozen one open): thawing is always safe,
/// so the roots are not asked again.
pub fn open_to_thaw(mount: &Path) -> Result<Mount, FsFreezeError> {
    check_mount_point(mount)?;
    open_mount_point(mount)
}

fn open_mount_point(mount: &Path) -> Result<Mount, FsFreezeError> {
    let file = File::open(mount).map_err(|e| FsFreezeError::NotFound {
        path: mount.display().to_string(),
        reason: e.to_string(),
    })?;
    Ok(Mount {
        path: mount.to_owned(),
        file,
    })
}

impl Mount {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Freezes the file system. Already frozen counts as done.
    pub fn freeze(&self) -> Result<(), FsFreezeError> {
        let mut arg: libc::c_int = 0;
        // SAFETY: `self.file` is an open descriptor for the whole call; the kernel ignores `arg`.
        match unsafe { fifreeze(self.file.as_raw_fd(), &mut arg) } {
            Ok(_) | Err(nix::errno::Errno::EBUSY) => Ok(()),
            Err(e) => Err(self.ioctl("FIFREEZE", e)),
        }
    }

    /// Thaws the file system. Not frozen counts as done; true if it was frozen.
    pub fn thaw(&self) -> Result<bool, FsFreezeError> {
        let mut arg: libc::c_int = 0;
        // SAFETY: as in `freeze`.
        match unsafe { fithaw(self.file.as_raw_fd(), &mut arg) } {
            Ok(_) => Ok(true),
            Err(nix::errno::Errno::EINVAL) => Ok(false),
            Err(e) => Err(self.ioctl("FITHAW", e)),
        }
    }

    fn ioctl(&self, op: &'static str, e: nix::errno::Errno) -> FsFreezeError {
        FsFreezeError::Ioctl {
            op,
            path: self.path.display().to_string(),
            reason: e.desc().to_owned(),
        }
    }
}

/// Freezes the file system mounted at `mount`. Already frozen counts as done.
pub fn freeze(mount: &Path, host_root: &Path) -> Result<(), FsFreezeError> {
    open(mount, host_root)?.freeze()
}

/// Thaws the file system mounted at `mount`. Not frozen counts as done.
pub fn thaw(mount: &Path) -> Result<(), FsFreezeError> {
    open_to_thaw(mount)?.thaw().map(|_| ())
}
