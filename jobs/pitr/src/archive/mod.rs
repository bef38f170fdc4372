//! The binlog archive: Vitess's backup storage as the recovery reads it (docs/pitr.md §2).
//! A shard's backups are `<root>/<keyspace>/<shard>/<backup name>/` holding the files
//! `0`..`N-1` and a `MANIFEST`, in a folder ([`FileArchive`], Vitess's `file` storage) or
//! under an object store's prefix ([`ObjectArchive`]: S3, GCS, Azure; Vitess's `s3`
//! storage names its objects the same way, `go/vt/mysqlctl/s3backupstorage/s3.go`
//! `objName`). What is read from it is bounded: the number of backups, each MANIFEST's
//! size, each stored file's.

mod file;
mod object;

use std::fs::File;
use std::path::{Path, PathBuf};

pub use file::FileArchive;
pub use object::ObjectArchive;
use vtsnap_core::input;

/// The most backups one shard's folder may hold.
pub const MAX_BACKUPS: usize = 100_000;

#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("cannot list {place}: {problem}")]
    List { place: String, problem: String },
    #[error("{place} holds more than {MAX_BACKUPS} entries")]
    TooMany { place: String },
    /// A MANIFEST that cannot be read as one (too large, not a file): its backup is
    /// passed over, named.
    #[error("{0}")]
    Read(#[from] input::ReadError),
    #[error("{place}: {problem}")]
    Unreadable { place: String, problem: String },
    #[error(
        "{what} {name:?} cannot name a folder of the backup storage (one name of letters, digits, '-', '_' or '.')"
    )]
    BadName { what: &'static str, name: String },
    #[error("backup {backup}: cannot open its file {stored}: {problem}")]
    Open {
        backup: String,
        stored: String,
        problem: String,
    },
    #[error("--archive-url {url}: {problem}")]
    Url { url: String, problem: String },
}

impl ArchiveError {
    /// Whether the error is the backup's own (its MANIFEST cannot be read as one), so it
    /// is passed over, named, rather than failing the whole read.
    pub fn is_the_backups(&self) -> bool {
        matches!(self, Self::Read(_) | Self::Unreadable { .. })
    }
}

/// Where a shard's archive is: a mounted folder, or an object store's URL.
#[derive(Debug, Clone)]
pub enum Archive {
    File(FileArchive),
    Object(ObjectArchive),
}

/// One stored file, open for reading: the archive's own file, or a copy of an object in
/// the spool folder, which is removed when this is dropped.
#[derive(Debug)]
pub struct Stored {
    pub file: File,
    spooled: Option<PathBuf>,
}

impl Drop for Stored {
    fn drop(&mut self) {
        if let Some(p) = &self.spooled {
            // Best effort: a spool copy is never taken for a binlog (its name says so).
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Archive {
    /// The archive of `keyspace/shard` at `place`: a folder, or an `s3://`, `gs://` or
    /// `az://` URL (credentials from the environment, as each store's SDK reads them).
    pub fn new(place: &ArchivePlace, keyspace: &str, shard: &str) -> Result<Self, ArchiveError> {
        Ok(match place {
            ArchivePlace::Folder(root) => Self::File(FileArchive::new(root, keyspace, shard)?),
            ArchivePlace::Url { url, settings } => Self::Object(ObjectArchive::with_settings(
                url, keyspace, shard, settings,
            )?),
        })
    }

    /// The backups' names, in name order (which is time order). A shard without a folder
    /// has none.
    pub async fn backups(&self) -> Result<Vec<String>, ArchiveError> {
        match self {
            Self::File(a) => a.backups(),
            Self::Object(a) => a.backups().await,
        }
    }

    /// A backup's MANIFEST, bounded; `None` while it has none (a backup in progress, or one
    /// that failed: Vitess writes the MANIFEST last).
    pub async fn manifest(&self, backup: &str) -> Result<Option<Vec<u8>>, ArchiveError> {
        match self {
            Self::File(a) => a.manifest(backup),
            Self::Object(a) => a.manifest(backup).await,
        }
    }

    /// One stored file of a backup, opened for reading; an object is first copied into
    /// `spool` (at most `max_bytes`, else it fails naming the file).
    pub async fn open(
        &self,
        backup: &str,
        stored: &str,
        spool: &Path,
        max_bytes: u64,
    ) -> Result<Stored, ArchiveError> {
        match self {
            Self::File(a) => Ok(Stored {
                file: a.open(backup, stored)?,
                spooled: None,
            }),
            Self::Object(a) => {
                let path = spool.join(format!("{backup}.{stored}.stored"));
                // Removed when the returned handle is dropped (a failed copy removes itself).
                Ok(Stored {
                    file: a.copy_into(backup, stored, &path, max_bytes).await?,
                    spooled: Some(path),
                })
            }
        }
    }

    /// Where it is, for messages.
    pub fn place(&self) -> String {
        match self {
            Self::File(a) => a.place(),
            Self::Object(a) => a.place(),
        }
    }
}

/// Where the backup storage is, as the command line names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArchivePlace {
    /// Vitess's `file` storage root, mounted (`--archive-root`).
    Folder(PathBuf),
    /// An object store's bucket and root (`--archive-url`), and settings over the
    /// environment's (the store's keys in lower case, `aws_endpoint`, …; none from the
    /// command line, where the environment is the place for them).
    Url {
        url: String,
        settings: Vec<(String, String)>,
    },
}

/// A backup folder's name as Vitess makes it: `YYYY-MM-DD.HHMMSS.<cell>-<10-digit uid>`
/// (`go/vt/mysqlctl/backup.go`); anything else in the folder is not a backup.
pub fn is_backup_name(s: &str) -> bool {
    let mut parts = s.splitn(3, '.');
    let (Some(date), Some(time), Some(alias)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    let date_ok = date.len() == 10
        && date.bytes().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 {
                b == b'-'
            } else {
                b.is_ascii_digit()
            }
        });
    let alias_ok = alias.rsplit_once('-').is_some_and(|(cell, uid)| {
        !cell.is_empty()
            && cell
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            && uid.len() == 10
            && digits(uid)
    });
    date_ok && time.len() == 6 && digits(time) && alias_ok
}

/// One folder name, nothing that walks: Vitess names keyspaces and key ranges so.
fn is_folder_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 255
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

/// The keyspace and shard as folder names, or which one cannot be.
fn checked_shard(keyspace: &str, shard: &str) -> Result<(), ArchiveError> {
    for (what, name) in [("keyspace", keyspace), ("shard", shard)] {
        if !is_folder_name(name) {
            return Err(ArchiveError::BadName {
                what,
                name: name.to_owned(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backup_names_follow_vitess() {
        assert!(is_backup_name("2026-12-07.093512.zone1-0000000102"));
        assert!(is_backup_name("2026-12-07.093512.us-east-1a-0000000102"));
        for bad in [
            "2026-12-07.093512",
            "2026-12-07.93512.zone1-0000000102",
            "2026/12/07.093512.zone1-0000000102",
            "2026-12-07.093512.-0000000102",
            "2026-12-07.093512.zone1-00000001x2",
            "2026-12-07.093512.zo/ne-0000000102",
            "..",
        ] {
            assert!(!is_backup_name(bad), "{bad}");
        }
    }
}
