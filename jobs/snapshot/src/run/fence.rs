//! The job's live fence: renewed every `duration/3` in the background; every write is a
//! read-modify-write with compare-and-swap, retried on conflicts (the node helper writes
//! the same lease).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use tokio::sync::Mutex;
use vtsnap_core::fence::client::{self, FenceClientError};
use vtsnap_core::fence::{ANN_NODE_ERROR, ANN_NODE_STATE, ANN_REQUEST, NodeState, Request};

/// A fence this job holds. The background renewal lives exactly as long as the job's
/// handles: when the job ends or is killed, renewals stop and the lease expires.
#[derive(Debug, Clone)]
pub struct LiveFence {
    pub api: Api<Lease>,
    pub name: String,
    lock: Arc<Mutex<()>>,
    alive: Arc<()>,
    renewer: Arc<std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>>,
}

impl LiveFence {
    /// Wraps an acquired lease and starts renewing it.
    pub fn start(api: Api<Lease>, lease: &Lease, every: Duration) -> Self {
        let name = lease.metadata.name.clone().unwrap_or_default();
        let f = Self {
            api,
            name,
            lock: Arc::default(),
            alive: Arc::new(()),
            renewer: Arc::default(),
        };
        // The renewer holds no strong handle: it stops once every handle of the job is gone.
        let alive = Arc::downgrade(&f.alive);
        let (api, name, lock) = (f.api.clone(), f.name.clone(), f.lock.clone());
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                if alive.upgrade().is_none() {
                    return;
                }
                let me = LiveFence {
                    api: api.clone(),
                    name: name.clone(),
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

    /// Renews, and changes the request if given. Retries conflicts a few times.
    pub async fn update(&self, request: Option<Request>) -> Result<Lease, FenceClientError> {
        let _g = self.lock.lock().await;
        let mut last = None;
        for _ in 0..10 {
            let mut l =
                self.api
                    .get(&self.name)
                    .await
                    .map_err(|source| FenceClientError::Kube {
                        lease: self.name.clone(),
                        source,
                    })?;
            if let Some(s) = l.spec.as_mut() {
                s.renew_time = Some(MicroTime(Timestamp::now()));
            }
            if let Some(r) = request {
                let a = l.metadata.annotations.get_or_insert_with(Default::default);
                // A new request voids the node's answer to the previous one; otherwise a stale
                // `failed` would be read as the answer to this request.
                if a.get(ANN_REQUEST).map(String::as_str) != Some(r.to_string().as_str()) {
                    a.remove(ANN_NODE_STATE);
                    a.remove(ANN_NODE_ERROR);
                }
                a.insert(ANN_REQUEST.to_owned(), r.to_string());
            }
            match self
                .api
                .replace(&self.name, &PostParams::default(), &l)
                .await
            {
                Ok(l) => return Ok(l),
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    last = Some(FenceClientError::Conflict {
                        lease: self.name.clone(),
                    })
                }
                Err(source) => {
                    return Err(FenceClientError::Kube {
                        lease: self.name.clone(),
                        source,
                    });
                }
            }
        }
        Err(last.unwrap_or(FenceClientError::Conflict {
            lease: self.name.clone(),
        }))
    }

    /// Asks the node for `request` and waits until it reports `want`.
    pub async fn ask(
        &self,
        request: Request,
        want: NodeState,
        timeout: Duration,
    ) -> Result<Lease, FenceClientError> {
        let l = self.update(Some(request)).await?;
        client::await_node(&self.api, l, want, timeout).await
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
        client::delete(&self.api, &l).await
    }
}
