//! Waiting on one object, on a watch, until a condition holds. A watch that ends in an
//! error (a quiet object outlives the client's read timeout, the server restarts, a load
//! balancer cuts a long request) is started again until the limit; a refusal (401, 403)
//! ends the wait at once, since waiting cannot change it (docs/design.md §3.7).

use std::time::Duration;

use kube::runtime::wait::{self, await_condition};
use kube::runtime::watcher;
use kube::{Api, Resource};
use tokio::time::Instant;

use super::Read;

/// Pause between two watches, so that a server failing at once is not a hot loop.
const REWATCH_PAUSE: Duration = Duration::from_millis(200);

/// How a wait ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Waited<K> {
    /// The condition held: the object as it was then (`None`: it held on absence).
    Met(Option<K>),
    /// The limit passed first: the object as read then.
    TimedOut(Read<K>),
    /// The server refuses this client the watch (401 or 403).
    Refused(String),
}

/// Waits until `cond` holds for object `name` of `api`, at most `limit`.
pub async fn wait_until<K>(
    api: &Api<K>,
    name: &str,
    limit: Duration,
    cond: impl Fn(Option<&K>) -> bool + Clone + Send + 'static,
) -> Waited<K>
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let deadline = Instant::now() + limit;
    loop {
        let watched = await_condition(api.clone(), name, cond.clone());
        match tokio::time::timeout_at(deadline, watched).await {
            Ok(Ok(got)) => return Waited::Met(got),
            Ok(Err(e)) => {
                if let Some(refusal) = refusal(&e) {
                    return Waited::Refused(refusal);
                }
                tracing::debug!(object = name, error = %e, "watch ended; watching again");
                if tokio::time::timeout_at(deadline, tokio::time::sleep(REWATCH_PAUSE))
                    .await
                    .is_err()
                {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    Waited::TimedOut(Read::from_get(api.get_opt(name).await))
}

/// The server's refusal, when the error is one that no retry can change. Authorization
/// answers the request that opens a list or a watch; an error event inside an open watch
/// (a 410 when its resourceVersion is too old) is watched past.
fn refusal(e: &wait::Error) -> Option<String> {
    let wait::Error::ProbeFailed(w) = e;
    let status = match w {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => s.as_ref(),
        _ => return None,
    };
    matches!(status.code, 401 | 403).then(|| format!("{} {}", status.code, status.message))
}
