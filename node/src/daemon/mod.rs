//! `vtsnap-node run`: serves the fence leases labelled `vtsnap.io/node=<this node>`.
//!
//! It follows its leases with a watch ([`leases`]); on every change, at the earliest lease
//! expiry, soon after a step that did not complete, and at least every `resync`, it
//! observes (each lease that needs something is read afresh), decides per lease
//! ([`decide`], pure), acts (the steps, in `act`) and reports (`node-state`/`node-error` on the
//! lease, by compare-and-swap). A lease that expired, was deleted or asks `release` is released:
//! thaw, unfreeze, `Start` mysqld if this helper stopped it, and — for expiry and deletion —
//! core's put-back (StartReplication, ChangeTabletType back to `original-type`). The
//! [`watchdog`] thread ends any freeze at max-hold even with the API server gone, and the
//! [`registry`] on disk lets a restarted helper pick up exactly where it was. A registry
//! entry that cannot be read is never acted on (no release, no tablet change, no removal)
//! — only reported.
//!
//! Files: `config` (options), `error`, `cycle` (one pass of the loop), then the phases
//! `observe`, `decide`, `act`, `report`, and `recover` (holds lost with a corrupt registry).

mod act;
mod config;
mod cycle;
pub mod decide;
mod error;
pub mod http;
pub mod leases;
pub mod metrics;
mod observe;
pub mod pods;
mod recover;
pub mod registry;
mod report;
pub mod watchdog;

#[cfg(feature = "test-hooks")]
pub use config::TestHooks;
pub use config::{ConfigError, DaemonConfig};
pub use error::DaemonError;
pub use report::ANN_NODE_PROBE;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use vtsnap_core::events::Events;

use leases::Leases;
use metrics::Metrics;
use registry::Registry;

/// How soon a pass is repeated after a step or a read that did not complete.
const RETRY_AFTER_FAILURE: Duration = Duration::from_millis(500);

struct Daemon {
    cfg: DaemonConfig,
    kube: kube::Client,
    events: Events,
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
        events: Events::new(kube.clone(), report::EVENT_COMPONENT),
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
