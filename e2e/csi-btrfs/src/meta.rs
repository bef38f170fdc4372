//! The record kept beside each volume and snapshot, so a restarted driver answers as the
//! one that created them. The record is the commit point: an object exists once its
//! record is on disk, and a subvolume without one is a leftover of a crash, never
//! handed out.
//!
//! Records are JSON, one file each, written atomically (temporary file, fsync, rename,
//! fsync of the directory).

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::csi::Timestamp;
use crate::ids::ObjectId;

/// The record format; a newer one is refused rather than misread.
pub const VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VolumeRecord {
    pub version: u32,
    pub id: ObjectId,
    /// As asked for (or taken from the source snapshot); not enforced by btrfs.
    pub capacity_bytes: i64,
    /// The snapshot it was cloned from, if any.
    pub source_snapshot: Option<ObjectId>,
    /// The CreateVolume parameters, kept to tell a retry from a conflicting request.
    pub parameters: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotRecord {
    pub version: u32,
    pub id: ObjectId,
    pub source_volume: ObjectId,
    /// The source volume's capacity: the smallest volume this snapshot restores into.
    pub size_bytes: i64,
    /// When the snapshot was cut (the subvolume's creation time).
    pub creation_time: Timestamp,
}

#[derive(Debug, thiserror::Error)]
pub enum MetaError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot remove {path}: {source}")]
    Remove {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a record: {source}")]
    Decode {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{path} has record version {found}; this driver reads {VERSION}")]
    Version { path: PathBuf, found: u32 },
    #[error("{path} is the record of {found}, not of {expected}")]
    WrongId {
        path: PathBuf,
        expected: ObjectId,
        found: ObjectId,
    },
}

/// A record type: how its version and id are read back.
pub trait Record: serde::Serialize + serde::de::DeserializeOwned {
    fn version(&self) -> u32;
    fn id(&self) -> &ObjectId;
}

impl Record for VolumeRecord {
    fn version(&self) -> u32 {
        self.version
    }
    fn id(&self) -> &ObjectId {
        &self.id
    }
}

impl Record for SnapshotRecord {
    fn version(&self) -> u32 {
        self.version
    }
    fn id(&self) -> &ObjectId {
        &self.id
    }
}

/// The bytes of a record (pretty, for a human reading the state directory).
pub fn encode<R: Record>(r: &R) -> Vec<u8> {
    let mut v = serde_json::to_vec_pretty(r).unwrap_or_default();
    v.push(b'\n');
    v
}

/// Reads a record back, checking its version and that it belongs to `expected`
/// (a record copied under another name must not answer for it).
pub fn decode<R: Record>(path: &Path, bytes: &[u8], expected: &ObjectId) -> Result<R, MetaError> {
    #[derive(serde::Deserialize)]
    struct Versioned {
        version: u32,
    }
    let v: Versioned = serde_json::from_slice(bytes).map_err(|source| MetaError::Decode {
        path: path.to_owned(),
        source,
    })?;
    if v.version != VERSION {
        return Err(MetaError::Version {
            path: path.to_owned(),
            found: v.version,
        });
    }
    let r: R = serde_json::from_slice(bytes).map_err(|source| MetaError::Decode {
        path: path.to_owned(),
        source,
    })?;
    if r.id() != expected {
        return Err(MetaError::WrongId {
            path: path.to_owned(),
            expected: expected.clone(),
            found: r.id().clone(),
        });
    }
    Ok(r)
}

/// Reads the record at `path`; `None` if there is none.
pub fn load<R: Record>(path: &Path, id: &ObjectId) -> Result<Option<R>, MetaError> {
    match fs::read(path) {
        Ok(bytes) => decode(path, &bytes, id).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(MetaError::Read {
            path: path.to_owned(),
            source,
        }),
    }
}

/// The temporary name `store` writes first. Ids start with a letter or digit, so a
/// leading dot never collides with a record.
pub fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp"))
}

/// Writes `r` to `path` atomically and durably.
pub fn store<R: Record>(path: &Path, r: &R) -> Result<(), MetaError> {
    let tmp = temp_path(path);
    let io = |source| MetaError::Write {
        path: tmp.clone(),
        source,
    };
    let mut f = File::create(&tmp).map_err(io)?;
    f.write_all(&encode(r)).map_err(io)?;
    f.sync_all().map_err(io)?;
    drop(f);
    let io = |source| MetaError::Write {
        path: path.to_owned(),
        source,
    };
    fs::rename(&tmp, path).map_err(io)?;
    sync_dir(path).map_err(io)
}

/// Removes the record at `path`; a missing one is already removed.
pub fn remove(path: &Path) -> Result<(), MetaError> {
    match fs::remove_file(path) {
        Ok(()) => sync_dir(path).map_err(|source| MetaError::Remove {
            path: path.to_owned(),
            source,
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(MetaError::Remove {
            path: path.to_owned(),
            source,
        }),
    }
}

/// fsync of the directory holding `path`, so a rename or unlink in it is durable.
fn sync_dir(path: &Path) -> std::io::Result<()> {
    match path.parent() {
        Some(dir) => File::open(dir)?.sync_all(),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> ObjectId {
        ObjectId::parse(s).unwrap()
    }

    fn volume() -> VolumeRecord {
        VolumeRecord {
            version: VERSION,
            id: id("pvc-1"),
            capacity_bytes: 1 << 30,
            source_snapshot: Some(id("snap-1")),
            parameters: [("k".to_owned(), "v".to_owned())].into(),
        }
    }

    fn snapshot() -> SnapshotRecord {
        SnapshotRecord {
            version: VERSION,
            id: id("snap-1"),
            source_volume: id("pvc-1"),
            size_bytes: 1 << 30,
            creation_time: Timestamp {
                seconds: 1_700_000_000,
                nanos: 123,
            },
        }
    }

    #[test]
    fn records_round_trip() {
        let p = Path::new("/r/pvc-1.json");
        let v = volume();
        assert_eq!(
            decode::<VolumeRecord>(p, &encode(&v), &id("pvc-1")).unwrap(),
            v
        );
        let s = snapshot();
        assert_eq!(
            decode::<SnapshotRecord>(p, &encode(&s), &id("snap-1")).unwrap(),
            s
        );
    }

    #[test]
    fn a_foreign_or_damaged_record_is_refused() {
        let p = Path::new("/r/x.json");
        let other = decode::<VolumeRecord>(p, &encode(&volume()), &id("pvc-2"));
        assert!(matches!(other, Err(MetaError::WrongId { .. })), "{other:?}");

        let mut newer = volume();
        newer.version = VERSION + 1;
        let e = decode::<VolumeRecord>(p, &encode(&newer), &id("pvc-1"));
        assert!(
            matches!(e, Err(MetaError::Version { found, .. }) if found == VERSION + 1),
            "{e:?}"
        );

        let bytes = encode(&volume());
        let truncated = decode::<VolumeRecord>(p, &bytes[..bytes.len() / 2], &id("pvc-1"));
        assert!(
            matches!(truncated, Err(MetaError::Decode { .. })),
            "{truncated:?}"
        );

        // A snapshot record is not a volume record.
        let e = decode::<VolumeRecord>(p, &encode(&snapshot()), &id("snap-1"));
        assert!(matches!(e, Err(MetaError::Decode { .. })), "{e:?}");

        // An id that would name a path outside the root does not decode.
        let evil = String::from_utf8(encode(&volume()))
            .unwrap()
            .replace("\"snap-1\"", "\"../../etc\"");
        let e = decode::<VolumeRecord>(p, evil.as_bytes(), &id("pvc-1"));
        assert!(matches!(e, Err(MetaError::Decode { .. })), "{e:?}");
    }

    #[test]
    fn store_replaces_atomically_and_remove_is_idempotent() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("pvc-1.json");
        assert_eq!(load::<VolumeRecord>(&p, &id("pvc-1")).unwrap(), None);
        let mut v = volume();
        store(&p, &v).unwrap();
        v.capacity_bytes = 5;
        store(&p, &v).unwrap();
        assert_eq!(load::<VolumeRecord>(&p, &id("pvc-1")).unwrap(), Some(v));
        assert!(!temp_path(&p).exists(), "no temporary file is left");
        remove(&p).unwrap();
        remove(&p).unwrap();
        assert_eq!(load::<VolumeRecord>(&p, &id("pvc-1")).unwrap(), None);
    }
}
