//! Every layout the restore refuses to touch. A refusal is decided before any change, so
//! the volume is exactly as it was (exit code 3).

use vtsnap_core::naming::TabletUid;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("{name:?} looks like a tablet directory but is not vt_ followed by ten digits")]
    StrangeTabletDir { name: String },
    #[error(
        "both {} and {} are on the volume; cannot tell which one is the tablet's data",
        old.tablet_dir_name(),
        new.tablet_dir_name()
    )]
    BothPresent { old: TabletUid, new: TabletUid },
    #[error("several tablet directories on the volume ({}); cannot tell which one to adopt", fmt_uids(.uids))]
    SeveralTablets { uids: Vec<TabletUid> },
    #[error("{name} is not a directory (a symlinked tablet directory is not supported)")]
    TabletDirNotADirectory { name: String },
    #[error("cannot read {path}: {reason}")]
    Unreadable { path: String, reason: String },
    #[error("{path} cannot be used: {reason}")]
    BadMyCnf { path: String, reason: String },
    #[error("symlink {link} -> {target} leaves the volume")]
    SymlinkLeavesVolume { link: String, target: String },
    #[error("symlink {link} is part of a loop (more than 40 links to follow)")]
    SymlinkLoop { link: String },
    #[error("{path} is a {found}, expected a {expected}")]
    WrongFileType {
        path: String,
        found: &'static str,
        expected: &'static str,
    },
    #[error("{path}: {reason}")]
    BadFileName { path: String, reason: String },
    #[error("{from} would be renamed to {to}, which already exists")]
    TargetExists { from: String, to: String },
    #[error("{path}: {reason}")]
    NotWritable { path: String, reason: String },
    #[error("symlink {link} -> {target} points at nothing")]
    DanglingSymlink { link: String, target: String },
    #[error("{path} is on the volume but no tablet directory links to it")]
    UnlinkedTopDir { path: String },
    #[error(
        "my.cnf {key} = {value} is outside the volume mounted at {mount}: a multi-volume tablet"
    )]
    OffVolume {
        key: String,
        value: String,
        mount: String,
    },
    #[error("{path}: {reason}")]
    BadBinlog { path: String, reason: String },
    #[error(
        "an unfinished restore journal moves the volume to {}, not to this tablet {}",
        journal_to.tablet_dir_name(),
        mine.tablet_dir_name()
    )]
    JournalForOtherTablet {
        journal_to: TabletUid,
        mine: TabletUid,
    },
    #[error("restore journal {path} cannot be used: {reason}")]
    BadJournal { path: String, reason: String },
}

fn fmt_uids(uids: &[TabletUid]) -> String {
    uids.iter()
        .map(|u| u.tablet_dir_name())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Refusal {
    /// A stable kebab-case code for the JSON line.
    pub fn code(&self) -> &'static str {
        match self {
            Self::StrangeTabletDir { .. } => "strange-tablet-dir",
            Self::BothPresent { .. } => "old-and-new-present",
            Self::SeveralTablets { .. } => "several-tablets",
            Self::TabletDirNotADirectory { .. } => "tablet-dir-not-a-directory",
            Self::Unreadable { .. } => "unreadable",
            Self::BadMyCnf { .. } => "bad-my-cnf",
            Self::SymlinkLeavesVolume { .. } => "symlink-leaves-volume",
            Self::SymlinkLoop { .. } => "symlink-loop",
            Self::WrongFileType { .. } => "wrong-file-type",
            Self::BadFileName { .. } => "bad-file-name",
            Self::TargetExists { .. } => "target-exists",
            Self::NotWritable { .. } => "not-writable",
            Self::DanglingSymlink { .. } => "dangling-symlink",
            Self::UnlinkedTopDir { .. } => "unlinked-top-dir",
            Self::OffVolume { .. } => "off-volume",
            Self::BadBinlog { .. } => "bad-binlog",
            Self::JournalForOtherTablet { .. } => "journal-for-other-tablet",
            Self::BadJournal { .. } => "bad-journal",
        }
    }
}

impl From<vtsnap_core::volume::VolumeError> for Refusal {
    fn from(e: vtsnap_core::volume::VolumeError) -> Self {
        use vtsnap_core::volume::VolumeError as V;
        match e {
            V::LeavesVolume { link, target } => Self::SymlinkLeavesVolume { link, target },
            V::SymlinkLoop { link } => Self::SymlinkLoop { link },
            V::Unreadable { path, reason } => Self::Unreadable { path, reason },
        }
    }
}
