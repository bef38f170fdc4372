//! What this helper holds, persisted on the node (`<state-dir>/holds.json`) before every
//! freeze and after every release, so a restarted helper — and the watchdog, which needs
//! no API server — know exactly what to thaw.
//!
//! An entry that cannot be read as an [`Entry`] (a corrupt field in an otherwise valid
//! file) is kept verbatim on every rewrite and never released, overwritten or removed: a
//! guessed tablet type or a forgotten hold is worse than a reported one. Only its hold part
//! ([`HoldPart`]), if that reads, is ended by the watchdog at max-hold.
//!
//! A file that is not valid JSON at all (truncated, say) never stops the helper: it is moved
//! aside to `holds.json.corrupt-<unix-ms>`, every complete entry before the damage is kept,
//! and a marker (`holds.lost`) stays until the daemon has looked, on its leases, for holds
//! the lost part may have recorded ([`Registry::lost_holds`]).
//!
//! The freezer files of every recorded freeze are kept open ([`Kept`]) from the freeze (or
//! from loading the registry) on, so ending a freeze never needs a new file descriptor.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use vtsnap_core::naming::{TabletAlias, alias_as_string};
use vtsnap_core::vtctld::TabletType;

use crate::cgroup::{Cgroup, CgroupError, Control};
use crate::fsfreeze::{self, FsFreezeError, Mount};

/// One lease's holds on this node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub lease: String,
    pub pod_uid: String,
    /// Stored as printed (`zone1-0000000101`).
    #[serde(with = "alias_as_string")]
    pub tablet_alias: TabletAlias,
    /// Stored as the lowercase name (`replica`).
    pub original_type: TabletType,
    pub vtctld: String,
    /// The mysqld container's ID (its cgroup path contains it).
    pub container_id: Option<String>,
    /// The tablet volume's mount on this node (for FIFREEZE).
    pub volume_mount: Option<PathBuf>,
    pub mysqlctl_socket: PathBuf,
    pub mysqld_socket: PathBuf,
    /// This helper asked mysqlctld to stop mysqld (so it must `Start` it on release).
    pub stopped_mysqld: bool,
    /// mysqlctld's `Shutdown` returned: mysqld is down. Asking is not enough — a
    /// `Shutdown` that failed or timed out is asked again, never reported as `stopped`.
    #[serde(default)]
    pub mysqld_down: bool,
    /// A frozen cgroup.
    pub cgroup: Option<Cgroup>,
    /// A frozen file system (the volume's mount).
    pub fs_frozen: Option<PathBuf>,
    /// When the first freeze began (Unix ms).
    pub hold_since_ms: Option<i64>,
    pub max_hold_secs: u64,
    /// The watchdog ended the freeze at max-hold; it is never re-frozen for this lease.
    pub watchdog_released: bool,
}

impl Entry {
    pub fn frozen(&self) -> bool {
        self.cgroup.is_some() || self.fs_frozen.is_some()
    }
}

/// The fields of an entry the watchdog needs, read on their own so that a hold whose other
/// fields are corrupt still ends at max-hold.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct HoldPart {
    pub cgroup: Option<Cgroup>,
    pub fs_frozen: Option<PathBuf>,
    pub hold_since_ms: Option<i64>,
    pub max_hold_secs: u64,
}

impl HoldPart {
    pub fn frozen(&self) -> bool {
        self.cgroup.is_some() || self.fs_frozen.is_some()
    }
}

/// An entry that cannot be read: kept as it was found, with why.
#[derive(Debug, Clone)]
pub struct Unreadable {
    /// The key it is stored under (the lease's `namespace/name`).
    pub lease: String,
    pub raw: Box<RawValue>,
    pub reason: String,
}

impl Unreadable {
    /// Its hold part, if that much reads.
    pub fn hold(&self) -> Option<HoldPart> {
        serde_json::from_str(self.raw.get()).ok()
    }

    /// Records that the watchdog ended its hold: only those fields change.
    pub fn mark_thawed(&mut self) -> Result<(), serde_json::Error> {
        let mut v: serde_json::Value = serde_json::from_str(self.raw.get())?;
        if let Some(o) = v.as_object_mut() {
            o.insert("cgroup".into(), serde_json::Value::Null);
            o.insert("fs_frozen".into(), serde_json::Value::Null);
            o.insert("watchdog_released".into(), serde_json::Value::Bool(true));
        }
        self.raw = serde_json::value::to_raw_value(&v)?;
        Ok(())
    }
}

/// The open descriptors of one lease's freezes.
#[derive(Debug, Default)]
pub struct Kept {
    pub cgroup: Option<Arc<Control>>,
    pub mount: Option<Arc<Mount>>,
}

/// Why a freeze could not be ended.
#[derive(Debug, thiserror::Error)]
pub enum ThawError {
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    #[error(transparent)]
    Fs(#[from] FsFreezeError),
}

/// The registry's contents: the entries it can read, and those it cannot; and, in memory
/// only, the descriptors kept open for their freezes.
#[derive(Debug, Default)]
pub struct Holds {
    pub entries: BTreeMap<String, Entry>,
    pub unreadable: BTreeMap<String, Unreadable>,
    pub kept: BTreeMap<String, Kept>,
}

/// Ends the freezes `cgroup` and `fs` name for `lease`, through the descriptors kept for it
/// where they are open (a path is opened only when none is). Each that ended is cleared and
/// its descriptor dropped.
pub fn end_freezes(
    kept: &mut BTreeMap<String, Kept>,
    lease: &str,
    cgroup: Option<&mut Option<Cgroup>>,
    fs: Option<&mut Option<PathBuf>>,
) -> Vec<ThawError> {
    let mut problems = Vec::new();
    let k = kept.entry(lease.to_owned()).or_default();
    if let Some(slot) = cgroup
        && let Some(cg) = slot.as_ref()
    {
        let ended = match k.cgroup.as_ref().filter(|c| c.cgroup() == cg) {
            Some(c) => c.thaw(),
            None => cg.thaw(),
        };
        match ended {
            Ok(()) => {
                *slot = None;
                k.cgroup = None;
            }
            Err(e) => problems.push(e.into()),
        }
    }
    if let Some(slot) = fs
        && let Some(m) = slot.as_ref()
    {
        let ended = match k.mount.as_ref().filter(|f| f.path() == m) {
            Some(f) => f.thaw().map(|_| ()),
            None => fsfreeze::thaw(m),
        };
        match ended {
            Ok(()) => {
                *slot = None;
                k.mount = None;
            }
            Err(e) => problems.push(e.into()),
        }
    }
    if k.cgroup.is_none() && k.mount.is_none() {
        kept.remove(lease);
    }
    problems
}

/// Opens the freezer files of a recorded freeze; a failure is logged (the thaw then opens
/// them by path).
fn keep(lease: &str, cgroup: Option<&Cgroup>, fs: Option<&PathBuf>) -> Kept {
    let mut k = Kept::default();
    if let Some(cg) = cgroup {
        match cg.open() {
            Ok(c) => k.cgroup = Some(Arc::new(c)),
            Err(err) => {
                tracing::warn!(lease, error = %err, "cannot keep the frozen cgroup's files open")
            }
        }
    }
    if let Some(m) = fs {
        match fsfreeze::open_to_thaw(m) {
            Ok(f) => k.mount = Some(Arc::new(f)),
            Err(err) => {
                tracing::warn!(lease, error = %err, "cannot keep the frozen mount open")
            }
        }
    }
    k
}

impl Holds {
    fn parse(bytes: &[u8]) -> Result<Self, serde_json::Error> {
        let raw: BTreeMap<String, Box<RawValue>> = serde_json::from_slice(bytes)?;
        let mut h = Self::default();
        for (lease, raw) in raw {
            h.insert_raw(lease, raw);
        }
        Ok(h)
    }

    fn insert_raw(&mut self, lease: String, raw: Box<RawValue>) {
        match serde_json::from_str::<Entry>(raw.get()) {
            Ok(e) => {
                self.entries.insert(lease, e);
            }
            Err(e) => {
                self.unreadable.insert(
                    lease.clone(),
                    Unreadable {
                        lease,
                        raw,
                        reason: e.to_string(),
                    },
                );
            }
        }
    }

    /// The complete entries of a damaged file, up to the first damage.
    fn salvage(bytes: &[u8]) -> Self {
        fn skip_ws(b: &[u8]) -> &[u8] {
            let n = b.iter().take_while(|c| c.is_ascii_whitespace()).count();
            &b[n..]
        }
        fn next<'a, T: Deserialize<'a>>(b: &'a [u8]) -> Option<(T, &'a [u8])> {
            let mut it = serde_json::Deserializer::from_slice(b).into_iter::<T>();
            let v = it.next()?.ok()?;
            Some((v, &b[it.byte_offset()..]))
        }
        let mut h = Self::default();
        let Some(mut rest) = skip_ws(bytes).strip_prefix(b"{") else {
            return h;
        };
        while let Some((lease, r)) = next::<String>(rest) {
            let Some(r) = skip_ws(r).strip_prefix(b":") else {
                break;
            };
            let Some((raw, r)) = next::<Box<RawValue>>(r) else {
                break;
            };
            h.insert_raw(lease, raw);
            match skip_ws(r).strip_prefix(b",") {
                Some(r) => rest = r,
                None => break,
            }
        }
        h
    }

    /// Opens the freezer files of every freeze recorded, readable entry or not.
    fn keep_all(&mut self) {
        for e in self.entries.values().filter(|e| e.frozen()) {
            let k = keep(&e.lease, e.cgroup.as_ref(), e.fs_frozen.as_ref());
            self.kept.insert(e.lease.clone(), k);
        }
        for u in self.unreadable.values() {
            if let Some(h) = u.hold().filter(HoldPart::frozen) {
                let k = keep(&u.lease, h.cgroup.as_ref(), h.fs_frozen.as_ref());
                self.kept.insert(u.lease.clone(), k);
            }
        }
    }

    fn to_json(&self) -> Result<Vec<u8>, serde_json::Error> {
        #[derive(Serialize)]
        #[serde(untagged)]
        enum Out<'a> {
            Entry(&'a Entry),
            Verbatim(&'a RawValue),
        }
        let out: BTreeMap<&str, Out<'_>> = self
            .entries
            .iter()
            .map(|(k, e)| (k.as_str(), Out::Entry(e)))
            .chain(
                self.unreadable
                    .iter()
                    .map(|(k, u)| (k.as_str(), Out::Verbatim(&u.raw))),
            )
            .collect();
        serde_json::to_vec_pretty(&out)
    }
}

/// The shared, persisted registry.
#[derive(Debug, Clone)]
pub struct Registry {
    path: PathBuf,
    holds: Arc<Mutex<Holds>>,
    /// The corrupt file this start moved aside.
    set_aside: Option<Arc<RegistryError>>,
    /// Where the last corrupt file went, while the holds it may have lost are not yet looked for.
    lost: Arc<Mutex<Option<PathBuf>>>,
}

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("hold registry {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("hold registry {path} is not valid JSON: {source}")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// The entry on disk for this lease cannot be read; it is never overwritten.
    #[error("hold registry {path}: the entry for {lease} is unreadable ({reason}); left as it is")]
    Unreadable {
        path: PathBuf,
        lease: String,
        reason: String,
    },
    /// The whole file could not be read; it was moved aside and a new one begun.
    #[error(
        "hold registry {path} is corrupt ({source}): moved to {moved_to}; {salvaged} complete entries kept, any after the damage lost"
    )]
    SetAside {
        path: PathBuf,
        moved_to: PathBuf,
        salvaged: usize,
        #[source]
        source: serde_json::Error,
    },
}

impl RegistryError {
    /// The lease whose entry this is about, if it is about one.
    pub fn lease(&self) -> Option<&str> {
        match self {
            Self::Unreadable { lease, .. } => Some(lease),
            Self::Io { .. } | Self::Json { .. } | Self::SetAside { .. } => None,
        }
    }
}

/// The marker that says a corrupt registry's lost holds have not been looked for yet.
const LOST_MARKER: &str = "holds.lost";

fn unix_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// Writes `bytes` to `path` atomically (temp file, fsync, rename).
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

impl Registry {
    /// Loads `<dir>/holds.json` (empty if absent). A file that is not valid JSON is moved
    /// aside (its complete entries kept) instead of stopping the helper: see the module doc.
    pub fn open(dir: &Path) -> Result<Self, RegistryError> {
        let path = dir.join("holds.json");
        let io = |source| RegistryError::Io {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let marker = dir.join(LOST_MARKER);
        let mut set_aside = None;
        let mut holds = match std::fs::read(&path) {
            Ok(b) => match Holds::parse(&b) {
                Ok(h) => h,
                Err(source) => {
                    let moved_to = dir.join(format!("holds.json.corrupt-{}", unix_ms()));
                    // The marker first: should we die before the new file is written, the
                    // next start still looks for the lost holds.
                    write_atomic(&marker, moved_to.to_string_lossy().as_bytes()).map_err(io)?;
                    std::fs::rename(&path, &moved_to).map_err(io)?;
                    let h = Holds::salvage(&b);
                    set_aside = Some(Arc::new(RegistryError::SetAside {
                        path: path.clone(),
                        moved_to,
                        salvaged: h.entries.len() + h.unreadable.len(),
                        source,
                    }));
                    h
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Holds::default(),
            Err(e) => return Err(io(e)),
        };
        let lost = match std::fs::read_to_string(&marker) {
            Ok(t) => Some(PathBuf::from(t)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io(e)),
        };
        holds.keep_all();
        let reg = Self {
            path,
            holds: Arc::new(Mutex::new(holds)),
            set_aside,
            lost: Arc::new(Mutex::new(lost)),
        };
        if reg.set_aside.is_some() {
            let g = reg.lock();
            reg.save(&g)?;
        }
        Ok(reg)
    }

    /// The corrupt file this start moved aside, if it did.
    pub fn set_aside(&self) -> Option<&RegistryError> {
        self.set_aside.as_deref()
    }

    /// Where a corrupt registry went whose lost holds have not been looked for yet.
    pub fn lost_holds(&self) -> Option<PathBuf> {
        self.lost
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Records that the lost holds were looked for (the marker is removed).
    pub fn lost_holds_done(&self) -> Result<(), RegistryError> {
        let marker = self.path.with_file_name(LOST_MARKER);
        match std::fs::remove_file(&marker) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(RegistryError::Io {
                    path: marker,
                    source,
                });
            }
        }
        *self
            .lost
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        Ok(())
    }

    pub fn lock(&self) -> MutexGuard<'_, Holds> {
        self.holds
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Writes the registry atomically (temp file, fsync, rename).
    pub fn save(&self, holds: &Holds) -> Result<(), RegistryError> {
        let bytes = holds.to_json().map_err(|source| RegistryError::Json {
            path: self.path.clone(),
            source,
        })?;
        write_atomic(&self.path, &bytes).map_err(|source| RegistryError::Io {
            path: self.path.clone(),
            source,
        })
    }

    /// Keeps the freezer files of a freeze about to begin for `lease` open.
    pub fn keep(&self, lease: &str, cgroup: Option<Arc<Control>>, mount: Option<Arc<Mount>>) {
        let mut g = self.lock();
        let k = g.kept.entry(lease.to_owned()).or_default();
        if cgroup.is_some() {
            k.cgroup = cgroup;
        }
        if mount.is_some() {
            k.mount = mount;
        }
    }

    /// Ends the recorded freezes of a readable entry (the cgroup's, the file system's, as
    /// asked) and persists what ended. Nothing recorded counts as done.
    pub fn end_freezes(&self, lease: &str, cgroup: bool, fs: bool) -> Vec<ThawError> {
        let mut g = self.lock();
        let Holds { entries, kept, .. } = &mut *g;
        let Some(e) = entries.get_mut(lease) else {
            return Vec::new();
        };
        let before = (e.cgroup.is_some(), e.fs_frozen.is_some());
        let problems = end_freezes(
            kept,
            lease,
            cgroup.then_some(&mut e.cgroup),
            fs.then_some(&mut e.fs_frozen),
        );
        if before != (e.cgroup.is_some(), e.fs_frozen.is_some())
            && let Err(err) = self.save(&g)
        {
            // The freeze ended; the record says frozen until the next write (harmless: a
            // thaw is idempotent).
            tracing::warn!(lease, error = %err, "cannot record the thaw");
        }
        problems
    }

    pub fn get(&self, lease: &str) -> Option<Entry> {
        self.lock().entries.get(lease).cloned()
    }

    /// Stores an entry and persists; the entry is on disk when this returns. Refuses to
    /// overwrite an unreadable entry.
    pub fn put(&self, e: Entry) -> Result<(), RegistryError> {
        let mut g = self.lock();
        if let Some(u) = g.unreadable.get(&e.lease) {
            return Err(self.unreadable_error(u));
        }
        g.entries.insert(e.lease.clone(), e);
        self.save(&g)
    }

    /// Removes a readable entry; an unreadable one is never removed.
    pub fn remove(&self, lease: &str) -> Result<(), RegistryError> {
        let mut g = self.lock();
        if let Some(u) = g.unreadable.get(lease) {
            return Err(self.unreadable_error(u));
        }
        g.entries.remove(lease);
        g.kept.remove(lease);
        self.save(&g)
    }

    pub fn all(&self) -> Vec<Entry> {
        self.lock().entries.values().cloned().collect()
    }

    /// The entries that cannot be read, as the errors that describe them.
    pub fn unreadable(&self) -> Vec<RegistryError> {
        self.lock()
            .unreadable
            .values()
            .map(|u| self.unreadable_error(u))
            .collect()
    }

    /// Freezes recorded now, readable or not.
    pub fn frozen_count(&self) -> usize {
        let g = self.lock();
        g.entries.values().filter(|e| e.frozen()).count()
            + g.unreadable
                .values()
                .filter(|u| u.hold().is_some_and(|h| h.frozen()))
                .count()
    }

    fn unreadable_error(&self, u: &Unreadable) -> RegistryError {
        RegistryError::Unreadable {
            path: self.path.clone(),
            lease: u.lease.clone(),
            reason: u.reason.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(lease: &str) -> Entry {
        Entry {
            lease: lease.into(),
            pod_uid: "uid".into(),
            tablet_alias: TabletAlias::new("zone1", 101),
            original_type: TabletType::Rdonly,
            vtctld: "http://vtctld:15999".into(),
            container_id: None,
            volume_mount: None,
            mysqlctl_socket: "/s/mysqlctl.sock".into(),
            mysqld_socket: "/s/mysql.sock".into(),
            stopped_mysqld: true,
            mysqld_down: true,
            cgroup: None,
            fs_frozen: None,
            hold_since_ms: Some(1),
            max_hold_secs: 60,
            watchdog_released: false,
        }
    }

    #[test]
    fn an_entry_is_stored_as_the_strings_earlier_versions_wrote() {
        let v = serde_json::to_value(entry("ns/a")).unwrap();
        assert_eq!(v["tablet_alias"], "zone1-0000000101");
        assert_eq!(v["original_type"], "rdonly");
    }

    #[test]
    fn an_unreadable_entry_is_kept_verbatim_and_never_overwritten_or_removed() {
        let dir = tempfile::tempdir().unwrap();
        let bad = r#"{"lease": "ns/bad", "tablet_alias": "no-dash-uid-x", "weird":  [1, 2.50]}"#;
        let good = serde_json::to_string(&entry("ns/good")).unwrap();
        std::fs::write(
            dir.path().join("holds.json"),
            format!(r#"{{"ns/bad": {bad}, "ns/good": {good}}}"#),
        )
        .unwrap();
        let reg = Registry::open(dir.path()).unwrap();
        assert_eq!(reg.all(), vec![entry("ns/good")]);
        let problems = reg.unreadable();
        assert_eq!(problems.len(), 1);
        assert!(
            matches!(&problems[0], RegistryError::Unreadable { lease, .. } if lease == "ns/bad")
        );

        // Rewrites (a put, a remove of another entry) keep it byte for byte.
        reg.put(entry("ns/other")).unwrap();
        reg.remove("ns/good").unwrap();
        let text = std::fs::read_to_string(dir.path().join("holds.json")).unwrap();
        assert!(text.contains(bad), "{text}");

        // It can be neither overwritten nor removed.
        assert!(reg.put(entry("ns/bad")).is_err());
        assert!(reg.remove("ns/bad").is_err());
        let reopened = Registry::open(dir.path()).unwrap();
        assert_eq!(reopened.unreadable().len(), 1);
        assert_eq!(reopened.all(), vec![entry("ns/other")]);
    }
}
