//! The archive as the recovery sees it: every backup of the shard, its MANIFEST read and
//! checked. A backup that cannot be used is kept with why, never dropped in silence: the
//! chain then stops at it and names the GTIDs it would have carried. The shard's tablets
//! as the archive step reads them live: [`cluster`].

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

use crate::archive::{Archive, ArchiveError};

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
pub async fn read_archive(
    archive: &Archive,
    keyspace: &str,
    shard: &str,
    now: Timestamp,
) -> Result<Observed, ArchiveError> {
    let mut o = Observed::default();
    for backup in archive.backups().await? {
        let text = match archive.manifest(&backup).await {
            Ok(Some(t)) => t,
            Ok(None) => {
                o.incomplete.push(backup);
                continue;
            }
            Err(e) if e.is_the_backups() => {
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

/// Whether `--snapshot NAME` names one of the shard's bases; why not, in words, when it
/// names a snapshot that is no base or no snapshot of the shard at all.
pub fn named_base(
    name: &str,
    bases: &[Base],
    passed: &[Passed],
    shard: &ShardRef,
) -> Result<(), String> {
    if bases.iter().any(|b| b.name == name) {
        return Ok(());
    }
    Err(match passed.iter().find(|p| p.name == name) {
        Some(p) => format!("--snapshot {name}: not a base: {}", p.why),
        None => format!("--snapshot {name}: no snapshot of {shard} has that name"),
    })
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

/// What a recovery carries of its base snapshot `base` (as read from the API): its MySQL
/// facts, and the object as the fetch container reads it, without its managed fields.
pub fn base_facts(base: &Value) -> crate::decide::recovery::BaseFacts {
    let annotation = |key: &str| {
        base.pointer("/metadata/annotations")
            .and_then(|a| a.get(key))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let mysql = [
        vtsnap_core::snapshot::ANN_MYSQL_FLAVOR,
        vtsnap_core::snapshot::ANN_MYSQL_VERSION,
    ]
    .into_iter()
    .filter_map(|key| Some((key, annotation(key)?)))
    .collect();
    let mut item = base.clone();
    if let Some(m) = item.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [item]});
    crate::decide::recovery::BaseFacts {
        mysql,
        fetch_list: list.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use vtsnap_core::snapshot::{ANN_GTID_EXECUTED, ANN_GTID_LOWER_BOUND, LABEL_MODE};
    use vtsnap_testkit::operator_objects::operator_shard;

    use super::*;

    const U: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";

    fn cut() -> Timestamp {
        "2026-12-07T10:00:00Z".parse().unwrap()
    }

    fn shard() -> ShardRef {
        ShardRef::parse_path("vitess/example/commerce/-").unwrap()
    }

    /// Of the shard's snapshots, which are bases and why the others are not; another
    /// shard's, and objects that are not vtsnap's, are not looked at.
    #[test]
    fn a_base_is_a_ready_usable_snapshot_with_a_mysql_position() {
        let s = operator_shard();
        let ready = s.snapshot("ready", cut()).object();
        let mut online = s.snapshot("online", cut()).object();
        online["metadata"]["labels"][LABEL_MODE] = json!("online");
        let annotations = online["metadata"]["annotations"].as_object_mut().unwrap();
        annotations.remove(ANN_GTID_EXECUTED);
        annotations.insert(
            ANN_GTID_LOWER_BOUND.into(),
            json!(format!("MySQL56/{U}:1-50")),
        );
        let mut not_ready_to_use = s.snapshot("unready", cut());
        not_ready_to_use.ready = false;
        let mut cut_only = s.snapshot("cut-only", cut());
        cut_only.phase = "cut";
        let mut unusable = s.snapshot("unusable", cut());
        unusable.unusable = Some("binlog purged".into());
        let mut maria = s.snapshot("maria", cut());
        maria.flavor = "mariadb";
        maria.version = "10.11.6-MariaDB".into();
        let other_shard = operator_shard()
            .named("commerce", "-80")
            .snapshot("elsewhere", cut())
            .object();
        let mut not_ours = s.snapshot("not-ours", cut()).object();
        not_ours["metadata"]["labels"]
            .as_object_mut()
            .unwrap()
            .remove("app.kubernetes.io/managed-by");
        let objects = vec![
            ready,
            online,
            not_ready_to_use.object(),
            cut_only.object(),
            unusable.object(),
            maria.object(),
            other_shard,
            not_ours,
        ];
        let (bases, passed) = bases(&objects, &shard());
        let names: Vec<(&str, Exactness, String)> = bases
            .iter()
            .map(|b| (b.name.as_str(), b.exactness, b.gtid.to_string()))
            .collect();
        assert_eq!(
            names,
            [
                ("ready", Exactness::Exact, format!("{U}:1-100")),
                ("online", Exactness::LowerBound, format!("{U}:1-50")),
            ]
        );
        let why: Vec<(&str, &str)> = passed
            .iter()
            .map(|p| (p.name.as_str(), p.why.as_str()))
            .collect();
        assert_eq!(
            why,
            [
                ("unready", "not ready"),
                ("cut-only", "not ready"),
                ("unusable", "marked unusable: \"binlog purged\""),
                (
                    "maria",
                    "a MariaDB position: the archive replays MySQL GTIDs"
                ),
            ]
        );
    }
}
