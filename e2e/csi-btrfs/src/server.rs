//! Serving the driver on a unix socket, the way CSI sidecars reach a driver
//! (`--csi-address=/run/csi/csi.sock`).

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::ids::NodeId;
use crate::service::{ControllerService, Driver, IdentityService, NodeService};
use crate::store::{Store, StoreError};

/// Where to listen: `unix:///abs/path.sock` (the CSI convention) or a bare absolute path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint(PathBuf);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    #[error("{0:?} is not unix:///absolute/path (only unix sockets are served)")]
    NotUnix(String),
}

impl FromStr for Endpoint {
    type Err = EndpointError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let path = s.strip_prefix("unix://").unwrap_or(s);
        if path.starts_with('/') && path.len() > 1 && !path.contains('\0') {
            Ok(Self(PathBuf::from(path)))
        } else {
            Err(EndpointError::NotUnix(s.to_owned()))
        }
    }
}

impl Endpoint {
    pub fn path(&self) -> &Path {
        &self.0
    }
}

/// What the driver needs to start.
#[derive(Debug, Clone)]
pub struct Config {
    pub endpoint: Endpoint,
    pub root: PathBuf,
    pub node_id: Option<NodeId>,
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{path} exists and is not a socket; refusing to replace it")]
    NotASocket { path: PathBuf },
    #[error("another server is answering on {path}")]
    InUse { path: PathBuf },
    #[error("cannot bind {path}: {source}")]
    Bind {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("serving {path}: {source}")]
    Transport {
        path: PathBuf,
        #[source]
        source: tonic::transport::Error,
    },
    #[error("the server task of {path} ended abnormally: {message}")]
    Task { path: PathBuf, message: String },
}

impl ServeError {
    /// A root that is not usable is refused before anything is touched.
    pub const fn exit(&self) -> vtsnap_core::exit::Exit {
        use vtsnap_core::exit::Exit;
        match self {
            ServeError::Store(StoreError::Root { .. })
            | ServeError::NotASocket { .. }
            | ServeError::InUse { .. } => Exit::Refused,
            _ => Exit::Failed,
        }
    }
}

/// A running driver. It listens from the moment [`start`] returns, so a client may
/// connect at once; dropping it stops the server and removes the socket.
#[derive(Debug)]
pub struct Serving {
    socket: PathBuf,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), tonic::transport::Error>>>,
}

/// Opens the store, binds the socket (replacing a stale one) and serves in the background.
/// Needs a tokio runtime (hence `async`, though nothing in it waits).
pub async fn start(cfg: &Config) -> Result<Serving, ServeError> {
    let store = Store::open(&cfg.root)?;
    let socket = cfg.endpoint.path().to_owned();
    clear_stale_socket(&socket)?;
    let listener = vtsnap_core::unixsock::bind(&socket).map_err(|source| ServeError::Bind {
        path: socket.clone(),
        source,
    })?;
    let driver = Arc::new(Driver::new(store, cfg.node_id.clone()));
    let (stop, stopped) = oneshot::channel::<()>();
    let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
    let task = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(IdentityService(Arc::clone(&driver)))
            .add_service(ControllerService(Arc::clone(&driver)))
            .add_service(NodeService(driver))
            .serve_with_incoming_shutdown(incoming, async {
                let _ = stopped.await;
            }),
    );
    Ok(Serving {
        socket,
        stop: Some(stop),
        task: Some(task),
    })
}

/// A socket left by a driver that died is removed; a live one, or anything that is not
/// a socket, is left alone.
fn clear_stale_socket(path: &Path) -> Result<(), ServeError> {
    let Ok(m) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    if !m.file_type().is_socket() {
        return Err(ServeError::NotASocket {
            path: path.to_owned(),
        });
    }
    let (_dir, short) =
        vtsnap_core::unixsock::short_path(path).map_err(|source| ServeError::Bind {
            path: path.to_owned(),
            source,
        })?;
    if std::os::unix::net::UnixStream::connect(&short).is_ok() {
        return Err(ServeError::InUse {
            path: path.to_owned(),
        });
    }
    std::fs::remove_file(path).map_err(|source| ServeError::Bind {
        path: path.to_owned(),
        source,
    })
}

impl Serving {
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Waits until the server ends by itself (it only does on an error).
    pub async fn wait(&mut self) -> Result<(), ServeError> {
        match self.task.as_mut() {
            Some(t) => {
                let r = t.await;
                self.task = None;
                self.flatten(r)
            }
            None => Ok(()),
        }
    }

    /// Stops accepting, lets calls in flight finish, and removes the socket.
    pub async fn stop(mut self) -> Result<(), ServeError> {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let r = match self.task.take() {
            Some(t) => {
                let r = t.await;
                self.flatten(r)
            }
            None => Ok(()),
        };
        let _ = std::fs::remove_file(&self.socket);
        r
    }

    fn flatten(
        &self,
        r: Result<Result<(), tonic::transport::Error>, tokio::task::JoinError>,
    ) -> Result<(), ServeError> {
        match r {
            Ok(Ok(())) => Ok(()),
            Ok(Err(source)) => Err(ServeError::Transport {
                path: self.socket.clone(),
                source,
            }),
            Err(e) => Err(ServeError::Task {
                path: self.socket.clone(),
                message: e.to_string(),
            }),
        }
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
            let _ = std::fs::remove_file(&self.socket);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_unix_sockets_at_absolute_paths() {
        for (s, p) in [
            ("unix:///run/csi/csi.sock", "/run/csi/csi.sock"),
            ("/run/csi/csi.sock", "/run/csi/csi.sock"),
        ] {
            assert_eq!(s.parse::<Endpoint>().unwrap().path(), Path::new(p));
        }
        for bad in [
            "tcp://127.0.0.1:1",
            "unix://relative.sock",
            "csi.sock",
            "unix://",
            "/",
        ] {
            assert!(bad.parse::<Endpoint>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn only_a_dead_socket_is_replaced() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("file");
        std::fs::write(&file, "x").unwrap();
        assert!(matches!(
            clear_stale_socket(&file),
            Err(ServeError::NotASocket { .. })
        ));
        assert!(file.exists());

        let live = d.path().join("live.sock");
        let _l = std::os::unix::net::UnixListener::bind(&live).unwrap();
        assert!(matches!(
            clear_stale_socket(&live),
            Err(ServeError::InUse { .. })
        ));

        let dead = d.path().join("dead.sock");
        drop(std::os::unix::net::UnixListener::bind(&dead).unwrap());
        clear_stale_socket(&dead).unwrap();
        assert!(!dead.exists());
        clear_stale_socket(&dead).unwrap();
    }
}
