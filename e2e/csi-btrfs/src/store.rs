//! The driver's state on disk, under one root directory on btrfs:
//!
//! ```text
//! <root>/volumes/<id>            subvolume (writable)
//! <root>/snapshots/<id>          subvolume (read-only)
//! <root>/meta/volumes/<id>.json  its record (meta.rs)
//! <root>/meta/snapshots/<id>.json
//! ```
//!
//! Each operation reads what is there, decides with a pure function (`plan_*`), then
//! acts. The record is written last on create and removed first on delete, so whatever
//! a crash leaves, an object either exists whole or not at all; a subvolume without a
//! record is a leftover, removed by the next call that needs its name.
//!
//! The caller serializes calls (one at a time): two creates of one name must not race.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::btrfs::{self, BtrfsError};
use crate::csi::Timestamp;
use crate::ids::ObjectId;
use crate::meta::{self, MetaError, SnapshotRecord, VolumeRecord};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("driver root {root}: {source}")]
    Root {
        root: PathBuf,
        #[source]
        source: BtrfsError,
    },
    #[error("cannot create directory {path}: {source}")]
    Layout {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot list {path}: {source}")]
    List {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Btrfs(#[from] BtrfsError),
    #[error(transparent)]
    Meta(#[from] MetaError),
    #[error("volume {id} does not exist")]
    VolumeNotFound { id: ObjectId },
    #[error("snapshot {id} does not exist")]
    SnapshotNotFound { id: ObjectId },
    #[error("volume {id} already exists with {existing}; the request asks for {requested}")]
    VolumeConflict {
        id: ObjectId,
        existing: String,
        requested: String,
    },
    #[error("snapshot {id} already exists of volume {existing}, not of {requested}")]
    SnapshotConflict {
        id: ObjectId,
        existing: ObjectId,
        requested: ObjectId,
    },
    #[error("capacity_range: required_bytes {required} is more than limit_bytes {limit}")]
    CapacityRange { required: i64, limit: i64 },
    #[error(
        "capacity_range.limit_bytes {limit} is less than {minimum}, the size of snapshot {snapshot}"
    )]
    CapacityBelowSource {
        limit: i64,
        minimum: i64,
        snapshot: ObjectId,
    },
}

impl StoreError {
    /// The file system is full: the CO may retry once space is freed.
    pub fn is_no_space(&self) -> bool {
        const ENOSPC: i32 = 28;
        match self {
            StoreError::Btrfs(BtrfsError::Failed { stderr, .. }) => {
                stderr.contains("No space left on device")
            }
            StoreError::Meta(MetaError::Write { source, .. }) => {
                source.raw_os_error() == Some(ENOSPC)
            }
            _ => false,
        }
    }
}

/// A capacity range as CSI gives it, already checked: both non-negative, `limit` 0
/// (none) or at least `required`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Capacity {
    pub required: i64,
    pub limit: i64,
}

impl Capacity {
    fn admits(self, bytes: i64) -> bool {
        bytes >= self.required && (self.limit == 0 || bytes <= self.limit)
    }
}

/// A CreateVolume, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewVolume {
    pub id: ObjectId,
    pub capacity: Capacity,
    pub source_snapshot: Option<ObjectId>,
    pub parameters: BTreeMap<String, String>,
}

/// A CreateSnapshot, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSnapshot {
    pub id: ObjectId,
    pub source_volume: ObjectId,
}

/// What a create does, given what is on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan<R> {
    /// A retry: answer with what exists.
    Existing(R),
    /// Make the subvolume (after removing a leftover at its path) and write `record`.
    Create { record: R, remove_leftover: bool },
}

/// What a delete found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deleted {
    Removed,
    /// Nothing was there: success all the same (CSI: NotFound is OK).
    Absent,
}

/// Decides a CreateVolume: an existing volume of that name answers a compatible
/// request and refuses any other; a new one takes the larger of the requested and the
/// source snapshot's size.
pub fn plan_volume(
    req: &NewVolume,
    existing: Option<&VolumeRecord>,
    source: Option<&SnapshotRecord>,
    leftover: bool,
) -> Result<Plan<VolumeRecord>, StoreError> {
    if let Some(have) = existing {
        let conflict = |existing: String, requested: String| StoreError::VolumeConflict {
            id: req.id.clone(),
            existing,
            requested,
        };
        if have.source_snapshot != req.source_snapshot {
            let show = |s: &Option<ObjectId>| match s {
                Some(s) => format!("source snapshot {s}"),
                None => "no source".to_owned(),
            };
            return Err(conflict(
                show(&have.source_snapshot),
                show(&req.source_snapshot),
            ));
        }
        if !req.capacity.admits(have.capacity_bytes) {
            return Err(conflict(
                format!("capacity {}", have.capacity_bytes),
                format!(
                    "required_bytes {} limit_bytes {}",
                    req.capacity.required, req.capacity.limit
                ),
            ));
        }
        if have.parameters != req.parameters {
            return Err(conflict(
                format!("parameters {:?}", have.parameters),
                format!("parameters {:?}", req.parameters),
            ));
        }
        return Ok(Plan::Existing(have.clone()));
    }
    let floor = match (&req.source_snapshot, source) {
        (None, _) => 0,
        (Some(_), Some(s)) => s.size_bytes,
        (Some(id), None) => return Err(StoreError::SnapshotNotFound { id: id.clone() }),
    };
    if let Some(snapshot) = &req.source_snapshot
        && req.capacity.limit != 0
        && floor > req.capacity.limit
    {
        return Err(StoreError::CapacityBelowSource {
            limit: req.capacity.limit,
            minimum: floor,
            snapshot: snapshot.clone(),
        });
    }
    let mut bytes = req.capacity.required.max(floor);
    if bytes == 0 {
        // Neither asked for nor implied: the most allowed, or unknown (0) if no limit.
        bytes = req.capacity.limit;
    }
    if !req.capacity.admits(bytes) {
        return Err(StoreError::CapacityRange {
            required: req.capacity.required,
            limit: req.capacity.limit,
        });
    }
    Ok(Plan::Create {
        record: VolumeRecord {
            version: meta::VERSION,
            id: req.id.clone(),
            capacity_bytes: bytes,
            source_snapshot: req.source_snapshot.clone(),
            parameters: req.parameters.clone(),
        },
        remove_leftover: leftover,
    })
}

/// Decides a CreateSnapshot: an existing snapshot of that name answers a retry of the
/// same source (even if the volume has since gone) and refuses another source.
/// `creation_time` of a new record is filled in once the cut is made.
pub fn plan_snapshot(
    req: &NewSnapshot,
    existing: Option<&SnapshotRecord>,
    source: Option<&VolumeRecord>,
    leftover: bool,
) -> Result<Plan<SnapshotRecord>, StoreError> {
    if let Some(have) = existing {
        if have.source_volume != req.source_volume {
            return Err(StoreError::SnapshotConflict {
                id: req.id.clone(),
                existing: have.source_volume.clone(),
                requested: req.source_volume.clone(),
            });
        }
        return Ok(Plan::Existing(have.clone()));
    }
    let Some(volume) = source else {
        return Err(StoreError::VolumeNotFound {
            id: req.source_volume.clone(),
        });
    };
    Ok(Plan::Create {
        record: SnapshotRecord {
            version: meta::VERSION,
            id: req.id.clone(),
            source_volume: req.source_volume.clone(),
            size_bytes: volume.capacity_bytes,
            creation_time: Timestamp::default(),
        },
        remove_leftover: leftover,
    })
}

/// The driver's root and the operations on it.
#[derive(Debug)]
pub struct Store {
    root: PathBuf,
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Volume,
    Snapshot,
}

impl Kind {
    const fn dir(self) -> &'static str {
        match self {
            Kind::Volume => "volumes",
            Kind::Snapshot => "snapshots",
        }
    }
}

impl Store {
    /// Opens (and on first use lays out) the state under `root`, which must be on btrfs.
    pub fn open(root: &Path) -> Result<Self, StoreError> {
        let s = Self {
            root: root.to_owned(),
        };
        let mkdir = |path: PathBuf| {
            std::fs::create_dir_all(&path).map_err(|source| StoreError::Layout { path, source })
        };
        let not_btrfs = |source| StoreError::Root {
            root: root.to_owned(),
            source,
        };
        // Checked before anything is created, on the nearest directory that exists, so a
        // wrong root is refused untouched; and again once made (it may be a mount point).
        if let Some(existing) = root.ancestors().find(|p| p.is_dir()) {
            btrfs::ensure_btrfs(existing).map_err(not_btrfs)?;
        }
        mkdir(root.to_owned())?;
        btrfs::ensure_btrfs(root).map_err(not_btrfs)?;
        for kind in [Kind::Volume, Kind::Snapshot] {
            mkdir(s.objects_dir(kind))?;
            mkdir(s.records_dir(kind))?;
            s.remove_temp_records(kind)?;
        }
        Ok(s)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where volume `id` lives (a subvolume, once it exists).
    pub fn volume_path(&self, id: &ObjectId) -> PathBuf {
        self.object_path(Kind::Volume, id)
    }

    /// Where snapshot `id` lives (a read-only subvolume, once it exists).
    pub fn snapshot_path(&self, id: &ObjectId) -> PathBuf {
        self.object_path(Kind::Snapshot, id)
    }

    /// Whether the layout is still there (the Probe).
    pub fn healthy(&self) -> bool {
        [Kind::Volume, Kind::Snapshot]
            .into_iter()
            .all(|k| self.objects_dir(k).is_dir() && self.records_dir(k).is_dir())
    }

    fn objects_dir(&self, kind: Kind) -> PathBuf {
        self.root.join(kind.dir())
    }

    fn records_dir(&self, kind: Kind) -> PathBuf {
        self.root.join("meta").join(kind.dir())
    }

    fn object_path(&self, kind: Kind, id: &ObjectId) -> PathBuf {
        self.objects_dir(kind).join(id.as_str())
    }

    fn record_path(&self, kind: Kind, id: &ObjectId) -> PathBuf {
        self.records_dir(kind).join(format!("{id}.json"))
    }

    /// Whether anything (even a dangling symlink) is at `path`.
    fn occupied(path: &Path) -> bool {
        std::fs::symlink_metadata(path).is_ok()
    }

    /// A crash between write and rename leaves `.<id>.json.tmp`; it was never a record.
    fn remove_temp_records(&self, kind: Kind) -> Result<(), StoreError> {
        let dir = self.records_dir(kind);
        for name in self.list(&dir)? {
            if name.starts_with('.') && name.ends_with(".tmp") {
                let path = dir.join(&name);
                std::fs::remove_file(&path).map_err(|source| MetaError::Remove { path, source })?;
            }
        }
        Ok(())
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>, StoreError> {
        let io = |source| StoreError::List {
            path: dir.to_owned(),
            source,
        };
        let mut names = Vec::new();
        for e in std::fs::read_dir(dir).map_err(io)? {
            names.push(e.map_err(io)?.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }

    pub fn volume(&self, id: &ObjectId) -> Result<Option<VolumeRecord>, StoreError> {
        Ok(meta::load(&self.record_path(Kind::Volume, id), id)?)
    }

    pub fn snapshot(&self, id: &ObjectId) -> Result<Option<SnapshotRecord>, StoreError> {
        Ok(meta::load(&self.record_path(Kind::Snapshot, id), id)?)
    }

    /// Every snapshot, in id order.
    pub fn snapshots(&self) -> Result<Vec<SnapshotRecord>, StoreError> {
        let mut ids: Vec<ObjectId> = self
            .list(&self.records_dir(Kind::Snapshot))?
            .iter()
            .filter_map(|n| n.strip_suffix(".json"))
            .filter_map(|n| ObjectId::parse(n).ok())
            .collect();
        ids.sort();
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            // Deleted between the listing and the read: not listed.
            if let Some(r) = self.snapshot(&id)? {
                out.push(r);
            }
        }
        Ok(out)
    }

    /// CreateVolume: empty, or a writable clone of a snapshot.
    pub fn create_volume(&self, req: &NewVolume) -> Result<VolumeRecord, StoreError> {
        // observe
        let existing = self.volume(&req.id)?;
        let source = match (&existing, &req.source_snapshot) {
            (None, Some(s)) => self.snapshot(s)?,
            _ => None,
        };
        let path = self.volume_path(&req.id);
        let leftover = existing.is_none() && Self::occupied(&path);
        // decide
        let plan = plan_volume(req, existing.as_ref(), source.as_ref(), leftover)?;
        // act
        let (record, remove_leftover) = match plan {
            Plan::Existing(r) => return Ok(r),
            Plan::Create {
                record,
                remove_leftover,
            } => (record, remove_leftover),
        };
        if remove_leftover {
            tracing::warn!(path = %path.display(), "removing a volume subvolume without a record");
            btrfs::delete(&path)?;
        }
        match &record.source_snapshot {
            None => btrfs::create(&path)?,
            Some(s) => btrfs::snapshot(&self.snapshot_path(s), &path, false)?,
        }
        self.commit(Kind::Volume, &path, &record.id, &record)?;
        Ok(record)
    }

    /// CreateSnapshot: a read-only snapshot of the volume, cut atomically.
    pub fn create_snapshot(&self, req: &NewSnapshot) -> Result<SnapshotRecord, StoreError> {
        // observe
        let existing = self.snapshot(&req.id)?;
        let source = match existing {
            None => self.volume(&req.source_volume)?,
            Some(_) => None,
        };
        let path = self.snapshot_path(&req.id);
        let leftover = existing.is_none() && Self::occupied(&path);
        // decide
        let plan = plan_snapshot(req, existing.as_ref(), source.as_ref(), leftover)?;
        // act
        let (mut record, remove_leftover) = match plan {
            Plan::Existing(r) => return Ok(r),
            Plan::Create {
                record,
                remove_leftover,
            } => (record, remove_leftover),
        };
        if remove_leftover {
            tracing::warn!(path = %path.display(), "removing a snapshot subvolume without a record");
            btrfs::delete(&path)?;
        }
        let before = SystemTime::now();
        btrfs::snapshot(&self.volume_path(&req.source_volume), &path, true)?;
        let after = SystemTime::now();
        let otime = btrfs::creation_time(&path).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot read the snapshot's creation time; using the clock");
            None
        });
        record.creation_time = timestamp(cut_time(otime, before, after));
        self.commit(Kind::Snapshot, &path, &record.id, &record)?;
        Ok(record)
    }

    /// Writes the record of a subvolume just made; without it the subvolume is removed
    /// again, so a failed create leaves nothing behind.
    fn commit<R: meta::Record>(
        &self,
        kind: Kind,
        path: &Path,
        id: &ObjectId,
        record: &R,
    ) -> Result<(), StoreError> {
        if let Err(e) = meta::store(&self.record_path(kind, id), record) {
            if let Err(undo) = btrfs::delete(path) {
                tracing::warn!(error = %undo, "cannot remove the subvolume of a failed create");
            }
            return Err(e.into());
        }
        Ok(())
    }

    pub fn delete_volume(&self, id: &ObjectId) -> Result<Deleted, StoreError> {
        self.delete(Kind::Volume, id)
    }

    pub fn delete_snapshot(&self, id: &ObjectId) -> Result<Deleted, StoreError> {
        self.delete(Kind::Snapshot, id)
    }

    /// Removes the record (the object is gone from then on), then the subvolume; a
    /// retry after a failure between the two finishes the job. Volumes and snapshots
    /// are independent subvolumes, so neither delete touches the other.
    fn delete(&self, kind: Kind, id: &ObjectId) -> Result<Deleted, StoreError> {
        let record = self.record_path(kind, id);
        let path = self.object_path(kind, id);
        let had_record = Self::occupied(&record);
        meta::remove(&record)?;
        let had_subvolume = Self::occupied(&path);
        if had_subvolume {
            btrfs::delete(&path)?;
        }
        Ok(if had_record || had_subvolume {
            Deleted::Removed
        } else {
            Deleted::Absent
        })
    }
}

/// When a snapshot was cut: btrfs records it in whole seconds (`otime`), the clock read
/// around the command narrows it to `[before, after]`. The earliest instant both allow
/// keeps the kernel's second and orders two cuts within one second.
pub fn cut_time(otime: Option<i64>, before: SystemTime, after: SystemTime) -> SystemTime {
    let Some(secs) = otime.and_then(|s| u64::try_from(s).ok()) else {
        return before;
    };
    let second = UNIX_EPOCH + Duration::from_secs(secs);
    if second <= after && before < second + Duration::from_secs(1) {
        before.max(second)
    } else {
        // The clock disagrees with the kernel's record (it was stepped): trust the record.
        second
    }
}

/// A wall-clock time as a protobuf Timestamp (times before 1970 do not occur here).
pub fn timestamp(t: SystemTime) -> Timestamp {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    Timestamp {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> ObjectId {
        ObjectId::parse(s).unwrap()
    }

    fn ask(name: &str) -> NewVolume {
        NewVolume {
            id: id(name),
            capacity: Capacity::default(),
            source_snapshot: None,
            parameters: BTreeMap::new(),
        }
    }

    fn sized(mut v: NewVolume, required: i64, limit: i64) -> NewVolume {
        v.capacity = Capacity { required, limit };
        v
    }

    fn from(mut v: NewVolume, snap: &str) -> NewVolume {
        v.source_snapshot = Some(id(snap));
        v
    }

    fn snapshot_of(snap: &str, volume: &str, size: i64) -> SnapshotRecord {
        SnapshotRecord {
            version: meta::VERSION,
            id: id(snap),
            source_volume: id(volume),
            size_bytes: size,
            creation_time: Timestamp::default(),
        }
    }

    fn created(p: Plan<VolumeRecord>) -> VolumeRecord {
        match p {
            Plan::Create { record, .. } => record,
            Plan::Existing(r) => panic!("expected a create, got existing {r:?}"),
        }
    }

    #[test]
    fn a_new_volume_takes_the_requested_size_or_the_snapshots() {
        let v = created(plan_volume(&sized(ask("v"), 10, 0), None, None, false).unwrap());
        assert_eq!(v.capacity_bytes, 10);
        let s = snapshot_of("s", "v", 100);
        let clone = from(sized(ask("c"), 10, 0), "s");
        let c = created(plan_volume(&clone, None, Some(&s), false).unwrap());
        assert_eq!(c.capacity_bytes, 100, "never smaller than its snapshot");
        assert_eq!(c.source_snapshot, Some(id("s")));
        let only_limit = created(plan_volume(&sized(ask("l"), 0, 64), None, None, false).unwrap());
        assert_eq!(only_limit.capacity_bytes, 64);
        assert_eq!(
            created(plan_volume(&ask("u"), None, None, false).unwrap()).capacity_bytes,
            0,
            "unknown"
        );
    }

    #[test]
    fn a_clone_that_cannot_hold_its_snapshot_or_has_none_is_refused() {
        let s = snapshot_of("s", "v", 100);
        let small = from(sized(ask("c"), 10, 50), "s");
        assert!(matches!(
            plan_volume(&small, None, Some(&s), false),
            Err(StoreError::CapacityBelowSource {
                limit: 50,
                minimum: 100,
                ..
            })
        ));
        assert!(matches!(
            plan_volume(&from(ask("c"), "gone"), None, None, false),
            Err(StoreError::SnapshotNotFound { id: g }) if g.as_str() == "gone"
        ));
    }

    #[test]
    fn a_retry_gets_the_same_volume_and_a_different_request_a_conflict() {
        let first = sized(ask("v"), 10, 0);
        let have = created(plan_volume(&first, None, None, false).unwrap());
        assert_eq!(
            plan_volume(&first, Some(&have), None, false).unwrap(),
            Plan::Existing(have.clone())
        );
        assert_eq!(
            plan_volume(&sized(ask("v"), 5, 20), Some(&have), None, false).unwrap(),
            Plan::Existing(have.clone()),
            "a range that admits the existing size"
        );
        let conflicts = [
            sized(ask("v"), 11, 0),
            sized(ask("v"), 0, 9),
            from(sized(ask("v"), 10, 0), "s"),
            NewVolume {
                parameters: [("k".into(), "v".into())].into(),
                ..first.clone()
            },
        ];
        for c in conflicts {
            assert!(
                matches!(
                    plan_volume(&c, Some(&have), None, false),
                    Err(StoreError::VolumeConflict { .. })
                ),
                "{c:?}"
            );
        }
    }

    #[test]
    fn a_leftover_subvolume_is_removed_before_a_create() {
        let p = plan_volume(&ask("v"), None, None, true).unwrap();
        assert!(matches!(
            p,
            Plan::Create {
                remove_leftover: true,
                ..
            }
        ));
    }

    #[test]
    fn snapshots_answer_retries_of_their_source_only() {
        let vol = created(plan_volume(&sized(ask("v"), 42, 0), None, None, false).unwrap());
        let req = NewSnapshot {
            id: id("s"),
            source_volume: id("v"),
        };
        let Plan::Create { record, .. } = plan_snapshot(&req, None, Some(&vol), false).unwrap()
        else {
            panic!("expected a create");
        };
        assert_eq!(
            record.size_bytes, 42,
            "restores into a volume as large as its source"
        );
        assert_eq!(
            plan_snapshot(&req, Some(&record), None, false).unwrap(),
            Plan::Existing(record.clone()),
            "a retry after the source volume was deleted"
        );
        let other = NewSnapshot {
            id: id("s"),
            source_volume: id("w"),
        };
        assert!(matches!(
            plan_snapshot(&other, Some(&record), None, false),
            Err(StoreError::SnapshotConflict { .. })
        ));
        assert!(matches!(
            plan_snapshot(&other, None, None, false),
            Err(StoreError::VolumeNotFound { id: w }) if w.as_str() == "w"
        ));
    }

    #[test]
    fn the_cut_is_the_kernels_second_narrowed_by_the_clock() {
        let at = |s: u64, ms: u64| UNIX_EPOCH + Duration::from_millis(s * 1000 + ms);
        // Clock window 99.900–100.300, kernel second 100: the cut is at 100.000.
        assert_eq!(cut_time(Some(100), at(99, 900), at(100, 300)), at(100, 0));
        // Window inside the second: its start.
        assert_eq!(
            cut_time(Some(100), at(100, 200), at(100, 300)),
            at(100, 200)
        );
        // No record: the clock; a stepped clock: the record.
        assert_eq!(cut_time(None, at(5, 1), at(5, 2)), at(5, 1));
        assert_eq!(cut_time(Some(100), at(200, 0), at(200, 1)), at(100, 0));
    }

    #[test]
    fn timestamps_keep_nanoseconds() {
        let t = UNIX_EPOCH + Duration::new(1_700_000_000, 5);
        assert_eq!(
            timestamp(t),
            Timestamp {
                seconds: 1_700_000_000,
                nanos: 5
            }
        );
    }
}
