//! `vtsnap-node run`: serves the fence leases labelled `vtsnap.io/node=<this node>`.
//!
//! It follows its leases with a watch ([`leases`]); on every change, at the earliest lease
//! expiry, soon after a step that did not complete, and at least every `resync`, it
//! observes (each lease that needs something is read afresh), decides per lease
//! ([`decide`], pure), acts (the steps below) and reports (`node-state`/`node-error` on the
//! lease, by compare-and-swap). A lease that expired, was deleted or asks `release` is released:
//! thaw, unfreeze, `Start` mysqld if this helper stopped it, and — for expiry and deletion —
//! core's put-back (StartReplication, ChangeTabletType back to `original-type`). The
//! [`watchdog`] thread ends any freeze at max-hold even with the API server gone, and the
//! [`registry`] on disk lets a restarted helper pick up exactly where it was. A registry
//! entry that cannot be read is never acted on (no release, no tablet change, no removal)
//! — only reported.

pub mod decide;
pub mod http;
pub mod leases;
pub mod metrics;
pub mod pods;
pub mod registry;
pub mod watchdog;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use vtsnap_core::events::{self, Subject};
use vtsnap_core::fence::client::{FenceClientError, delete_if_unchanged};
use vtsnap_core::fence::put_back::{PutBackError, TabletChanges, put_tablet_back_at};
use vtsnap_core::fence::{self, ANN_NODE_ERROR, ANN_NODE_STATE, Fence, NodeState};
use vtsnap_core::naming::TabletAlias;
use vtsnap_core::vtctld::client::CallLimits;
use vtsnap_core::vtctld::{TabletType, VtctldClient, VtctldError};

use crate::cgroup::{Cgroup, CgroupError, Roots};
use crate::fsfreeze::FsFreezeError;
use crate::mysqlctl::{MysqlCtl, MysqlCtlError, wait_for_mysqld};
use crate::{fsfreeze, probe};
use decide::{Step, decide};
use leases::Leases;
use metrics::{Cause, Metrics};
use registry::{Entry, Registry, ThawError};
use watchdog::now_ms;

/// How soon a pass is repeated after a step or a read that did not complete.
const RETRY_AFTER_FAILURE: Duration = Duration::from_millis(500);

/// The `source.component` of the Events this helper records.
const EVENT_COMPONENT: &str = "vtsnap-node";

/// The annotation the probe result is written to.
pub const ANN_NODE_PROBE: &str = "vtsnap.io/node-probe";

#[derive(Debug, Clone)]
pub struct DaemonConfig {
    pub node: String,
    pub kubelet_dir: PathBuf,
    pub roots: Roots,
    /// The path whose file system is the node's root ([`fsfreeze::NODE_ROOT`]): never frozen.
    pub host_root: PathBuf,
    pub state_dir: PathBuf,
    /// The longest time between two passes with no watch event: a pass re-reads what the
    /// store cannot be trusted to show (a lease gone while the watch was down).
    pub resync: Duration,
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
    Config(#[from] ConfigError),
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

/// A [`DaemonConfig`] the daemon refuses to run with.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// A zero resync period is a busy loop.
    #[error("the resync period must be greater than 0")]
    ResyncZero,
    /// The node name selects this node's leases (`vtsnap.io/node=<node>`): anything but a
    /// valid label value would select others, or nothing.
    #[error(
        "node name {node:?} is not a valid label value (at most 63 characters: letters, digits, '-', '_', '.', beginning and ending with a letter or digit)"
    )]
    NodeName { node: String },
}

impl DaemonConfig {
    /// Refuses a resync period of 0 and a node name that is not a valid label value.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.resync.is_zero() {
            return Err(ConfigError::ResyncZero);
        }
        if !is_label_value(&self.node) || self.node.is_empty() {
            return Err(ConfigError::NodeName {
                node: self.node.clone(),
            });
        }
        Ok(())
    }
}

/// A Kubernetes label value: empty, or at most 63 of `[A-Za-z0-9._-]`, alphanumeric at both ends.
fn is_label_value(v: &str) -> bool {
    let b = v.as_bytes();
    let edge = |c: Option<&u8>| c.is_none_or(u8::is_ascii_alphanumeric);
    b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && edge(b.first())
        && edge(b.last())
}

/// Why a step did not complete. Refusals are final for the lease ([`NodeState::Refused`]);
/// everything else is reported `failed` and tried again next cycle. The text goes to the
/// lease's `node-error`.
#[derive(Debug, thiserror::Error)]
enum StepError {
    #[error("pod {pod} does not exist")]
    PodMissing { pod: String },
    #[error("cannot read pod {pod}: {source}")]
    PodUnreadable {
        pod: String,
        #[source]
        source: kube::Error,
    },
    #[error("pod {pod} is not the one the lease names (UID differs: replaced?)")]
    PodReplaced { pod: String },
    #[error("pod {pod} runs on node {node:?}, not {this}")]
    PodElsewhere {
        pod: String,
        node: String,
        this: String,
    },
    #[error("vtctld of tablet {tablet}: {source}")]
    Vtctld {
        tablet: TabletAlias,
        #[source]
        source: VtctldError,
    },
    #[error("cannot confirm tablet {tablet} is not the primary: {source}")]
    TabletUnconfirmed {
        tablet: TabletAlias,
        #[source]
        source: VtctldError,
    },
    #[error("tablet {tablet} is the primary")]
    TabletIsPrimary { tablet: TabletAlias },
    #[error("the volume of tablet {tablet}: {source}")]
    Volume {
        tablet: TabletAlias,
        #[source]
        source: pods::MountError,
    },
    #[error("tablet {tablet}: {source}")]
    Probe {
        tablet: TabletAlias,
        #[source]
        source: probe::ProbeError,
    },
    /// The answer could not be written yet (the API failed, or the lease kept changing):
    /// nothing to report on the lease, the pass is repeated soon.
    #[error("the answer to lease {lease} is not written yet")]
    NotAnswered { lease: String },
    #[error("no hold record for lease {lease}")]
    NoRecord { lease: String },
    #[error(transparent)]
    Registry(#[from] registry::RegistryError),
    #[error(transparent)]
    Mysqlctl(#[from] MysqlCtlError),
    #[error("pod (UID {pod_uid}) reports no mysqld container ID")]
    NoContainerId { pod_uid: String },
    #[error("container {container}: {source}")]
    ContainerCgroup {
        container: String,
        #[source]
        source: CgroupError,
    },
    #[error("no process of container {container} on this node")]
    NoProcess { container: String },
    #[error("freezing container {container}: {source}")]
    Freeze {
        container: String,
        #[source]
        source: CgroupError,
    },
    #[error("the volume of pod (UID {pod_uid}) was not found on this node")]
    NoMount { pod_uid: String },
    /// The mount may not be frozen (the root file system, not a mount point): final.
    #[error(transparent)]
    MountRefused(FsFreezeError),
    #[error(transparent)]
    Mount(#[from] FsFreezeError),
    #[error(transparent)]
    Thaw(#[from] ThawError),
    #[error("release incomplete: {}", join(.problems))]
    ReleaseIncomplete { problems: Vec<ReleaseProblem> },
    #[error("released, but cannot delete lease {lease}: {source}")]
    LeaseDelete {
        lease: String,
        #[source]
        source: Box<FenceClientError>,
    },
    /// A corrupt hold registry lost this lease's record, and a freeze was found and ended.
    #[error(
        "the hold registry was corrupt (moved to {}); a freeze this helper may have begun for tablet {tablet} was found and ended, and is not begun again for this lease",
        moved_to.display()
    )]
    LostHoldEnded {
        tablet: TabletAlias,
        moved_to: PathBuf,
    },
}

impl StepError {
    fn state(&self) -> NodeState {
        match self {
            Self::PodMissing { .. }
            | Self::PodReplaced { .. }
            | Self::PodElsewhere { .. }
            | Self::TabletIsPrimary { .. }
            | Self::Volume { .. }
            | Self::Probe { .. }
            | Self::ContainerCgroup { .. }
            | Self::MountRefused(_) => NodeState::Refused,
            _ => NodeState::Failed,
        }
    }
}

/// One part of a release that did not complete.
#[derive(Debug, thiserror::Error)]
enum ReleaseProblem {
    #[error(transparent)]
    Thaw(#[from] ThawError),
    #[error(transparent)]
    Registry(#[from] registry::RegistryError),
    #[error(transparent)]
    Mysqld(#[from] MysqlCtlError),
    #[error(transparent)]
    PutBack(#[from] PutBackError),
}

fn join(problems: &[ReleaseProblem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
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
    /// The corrupt registry this start moved aside has been announced by an Event.
    set_aside_announced: AtomicBool,
}

/// A running daemon.
#[derive(Debug)]
pub struct Handle {
    pub metrics: Metrics,
    pub addr: Option<SocketAddr>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
    http: Option<tokio::task::JoinHandle<()>>,
    watchdog: std::thread::JoinHandle<()>,
}

impl Handle {
    /// Stops the loop and the watchdog without releasing anything — what a crash or a
    /// SIGKILL leaves behind (the hold registry stays on disk).
    pub async fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        self.task.abort();
        let _ = self.task.await;
        if let Some(http) = self.http {
            http.abort();
        }
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
    cfg.validate()?;
    let reg = Registry::open(&cfg.state_dir)?;
    let metrics = Metrics::default();
    // Counted before anything else runs, so it shows even with the API server gone.
    metrics.set_unreadable_entries(reg.unreadable().len());
    if let Some(problem) = reg.set_aside() {
        metrics.set_registry_set_aside(true);
        tracing::error!(error = %problem, "hold registry corrupt: moved aside, started with what could be read");
    }
    let stop = Arc::new(AtomicBool::new(false));
    // The watchdog first: it must run even if nothing else ever does.
    let watchdog = watchdog::spawn(
        reg.clone(),
        metrics.clone(),
        Duration::from_millis(100),
        stop.clone(),
    )
    .map_err(DaemonError::Watchdog)?;
    let (addr, http) = match cfg.listen {
        Some(a) => {
            let (bound, task) = http::serve(a, metrics.clone(), http::Limits::for_this_process())
                .await
                .map_err(|source| DaemonError::Listen { addr: a, source })?;
            (Some(bound), Some(task))
        }
        None => (None, None),
    };
    let d = Daemon {
        cfg,
        kube,
        reg,
        metrics: metrics.clone(),
        skip_hold,
        announced: std::sync::Mutex::new(BTreeSet::new()),
        set_aside_announced: AtomicBool::new(false),
    };
    let s = stop.clone();
    let leases = Leases::follow(d.kube.clone(), &d.cfg.node, d.metrics.clone());
    let task = tokio::spawn(async move {
        while !s.load(Ordering::SeqCst) {
            let completed = d.cycle(&leases).await;
            let wait = leases::next_wake(
                d.cfg.resync,
                RETRY_AFTER_FAILURE,
                !completed,
                leases::next_expiry(&leases.seen(), Timestamp::now()),
            );
            tokio::select! {
                () = leases.changed() => {}
                () = tokio::time::sleep(wait) => {}
            }
        }
    });
    Ok(Handle {
        metrics,
        addr,
        stop,
        task,
        http,
        watchdog,
    })
}

impl Daemon {
    /// One pass over the leases as the watch last showed them and the holds on record.
    /// Only a lease with something to do is read again (a GET), and what is done is decided
    /// from that fresh copy: the store may lag (a renewal not yet seen would look like an
    /// expiry). Nothing is decided from an uncertain read; the watchdog still guards holds.
    /// False if something did not complete, so the pass is repeated soon.
    async fn cycle(&self, leases: &Leases) -> bool {
        let completed = if leases.synced() {
            self.pass(&leases.seen()).await
        } else {
            // Before the first full list an absent lease says nothing.
            false
        };
        self.metrics
            .set_unreadable_entries(self.reg.unreadable().len());
        self.metrics.set_holds_active(self.reg.frozen_count());
        self.metrics.cycle();
        completed
    }

    async fn pass(&self, stored: &[Arc<Lease>]) -> bool {
        let mut completed = true;
        let mut seen = BTreeSet::new();
        let unreadable = self.reg.unreadable();
        let lost = self.reg.lost_holds();
        let mut lost_looked_for = true;
        for l in stored {
            let key = lease_key(l);
            seen.insert(key.clone());
            if !self.needs_look(l, &key, &unreadable, lost.is_some()) {
                continue;
            }
            match self.read_lease(&key).await {
                Ok(Some(fresh)) => {
                    completed &= self
                        .handle(
                            &fresh,
                            &key,
                            &unreadable,
                            lost.as_deref(),
                            &mut lost_looked_for,
                        )
                        .await;
                }
                // Gone since the watch showed it: the record (if any) is handled below.
                Ok(None) => {
                    seen.remove(&key);
                }
                Err(()) => {
                    completed = false;
                    lost_looked_for = false;
                }
            }
        }
        for e in self.reg.all() {
            if seen.contains(&e.lease) {
                continue;
            }
            // Absent from the store: confirmed gone by a fresh read before anything is released.
            match self.read_lease(&e.lease).await {
                Ok(None) => {
                    let steps = decide(None, false, Some(&e));
                    completed &= self.run_steps(None, &e.lease.clone(), steps).await;
                }
                Ok(Some(fresh)) => {
                    seen.insert(e.lease.clone());
                    completed &= self
                        .handle(
                            &fresh,
                            &e.lease,
                            &unreadable,
                            lost.as_deref(),
                            &mut lost_looked_for,
                        )
                        .await;
                }
                Err(()) => completed = false,
            }
        }
        self.announce_unreadable(&unreadable, &seen).await;
        self.announce_set_aside().await;
        if lost.is_some()
            && lost_looked_for
            && let Err(e) = self.reg.lost_holds_done()
        {
            tracing::warn!(error = %e, "cannot record that the lost holds were looked for; looking again");
            completed = false;
        }
        completed
    }

    /// Whether the watch's copy of a lease asks anything of this helper: an answer to
    /// write, a step to take, or a lost hold to look for. Decided from the copy only to
    /// know whether to read the lease again.
    fn needs_look(
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
        !decide(Some(&f), f.expired(Timestamp::now()), entry.as_ref()).is_empty()
    }

    /// A fresh read of lease `key` (`namespace/name`): `None` if it is gone or no longer
    /// labelled for this node; `Err` (logged) if the API cannot say.
    async fn read_lease(&self, key: &str) -> Result<Option<Lease>, ()> {
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

    /// Decides and acts on one freshly read lease. False if something did not complete.
    async fn handle(
        &self,
        l: &Lease,
        key: &str,
        unreadable: &[registry::RegistryError],
        lost: Option<&Path>,
        lost_looked_for: &mut bool,
    ) -> bool {
        let f = match Fence::from_lease(l) {
            Ok(f) => f,
            Err(e) => {
                tracing::error!(lease = %key, error = %e, "cannot read fence lease");
                return true;
            }
        };
        let span = tracing::info_span!("lease", lease = %key, tablet = %f.tablet_alias, request = %f.request);
        let _g = span.enter();
        if let Some(problem) = unreadable.iter().find(|p| p.lease() == Some(key)) {
            // Never guessed: nothing is held, released or restored for it here; the job's
            // (or GC's) recovery restores the tablet from the lease itself.
            if f.node_state != Some(NodeState::Failed) {
                return self
                    .report(&f, NodeState::Failed, Some(&problem.to_string()))
                    .await;
            }
            return true;
        }
        if let Some(moved_to) = lost
            && self.reg.get(key).is_none()
        {
            match self.recover_lost(&f, moved_to).await {
                Ok(false) => {}
                // Reported; decided on the next pass from the new record.
                Ok(true) => return false,
                Err(e) => {
                    // Not acted on before it is known whether it holds a lost freeze (a
                    // Shutdown would hang on a frozen pod).
                    *lost_looked_for = false;
                    tracing::warn!(error = %e, "cannot look for a hold lost with the corrupt registry; retrying");
                    return false;
                }
            }
        }
        let steps = decide(
            Some(&f),
            f.expired(Timestamp::now()),
            self.reg.get(key).as_ref(),
        );
        self.run_steps(Some(&f), key, steps).await
    }

    /// After a corrupt registry was moved aside, for a lease with no record: ends a freeze
    /// found on its target (the mysqld container's cgroup, FITHAW on the tablet volume),
    /// since only the lost part of the file could have said whether it is ours. The record
    /// written then keeps the lease from being frozen again (as after the watchdog), and the
    /// lease is answered `failed`. True if something was ended; an error is an uncertain
    /// read, looked at again next cycle.
    async fn recover_lost(&self, f: &Fence, moved_to: &Path) -> Result<bool, StepError> {
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
        if let Ok(m) = pods::volume_mount(&self.cfg.kubelet_dir, &f.target_pod_uid)
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

    /// Reports the corrupt registry this start moved aside, once: a Warning Event on this
    /// node (the error log and the gauge are written at start).
    async fn announce_set_aside(&self) {
        let Some(problem) = self.reg.set_aside() else {
            return;
        };
        if self.set_aside_announced.swap(true, Ordering::SeqCst) {
            return;
        }
        events::emit(
            &self.kube,
            EVENT_COMPONENT,
            "default",
            &self.node_subject(),
            "HoldRegistryCorrupt",
            &problem.to_string(),
            true,
        )
        .await;
    }

    fn node_subject(&self) -> Subject {
        Subject {
            api_version: "v1".into(),
            kind: "Node".into(),
            name: self.cfg.node.clone(),
            uid: None,
        }
    }

    /// Reports each unreadable registry entry once per start: an error log and a Warning
    /// Event on its lease (or, with the lease gone, on this node). The metric counts them
    /// every cycle.
    async fn announce_unreadable(
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
            let (namespace, subject) = match key.split_once('/') {
                Some((ns, name)) if leases.contains(key) => (
                    ns.to_owned(),
                    Subject {
                        api_version: "coordination.k8s.io/v1".into(),
                        kind: "Lease".into(),
                        name: name.into(),
                        uid: None,
                    },
                ),
                _ => ("default".to_owned(), self.node_subject()),
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

    /// Runs `steps` in order until one does not complete (reported on the lease). False then.
    async fn run_steps(&self, f: Option<&Fence>, key: &str, steps: Vec<Step>) -> bool {
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

    /// Writes `node-state` / `node-error`, compare-and-swap on the lease's resourceVersion.
    /// Writes the node's answer on the lease. The job renews the lease meanwhile, so a
    /// version conflict is expected: the answer is written again on the fresh version as
    /// long as the lease still asks the same request of the same pod — never as an answer
    /// to a request that changed in between. False if the answer could not be written (it
    /// is written again on the next pass); true also when it no longer applies.
    async fn report(&self, f: &Fence, state: NodeState, error: Option<&str>) -> bool {
        self.answer(f, state, error, None).await
    }

    /// [`Self::report`], with the probe's result (`node-probe`) written in the same patch.
    async fn answer(
        &self,
        f: &Fence,
        state: NodeState,
        error: Option<&str>,
        probe: Option<&str>,
    ) -> bool {
        const ATTEMPTS: usize = 5;
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
    fn new_entry(&self, f: &Fence, pod: &Pod) -> Entry {
        let sockets = pods::socket_dir(&self.cfg.kubelet_dir, &f.target_pod_uid);
        Entry {
            lease: f.key(),
            pod_uid: f.target_pod_uid.clone(),
            tablet_alias: f.tablet_alias.clone(),
            original_type: f.original_type,
            vtctld: f.vtctld.clone(),
            container_id: mysqld_container_id(pod),
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
        }
    }

    async fn probe(&self, f: Option<&Fence>) -> Result<(), StepError> {
        let Some(f) = f else { return Ok(()) };
        let mount =
            pods::volume_mount(&self.cfg.kubelet_dir, &f.target_pod_uid).map_err(|source| {
                StepError::Volume {
                    tablet: f.tablet_alias.clone(),
                    source,
                }
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
        match self.reg.end_freezes(key, true, false).into_iter().next() {
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
        restore: bool,
        delete: bool,
        report: bool,
    ) -> Result<(), StepError> {
        let mut problems: Vec<ReleaseProblem> = Vec::new();
        let before = self.reg.get(key);
        let held_since = before.as_ref().and_then(|e| e.hold_since_ms);
        // A freeze the watchdog already ended was counted then.
        let count_it = before
            .as_ref()
            .is_some_and(|e| e.frozen() || !e.watchdog_released);
        if before.is_some() {
            problems.extend(
                self.reg
                    .end_freezes(key, true, true)
                    .into_iter()
                    .map(ReleaseProblem::from),
            );
        }
        let mut e = self.reg.get(key);
        if let Some(e) = e.as_mut()
            && e.stopped_mysqld
        {
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
                        problems.push(err.into());
                    }
                }
                Err(err) => problems.push(err.into()),
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
                problems.extend(failed.into_iter().map(ReleaseProblem::from));
            }
        }
        if !problems.is_empty() {
            return Err(StepError::ReleaseIncomplete { problems });
        }
        // Local bookkeeping first, so whoever sees the lease change sees it done.
        if e.is_some() {
            self.reg.remove(key)?;
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
                    .map_err(|source| StepError::LeaseDelete {
                        lease: f.key(),
                        source: Box::new(source),
                    })?;
            } else if report {
                self.report(f, NodeState::Released, None).await;
            }
        }
        tracing::info!(cause = cause.as_str(), "released");
        Ok(())
    }
}

/// `namespace/name` of a lease, the key of its hold record.
fn lease_key(l: &Lease) -> String {
    format!(
        "{}/{}",
        l.metadata.namespace.as_deref().unwrap_or_default(),
        l.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The node a pod is scheduled on ("" if none).
fn node_of(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default()
}

/// The ID of the pod's mysqld container, as its cgroup path contains it.
fn mysqld_container_id(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == "mysqld"))
        .and_then(|c| c.container_id.clone())
        .map(|raw| pods::container_id(&raw).to_owned())
}
