//! One shard's part of Vitess's `file` backup storage: its backups are directories
//! `<root>/<keyspace>/<shard>/<backup name>/` holding the files `0`..`N-1` and a
//! `MANIFEST` (vitess `go/vt/mysqlctl/filebackupstorage/file.go`).

use std::fs::File;
use std::path::{Path, PathBuf};

use vtsnap_core::input::{self, Accept};
use vtsnap_core::pitr::manifest::MAX_MANIFEST;

use super::{ArchiveError, MAX_BACKUPS, checked_shard, is_backup_name};

/// One shard's part of a `file` backup storage.
#[derive(Debug, Clone)]
pub struct FileArchive {
    shard_dir: PathBuf,
}

impl FileArchive {
    /// The archive of `keyspace/shard` under the storage root `root`; a name that would
    /// walk out of it is refused.
    pub fn new(root: &Path, keyspace: &str, shard: &str) -> Result<Self, ArchiveError> {
        checked_shard(keyspace, shard)?;
        Ok(Self {
            shard_dir: root.join(keyspace).join(shard),
        })
    }

    /// The backups' names, in name order (which is time order). A shard without a
    /// directory has none.
    pub fn backups(&self) -> Result<Vec<String>, ArchiveError> {
        let list_error = |e: std::io::Error| ArchiveError::List {
            place: self.place(),
            problem: e.to_string(),
        };
        let entries = match std::fs::read_dir(&self.shard_dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(list_error(e)),
        };
        let mut names = Vec::new();
        for (n, entry) in entries.enumerate() {
            if n >= MAX_BACKUPS {
                return Err(ArchiveError::TooMany {
                    place: self.place(),
                });
            }
            let entry = entry.map_err(list_error)?;
            let is_dir = entry.file_type().map_err(list_error)?.is_dir();
            if let Some(name) = entry
                .file_name()
                .to_str()
                .filter(|n| is_dir && is_backup_name(n))
            {
                names.push(name.to_owned());
            }
        }
        names.sort();
        Ok(names)
    }

    /// A backup's MANIFEST, bounded; `None` while it has none (a backup in progress, or
    /// one that failed: Vitess writes the MANIFEST last).
    pub fn manifest(&self, backup: &str) -> Result<Option<Vec<u8>>, ArchiveError> {
        let path = self.shard_dir.join(backup).join("MANIFEST");
        match input::read_bounded(&path, "a MANIFEST", MAX_MANIFEST, Accept::RegularFile) {
            Ok(text) => Ok(Some(text)),
            Err(input::ReadError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// One stored file of a backup, opened for reading.
    pub fn open(&self, backup: &str, stored: &str) -> Result<File, ArchiveError> {
        let path = self.shard_dir.join(backup).join(stored);
        File::open(&path).map_err(|e| ArchiveError::Open {
            backup: backup.to_owned(),
            stored: stored.to_owned(),
            problem: e.to_string(),
        })
    }

    /// The shard's folder, for messages.
    pub fn place(&self) -> String {
        self.shard_dir.display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_directories_named_as_vitess_names_backups_are_listed_in_time_order() {
        let root = tempfile::tempdir().unwrap();
        let shard = root.path().join("commerce").join("-");
        for d in [
            "2026-12-07.101500.zone1-0000000102",
            "2026-12-07.093512.zone1-0000000102",
            "2026-12-07.093512.zone1-000000010",
            "not-a-backup",
        ] {
            std::fs::create_dir_all(shard.join(d)).unwrap();
        }
        std::fs::write(shard.join("2026-12-07.120000.zone1-0000000102"), "a file").unwrap();
        let a = FileArchive::new(root.path(), "commerce", "-").unwrap();
        assert_eq!(
            a.backups().unwrap(),
            [
                "2026-12-07.093512.zone1-0000000102",
                "2026-12-07.101500.zone1-0000000102"
            ]
        );
        assert!(
            FileArchive::new(root.path(), "commerce", "80-")
                .unwrap()
                .backups()
                .unwrap()
                .is_empty()
        );
        // No MANIFEST yet: not a backup to use; one that is not a file is refused.
        assert_eq!(
            a.manifest("2026-12-07.093512.zone1-0000000102").unwrap(),
            None
        );
        std::fs::create_dir(shard.join("2026-12-07.101500.zone1-0000000102/MANIFEST")).unwrap();
        let e = a
            .manifest("2026-12-07.101500.zone1-0000000102")
            .unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let e = a
            .open("2026-12-07.093512.zone1-0000000102", "0")
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("backup 2026-12-07.093512.zone1-0000000102: cannot open its file 0"),
            "{e}"
        );
    }

    #[test]
    fn a_keyspace_or_shard_that_walks_out_of_the_storage_is_refused() {
        let root = Path::new("/vt/backups");
        for (keyspace, shard) in [("..", "-"), ("a/b", "-"), ("commerce", "../x"), ("", "-")] {
            let e = FileArchive::new(root, keyspace, shard)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("cannot name a folder"),
                "{keyspace} {shard}: {e}"
            );
        }
        assert!(FileArchive::new(root, "commerce_2", "40-80").is_ok());
        // One folder name at most 255 bytes long, as a filesystem allows.
        assert!(FileArchive::new(root, &"k".repeat(255), "-").is_ok());
        assert!(FileArchive::new(root, &"k".repeat(256), "-").is_err());
    }
}
