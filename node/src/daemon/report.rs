//! Report: the node's answer on a lease (`node-state`, `node-error`, `node-probe`), and the
//! Events that announce a registry this helper cannot read.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use vtsnap_core::events::{EventType, Subject};
use vtsnap_core::fence::{ANN_NODE_ERROR, ANN_NODE_STATE, Fence, NodeState};

use super::{Daemon, registry};

/// The `reportingController` of the Events this helper records.
pub(super) const EVENT_COMPONENT: &str = "vtsnap-node";

/// The annotation the probe result is written to.
pub const ANN_NODE_PROBE: &str = "vtsnap.io/node-probe";

impl Daemon {
    /// Writes the node's answer (`node-state` / `node-error`) on the lease, compare-and-swap
    /// on its resourceVersion. The job renews the lease meanwhile, so a version conflict is
    /// expected: the answer is written again on the fresh version as long as the lease still
    /// asks the same request of the same pod — never as an answer to a request that changed
    /// in between. False if the answer could not be written (it is written again on the next
    /// pass); true also when it no longer applies.
    pub(super) async fn report(&self, f: &Fence, state: NodeState, error: Option<&str>) -> bool {
        self.answer(f, state, error, None).await
    }

    /// [`Self::report`], with the probe's result (`node-probe`) written in the same patch.
    pub(super) async fn answer(
        &self,
        f: &Fence,
        state: NodeState,
        error: Option<&str>,
        probe: Option<&str>,
    ) -> bool {
        const ATTEMPTS: usize = 5;
        // Not `vtsnap_core::reconcile::replace_with_retry`: the first write is a patch on the
        // version the decision was made from, with no GET first, and a re-read only checks
        // that the answer still applies; that loop would add a GET and PUT the whole lease.
        let api: Api<Lease> = Api::namespaced(self.kube.clone(), &f.namespace);
        let mut version = f.resource_version.clone();
        for _ in 0..ATTEMPTS {
            let mut annotations =
                json!({ANN_NODE_STATE: state.as_str(), ANN_NODE_ERROR: error.unwrap_or("")});
            if let Some(p) = probe {
                annotations[ANN_NODE_PROBE] = json!(p);
            }
            let patch = json!({"metadata": {
                "resourceVersion": version,
                "annotations": annotations
            }});
            match api
                .patch(&f.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return true,
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    let fresh = match api.get_opt(&f.name).await {
                        Ok(Some(l)) => l,
                        Ok(None) => return true,
                        Err(e) => {
                            tracing::warn!(error = %e, state = state.as_str(), "cannot re-read the lease to report; will retry");
                            return false;
                        }
                    };
                    match Fence::from_lease(&fresh) {
                        Ok(now)
                            if now.request == f.request
                                && now.target_pod_uid == f.target_pod_uid =>
                        {
                            version = fresh.metadata.resource_version.clone();
                        }
                        // The request changed: this answer is stale; the watch brings the new one.
                        _ => return true,
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, state = state.as_str(), "cannot report to the lease; will retry");
                    return false;
                }
            }
        }
        tracing::warn!(state = state.as_str(), lease = %f.key(), "the lease kept changing under the report; will retry");
        false
    }

    /// Reports the corrupt registry this start moved aside, once: a Warning Event on this
    /// node (the error log and the gauge are written at start).
    pub(super) async fn announce_set_aside(&self) {
        let Some(problem) = self.reg.set_aside() else {
            return;
        };
        if self.set_aside_announced.swap(true, Ordering::SeqCst) {
            return;
        }
        self.events
            .publish(
                &Subject::node(&self.cfg.node),
                EventType::Warning,
                "ReadRegistry",
                "HoldRegistryCorrupt",
                &problem.to_string(),
            )
            .await;
    }

    /// Reports each unreadable registry entry once per start: an error log and a Warning
    /// Event on its lease (or, with the lease gone, on this node). The metric counts them
    /// every cycle.
    pub(super) async fn announce_unreadable(
        &self,
        unreadable: &[registry::RegistryError],
        leases: &BTreeSet<String>,
    ) {
        for problem in unreadable {
            let Some(key) = problem.lease() else { continue };
            let new = self
                .announced
                .lock()
                .map(|mut a| a.insert(key.to_owned()))
                .unwrap_or(false);
            if !new {
                continue;
            }
            tracing::error!(lease = %key, error = %problem, "hold registry entry unreadable: kept, not released, not restored; fix or remove it by hand");
            let about = match key.split_once('/') {
                Some((ns, name)) if leases.contains(key) => Subject::lease(ns, name),
                _ => Subject::node(&self.cfg.node),
            };
            self.events
                .publish(
                    &about,
                    EventType::Warning,
                    "ReadRegistry",
                    "HoldRecordUnreadable",
                    &problem.to_string(),
                )
                .await;
        }
    }
}
