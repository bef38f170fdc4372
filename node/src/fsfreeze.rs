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
    #[error("{op} on {path}: {reason}")]
    Ioctl {
        op: &'static str,
        path: String,
        reason: String,
    },
}

/// Checks that `mount` is a mount point and not on the node's root file system.
pub fn check_mount(mount: &Path) -> Result<(), FsFreezeError> {
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
    let root = std::fs::metadata("/").map_err(|e| FsFreezeError::NotFound {
        path: "/".into(),
        reason: e.to_string(),
    })?;
    if meta.dev() == root.dev() {
        return Err(FsFreezeError::RootFilesystem { path: p() });
    }
    Ok(())
}

/// A mounted file system held open ([`open`]): freezing and thawing through it need no new
/// file descriptor, so a hold keeps it from the freeze on (DESIGN §6).
#[derive(Debug)]
pub struct Mount {
    path: PathBuf,
    file: File,
}

/// Checks `mount` ([`check_mount`]) and opens it.
pub fn open(mount: &Path) -> Result<Mount, FsFreezeError> {
    check_mount(mount)?;
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
pub fn freeze(mount: &Path) -> Result<(), FsFreezeError> {
    open(mount)?.freeze()
}

/// Thaws the file system mounted at `mount`. Not frozen counts as done.
pub fn thaw(mount: &Path) -> Result<(), FsFreezeError> {
    open(mount)?.thaw().map(|_| ())
}
