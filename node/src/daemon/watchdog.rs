//! The watchdog: a plain thread, independent of the API server and of the async runtime,
//! that thaws any freeze older than its max-hold. It only thaws (local, synchronous, safe);
//! starting mysqld and restoring the tablet are left to the reconcile loop.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use super::metrics::{Cause, Metrics};
use super::registry::Registry;
use crate::fsfreeze;

pub fn now_ms() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_millisecond()
}

/// One pass: thaws what has been frozen for max-hold or longer. Returns how many.
pub fn sweep(reg: &Registry, metrics: &Metrics, now_ms: i64) -> usize {
    let mut released = 0;
    let mut g = reg.lock();
    for e in g.values_mut() {
        let Some(since) = e.hold_since_ms else {
            continue;
        };
        let limit = i64::try_from(e.max_hold_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
        if !e.frozen() || now_ms.saturating_sub(since) < limit {
            continue;
        }
        let mut ok = true;
        if let Some(cg) = &e.cgroup {
            match cg.thaw() {
                Ok(()) => e.cgroup = None,
                Err(err) => {
                    ok = false;
                    tracing::error!(lease = %e.lease, error = %err, "watchdog could not thaw the cgroup");
                }
            }
        }
        if let Some(m) = &e.fs_frozen {
            match fsfreeze::thaw(m) {
                Ok(()) => e.fs_frozen = None,
                Err(err) => {
                    ok = false;
                    tracing::error!(lease = %e.lease, error = %err, "watchdog could not thaw the file system");
                }
            }
        }
        if ok {
            e.watchdog_released = true;
            released += 1;
            metrics.released(Cause::Watchdog, now_ms - since);
            tracing::warn!(lease = %e.lease, max_hold_secs = e.max_hold_secs, "max-hold reached: released by the watchdog");
        }
    }
    if released > 0
        && let Err(err) = reg.save(&g)
    {
        tracing::error!(error = %err, "cannot persist the watchdog's release");
    }
    released
}

/// Runs [`sweep`] every `every` until `stop` is set.
pub fn spawn(
    reg: Registry,
    metrics: Metrics,
    every: Duration,
    stop: Arc<AtomicBool>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("vtsnap-watchdog".into())
        .spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                sweep(&reg, &metrics, now_ms());
                std::thread::sleep(every);
            }
        })
}
