//! Act: runs the steps [`super::decide`] chose for one lease — check the target, probe,
//! stop, hold (freeze the container), fsfreeze, thaw, release — recording each change in
//! the hold registry before it is made, so the watchdog and a restarted helper can undo it.

use std::sync::Arc;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use vtsnap_core::fence::client::delete_if_unchanged;
use vtsnap_core::fence::put_back::{TabletChanges, put_tablet_back_at};
use vtsnap_core::fence::{Fence, NodeState};
use vtsnap_core::vtctld::client::CallLimits;
use vtsnap_core::vtctld::{TabletType, VtctldClient};

use super::Daemon;
use super::decide::{LeaseAfter, Step, TabletAfter};
use super::error::{ReleaseProblem, StepError};
use super::metrics::Cause;
use super::observe::{mysqld_container_id, node_of};
use super::pods;
use super::registry::{Entry, Freezes};
use super::watchdog::now_ms;
use crate::cgroup::Cgroup;
use crate::fsfreeze;
use crate::mysqlctl::{MysqlCtl, Started, start_unless_running};
use crate::probe;

impl Daemon {
    /// Runs `steps` in order until one does not complete (reported on the lease). False then.
    pub(super) async fn run_steps(&self, f: Option<&Fence>, key: &str, steps: Vec<Step>) -> bool {
        for step in steps {
            tracing::debug!(?step, "step");
            let result = match &step {
                Step::CheckTarget => self.check_target(f).await,
                Step::Probe => self.probe(f).await,
                Step::StopMysqld => self.stop_mysqld(key).await,
                Step::FreezeCgroup => self.freeze_cgroup(key),
                Step::FreezeFs => self.freeze_fs(key),
                Step::ThawCgroup => self.thaw_cgroup(key),
                Step::Release {
                    cause,
                    tablet,
                    lease,
                } => self.release(f, key, *cause, *tablet, *lease).await,
                Step::Report(state, msg) => match f {
                    Some(f) if !self.report(f, *state, msg.as_deref()).await => return false,
                    _ => Ok(()),
                },
            };
            if let Err(e) = result {
                let (state, msg) = (e.state(), e.to_string());
                tracing::warn!(?step, error = %msg, "step did not complete");
                if let Some(f) = f
                    && !matches!(e, StepError::NotAnswered { .. })
                {
                    self.report(f, state, Some(&msg)).await;
                }
                return false;
            }
        }
        true
    }

    async fn check_target(&self, f: Option<&Fence>) -> Result<(), StepError> {
        let Some(f) = f else { return Ok(()) };
        let pods: Api<Pod> = Api::namespaced(self.kube.clone(), &f.namespace);
        let pod = match pods.get_opt(&f.target_pod).await {
            Ok(Some(p)) => p,
            Ok(None) => {
                return Err(StepError::PodMissing {
                    pod: f.target_pod.clone(),
                });
            }
            Err(source) => {
                return Err(StepError::PodUnreadable {
                    pod: f.target_pod.clone(),
                    source,
                });
            }
        };
        if pod.metadata.uid.as_deref() != Some(f.target_pod_uid.as_str()) {
            return Err(StepError::PodReplaced {
                pod: f.target_pod.clone(),
            });
        }
        let node = node_of(&pod);
        if node != self.cfg.node {
            return Err(StepError::PodElsewhere {
                pod: f.target_pod.clone(),
                node,
                this: self.cfg.node.clone(),
            });
        }
        // Never the primary; and an uncertain answer is not a yes.
        let vt = VtctldClient::new(&f.vtctld, CallLimits::default()).map_err(|source| {
            StepError::Vtctld {
                tablet: f.tablet_alias.clone(),
                source,
            }
        })?;
        let tablet = vt.get_tablet(&f.tablet_alias).await.map_err(|source| {
            StepError::TabletUnconfirmed {
                tablet: f.tablet_alias.clone(),
                source,
            }
        })?;
        if tablet.r#type == TabletType::Primary as i32 {
            return Err(StepError::TabletIsPrimary {
                tablet: f.tablet_alias.clone(),
            });
        }
        self.reg.put(self.new_entry(f, &pod))?;
        Ok(())
    }

    /// The record of a lease this helper starts to serve, holding nothing yet.
    pub(super) fn new_entry(&self, f: &Fence, pod: &Pod) -> Entry {
        let sockets = pods::socket_dir(&self.cfg.kubelet_dir, &f.target_pod_uid);
        Entry {
            lease: f.key(),
            pod_uid: f.target_pod_uid.clone(),
            tablet_alias: f.tablet_alias.clone(),
            original_type: f.original_type,
            vtctld: f.vtctld.clone(),
            container_id: mysqld_container_id(pod),
            volume_mount: pods::volume_mount(
                &self.cfg.kubelet_dir,
                &f.target_pod_uid,
                f.tablet_alias.uid,
            )
            .ok(),
            mysqlctl_socket: sockets.join("mysqlctl.sock"),
            mysqld_socket: sockets.join("mysql.sock"),
            stopped_mysqld: false,
            mysqld_down: false,
            cgroup: None,
            fs_frozen: None,
            hold_since_ms: None,
            max_hold_secs: f.max_hold.as_secs(),
            watchdog_released: false,
        }
    }

    async fn probe(&self, f: Option<&Fence>) -> Result<(), StepError> {
        let Some(f) = f else { return Ok(()) };
        let mount =
            pods::volume_mount(&self.cfg.kubelet_dir, &f.target_pod_uid, f.tablet_alias.uid)
                .map_err(|source| StepError::Volume {
                    tablet: f.tablet_alias.clone(),
                    source,
                })?;
        let layout =
            probe::probe(&mount.join("vtdataroot"), f.tablet_alias.uid).map_err(|source| {
                StepError::Probe {
                    tablet: f.tablet_alias.clone(),
                    source,
                }
            })?;
        let layout = serde_json::to_string(&layout).unwrap_or_default();
        if self.answer(f, NodeState::Probed, None, Some(&layout)).await {
            Ok(())
        } else {
            Err(StepError::NotAnswered { lease: f.key() })
        }
    }

    fn entry(&self, key: &str) -> Result<Entry, StepError> {
        self.reg.get(key).ok_or_else(|| StepError::NoRecord {
            lease: key.to_owned(),
        })
    }

    async fn stop_mysqld(&self, key: &str) -> Result<(), StepError> {
        let mut e = self.entry(key)?;
        // Recorded first: if we die mid-call, the release still starts mysqld again.
        e.stopped_mysqld = true;
        self.reg.put(e.clone())?;
        let ctl = MysqlCtl::new(&e.mysqlctl_socket)?;
        ctl.shutdown(self.cfg.shutdown_timeout).await?;
        // Only now is mysqld known to be down: a Shutdown that failed is asked again.
        e.mysqld_down = true;
        Ok(self.reg.put(e)?)
    }

    fn freeze_cgroup(&self, key: &str) -> Result<(), StepError> {
        if self.skip_hold {
            tracing::warn!(
                lease = key,
                "hold skipped (test flag): mysqld can be restarted"
            );
            return Ok(());
        }
        let mut e = self.entry(key)?;
        let id = e
            .container_id
            .clone()
            .ok_or_else(|| StepError::NoContainerId {
                pod_uid: e.pod_uid.clone(),
            })?;
        let (_, cg) = Cgroup::containing(&self.cfg.roots, &id)
            .map_err(|source| StepError::ContainerCgroup {
                container: id.clone(),
                source,
            })?
            .ok_or_else(|| StepError::NoProcess {
                container: id.clone(),
            })?;
        // Opened before the freeze and kept: the thaw then needs no new file descriptor.
        let ctl = Arc::new(cg.open().map_err(|source| StepError::Freeze {
            container: id.clone(),
            source,
        })?);
        self.reg.keep(key, Some(ctl.clone()), None);
        // Recorded before freezing, so the watchdog and a restarted helper can thaw it.
        e.cgroup = Some(cg);
        e.hold_since_ms.get_or_insert(now_ms());
        self.reg.put(e.clone())?;
        if let Err(source) = ctl.freeze() {
            e.cgroup = None;
            let _ = self.reg.put(e);
            return Err(StepError::Freeze {
                container: id,
                source,
            });
        }
        Ok(())
    }

    fn freeze_fs(&self, key: &str) -> Result<(), StepError> {
        let mut e = self.entry(key)?;
        let m = e.volume_mount.clone().ok_or_else(|| StepError::NoMount {
            pod_uid: e.pod_uid.clone(),
        })?;
        fsfreeze::check_mount(&m, &self.cfg.host_root).map_err(StepError::MountRefused)?;
        // Opened before the freeze and kept: the thaw needs no new descriptor.
        let mount = Arc::new(fsfreeze::open(&m, &self.cfg.host_root)?);
        self.reg.keep(key, None, Some(mount.clone()));
        e.fs_frozen = Some(m);
        e.hold_since_ms.get_or_insert(now_ms());
        self.reg.put(e.clone())?;
        if let Err(err) = mount.freeze() {
            e.fs_frozen = None;
            let _ = self.reg.put(e);
            return Err(err.into());
        }
        Ok(())
    }

    fn thaw_cgroup(&self, key: &str) -> Result<(), StepError> {
        self.entry(key)?;
        match self
            .reg
            .end_freezes(key, Freezes::Cgroup)
            .into_iter()
            .next()
        {
            Some(err) => Err(err.into()),
            None => Ok(()),
        }
    }

    /// Every part is attempted even if an earlier one failed; the record stays until all succeed.
    async fn release(
        &self,
        f: Option<&Fence>,
        key: &str,
        cause: Cause,
        tablet: TabletAfter,
        lease: LeaseAfter,
    ) -> Result<(), StepError> {
        let before = self.reg.get(key);
        let mut problems = if before.is_some() {
            self.thaw_all(key)
        } else {
            Vec::new()
        };
        let mut record = self.reg.get(key);
        if let Some(e) = record.as_mut()
            && e.stopped_mysqld
        {
            problems.extend(self.start_mysqld_again(e).await);
        }
        if tablet == TabletAfter::PutBack {
            problems.extend(put_tablet_back(f, record.as_ref()).await);
        }
        if !problems.is_empty() {
            return Err(StepError::ReleaseIncomplete { problems });
        }
        // Local bookkeeping first, so whoever sees the lease change sees it done.
        if record.is_some() {
            self.forget_hold(key, before.as_ref(), cause)?;
        }
        if let Some(f) = f {
            self.settle_lease(f, lease).await?;
        }
        tracing::info!(cause = cause.as_str(), "released");
        Ok(())
    }

    /// Ends both freezes of the lease (container and file system).
    fn thaw_all(&self, key: &str) -> Vec<ReleaseProblem> {
        self.reg
            .end_freezes(key, Freezes::All)
            .into_iter()
            .map(ReleaseProblem::from)
            .collect()
    }

    /// `Start`s the mysqld this helper stopped and waits until it answers; then records it.
    async fn start_mysqld_again(&self, e: &mut Entry) -> Option<ReleaseProblem> {
        match start_unless_running(&e.mysqlctl_socket, &e.mysqld_socket, self.cfg.start_timeout)
            .await
        {
            Ok(Started::AlreadyRunning) => {
                tracing::info!(socket = %e.mysqld_socket.display(), "mysqld already answers: no Start sent");
            }
            Ok(Started::Started) => {}
            Err(err) => return Some(err.into()),
        }
        e.stopped_mysqld = false;
        e.mysqld_down = false;
        self.reg.put(e.clone()).err().map(ReleaseProblem::from)
    }

    /// Removes the lease's record and counts the hold it ended.
    fn forget_hold(
        &self,
        key: &str,
        before: Option<&Entry>,
        cause: Cause,
    ) -> Result<(), StepError> {
        self.reg.remove(key)?;
        // A freeze the watchdog already ended was counted then.
        if let Some(e) = before.filter(|e| e.frozen() || !e.watchdog_released) {
            self.metrics
                .released(cause, e.hold_since_ms.map_or(0, |s| now_ms() - s));
        }
        Ok(())
    }

    /// Deletes the lease (unless it changed), answers `released` on it, or leaves it.
    async fn settle_lease(&self, f: &Fence, lease: LeaseAfter) -> Result<(), StepError> {
        match lease {
            LeaseAfter::Delete => {
                let api: Api<Lease> = Api::namespaced(self.kube.clone(), &f.namespace);
                delete_if_unchanged(&api, &f.name, f.resource_version.as_deref())
                    .await
                    .map_err(|source| StepError::LeaseDelete {
                        lease: f.key(),
                        source: Box::new(source),
                    })?;
            }
            LeaseAfter::ReportReleased => {
                self.report(f, NodeState::Released, None).await;
            }
            LeaseAfter::Untouched => {}
        }
        Ok(())
    }
}

/// Puts the tablet back to the type the lease (or, with the lease gone, the record) names.
async fn put_tablet_back(f: Option<&Fence>, record: Option<&Entry>) -> Vec<ReleaseProblem> {
    let (vtctld, alias, original) = match (f, record) {
        (Some(f), _) => (&f.vtctld, &f.tablet_alias, f.original_type),
        (None, Some(e)) => (&e.vtctld, &e.tablet_alias, e.original_type),
        (None, None) => return Vec::new(),
    };
    // What the fence changed is not known here: undo all of it (idempotent).
    put_tablet_back_at(vtctld, alias, original, TabletChanges::ALL)
        .await
        .into_iter()
        .map(ReleaseProblem::from)
        .collect()
}
