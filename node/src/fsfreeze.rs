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
use std::path::Path;

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

fn open_mount(mount: &Path) -> Result<File, FsFreezeError> {
    check_mount(mount)?;
    File::open(mount).map_err(|e| FsFreezeError::NotFound {
        path: mount.display().to_string(),
        reason: e.to_string(),
    })
}

/// Freezes the file system mounted at `mount`. Already frozen counts as done.
pub fn freeze(mount: &Path) -> Result<(), FsFreezeError> {
    let f = open_mount(mount)?;
    let mut arg: libc::c_int = 0;
    // SAFETY: `f` is an open descriptor for the whole call; the kernel ignores `arg`.
    match unsafe { fifreeze(f.as_raw_fd(), &mut arg) } {
        Ok(_) | Err(nix::errno::Errno::EBUSY) => Ok(()),
        Err(e) => Err(FsFreezeError::Ioctl {
            op: "FIFREEZE",
            path: mount.display().to_string(),
            reason: e.desc().to_owned(),
        }),
    }
}

/// Thaws the file system mounted at `mount`. Not frozen counts as done.
pub fn thaw(mount: &Path) -> Result<(), FsFreezeError> {
    let f = open_mount(mount)?;
    let mut arg: libc::c_int = 0;
    // SAFETY: as in `freeze`.
    match unsafe { fithaw(f.as_raw_fd(), &mut arg) } {
        Ok(_) | Err(nix::errno::Errno::EINVAL) => Ok(()),
        Err(e) => Err(FsFreezeError::Ioctl {
            op: "FITHAW",
            path: mount.display().to_string(),
            reason: e.desc().to_owned(),
        }),
    }
}
