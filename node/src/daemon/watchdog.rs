//! The watchdog: a plain thread, independent of the API server and of the async runtime,
//! that thaws any freeze older than its max-hold. It only thaws (local, synchronous, safe);
//! starting mysqld and restoring the tablet are left to the reconcile loop.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use super::metrics::{Cause, Metrics};
use super::registry::Registry;
use crate::cgroup::Cgroup;
use crate::fsfreeze;

pub fn now_ms() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_millisecond()
}

/// Whether a freeze that began at `since` has reached `max_hold_secs` at `now_ms`.
fn due(since: i64, max_hold_secs: u64, now_ms: i64) -> bool {
    let limit = i64::try_from(max_hold_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
    now_ms.saturating_sub(since) >= limit
}

/// Thaws what `cgroup` and `fs_frozen` name, clearing each that thawed. True if all did.
fn thaw(lease: &str, cgroup: &mut Option<Cgroup>, fs_frozen: &mut Option<PathBuf>) -> bool {
    let mut ok = true;
    if let Some(cg) = cgroup {
        match cg.thaw() {
            Ok(()) => *cgroup = None,
            Err(err) => {
                ok = false;
                tracing::error!(lease, error = %err, "watchdog could not thaw the cgroup");
            }
        }
    }
    if let Some(m) = fs_frozen {
        match fsfreeze::thaw(m) {
            Ok(()) => *fs_frozen = None,
            Err(err) => {
                ok = false;
                tracing::error!(lease, error = %err, "watchdog could not thaw the file system");
            }
        }
    }
    ok
}

/// One pass: thaws what has been frozen for max-hold or longer — including the hold of an
/// entry whose other fields cannot be read, if its hold part can. Returns how many.
pub fn sweep(reg: &Registry, metrics: &Metrics, now_ms: i64) -> usize {
    let mut released = 0;
    let mut g = reg.lock();
    for e in g.entries.values_mut() {
        let Some(since) = e.hold_since_ms else {
            continue;
        };
        if !e.frozen() || !due(since, e.max_hold_secs, now_ms) {
            continue;
        }
        if thaw(&e.lease, &mut e.cgroup, &mut e.fs_frozen) {
            e.watchdog_released = true;
            released += 1;
            metrics.released(Cause::Watchdog, now_ms - since);
            tracing::warn!(lease = %e.lease, max_hold_secs = e.max_hold_secs, "max-hold reached: released by the watchdog");
        }
    }
    for u in g.unreadable.values_mut() {
        let Some(mut h) = u.hold() else { continue };
        let Some(since) = h.hold_since_ms else {
            continue;
        };
        if !h.frozen() || !due(since, h.max_hold_secs, now_ms) {
            continue;
        }
        if thaw(&u.lease, &mut h.cgroup, &mut h.fs_frozen) {
            if let Err(err) = u.mark_thawed() {
                tracing::error!(lease = %u.lease, error = %err, "cannot record the watchdog's release of an unreadable entry");
            }
            released += 1;
            metrics.released(Cause::Watchdog, now_ms - since);
            tracing::warn!(lease = %u.lease, max_hold_secs = h.max_hold_secs, reason = %u.reason,
                "max-hold reached: released by the watchdog (entry otherwise unreadable; kept)");
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
