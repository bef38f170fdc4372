//! The shared, persisted registry: `<state-dir>/holds.json`, written atomically (temp
//! file, fsync, rename) before every freeze and after every release.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use super::entry::{Entry, Unreadable};
use super::error::RegistryError;
use super::holds::Holds;
use super::thaw::{Freezes, ThawError, end_freezes};
use crate::cgroup::Control;
use crate::fsfreeze::Mount;

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

    /// Ends the recorded freezes of a readable entry (`which`: the cgroup's, the file
    /// system's, or both) and persists what ended. Nothing recorded counts as done.
    pub fn end_freezes(&self, lease: &str, which: Freezes) -> Vec<ThawError> {
        let mut g = self.lock();
        let Holds { entries, kept, .. } = &mut *g;
        let Some(e) = entries.get_mut(lease) else {
            return Vec::new();
        };
        let before = (e.cgroup.is_some(), e.fs_frozen.is_some());
        let problems = end_freezes(
            kept,
            lease,
            which.cgroup().then_some(&mut e.cgroup),
            which.file_system().then_some(&mut e.fs_frozen),
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
