//! The few binlog facts the restore needs.
//!
//! A crash image (an online snapshot) has its last binlog still flagged "in use". At
//! start, MariaDB recovers from it: it reads the newest `Binlog_checkpoint` event of that
//! file, looks the binlog *file name* it carries up in the binlog index, and aborts
//! ("Binlog file … not found in binlog index, needed for recovery") if it is missing
//! (MariaDB `sql/log.cc`, `MYSQL_BIN_LOG::recover`). Renaming the binlog files therefore
//! needs those names patched too. The new name has the same length (UIDs are always ten
//! digits), so the patch rewrites a few bytes in place and recomputes the event's CRC32.
//! MySQL has no checkpoint events; its recovery only reads the last file from the index.
//!
//! Layout (MySQL `libbinlogevents`, MariaDB `sql/log_event.h`): magic `\xfebin`, then
//! events with a 19-byte header {timestamp u32, type u8, server_id u32, event_size u32,
//! log_pos u32, flags u16}, little-endian. The first event is the Format_description
//! (type 15); its header flag 0x1 (`LOG_EVENT_BINLOG_IN_USE_F`) marks a file not closed
//! cleanly, and its last 5 bytes are the checksum algorithm (1 = CRC32) and a CRC.
//! Binlog_checkpoint (type 161): body = name length u32 + name.

use std::fs::File;
use std::io::{self, BufReader, Read, Seek};
use std::os::unix::fs::FileExt;

use vtsnap_core::pitr::binlog::{HEADER_LEN, MAGIC};
const FORMAT_DESCRIPTION_EVENT: u8 = 15;
const BINLOG_CHECKPOINT_EVENT: u8 = 161;
const START_ENCRYPTION_EVENT: u8 = 164;
const IN_USE_FLAG: u16 = 0x1;
const CRC_LEN: usize = 4;
/// The largest checkpoint event read: header, name length, a name of at most
/// `FN_REFLEN` (512) bytes with room to spare, and a CRC. A larger one is malformed, and
/// reading it whole would cost its size in memory.
pub const MAX_CHECKPOINT_EVENT: u64 = (HEADER_LEN + 4 + 4096 + CRC_LEN) as u64;
/// The largest binlog index read (a line per binlog file: far more than any server keeps).
pub const MAX_INDEX_LEN: u64 = 16 << 20;

/// What a scan of the last binlog found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LastBinlog {
    /// The file was not closed cleanly: the server will run binlog recovery on it.
    pub in_use: bool,
    /// Offsets of Binlog_checkpoint events whose file name starts with the prefix asked for.
    pub checkpoints_to_patch: Vec<u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum BinlogError {
    #[error("{path}: {source}")]
    Io { path: String, source: io::Error },
    #[error("{path}: not a binlog file (bad magic)")]
    BadMagic { path: String },
    #[error("{path}: first event is not a Format_description event")]
    NoFormatDescription { path: String },
    #[error(
        "{path}: binlog is encrypted and still in use; its checkpoint events cannot be \
         rewritten, so crash recovery would fail after the rename"
    )]
    EncryptedInUse { path: String },
    #[error("{path}: checkpoint event at offset {offset} is malformed")]
    BadCheckpoint { path: String, offset: u64 },
}

fn header_fields(h: &[u8; HEADER_LEN]) -> (u8, u32, u16) {
    let ty = h[4];
    let size = u32::from_le_bytes([h[9], h[10], h[11], h[12]]);
    let flags = u16::from_le_bytes([h[17], h[18]]);
    (ty, size, flags)
}

/// The file a binlog index lists last (its last non-empty line), as a bare file name.
pub fn last_index_entry(index: &str) -> Option<&str> {
    let last = index.lines().map(str::trim).rfind(|l| !l.is_empty())?;
    let name = last.rsplit('/').next().unwrap_or(last);
    (!name.is_empty() && name != "." && name != "..").then_some(name)
}

/// Scans the last binlog of a tablet for checkpoint events that name files starting with
/// `old_prefix`. Only reads event headers and the bodies of checkpoint events.
/// A torn event at the end (normal in a crash image) ends the scan, as it ends recovery.
/// `path` names the file in errors.
pub fn scan_last(file: &File, path: &str, old_prefix: &str) -> Result<LastBinlog, BinlogError> {
    let len = file
        .metadata()
        .map_err(|source| BinlogError::Io {
            path: path.to_owned(),
            source,
        })?
        .len();
    scan(file, len, path, old_prefix)
}

/// [`scan_last`] over any reader of `len` bytes.
pub fn scan<R: Read + Seek>(
    reader: R,
    len: u64,
    path: &str,
    old_prefix: &str,
) -> Result<LastBinlog, BinlogError> {
    let p = || path.to_owned();
    let io_err = |source| BinlogError::Io { path: p(), source };
    let mut r = BufReader::with_capacity(64 * 1024, reader);
    let mut magic = [0u8; 4];
    if r.read_exact(&mut magic).is_err() || magic != MAGIC {
        return Err(BinlogError::BadMagic { path: p() });
    }
    let mut out = LastBinlog::default();
    let mut pos: u64 = 4;
    let mut first = true;
    while pos + HEADER_LEN as u64 <= len {
        let mut h = [0u8; HEADER_LEN];
        r.read_exact(&mut h).map_err(io_err)?;
        let (ty, size, flags) = header_fields(&h);
        let size = u64::from(size);
        if size < HEADER_LEN as u64 || pos + size > len {
            break;
        }
        if first {
            if ty != FORMAT_DESCRIPTION_EVENT {
                return Err(BinlogError::NoFormatDescription { path: p() });
            }
            out.in_use = flags & IN_USE_FLAG != 0;
            first = false;
            if !out.in_use {
                // A cleanly closed last binlog is never recovered from: nothing to patch.
                return Ok(out);
            }
        }
        let body_len = size - HEADER_LEN as u64;
        match ty {
            START_ENCRYPTION_EVENT if out.in_use => {
                return Err(BinlogError::EncryptedInUse { path: p() });
            }
            BINLOG_CHECKPOINT_EVENT => {
                if size > MAX_CHECKPOINT_EVENT {
                    return Err(BinlogError::BadCheckpoint {
                        path: p(),
                        offset: pos,
                    });
                }
                let mut body = vec![0u8; usize::try_from(body_len).unwrap_or(0)];
                r.read_exact(&mut body).map_err(io_err)?;
                let name = checkpoint_name(&body).ok_or(BinlogError::BadCheckpoint {
                    path: p(),
                    offset: pos,
                })?;
                if name.starts_with(old_prefix.as_bytes()) {
                    out.checkpoints_to_patch.push(pos);
                }
            }
            _ => {
                let skip = i64::try_from(body_len).unwrap_or(i64::MAX);
                r.seek_relative(skip).map_err(io_err)?;
            }
        }
        pos += size;
    }
    if first {
        return Err(BinlogError::NoFormatDescription { path: p() });
    }
    Ok(out)
}

/// The file name inside a checkpoint event body (ignoring a trailing CRC, if any).
fn checkpoint_name(body: &[u8]) -> Option<&[u8]> {
    let n = u32::from_le_bytes(body.get(..4)?.try_into().ok()?) as usize;
    body.get(4..4 + n)
}

/// Whether the binlog's events carry a CRC32 (from its Format_description event).
fn has_crc(file: &File, path: &str) -> Result<bool, BinlogError> {
    let io_err = |source| BinlogError::Io {
        path: path.to_owned(),
        source,
    };
    let mut h = [0u8; HEADER_LEN];
    file.read_exact_at(&mut h, 4).map_err(io_err)?;
    let (ty, size, _) = header_fields(&h);
    if ty != FORMAT_DESCRIPTION_EVENT || (size as usize) < HEADER_LEN + 5 {
        return Err(BinlogError::NoFormatDescription {
            path: path.to_owned(),
        });
    }
    let mut alg = [0u8; 1];
    file.read_exact_at(&mut alg, 4 + u64::from(size) - 5)
        .map_err(io_err)?;
    Ok(alg[0] == 1)
}

/// Rewrites the file name in the checkpoint events at `offsets` from `old_prefix` to
/// `new_prefix` (same length), fixing each event's CRC32 (made durable by the restore's one
/// sync at the end, like every step). Idempotent: an
/// event that already names `new_prefix` is left alone. `file` is open for writing;
/// `path` names it in errors.
pub fn patch_checkpoints(
    file: &File,
    path: &str,
    offsets: &[u64],
    old_prefix: &str,
    new_prefix: &str,
) -> Result<usize, BinlogError> {
    let p = || path.to_owned();
    let io_err = |source| BinlogError::Io { path: p(), source };
    if old_prefix.len() != new_prefix.len() {
        return Err(BinlogError::BadCheckpoint {
            path: p(),
            offset: 0,
        });
    }
    let crc = has_crc(file, path)?;
    let mut patched = 0;
    for &offset in offsets {
        let mut h = [0u8; HEADER_LEN];
        file.read_exact_at(&mut h, offset).map_err(io_err)?;
        let (ty, size, _) = header_fields(&h);
        if ty != BINLOG_CHECKPOINT_EVENT
            || (size as usize) < HEADER_LEN + 4 + if crc { CRC_LEN } else { 0 }
            || u64::from(size) > MAX_CHECKPOINT_EVENT
        {
            return Err(BinlogError::BadCheckpoint { path: p(), offset });
        }
        let mut event = vec![0u8; size as usize];
        file.read_exact_at(&mut event, offset).map_err(io_err)?;
        let body = &event[HEADER_LEN..];
        let name = checkpoint_name(body).ok_or(BinlogError::BadCheckpoint { path: p(), offset })?;
        if name.starts_with(new_prefix.as_bytes()) {
            continue;
        }
        if !name.starts_with(old_prefix.as_bytes()) {
            return Err(BinlogError::BadCheckpoint { path: p(), offset });
        }
        let name_at = HEADER_LEN + 4;
        event[name_at..name_at + new_prefix.len()].copy_from_slice(new_prefix.as_bytes());
        if crc {
            let end = event.len() - CRC_LEN;
            let sum = crc32fast::hash(&event[..end]);
            event[end..].copy_from_slice(&sum.to_le_bytes());
        }
        file.write_all_at(&event, offset).map_err(io_err)?;
        patched += 1;
    }
    Ok(patched)
}

#[cfg(test)]
mod tests {
    use super::*;

    use vtsnap_testkit::binlog::{MAGIC as M, event, file as binlog, format_description};

    fn scan_path(path: &std::path::Path, prefix: &str) -> Result<LastBinlog, BinlogError> {
        scan_last(&File::open(path).unwrap(), "b", prefix)
    }

    fn patch(path: &std::path::Path, offsets: &[u64]) -> usize {
        let f = File::options().read(true).write(true).open(path).unwrap();
        patch_checkpoints(&f, "b", offsets, "vt-0000000101-", "vt-0000000202-").unwrap()
    }

    fn binlog_torn(in_use: bool, names: &[&str]) -> Vec<u8> {
        let mut f = binlog(in_use, names);
        f.extend(&event(2, 0, b"a torn event", true)[..10]);
        f
    }

    #[test]
    fn finds_and_patches_checkpoints_of_an_in_use_binlog() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vt-0000000101-bin.000003");
        let names = ["vt-0000000101-bin.000002", "vt-0000000101-bin.000003"];
        std::fs::write(&path, binlog_torn(true, &names)).unwrap();

        let scan = scan_path(&path, "vt-0000000101-").unwrap();
        assert!(scan.in_use);
        assert_eq!(scan.checkpoints_to_patch.len(), 2);

        let n = patch(&path, &scan.checkpoints_to_patch);
        assert_eq!(n, 2);
        let want = binlog_torn(
            true,
            &["vt-0000000202-bin.000002", "vt-0000000202-bin.000003"],
        );
        assert_eq!(
            std::fs::read(&path).unwrap(),
            want,
            "patched bytes and CRCs must equal a fresh file"
        );

        // Idempotent: patching again changes nothing.
        let n = patch(&path, &scan.checkpoints_to_patch);
        assert_eq!(n, 0);
        assert_eq!(std::fs::read(&path).unwrap(), want);
        assert!(
            scan_path(&path, "vt-0000000101-")
                .unwrap()
                .checkpoints_to_patch
                .is_empty()
        );
    }

    #[test]
    fn a_cleanly_closed_binlog_needs_no_patch() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.000001");
        std::fs::write(&path, binlog(false, &["vt-0000000101-bin.000001"])).unwrap();
        assert_eq!(
            scan_path(&path, "vt-0000000101-").unwrap(),
            LastBinlog::default()
        );
    }

    #[test]
    fn an_encrypted_in_use_binlog_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.000001");
        let mut f = M.to_vec();
        f.extend(format_description(true, true));
        f.extend(event(START_ENCRYPTION_EVENT, 0, &[0u8; 17], true));
        std::fs::write(&path, f).unwrap();
        assert!(matches!(
            scan_path(&path, "vt-"),
            Err(BinlogError::EncryptedInUse { .. })
        ));
    }

    #[test]
    fn garbage_is_not_a_binlog() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.000001");
        std::fs::write(&path, b"hello world, not a binlog").unwrap();
        assert!(matches!(
            scan_path(&path, "vt-"),
            Err(BinlogError::BadMagic { .. })
        ));
    }

    #[test]
    fn an_oversized_checkpoint_event_is_refused_unread() {
        let mut f = binlog(true, &[]);
        let mut h = event(BINLOG_CHECKPOINT_EVENT, 0, &[], true);
        h.truncate(HEADER_LEN);
        h[9..13].copy_from_slice(&(512u32 << 20).to_le_bytes());
        f.extend(&h);
        let len = f.len() as u64 + (512 << 20);
        let r = scan(std::io::Cursor::new(&f), len, "b", "vt-");
        assert!(matches!(r, Err(BinlogError::BadCheckpoint { .. })), "{r:?}");
    }

    #[test]
    fn the_index_names_its_last_file() {
        assert_eq!(
            last_index_entry("/a/b.000001\n./b.000002\n\n"),
            Some("b.000002")
        );
        assert_eq!(last_index_entry("\n \n"), None);
        assert_eq!(last_index_entry("/a/..\n"), None);
    }
}
