//! The retry layer of every program's Kubernetes client (docs/design.md §3.8): a busy
//! API server (429 from API Priority and Fairness, 5xx, a broken connection) gets a
//! bounded number of further attempts, with capped, jittered exponential backoff that
//! honours `Retry-After`; a write only when a repeat is harmless. Each retry is counted in
//! [`crate::metrics::api_retries`] and logged.

mod decide;
mod shape;

pub use decide::{
    Cause, Exhausted, Next, Outcome, Progress, Replay, RetryPolicy, Shape, Verb, judge,
};
pub use shape::shape_of;

use std::error::Error as StdError;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use kube::client::Body;
use tower::util::rng::{HasherRng, Rng};
use tower::{Layer, Service, ServiceExt};

type BoxError = Box<dyn StdError + Send + Sync>;

/// Adds [`Retry`] to a client's service stack.
#[derive(Debug, Clone, Copy)]
pub struct RetryLayer {
    policy: RetryPolicy,
}

impl RetryLayer {
    pub const fn new(policy: RetryPolicy) -> Self {
        Self { policy }
    }
}

impl<S> Layer<S> for RetryLayer {
    type Service = Retry<S>;

    fn layer(&self, inner: S) -> Retry<S> {
        Retry {
            inner,
            policy: self.policy,
        }
    }
}

/// A service that sends a request again as [`judge`] says.
#[derive(Debug, Clone)]
pub struct Retry<S> {
    inner: S,
    policy: RetryPolicy,
}

impl<S, B> Service<Request<Body>> for Retry<S>
where
    S: Service<Request<Body>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Send + 'static,
{
    type Response = Response<B>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<B>, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        // The ready service goes with this call; this one keeps a fresh clone.
        let fresh = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, fresh);
        Box::pin(attempts(ready, self.policy, req))
    }
}

async fn attempts<S, B>(
    mut inner: S,
    policy: RetryPolicy,
    req: Request<Body>,
) -> Result<Response<B>, BoxError>
where
    S: Service<Request<Body>, Response = Response<B>> + Send,
    S::Error: Into<BoxError>,
{
    let (parts, body) = req.into_parts();
    // kube's request bodies are in memory; one that is not (a stream) is sent once.
    let copy = body.try_clone();
    let bytes = match copy {
        Some(copy) => copy.collect_bytes().await.ok(),
        None => None,
    };
    let Some(bytes) = bytes else {
        tracing::debug!(method = %parts.method, path = parts.uri.path(), "request body not replayable: no retries");
        return inner
            .call(Request::from_parts(parts, body))
            .await
            .map_err(Into::into);
    };
    drop(body);
    let shape = shape_of(&parts, &bytes);
    let mut rng = HasherRng::new();
    let mut progress = Progress::default();
    let mut result = inner
        .call(rebuild(&parts, &bytes))
        .await
        .map_err(Into::into);
    loop {
        progress.tries += 1;
        match judge(shape, outcome(&result), progress, &policy, rng.next_f64()) {
            Next::Return => return result,
            Next::GiveUp { cause, why } => {
                tracing::warn!(
                    verb = shape.verb.as_str(),
                    path = parts.uri.path(),
                    code = cause.code(),
                    attempts = progress.tries,
                    waited = ?progress.waited,
                    why = <&str>::from(why),
                    "Kubernetes API: giving up"
                );
                return result;
            }
            Next::Retry { wait, cause } => {
                let status = match &result {
                    Ok(r) => r.status().to_string(),
                    Err(e) => e.to_string(),
                };
                tracing::warn!(
                    verb = shape.verb.as_str(),
                    path = parts.uri.path(),
                    %status,
                    attempt = progress.tries,
                    wait = ?wait,
                    "Kubernetes API busy: retrying"
                );
                crate::metrics::count_api_retry(shape.verb.as_str(), cause.code());
                drop(result);
                tokio::time::sleep(wait).await;
                progress.waited += wait;
                result = send(&mut inner, rebuild(&parts, &bytes)).await;
            }
        }
    }
}

/// One more attempt, once the service is ready.
async fn send<S, B>(inner: &mut S, req: Request<Body>) -> Result<Response<B>, BoxError>
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Error: Into<BoxError>,
{
    let ready = inner.ready().await.map_err(Into::into)?;
    ready.call(req).await.map_err(Into::into)
}

/// The request again, from its parts and body.
fn rebuild(parts: &http::request::Parts, body: &Bytes) -> Request<Body> {
    let mut req = Request::new(Body::from(body.clone()));
    *req.method_mut() = parts.method.clone();
    *req.uri_mut() = parts.uri.clone();
    *req.version_mut() = parts.version;
    *req.headers_mut() = parts.headers.clone();
    *req.extensions_mut() = parts.extensions.clone();
    req
}

/// The decider's view of an attempt's result.
fn outcome<B>(result: &Result<Response<B>, BoxError>) -> Outcome {
    match result {
        Ok(resp) => Outcome::Answered {
            code: resp.status().as_u16(),
            retry_after: retry_after(resp.headers()),
        },
        Err(e) if timed_out(e.as_ref()) => Outcome::TimedOut,
        Err(e) if unreached(e.as_ref()) => Outcome::Unreached,
        Err(_) => Outcome::Transport,
    }
}

/// `Retry-After` in seconds (the form the API server sends; a date is not read).
fn retry_after(headers: &http::HeaderMap) -> Option<Duration> {
    let v = headers.get(http::header::RETRY_AFTER)?.to_str().ok()?;
    v.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// Whether any error in the chain is a timeout (hyper-timeout's connect and read bounds
/// end with an I/O `TimedOut`).
fn timed_out(e: &(dyn StdError + 'static)) -> bool {
    std::iter::successors(Some(e), |&e| e.source()).any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
            || e.is::<tokio::time::error::Elapsed>()
    })
}

/// Whether the connection was never made: hyper's connect error, or a refusal.
fn unreached(e: &(dyn StdError + 'static)) -> bool {
    std::iter::successors(Some(e), |&e| e.source()).any(|e| {
        e.downcast_ref::<hyper_util::client::legacy::Error>()
            .is_some_and(hyper_util::client::legacy::Error::is_connect)
            || e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_only() {
        let h = |v: &str| {
            let mut m = http::HeaderMap::new();
            m.insert(http::header::RETRY_AFTER, v.parse().unwrap());
            retry_after(&m)
        };
        assert_eq!(h("3"), Some(Duration::from_secs(3)));
        assert_eq!(h(" 1 "), Some(Duration::from_secs(1)));
        assert_eq!(h("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(h("-1"), None);
        assert_eq!(retry_after(&http::HeaderMap::new()), None);
    }

    #[test]
    fn a_timeout_anywhere_in_the_chain_is_a_timeout() {
        #[derive(Debug, thiserror::Error)]
        #[error("client error")]
        struct Outer(#[source] std::io::Error);
        let t = Outer(std::io::Error::new(std::io::ErrorKind::TimedOut, "read"));
        assert!(timed_out(&t));
        let r = Outer(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "refused",
        ));
        assert!(!timed_out(&r));
    }
}
