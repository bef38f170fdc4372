//! `FakeKube`: a stateful, in-memory Kubernetes API server for tests, because no real API
//! server can run here. It is a `tower::Service` that a real `kube::Client` talks to, so
//! the code under test is the production code.
//!
//! What it does, per the API conventions: objects of any kind (core and custom, stored as
//! JSON, keyed by group/plural/namespace/name); resourceVersion on every write and 409 on
//! a stale update or a duplicate create; 404; label and field selectors; merge, strategic
//! (treated as merge) and JSON patch; the `status` subresource (the main resource keeps
//! its status, `/status` changes only status); paginated LIST with continue tokens; watch
//! streams from a resourceVersion; finalizers and deletionTimestamp; generateName;
//! events.k8s.io/v1 Events validated as the real server validates them (the fields kube's
//! Recorder must fill, a note of at most 1 KiB, only `series` changing on a repeat).
//!
//! Where it differs from a real kube-apiserver (found by running the same code against
//! the real control plane of `make cluster-up`; the real-API tier in `e2e/suite` covers
//! each of these for real), kept because the fake exists for fault injection and for
//! situations a real server will not produce:
//! - a create keeps `metadata.creationTimestamp`, `deletionTimestamp` and `status` as sent
//!   (a real server sets the first, refuses to set the second and drops `status` of kinds
//!   with a status subresource), so tests can lay out snapshots of any age and terminating
//!   Pods; on a real server ages are real and status is the controllers' to write;
//! - no garbage collector (ownerReferences never cascade), no admission, no defaulting,
//!   and no schema validation of custom resources (a VolumeSnapshot without a source is
//!   accepted);
//! - strategic-merge and apply patches are applied as merge patches;
//! - an events.k8s.io/v1 Event is not also served as a core/v1 Event (a real server keeps
//!   both in one store, `regarding` read as `involvedObject`, `note` as `message`,
//!   `reportingController` as `reportingComponent`): tests read [`FakeKube::events`];
//! - a paginated LIST reads live state page by page (a real server serves every page from
//!   the snapshot of the first page's resourceVersion);
//! - PVCs are Bound and Pods Ready because the fixture says so; nothing provisions, binds
//!   or schedules, and no controller throttles (the real snapshot-controller does, at 5
//!   requests/s by default).
//!
//! Fault injection: [`Fault`] rules fail or delay the n-th request matching a predicate
//! with any status code, throttle it (429 with `Retry-After`), or drop the connection; [`FakeKube::set_down`] makes every request
//! fail as if the server were unreachable, and ends every open watch;
//! [`FakeKube::drop_watches`] ends the open watches alone (a server restart or a load
//! balancer cutting long requests). A watch whose reader falls too far behind is ended
//! too, as a real server ends a slow watcher, so clients must re-list. Every request is
//! logged for assertions.
//!
//! Files: `request` (what a request asks), `fault`, `route` (a request's way through),
//! `store` (the objects and direct access), one per verb family (`list`, `watch`,
//! `write` for create and delete, `patch` for update and patch), `reply`, `selector`,
//! `validate` (what the real server refuses of an Event).

mod fault;
mod http_front;
mod list;
mod patch;
mod reply;
mod request;
mod route;
mod selector;
mod store;
mod validate;
mod watch;
mod write;

pub use fault::{Fault, FaultAction, is, storm_every_other, storm_without_end};
pub use http_front::HttpFront;
pub use reply::FakeBody;
pub use request::{Logged, RequestInfo, Verb};
pub use route::FakeKubeService;
pub use selector::{FieldSelector, LabelSelector};
pub use store::merge_patch;

use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;
use tower::Layer;
use vtsnap_core::retry::{RetryLayer, RetryPolicy};

use store::{Event, State};

struct Inner {
    state: Mutex<State>,
    events: broadcast::Sender<Event>,
    /// Bumped by [`FakeKube::drop_watches`]: every watch stream open then ends.
    watch_epoch: tokio::sync::watch::Sender<u64>,
}

/// The fake API server. Cheap to clone; clones share state.
#[derive(Clone)]
pub struct FakeKube {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for FakeKube {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FakeKube")
    }
}

impl Default for FakeKube {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeKube {
    pub fn new() -> Self {
        let (events, _) = broadcast::channel(4096);
        Self {
            inner: Arc::new(Inner {
                state: Mutex::new(State::default()),
                events,
                watch_epoch: tokio::sync::watch::Sender::new(0),
            }),
        }
    }

    /// A real `kube::Client` whose requests this fake answers.
    pub fn client(&self) -> kube::Client {
        kube::Client::new(self.service(), "default")
    }

    /// As [`Self::client`], its requests logged as `program`'s (see `crate::rbac`).
    pub fn client_as(&self, program: &str) -> kube::Client {
        let service = FakeKubeService {
            inner: self.inner.clone(),
            client: Some(Arc::from(program)),
        };
        kube::Client::new(service, "default")
    }

    /// As [`Self::client_as`], with the programs' retry layer on top (docs/design.md §3.8),
    /// bounded by `policy`: what a program's client does against a busy API server. The
    /// other clients have no retries, so a single injected fault reaches the code under
    /// test as it is.
    pub fn client_with_retries(&self, program: &str, policy: RetryPolicy) -> kube::Client {
        let service = FakeKubeService {
            inner: self.inner.clone(),
            client: Some(Arc::from(program)),
        };
        kube::Client::new(RetryLayer::new(policy).layer(service), "default")
    }

    pub fn service(&self) -> FakeKubeService {
        FakeKubeService {
            inner: self.inner.clone(),
            client: None,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Arms a fault rule.
    pub fn fault(&self, f: Fault) {
        self.state().faults.push(f);
    }

    /// Calls `f` with every request matching `when` and the objects as they are at that
    /// moment, before any fault or handling (to check an invariant at each write).
    pub fn observe(
        &self,
        when: impl Fn(&RequestInfo) -> bool + Send + Sync + 'static,
        f: impl Fn(&RequestInfo, &FakeKube) + Send + Sync + 'static,
    ) {
        self.state().observers.push((Arc::new(when), Arc::new(f)));
    }

    pub fn clear_faults(&self) {
        self.state().faults.clear();
    }

    /// Ends every watch stream open now, as a dropped connection or an API server restart
    /// would; the clients' next watch requests go through the fault rules as usual.
    pub fn drop_watches(&self) {
        self.inner.watch_epoch.send_modify(|e| *e += 1);
    }

    /// With `down`, every request fails like an unreachable server, and the watches open
    /// now end (an unreachable server has no open connections).
    pub fn set_down(&self, down: bool) {
        self.state().down = down;
        if down {
            self.drop_watches();
        }
    }

    /// Every request so far.
    pub fn log(&self) -> Vec<Logged> {
        self.state().log.clone()
    }

    /// The successful writes so far, as `VERB plural ns/name`.
    pub fn writes(&self) -> Vec<String> {
        self.state()
            .log
            .iter()
            .filter(|l| l.info.verb.is_write() && l.status < 300)
            .map(|l| {
                format!(
                    "{:?} {} {}/{}",
                    l.info.verb,
                    l.info.plural,
                    l.info.namespace.clone().unwrap_or_default(),
                    l.info.name.clone().unwrap_or_default()
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
