//! Fetches an increment's binlog files out of the archive, checked: each stored file's
//! CRC-32 against its MANIFEST, decompressed (gzip members one after another, as pgzip and
//! pargzip write them), bounded, and starting as a binlog does. A file is written under a
//! temporary name and renamed once it checks, so a damaged or partial one is never taken
//! for a binlog: a replay either gets every file whole or fails naming the one that is not.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use flate2::read::MultiGzDecoder;
use vtsnap_core::pitr::manifest::{BinlogFile, Compression, Increment};

use crate::archive::{Archive, ArchiveError};

/// The most one binlog may decompress to (MySQL's largest `max_binlog_size` is 1 GiB; a
/// binlog holding one huge transaction may exceed it).
pub const MAX_BINLOG_BYTES: u64 = 64 << 30;
pub use vtsnap_core::pitr::binlog::MAGIC as BINLOG_MAGIC;

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    #[error("backup {backup}: file {stored} ({binlog}) {problem}")]
    Damaged {
        backup: String,
        stored: String,
        binlog: String,
        problem: String,
    },
    #[error("cannot write {}: {source}", path.display())]
    Write { path: PathBuf, source: io::Error },
    #[error("fetched binlog {}: {problem}", path.display())]
    Unreadable { path: PathBuf, problem: String },
}

/// A binlog fetched and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub path: PathBuf,
    pub bytes: u64,
}

/// A reader that keeps the CRC-32 and count of what passed through it.
struct Checked<R> {
    inner: R,
    crc: crc32fast::Hasher,
    read: u64,
}

impl<R: Read> Read for Checked<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.crc.update(&buf[..n]);
        self.read += n as u64;
        Ok(n)
    }
}

/// Copies `from` into `to`, at most `max` bytes: `Ok(None)` when there was more.
fn copy_bounded(from: &mut impl Read, to: &mut impl Write, max: u64) -> io::Result<Option<u64>> {
    let n = io::copy(&mut from.take(max + 1), to)?;
    Ok((n <= max).then_some(n))
}

/// Fetches `file` of `inc` into `dest`, as `dest/<binlog name>`; nothing is left of it
/// when it fails.
pub async fn fetch_file(
    archive: &Archive,
    inc: &Increment,
    file: &BinlogFile,
    dest: &Path,
    max_bytes: u64,
) -> Result<Fetched, FetchError> {
    let partial = dest.join(format!("{}.partial", file.binlog));
    // An object is first copied whole into `dest`: as large as its MANIFEST may say, and
    // compressed files inflate, so the bound on the stored copy is the binlog's.
    let stored = archive
        .open(&inc.name, &file.stored, dest, max_bytes)
        .await?;
    let fetched = fetch_into(&stored.file, inc, file, &partial, max_bytes);
    drop(stored);
    if fetched.is_err() {
        // Best effort: a partial file is never renamed, so it is never taken for a binlog.
        let _ = std::fs::remove_file(&partial);
    }
    let bytes = fetched?;
    let path = dest.join(&file.binlog);
    std::fs::rename(&partial, &path).map_err(|source| FetchError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(Fetched { path, bytes })
}

fn fetch_into(
    stored: &File,
    inc: &Increment,
    file: &BinlogFile,
    partial: &Path,
    max_bytes: u64,
) -> Result<u64, FetchError> {
    let damaged = |problem: String| FetchError::Damaged {
        backup: inc.name.clone(),
        stored: file.stored.clone(),
        binlog: file.binlog.clone(),
        problem,
    };
    let mut checked = Checked {
        inner: io::BufReader::new(stored),
        crc: crc32fast::Hasher::new(),
        read: 0,
    };
    let write_error = |source| FetchError::Write {
        path: partial.to_owned(),
        source,
    };
    let mut out = io::BufWriter::new(File::create(partial).map_err(write_error)?);
    let copied = match inc.compression {
        Compression::Gzip => {
            copy_bounded(&mut MultiGzDecoder::new(&mut checked), &mut out, max_bytes)
        }
        Compression::None => copy_bounded(&mut checked, &mut out, max_bytes),
    };
    let bytes = match copied {
        Ok(Some(n)) => n,
        Ok(None) => {
            return Err(damaged(format!("holds more than {max_bytes} bytes")));
        }
        // Reading the stored file or inflating it failed: the file, not the destination.
        Err(e) if e.kind() != io::ErrorKind::StorageFull => {
            return Err(damaged(format!("cannot be read whole: {e}")));
        }
        Err(e) => return Err(write_error(e)),
    };
    // What the decoder left unread still counts for the CRC.
    io::copy(&mut checked, &mut io::sink()).map_err(|e| damaged(format!("cannot be read: {e}")))?;
    let crc = checked.crc.finalize();
    if crc != file.crc32 {
        return Err(damaged(format!(
            "has CRC-32 {crc:08x}, and its MANIFEST says {:08x}",
            file.crc32
        )));
    }
    out.flush().map_err(write_error)?;
    drop(out);
    let mut head = [0u8; 4];
    let starts = File::open(partial)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok();
    if !starts || head != BINLOG_MAGIC {
        return Err(damaged(
            "is not a binlog (no binlog magic at its start)".into(),
        ));
    }
    Ok(bytes)
}

/// Fetches every file of `increments`, in order, each increment's into its own directory
/// under `dest` (two increments may hold a binlog of one name).
pub async fn fetch_all<'a>(
    archive: &Archive,
    increments: impl IntoIterator<Item = &'a Increment>,
    dest: &Path,
) -> Result<Vec<Fetched>, FetchError> {
    let mut out = Vec::new();
    for inc in increments {
        let dir = dest.join(&inc.name);
        std::fs::create_dir_all(&dir).map_err(|source| FetchError::Write {
            path: dir.clone(),
            source,
        })?;
        for file in &inc.files {
            out.push(fetch_file(archive, inc, file, &dir, MAX_BINLOG_BYTES).await?);
        }
    }
    Ok(out)
}

#[cfg(test)]
#[path = "fetch_tests.rs"]
mod tests;

/// When the last transaction a replay of `fetched` (in order) to `target` applies began:
/// for a time target, the RPO's other end (docs/pitr.md §8); `None` for a GTID target,
/// which is met exactly or not at all. A binlog whose events do not add up fails naming it.
pub fn last_transaction(
    fetched: &[Fetched],
    target: &vtsnap_core::pitr::chain::Target,
) -> Result<Option<u32>, FetchError> {
    use vtsnap_core::pitr::chain::Target;
    let Target::Before(t) = target else {
        return Ok(None);
    };
    // Before the epoch nothing is applied; after u32's end everything is.
    let stop = u32::try_from(t.as_second().max(0)).ok();
    let mut last = None;
    for f in fetched {
        let file = File::open(&f.path).map_err(|e| FetchError::Unreadable {
            path: f.path.clone(),
            problem: e.to_string(),
        })?;
        let walked =
            vtsnap_core::pitr::binlog::walk(io::BufReader::new(file), stop).map_err(|e| {
                FetchError::Unreadable {
                    path: f.path.clone(),
                    problem: e.to_string(),
                }
            })?;
        last = walked.last_transaction.or(last);
    }
    Ok(last)
}
