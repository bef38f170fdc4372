//! `vtsnap-node run`: serves the fence leases labelled `vtsnap.io/node=<this node>`.
//!
//! Every `interval` it observes (lists its leases), decides per lease ([`decide`], pure),
//! acts (the steps below) and reports (`node-state`/`node-error` on the lease, by
//! compare-and-swap). A lease that expired, was deleted or asks `release` is released:
//! thaw, unfreeze, `Start` mysqld if this helper stopped it, and — for expiry and deletion —
//! StartReplication and ChangeTabletType back to `original-type`. The [`watchdog`] thread
//! ends any freeze at max-hold even with the API server gone, and the [`registry`] on disk
//! lets a restarted helper pick up exactly where it was.

pub mod decide;
pub mod http;
pub mod metrics;
pub mod pods;
pub mod registry;
pub mod watchdog;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use serde_json::json;
use vtsnap_core::fence::{self, ANN_NODE_ERROR, ANN_NODE_STATE, Fence, NodeState};
use vtsnap_core::naming::TabletAlias;
use vtsnap_core::vtctld::client::CallLimits;
use vtsnap_core::vtctld::{TabletType, VtctldClient};

use crate::cgroup::{Cgroup, Roots};
use crate::mysqlctl::{MysqlCtl, wait_for_mysqld};
use crate::{fsfreeze, probe};
use decide::{Step, decide};
use metrics::{Cause, Metrics};
use registry::{Entry, Registry};
use watchdog::now_ms;

/// The annotation the probe result is written to.
pub const ANN_NODE_PROBE: &str = "vtsnap.io/node-probe";

#[derive(Debug, Clone)]
pub struct DaemonConfig {
    pub node: String,
    pub kubelet_dir: PathBuf,
    pub roots: Roots,
    pub state_dir: PathBuf,
    pub interval: Duration,
    pub listen: Option<SocketAddr>,
    /// How long a `Start` may take until mysqld answers.
    pub start_timeout: Duration,
    pub shutdown_timeout: Duration,
    /// Tests only: stop mysqld but do not freeze its container, so that whatever restarts
    /// mysqld (a supervisor's `Start`) can — to show what the hold prevents. Never set in
    /// the binary.
    pub skip_hold_for_tests: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Registry(#[from] registry::RegistryError),
    #[error("cannot start the watchdog thread: {0}")]
    Watchdog(std::io::Error),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// Why a step did not complete.
#[derive(Debug)]
enum StepError {
    /// A safety rule said no; final for this lease.
    Refused(String),
    /// Failed or uncertain; reported, and tried again next cycle.
    Failed(String),
}

struct Daemon {
    cfg: DaemonConfig,
    kube: kube::Client,
    reg: Registry,
    metrics: Metrics,
}

/// A running daemon.
#[derive(Debug)]
pub struct Handle {
    pub metrics: Metrics,
    pub addr: Option<SocketAddr>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
    watchdog: std::thread::JoinHandle<()>,
}

impl Handle {
    /// Stops the loop and the watchdog without releasing anything — what a crash or a
    /// SIGKILL leaves behind (the hold registry stays on disk).
    pub async fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        self.task.abort();
        let _ = self.task.await;
        let _ = tokio::task::spawn_blocking(move || self.watchdog.join()).await;
    }
}

/// Starts the watchdog, the health/metrics endpoint and the reconcile loop.
pub async fn start(cfg: DaemonConfig, kube: kube::Client) -> Result<Handle, DaemonError> {
    let reg = Registry::open(&cfg.state_dir)?;
    let metrics = Metrics::default();
    let stop = Arc::new(AtomicBool::new(false));
    // The watchdog first: it must run even if nothing else ever does.
    let watchdog = watchdog::spawn(
        reg.clone(),
        metrics.clone(),
        Duration::from_millis(100),
        stop.clone(),
    )
    .map_err(DaemonError::Watchdog)?;
    let addr = match cfg.listen {
        Some(a) => Some(
            http::serve(a, metrics.clone())
                .await
                .map_err(|source| DaemonError::Listen { addr: a, source })?,
        ),
        None => None,
    };
    let d = Daemon {
        cfg,
        kube,
        reg,
        metrics: metrics.clone(),
    };
    let s = stop.clone();
    let task = tokio::spawn(async move {
        while !s.load(Ordering::SeqCst) {
            d.cycle().await;
            tokio::time::sleep(d.cfg.interval).await;
        }
    });
    Ok(Handle {
        metrics,
        addr,
        stop,
        task,
        watchdog,
    })
}

impl Daemon {
    async fn cycle(&self) {
        let api: Api<Lease> = Api::all(self.kube.clone());
        let lp = ListParams::default().labels(&format!("{}={}", fence::LABEL_NODE, self.cfg.node));
        match vtsnap_core::discover::list_all(&api, &lp).await {
            Err(e) => {
                // Nothing is decided from an uncertain read; the watchdog still guards holds.
                self.metrics.set_api_ok(false);
                tracing::warn!(error = %e, "cannot list fence leases; retrying");
            }
            Ok(leases) => {
                self.metrics.set_api_ok(true);
                let now = Timestamp::now();
                let mut seen = BTreeMap::new();
                for l in &leases {
                    let key = format!(
                        "{}/{}",
                        l.metadata.namespace.clone().unwrap_or_default(),
                        l.metadata.name.clone().unwrap_or_default()
                    );
                    seen.insert(key.clone(), ());
                    match Fence::from_lease(l) {
                        Ok(f) => {
                            let span = tracing::info_span!("lease", lease = %key, tablet = %f.tablet_alias, request = %f.request);
                            let _g = span.enter();
                            let steps =
                                decide(Some(&f), f.expired(now), self.reg.get(&key).as_ref());
                            self.run_steps(Some(&f), &key, steps).await;
                        }
                        Err(e) => {
                            tracing::error!(lease = %key, error = %e, "cannot read fence lease")
                        }
                    }
                }
                for e in self.reg.all() {
                    if !seen.contains_key(&e.lease) {
                        let steps = decide(None, false, Some(&e));
                        self.run_steps(None, &e.lease.clone(), steps).await;
                    }
                }
            }
        }
        self.metrics
            .set_holds_active(self.reg.all().iter().filter(|e| e.frozen()).count());
        self.metrics.cycle();
    }

    async fn run_steps(&self, f: Option<&Fence>, key: &str, steps: Vec<Step>) {
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
                    restore_tablet,
                    delete_lease,
                    report,
                } => {
                    self.release(f, key, *cause, *restore_tablet, *delete_lease, *report)
                        .await
                }
                Step::Report(state, msg) => {
                    if let Some(f) = f {
                        self.report(f, *state, msg.as_deref()).await;
                    }
                    Ok(())
                }
            };
            if let Err(e) = result {
                let (state, msg) = match e {
                    StepError::Refused(m) => (NodeState::Refused, m),
                    StepError::Failed(m) => (NodeState::Failed, m),
                };
                tracing::warn!(?step, error = %msg, "step did not complete");
                if let Some(f) = f {
                    self.report(f, state, Some(&msg)).await;
                }
                return;
            }
        }
    }

    /// Writes `node-state` / `node-error`, compare-and-swap on the lease's resourceVersion.
    async fn report(&self, f: &Fence, state: NodeState, error: Option<&str>) {
        let api: Api<Lease> = Api::namespaced(self.kube.clone(), &f.namespace);
        let patch = json!({"metadata": {
            "resourceVersion": f.resource_version,
            "annotations": {ANN_NODE_STATE: state.as_str(), ANN_NODE_ERROR: error.unwrap_or("")}
        }});
        if let Err(e) = api
            .patch(&f.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            tracing::warn!(error = %e, state = state.as_str(), "cannot report to the lease; will retry");
        }
    }

    async fn check_target(&self, f: Option<&Fence>) -> Result<(), StepError> {
        let Some(f) = f else { return Ok(()) };
        let pods: Api<Pod> = Api::namespaced(self.kube.clone(), &f.namespace);
        let pod = match pods.get_opt(&f.target_pod).await {
            Ok(Some(p)) => p,
            Ok(None) => {
                return Err(StepError::Refused(format!(
                    "pod {} does not exist",
                    f.target_pod
                )));
            }
            Err(e) => {
                return Err(StepError::Failed(format!(
                    "cannot read pod {}: {e}",
                    f.target_pod
                )));
            }
        };
        if pod.metadata.uid.as_deref() != Some(f.target_pod_uid.as_str()) {
            return Err(StepError::Refused(format!(
                "pod {} is not the one the lease names (UID differs: replaced?)",
                f.target_pod
            )));
        }
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        if node != self.cfg.node {
            return Err(StepError::Refused(format!(
                "pod {} runs on node {node:?}, not {}",
                f.target_pod, self.cfg.node
            )));
        }
        // Never the primary; and an uncertain answer is not a yes.
        let vt = VtctldClient::new(&f.vtctld, CallLimits::default())
            .map_err(|e| StepError::Failed(e.to_string()))?;
        let tablet = vt.get_tablet(&f.tablet_alias).await.map_err(|e| {
            StepError::Failed(format!("cannot confirm the tablet is not the primary: {e}"))
        })?;
        if tablet.r#type == TabletType::Primary as i32 {
            return Err(StepError::Refused(format!(
                "tablet {} is the primary",
                f.tablet_alias
            )));
        }
        let container_id = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.name == "mysqld"))
            .and_then(|c| c.container_id.clone())
            .map(|raw| pods::container_id(&raw).to_owned());
        let sockets = pods::socket_dir(&self.cfg.kubelet_dir, &f.target_pod_uid);
        let entry = Entry {
            lease: f.key(),
            pod_uid: f.target_pod_uid.clone(),
            tablet_alias: f.tablet_alias.to_string(),
            original_type: f.original_type.name().to_owned(),
            vtctld: f.vtctld.clone(),
            container_id,
            volume_mount: pods::volume_mount(&self.cfg.kubelet_dir, &f.target_pod_uid).ok(),
            mysqlctl_socket: sockets.join("mysqlctl.sock"),
            mysqld_socket: sockets.join("mysql.sock"),
            stopped_mysqld: false,
            mysqld_down: false,
            cgroup: None,
            fs_frozen: None,
            hold_since_ms: None,
            max_hold_secs: f.max_hold.as_secs(),
            watchdog_released: false,
        };
        self.reg
            .put(entry)
            .map_err(|e| StepError::Failed(e.to_string()))
    }

    async fn probe(&self, f: Option<&Fence>) -> Result<(), StepError> {
        let Some(f) = f else { return Ok(()) };
        let mount = pods::volume_mount(&self.cfg.kubelet_dir, &f.target_pod_uid)
            .map_err(StepError::Refused)?;
        let layout = probe::probe(&mount.join("vtdataroot"), f.tablet_alias.uid)
            .map_err(|e| StepError::Refused(e.to_string()))?;
        let api: Api<Lease> = Api::namespaced(self.kube.clone(), &f.namespace);
        let patch = json!({"metadata": {"resourceVersion": f.resource_version, "annotations": {
            ANN_NODE_STATE: NodeState::Probed.as_str(), ANN_NODE_ERROR: "",
            ANN_NODE_PROBE: serde_json::to_string(&layout).unwrap_or_default()}}});
        api.patch(&f.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| StepError::Failed(format!("cannot report the probe: {e}")))?;
        Ok(())
    }

    fn entry(&self, key: &str) -> Result<Entry, StepError> {
        self.reg
            .get(key)
            .ok_or_else(|| StepError::Failed(format!("no record for {key}")))
    }

    fn save(&self, e: Entry) -> Result<(), StepError> {
        self.reg
            .put(e)
            .map_err(|e| StepError::Failed(e.to_string()))
    }

    async fn stop_mysqld(&self, key: &str) -> Result<(), StepError> {
        let mut e = self.entry(key)?;
        // Recorded first: if we die mid-call, the release still starts mysqld again.
        e.stopped_mysqld = true;
        self.save(e.clone())?;
        let ctl =
            MysqlCtl::new(&e.mysqlctl_socket).map_err(|err| StepError::Failed(err.to_string()))?;
        ctl.shutdown(self.cfg.shutdown_timeout)
            .await
            .map_err(|err| StepError::Failed(err.to_string()))?;
        e.mysqld_down = true;
        self.save(e)
    }

    fn freeze_cgroup(&self, key: &str) -> Result<(), StepError> {
        if self.cfg.skip_hold_for_tests {
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
            .ok_or_else(|| StepError::Failed("the pod reports no mysqld container ID".into()))?;
        let (_, cg) = Cgroup::containing(&self.cfg.roots, &id)
            .map_err(|err| StepError::Refused(err.to_string()))?
            .ok_or_else(|| {
                StepError::Failed(format!("no process of container {id} on this node"))
            })?;
        // Recorded before freezing, so the watchdog and a restarted helper can thaw it.
        e.cgroup = Some(cg.clone());
        e.hold_since_ms.get_or_insert(now_ms());
        self.save(e.clone())?;
        if let Err(err) = cg.freeze() {
            e.cgroup = None;
            let _ = self.save(e);
            return Err(StepError::Failed(err.to_string()));
        }
        Ok(())
    }

    fn freeze_fs(&self, key: &str) -> Result<(), StepError> {
        let mut e = self.entry(key)?;
        let m = e.volume_mount.clone().ok_or_else(|| {
            StepError::Failed("the tablet volume's mount was not found on this node".into())
        })?;
        fsfreeze::check_mount(&m).map_err(|err| StepError::Refused(err.to_string()))?;
        e.fs_frozen = Some(m.clone());
        e.hold_since_ms.get_or_insert(now_ms());
        self.save(e.clone())?;
        if let Err(err) = fsfreeze::freeze(&m) {
            e.fs_frozen = None;
            let _ = self.save(e);
            return Err(StepError::Failed(err.to_string()));
        }
        Ok(())
    }

    fn thaw_cgroup(&self, key: &str) -> Result<(), StepError> {
        let mut e = self.entry(key)?;
        if let Some(cg) = &e.cgroup {
            cg.thaw()
                .map_err(|err| StepError::Failed(err.to_string()))?;
        }
        e.cgroup = None;
        self.save(e)
    }

    /// Every part is attempted even if an earlier one failed; the record stays until all succeed.
    async fn release(
        &self,
        f: Option<&Fence>,
        key: &str,
        cause: Cause,
        restore: bool,
        delete: bool,
        report: bool,
    ) -> Result<(), StepError> {
        let mut problems = Vec::new();
        let mut e = self.reg.get(key);
        let held_since = e.as_ref().and_then(|e| e.hold_since_ms);
        // A freeze the watchdog already ended was counted then.
        let count_it = e
            .as_ref()
            .is_some_and(|e| e.frozen() || !e.watchdog_released);
        if let Some(e) = e.as_mut() {
            if let Some(cg) = &e.cgroup {
                match cg.thaw() {
                    Ok(()) => e.cgroup = None,
                    Err(err) => problems.push(err.to_string()),
                }
            }
            if let Some(m) = &e.fs_frozen {
                match fsfreeze::thaw(m) {
                    Ok(()) => e.fs_frozen = None,
                    Err(err) => problems.push(err.to_string()),
                }
            }
            if let Err(err) = self.reg.put(e.clone()) {
                problems.push(err.to_string());
            }
            if e.stopped_mysqld {
                let started = async {
                    let ctl = MysqlCtl::new(&e.mysqlctl_socket)?;
                    ctl.start(self.cfg.start_timeout).await?;
                    wait_for_mysqld(&e.mysqld_socket, self.cfg.start_timeout).await
                };
                match started.await {
                    Ok(()) => {
                        e.stopped_mysqld = false;
                        e.mysqld_down = false;
                        if let Err(err) = self.reg.put(e.clone()) {
                            problems.push(err.to_string());
                        }
                    }
                    Err(err) => problems.push(err.to_string()),
                }
            }
        }
        if restore {
            let target = match (f, &e) {
                (Some(f), _) => Some((f.vtctld.clone(), f.tablet_alias.clone(), f.original_type)),
                (None, Some(e)) => e.tablet_alias.parse::<TabletAlias>().ok().map(|a| {
                    (
                        e.vtctld.clone(),
                        a,
                        TabletType::parse(&e.original_type).unwrap_or(TabletType::Replica),
                    )
                }),
                (None, None) => None,
            };
            if let Some((vtctld, alias, original)) = target {
                match VtctldClient::new(&vtctld, CallLimits::default()) {
                    Ok(vt) => {
                        if let Err(err) = vt.start_replication(&alias).await {
                            problems.push(err.to_string());
                        }
                        if original != TabletType::Primary
                            && let Err(err) = vt.change_tablet_type(&alias, original).await
                        {
                            problems.push(err.to_string());
                        }
                    }
                    Err(err) => problems.push(err.to_string()),
                }
            }
        }
        if !problems.is_empty() {
            return Err(StepError::Failed(format!(
                "release incomplete: {}",
                problems.join("; ")
            )));
        }
        // Local bookkeeping first, so whoever sees the lease change sees it done.
        if e.is_some() {
            self.reg
                .remove(key)
                .map_err(|err| StepError::Failed(err.to_string()))?;
            if count_it {
                self.metrics
                    .released(cause, held_since.map_or(0, |s| now_ms() - s));
            }
        }
        if let Some(f) = f {
            if delete {
                let api: Api<Lease> = Api::namespaced(self.kube.clone(), &f.namespace);
                let dp = DeleteParams {
                    preconditions: Some(Preconditions {
                        resource_version: f.resource_version.clone(),
                        uid: None,
                    }),
                    ..Default::default()
                };
                match api.delete(&f.name, &dp).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(err) => {
                        return Err(StepError::Failed(format!(
                            "released, but cannot delete the lease: {err}"
                        )));
                    }
                }
            } else if report {
                self.report(f, NodeState::Released, None).await;
            }
        }
        tracing::info!(cause = cause.as_str(), "released");
        Ok(())
    }
}
