//! The HTTPS server: `POST /mutate` (AdmissionReview), `/healthz`, `/readyz` (the caches
//! are filled), `/metrics`, and `/debug/shards` (the vtctld states reviews use, the input
//! of the offline `review --shards`).
//!
//! Bounded everywhere ([`Limits`]): a body above [`crate::admission::MAX_BODY`] is refused
//! (413), and the bodies held at once share one [`BodyBudget`] (a review waits briefly for
//! it, then is answered 503); the TLS handshake, an idle kept-alive connection and each whole request (head,
//! body, decision, answer) have deadlines; at most `max_connections` are served, and at the
//! cap the one that has waited longest on its client is closed for the newcomer, so a
//! flood of stalled connections cannot keep probes or reviews out. What a review leaves
//! besides its answer (metrics, log line, Event) is [`crate::report`]'s.

pub mod budget;
mod connections;
mod drill_metrics;
pub mod metrics;

pub use budget::{BodyBudget, BudgetError, Exhausted};
pub use connections::ConnectionMetrics;
pub use connections::{CloseReason, Limits};
use connections::{Registry, Slot, Watched};
pub use metrics::Metrics;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use vtsnap_core::config::Config;

use crate::admission::{self, MAX_BODY};
use crate::cache::Caches;
use crate::decide::Settings;
use crate::inventory::{Inventory, Overlay};
use crate::observe::Review;
use crate::report::{self, EventQueue, Refused};
use crate::review::review;

/// How long a cache miss may wait for a PVC read before the Pod is decided without it.
const PVC_READ_TIMEOUT: Duration = Duration::from_secs(1);

/// What every request handler shares.
pub struct App {
    pub config: Arc<Config>,
    pub settings: Settings,
    pub caches: Caches,
    pub client: kube::Client,
    pub metrics: Metrics,
    events: EventQueue,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("caches", &self.caches)
            .finish_non_exhaustive()
    }
}

impl App {
    /// The app and the task that records its Events.
    pub fn new(
        config: Arc<Config>,
        settings: Settings,
        caches: Caches,
        client: kube::Client,
    ) -> (Arc<Self>, tokio::task::JoinHandle<()>) {
        let (events, task) = EventQueue::start(client.clone());
        (
            Arc::new(Self {
                config,
                settings,
                caches,
                client,
                metrics: Metrics::default(),
                events,
            }),
            task,
        )
    }

    /// A Pod's data PVC when the cache does not have it yet (the operator creates the
    /// PVC first, but the watch may lag): one GET, bounded.
    async fn pvc_for(&self, observed: &Review) -> Option<PersistentVolumeClaim> {
        let claim = observed.pod_data_claim()?;
        if self.caches.pvc(&observed.namespace, claim).is_some() {
            return None;
        }
        let api: Api<PersistentVolumeClaim> =
            Api::namespaced(self.client.clone(), &observed.namespace);
        match tokio::time::timeout(PVC_READ_TIMEOUT, api.get_opt(claim)).await {
            Ok(Ok(p)) => p,
            Ok(Err(e)) => {
                tracing::warn!(pvc = %claim, error = %e, "reading the Pod's PVC failed");
                None
            }
            Err(_) => {
                tracing::warn!(pvc = %claim, "reading the Pod's PVC timed out");
                None
            }
        }
    }

    /// read → observe (a PVC the caches lack read here) → decide and answer → report.
    async fn mutate(&self, body: &[u8]) -> Response<Full<Bytes>> {
        let req = match admission::parse(body) {
            Ok(r) => r,
            Err(e) => {
                report::refused(&self.metrics, &Refused::Unreadable(&e));
                return text(
                    StatusCode::BAD_REQUEST,
                    &format!("unreadable AdmissionReview: {e}\n"),
                );
            }
        };
        let observed = Review::observe(&req);
        let extra = self.pvc_for(&observed).await;
        let overlay = Overlay::new(&self.caches, extra);
        let answered = review(
            &req,
            &observed,
            &self.config,
            &self.settings,
            &overlay,
            Timestamp::now(),
        )
        .and_then(|(answer, d)| Ok((answer.to_json()?, d)));
        match answered {
            Ok((answer, decision)) => {
                report::reviewed(&self.metrics, &self.events, &req, &decision);
                with_type(StatusCode::OK, "application/json", answer)
            }
            Err(e) => {
                report::unanswered(&e);
                text(StatusCode::INTERNAL_SERVER_ERROR, &format!("{e}\n"))
            }
        }
    }

    /// Answers one request; `slot` is told when the request has been read.
    async fn handle(
        self: Arc<Self>,
        req: Request<Incoming>,
        slot: &Slot,
        budget: &BodyBudget,
    ) -> Response<Full<Bytes>> {
        let (parts, body) = req.into_parts();
        if parts.method != Method::POST {
            slot.deciding();
        }
        match (&parts.method, parts.uri.path()) {
            (&Method::POST, "/mutate") => {
                let mut held = budget.reserve();
                let read = read_body(&parts.headers, body, &mut held).await;
                slot.deciding();
                match read {
                    // The reservation is kept until the answer is made: the parse is in it.
                    Ok(b) => self.mutate(&b).await,
                    Err(e) => {
                        let why = match &e {
                            BodyError::Budget(x) => Refused::BudgetExhausted(x),
                            BodyError::TooLarge | BodyError::Unreadable(_) => Refused::Body,
                        };
                        report::refused(&self.metrics, &why);
                        text(e.status(), &format!("{e}\n"))
                    }
                }
            }
            (&Method::GET, "/healthz") => text(StatusCode::OK, "ok\n"),
            (&Method::GET, "/readyz") if self.caches.synced() => text(StatusCode::OK, "ok\n"),
            (&Method::GET, "/readyz") => text(
                StatusCode::SERVICE_UNAVAILABLE,
                "the caches are not filled yet\n",
            ),
            (&Method::GET, "/metrics") => with_type(
                StatusCode::OK,
                vtsnap_core::metrics::OPENMETRICS_CONTENT_TYPE,
                self.metrics.render(&self.caches),
            ),
            (&Method::GET, "/debug/shards") => {
                let states: Vec<_> = self
                    .caches
                    .shard_states()
                    .read()
                    .map(|m| m.values().cloned().collect())
                    .unwrap_or_default();
                match serde_json::to_string(&states) {
                    Ok(body) => with_type(StatusCode::OK, "application/json", body),
                    Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, &format!("{e}\n")),
                }
            }
            (_, "/mutate" | "/healthz" | "/readyz" | "/metrics" | "/debug/shards") => {
                text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n")
            }
            _ => text(StatusCode::NOT_FOUND, "not found\n"),
        }
    }
}

/// Why a review's body was not read.
#[derive(Debug, thiserror::Error)]
enum BodyError {
    #[error("the review is larger than {MAX_BODY} bytes")]
    TooLarge,
    #[error(transparent)]
    Budget(Exhausted),
    #[error("the review could not be read: {0}")]
    Unreadable(hyper::Error),
}

impl BodyError {
    fn status(&self) -> StatusCode {
        match self {
            BodyError::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            BodyError::Budget(_) => StatusCode::SERVICE_UNAVAILABLE,
            BodyError::Unreadable(_) => StatusCode::BAD_REQUEST,
        }
    }
}

/// Reads a review's body under the shared budget: a declared `Content-Length` is taken
/// whole before any byte is read (one above [`MAX_BODY`] is refused unread), a chunked
/// body's bytes as each chunk arrives, before it is kept.
async fn read_body(
    headers: &http::HeaderMap,
    mut body: Incoming,
    held: &mut budget::Reservation<'_>,
) -> Result<Bytes, BodyError> {
    let declared = headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(n) = declared {
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        if n > MAX_BODY {
            return Err(BodyError::TooLarge);
        }
        held.cover(n).await.map_err(BodyError::Budget)?;
    }
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(BodyError::Unreadable)?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let total = out.len() + data.len();
        if total > MAX_BODY {
            return Err(BodyError::TooLarge);
        }
        held.cover(total).await.map_err(BodyError::Budget)?;
        out.extend_from_slice(&data);
    }
    Ok(Bytes::from(out))
}

fn text(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    with_type(status, "text/plain; charset=utf-8", body.to_owned())
}

fn with_type(
    status: StatusCode,
    content_type: &'static str,
    body: String,
) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    r
}

/// How long in-flight reviews may take to finish once shutdown begins.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// [`serve_with`] with the default [`Limits`].
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Arc<App>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    serve_with(listener, tls, app, Limits::default(), shutdown).await;
}

/// Serves HTTPS on `listener` until `shutdown` resolves; then every connection is closed
/// (in-flight reviews are answered first, for at most [`DRAIN_TIMEOUT`]): the API server's
/// kept-alive connections do not outlive the webhook.
///
/// Every connection is accepted at once (none waits in the kernel's queue behind stalled
/// ones); past `limits.max_connections` the one that has waited longest on its client is
/// closed to make room.
pub async fn serve_with(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Arc<App>,
    limits: Limits,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let budget = Arc::new(BodyBudget::default());
    serve_budgeted(listener, tls, app, limits, budget, shutdown).await;
}

/// [`serve_with`] with the review bodies of every connection held within `budget`.
pub async fn serve_budgeted(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Arc<App>,
    limits: Limits,
    budget: Arc<BodyBudget>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let acceptor = TlsAcceptor::from(tls);
    let registry = Arc::new(Registry::default());
    let (closing, closed) = tokio::sync::watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = &mut shutdown => break,
        };
        // Finished connections are reaped as new ones come.
        while connections.try_join_next().is_some() {}
        let (tcp, peer): (_, SocketAddr) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // EMFILE and the like: pause instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(registered) = registry.admit(limits.max_connections, &app.metrics.connections)
        else {
            tracing::debug!(%peer, "every connection is deciding a review: closed at once");
            continue;
        };
        let acceptor = acceptor.clone();
        let app = app.clone();
        let closed = closed.clone();
        let budget = budget.clone();
        connections.spawn(async move {
            let slot = registered.slot.clone();
            let ended = tokio::select! {
                r = acceptor.accept(tcp) => match r {
                    Ok(s) => {
                        slot.handshake_done();
                        connection(s, app.clone(), &slot, &limits, budget, closed).await
                    }
                    Err(e) => {
                        tracing::debug!(%peer, error = %e, "TLS handshake failed");
                        None
                    }
                },
                reason = slot.ended(&limits) => Some(reason),
            };
            if let Some(reason) = ended {
                tracing::debug!(%peer, reason = reason.as_str(), "connection closed by the server");
                if reason != CloseReason::Evicted {
                    // An eviction was counted when it was decided.
                    app.metrics.connections.count_close(reason);
                }
            }
            drop(registered);
        });
    }
    drop(listener);
    let _ = closing.send(true);
    let drained = tokio::time::timeout(DRAIN_TIMEOUT + Duration::from_secs(1), async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        connections.abort_all();
    }
}

/// Serves HTTP/1.1 on one stream whose TLS is done: what [`serve_with`] does for each
/// connection, and how the request path is fuzzed without a network. Ends when the
/// client closes, a deadline of `limits` passes, or `closed` turns true.
pub async fn serve_stream<S>(
    stream: S,
    app: Arc<App>,
    limits: Limits,
    closed: tokio::sync::watch::Receiver<bool>,
) -> Option<CloseReason>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let slot = Slot::new();
    slot.handshake_done();
    let budget = Arc::new(BodyBudget::default());
    connection(stream, app, &slot, &limits, budget, closed).await
}

/// Serves one connection. `Some(reason)`: the server closed it.
async fn connection<S>(
    stream: S,
    app: Arc<App>,
    slot: &Arc<Slot>,
    limits: &Limits,
    budget: Arc<BodyBudget>,
    mut closed: tokio::sync::watch::Receiver<bool>,
) -> Option<CloseReason>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service_slot = slot.clone();
    let service = hyper::service::service_fn(move |r| {
        let (app, slot, budget) = (app.clone(), service_slot.clone(), budget.clone());
        async move {
            // A request read ahead with the previous one starts when it is handed over.
            slot.request_began();
            let answer = app.handle(r, &slot, &budget).await;
            slot.answered();
            Ok::<_, Infallible>(answer)
        }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        // The slot's deadlines bound the idle wait and the head; hyper's own would count
        // from the end of the previous answer and close a kept-alive connection early.
        .header_read_timeout(None)
        .serve_connection(TokioIo::new(Watched::new(stream, slot.clone())), service);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!(error = %e, "connection ended with an error");
            }
            None
        }
        reason = slot.ended(limits) => Some(reason),
        _ = closed.changed() => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(DRAIN_TIMEOUT, conn).await;
            None
        }
    }
}
