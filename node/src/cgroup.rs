//! Freezing a container's cgroup: cgroup v1 `freezer.state`, cgroup v2 `cgroup.freeze`,
//! and hybrid hosts (v1 controllers plus a v2 `unified` hierarchy).
//!
//! A frozen cgroup's processes get no CPU at all: mysqld cannot be restarted inside it, and
//! mysqlctld cannot even serve a `Start` — while kubelet sees no exit and restarts nothing.
//! The cgroup is found from a process in it (`/proc/<pid>/cgroup`); the host's root cgroup
//! and this helper's own cgroup are always refused.

use std::fs;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("process {pid} not found ({path}): {reason}")]
    NoProcess {
        pid: u32,
        path: String,
        reason: String,
    },
    #[error("process {pid} is in no freezable cgroup (no v1 freezer or v2 hierarchy under {root})")]
    NotFound { pid: u32, root: String },
    #[error("refusing to freeze the root cgroup (process {pid})")]
    Root { pid: u32 },
    #[error("refusing to freeze this helper's own cgroup {path}")]
    Own { path: String },
    #[error("{path}: {reason}")]
    Io { path: String, reason: String },
    #[error("{path} did not reach {want} within {after:?}")]
    Stuck {
        path: String,
        want: &'static str,
        after: Duration,
    },
}

/// Which interface freezes the cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Version {
    V1,
    V2,
}

/// A freezable cgroup directory.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Cgroup {
    pub version: Version,
    pub dir: PathBuf,
}

/// Where the cgroup file systems are mounted (the host's `/sys/fs/cgroup`, and `/proc`).
#[derive(Debug, Clone)]
pub struct Roots {
    pub cgroup: PathBuf,
    pub proc: PathBuf,
}

impl Default for Roots {
    fn default() -> Self {
        Self {
            cgroup: PathBuf::from("/sys/fs/cgroup"),
            proc: PathBuf::from("/proc"),
        }
    }
}

fn io(path: &Path, e: &std::io::Error) -> CgroupError {
    CgroupError::Io {
        path: path.display().to_string(),
        reason: e.to_string(),
    }
}

/// The (v1 freezer path, v2 path) of a process, from `/proc/<pid>/cgroup`.
fn membership(roots: &Roots, pid: u32) -> Result<(Option<String>, Option<String>), CgroupError> {
    let p = roots.proc.join(pid.to_string()).join("cgroup");
    let text = fs::read_to_string(&p).map_err(|e| CgroupError::NoProcess {
        pid,
        path: p.display().to_string(),
        reason: e.to_string(),
    })?;
    let mut v1 = None;
    let mut v2 = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(ctrls), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if id == "0" && ctrls.is_empty() {
            v2 = Some(path.to_owned());
        } else if ctrls.split(',').any(|c| c == "freezer") {
            v1 = Some(path.to_owned());
        }
    }
    Ok((v1, v2))
}

/// The v2 hierarchy: the root itself on a pure v2 host, `unified/` on a hybrid one.
fn v2_root(roots: &Roots) -> Option<PathBuf> {
    if roots.cgroup.join("cgroup.controllers").is_file() {
        return Some(roots.cgroup.clone());
    }
    let u = roots.cgroup.join("unified");
    u.join("cgroup.controllers").is_file().then_some(u)
}

impl Cgroup {
    /// The freezable cgroup holding `pid`: the v1 freezer where it exists (hybrid hosts
    /// freeze containers there), else cgroup v2.
    pub fn of_pid(roots: &Roots, pid: u32) -> Result<Self, CgroupError> {
        let (v1, v2) = membership(roots, pid)?;
        let candidate = match (v1, v2) {
            (Some(p), _) if roots.cgroup.join("freezer").is_dir() => {
                Some((Version::V1, roots.cgroup.join("freezer"), p))
            }
            (_, Some(p)) => v2_root(roots).map(|r| (Version::V2, r, p)),
            _ => None,
        };
        let (version, base, rel) = candidate.ok_or_else(|| CgroupError::NotFound {
            pid,
            root: roots.cgroup.display().to_string(),
        })?;
        if rel == "/" || rel.is_empty() {
            return Err(CgroupError::Root { pid });
        }
        let dir = base.join(rel.trim_start_matches('/'));
        let cg = Self { version, dir };
        let own = Self::of_own(roots, version, &base)?;
        if own.as_deref() == Some(cg.dir.as_path())
            || own.as_ref().is_some_and(|o| o.starts_with(&cg.dir))
        {
            return Err(CgroupError::Own {
                path: cg.dir.display().to_string(),
            });
        }
        Ok(cg)
    }

    fn of_own(
        roots: &Roots,
        version: Version,
        base: &Path,
    ) -> Result<Option<PathBuf>, CgroupError> {
        let (v1, v2) = membership(roots, std::process::id())?;
        let rel = match version {
            Version::V1 => v1,
            Version::V2 => v2,
        };
        Ok(rel.map(|r| base.join(r.trim_start_matches('/'))))
    }

    /// Finds the cgroup of the first process whose cgroup path contains `needle`
    /// (a container ID), scanning `/proc`.
    pub fn containing(roots: &Roots, needle: &str) -> Result<Option<(u32, Self)>, CgroupError> {
        let rd = fs::read_dir(&roots.proc).map_err(|e| io(&roots.proc, &e))?;
        let mut pids: Vec<u32> = rd
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect();
        pids.sort_unstable();
        for pid in pids {
            let Ok(text) = fs::read_to_string(roots.proc.join(pid.to_string()).join("cgroup"))
            else {
                continue;
            };
            if text.contains(needle) {
                return Self::of_pid(roots, pid).map(|c| Some((pid, c)));
            }
        }
        Ok(None)
    }

    fn control(&self) -> PathBuf {
        match self.version {
            Version::V1 => self.dir.join("freezer.state"),
            Version::V2 => self.dir.join("cgroup.freeze"),
        }
    }

    /// The file that tells whether the cgroup is frozen now.
    fn state(&self) -> PathBuf {
        match self.version {
            Version::V1 => self.dir.join("freezer.state"),
            Version::V2 => self.dir.join("cgroup.events"),
        }
    }

    /// Opens the cgroup's freezer files and keeps them open: a hold keeps this from the
    /// freeze on, so that ending it needs no new file descriptor (docs/design.md §6).
    pub fn open(&self) -> Result<Control, CgroupError> {
        let open = |p: &Path, write: bool| {
            fs::OpenOptions::new()
                .read(true)
                .write(write)
                .open(p)
                .map_err(|e| io(p, &e))
        };
        let control = open(&self.control(), true)?;
        let state = match self.version {
            Version::V1 => None,
            Version::V2 => Some(open(&self.state(), false)?),
        };
        Ok(Control {
            cgroup: self.clone(),
            control,
            state,
        })
    }

    /// Whether the cgroup is (completely) frozen now.
    pub fn is_frozen(&self) -> Result<bool, CgroupError> {
        self.open()?.is_frozen()
    }

    /// Freezes and waits until every task is frozen; thaws again if that does not happen.
    pub fn freeze(&self) -> Result<(), CgroupError> {
        self.open()?.freeze()
    }

    /// Thaws; idempotent.
    pub fn thaw(&self) -> Result<(), CgroupError> {
        self.open()?.thaw()
    }
}

/// A cgroup's freezer files, held open ([`Cgroup::open`]). Every read and write is
/// positional on these descriptors, so nothing here opens a file.
#[derive(Debug)]
pub struct Control {
    cgroup: Cgroup,
    /// `freezer.state` (v1, read and written) or `cgroup.freeze` (v2).
    control: fs::File,
    /// `cgroup.events` (v2).
    state: Option<fs::File>,
}

impl Control {
    pub fn cgroup(&self) -> &Cgroup {
        &self.cgroup
    }

    /// Whether the cgroup is (completely) frozen now.
    pub fn is_frozen(&self) -> Result<bool, CgroupError> {
        let f = self.state.as_ref().unwrap_or(&self.control);
        // cgroup files are small; kernfs regenerates them on a read at offset 0.
        let mut buf = [0u8; 512];
        let n = f
            .read_at(&mut buf, 0)
            .map_err(|e| io(&self.cgroup.state(), &e))?;
        let text = String::from_utf8_lossy(&buf[..n]);
        Ok(match self.cgroup.version {
            Version::V1 => text.trim() == "FROZEN",
            Version::V2 => text.lines().any(|l| l.trim() == "frozen 1"),
        })
    }

    fn write(&self, frozen: bool) -> Result<(), CgroupError> {
        let value = match (self.cgroup.version, frozen) {
            (Version::V1, true) => "FROZEN",
            (Version::V1, false) => "THAWED",
            (Version::V2, true) => "1",
            (Version::V2, false) => "0",
        };
        self.control
            .write_all_at(value.as_bytes(), 0)
            .map_err(|e| io(&self.cgroup.control(), &e))
    }

    fn wait(&self, frozen: bool, limit: Duration) -> Result<(), CgroupError> {
        let start = Instant::now();
        loop {
            if self.is_frozen()? == frozen {
                return Ok(());
            }
            if start.elapsed() > limit {
                return Err(CgroupError::Stuck {
                    path: self.cgroup.dir.display().to_string(),
                    want: if frozen { "frozen" } else { "thawed" },
                    after: limit,
                });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Freezes and waits until every task is frozen; thaws again if that does not happen.
    pub fn freeze(&self) -> Result<(), CgroupError> {
        self.write(true)?;
        if let Err(e) = self.wait(true, Duration::from_secs(10)) {
            let _ = self.thaw();
            return Err(e);
        }
        Ok(())
    }

    /// Thaws; idempotent.
    pub fn thaw(&self) -> Result<(), CgroupError> {
        self.write(false)?;
        self.wait(false, Duration::from_secs(10))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_roots(dir: &Path, pid_cgroup: &str, own_cgroup: &str, layout: &[&str]) -> Roots {
        let proc = dir.join("proc");
        for (pid, text) in [
            ("4242".to_owned(), pid_cgroup),
            (std::process::id().to_string(), own_cgroup),
        ] {
            fs::create_dir_all(proc.join(&pid)).unwrap();
            fs::write(proc.join(&pid).join("cgroup"), text).unwrap();
        }
        let cg = dir.join("cg");
        for f in layout {
            let p = cg.join(f);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, "").unwrap();
        }
        Roots { cgroup: cg, proc }
    }

    #[test]
    fn hybrid_hosts_use_the_v1_freezer() {
        let d = tempfile::tempdir().unwrap();
        let r = fake_roots(
            d.path(),
            "6:freezer:/kubepods/pod1/abc\n0::/kubepods/pod1/abc\n",
            "6:freezer:/\n0::/\n",
            &["freezer/freezer.state", "unified/cgroup.controllers"],
        );
        let c = Cgroup::of_pid(&r, 4242).unwrap();
        assert_eq!(c.version, Version::V1);
        assert_eq!(c.dir, r.cgroup.join("freezer/kubepods/pod1/abc"));
    }

    #[test]
    fn pure_v2_hosts_use_cgroup_freeze() {
        let d = tempfile::tempdir().unwrap();
        let r = fake_roots(
            d.path(),
            "0::/kubepods.slice/cri-abc.scope\n",
            "0::/system.slice/vtsnap.scope\n",
            &["cgroup.controllers"],
        );
        let c = Cgroup::of_pid(&r, 4242).unwrap();
        assert_eq!(
            (c.version, c.dir.clone()),
            (Version::V2, r.cgroup.join("kubepods.slice/cri-abc.scope"))
        );
    }

    #[test]
    fn refuses_the_root_and_its_own_cgroup() {
        let d = tempfile::tempdir().unwrap();
        let r = fake_roots(d.path(), "0::/\n", "0::/x\n", &["cgroup.controllers"]);
        assert!(matches!(
            Cgroup::of_pid(&r, 4242),
            Err(CgroupError::Root { .. })
        ));
        let d = tempfile::tempdir().unwrap();
        let r = fake_roots(
            d.path(),
            "0::/same\n",
            "0::/same/inner\n",
            &["cgroup.controllers"],
        );
        assert!(matches!(
            Cgroup::of_pid(&r, 4242),
            Err(CgroupError::Own { .. })
        ));
        let d = tempfile::tempdir().unwrap();
        let r = fake_roots(d.path(), "0::/a\n", "0::/b\n", &[]);
        assert!(matches!(
            Cgroup::of_pid(&r, 4242),
            Err(CgroupError::NotFound { .. })
        ));
        assert!(matches!(
            Cgroup::of_pid(&r, 99_999_999),
            Err(CgroupError::NoProcess { .. })
        ));
    }
}
