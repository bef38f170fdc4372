//! The btrfs operations the driver needs, through the `btrfs` command (btrfs-progs).
//!
//! A snapshot is one ioctl in one transaction: atomic across the whole subvolume, and
//! btrfs flushes the source's dirty pages first, so it holds every write that returned
//! before it. Subvolume create and snapshot both commit their transaction before
//! returning, so they survive a power loss once the command has exited.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `BTRFS_SUPER_MAGIC` (linux/magic.h).
const BTRFS_SUPER_MAGIC: i64 = 0x9123_683e;

/// The inode number of every subvolume's root directory (`BTRFS_FIRST_FREE_OBJECTID`).
const SUBVOLUME_ROOT_INODE: u64 = 256;

#[derive(Debug, thiserror::Error)]
pub enum BtrfsError {
    #[error("cannot run `btrfs {op}` on {path}: {source}")]
    Spawn {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`btrfs {op}` on {path} failed ({status}): {stderr}")]
    Failed {
        op: &'static str,
        path: PathBuf,
        status: std::process::ExitStatus,
        stderr: String,
    },
    #[error("{path} is not a btrfs subvolume")]
    NotSubvolume { path: PathBuf },
    #[error("cannot inspect {path}: {source}")]
    Inspect {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not on a btrfs file system")]
    NotBtrfs { path: PathBuf },
}

/// Runs `btrfs -q <args>` and returns its stdout; `path` is the object the error names.
fn run(op: &'static str, args: &[&std::ffi::OsStr], path: &Path) -> Result<String, BtrfsError> {
    let out = Command::new("btrfs")
        .arg("-q")
        .args(args)
        // Times are printed in local time: make that UTC.
        .env("TZ", "UTC")
        .output()
        .map_err(|source| BtrfsError::Spawn {
            op,
            path: path.to_owned(),
            source,
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(BtrfsError::Failed {
            op,
            path: path.to_owned(),
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }
}

/// Creates an empty subvolume at `path` (which must not exist).
pub fn create(path: &Path) -> Result<(), BtrfsError> {
    run(
        "subvolume create",
        &["subvolume".as_ref(), "create".as_ref(), path.as_os_str()],
        path,
    )?;
    Ok(())
}

/// Snapshots subvolume `src` as `dst`: read-only for a CSI snapshot, writable for a volume
/// restored from one.
pub fn snapshot(src: &Path, dst: &Path, readonly: bool) -> Result<(), BtrfsError> {
    let mut args: Vec<&std::ffi::OsStr> = vec!["subvolume".as_ref(), "snapshot".as_ref()];
    if readonly {
        args.push("-r".as_ref());
    }
    args.extend([src.as_os_str(), dst.as_os_str()]);
    run("subvolume snapshot", &args, dst)?;
    Ok(())
}

/// The subvolume's creation time (its root item's `otime`, set when a snapshot is cut),
/// in whole seconds since the epoch; `None` if btrfs does not print one. The root
/// directory's own birth time would not do: a snapshot's is copied from its source.
pub fn creation_time(path: &Path) -> Result<Option<i64>, BtrfsError> {
    let out = run(
        "subvolume show",
        &["subvolume".as_ref(), "show".as_ref(), path.as_os_str()],
        path,
    )?;
    Ok(out
        .lines()
        .find_map(|l| l.trim().strip_prefix("Creation time:"))
        .and_then(|t| parse_time(t.trim())))
}

/// `YYYY-MM-DD HH:MM:SS [+-]HHMM`, as `btrfs subvolume show` prints it, to Unix seconds.
fn parse_time(s: &str) -> Option<i64> {
    let mut parts = s.split_whitespace();
    let (date, time) = (parts.next()?, parts.next()?);
    let offset = parts.next().unwrap_or("+0000");
    let num = |s: &str| s.parse::<i64>().ok();
    let d: Vec<i64> = date.split('-').map(num).collect::<Option<_>>()?;
    let t: Vec<i64> = time.split(':').map(num).collect::<Option<_>>()?;
    let ([y, m, day], [hh, mm, ss]) = (d.as_slice(), t.as_slice()) else {
        return None;
    };
    let (sign, hhmm) = match offset.split_at_checked(1)? {
        ("+", r) => (1, r),
        ("-", r) => (-1, r),
        _ => return None,
    };
    let (oh, om) = hhmm.split_at_checked(2)?;
    let off = sign * (num(oh)? * 3600 + num(om)? * 60);
    Some(days_from_civil(*y, *m, *day) * 86_400 + hh * 3600 + mm * 60 + ss - off)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (the well-known era algorithm:
/// 400-year eras of 146,097 days, years starting in March).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Deletes the subvolume at `path`; refuses a plain directory rather than guess.
pub fn delete(path: &Path) -> Result<(), BtrfsError> {
    if !is_subvolume(path)? {
        return Err(BtrfsError::NotSubvolume {
            path: path.to_owned(),
        });
    }
    run(
        "subvolume delete",
        &["subvolume".as_ref(), "delete".as_ref(), path.as_os_str()],
        path,
    )?;
    Ok(())
}

/// Whether `path` is the root of a subvolume (without following a symlink).
pub fn is_subvolume(path: &Path) -> Result<bool, BtrfsError> {
    let m = std::fs::symlink_metadata(path).map_err(|source| BtrfsError::Inspect {
        path: path.to_owned(),
        source,
    })?;
    Ok(m.is_dir() && m.ino() == SUBVOLUME_ROOT_INODE)
}

/// Refuses a directory that is not on btrfs: every later operation would fail there.
pub fn ensure_btrfs(path: &Path) -> Result<(), BtrfsError> {
    let st = nix::sys::statfs::statfs(path).map_err(|e| BtrfsError::Inspect {
        path: path.to_owned(),
        source: e.into(),
    })?;
    // The field's integer type differs between libc targets.
    #[allow(clippy::useless_conversion)]
    let magic = i64::from(st.filesystem_type().0);
    if magic == BTRFS_SUPER_MAGIC {
        Ok(())
    } else {
        Err(BtrfsError::NotBtrfs {
            path: path.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creation_times_read_as_unix_seconds() {
        assert_eq!(parse_time("1970-01-01 00:00:00 +0000"), Some(0));
        // `date -u -d '2026-12-01 08:04:16' +%s`
        assert_eq!(parse_time("2026-12-01 08:04:16 +0000"), Some(1_796_112_256));
        assert_eq!(parse_time("2026-12-01 03:04:16 -0500"), Some(1_796_112_256));
        assert_eq!(parse_time("2024-02-29 12:00:00 +0130"), Some(1_709_202_600));
        for bad in [
            "-",
            "",
            "2026-12-01",
            "2026-12-01 08:04 +0000",
            "2026-12-01 08:04:16 UTC",
        ] {
            assert_eq!(parse_time(bad), None, "{bad:?}");
        }
    }
}
