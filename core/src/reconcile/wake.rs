//! Waking a poll as soon as one object changes: the front-end of [`ObjectWatch`] whose
//! changes only end a nap early. Every decision still comes from the caller's fresh read,
//! so a watch that is never opened, fails or lags costs only latency: the poll then reads
//! on its beat.

use std::fmt::Debug;
use std::time::Duration;

use futures::StreamExt as _;
use kube::Resource;
use kube::api::Api;
use serde::de::DeserializeOwned;

use super::watch::{Changes, ObjectWatch, deadline_after};

/// A watch on one object, used only as a wake-up.
pub struct Wake<K> {
    name: String,
    /// `None` once the watch failed: naps then last their whole length.
    changes: Option<Changes<K>>,
}

impl<K> Debug for Wake<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wake")
            .field("name", &self.name)
            .field("watching", &self.changes.is_some())
            .finish_non_exhaustive()
    }
}

impl<K> Wake<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    /// Watches the object `name` from `version` (changes after it wake the nap; `None`:
    /// the first nap ends at once, on the object as read). The watch is opened now.
    pub async fn watch(api: &Api<K>, name: &str, version: Option<&str>) -> Self {
        let mut watch = ObjectWatch::from_version(api, name, version);
        // A watch that cannot be opened is counted and logged by the watch itself.
        let changes = watch.open().await.ok().map(|()| watch.changes());
        Self {
            name: name.to_owned(),
            changes,
        }
    }

    /// Returns at the next change of the object, or after `most`, never later. A watch the
    /// server ended is opened again where it ended (within the nap); one that failed is
    /// dropped, and this and later naps last their whole length.
    pub async fn nap(&mut self, most: Duration) {
        let until = deadline_after(most);
        if let Some(changes) = self.changes.as_mut() {
            match tokio::time::timeout_at(until, changes.next()).await {
                Ok(Some(Ok(_))) | Err(_) => return,
                Ok(Some(Err(e))) => {
                    tracing::debug!(object = %self.name, error = %e, "polling instead");
                }
                Ok(None) => {}
            }
            self.changes = None;
        }
        tokio::time::sleep_until(until).await;
    }
}
