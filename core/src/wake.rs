//! Waking a wait as soon as one object changes: a watch on that object (by name, from a
//! known resourceVersion) whose events only end a nap early. Every decision still comes
//! from a fresh read, so a watch that is never opened, ends or lags costs only latency:
//! the wait then reads on its poll's beat.

use std::fmt::Debug;
use std::pin::Pin;
use std::time::Duration;

use futures::{Stream, StreamExt as _};
use kube::api::{Api, WatchEvent, WatchParams};
use serde::de::DeserializeOwned;

type Events<K> = Pin<Box<dyn Stream<Item = kube::Result<WatchEvent<K>>> + Send>>;

/// A watch on one object, used only as a wake-up.
pub struct Wake<K> {
    events: Option<Events<K>>,
}

impl<K> Debug for Wake<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wake")
            .field("watching", &self.events.is_some())
            .finish()
    }
}

impl<K> Wake<K>
where
    K: Clone + DeserializeOwned + Debug + Send + 'static,
{
    /// No watch: every nap lasts its whole length.
    pub fn none() -> Self {
        Self { events: None }
    }

    /// Watches the object `name` from `version` (changes after it wake the nap).
    pub async fn watch(api: &Api<K>, name: &str, version: Option<&str>) -> Self {
        let params = WatchParams::default()
            .fields(&format!("metadata.name={name}"))
            .timeout(290);
        match api.watch(&params, version.unwrap_or("0")).await {
            Ok(s) => Self {
                events: Some(Box::pin(s)),
            },
            Err(e) => {
                tracing::debug!(object = name, error = %e, "no watch; polling instead");
                Self::none()
            }
        }
    }

    /// Whether a watch is still open.
    pub fn watching(&self) -> bool {
        self.events.is_some()
    }

    /// Returns at the next event on the object, or after `most`. A watch that ends or
    /// fails is dropped: later naps last their whole length.
    pub async fn nap(&mut self, most: Duration) {
        let Some(events) = self.events.as_mut() else {
            tokio::time::sleep(most).await;
            return;
        };
        match tokio::time::timeout(most, events.next()).await {
            Ok(Some(Ok(_))) | Err(_) => {}
            Ok(Some(Err(_)) | None) => self.events = None,
        }
    }
}
