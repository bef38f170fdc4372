//! Waiting on one object, on a watch, until a condition holds (docs/design.md §3.7).
//!
//! - Each watch asks the server to end it within [`MAX_WATCH_SECONDS`], before the
//!   client's read timeout would cut it: a quiet object is watched again without an error.
//! - A watch that still breaks (a load balancer, an API server restart, a 500) is started
//!   again after a pause that grows to [`MAX_PAUSE`], until the limit.
//! - A 401 or 403 ends the wait once it is answered [`REFUSALS`] times in a row: a
//!   refusal that outlives a token refresh or an RBAC cache catching up is one no retry
//!   changes.
//! - At the limit the object is read once more and judged by the same condition.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt, future};
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Api, Resource};
use tokio::time::Instant;

use super::Read;
use crate::cli::MAX_WATCH_SECONDS;

/// The first pause before watching again; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(200);
const MAX_PAUSE: Duration = Duration::from_secs(5);
/// Refusals in a row that end the wait.
const REFUSALS: u32 = 3;
/// Longer limits are this one (about 136 years): the deadline must not overflow.
const LONGEST_WAIT: Duration = Duration::from_secs(0xFFFF_FFFF);
/// The last read at the limit waits no longer than this.
const LAST_READ_LIMIT: Duration = Duration::from_secs(10);

/// How a wait ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Waited<K> {
    /// The condition held: the object as it was then (`None`: it held on absence).
    Met(Option<K>),
    /// The limit passed first: the object as read then, and the last watch error, if
    /// the watches were failing.
    TimedOut {
        last: Read<K>,
        watch_error: Option<String>,
    },
    /// The server refuses this client the watch (401 or 403).
    Refused(Refusal),
}

/// The server's refusal: its status code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: u16,
    pub message: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.code, self.message)
    }
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
    let deadline = Instant::now() + limit.min(LONGEST_WAIT);
    let mut pause = FIRST_PAUSE;
    let mut refusals = 0;
    let mut watch_error = None;
    loop {
        match tokio::time::timeout_at(deadline, watch_until(api, name, cond.clone())).await {
            Ok(Ok(got)) => return Waited::Met(got),
            Ok(Err(ended)) => {
                match ended.refusal() {
                    Some(r) => {
                        refusals += 1;
                        if refusals >= REFUSALS {
                            return Waited::Refused(r);
                        }
                    }
                    None => refusals = 0,
                }
                tracing::debug!(object = name, error = %ended, "watch ended; watching again");
                watch_error = Some(ended.to_string());
                if tokio::time::timeout_at(deadline, tokio::time::sleep(pause))
                    .await
                    .is_err()
                {
                    break;
                }
                pause = (pause * 2).min(MAX_PAUSE);
            }
            Err(_) => break,
        }
    }
    let last = match tokio::time::timeout(LAST_READ_LIMIT, api.get_opt(name)).await {
        Ok(got) => Read::from_get(got),
        Err(_) => Read::Unreadable(format!("no answer within {LAST_READ_LIMIT:?}")),
    };
    // The condition may have come true between the last watch and the limit.
    match last {
        Read::Present(k) if cond(Some(&k)) => Waited::Met(Some(k)),
        Read::Absent if cond(None) => Waited::Met(None),
        last => Waited::TimedOut { last, watch_error },
    }
}

/// Why one watch ended before its condition held.
#[derive(Debug, thiserror::Error)]
enum WatchEnded {
    #[error(transparent)]
    Failed(watcher::Error),
    #[error("the watch stream ended")]
    Closed,
}

impl WatchEnded {
    /// The server's refusal, when the error is one that waiting cannot change.
    /// Authorization answers the request that opens a list or a watch; an error event
    /// inside an open watch (a 410 when its resourceVersion is too old) is watched past.
    fn refusal(&self) -> Option<Refusal> {
        let status = match self {
            Self::Failed(
                watcher::Error::InitialListFailed(kube::Error::Api(s))
                | watcher::Error::WatchStartFailed(kube::Error::Api(s))
                | watcher::Error::WatchFailed(kube::Error::Api(s)),
            ) => s.as_ref(),
            _ => return None,
        };
        matches!(status.code, 401 | 403).then(|| Refusal {
            code: status.code,
            message: status.message.clone(),
        })
    }
}

/// One watch of the object (the watcher lists and watches again as the server ends each
/// watch), until `cond` holds or the watch fails. What kube's `watch_object` and
/// `await_condition` do, but with the watch's `timeoutSeconds` set: they take no config.
async fn watch_until<K>(
    api: &Api<K>,
    name: &str,
    cond: impl Fn(Option<&K>) -> bool,
) -> Result<Option<K>, WatchEnded>
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let config = watcher::Config::default()
        .fields(&format!("metadata.name={name}"))
        .timeout(MAX_WATCH_SECONDS);
    // The object as each event leaves it: `None` when deleted, or when a (re)list did not
    // return it (a deletion whose event was missed).
    let states = watcher(api.clone(), config)
        .scan(false, |seen, event| {
            match &event {
                Ok(Event::Init) => *seen = false,
                Ok(Event::InitApply(_)) => *seen = true,
                _ => {}
            }
            future::ready(Some((*seen, event)))
        })
        .filter_map(|(seen, event)| {
            future::ready(match event {
                Ok(Event::Apply(k) | Event::InitApply(k)) => Some(Ok(Some(k))),
                Ok(Event::Delete(_)) => Some(Ok(None)),
                Ok(Event::InitDone) if !seen => Some(Ok(None)),
                Ok(Event::Init | Event::InitDone) => None,
                Err(e) => Some(Err(e)),
            })
        });
    let mut held = std::pin::pin!(states.try_filter(|state| future::ready(cond(state.as_ref()))));
    match held.try_next().await {
        Ok(Some(state)) => Ok(state),
        Ok(None) => Err(WatchEnded::Closed),
        Err(e) => Err(WatchEnded::Failed(e)),
    }
}
