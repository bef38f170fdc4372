//! Waking a wait as soon as one object changes: a watch on that object (by name, from a
//! known resourceVersion) whose events only end a nap early. Every decision still comes
//! from a fresh read, so a watch that is never opened, fails or lags costs only latency:
//! the wait then reads on its poll's beat.

use std::fmt::Debug;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::{Stream, StreamExt as _};
use kube::Resource;
use kube::api::{Api, WatchEvent, WatchParams};
use serde::de::DeserializeOwned;

type Events<K> = Pin<Box<dyn Stream<Item = kube::Result<WatchEvent<K>>> + Send>>;

/// Watches this process could not open (refused, e.g. a Role without `watch`, or failed):
/// each turned a wait into a poll. Tests of an install assert it stays 0.
static FALLBACKS: AtomicU64 = AtomicU64::new(0);

/// How many waits of this process fell back from a watch to polling.
pub fn fallbacks() -> u64 {
    FALLBACKS.load(Ordering::Relaxed)
}

/// The server ends each watch after this long (under the client's 60 s limit on a
/// silent answer, see the README); the wake opens the next one where it ended.
const WATCH_SECONDS: u32 = 50;

/// A watch on one object, used only as a wake-up.
pub struct Wake<K> {
    api: Api<K>,
    name: String,
    /// The newest resourceVersion seen: a watch that ended resumes from there.
    version: String,
    events: Option<Events<K>>,
}

impl<K> Debug for Wake<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wake")
            .field("name", &self.name)
            .field("watching", &self.events.is_some())
            .finish_non_exhaustive()
    }
}

impl<K> Wake<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    /// Watches the object `name` from `version` (changes after it wake the nap).
    pub async fn watch(api: &Api<K>, name: &str, version: Option<&str>) -> Self {
        let mut w = Self {
            api: api.clone(),
            name: name.to_owned(),
            version: version.unwrap_or("0").to_owned(),
            events: None,
        };
        w.open().await;
        w
    }

    async fn open(&mut self) {
        let params = WatchParams::default()
            .fields(&format!("metadata.name={}", self.name))
            .timeout(WATCH_SECONDS);
        self.events = match self.api.watch(&params, &self.version).await {
            Ok(s) => Some(Box::pin(s)),
            Err(e) => {
                // Loud: a silent poll hides a missing RBAC verb and lengthens every wait.
                FALLBACKS.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(object = %self.name, error = %e, "cannot watch; polling instead");
                None
            }
        };
    }

    /// Returns at the next event on the object, or after `most`. A watch the server ended
    /// is opened again from the newest version seen; one that failed is dropped, and
    /// later naps last their whole length.
    pub async fn nap(&mut self, most: Duration) {
        let Some(events) = self.events.as_mut() else {
            tokio::time::sleep(most).await;
            return;
        };
        match tokio::time::timeout(most, events.next()).await {
            Ok(Some(Ok(event))) => {
                let version = match &event {
                    WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
                        o.meta().resource_version.clone()
                    }
                    WatchEvent::Bookmark(b) => Some(b.metadata.resource_version.clone()),
                    // 410 Gone and the like: the version is too old to resume from.
                    WatchEvent::Error(_) => {
                        self.events = None;
                        None
                    }
                };
                if let Some(v) = version {
                    self.version = v;
                }
            }
            Err(_) => {}
            Ok(Some(Err(_))) => self.events = None,
            Ok(None) => self.open().await,
        }
    }
}
