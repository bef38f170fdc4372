//! The Node service's work: publish a volume by bind-mounting its subvolume at the CO's
//! target path, and unpublish it.
//!
//! observe (the target and the mount table) → decide (pure: [`plan_publish`],
//! [`plan_unpublish`]) → act (create the directory, `mount(2)`, `umount(2)`). The mount
//! table is the only record of what is published where, so a retry, or a restarted
//! driver, decides from what really is.
//!
//! A repeated publish follows the spec's second NodePublishVolume table (the plugin
//! has SINGLE_NODE_MULTI_WRITER): the same volume at the same target with the same
//! read-only state and flags is OK, with others ALREADY_EXISTS; at a second target it is
//! OK for a multi-writer or multi-node mode and FAILED_PRECONDITION for the others. The
//! table speaks of the arguments of the first publish; they are judged from the mount
//! (read-only, flags), since the access mode it was published with is not recorded.

use std::io::ErrorKind;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags};

use crate::capability::{MountFlag, MountFlags, Requested, Unsupported};
use crate::ids::ObjectId;
use crate::mounts::{Mount, MountTable, MountsError, Place};
use crate::store::{Store, StoreError};

/// Linux's `PATH_MAX`: the longest target path accepted (the spec asks for at least 128).
pub const MAX_PATH_LEN: usize = 4096;
/// Linux's `NAME_MAX`: the longest component.
pub const MAX_NAME_LEN: usize = 255;

/// Why a string is not a target path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("is required")]
    Empty,
    #[error("is {len} bytes, more than {MAX_PATH_LEN}")]
    TooLong { len: usize },
    #[error("must be an absolute path")]
    NotAbsolute,
    #[error("contains NUL")]
    Nul,
    #[error("must be a clean path (no '.', '..', '//' or trailing '/')")]
    NotClean,
    #[error("has a component of {len} bytes, more than {MAX_NAME_LEN}")]
    NameTooLong { len: usize },
    #[error("must not be /")]
    Root,
}

/// A checked target path: absolute, clean (no `.` or `..`, so nothing climbs out of
/// the directory the CO meant), bounded. Symlinks on the way are resolved when observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetPath(PathBuf);

impl TargetPath {
    pub fn parse(s: &str) -> Result<Self, PathError> {
        if s.is_empty() {
            return Err(PathError::Empty);
        }
        if s.len() > MAX_PATH_LEN {
            return Err(PathError::TooLong { len: s.len() });
        }
        if s.contains('\0') {
            return Err(PathError::Nul);
        }
        let Some(rest) = s.strip_prefix('/') else {
            return Err(PathError::NotAbsolute);
        };
        if rest.is_empty() {
            return Err(PathError::Root);
        }
        for name in rest.split('/') {
            if matches!(name, "" | "." | "..") {
                return Err(PathError::NotClean);
            }
            if name.len() > MAX_NAME_LEN {
                return Err(PathError::NameTooLong { len: name.len() });
            }
        }
        Ok(Self(PathBuf::from(s)))
    }

    pub fn as_path(&self) -> &Path {
        &self.0
    }
}

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Mounts(#[from] MountsError),
    #[error("{field}.{why}")]
    Unsupported {
        field: &'static str,
        why: Unsupported,
    },
    #[error("target_path {target}: its parent directory does not exist (the CO creates it)")]
    ParentMissing { target: PathBuf },
    #[error("target_path {target} is {what}, not a directory")]
    NotADirectory { target: PathBuf, what: &'static str },
    #[error(
        "target_path {target} is a directory with content; a volume is mounted only on an empty one"
    )]
    NotEmpty { target: PathBuf },
    #[error("target_path {target} is {relation} the driver's root {root}")]
    Overlaps {
        target: PathBuf,
        relation: &'static str,
        root: PathBuf,
    },
    #[error("target_path {target} has another mount on it ({what})")]
    TargetTaken { target: PathBuf, what: String },
    #[error(
        "volume {volume} is already published at {target} with flags [{have}]; the request asks for [{want}]"
    )]
    Incompatible {
        volume: ObjectId,
        target: PathBuf,
        have: String,
        want: String,
    },
    #[error(
        "volume {volume} is already published at {elsewhere}; its access mode allows one target path on this node"
    )]
    PublishedElsewhere {
        volume: ObjectId,
        elsewhere: PathBuf,
    },
    #[error("volume {volume} is in use: mounted at {at}")]
    InUse { volume: ObjectId, at: PathBuf },
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{op} {target}: {source}")]
    Mount {
        op: &'static str,
        target: PathBuf,
        #[source]
        source: nix::Error,
    },
    #[error("{target} still shows volume {volume} after {times} unmounts")]
    StillMounted {
        volume: ObjectId,
        target: PathBuf,
        times: usize,
    },
}

fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> NodeError {
    let path = path.to_owned();
    move |source| NodeError::Io { op, path, source }
}

/// A NodePublishVolume, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Publish {
    pub volume: ObjectId,
    pub target: TargetPath,
    pub capability: Requested,
    pub readonly: bool,
}

/// A NodeUnpublishVolume, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unpublish {
    pub volume: ObjectId,
    pub target: TargetPath,
}

/// What is at the target path itself (not following a final symlink).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetKind {
    Absent,
    EmptyDir,
    FullDir,
    /// A file, symlink, socket, …: never mounted on, never removed.
    Other(&'static str),
}

/// What the mount table shows at the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AtTarget {
    Nothing,
    /// This volume, with these flags.
    Volume(MountFlags),
    /// Anything else (another volume, another file system).
    Other(String),
}

/// The target and the volume's mounts, as found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// The target with its parent's symlinks resolved, as the mount table names it.
    pub target: PathBuf,
    pub kind: TargetKind,
    pub at_target: AtTarget,
    /// Other targets this volume is bound at.
    pub elsewhere: Vec<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublishPlan {
    /// A retry of a publish that is done.
    Done,
    Mount {
        create_dir: bool,
        flags: MountFlags,
    },
}

/// Decides a NodePublishVolume.
pub fn plan_publish(req: &Publish, seen: &Observed) -> Result<PublishPlan, NodeError> {
    let mut flags = req
        .capability
        .mount_flags()
        .map_err(|why| NodeError::Unsupported {
            field: "volume_capability",
            why,
        })?;
    if req.readonly {
        flags.insert(MountFlag::ReadOnly);
    }
    match &seen.at_target {
        AtTarget::Volume(have) if *have == flags => return Ok(PublishPlan::Done),
        AtTarget::Volume(have) => {
            return Err(NodeError::Incompatible {
                volume: req.volume.clone(),
                target: seen.target.clone(),
                have: names(have),
                want: names(&flags),
            });
        }
        AtTarget::Other(what) => {
            return Err(NodeError::TargetTaken {
                target: seen.target.clone(),
                what: what.clone(),
            });
        }
        AtTarget::Nothing => {}
    }
    if req.capability.one_target_only()
        && let Some(elsewhere) = seen.elsewhere.first()
    {
        return Err(NodeError::PublishedElsewhere {
            volume: req.volume.clone(),
            elsewhere: elsewhere.clone(),
        });
    }
    let create_dir = match seen.kind {
        TargetKind::Absent => true,
        TargetKind::EmptyDir => false,
        TargetKind::FullDir => {
            return Err(NodeError::NotEmpty {
                target: seen.target.clone(),
            });
        }
        TargetKind::Other(what) => {
            return Err(NodeError::NotADirectory {
                target: seen.target.clone(),
                what,
            });
        }
    };
    Ok(PublishPlan::Mount { create_dir, flags })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnpublishPlan {
    /// Unmount the volume's bind at the target (then look again).
    Unmount,
    /// Not mounted: remove the empty directory left (the spec asks the plugin to remove
    /// what it created; kubelet would remove it next).
    RemoveDir,
    /// Nothing of ours is there.
    Done,
}

/// Decides a NodeUnpublishVolume. A target holding anything but this volume is left
/// alone: unmounting it would undo someone else's work.
pub fn plan_unpublish(seen: &Observed) -> Result<UnpublishPlan, NodeError> {
    match &seen.at_target {
        AtTarget::Volume(_) => Ok(UnpublishPlan::Unmount),
        AtTarget::Other(what) => Err(NodeError::TargetTaken {
            target: seen.target.clone(),
            what: what.clone(),
        }),
        AtTarget::Nothing => Ok(match seen.kind {
            TargetKind::EmptyDir => UnpublishPlan::RemoveDir,
            TargetKind::Absent | TargetKind::FullDir | TargetKind::Other(_) => UnpublishPlan::Done,
        }),
    }
}

fn names(flags: &MountFlags) -> String {
    let v: Vec<&str> = flags.iter().map(|f| f.name()).collect();
    v.join(",")
}

/// The flags of a mount that this driver sets.
fn flags_of(m: &Mount) -> MountFlags {
    MountFlag::ALL
        .into_iter()
        .filter(|f| m.has_option(f.name()))
        .collect()
}

// ---- observe ----

/// The volume's directory, resolved, and where it lies in the file systems.
fn volume_place(store: &Store, id: &ObjectId, table: &MountTable) -> Result<Place, NodeError> {
    let dir = store.volume_path(id);
    let dir = std::fs::canonicalize(&dir).map_err(io("resolve", &dir))?;
    table.place_of(&dir).ok_or_else(|| NodeError::Io {
        op: "find the mount of",
        path: dir,
        source: std::io::Error::from(ErrorKind::NotFound),
    })
}

/// Looks at the target and the mount table. `None`: the target's parent does not exist.
fn observe(
    store: &Store,
    volume: &ObjectId,
    target: &TargetPath,
) -> Result<Option<Observed>, NodeError> {
    let path = target.as_path();
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(NodeError::Io {
            op: "split",
            path: path.to_owned(),
            source: std::io::Error::from(ErrorKind::InvalidInput),
        });
    };
    let parent = match std::fs::canonicalize(parent) {
        Ok(p) => p,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io("resolve", parent)(e)),
    };
    let resolved = parent.join(name);
    let root = std::fs::canonicalize(store.root()).map_err(io("resolve", store.root()))?;
    if resolved.starts_with(&root) || root.starts_with(&resolved) {
        let relation = if resolved.starts_with(&root) {
            "inside"
        } else {
            "above"
        };
        return Err(NodeError::Overlaps {
            target: resolved,
            relation,
            root,
        });
    }
    let kind = target_kind(&resolved)?;
    let table = MountTable::read()?;
    let place = volume_place(store, volume, &table)?;
    let at_target = match table.at(&resolved) {
        None => AtTarget::Nothing,
        Some(m) if m.dev == place.dev && m.root == place.path => AtTarget::Volume(flags_of(m)),
        Some(m) => AtTarget::Other(format!("{} {}", m.fs_type, m.root.display())),
    };
    let elsewhere = table
        .showing(&place)
        .filter(|m| m.mount_point != resolved)
        .map(|m| m.mount_point.clone())
        .collect();
    Ok(Some(Observed {
        target: resolved,
        kind,
        at_target,
        elsewhere,
    }))
}

fn target_kind(path: &Path) -> Result<TargetKind, NodeError> {
    let m = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(TargetKind::Absent),
        Err(e) => return Err(io("inspect", path)(e)),
    };
    let t = m.file_type();
    if t.is_dir() {
        let mut entries = std::fs::read_dir(path).map_err(io("list", path))?;
        return Ok(if entries.next().is_none() {
            TargetKind::EmptyDir
        } else {
            TargetKind::FullDir
        });
    }
    Ok(TargetKind::Other(if t.is_symlink() {
        "a symlink"
    } else if t.is_file() {
        "a file"
    } else {
        "a special file"
    }))
}

/// The volume must exist (NOT_FOUND otherwise) before anything is looked at.
fn existing_volume(store: &Store, id: &ObjectId) -> Result<(), NodeError> {
    match store.volume(id)? {
        Some(_) => Ok(()),
        None => Err(StoreError::VolumeNotFound { id: id.clone() }.into()),
    }
}

// ---- act ----

/// NodePublishVolume: observe, decide, act.
pub fn publish(store: &Store, req: &Publish) -> Result<PublishPlan, NodeError> {
    existing_volume(store, &req.volume)?;
    let Some(seen) = observe(store, &req.volume, &req.target)? else {
        return Err(NodeError::ParentMissing {
            target: req.target.as_path().to_owned(),
        });
    };
    let plan = plan_publish(req, &seen)?;
    if let PublishPlan::Mount { create_dir, flags } = &plan {
        bind(
            &store.volume_path(&req.volume),
            &seen.target,
            *create_dir,
            flags,
        )?;
    }
    Ok(plan)
}

/// Binds `source` at `target` with `flags`; on failure, leaves the target as it was.
fn bind(
    source: &Path,
    target: &Path,
    create_dir: bool,
    flags: &MountFlags,
) -> Result<(), NodeError> {
    if create_dir {
        // As kubelet makes its own volume directories.
        std::fs::DirBuilder::new()
            .mode(0o750)
            .create(target)
            .map_err(io("create directory", target))?;
    }
    let undo_dir = || {
        if create_dir && let Err(e) = std::fs::remove_dir(target) {
            tracing::warn!(target = %target.display(), error = %e, "cannot remove the directory of a failed publish");
        }
    };
    if let Err(source) = nix::mount::mount(
        Some(source),
        target,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    ) {
        undo_dir();
        return Err(NodeError::Mount {
            op: "bind mount on",
            target: target.to_owned(),
            source,
        });
    }
    // The bind copies the flags of the mount it comes from; a remount sets exactly
    // ours. An explicit atime flag, or the remount would keep the source's.
    let mut ms = MsFlags::MS_BIND | MsFlags::MS_REMOUNT;
    for f in flags {
        ms |= match f {
            MountFlag::ReadOnly => MsFlags::MS_RDONLY,
            MountFlag::NoSuid => MsFlags::MS_NOSUID,
            MountFlag::NoDev => MsFlags::MS_NODEV,
            MountFlag::NoExec => MsFlags::MS_NOEXEC,
            MountFlag::NoAtime => MsFlags::MS_NOATIME,
            MountFlag::NoDirAtime => MsFlags::MS_NODIRATIME,
        };
    }
    if !flags.contains(&MountFlag::NoAtime) {
        ms |= MsFlags::MS_RELATIME;
    }
    if let Err(source) = nix::mount::mount(None::<&str>, target, None::<&str>, ms, None::<&str>) {
        if let Err(e) = nix::mount::umount2(target, MntFlags::empty()) {
            tracing::warn!(target = %target.display(), error = %e, "cannot undo the bind of a failed publish");
        } else {
            undo_dir();
        }
        return Err(NodeError::Mount {
            op: "set the flags of",
            target: target.to_owned(),
            source,
        });
    }
    Ok(())
}

/// How many binds stacked at one target an unpublish takes down (only a failed undo
/// leaves more than one).
const MAX_UNMOUNTS: usize = 8;

/// What an unpublish did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unpublished {
    /// Unmounted (more than once only if binds were stacked), directory removed if empty.
    Unmounted { times: usize },
    /// Not mounted; the empty directory was removed.
    DirRemoved,
    /// Not mounted, nothing to remove: a retry.
    NothingThere,
}

/// NodeUnpublishVolume: observe, decide, act, until nothing of the volume is left.
pub fn unpublish(store: &Store, req: &Unpublish) -> Result<Unpublished, NodeError> {
    existing_volume(store, &req.volume)?;
    let mut times = 0;
    loop {
        let plan = match observe(store, &req.volume, &req.target)? {
            None => UnpublishPlan::Done,
            Some(seen) => {
                let plan = plan_unpublish(&seen)?;
                match plan {
                    UnpublishPlan::Unmount if times == MAX_UNMOUNTS => {
                        return Err(NodeError::StillMounted {
                            volume: req.volume.clone(),
                            target: seen.target,
                            times,
                        });
                    }
                    UnpublishPlan::Unmount => {
                        nix::mount::umount2(&seen.target, MntFlags::empty()).map_err(|source| {
                            NodeError::Mount {
                                op: "unmount",
                                target: seen.target.clone(),
                                source,
                            }
                        })?;
                        times += 1;
                        continue;
                    }
                    UnpublishPlan::RemoveDir => {
                        std::fs::remove_dir(&seen.target).map_err(io("remove", &seen.target))?;
                    }
                    UnpublishPlan::Done => {}
                }
                plan
            }
        };
        return Ok(match (times, plan) {
            (0, UnpublishPlan::RemoveDir) => Unpublished::DirRemoved,
            (0, _) => Unpublished::NothingThere,
            (times, _) => Unpublished::Unmounted { times },
        });
    }
}

/// DeleteVolume's precondition: nothing shows the volume or a directory in it.
pub fn ensure_unused(store: &Store, id: &ObjectId) -> Result<(), NodeError> {
    let dir = store.volume_path(id);
    if std::fs::symlink_metadata(&dir).is_err() {
        return Ok(());
    }
    let table = MountTable::read()?;
    let place = volume_place(store, id, &table)?;
    match table.within(&place).next() {
        Some(m) => Err(NodeError::InUse {
            volume: id.clone(),
            at: m.mount_point.clone(),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capability::parse;
    use crate::csi::{AccessMode, AccessModeKind, AccessType, MountVolume, VolumeCapability};

    #[test]
    fn target_paths_are_clean_absolute_and_bounded() {
        for ok in [
            "/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/pvc-1/mount",
            "/t",
            "/a b/c..d/.e",
        ] {
            assert_eq!(TargetPath::parse(ok).unwrap().as_path(), Path::new(ok));
        }
        let long_name = format!("/{}", "n".repeat(MAX_NAME_LEN + 1));
        let long_path = "/n".repeat(MAX_PATH_LEN / 2 + 1);
        for (bad, why) in [
            ("", PathError::Empty),
            ("t", PathError::NotAbsolute),
            ("../t", PathError::NotAbsolute),
            ("/", PathError::Root),
            ("/a/../etc", PathError::NotClean),
            ("/a/./b", PathError::NotClean),
            ("/a//b", PathError::NotClean),
            ("/a/", PathError::NotClean),
            ("/..", PathError::NotClean),
            ("/a\0b", PathError::Nul),
            (long_name.as_str(), PathError::NameTooLong { len: 256 }),
            (
                long_path.as_str(),
                PathError::TooLong {
                    len: long_path.len(),
                },
            ),
        ] {
            assert_eq!(TargetPath::parse(bad), Err(why), "{bad:?}");
        }
    }

    fn request(mode: AccessModeKind, readonly: bool) -> Publish {
        let cap = VolumeCapability {
            access_type: Some(AccessType::Mount(MountVolume::default())),
            access_mode: Some(AccessMode { mode: mode as i32 }),
        };
        Publish {
            volume: ObjectId::parse("pvc-a").unwrap(),
            target: TargetPath::parse("/t/target").unwrap(),
            capability: parse(&cap).unwrap(),
            readonly,
        }
    }

    fn seen(kind: TargetKind, at_target: AtTarget, elsewhere: &[&str]) -> Observed {
        Observed {
            target: "/t/target".into(),
            kind,
            at_target,
            elsewhere: elsewhere.iter().map(PathBuf::from).collect(),
        }
    }

    #[test]
    fn a_publish_mounts_on_an_absent_or_empty_directory_only() {
        let rw = request(AccessModeKind::SingleNodeWriter, false);
        let nothing = |kind| seen(kind, AtTarget::Nothing, &[]);
        assert_eq!(
            plan_publish(&rw, &nothing(TargetKind::Absent)).unwrap(),
            PublishPlan::Mount {
                create_dir: true,
                flags: MountFlags::new()
            }
        );
        assert_eq!(
            plan_publish(
                &request(AccessModeKind::SingleNodeWriter, true),
                &nothing(TargetKind::EmptyDir)
            )
            .unwrap(),
            PublishPlan::Mount {
                create_dir: false,
                flags: MountFlags::from([MountFlag::ReadOnly])
            }
        );
        assert!(matches!(
            plan_publish(&rw, &nothing(TargetKind::FullDir)),
            Err(NodeError::NotEmpty { .. })
        ));
        assert!(matches!(
            plan_publish(&rw, &nothing(TargetKind::Other("a symlink"))),
            Err(NodeError::NotADirectory {
                what: "a symlink",
                ..
            })
        ));
    }

    #[test]
    fn a_repeated_publish_follows_the_specs_table() {
        let rw = request(AccessModeKind::SingleNodeMultiWriter, false);
        let ro = request(AccessModeKind::SingleNodeMultiWriter, true);
        let mounted = |flags: &[MountFlag]| {
            seen(
                TargetKind::EmptyDir,
                AtTarget::Volume(flags.iter().copied().collect()),
                &[],
            )
        };
        assert_eq!(plan_publish(&rw, &mounted(&[])).unwrap(), PublishPlan::Done);
        assert_eq!(
            plan_publish(&ro, &mounted(&[MountFlag::ReadOnly])).unwrap(),
            PublishPlan::Done
        );
        for (req, have) in [(&rw, &[MountFlag::ReadOnly][..]), (&ro, &[][..])] {
            assert!(matches!(
                plan_publish(req, &mounted(have)),
                Err(NodeError::Incompatible { .. })
            ));
        }
        assert!(matches!(
            plan_publish(
                &rw,
                &seen(
                    TargetKind::EmptyDir,
                    AtTarget::Other("btrfs /x".into()),
                    &[]
                )
            ),
            Err(NodeError::TargetTaken { .. })
        ));

        // At a second target: only multi-writer and multi-node modes.
        let elsewhere = seen(TargetKind::Absent, AtTarget::Nothing, &["/t/other"]);
        for mode in [
            AccessModeKind::SingleNodeMultiWriter,
            AccessModeKind::MultiNodeMultiWriter,
            AccessModeKind::MultiNodeReaderOnly,
        ] {
            assert!(
                matches!(
                    plan_publish(&request(mode, false), &elsewhere),
                    Ok(PublishPlan::Mount { .. })
                ),
                "{mode:?}"
            );
        }
        for mode in [
            AccessModeKind::SingleNodeSingleWriter,
            AccessModeKind::SingleNodeWriter,
            AccessModeKind::SingleNodeReaderOnly,
        ] {
            assert!(
                matches!(
                    plan_publish(&request(mode, false), &elsewhere),
                    Err(NodeError::PublishedElsewhere { .. })
                ),
                "{mode:?}"
            );
        }
    }

    #[test]
    fn an_unsupported_capability_is_refused_before_anything_else() {
        let mut req = request(AccessModeKind::SingleNodeWriter, false);
        req.capability.access = crate::capability::Access::Block;
        assert!(matches!(
            plan_publish(&req, &seen(TargetKind::Absent, AtTarget::Nothing, &[])),
            Err(NodeError::Unsupported {
                why: Unsupported::Block,
                ..
            })
        ));
    }

    #[test]
    fn an_unpublish_unmounts_ours_removes_an_empty_dir_and_leaves_the_rest() {
        let plan = |kind, at| plan_unpublish(&seen(kind, at, &[]));
        assert_eq!(
            plan(TargetKind::FullDir, AtTarget::Volume(MountFlags::new())).unwrap(),
            UnpublishPlan::Unmount
        );
        assert_eq!(
            plan(TargetKind::EmptyDir, AtTarget::Nothing).unwrap(),
            UnpublishPlan::RemoveDir
        );
        for kind in [
            TargetKind::Absent,
            TargetKind::FullDir,
            TargetKind::Other("a file"),
        ] {
            assert_eq!(plan(kind, AtTarget::Nothing).unwrap(), UnpublishPlan::Done);
        }
        assert!(matches!(
            plan(TargetKind::FullDir, AtTarget::Other("tmpfs /".into())),
            Err(NodeError::TargetTaken { .. })
        ));
    }
}
