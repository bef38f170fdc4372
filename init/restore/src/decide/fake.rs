//! A volume held in memory for the deciders' tests: what it holds reads like the scene,
//! `FakeVolume::new().dir("vt_0000000101").file("vt_0000000101/my.cnf", CNF)`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use vtsnap_core::naming::TabletUid;

use crate::beneath::{Kind, Meta};
use crate::decide::POD_MOUNT;
use crate::decide::plan::MoveSource;
use crate::decide::preflight::{Process, VolumeView};
use crate::refusal::Refusal;

/// The tablet found on the volume, and the one the pod runs.
pub const OLD: u32 = 101;
pub const NEW: u32 = 102;
/// Tablet 101's my.cnf, at its smallest.
pub const CNF: &str = "[mysqld]\nserver-id = 1234\ndatadir = /vt/vtdataroot/vt_0000000101/data\n";

pub fn uid(n: u32) -> TabletUid {
    TabletUid::new(n)
}

/// Tablet 101's volume holding nothing but its my.cnf, as observe reads it.
pub fn source() -> MoveSource {
    MoveSource {
        from: uid(OLD),
        mount: POD_MOUNT.into(),
        mycnf: PathBuf::from("vt_0000000101/my.cnf"),
        old_server_id: Some(1234),
        top_links: Vec::new(),
        binlogs: None,
        binlog_index: None,
        last_binlog: None,
        relay_logs: None,
        relay_files: Vec::new(),
        auto_cnf: None,
        restore_in_progress: false,
    }
}

/// Every entry is owned by uid/gid 999 (the pod's mysql user) and writable unless
/// [`FakeVolume::read_only`] says otherwise; the process is that user.
#[derive(Debug, Clone)]
pub struct FakeVolume {
    entries: BTreeMap<PathBuf, Meta>,
    contents: BTreeMap<PathBuf, Vec<u8>>,
    read_only: BTreeSet<PathBuf>,
    escapes: BTreeMap<PathBuf, Refusal>,
    process: Process,
}

pub const MYSQL: u32 = 999;

fn meta(kind: Kind, len: u64) -> Meta {
    Meta {
        kind,
        mode: 0o750,
        uid: MYSQL,
        gid: MYSQL,
        len,
    }
}

impl FakeVolume {
    /// A volume whose root is an empty directory.
    pub fn new() -> Self {
        let mut entries = BTreeMap::new();
        entries.insert(PathBuf::new(), meta(Kind::Dir, 0));
        Self {
            entries,
            contents: BTreeMap::new(),
            read_only: BTreeSet::new(),
            escapes: BTreeMap::new(),
            process: Process {
                uid: MYSQL,
                gid: MYSQL,
                groups: Vec::new(),
            },
        }
    }

    /// The volume [`source`] was read from.
    pub fn tablet_101() -> Self {
        Self::new()
            .dir("vt_0000000101")
            .file("vt_0000000101/my.cnf", CNF)
    }

    pub fn dir(mut self, p: &str) -> Self {
        self.entries.insert(p.into(), meta(Kind::Dir, 0));
        self
    }

    pub fn file(mut self, p: &str, text: &str) -> Self {
        self.entries
            .insert(p.into(), meta(Kind::File, text.len() as u64));
        self.contents.insert(p.into(), text.as_bytes().to_vec());
        self
    }

    pub fn entry(mut self, p: &str, kind: Kind) -> Self {
        self.entries.insert(p.into(), meta(kind, 0));
        self
    }

    /// A symlink at `p` that cannot be followed on the volume, for `why`.
    pub fn escaping_symlink(mut self, p: &str, why: Refusal) -> Self {
        self.entries.insert(p.into(), meta(Kind::Symlink, 0));
        self.escapes.insert(p.into(), why);
        self
    }

    pub fn owned_by(mut self, p: &str, uid: u32, gid: u32) -> Self {
        if let Some(m) = self.entries.get_mut(Path::new(p)) {
            m.uid = uid;
            m.gid = gid;
        }
        self
    }

    pub fn read_only(mut self, p: &str) -> Self {
        self.read_only.insert(p.into());
        self
    }

    /// The process runs as `uid`/`gid` with the supplementary `groups`.
    pub fn run_as(mut self, uid: u32, gid: u32, groups: &[u32]) -> Self {
        self.process = Process {
            uid,
            gid,
            groups: groups.to_vec(),
        };
        self
    }
}

fn missing(rel: &Path) -> Refusal {
    Refusal::Unreadable {
        path: rel.display().to_string(),
        reason: "missing".into(),
    }
}

impl VolumeView for FakeVolume {
    fn entry(&self, rel: &Path) -> Result<Option<Meta>, Refusal> {
        Ok(self.entries.get(rel).copied())
    }

    fn writable(&self, rel: &Path) -> Result<bool, Refusal> {
        if !self.entries.contains_key(rel) {
            return Err(missing(rel));
        }
        Ok(!self.read_only.contains(rel))
    }

    fn contents(&self, rel: &Path, max: u64) -> Result<Vec<u8>, Refusal> {
        let bytes = self.contents.get(rel).ok_or_else(|| missing(rel))?;
        if bytes.len() as u64 > max {
            return Err(Refusal::Unreadable {
                path: rel.display().to_string(),
                reason: "too large".into(),
            });
        }
        Ok(bytes.clone())
    }

    fn escape(&self, _mount: &str, rel: &Path) -> Option<Refusal> {
        self.escapes.get(rel).cloned()
    }

    fn process(&self) -> &Process {
        &self.process
    }
}
