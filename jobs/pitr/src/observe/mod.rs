//! The archive as the recovery sees it: every backup of the shard, its MANIFEST read and
//! checked. A backup that cannot be used is kept with why, never dropped in silence: the
//! chain then stops at it and names the GTIDs it would have carried. The shard's
//! snapshots and tablets as the archive step reads them live: [`cluster`].

pub mod cluster;

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use serde_json::Value;
use vtsnap_core::config::Mode;
use vtsnap_core::coverage::{Exactness, GtidSet, Text};
use vtsnap_core::pitr::chain::Base;
use vtsnap_core::pitr::manifest::{self, Expected, Increment, Record};
use vtsnap_core::shard::ShardRef;
use vtsnap_core::snapshot::{GtidFlavor, Phase, VolumeSnapshot};

use crate::archive::{ArchiveError, FileArchive};

/// A backup that is not part of the archive, or a snapshot that is no base, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Passed {
    pub name: String,
    pub why: String,
}

#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub increments: Vec<Increment>,
    /// Full backups (Vitess's own engine): not replayed.
    pub full: Vec<String>,
    /// Without a MANIFEST (in progress, or failed).
    pub incomplete: Vec<String>,
    pub unusable: Vec<Passed>,
}

/// Reads every backup of `keyspace/shard` in `archive` at `now`.
pub fn read_archive(
    archive: &FileArchive,
    keyspace: &str,
    shard: &str,
    now: Timestamp,
) -> Result<Observed, ArchiveError> {
    let mut o = Observed::default();
    for backup in archive.backups()? {
        let text = match archive.manifest(&backup) {
            Ok(Some(t)) => t,
            Ok(None) => {
                o.incomplete.push(backup);
                continue;
            }
            Err(e @ ArchiveError::Read(_)) => {
                o.unusable.push(Passed {
                    name: backup,
                    why: e.to_string(),
                });
                continue;
            }
            Err(e) => return Err(e),
        };
        let expected = Expected {
            backup: &backup,
            keyspace,
            shard,
        };
        match manifest::read(&text, expected, now) {
            Ok(Record::Increment(i)) => o.increments.push(*i),
            Ok(Record::Full { name }) => o.full.push(name),
            Err(e) => o.unusable.push(Passed {
                name: backup,
                why: e.to_string(),
            }),
        }
    }
    Ok(o)
}

/// The shard's snapshots that can be a recovery's base, and the others with why: ready,
/// not marked unusable, cut, and with a MySQL GTID position (exact when cold, a lower
/// bound when online).
pub fn bases(snapshots: &[Value], shard: &ShardRef) -> (Vec<Base>, Vec<Passed>) {
    let mut bases = Vec::new();
    let mut passed = Vec::new();
    for obj in snapshots {
        if !VolumeSnapshot::is_vtsnaps(obj) || !VolumeSnapshot::is_of_shard(obj, shard) {
            continue;
        }
        match VolumeSnapshot::read(obj)
            .map_err(|e| e.to_string())
            .and_then(|s| base(&s))
        {
            Ok(b) => bases.push(b),
            Err(why) => passed.push(Passed {
                name: obj
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_owned(),
                why,
            }),
        }
    }
    (bases, passed)
}

fn base(s: &VolumeSnapshot) -> Result<Base, String> {
    if s.phase != Some(Phase::Ready) || !s.status.ready_to_use {
        return Err("not ready".into());
    }
    if let Some(u) = &s.unusable {
        return Err(format!("marked unusable: {u:?}"));
    }
    let (recorded, exactness) = match s.mode {
        Some(Mode::Online) => (&s.gtid_lower_bound, Exactness::LowerBound),
        _ => (&s.gtid_executed, Exactness::Exact),
    };
    let text = recorded.as_deref().ok_or("it records no GTID position")?;
    let gtid = GtidSet::parse_position(text, Text::Strict)
        .map_err(|e| format!("its GTID position is unreadable: {e}"))?;
    if gtid.flavor() != GtidFlavor::Mysql56 {
        return Err("a MariaDB position: the archive replays MySQL GTIDs".into());
    }
    let cut = s.cut_time.ok_or("it records no cut time")?;
    Ok(Base {
        name: s.name.clone(),
        gtid,
        exactness,
        cut,
    })
}
