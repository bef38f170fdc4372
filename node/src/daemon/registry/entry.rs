//! One lease's record ([`Entry`]), the part of it the watchdog needs ([`HoldPart`]), and an
//! entry that cannot be read, kept verbatim ([`Unreadable`]).

use std::path::PathBuf;

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
