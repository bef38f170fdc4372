//! What this helper holds, persisted on the node (`<state-dir>/holds.json`) before every
//! freeze and after every release, so a restarted helper — and the watchdog, which needs
//! no API server — know exactly what to thaw.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use crate::cgroup::Cgroup;

/// One lease's holds on this node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub lease: String,
    pub pod_uid: String,
    pub tablet_alias: String,
    pub original_type: String,
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

/// The shared, persisted registry.
#[derive(Debug, Clone)]
pub struct Registry {
    path: PathBuf,
    entries: Arc<Mutex<BTreeMap<String, Entry>>>,
}

#[derive(Debug, thiserror::Error)]
#[error("hold registry {path}: {reason}")]
pub struct RegistryError {
    pub path: String,
    pub reason: String,
}

impl Registry {
    /// Loads `<dir>/holds.json` (empty if absent).
    pub fn open(dir: &Path) -> Result<Self, RegistryError> {
        let path = dir.join("holds.json");
        let err = |reason: String| RegistryError {
            path: path.display().to_string(),
            reason,
        };
        std::fs::create_dir_all(dir).map_err(|e| err(e.to_string()))?;
        let entries = match std::fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b).map_err(|e| err(e.to_string()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(err(e.to_string())),
        };
        Ok(Self {
            path: path.clone(),
            entries: Arc::new(Mutex::new(entries)),
        })
    }

    pub fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Entry>> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Writes the registry atomically (temp file, fsync, rename).
    pub fn save(&self, entries: &BTreeMap<String, Entry>) -> Result<(), RegistryError> {
        let err = |reason: String| RegistryError {
            path: self.path.display().to_string(),
            reason,
        };
        let tmp = self.path.with_extension("json.tmp");
        let bytes = serde_json::to_vec_pretty(entries).map_err(|e| err(e.to_string()))?;
        {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp).map_err(|e| err(e.to_string()))?;
            f.write_all(&bytes).map_err(|e| err(e.to_string()))?;
            f.sync_all().map_err(|e| err(e.to_string()))?;
        }
        std::fs::rename(&tmp, &self.path).map_err(|e| err(e.to_string()))
    }

    pub fn get(&self, lease: &str) -> Option<Entry> {
        self.lock().get(lease).cloned()
    }

    /// Stores an entry and persists; the entry is on disk when this returns.
    pub fn put(&self, e: Entry) -> Result<(), RegistryError> {
        let mut g = self.lock();
        g.insert(e.lease.clone(), e);
        self.save(&g)
    }

    pub fn remove(&self, lease: &str) -> Result<(), RegistryError> {
        let mut g = self.lock();
        g.remove(lease);
        self.save(&g)
    }

    pub fn all(&self) -> Vec<Entry> {
        self.lock().values().cloned().collect()
    }
}
