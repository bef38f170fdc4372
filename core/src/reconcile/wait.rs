//! Waiting on one object until a condition holds (docs/design.md §3.7): the front-end of
//! [`ObjectWatch`] that judges each state the watch gives.
//!
//! - A watch that breaks (a load balancer, an API server restart, a 500) is started again,
//!   from a fresh read, after a pause that grows to [`MAX_PAUSE`], until the limit.
//! - A 401 or 403 ends the wait once it is answered [`REFUSALS`] times in a row: a
//!   refusal that outlives a token refresh or an RBAC cache catching up is one no retry
//!   changes.
//! - At the limit the object is read once more and judged by the same condition.

use std::fmt::Debug;
use std::time::Duration;

use kube::{Api, Resource};
use serde::de::DeserializeOwned;

use super::Read;
use super::watch::{ObjectWatch, Refusal, WatchError, deadline_after};

/// The first pause before watching again; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(200);
const MAX_PAUSE: Duration = Duration::from_secs(5);
/// Refusals in a row that end the wait.
const REFUSALS: u32 = 3;
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
    /// The server refuses this client the read or the watch (401 or 403).
    Refused(Refusal),
}

/// Waits until `cond` holds for object `name` of `api`, at most `limit`.
pub async fn wait_until<K>(
    api: &Api<K>,
    name: &str,
    limit: Duration,
    cond: impl Fn(Option<&K>) -> bool,
) -> Waited<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + 'static,
{
    let deadline = deadline_after(limit);
    let mut pause = FIRST_PAUSE;
    let mut refusals = 0;
    let mut watch_error = None;
    loop {
        let watch = ObjectWatch::read(api, name);
        match tokio::time::timeout_at(deadline, watch_until(watch, &cond)).await {
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

/// The first state of one watch (its read, then each change) for which `cond` holds.
async fn watch_until<K>(
    mut watch: ObjectWatch<K>,
    cond: impl Fn(Option<&K>) -> bool,
) -> Result<Option<K>, WatchError>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + 'static,
{
    loop {
        let state = watch.next().await?;
        if cond(state.as_ref()) {
            return Ok(state);
        }
    }
}
