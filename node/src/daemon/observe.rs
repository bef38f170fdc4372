//! Observe: which leases need a look, a fresh read of one, and the facts read off a pod.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use vtsnap_core::fence::{self, Fence, NodeState};

use super::decide::{LeaseSeen, decide};
use super::{Daemon, pods, registry};

impl Daemon {
    /// Whether the watch's copy of a lease asks anything of this helper: an answer to
    /// write, a step to take, or a lost hold to look for. Decided from the copy only to
    /// know whether to read the lease again.
    pub(super) fn needs_look(
        &self,
        l: &Lease,
        key: &str,
        unreadable: &[registry::RegistryError],
        lost: bool,
    ) -> bool {
        let f = match Fence::from_lease(l) {
            Ok(f) => f,
            Err(e) => {
                tracing::error!(lease = %key, error = %e, "cannot read fence lease");
                return false;
            }
        };
        if unreadable.iter().any(|p| p.lease() == Some(key)) {
            return f.node_state != Some(NodeState::Failed);
        }
        let entry = self.reg.get(key);
        if lost && entry.is_none() {
            return true;
        }
        !decide(LeaseSeen::at(&f, Timestamp::now()), entry.as_ref()).is_empty()
    }

    /// A fresh read of lease `key` (`namespace/name`): `None` if it is gone or no longer
    /// labelled for this node; `Err` (logged) if the API cannot say.
    pub(super) async fn read_lease(&self, key: &str) -> Result<Option<Lease>, ()> {
        let (ns, name) = key.split_once('/').unwrap_or(("", key));
        let api: Api<Lease> = Api::namespaced(self.kube.clone(), ns);
        match api.get_opt(name).await {
            Ok(l) => Ok(l.filter(|l| {
                l.metadata
                    .labels
                    .as_ref()
                    .and_then(|m| m.get(fence::LABEL_NODE))
                    .is_some_and(|n| *n == self.cfg.node)
            })),
            Err(e) => {
                self.metrics.set_api_ok(false);
                tracing::warn!(lease = %key, error = %e, "cannot read fence lease; retrying");
                Err(())
            }
        }
    }
}

/// `namespace/name` of a lease, the key of its hold record.
pub(super) fn lease_key(l: &Lease) -> String {
    format!(
        "{}/{}",
        l.metadata.namespace.as_deref().unwrap_or_default(),
        l.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The node a pod is scheduled on ("" if none).
pub(super) fn node_of(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default()
}

/// The ID of the pod's mysqld container, as its cgroup path contains it.
pub(super) fn mysqld_container_id(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == "mysqld"))
        .and_then(|c| c.container_id.clone())
        .map(|raw| pods::container_id(&raw).to_owned())
}
