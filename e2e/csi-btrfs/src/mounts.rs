//! The mount table, as the kernel reports it in `/proc/self/mountinfo`: the only record of
//! what the Node service has published where. Nothing is kept beside it, so a restarted
//! driver sees exactly the mounts that exist.
//!
//! A line is `id parent major:minor root mount_point mount_options [optional...] - fstype
//! source super_options` (proc(5), `/proc/pid/mountinfo`). `root` is the path, inside the
//! file system, of the directory mounted at `mount_point`: for btrfs it is counted from
//! the top-level subvolume, so a bind mount of `<root>/volumes/v` shows the volume's own
//! path there whatever it is mounted on. Paths escape space, tab, newline and backslash
//! as `\ooo` octal.

use std::path::{Component, Path, PathBuf};

/// Where the kernel reports this process's mounts.
pub const MOUNTINFO: &str = "/proc/self/mountinfo";

#[derive(Debug, thiserror::Error)]
pub enum MountsError {
    #[error("cannot read {MOUNTINFO}: {source}")]
    Read {
        #[source]
        source: std::io::Error,
    },
    #[error("{MOUNTINFO} line {line}: {why}")]
    Parse { line: usize, why: &'static str },
}

/// One mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// The file system's device (`major:minor`); equal for every mount of one file system.
    pub dev: (u32, u32),
    /// The mounted directory's path inside its file system.
    pub root: PathBuf,
    pub mount_point: PathBuf,
    /// Per-mount options (`ro`, `nosuid`, `noatime`, …), not the file system's.
    pub options: Vec<String>,
    pub fs_type: String,
}

impl Mount {
    pub fn has_option(&self, o: &str) -> bool {
        self.options.iter().any(|x| x == o)
    }
}

/// A directory's place in the file systems: which one, and its path inside it. Two
/// mounts show the same directory exactly when they show the same place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub dev: (u32, u32),
    pub path: PathBuf,
}

/// The mounts in the order the kernel lists them (a mount stacked over another at the
/// same point comes after it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MountTable(Vec<Mount>);

impl MountTable {
    /// Reads this process's mount table.
    pub fn read() -> Result<Self, MountsError> {
        let text =
            std::fs::read_to_string(MOUNTINFO).map_err(|source| MountsError::Read { source })?;
        Self::parse(&text)
    }

    pub fn parse(text: &str) -> Result<Self, MountsError> {
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| parse_line(l).map_err(|why| MountsError::Parse { line: i + 1, why }))
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }

    pub fn mounts(&self) -> &[Mount] {
        &self.0
    }

    /// The mount visible at `mount_point` (the last one stacked there), if any.
    /// `mount_point` must be canonical, as the kernel reports them.
    pub fn at(&self, mount_point: &Path) -> Option<&Mount> {
        self.0.iter().rev().find(|m| m.mount_point == mount_point)
    }

    /// Where the canonical path `dir` lies: the innermost mount containing it, plus the
    /// rest of the path below that mount's root.
    pub fn place_of(&self, dir: &Path) -> Option<Place> {
        // `max_by_key` keeps the last of equals: the mount stacked on top.
        let m = self
            .0
            .iter()
            .filter(|m| dir.starts_with(&m.mount_point))
            .max_by_key(|m| m.mount_point.components().count())?;
        let below = dir.strip_prefix(&m.mount_point).ok()?;
        let path = if below.as_os_str().is_empty() {
            m.root.clone()
        } else {
            m.root.join(below)
        };
        Some(Place { dev: m.dev, path })
    }

    /// The mounts that show exactly `place` (bind mounts of that directory).
    pub fn showing<'a>(&'a self, place: &'a Place) -> impl Iterator<Item = &'a Mount> + 'a {
        self.0
            .iter()
            .filter(move |m| m.dev == place.dev && m.root == place.path)
    }

    /// The mounts that show `place` or anything below it (a bind of a subdirectory, such as
    /// kubelet's `subPath`, keeps the volume in use as much as a bind of its root).
    pub fn within<'a>(&'a self, place: &'a Place) -> impl Iterator<Item = &'a Mount> + 'a {
        self.0
            .iter()
            .filter(move |m| m.dev == place.dev && m.root.starts_with(&place.path))
    }
}

fn parse_line(line: &str) -> Result<Mount, &'static str> {
    let mut f = line.split(' ');
    let _id = f.next().ok_or("no mount id")?;
    let _parent = f.next().ok_or("no parent id")?;
    let dev = f.next().ok_or("no major:minor")?;
    let (major, minor) = dev.split_once(':').ok_or("major:minor has no ':'")?;
    let dev = (
        major.parse().map_err(|_| "major is not a number")?,
        minor.parse().map_err(|_| "minor is not a number")?,
    );
    let root = root_of(f.next().ok_or("no root")?)?;
    let mount_point = unescape(f.next().ok_or("no mount point")?)?;
    let options = f
        .next()
        .ok_or("no mount options")?
        .split(',')
        .map(str::to_owned)
        .collect();
    // Optional fields (`shared:1`, `master:2`, …) up to the separator.
    f.by_ref().find(|x| *x == "-").ok_or("no '-' separator")?;
    let fs_type = f.next().ok_or("no file system type")?.to_owned();
    Ok(Mount {
        dev,
        root,
        mount_point,
        options,
        fs_type,
    })
}

/// A mount's root: a path in its file system, or, for a bind mount of a namespace file
/// (containerd's network namespaces, `nsfs`), the namespace's name such as
/// `net:[4026532363]` (`fs/nsfs.c`, `ns_dname`). Such a root names no directory, so it
/// never matches a volume's place.
fn root_of(s: &str) -> Result<PathBuf, &'static str> {
    if !s.starts_with('/') && !s.contains('/') && s.ends_with(']') && s.contains(":[") {
        return Ok(PathBuf::from(s));
    }
    unescape(s)
}

/// Undoes the kernel's `\ooo` escapes (`fs/proc_namespace.c`, `mangle`: space, tab,
/// newline, backslash, and `#` in some fields).
fn unescape(s: &str) -> Result<PathBuf, &'static str> {
    use std::os::unix::ffi::OsStringExt;

    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' {
            let oct = b.get(i + 1..i + 4).ok_or("a cut-off escape")?;
            let mut v: u32 = 0;
            for &d in oct {
                if !(b'0'..=b'7').contains(&d) {
                    return Err("an escape that is not octal");
                }
                v = v * 8 + u32::from(d - b'0');
            }
            out.push(u8::try_from(v).map_err(|_| "an escape above 0o377")?);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    let p = PathBuf::from(std::ffi::OsString::from_vec(out));
    if p.is_absolute() && p.components().all(|c| !matches!(c, Component::ParentDir)) {
        Ok(p)
    } else {
        Err("a path that is not absolute")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A btrfs mounted at /mnt/btrfs (the driver root /mnt/btrfs/csi), a volume published
    /// read-only at a target with a space in its name, a subPath bind of a directory in
    /// it, an unrelated tmpfs stacked twice, and a volume whose name extends the first's.
    const SAMPLE: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
46 22 0:40 / /mnt/btrfs rw,relatime shared:30 - btrfs /dev/loop0 rw,space_cache=v2,subvolid=5,subvol=/
47 22 0:40 /csi/volumes/pvc-a /var/lib/kubelet/pods/u1/volumes/kubernetes.io~csi/pvc-a/my\\040mount ro,nosuid,relatime shared:30 - btrfs /dev/loop0 rw,subvolid=256,subvol=/csi/volumes/pvc-a
48 22 0:40 /csi/volumes/pvc-a/data /var/lib/kubelet/pods/u1/volume-subpaths/x ro,relatime shared:30 - btrfs /dev/loop0 rw,subvolid=256,subvol=/csi/volumes/pvc-a
49 22 0:41 / /run/t rw - tmpfs tmpfs rw
50 49 0:42 / /run/t rw,noexec - tmpfs tmpfs rw
51 22 0:40 /csi/volumes/pvc-a2 /run/a2 rw,relatime - btrfs /dev/loop0 rw,subvolid=257
52 22 0:4 net:[4026532363] /run/netns/cni-1 rw shared:31 - nsfs nsfs rw
";

    #[test]
    fn lines_parse_with_escapes_and_optional_fields() {
        let t = MountTable::parse(SAMPLE).unwrap();
        assert_eq!(t.mounts().len(), 8);
        // a network namespace bound by containerd: its root is the namespace's name
        assert_eq!(t.mounts()[7].root, Path::new("net:[4026532363]"));
        assert_eq!(t.mounts()[7].fs_type, "nsfs");
        let m = &t.mounts()[2];
        assert_eq!(m.dev, (0, 40));
        assert_eq!(m.root, Path::new("/csi/volumes/pvc-a"));
        assert_eq!(
            m.mount_point,
            Path::new("/var/lib/kubelet/pods/u1/volumes/kubernetes.io~csi/pvc-a/my mount")
        );
        assert!(m.has_option("ro") && m.has_option("nosuid") && !m.has_option("rw"));
        assert_eq!(m.fs_type, "btrfs");
        assert_eq!(
            unescape("/a\\011b\\012c\\134d").unwrap(),
            Path::new("/a\tb\nc\\d")
        );
    }

    #[test]
    fn a_bad_line_is_an_error_naming_it() {
        for bad in [
            "1 2 0:40",
            "1 2 0-40 / /x rw - btrfs /dev/x rw",
            "1 2 0:40 / /x rw btrfs /dev/x rw",
            "1 2 0:40 / /x\\04 rw - btrfs /dev/x rw",
            "1 2 0:40 / /x\\09a rw - btrfs /dev/x rw",
            "1 2 0:40 / x rw - btrfs /dev/x rw",
            "1 2 0:40 net:[1]/x /x rw - btrfs /dev/x rw",
            "1 2 0:40 relative /x rw - btrfs /dev/x rw",
        ] {
            let text = format!("{}{bad}\n", SAMPLE);
            match MountTable::parse(&text) {
                Err(MountsError::Parse { line: 9, .. }) => {}
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_volume_is_found_where_it_is_bound() {
        let t = MountTable::parse(SAMPLE).unwrap();
        let place = t
            .place_of(Path::new("/mnt/btrfs/csi/volumes/pvc-a"))
            .unwrap();
        assert_eq!(
            place,
            Place {
                dev: (0, 40),
                path: "/csi/volumes/pvc-a".into()
            }
        );
        let shown: Vec<_> = t.showing(&place).map(|m| m.mount_point.clone()).collect();
        assert_eq!(shown.len(), 1, "the subPath bind is not a publication");
        assert!(shown[0].ends_with("my mount"));
        assert_eq!(
            t.within(&place).count(),
            2,
            "the subPath bind keeps it in use; pvc-a2 is not below pvc-a"
        );

        let other = t
            .place_of(Path::new("/mnt/btrfs/csi/volumes/pvc-b"))
            .unwrap();
        assert_eq!(t.showing(&other).count(), 0);
        assert_eq!(t.within(&other).count(), 0);
        assert_eq!(
            t.place_of(Path::new("/mnt/btrfs")).unwrap().path,
            Path::new("/")
        );
    }

    #[test]
    fn the_last_mount_stacked_at_a_point_is_the_visible_one() {
        let t = MountTable::parse(SAMPLE).unwrap();
        assert_eq!(t.at(Path::new("/run/t")).unwrap().dev, (0, 42));
        assert!(t.at(Path::new("/run")).is_none());
        assert_eq!(
            t.place_of(Path::new("/run/t/x")).unwrap().dev,
            (0, 42),
            "the innermost, topmost mount"
        );
    }
}
