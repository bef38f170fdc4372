//! What a test leaves behind on the host once it is done: its containers, the processes
//! serving them (Podman's conmon, one per container and one per exec session), and mounts
//! and loop devices under its directories. A lab checks this after it is dropped, bounded in
//! time: Podman keeps an exec session's conmon for `exit_command_delay` after it ends
//! (`scripts/setup-host.sh` sets 5 s).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The host resources one test owns, named by container IDs and directories.
#[derive(Debug, Clone, Default)]
pub struct Footprint {
    containers: Vec<String>,
    dirs: Vec<PathBuf>,
}

impl Footprint {
    pub fn new(containers: Vec<String>, dirs: Vec<PathBuf>) -> Self {
        Self { containers, dirs }
    }

    pub fn containers(&self) -> &[String] {
        &self.containers
    }

    fn under_dirs(&self, p: &Path) -> bool {
        self.dirs.iter().any(|d| p.starts_with(d))
    }

    fn names_ours(&self, text: &str) -> bool {
        self.containers
            .iter()
            .any(|c| !c.is_empty() && text.contains(c.as_str()))
            || self
                .dirs
                .iter()
                .any(|d| text.contains(d.to_string_lossy().as_ref()))
    }

    /// Everything of this footprint still on the host, one line each.
    pub fn remaining(&self) -> Vec<String> {
        let mut left = Vec::new();
        let existing = existing_containers();
        for c in &self.containers {
            if existing.iter().any(|e| e == c) {
                left.push(format!("container {c}"));
            }
        }
        for m in mount_points() {
            if self.under_dirs(&m) {
                left.push(format!("mount {}", m.display()));
            }
        }
        for (dev, backing) in loop_devices() {
            if self.under_dirs(&backing) {
                left.push(format!("loop device {dev} on {}", backing.display()));
            }
        }
        let me = std::process::id();
        for (pid, cmdline) in processes() {
            if pid != me && self.names_ours(&cmdline) {
                left.push(format!("process {pid}: {cmdline}"));
            }
        }
        left
    }

    /// Waits until nothing of this footprint remains; what still does after `limit`.
    pub async fn gone_within(&self, limit: Duration) -> Result<(), Vec<String>> {
        let start = Instant::now();
        loop {
            let left = self.remaining();
            if left.is_empty() {
                return Ok(());
            }
            if start.elapsed() >= limit {
                return Err(left);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Full IDs of every container Podman knows, running or not.
fn existing_containers() -> Vec<String> {
    Command::new("podman")
        .args(["ps", "-a", "-q", "--no-trunc"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Mount points in this mount namespace (`/proc/self/mountinfo`, field 5, octal escapes
/// undone).
fn mount_points() -> Vec<PathBuf> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|m| PathBuf::from(unescape_octal(m)))
        .collect()
}

fn unescape_octal(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Attached loop devices and their backing files (`/sys/block/loop*/loop/backing_file`).
fn loop_devices() -> Vec<(String, PathBuf)> {
    let Ok(rd) = std::fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    rd.flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("loop"))
        .filter_map(|e| {
            let backing = std::fs::read_to_string(e.path().join("loop/backing_file")).ok()?;
            Some((
                e.file_name().to_string_lossy().into_owned(),
                PathBuf::from(backing.trim_end()),
            ))
        })
        .collect()
}

/// Every process's PID and command line (arguments joined by spaces).
fn processes() -> Vec<(u32, String)> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let raw = std::fs::read(e.path().join("cmdline")).ok()?;
            let cmd = raw
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" ");
            Some((pid, cmd))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn octal_escapes_in_mount_points_are_undone() {
        assert_eq!(unescape_octal(r"/mnt/a\040b"), "/mnt/a b");
        assert_eq!(unescape_octal(r"/plain"), "/plain");
        assert_eq!(unescape_octal(r"/trailing\04"), r"/trailing\04");
    }

    #[tokio::test]
    async fn a_process_and_a_mount_under_a_footprint_are_found_until_they_go() {
        let dir = tempfile::tempdir().unwrap();
        let fp = Footprint::new(Vec::new(), vec![dir.path().to_path_buf()]);
        assert!(fp.remaining().is_empty(), "{:?}", fp.remaining());
        // A process naming the directory: a shell waiting on a read (a builtin, so killing
        // it leaves no child behind), its output not the test runner's (an orphan holding
        // that pipe kept `cargo test | tee` open for ten minutes).
        let mut child = Command::new("sh")
            .args(["-c", "read -r line"])
            .arg(dir.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let left = fp.remaining();
        assert!(
            left.iter()
                .any(|l| l.starts_with(&format!("process {}:", child.id()))),
            "the process is not found: {left:?}"
        );
        child.kill().unwrap();
        child.wait().unwrap();
        fp.gone_within(Duration::from_secs(5)).await.unwrap();
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "tmpfs"])
            .arg(&mnt)
            .status()
            .unwrap()
            .success();
        assert!(mounted, "mount tmpfs (the tests run as root)");
        let left = fp.remaining();
        assert!(
            left.iter().any(|l| l.starts_with("mount ")),
            "the mount is not found: {left:?}"
        );
        assert!(fp.gone_within(Duration::from_millis(300)).await.is_err());
        assert!(Command::new("umount").arg(&mnt).status().unwrap().success());
        fp.gone_within(Duration::from_secs(5)).await.unwrap();
    }
}
