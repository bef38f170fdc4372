//! What this helper holds, persisted on the node (`<state-dir>/holds.json`) before every
//! freeze and after every release, so a restarted helper — and the watchdog, which needs
//! no API server — know exactly what to thaw.
//!
//! An entry that cannot be read as an [`Entry`] (a corrupt field in an otherwise valid
//! file) is kept verbatim on every rewrite and never released, overwritten or removed: a
//! guessed tablet type or a forgotten hold is worse than a reported one. Only its hold part
//! ([`HoldPart`]), if that reads, is ended by the watchdog at max-hold.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use vtsnap_core::naming::{TabletAlias, alias_as_string};
use vtsnap_core::vtctld::TabletType;

use crate::cgroup::Cgroup;

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

/// The registry's contents: the entries it can read, and those it cannot.
#[derive(Debug, Default)]
pub struct Holds {
    pub entries: BTreeMap<String, Entry>,
    pub unreadable: BTreeMap<String, Unreadable>,
}

impl Holds {
    fn parse(bytes: &[u8]) -> Result<Self, serde_json::Error> {
        let raw: BTreeMap<String, Box<RawValue>> = serde_json::from_slice(bytes)?;
        let mut h = Self::default();
        for (lease, raw) in raw {
            match serde_json::from_str::<Entry>(raw.get()) {
                Ok(e) => {
                    h.entries.insert(lease, e);
                }
                Err(e) => {
                    h.unreadable.insert(
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
        Ok(h)
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
}

impl RegistryError {
    /// The lease whose entry this is about, if it is about one.
    pub fn lease(&self) -> Option<&str> {
        match self {
            Self::Unreadable { lease, .. } => Some(lease),
            Self::Io { .. } | Self::Json { .. } => None,
        }
    }
}

impl Registry {
    /// Loads `<dir>/holds.json` (empty if absent).
    pub fn open(dir: &Path) -> Result<Self, RegistryError> {
        let path = dir.join("holds.json");
        let io = |source| RegistryError::Io {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let holds = match std::fs::read(&path) {
            Ok(b) => Holds::parse(&b).map_err(|source| RegistryError::Json {
                path: path.clone(),
                source,
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Holds::default(),
            Err(e) => return Err(io(e)),
        };
        Ok(Self {
            path,
            holds: Arc::new(Mutex::new(holds)),
        })
    }

    pub fn lock(&self) -> MutexGuard<'_, Holds> {
        self.holds
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Writes the registry atomically (temp file, fsync, rename).
    pub fn save(&self, holds: &Holds) -> Result<(), RegistryError> {
        let io = |source| RegistryError::Io {
            path: self.path.clone(),
            source,
        };
        let tmp = self.path.with_extension("json.tmp");
        let bytes = holds.to_json().map_err(|source| RegistryError::Json {
            path: self.path.clone(),
            source,
        })?;
        {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp).map_err(io)?;
            f.write_all(&bytes).map_err(io)?;
            f.sync_all().map_err(io)?;
        }
        std::fs::rename(&tmp, &self.path).map_err(io)
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
