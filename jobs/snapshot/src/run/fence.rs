//! The job's live fence: renewed every `duration/3` in the background; every write is a
//! read-modify-write with compare-and-swap, retried on conflicts (the node helper writes
//! the same lease).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use tokio::sync::Mutex;
use vtsnap_core::fence::client::{self, FenceClientError};
use vtsnap_core::fence::{NodeState, Request};

/// A fence this job holds. The background renewal lives exactly as long as the job's
/// handles: when the job ends or is killed, renewals stop and the lease expires.
#[derive(Debug, Clone)]
pub struct LiveFence {
    pub api: Api<Lease>,
    pub name: String,
    /// Our identity on the lease.
    pub holder: String,
    lock: Arc<Mutex<()>>,
    alive: Arc<()>,
    renewer: Arc<std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>>,
}

impl LiveFence {
    /// Wraps an acquired lease and starts renewing it.
    pub fn start(api: Api<Lease>, lease: &Lease, every: Duration) -> Self {
        let name = lease.metadata.name.clone().unwrap_or_default();
        let holder = lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.clone())
            .unwrap_or_default();
        let f = Self {
            api,
            name,
            holder,
            lock: Arc::default(),
            alive: Arc::new(()),
            renewer: Arc::default(),
        };
        // The renewer holds no strong handle: it stops once every handle of the job is gone.
        let alive = Arc::downgrade(&f.alive);
        let (api, name, holder, lock) = (
            f.api.clone(),
            f.name.clone(),
            f.holder.clone(),
            f.lock.clone(),
        );
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                if alive.upgrade().is_none() {
                    return;
                }
                let me = LiveFence {
                    api: api.clone(),
                    name: name.clone(),
                    holder: holder.clone(),
                    lock: lock.clone(),
                    alive: Arc::new(()),
                    renewer: Arc::default(),
                };
                if let Err(e) = me.update(None).await {
                    tracing::warn!(error = %e, "fence renewal failed; retrying");
                }
            }
        });
        if let Ok(mut r) = f.renewer.lock() {
            *r = Some(task);
        }
        f
    }

    /// Stops renewing (the lease then expires unless deleted).
    pub fn stop_renewing(&self) {
        if let Ok(mut r) = self.renewer.lock()
            && let Some(t) = r.take()
        {
            t.abort();
        }
    }

    /// Renews, and changes the request if given (core's one renew: compare-and-swap,
    /// conflicts retried, never someone else's lease).
    pub async fn update(&self, request: Option<Request>) -> Result<Lease, FenceClientError> {
        let _g = self.lock.lock().await;
        client::renew(&self.api, &self.name, &self.holder, request).await
    }

    /// Asks the node for `request` and waits until it reports `want`.
    pub async fn ask(
        &self,
        request: Request,
        want: NodeState,
        timeout: Duration,
    ) -> Result<Lease, FenceClientError> {
        self.update(Some(request)).await?;
        client::await_node(&self.api, &self.name, &self.holder, want, timeout).await
    }

    /// Stops renewing and deletes the lease (whatever its version: it is ours).
    pub async fn delete(&self) -> Result<(), FenceClientError> {
        self.stop_renewing();
        let _g = self.lock.lock().await;
        let l = self
            .api
            .get(&self.name)
            .await
            .map_err(|source| FenceClientError::Kube {
                lease: self.name.clone(),
                source,
            })?;
        client::delete_if_unchanged(
            &self.api,
            &self.name,
            l.metadata.resource_version.as_deref(),
        )
        .await
    }
}
