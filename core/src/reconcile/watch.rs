//! One watch of one object, behind every wait on one object (docs/design.md §3.7): the
//! object's state as each change leaves it. [`super::wait_until`] judges each state by a
//! condition; [`super::Wake`] only ends a nap at the next one.
//!
//! - It never lists: the object is read with a GET and watched, by name, from that read's
//!   resourceVersion (or from a version the caller read), so a Role with `get` and `watch`
//!   suffices (the snapshot job may not list leases, charts/vtsnap/files/rbac.yaml).
//! - Each watch asks the server to end it within [`MAX_WATCH_SECONDS`], before the
//!   client's read timeout would cut it; one the server ended is opened again from the
//!   newest version seen, and one whose version is too old (410 Gone) reads the object again.
//! - A watch that cannot be opened is counted ([`fallbacks`]) and logged: the nap then
//!   lasts its poll's beat, and `wait_until` watches again after a pause; either hides a
//!   missing RBAC verb unless someone looks.

use std::fmt::Debug;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::{Stream, StreamExt as _};
use kube::Resource;
use kube::api::{Api, WatchEvent, WatchParams};
use kube::core::Status;
use serde::de::DeserializeOwned;
use tokio::time::Instant;

use crate::cli::MAX_WATCH_SECONDS;

/// Longer waits are this one (about 136 years): a deadline must not overflow.
const LONGEST_WAIT: Duration = Duration::from_secs(0xFFFF_FFFF);

/// The instant `wait` from now, for a wait of any length.
pub(crate) fn deadline_after(wait: Duration) -> Instant {
    Instant::now() + wait.min(LONGEST_WAIT)
}

/// Watches this process could not open (refused, e.g. a Role without `watch`, or failed):
/// each turned a wait into a poll. Tests of an install assert it stays 0.
static FALLBACKS: AtomicU64 = AtomicU64::new(0);

/// How many watches of this process could not be opened (each made a wait slower).
pub fn fallbacks() -> u64 {
    FALLBACKS.load(Ordering::Relaxed)
}

type Events<K> = Pin<Box<dyn Stream<Item = kube::Result<WatchEvent<K>>> + Send>>;

/// The object's states, one per change (`None`: deleted, or absent when read); the stream
/// ends after its first error.
pub(crate) type Changes<K> = Pin<Box<dyn Stream<Item = Result<Option<K>, WatchError>> + Send>>;

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

/// Why a watch ended before its wait did.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WatchError {
    #[error("cannot read the watched object: {0}")]
    Read(#[source] kube::Error),
    #[error("cannot open the watch: {0}")]
    Open(#[source] kube::Error),
    #[error("the watch broke: {0}")]
    Broke(#[source] kube::Error),
    #[error("the watch answered an error: {0}")]
    Answered(#[source] Box<Status>),
}

impl WatchError {
    /// The server's refusal (401 or 403), when the error is one that waiting may not change.
    /// Authorization answers the request that reads or opens; an error inside an open watch
    /// is watched past.
    pub(crate) fn refusal(&self) -> Option<Refusal> {
        let (Self::Read(kube::Error::Api(s)) | Self::Open(kube::Error::Api(s))) = self else {
            return None;
        };
        matches!(s.code, 401 | 403).then(|| Refusal {
            code: s.code,
            message: s.message.clone(),
        })
    }
}

/// One watch of the object `name`.
pub(crate) struct ObjectWatch<K> {
    api: Api<K>,
    name: String,
    /// Where the next watch starts: the newest resourceVersion seen (`""`: the object was
    /// absent, so the next watch starts from its current state); `None`: read it first.
    version: Option<String>,
    events: Option<Events<K>>,
}

impl<K> Debug for ObjectWatch<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectWatch")
            .field("name", &self.name)
            .field("version", &self.version)
            .field("open", &self.events.is_some())
            .finish_non_exhaustive()
    }
}

impl<K> ObjectWatch<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    /// A watch whose first state is the object as a GET reads it.
    pub(crate) fn read(api: &Api<K>, name: &str) -> Self {
        Self::from_version(api, name, None)
    }

    /// A watch of the changes after `version` (`None`: read the object first).
    pub(crate) fn from_version(api: &Api<K>, name: &str, version: Option<&str>) -> Self {
        Self {
            api: api.clone(),
            name: name.to_owned(),
            version: version.map(str::to_owned),
            events: None,
        }
    }

    /// Opens the watch now when it starts from a known version, so that the first wait on
    /// it does not pay for the opening.
    pub(crate) async fn open(&mut self) -> Result<(), WatchError> {
        match self.version.clone() {
            Some(version) if self.events.is_none() => self.start(&version).await,
            _ => Ok(()),
        }
    }

    /// The object as the next change leaves it.
    pub(crate) async fn next(&mut self) -> Result<Option<K>, WatchError> {
        loop {
            let Some(events) = self.events.as_mut() else {
                match self.version.clone() {
                    Some(version) => self.start(&version).await?,
                    None => return self.get().await,
                }
                continue;
            };
            match events.next().await {
                Some(Ok(WatchEvent::Added(o) | WatchEvent::Modified(o))) => {
                    self.seen(o.meta().resource_version.clone());
                    return Ok(Some(o));
                }
                Some(Ok(WatchEvent::Deleted(o))) => {
                    self.seen(o.meta().resource_version.clone());
                    return Ok(None);
                }
                Some(Ok(WatchEvent::Bookmark(b))) => self.seen(Some(b.metadata.resource_version)),
                Some(Ok(WatchEvent::Error(s))) if s.code == 410 => self.gone(),
                Some(Ok(WatchEvent::Error(s))) => return Err(self.ended(WatchError::Answered(s))),
                Some(Err(e)) => return Err(self.ended(WatchError::Broke(e))),
                // The server ended it (its timeout): the next one resumes where it ended.
                None => self.events = None,
            }
        }
    }

    /// As a stream, whose pending read or opening survives a caller that stops waiting for
    /// it (a nap that ends): the next wait goes on where it stopped.
    pub(crate) fn changes(self) -> Changes<K> {
        Box::pin(futures::stream::unfold(Some(self), |watch| async move {
            let mut watch = watch?;
            match watch.next().await {
                Ok(state) => Some((Ok(state), Some(watch))),
                Err(e) => Some((Err(e), None)),
            }
        }))
    }

    async fn get(&mut self) -> Result<Option<K>, WatchError> {
        let got = self
            .api
            .get_opt(&self.name)
            .await
            .map_err(WatchError::Read)?;
        let version = got.as_ref().and_then(|k| k.meta().resource_version.clone());
        self.version = Some(version.unwrap_or_default());
        Ok(got)
    }

    async fn start(&mut self, version: &str) -> Result<(), WatchError> {
        let params = WatchParams::default()
            .fields(&format!("metadata.name={}", self.name))
            .timeout(MAX_WATCH_SECONDS);
        match self.api.watch(&params, version).await {
            Ok(events) => {
                self.events = Some(Box::pin(events));
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.code == 410 => {
                self.gone();
                Ok(())
            }
            Err(e) => {
                // Loud: a silent fallback hides a missing RBAC verb and lengthens every wait.
                FALLBACKS.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(object = %self.name, error = %e, "cannot open a watch");
                Err(WatchError::Open(e))
            }
        }
    }

    fn seen(&mut self, version: Option<String>) {
        if let Some(v) = version {
            self.version = Some(v);
        }
    }

    /// The version is too old to resume from: read the object again.
    fn gone(&mut self) {
        self.events = None;
        self.version = None;
    }

    /// The watch failed: the caller decides whether to watch again (its front-end logs it).
    fn ended(&mut self, e: WatchError) -> WatchError {
        self.events = None;
        e
    }
}
