//! One reader for every file a program is handed (configs, dumps, certificates): checked in
//! type before it is opened, bounded in size while it is read. Without it, `/dev/zero`
//! grows a program until it is killed and a FIFO without a writer blocks it for ever.

use std::io::Read;
use std::path::{Path, PathBuf};

/// The most a dump of cluster objects (`kubectl get … -o json`) may hold: a large
/// cluster's objects fit many times over. The offline commands of every program share it.
pub const MAX_DUMP: u64 = 512 << 20;

/// What kind of file an input may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accept {
    /// A regular file (or a symlink to one, as a ConfigMap or Secret mount has). A FIFO is
    /// refused before it is opened: opening it would wait for a writer.
    RegularFile,
    /// A regular file or a pipe (`--objects <(kubectl get … -o json)`, `/dev/stdin`), read
    /// up to the bound. Devices, directories and sockets are refused.
    FileOrPipe,
}

/// Why an input file was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not a regular file (a {kind})", path.display())]
    NotAFile { path: PathBuf, kind: &'static str },
    #[error("{} is larger than {max} bytes, the most {what} may have", path.display())]
    TooLarge {
        path: PathBuf,
        max: u64,
        what: &'static str,
    },
}

impl ReadError {
    /// The path the error is about.
    pub fn path(&self) -> &Path {
        match self {
            Self::Io { path, .. } | Self::NotAFile { path, .. } | Self::TooLarge { path, .. } => {
                path
            }
        }
    }
}

/// The name of a file type, for messages.
pub fn kind_of(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_file() {
        "regular file"
    } else if t.is_dir() {
        "directory"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_socket() {
        "socket"
    } else {
        "special file"
    }
}

fn accepted(t: std::fs::FileType, accept: Accept) -> bool {
    use std::os::unix::fs::FileTypeExt;
    match accept {
        Accept::RegularFile => t.is_file(),
        Accept::FileOrPipe => t.is_file() || t.is_fifo(),
    }
}

/// The bytes of `path`, which is `what` ("a config file", "a dump"), refused when it is
/// not of an accepted kind or holds more than `max` bytes. Links are followed.
pub fn read_bounded(
    path: &Path,
    what: &'static str,
    max: u64,
    accept: Accept,
) -> Result<Vec<u8>, ReadError> {
    let io = |source| ReadError::Io {
        path: path.to_owned(),
        source,
    };
    let refuse = |t| ReadError::NotAFile {
        path: path.to_owned(),
        kind: kind_of(t),
    };
    let too_large = || ReadError::TooLarge {
        path: path.to_owned(),
        max,
        what,
    };
    // Checked before opening: opening a FIFO that `accept` refuses would wait for a writer.
    let meta = std::fs::metadata(path).map_err(io)?;
    if !accepted(meta.file_type(), accept) {
        return Err(refuse(meta.file_type()));
    }
    let file = std::fs::File::open(path).map_err(io)?;
    // And again on what was opened: the path may have been swapped in between.
    let meta = file.metadata().map_err(io)?;
    if !accepted(meta.file_type(), accept) {
        return Err(refuse(meta.file_type()));
    }
    if meta.is_file() && meta.len() > max {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > max {
        return Err(too_large());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_within_the_bound_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"12345").unwrap();
        assert_eq!(
            read_bounded(&p, "a test file", 5, Accept::RegularFile).unwrap(),
            b"12345"
        );
        let e = read_bounded(&p, "a test file", 4, Accept::RegularFile).unwrap_err();
        assert!(matches!(e, ReadError::TooLarge { max: 4, .. }), "{e}");
        assert!(
            e.to_string().contains("the most a test file may have"),
            "{e}"
        );
    }

    #[test]
    fn devices_and_directories_are_refused_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        for accept in [Accept::RegularFile, Accept::FileOrPipe] {
            let e = read_bounded(Path::new("/dev/zero"), "x", 1 << 30, accept).unwrap_err();
            assert!(
                matches!(
                    e,
                    ReadError::NotAFile {
                        kind: "character device",
                        ..
                    }
                ),
                "{e}"
            );
            let e = read_bounded(dir.path(), "x", 10, accept).unwrap_err();
            assert!(
                matches!(
                    e,
                    ReadError::NotAFile {
                        kind: "directory",
                        ..
                    }
                ),
                "{e}"
            );
        }
    }

    #[test]
    fn a_fifo_is_refused_unopened_or_read_up_to_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        // No writer: a refusal must come without opening (which would block this test).
        let e = read_bounded(&fifo, "x", 10, Accept::RegularFile).unwrap_err();
        assert!(matches!(e, ReadError::NotAFile { kind: "FIFO", .. }), "{e}");
        // A writer that never stops: the read ends at the bound.
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                use std::io::Write;
                let mut f = std::fs::OpenOptions::new().write(true).open(fifo).unwrap();
                let block = [b'x'; 4096];
                // Ends with a broken pipe once the reader has closed.
                while f.write_all(&block).is_ok() {}
            })
        };
        let e = read_bounded(&fifo, "x", 100_000, Accept::FileOrPipe).unwrap_err();
        assert!(matches!(e, ReadError::TooLarge { .. }), "{e}");
        writer.join().unwrap();
    }
}
