//! Unix sockets at long paths. `sun_path` holds 108 bytes, and a pod's socket seen from the
//! node (`/var/lib/kubelet/pods/<uid>/volumes/kubernetes.io~empty-dir/vt-root/socket/
//! mysqlctl.sock`) is longer than that. A long path is reached through its directory's
//! open descriptor instead: `/proc/self/fd/<n>/<name>`.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// Longest path used as is (leaving room for the terminating NUL).
const MAX_DIRECT: usize = 100;

/// A path short enough for `sun_path`, and the directory handle that must stay open while
/// it is used.
pub fn short_path(path: &Path) -> io::Result<(Option<File>, PathBuf)> {
    if path.as_os_str().len() <= MAX_DIRECT {
        return Ok((None, path.to_path_buf()));
    }
    let dir = path.parent().ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, "socket path has no directory")
    })?;
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, "socket path has no file name")
    })?;
    let d = File::open(dir)?;
    let short = PathBuf::from(format!("/proc/self/fd/{}", d.as_raw_fd())).join(name);
    Ok((Some(d), short))
}

/// Connects to the unix socket at `path`, however long.
pub async fn connect(path: &Path) -> io::Result<tokio::net::UnixStream> {
    let (_dir, p) = short_path(path)?;
    tokio::net::UnixStream::connect(p).await
}

/// Binds a listener at `path`, however long.
pub fn bind(path: &Path) -> io::Result<tokio::net::UnixListener> {
    let (_dir, p) = short_path(path)?;
    tokio::net::UnixListener::bind(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn long_paths_connect_through_the_directory_descriptor() {
        let d = tempfile::tempdir().unwrap();
        let deep = d.path().join("a".repeat(60)).join("b".repeat(60));
        std::fs::create_dir_all(&deep).unwrap();
        let sock = deep.join("mysqlctl.sock");
        assert!(sock.as_os_str().len() > 108);
        let l = bind(&sock).unwrap();
        assert!(sock.exists(), "the socket file is at the long path");
        let (accepted, connected) = tokio::join!(l.accept(), connect(&sock));
        assert!(accepted.is_ok() && connected.is_ok());
    }
}
