//! `/healthz` (the process serves), `/readyz` (the last lease list succeeded) and
//! `/metrics` (OpenMetrics text), served by hyper's HTTP/1.1 server.
//!
//! Bounded, so that no client can starve the rest of the helper of file descriptors: at most
//! [`Limits::max_connections`] connections at once (the rest wait in the kernel's accept
//! queue, costing this process nothing), request headers within
//! [`Limits::header_read_timeout`], a whole connection within
//! [`Limits::connection_timeout`], one request per connection, and a growing pause after a
//! failed accept (EMFILE) instead of a spin.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use super::metrics::Metrics;

/// The listener's bounds.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    pub header_read_timeout: Duration,
    pub connection_timeout: Duration,
}

impl Limits {
    /// At most 32 connections, and never more than a quarter of this process's file
    /// descriptor limit, so the API client and the registry always find one.
    pub fn for_this_process() -> Self {
        let fds = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
            .map_or(u64::MAX, |(soft, _)| soft);
        let quarter = usize::try_from(fds / 4).unwrap_or(usize::MAX);
        Self {
            max_connections: quarter.clamp(1, 32),
            header_read_timeout: Duration::from_secs(5),
            connection_timeout: Duration::from_secs(15),
        }
    }
}

/// The first and the longest pause after a failed accept.
const ACCEPT_BACKOFF: (Duration, Duration) = (Duration::from_millis(10), Duration::from_secs(1));

/// Binds `addr` and serves in the background; returns the bound address and the task.
pub async fn serve(
    addr: SocketAddr,
    metrics: Metrics,
    limits: Limits,
) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let task = tokio::spawn(async move {
        let mut backoff = ACCEPT_BACKOFF.0;
        loop {
            // A slot first: past the cap, connections stay queued in the kernel.
            let Ok(slot) = slots.clone().acquire_owned().await else {
                return;
            };
            let sock = match listener.accept().await {
                Ok((sock, _)) => {
                    backoff = ACCEPT_BACKOFF.0;
                    sock
                }
                Err(err) => {
                    tracing::warn!(error = %err, pause = ?backoff, "cannot accept a connection on the metrics listener; pausing");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(ACCEPT_BACKOFF.1);
                    continue;
                }
            };
            let m = metrics.clone();
            tokio::spawn(async move {
                let _slot = slot;
                let svc = service_fn(move |req: Request<Incoming>| {
                    let resp = respond(&m, req.uri().path());
                    async move { Ok::<_, Infallible>(resp) }
                });
                let conn = http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(limits.header_read_timeout)
                    .keep_alive(false)
                    .max_buf_size(16 * 1024)
                    .serve_connection(TokioIo::new(sock), svc);
                // Either way the connection is closed now.
                let _ = tokio::time::timeout(limits.connection_timeout, conn).await;
            });
        }
    });
    Ok((bound, task))
}

const PLAIN_TEXT: &str = "text/plain; charset=utf-8";

fn respond(m: &Metrics, path: &str) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match path {
        "/healthz" => (StatusCode::OK, PLAIN_TEXT, "ok\n".to_owned()),
        "/readyz" if m.api_ok() => (StatusCode::OK, PLAIN_TEXT, "ok\n".to_owned()),
        "/readyz" => (
            StatusCode::SERVICE_UNAVAILABLE,
            PLAIN_TEXT,
            "the API server was not reachable on the last pass\n".to_owned(),
        ),
        "/metrics" => (
            StatusCode::OK,
            vtsnap_core::metrics::OPENMETRICS_CONTENT_TYPE,
            m.render(),
        ),
        _ => (StatusCode::NOT_FOUND, PLAIN_TEXT, "not found\n".to_owned()),
    };
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_served_as_openmetrics() {
        let r = respond(&Metrics::default(), "/metrics");
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(
            r.headers()[header::CONTENT_TYPE],
            "application/openmetrics-text; version=1.0.0; charset=utf-8"
        );
        let r = respond(&Metrics::default(), "/healthz");
        assert_eq!(r.headers()[header::CONTENT_TYPE], PLAIN_TEXT);
    }
}
