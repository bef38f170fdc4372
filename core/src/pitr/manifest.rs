//! A Vitess backup's `MANIFEST`, read as hostile input (docs/pitr.md §2): the binlog
//! archive is Vitess's incremental backups, and each one's record says which GTIDs its
//! binlog files carry, over which times, and how the files are stored.
//!
//! Facts (vitess v0.24, `go/vt/mysqlctl/backupengine.go` `BackupManifest`,
//! `builtinbackupengine.go` `builtinBackupManifest`, `FileEntry`): plain JSON with Go's
//! field names; positions are `MySQL56/<set>`; `Position` is the set at the binlog flush
//! united with `gtid_purged`, `FromPosition` the first copied binlog's previous-GTIDs; the
//! files are `0`..`N-1` beside the MANIFEST, gzip (pgzip or pargzip, many members) unless
//! `SkipCompress`; each `Hash` is the CRC-32 (IEEE) of the stored bytes as 8 hex digits.

use k8s_openapi::jiff::Timestamp;
use serde::Deserialize;

use crate::coverage::{GtidSet, Text};
use crate::naming::TabletAlias;
use crate::snapshot::CLOCK_SKEW;
use crate::snapshot::GtidFlavor;

/// The largest MANIFEST read (one naming [`MAX_FILES`] binlogs is about 1 MiB).
pub const MAX_MANIFEST: u64 = 4 << 20;
/// The most binlog files one backup may name (an increment holds a few; 10,000 binlogs of
/// 1 GiB are 10 TiB).
pub const MAX_FILES: usize = 10_000;

/// How a backup's files are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// gzip members one after another (Vitess's `pgzip` and `pargzip`).
    Gzip,
    /// As the server wrote them (`SkipCompress`).
    None,
}

/// One binlog file of an incremental backup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinlogFile {
    /// Its name in the backup's directory (`0`, `1`, …).
    pub stored: String,
    /// The binlog's own name on the server (`vt-0000000101-bin.000012`).
    pub binlog: String,
    /// CRC-32 of the stored bytes.
    pub crc32: u32,
}

/// One incremental backup: a slice of the shard's binlog history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Increment {
    pub name: String,
    pub tablet: TabletAlias,
    /// The previous-GTIDs of its first binlog: what a server must hold before it.
    pub from: GtidSet,
    /// What a server holds after it (with the source's `gtid_purged`).
    pub to: GtidSet,
    pub purged: GtidSet,
    /// The commit times of its first and last transaction (whole seconds).
    pub first_commit: Timestamp,
    pub last_commit: Timestamp,
    /// When Vitess started it; the binlogs were flushed after this.
    pub started: Timestamp,
    pub compression: Compression,
    pub files: Vec<BinlogFile>,
}

/// What a backup directory holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    Increment(Box<Increment>),
    /// A full backup (Vitess's own engine): not part of the archive vtsnap replays.
    Full {
        name: String,
    },
}

/// Why a MANIFEST cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    #[error("backup {backup}: its MANIFEST is not JSON of a Vitess backup: {reason}")]
    NotAManifest { backup: String, reason: String },
    #[error("backup {backup}: {field} is {problem}")]
    Malformed {
        backup: String,
        field: &'static str,
        problem: String,
    },
    #[error("backup {backup}: {what}, which point-in-time recovery cannot replay")]
    Unsupported { backup: String, what: String },
}

#[derive(Deserialize)]
struct RawManifest {
    #[serde(rename = "BackupName")]
    backup_name: Option<String>,
    #[serde(rename = "BackupMethod")]
    backup_method: Option<String>,
    #[serde(rename = "Incremental", default)]
    incremental: bool,
    #[serde(rename = "Position")]
    position: Option<String>,
    #[serde(rename = "PurgedPosition")]
    purged_position: Option<String>,
    #[serde(rename = "FromPosition")]
    from_position: Option<String>,
    #[serde(rename = "BackupTime")]
    backup_time: Option<String>,
    #[serde(rename = "TabletAlias")]
    tablet_alias: Option<String>,
    #[serde(rename = "Keyspace")]
    keyspace: Option<String>,
    #[serde(rename = "Shard")]
    shard: Option<String>,
    #[serde(rename = "IncrementalDetails")]
    incremental_details: Option<RawDetails>,
    #[serde(rename = "CompressionEngine")]
    compression_engine: Option<String>,
    #[serde(rename = "SkipCompress", default)]
    skip_compress: bool,
    #[serde(rename = "FileEntries")]
    file_entries: Option<Vec<RawFile>>,
}

#[derive(Deserialize)]
struct RawDetails {
    #[serde(rename = "FirstTimestamp")]
    first_timestamp: Option<String>,
    #[serde(rename = "LastTimestamp")]
    last_timestamp: Option<String>,
}

#[derive(Deserialize)]
struct RawFile {
    #[serde(rename = "Base")]
    base: Option<String>,
    #[serde(rename = "Name")]
    name: Option<String>,
    #[serde(rename = "Hash")]
    hash: Option<String>,
    #[serde(rename = "ParentPath", default)]
    parent_path: String,
}

/// Where a MANIFEST was found: the shard's directory names the backup, keyspace and shard
/// it must be of.
#[derive(Debug, Clone, Copy)]
pub struct Expected<'a> {
    pub backup: &'a str,
    pub keyspace: &'a str,
    pub shard: &'a str,
}

struct Reader<'a> {
    backup: &'a str,
    now: Timestamp,
}

impl Reader<'_> {
    fn malformed(&self, field: &'static str, problem: impl Into<String>) -> ManifestError {
        ManifestError::Malformed {
            backup: self.backup.to_owned(),
            field,
            problem: problem.into(),
        }
    }

    fn required<T>(&self, field: &'static str, v: Option<T>) -> Result<T, ManifestError> {
        v.ok_or_else(|| self.malformed(field, "missing"))
    }

    fn position(&self, field: &'static str, text: &str) -> Result<GtidSet, ManifestError> {
        // Vitess writes `MySQL56/` for an empty set.
        let set = GtidSet::parse_position(text, Text::Strict)
            .map_err(|e| self.malformed(field, format!("not a GTID position ({e})")))?;
        if set.flavor() != GtidFlavor::Mysql56 {
            return Err(ManifestError::Unsupported {
                backup: self.backup.to_owned(),
                what: format!("{field} is a MariaDB position"),
            });
        }
        Ok(set)
    }

    fn time(&self, field: &'static str, text: &str) -> Result<Timestamp, ManifestError> {
        let t: Timestamp = text
            .parse()
            .map_err(|_| self.malformed(field, format!("{text:?}, not an RFC 3339 time")))?;
        if t > self.now.checked_add(CLOCK_SKEW).unwrap_or(Timestamp::MAX) {
            return Err(self.malformed(field, format!("{t}, in the future")));
        }
        Ok(t)
    }

    fn file(&self, index: usize, raw: RawFile) -> Result<BinlogFile, ManifestError> {
        let field = "FileEntries";
        let base = self.required(field, raw.base)?;
        if base != "BinLog" {
            return Err(self.malformed(
                field,
                format!("entry {index} of base {base:?}, not a binlog"),
            ));
        }
        let binlog = self.required(field, raw.name)?;
        if !is_binlog_name(&binlog) || !raw.parent_path.is_empty() {
            return Err(self.malformed(
                field,
                format!("entry {index} naming {binlog:?}, not a binlog file's name"),
            ));
        }
        let hash = self.required(field, raw.hash)?;
        let crc32 = (hash.len() == 8 && hash.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| u32::from_str_radix(&hash, 16).ok())
            .flatten()
            .ok_or_else(|| {
                self.malformed(
                    field,
                    format!("entry {index} with hash {hash:?}, not 8 hex digits"),
                )
            })?;
        Ok(BinlogFile {
            stored: index.to_string(),
            binlog,
            crc32,
        })
    }
}

/// A binlog's base name as MySQL makes it: `<basename>.<6+ digits>`, nothing that walks.
fn is_binlog_name(s: &str) -> bool {
    let Some((stem, number)) = s.rsplit_once('.') else {
        return false;
    };
    s.len() <= 255
        && !stem.is_empty()
        && !stem.starts_with('.')
        && stem
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        && number.len() >= 6
        && number.bytes().all(|b| b.is_ascii_digit())
}

/// Reads the MANIFEST `text` of the backup `expected` names, at `now`.
pub fn read(text: &[u8], expected: Expected<'_>, now: Timestamp) -> Result<Record, ManifestError> {
    let r = Reader {
        backup: expected.backup,
        now,
    };
    // The caller reads it bounded; what is handed in is held to the same bound.
    if text.len() as u64 > MAX_MANIFEST {
        return Err(ManifestError::NotAManifest {
            backup: expected.backup.to_owned(),
            reason: format!("{} bytes, more than {MAX_MANIFEST}", text.len()),
        });
    }
    let raw: RawManifest =
        serde_json::from_slice(text).map_err(|e| ManifestError::NotAManifest {
            backup: expected.backup.to_owned(),
            reason: e.to_string(),
        })?;
    let name = r.required("BackupName", raw.backup_name)?;
    if name != expected.backup {
        return Err(r.malformed(
            "BackupName",
            format!("{name:?}, and its directory is {:?}", expected.backup),
        ));
    }
    for (field, got, want) in [
        ("Keyspace", raw.keyspace, expected.keyspace),
        ("Shard", raw.shard, expected.shard),
    ] {
        let got = r.required(field, got)?;
        if got != want {
            return Err(r.malformed(
                field,
                format!("{got:?}, and the backup is stored under {want:?}"),
            ));
        }
    }
    if !raw.incremental {
        return Ok(Record::Full { name });
    }
    let method = r.required("BackupMethod", raw.backup_method)?;
    if method != "builtin" {
        return Err(ManifestError::Unsupported {
            backup: name,
            what: format!("an incremental backup of engine {method:?}"),
        });
    }
    let tablet_text = r.required("TabletAlias", raw.tablet_alias)?;
    let tablet = tablet_text
        .parse::<TabletAlias>()
        .map_err(|_| r.malformed("TabletAlias", format!("{tablet_text:?}")))?;
    let from = r.position(
        "FromPosition",
        &r.required("FromPosition", raw.from_position)?,
    )?;
    let to = r.position("Position", &r.required("Position", raw.position)?)?;
    let purged = match raw.purged_position.as_deref() {
        None | Some("") => GtidSet::empty(GtidFlavor::Mysql56),
        Some(p) => r.position("PurgedPosition", p)?,
    };
    if let Some(missing) = from.missing_from(&to).filter(|m| !m.is_empty()) {
        return Err(r.malformed(
            "Position",
            format!("short of its own FromPosition by {missing}"),
        ));
    }
    let details = r.required("IncrementalDetails", raw.incremental_details)?;
    let first_commit = r.time(
        "IncrementalDetails.FirstTimestamp",
        &r.required("IncrementalDetails.FirstTimestamp", details.first_timestamp)?,
    )?;
    let last_commit = r.time(
        "IncrementalDetails.LastTimestamp",
        &r.required("IncrementalDetails.LastTimestamp", details.last_timestamp)?,
    )?;
    if last_commit < first_commit {
        return Err(r.malformed(
            "IncrementalDetails.LastTimestamp",
            format!("{last_commit}, before its FirstTimestamp {first_commit}"),
        ));
    }
    let started = r.time("BackupTime", &r.required("BackupTime", raw.backup_time)?)?;
    let compression = match (raw.skip_compress, raw.compression_engine.as_deref()) {
        (true, _) => Compression::None,
        // An empty engine is pgzip (vitess `compression.go`).
        (false, None | Some("" | "pgzip" | "pargzip")) => Compression::Gzip,
        (false, Some(other)) => {
            return Err(ManifestError::Unsupported {
                backup: name,
                what: format!("files compressed with {other:?} (gzip or none are read)"),
            });
        }
    };
    let raw_files = r.required("FileEntries", raw.file_entries)?;
    if raw_files.is_empty() || raw_files.len() > MAX_FILES {
        return Err(r.malformed(
            "FileEntries",
            format!("{} entries, not 1 to {MAX_FILES}", raw_files.len()),
        ));
    }
    let files = raw_files
        .into_iter()
        .enumerate()
        .map(|(i, f)| r.file(i, f))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Record::Increment(Box::new(Increment {
        name,
        tablet,
        from,
        to,
        purged,
        first_commit,
        last_commit,
        started,
        compression,
        files,
    })))
}

#[cfg(test)]
#[path = "manifest_tests.rs"]
mod tests;
