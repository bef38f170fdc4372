//! Volume capabilities: what a request asks for ([`parse`]: a malformed one is
//! INVALID_ARGUMENT everywhere), and whether a subvolume can give it
//! ([`Requested::mount_flags`]: CreateVolume refuses, ValidateVolumeCapabilities leaves
//! unconfirmed and NodePublishVolume answers FAILED_PRECONDITION, "Exceeds capabilities").
//!
//! A volume is a directory on this one host, published by a bind mount: any access mode
//! (every node the CO knows is this host), never a block device. The bind can carry the
//! per-mount flags below and nothing else: no other file system type, and no
//! `volume_mount_group` (the plugin has no VOLUME_MOUNT_GROUP: the spec asks that the
//! group be passed to the mount call, which a bind of btrfs does not take; kubelet then
//! applies fsGroup itself).

use std::collections::BTreeSet;

use crate::csi::{AccessModeKind, AccessType, MountVolume, VolumeCapability};

/// The spec's limit on `MountVolume.mount_flags`, all of them together.
pub const MAX_MOUNT_FLAGS_BYTES: usize = 4096;

/// The file system types a volume has: its own, or the CO not saying.
const FS_TYPES: [&str; 2] = ["", "btrfs"];

/// Why a capability is not a capability.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    #[error("access_type is required")]
    NoAccessType,
    #[error("access_mode is missing or unknown ({0:?})")]
    AccessMode(Option<i32>),
    #[error("mount.mount_flags is {len} bytes, more than {MAX_MOUNT_FLAGS_BYTES}")]
    FlagsTooLong { len: usize },
}

/// Why a volume cannot be used as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unsupported {
    #[error("block: block volumes are not supported (a volume is a directory)")]
    Block,
    #[error(
        "mount.fs_type {0:?}: a volume is a btrfs subvolume (leave fs_type empty or say btrfs)"
    )]
    FsType(String),
    #[error(
        "mount.mount_flags: {0:?} is not supported (only ro, rw, nosuid, nodev, noexec, noatime, nodiratime, relatime)"
    )]
    MountFlag(String),
    #[error(
        "mount.volume_mount_group: this driver has no VOLUME_MOUNT_GROUP capability (kubelet applies fsGroup itself)"
    )]
    MountGroup,
}

/// A flag of the bind mount, set per mount point (the file system's own options stay).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MountFlag {
    ReadOnly,
    NoSuid,
    NoDev,
    NoExec,
    NoAtime,
    NoDirAtime,
}

impl MountFlag {
    pub const ALL: [MountFlag; 6] = [
        MountFlag::ReadOnly,
        MountFlag::NoSuid,
        MountFlag::NoDev,
        MountFlag::NoExec,
        MountFlag::NoAtime,
        MountFlag::NoDirAtime,
    ];

    /// As mount(8) and `/proc/self/mountinfo` spell it.
    pub const fn name(self) -> &'static str {
        match self {
            MountFlag::ReadOnly => "ro",
            MountFlag::NoSuid => "nosuid",
            MountFlag::NoDev => "nodev",
            MountFlag::NoExec => "noexec",
            MountFlag::NoAtime => "noatime",
            MountFlag::NoDirAtime => "nodiratime",
        }
    }

    /// A `mount_flags` entry: `Ok(None)` for a default that needs no flag.
    fn parse(s: &str) -> Result<Option<Self>, Unsupported> {
        if matches!(s, "rw" | "relatime") {
            return Ok(None);
        }
        Self::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .map(Some)
            .ok_or_else(|| Unsupported::MountFlag(s.to_owned()))
    }
}

/// A set of bind-mount flags; compared as a set, so a retry in another order matches.
pub type MountFlags = BTreeSet<MountFlag>;

/// A well-formed capability.
#[derive(Debug, Clone, PartialEq)]
pub struct Requested {
    pub access: Access,
    pub mode: AccessModeKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Access {
    Block,
    Mount(MountVolume),
}

/// Checks the shape of a capability (not whether it is supported).
pub fn parse(c: &VolumeCapability) -> Result<Requested, Malformed> {
    let access = match &c.access_type {
        None => return Err(Malformed::NoAccessType),
        Some(AccessType::Block(_)) => Access::Block,
        Some(AccessType::Mount(m)) => {
            let len: usize = m.mount_flags.iter().map(String::len).sum();
            if len > MAX_MOUNT_FLAGS_BYTES {
                return Err(Malformed::FlagsTooLong { len });
            }
            Access::Mount(m.clone())
        }
    };
    let raw = c.access_mode.as_ref().map(|m| m.mode);
    let mode = match raw.map(AccessModeKind::try_from) {
        Some(Ok(m)) if m != AccessModeKind::Unknown => m,
        _ => return Err(Malformed::AccessMode(raw)),
    };
    Ok(Requested { access, mode })
}

impl Requested {
    /// The bind-mount flags this capability asks for, or why a volume cannot serve it.
    pub fn mount_flags(&self) -> Result<MountFlags, Unsupported> {
        let m = match &self.access {
            Access::Block => return Err(Unsupported::Block),
            Access::Mount(m) => m,
        };
        if !FS_TYPES.contains(&m.fs_type.as_str()) {
            return Err(Unsupported::FsType(m.fs_type.clone()));
        }
        if !m.volume_mount_group.is_empty() {
            return Err(Unsupported::MountGroup);
        }
        let mut flags = MountFlags::new();
        for f in &m.mount_flags {
            flags.extend(MountFlag::parse(f)?);
        }
        if reader_only(self.mode) {
            flags.insert(MountFlag::ReadOnly);
        }
        Ok(flags)
    }

    /// Whether the volume may be published at only one target path of this node: the
    /// "Non MULTI_NODE_..." rows of the spec's second NodePublishVolume table (the one
    /// for plugins with SINGLE_NODE_MULTI_WRITER).
    pub const fn one_target_only(&self) -> bool {
        matches!(
            self.mode,
            AccessModeKind::SingleNodeWriter
                | AccessModeKind::SingleNodeReaderOnly
                | AccessModeKind::SingleNodeSingleWriter
        )
    }
}

/// Modes that only read: published read-only whatever `readonly` says.
const fn reader_only(mode: AccessModeKind) -> bool {
    matches!(
        mode,
        AccessModeKind::SingleNodeReaderOnly | AccessModeKind::MultiNodeReaderOnly
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csi::{AccessMode, BlockVolume};

    fn cap(mode: AccessModeKind, mount: MountVolume) -> VolumeCapability {
        VolumeCapability {
            access_type: Some(AccessType::Mount(mount)),
            access_mode: Some(AccessMode { mode: mode as i32 }),
        }
    }

    fn flags_of(mode: AccessModeKind, flags: &[&str]) -> Result<MountFlags, Unsupported> {
        let m = MountVolume {
            mount_flags: flags.iter().map(|f| (*f).to_owned()).collect(),
            ..Default::default()
        };
        parse(&cap(mode, m)).unwrap().mount_flags()
    }

    #[test]
    fn every_access_mode_of_a_mount_is_served() {
        for mode in 1..=7 {
            let mode = AccessModeKind::try_from(mode).unwrap();
            let want = if matches!(
                mode,
                AccessModeKind::SingleNodeReaderOnly | AccessModeKind::MultiNodeReaderOnly
            ) {
                MountFlags::from([MountFlag::ReadOnly])
            } else {
                MountFlags::new()
            };
            assert_eq!(flags_of(mode, &[]).unwrap(), want, "{mode:?}");
        }
    }

    #[test]
    fn mount_flags_become_bind_flags_and_others_are_unsupported() {
        let f = flags_of(
            AccessModeKind::SingleNodeWriter,
            &["noexec", "rw", "nosuid", "relatime", "noexec", "ro"],
        )
        .unwrap();
        assert_eq!(
            f,
            MountFlags::from([MountFlag::NoExec, MountFlag::NoSuid, MountFlag::ReadOnly])
        );
        for bad in ["discard", "compress=zstd", "bind", "", "gid=5"] {
            assert_eq!(
                flags_of(AccessModeKind::SingleNodeWriter, &[bad]),
                Err(Unsupported::MountFlag(bad.to_owned())),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn block_other_file_systems_and_a_mount_group_are_unsupported() {
        let block = VolumeCapability {
            access_type: Some(AccessType::Block(BlockVolume {})),
            access_mode: Some(AccessMode {
                mode: AccessModeKind::SingleNodeWriter as i32,
            }),
        };
        assert_eq!(
            parse(&block).unwrap().mount_flags(),
            Err(Unsupported::Block)
        );
        let with = |m: MountVolume| {
            parse(&cap(AccessModeKind::SingleNodeWriter, m))
                .unwrap()
                .mount_flags()
        };
        assert_eq!(
            with(MountVolume {
                fs_type: "ext4".into(),
                ..Default::default()
            }),
            Err(Unsupported::FsType("ext4".into()))
        );
        assert!(
            with(MountVolume {
                fs_type: "btrfs".into(),
                ..Default::default()
            })
            .is_ok()
        );
        assert_eq!(
            with(MountVolume {
                volume_mount_group: "2000".into(),
                ..Default::default()
            }),
            Err(Unsupported::MountGroup)
        );
    }

    #[test]
    fn a_capability_without_type_or_mode_or_with_huge_flags_is_malformed() {
        let mut c = cap(AccessModeKind::SingleNodeWriter, MountVolume::default());
        c.access_type = None;
        assert_eq!(parse(&c), Err(Malformed::NoAccessType));
        for mode in [None, Some(0), Some(99)] {
            let mut c = cap(AccessModeKind::SingleNodeWriter, MountVolume::default());
            c.access_mode = mode.map(|mode| AccessMode { mode });
            assert_eq!(parse(&c), Err(Malformed::AccessMode(mode)), "{mode:?}");
        }
        let huge = MountVolume {
            mount_flags: vec!["x".repeat(MAX_MOUNT_FLAGS_BYTES + 1)],
            ..Default::default()
        };
        assert_eq!(
            parse(&cap(AccessModeKind::SingleNodeWriter, huge)),
            Err(Malformed::FlagsTooLong {
                len: MAX_MOUNT_FLAGS_BYTES + 1
            })
        );
    }

    #[test]
    fn only_multi_writer_modes_may_be_published_twice_on_this_node() {
        let one = |mode| {
            parse(&cap(mode, MountVolume::default()))
                .unwrap()
                .one_target_only()
        };
        for m in [
            AccessModeKind::SingleNodeWriter,
            AccessModeKind::SingleNodeReaderOnly,
            AccessModeKind::SingleNodeSingleWriter,
        ] {
            assert!(one(m), "{m:?}");
        }
        for m in [
            AccessModeKind::SingleNodeMultiWriter,
            AccessModeKind::MultiNodeReaderOnly,
            AccessModeKind::MultiNodeSingleWriter,
            AccessModeKind::MultiNodeMultiWriter,
        ] {
            assert!(!one(m), "{m:?}");
        }
    }
}
