//! `FakeMysqlctld`: mysqlctld's gRPC service (`mysqlctl.MysqlCtl`) on the pod's unix socket,
//! because vttablet's mysqlctld cannot run here. The RPC front runs in the test; the work
//! is done by the supervisor inside the MariaDB container
//! ([`crate::mariadb::MariaDb::start_supervised`]) through request files, so — as with the
//! real mysqlctld, which lives in the mysqld container — nothing can start mysqld while
//! that container's cgroup is frozen.
//!
//! It keeps the real one's contract as vtsnap sees it: `testkit/tests/mysqlctld_contract.rs`
//! runs one set of clauses against it and against a real mysqlctld (Vitess 24, MySQL 9.7):
//! - `Shutdown{wait_for_mysqld}` returns once mysqld is down (no pid file, no answer on its
//!   socket), and mysqld stays down until a `Start`; a `Shutdown` while down succeeds.
//! - `Start` returns once mysqld answers on its socket, or fails with DEADLINE_EXCEEDED
//!   after `start_timeout` (a fake's knob: the real one waits until the caller gives up).
//! - `Start` while mysqld answers is answered OK, and then mysqlctld exits and takes mysqld
//!   with it, killed, not shut down: the real one's `mysqld_safe` finds mysqld running and
//!   exits, which mysqlctld takes for mysqld's death, and the container's PID 1 ending
//!   kills the rest. The socket file stays; every later call fails UNAVAILABLE, and nothing
//!   here restarts either (a Pod's kubelet would restart the container). Not modelled: a
//!   `Start` while mysqld is still starting (not answering yet) is answered as a `Start`
//!   (the supervisor starts no second server), where the real one may exit too.
//! - `VersionString` answers `Ver <version> …` (a constant here).
//!
//! [`FakeMysqlctld::with_supervisor`] adds what the volume-snapshot RFC's proof of concept
//! saw: something calls `Start` a few seconds after every `Shutdown`. Its outcomes are
//! recorded, so a test can show that a hold (frozen container) defeats it. If mysqld runs
//! again by then, that `Start` makes mysqlctld exit, as any `Start` would.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tonic::body::Body;
use vtsnap_core::mysqlctl::*;

use crate::grpc::{self, HttpFuture};

/// How long `Start` waits for mysqld before giving up.
const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Debug, Clone)]
pub struct FakeMysqlctld {
    socket_dir: PathBuf,
    pid_file: PathBuf,
    start_timeout: Duration,
    calls: Arc<Mutex<Vec<String>>>,
    restart_after: Option<Duration>,
    start_reply_after: Duration,
    supervisor_starts: Arc<Mutex<Vec<bool>>>,
    timings: Arc<Mutex<Vec<(&'static str, Duration)>>>,
    /// Set when mysqlctld "exits" (a `Start` while mysqld answered); `serve` clears it.
    exited: Arc<tokio::sync::watch::Sender<bool>>,
}

/// The running server; stops (and removes its socket) when dropped.
#[derive(Debug)]
pub struct Serving {
    pub socket: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Serving {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

pub use vtsnap_core::mysqlctl::mysqld_answers as answers;

impl FakeMysqlctld {
    /// For the tablet whose directory on the host is `tablet_dir`, with the pod's
    /// `/vt/socket` at `socket_dir`.
    pub fn new(socket_dir: &Path, tablet_dir: &Path) -> Self {
        Self {
            socket_dir: socket_dir.to_path_buf(),
            pid_file: tablet_dir.join("mysql.pid"),
            start_timeout: DEFAULT_START_TIMEOUT,
            calls: Arc::default(),
            restart_after: None,
            start_reply_after: Duration::ZERO,
            supervisor_starts: Arc::default(),
            timings: Arc::default(),
            exited: Arc::new(tokio::sync::watch::Sender::new(false)),
        }
    }

    /// How long each completed `Shutdown` and `Start` RPC took, oldest first.
    pub fn timings(&self) -> Vec<(&'static str, Duration)> {
        self.timings.lock().map(|c| c.clone()).unwrap_or_default()
    }

    fn timed(&self, what: &'static str, since: Instant) {
        if let Ok(mut t) = self.timings.lock() {
            t.push((what, since.elapsed()));
        }
    }

    /// How long `Start` waits for mysqld before it fails.
    pub fn with_start_timeout(mut self, limit: Duration) -> Self {
        self.start_timeout = limit;
        self
    }

    /// `Start` answers `delay` after mysqld does: the real one finds mysqld up by polling
    /// its socket once a second (go/vt/mysqlctl/mysqld.go `wait`, Vitess v0.24.4).
    pub fn with_start_reply_after(mut self, delay: Duration) -> Self {
        self.start_reply_after = delay;
        self
    }

    /// A supervisor that calls `Start` `delay` after each completed `Shutdown`.
    pub fn with_supervisor(mut self, delay: Duration) -> Self {
        self.restart_after = Some(delay);
        self
    }

    /// The supervisor's `Start` calls so far, oldest first: whether each one got mysqld
    /// answering (it restarted mysqld) or failed.
    pub fn supervisor_starts(&self) -> Vec<bool> {
        self.supervisor_starts
            .lock()
            .map(|c| c.clone())
            .unwrap_or_default()
    }

    /// The RPCs and supervisor calls so far, oldest first, with a line for each failed
    /// `Shutdown` and each supervisor outcome.
    pub fn calls(&self) -> Vec<String> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }

    pub fn mysql_socket(&self) -> PathBuf {
        self.socket_dir.join("mysql.sock")
    }

    /// Serves on `<socket_dir>/mysqlctl.sock` until the returned [`Serving`] is dropped or
    /// mysqlctld exits (a `Start` while mysqld answers). Serving again is a new mysqlctld;
    /// the container an exit ended does not come back.
    pub async fn serve(&self) -> Serving {
        let socket = self.socket_dir.join("mysqlctl.sock");
        let _ = std::fs::remove_file(&socket);
        let listener = vtsnap_core::unixsock::bind(&socket).unwrap();
        let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
        self.exited.send_replace(false);
        let server = grpc::spawn_server(Service { fake: self.clone() }, incoming);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let mut exited = self.exited.subscribe();
        tokio::spawn(async move {
            tokio::select! {
                _ = stopped => {}
                _ = exited.wait_for(|e| *e) => {}
            }
            // The listener closes; the socket file stays, as a dead mysqlctld's does.
            let _ = server.send(());
        });
        Serving {
            socket,
            stop: Some(stop),
        }
    }

    /// Whether mysqlctld has exited (a `Start` while mysqld answered).
    pub fn exited(&self) -> bool {
        *self.exited.borrow()
    }

    /// What the real mysqlctld does after a `Start` while mysqld runs: it exits, and its
    /// container's PID 1 ending kills mysqld (the supervisor kills it and exits).
    fn exit(&self, who: &str) {
        self.log(&format!(
            "{who}: mysqld was running: mysqlctld exited and took mysqld with it"
        ));
        if let Err(e) = std::fs::write(self.socket_dir.join("exit-request"), b"") {
            self.log(&format!("{who}: cannot ask the supervisor to exit: {e}"));
        }
        self.exited.send_replace(true);
    }

    fn gone() -> tonic::Status {
        tonic::Status::unavailable("mysqlctld has exited")
    }

    fn log(&self, what: &str) {
        if let Ok(mut c) = self.calls.lock() {
            c.push(what.to_owned());
        }
    }

    async fn down(&self) -> bool {
        !self.pid_file.exists() && !answers(&self.mysql_socket()).await
    }

    async fn shutdown(&self, r: ShutdownRequest) -> Result<ShutdownResponse, tonic::Status> {
        if self.exited() {
            return Err(Self::gone());
        }
        self.log("Shutdown");
        std::fs::write(self.socket_dir.join("stop-request"), b"")
            .map_err(|e| tonic::Status::internal(e.to_string()))?;
        if !r.wait_for_mysqld {
            return Ok(ShutdownResponse {});
        }
        let limit = r
            .mysql_shutdown_timeout
            .map_or(Duration::from_secs(300), |d| {
                Duration::from_secs(u64::try_from(d.seconds).unwrap_or(300))
            });
        let start = Instant::now();
        while start.elapsed() < limit {
            if self.down().await {
                self.timed("Shutdown", start);
                self.arm_supervisor();
                return Ok(ShutdownResponse {});
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.log(&format!(
            "Shutdown failed: mysqld did not stop within {limit:?}"
        ));
        Err(tonic::Status::deadline_exceeded("mysqld did not stop"))
    }

    fn arm_supervisor(&self) {
        let Some(delay) = self.restart_after else {
            return;
        };
        let me = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let started = if me.exited() {
                me.log("Start (supervisor): mysqlctld has exited");
                false
            } else if answers(&me.mysql_socket()).await {
                // A restarter that sees mysqld up sends nothing: a `Start` now would take
                // mysqld down (see `exit`).
                me.log("Start (supervisor): mysqld already answers: not sent");
                false
            } else {
                me.log("Start (supervisor)");
                match me.start_or_exit("Start (supervisor)").await {
                    Ok(Started::Started) => {
                        me.log("Start (supervisor): mysqld answers");
                        true
                    }
                    Ok(Started::Exited) => false,
                    Err(_) => {
                        me.log("Start (supervisor): mysqld did not answer");
                        false
                    }
                }
            };
            if let Ok(mut v) = me.supervisor_starts.lock() {
                v.push(started);
            }
        });
    }

    async fn start(&self) -> Result<StartResponse, tonic::Status> {
        if self.exited() {
            return Err(Self::gone());
        }
        self.log("Start");
        let since = Instant::now();
        let r = self.start_or_exit("Start").await;
        if matches!(r, Ok(Started::Started)) {
            self.timed("Start", since);
        }
        r.map(|_| StartResponse {})
    }

    /// A `Start`: mysqld started and answering, or — when it already answered — the
    /// answer the real one gives before it exits.
    async fn start_or_exit(&self, who: &str) -> Result<Started, tonic::Status> {
        if answers(&self.mysql_socket()).await {
            self.exit(who);
            return Ok(Started::Exited);
        }
        self.start_mysqld().await.map(|_| Started::Started)
    }

    async fn start_mysqld(&self) -> Result<StartResponse, tonic::Status> {
        std::fs::write(self.socket_dir.join("start-request"), b"")
            .map_err(|e| tonic::Status::internal(e.to_string()))?;
        let start = Instant::now();
        while start.elapsed() < self.start_timeout {
            if answers(&self.mysql_socket()).await {
                tokio::time::sleep(self.start_reply_after).await;
                return Ok(StartResponse {});
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // The caller gave up: the request goes with it, as a cancelled call to a frozen
        // mysqlctld is never served. Left behind, the supervisor would start mysqld at the
        // thaw, behind the back of the release's own `Start`.
        let _ = std::fs::remove_file(self.socket_dir.join("start-request"));
        Err(tonic::Status::deadline_exceeded("mysqld did not start"))
    }
}

/// How a `Start` ended.
enum Started {
    Started,
    /// mysqld was already running: answered, then mysqlctld exited.
    Exited,
}

#[derive(Debug, Clone)]
struct Service {
    fake: FakeMysqlctld,
}

impl tonic::server::NamedService for Service {
    const NAME: &'static str = SERVICE;
}

impl tower::Service<http::Request<Body>> for Service {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = HttpFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let f = self.fake.clone();
        Box::pin(async move {
            // The async handlers run on a blocking-free path: decode, then await the work.
            let resp = match grpc::method(&req).as_str() {
                "Shutdown" => {
                    grpc::unary_async(req, move |r| {
                        let f = f.clone();
                        async move { f.shutdown(r).await }
                    })
                    .await
                }
                "Start" => {
                    grpc::unary_async(req, move |_: StartRequest| {
                        let f = f.clone();
                        async move { f.start().await }
                    })
                    .await
                }
                "VersionString" => {
                    grpc::unary(req, move |_: VersionStringRequest| {
                        if f.exited() {
                            return Err(FakeMysqlctld::gone());
                        }
                        Ok(VersionStringResponse {
                            version: "Ver 10.11 (fake mysqlctld)".into(),
                        })
                    })
                    .await
                }
                other => tonic::Status::unimplemented(format!("fake mysqlctld has no {other}"))
                    .into_http(),
            };
            Ok(resp)
        })
    }
}
