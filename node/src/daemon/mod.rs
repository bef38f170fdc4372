//! `vtsnap-node run`: serves the fence leases labelled `vtsnap.io/node=<this node>`.
//!
//! Every `interval` it observes (lists its leases), decides per lease ([`decide`], pure),
//! acts (the steps below) and reports (`node-state`/`node-error` on the lease, by
//! compare-and-swap). A lease that expired, was deleted or asks `release` is released:
//! thaw, unfreeze, `Start` mysqld if this helper stopped it, and — for expiry and deletion —
//! core's put-back (StartReplication, ChangeTabletType back to `original-type`). The
//! [`watchdog`] thread ends any freeze at max-hold even with the API server gone, and the
//! [`registry`] on disk lets a restarted helper pick up exactly where it was. A registry
//! entry that cannot be read is never acted on (no release, no tablet change, no removal)
//! — only reported.

pub mod decide;
pub mod http;
pub mod metrics;
pub mod pods;
pub mod registry;
pub mod watchdog;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;
use vtsnap_core::events::{self, Subject};
use vtsnap_core::fence::client::delete_if_unchanged;
use vtsnap_core::fence::put_back::{TabletChanges, describe, put_tablet_back_at};
use vtsnap_core::fence::{self, ANN_NODE_ERROR, ANN_NODE_STATE, Fence, NodeState};
use vtsnap_core::vtctld::client::CallLimits;
use vtsnap_core::vtctld::{TabletType, VtctldClient};

use crate::cgroup::{Cgroup, Roots};
use crate::mysqlctl::{MysqlCtl, wait_for_mysqld};
use crate::{fsfreeze, probe};
use decide::{Step, decide};
use metrics::{Cause, Metrics};
use registry::{Entry, Registry};
use watchdog::now_ms;

/// The `source.component` of the Events this helper records.
const EVENT_COMPONENT: &str = "vtsnap-node";

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
}

/// Switches for tests only, behind the `test-hooks` feature so that no production
/// configuration can carry them.
#[cfg(feature = "test-hooks")]
#[derive(Debug, Clone, Copy, Default)]
pub struct TestHooks {
    /// Stop mysqld but do not freeze its container, so that whatever restarts mysqld (a
    /// supervisor's `Start`) can — to show what the hold prevents.
    pub skip_hold: bool,
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
    /// Tests only (see `TestHooks`); always false otherwise.
    skip_hold: bool,
    /// Unreadable registry entries already logged and announced by an Event.
    announced: std::sync::Mutex<BTreeSet<String>>,
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
    start_with(cfg, kube, false).await
}

/// [`start`] with test switches.
#[cfg(feature = "test-hooks")]
pub async fn start_for_tests(
    cfg: DaemonConfig,
    kube: kube::Client,
    hooks: TestHooks,
) -> Result<Handle, DaemonError> {
    start_with(cfg, kube, hooks.skip_hold).await
}

async fn start_with(
    cfg: DaemonConfig,
    kube: kube::Client,
    skip_hold: bool,
) -> Result<Handle, DaemonError> {
    let reg = Registry::open(&cfg.state_dir)?;
    let metrics = Metrics::default();
    // Counted before anything else runs, so it shows even with the API server gone.
    metrics.set_unreadable_entries(reg.unreadable().len());
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
        skip_hold,
        announced: std::sync::Mutex::new(BTreeSet::new()),
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
                let unreadable = self.reg.unreadable();
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
                            if let Some(problem) =
                                unreadable.iter().find(|p| p.lease() == Some(key.as_str()))
                            {
                                // Never guessed: nothing is held, released or restored for
                                // it here; the job's (or GC's) recovery restores the tablet
                                // from the lease itself.
                                if f.node_state != Some(NodeState::Failed) {
                                    self.report(&f, NodeState::Failed, Some(&problem.to_string()))
                                        .await;
                                }
                                continue;
                            }
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
                self.announce_unreadable(&unreadable, &seen).await;
            }
        }
        self.metrics
            .set_unreadable_entries(self.reg.unreadable().len());
        self.metrics.set_holds_active(self.reg.frozen_count());
        self.metrics.cycle();
    }

    /// Reports each unreadable registry entry once per start: an error log and a Warning
    /// Event on its lease (or, with the lease gone, on this node). The metric counts them
    /// every cycle.
    async fn announce_unreadable(
        &self,
        unreadable: &[registry::RegistryError],
        leases: &BTreeMap<String, ()>,
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
            let (namespace, subject) = match key.split_once('/') {
                Some((ns, name)) if leases.contains_key(key) => (
                    ns.to_owned(),
                    Subject {
                        api_version: "coordination.k8s.io/v1".into(),
                        kind: "Lease".into(),
                        name: name.into(),
                        uid: None,
                    },
                ),
                _ => (
                    "default".to_owned(),
                    Subject {
                        api_version: "v1".into(),
                        kind: "Node".into(),
                        name: self.cfg.node.clone(),
                        uid: None,
                    },
                ),
            };
            events::emit(
                &self.kube,
                EVENT_COMPONENT,
                &namespace,
                &subject,
                "HoldRecordUnreadable",
                &problem.to_string(),
                true,
            )
            .await;
        }
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
    /// Writes the node's answer on the lease. The job renews the lease meanwhile, so a
    /// version conflict is expected: the answer is written again on the fresh version as
    /// long as the lease still asks the same request of the same pod — never as an answer
    /// to a request that changed in between.
    async fn report(&self, f: &Fence, state: NodeState, error: Option<&str>) {
        const ATTEMPTS: usize = 5;
        let api: Api<Lease> = Api::namespaced(self.kube.clone(), &f.namespace);
        let mut version = f.resource_version.clone();
        for _ in 0..ATTEMPTS {
            let patch = json!({"metadata": {
                "resourceVersion": version,
                "annotations": {ANN_NODE_STATE: state.as_str(), ANN_NODE_ERROR: error.unwrap_or("")}
            }});
            match api
                .patch(&f.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return,
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    let fresh = match api.get_opt(&f.name).await {
                        Ok(Some(l)) => l,
                        Ok(None) => return,
                        Err(e) => {
                            tracing::warn!(error = %e, state = state.as_str(), "cannot re-read the lease to report; will retry");
                            return;
                        }
                    };
                    match Fence::from_lease(&fresh) {
                        Ok(now)
                            if now.request == f.request
                                && now.target_pod_uid == f.target_pod_uid =>
                        {
                            version = fresh.metadata.resource_version.clone();
                        }
                        // The request changed: this answer is stale; the next cycle answers the new one.
                        _ => return,
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, state = state.as_str(), "cannot report to the lease; will retry");
                    return;
                }
            }
        }
        tracing::warn!(state = state.as_str(), lease = %f.key(), "the lease kept changing under the report; will retry");
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
            tablet_alias: f.tablet_alias.clone(),
            original_type: f.original_type,
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
                (Some(f), _) => Some((&f.vtctld, &f.tablet_alias, f.original_type)),
                (None, Some(e)) => Some((&e.vtctld, &e.tablet_alias, e.original_type)),
                (None, None) => None,
            };
            if let Some((vtctld, alias, original)) = target {
                // What the fence changed is not known here: undo all of it (idempotent).
                let failed = put_tablet_back_at(vtctld, alias, original, TabletChanges::ALL).await;
                if !failed.is_empty() {
                    problems.push(describe(&failed));
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
                delete_if_unchanged(&api, &f.name, f.resource_version.as_deref())
                    .await
                    .map_err(|err| {
                        StepError::Failed(format!("released, but cannot delete the lease: {err}"))
                    })?;
            } else if report {
                self.report(f, NodeState::Released, None).await;
            }
        }
        tracing::info!(cause = cause.as_str(), "released");
        Ok(())
    }
}
