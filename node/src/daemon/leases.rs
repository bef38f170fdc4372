//! Follows this node's fence leases with a watch (kube-runtime's reflector): a store of what
//! the API server last said, and a wake-up on every change, so a request written by a job
//! reaches the helper in one watch event rather than at the next poll.
//!
//! The store is only ever a hint of what to look at. It can be stale (a dropped watch, a
//! renewal not yet seen), so every action is decided again from a fresh GET of its lease
//! (see `Daemon::cycle`). A dropped watch is resumed by the watcher with backoff (it relists
//! when its resourceVersion is gone; bookmarks, on by default, keep that version fresh),
//! and the watchdog bounds every hold with no API at all.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::Notify;
use vtsnap_core::fence::{self, Fence};

use super::metrics::Metrics;

/// The leases labelled for one node, as last seen through the watch.
pub struct Leases {
    store: Store<Lease>,
    synced: Arc<AtomicBool>,
    changed: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Leases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leases")
            .field("synced", &self.synced())
            .field("seen", &self.store.state().len())
            .finish()
    }
}

impl Drop for Leases {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The lease watch: this node's leases, and a server-side timeout under the client's read
/// timeout. Without it a quiet watch (no lease changes for a minute, the usual case) is cut
/// by the read timeout, logged as a failure and resumed with backoff; found when the
/// helper first ran as a Pod.
fn watch_config(node: &str) -> watcher::Config {
    watcher::Config::default()
        .labels(&format!("{}={node}", fence::LABEL_NODE))
        .timeout(vtsnap_core::cli::MAX_WATCH_SECONDS)
}

impl Leases {
    /// Starts the watch of the leases labelled `vtsnap.io/node=<node>` in every namespace.
    pub fn follow(client: kube::Client, node: &str, metrics: Metrics) -> Self {
        let api: Api<Lease> = Api::all(client);
        let config = watch_config(node);
        let (store, writer) = reflector::store();
        let changed = Arc::new(Notify::new());
        let wake = changed.clone();
        let synced = Arc::new(AtomicBool::new(false));
        let listed = synced.clone();
        let stream = reflector::reflector(writer, watcher(api, config).default_backoff());
        let task = tokio::spawn(async move {
            let mut s = std::pin::pin!(stream);
            while let Some(e) = s.next().await {
                match e {
                    // Emitted as a (re)list begins, before the API server said anything.
                    Ok(watcher::Event::Init) => {}
                    Ok(e) => {
                        if matches!(e, watcher::Event::InitDone) {
                            listed.store(true, Ordering::SeqCst);
                        }
                        metrics.set_api_ok(true);
                        wake.notify_one();
                    }
                    Err(e) => {
                        metrics.set_api_ok(false);
                        metrics.watch_failed();
                        tracing::warn!(error = %e, "the watch of the fence leases failed; it is resumed with backoff");
                    }
                }
            }
        });
        Self {
            store,
            synced,
            changed,
            task,
        }
    }

    /// Whether the first full list has arrived: before that an absent lease says nothing.
    pub fn synced(&self) -> bool {
        self.synced.load(Ordering::SeqCst)
    }

    /// The leases as last seen, in a stable order.
    pub fn seen(&self) -> Vec<Arc<Lease>> {
        let mut all = self.store.state();
        all.sort_by_key(|l| (l.metadata.namespace.clone(), l.metadata.name.clone()));
        all
    }

    /// Resolves at the next change the watch delivers (at once if one came since the last
    /// call: a change during a cycle is never missed).
    pub async fn changed(&self) {
        self.changed.notified().await;
    }
}

/// How long until the earliest of `leases` expires, if any expires later than `now`: the
/// helper looks again then, because expiry is a change no watch event announces.
pub fn next_expiry(leases: &[Arc<Lease>], now: Timestamp) -> Option<Duration> {
    leases
        .iter()
        .filter_map(|l| Fence::from_lease(l).ok())
        .filter_map(|f| {
            let until = f.live_until_ms()?;
            // `expired` is strict (now > until): one millisecond past it is expired.
            let wait = until.saturating_add(1).saturating_sub(now.as_millisecond());
            u64::try_from(wait).ok().filter(|w| *w > 0)
        })
        .min()
        .map(Duration::from_millis)
}

/// When the daemon looks again without a watch event: at the earliest expiry, sooner after
/// a step that did not complete, and at the latest after `resync`.
pub fn next_wake(
    resync: Duration,
    retry: Duration,
    failed: bool,
    expiry: Option<Duration>,
) -> Duration {
    let mut wait = resync;
    if failed {
        wait = wait.min(retry);
    }
    if let Some(e) = expiry {
        wait = wait.min(e);
    }
    wait
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn lease(renew_ms: Option<i64>, secs: i32) -> Arc<Lease> {
        let ann: BTreeMap<String, String> = [
            (fence::ANN_TARGET_POD, "p"),
            (fence::ANN_TARGET_POD_UID, "u"),
            (fence::ANN_TABLET_ALIAS, "zone1-0000000101"),
            (fence::ANN_ORIGINAL_TYPE, "replica"),
            (fence::ANN_VTCTLD, "v:1"),
            (fence::ANN_REQUEST, "hold"),
            (fence::ANN_MAX_HOLD, "600"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let mut l = Lease::default();
        l.metadata.annotations = Some(ann);
        l.spec = Some(k8s_openapi::api::coordination::v1::LeaseSpec {
            lease_duration_seconds: Some(secs),
            renew_time: renew_ms.map(|ms| {
                k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
                    Timestamp::from_millisecond(ms).unwrap(),
                )
            }),
            ..Default::default()
        });
        Arc::new(l)
    }

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millisecond(ms).unwrap()
    }

    #[test]
    fn the_earliest_future_expiry_is_next() {
        let ls = [lease(Some(10_000), 20), lease(Some(5_000), 10)];
        // Expiries at 30 000 and 15 000 ms: the second, one millisecond past it.
        assert_eq!(
            next_expiry(&ls, at(12_000)),
            Some(Duration::from_millis(3_001))
        );
    }

    #[test]
    fn leases_already_expired_or_never_renewed_set_no_wake() {
        let ls = [lease(Some(0), 10), lease(None, 10)];
        assert_eq!(next_expiry(&ls, at(10_001)), None);
        // At the very millisecond it expires (`expired` is strict): one more to wait.
        assert_eq!(next_expiry(&ls, at(10_000)), Some(Duration::from_millis(1)));
    }

    #[test]
    fn a_lease_that_cannot_be_read_sets_no_wake() {
        let mut l = (*lease(Some(0), 10)).clone();
        l.metadata.annotations = None;
        assert_eq!(next_expiry(&[Arc::new(l)], at(0)), None);
    }

    #[test]
    fn the_wake_is_the_soonest_of_resync_retry_and_expiry() {
        let (resync, retry) = (Duration::from_secs(30), Duration::from_millis(500));
        assert_eq!(next_wake(resync, retry, false, None), resync);
        assert_eq!(next_wake(resync, retry, true, None), retry);
        let soon = Duration::from_millis(20);
        assert_eq!(next_wake(resync, retry, true, Some(soon)), soon);
        assert_eq!(
            next_wake(resync, retry, false, Some(Duration::from_secs(60))),
            resync
        );
        // A retry period longer than the resync never delays it.
        assert_eq!(next_wake(retry, resync, true, None), retry);
    }

    #[test]
    fn the_lease_watch_is_ended_by_the_server_before_the_read_timeout() {
        let c = watch_config("node-1");
        assert_eq!(c.label_selector.as_deref(), Some("vtsnap.io/node=node-1"));
        let t = c.timeout.expect("a server-side timeout");
        assert!(
            u64::from(t) + 5 <= vtsnap_core::cli::ApiTimeouts::DEFAULT.read.as_secs(),
            "the server must end the watch before the client's read timeout cuts it: {t} s"
        );
    }
}
