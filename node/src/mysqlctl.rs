//! mysqlctld's gRPC service over the pod's unix socket, as the node sees it
//! (`<kubelet>/pods/<uid>/volumes/kubernetes.io~empty-dir/vt-root/socket/mysqlctl.sock`),
//! and the check that mysqld itself answers on its socket.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use http::uri::PathAndQuery;
use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, Endpoint, Uri};
use tonic_prost::ProstCodec;
use vtsnap_core::mysqlctl::*;

#[derive(Debug, thiserror::Error)]
pub enum MysqlCtlError {
    #[error("mysqlctld socket {path} is missing")]
    SocketMissing { path: String },
    #[error("mysqlctld {path} {method}: {code:?}: {message}")]
    Rpc {
        path: String,
        method: &'static str,
        code: tonic::Code,
        message: String,
    },
    #[error("mysqlctld {path} {method}: no answer within {after:?}")]
    Timeout {
        path: String,
        method: &'static str,
        after: Duration,
    },
    #[error("mysqld on {socket} did not answer within {after:?}")]
    MysqldDown { socket: String, after: Duration },
    #[error("the Start call to mysqlctld ended abnormally: {0}")]
    Task(String),
}

/// A client for one pod's mysqlctld.
#[derive(Debug, Clone)]
pub struct MysqlCtl {
    path: PathBuf,
    channel: Channel,
}

impl MysqlCtl {
    /// Connects lazily to the unix socket at `path`.
    pub fn new(path: &Path) -> Result<Self, MysqlCtlError> {
        if !path.exists() {
            return Err(MysqlCtlError::SocketMissing {
                path: path.display().to_string(),
            });
        }
        let p = path.to_path_buf();
        let connector = tower::service_fn(move |_: Uri| {
            let p = p.clone();
            async move {
                Ok::<_, std::io::Error>(TokioIo::new(vtsnap_core::unixsock::connect(&p).await?))
            }
        });
        // The URI is required by the HTTP/2 layer but never dialled: the connector is.
        let channel =
            Endpoint::from_static("http://mysqlctld.local").connect_with_connector_lazy(connector);
        Ok(Self {
            path: path.to_path_buf(),
            channel,
        })
    }

    async fn call<Req, Resp>(
        &self,
        method: &'static str,
        req: Req,
        limit: Duration,
    ) -> Result<Resp, MysqlCtlError>
    where
        Req: prost::Message + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        let path = self.path.display().to_string();
        let mut grpc = tonic::client::Grpc::new(self.channel.clone());
        let call = async {
            grpc.ready()
                .await
                .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
            let pq = PathAndQuery::from_maybe_shared(format!("/{SERVICE}/{method}"))
                .map_err(|e| tonic::Status::internal(e.to_string()))?;
            grpc.unary(
                tonic::Request::new(req),
                pq,
                ProstCodec::<Req, Resp>::default(),
            )
            .await
        };
        match tokio::time::timeout(limit, call).await {
            Err(_) => Err(MysqlCtlError::Timeout {
                path,
                method,
                after: limit,
            }),
            Ok(Err(s)) => Err(MysqlCtlError::Rpc {
                path,
                method,
                code: s.code(),
                message: s.message().to_owned(),
            }),
            Ok(Ok(r)) => Ok(r.into_inner()),
        }
    }

    /// Stops mysqld cleanly and waits until it is down. mysqld then stays down until `Start`.
    pub async fn shutdown(&self, limit: Duration) -> Result<(), MysqlCtlError> {
        let req = ShutdownRequest {
            wait_for_mysqld: true,
            mysql_shutdown_timeout: Some(vtsnap_core::mysqlctl::Duration {
                seconds: i64::try_from(limit.as_secs()).unwrap_or(i64::MAX),
                nanos: 0,
            }),
        };
        let _: ShutdownResponse = self
            .call("Shutdown", req, limit + Duration::from_secs(5))
            .await?;
        Ok(())
    }

    /// Asks mysqlctld to start mysqld.
    pub async fn start(&self, limit: Duration) -> Result<(), MysqlCtlError> {
        let _: StartResponse = self.call("Start", StartRequest::default(), limit).await?;
        Ok(())
    }

    pub async fn version(&self, limit: Duration) -> Result<String, MysqlCtlError> {
        let r: VersionStringResponse = self
            .call("VersionString", VersionStringRequest {}, limit)
            .await?;
        Ok(r.version)
    }
}

pub use vtsnap_core::mysqlctl::mysqld_answers;

/// What [`start_unless_running`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Started {
    Started,
    /// mysqld already answered: `Start` was not sent.
    AlreadyRunning,
}

/// Starts mysqld through mysqlctld unless it already answers on `mysqld_socket`, then
/// waits until it does. A real mysqlctld that is sent `Start` while its mysqld runs
/// answers OK, then exits and takes that mysqld down with it (Vitess 24 with
/// `mysqld_safe`; docs/design.md §2), so a release never sends it to a running server.
///
/// mysqld answering is what a release waits for, not mysqlctld's reply: the real one
/// replies only when its own poll of the socket, once a second, finds mysqld up (up to a
/// second inside the fence window; docs/benchmarks.md). So the helper watches the socket
/// itself and is done when mysqld answers; the `Start` call runs on to its reply in the
/// background (never cancelled, as a dropped call would be), its failure logged. A reply
/// that comes first decides as before: an error fails the release.
pub async fn start_unless_running(
    mysqlctl_socket: &Path,
    mysqld_socket: &Path,
    limit: Duration,
) -> Result<Started, MysqlCtlError> {
    if mysqld_answers(mysqld_socket).await {
        return Ok(Started::AlreadyRunning);
    }
    let ctl = MysqlCtl::new(mysqlctl_socket)?;
    let mut call = tokio::spawn(async move { ctl.start(limit).await });
    let started = Instant::now();
    loop {
        tokio::select! {
            replied = &mut call => {
                match replied {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => return Err(e),
                    Err(e) => return Err(MysqlCtlError::Task(e.to_string())),
                }
                wait_for_mysqld(mysqld_socket, limit.saturating_sub(started.elapsed())).await?;
                return Ok(Started::Started);
            }
            () = tokio::time::sleep(ANSWER_POLL) => {
                if mysqld_answers(mysqld_socket).await {
                    let socket = mysqlctl_socket.display().to_string();
                    tokio::spawn(async move {
                        if let Ok(Err(e)) = call.await {
                            tracing::warn!(%socket, error = %e, "mysqld answers, but mysqlctld's Start failed");
                        }
                    });
                    return Ok(Started::Started);
                }
                if started.elapsed() >= limit {
                    call.abort();
                    return Err(MysqlCtlError::MysqldDown {
                        socket: mysqld_socket.display().to_string(),
                        after: limit,
                    });
                }
            }
        }
    }
}

/// How often a release looks for mysqld on its socket (a connect and a handshake read).
const ANSWER_POLL: Duration = Duration::from_millis(20);

/// Waits until mysqld answers on `socket`.
pub async fn wait_for_mysqld(socket: &Path, limit: Duration) -> Result<(), MysqlCtlError> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if mysqld_answers(socket).await {
            return Ok(());
        }
        tokio::time::sleep(ANSWER_POLL).await;
    }
    Err(MysqlCtlError::MysqldDown {
        socket: socket.display().to_string(),
        after: limit,
    })
}
