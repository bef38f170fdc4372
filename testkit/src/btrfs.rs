//! A btrfs file system on a loop device, for block-level point-in-time snapshots.
//!
//! A btrfs subvolume stands in for a tablet PVC. `snapshot` is atomic across the whole
//! subvolume, like an LVM thin snapshot (TopoLVM) or a cloud disk snapshot: a snapshot
//! of a running mysqld is a power-loss image. A writable snapshot of a snapshot is a PVC
//! provisioned from a VolumeSnapshot. Needs root, `mkfs.btrfs` and loop devices.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

fn run(cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `btrfs <args> <paths>`; the error names the command and what btrfs said.
pub fn btrfs(args: &[&str], paths: &[&Path]) -> Result<(), String> {
    let out = Command::new("btrfs")
        .args(args)
        .args(paths)
        .output()
        .map_err(|e| format!("cannot run btrfs: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "btrfs {args:?} {paths:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A mounted btrfs file system; unmounted and its loop device freed on drop.
#[derive(Debug)]
pub struct BtrfsVolume {
    _dir: TempDir,
    mnt: PathBuf,
}

impl BtrfsVolume {
    /// Makes a sparse image of `size_bytes` (at least 256 MiB), formats and mounts it.
    pub fn create(size_bytes: u64) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("vtsnap-btrfs-")
            .tempdir_in("/var/tmp")
            .unwrap();
        let image = dir.path().join("disk.img");
        fs::File::create(&image)
            .unwrap()
            .set_len(size_bytes.max(256 << 20))
            .unwrap();
        run(Command::new("mkfs.btrfs").args(["-q", "-f"]).arg(&image));
        let mnt = dir.path().join("mnt");
        fs::create_dir(&mnt).unwrap();
        run(Command::new("mount")
            .args(["-t", "btrfs", "-o", "loop"])
            .arg(&image)
            .arg(&mnt));
        Self { _dir: dir, mnt }
    }

    pub fn path(&self) -> &Path {
        &self.mnt
    }

    /// Creates a subvolume (a "PVC") and returns its path.
    pub fn subvolume(&self, name: &str) -> PathBuf {
        let p = self.mnt.join(name);
        btrfs(&["-q", "subvolume", "create"], &[&p]).unwrap_or_else(|e| panic!("{e}"));
        p
    }

    /// Atomically snapshots subvolume `src` as `dst`; read-only for a "VolumeSnapshot",
    /// writable for a "PVC from a snapshot".
    pub fn snapshot(&self, src: &str, dst: &str, readonly: bool) -> PathBuf {
        let p = self.mnt.join(dst);
        let args: &[&str] = if readonly {
            &["-q", "subvolume", "snapshot", "-r"]
        } else {
            &["-q", "subvolume", "snapshot"]
        };
        btrfs(args, &[&self.mnt.join(src), &p]).unwrap_or_else(|e| panic!("{e}"));
        p
    }
}

impl Drop for BtrfsVolume {
    fn drop(&mut self) {
        // Loop devices are auto-cleared when the loop mount goes away.
        let ok = Command::new("umount")
            .arg(&self.mnt)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
        }
    }
}
