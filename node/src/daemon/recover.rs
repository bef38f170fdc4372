//! After a corrupt hold registry was moved aside: finds and ends a freeze that only the
//! lost part of the file could have said was this helper's.

use std::path::Path;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use vtsnap_core::fence::Fence;

use super::error::StepError;
use super::observe::{mysqld_container_id, node_of};
use super::registry::ThawError;
use super::watchdog::now_ms;
use super::{Daemon, pods};
use crate::cgroup::Cgroup;
use crate::fsfreeze;

impl Daemon {
    /// For a lease with no record: ends a freeze found on its target (the mysqld
    /// container's cgroup, FITHAW on the tablet volume). The record written then keeps the
    /// lease from being frozen again (as after the watchdog), and the lease is answered
    /// `failed`. True if something was ended; an error is an uncertain read, looked at
    /// again next cycle.
    pub(super) async fn recover_lost(&self, f: &Fence, moved_to: &Path) -> Result<bool, StepError> {
        let pods: Api<Pod> = Api::namespaced(self.kube.clone(), &f.namespace);
        let pod = match pods.get_opt(&f.target_pod).await {
            Ok(Some(p)) => p,
            Ok(None) => return Ok(false),
            Err(source) => {
                return Err(StepError::PodUnreadable {
                    pod: f.target_pod.clone(),
                    source,
                });
            }
        };
        if pod.metadata.uid.as_deref() != Some(f.target_pod_uid.as_str())
            || node_of(&pod) != self.cfg.node
        {
            return Ok(false);
        }
        let mut ended = false;
        if let Some(id) = mysqld_container_id(&pod) {
            let found = Cgroup::containing(&self.cfg.roots, &id).map_err(|source| {
                StepError::ContainerCgroup {
                    container: id.clone(),
                    source,
                }
            })?;
            if let Some((_, cg)) = found {
                let ctl = cg.open().map_err(ThawError::from)?;
                if ctl.is_frozen().map_err(ThawError::from)? {
                    ctl.thaw().map_err(ThawError::from)?;
                    ended = true;
                }
            }
        }
        if let Ok(m) =
            pods::volume_mount(&self.cfg.kubelet_dir, &f.target_pod_uid, f.tablet_alias.uid)
            && fsfreeze::open_to_thaw(&m).is_ok()
        {
            ended |= fsfreeze::open_to_thaw(&m)
                .and_then(|m| m.thaw())
                .map_err(ThawError::from)?;
        }
        if !ended {
            return Ok(false);
        }
        let mut e = self.new_entry(f, &pod);
        e.hold_since_ms = Some(now_ms());
        e.watchdog_released = true;
        self.reg.put(e)?;
        let why = StepError::LostHoldEnded {
            tablet: f.tablet_alias.clone(),
            moved_to: moved_to.to_owned(),
        };
        tracing::error!(error = %why, "a freeze no record covers was ended");
        self.report(f, why.state(), Some(&why.to_string())).await;
        Ok(true)
    }
}
