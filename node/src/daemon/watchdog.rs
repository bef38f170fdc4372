//! The watchdog: a plain thread, independent of the API server and of the async runtime,
//! that thaws any freeze older than its max-hold. It only thaws (local, synchronous, safe);
//! starting mysqld and restoring the tablet are left to the reconcile loop. It thaws through
//! the descriptors the registry keeps open, so running out of them cannot stop it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use super::metrics::{Cause, Metrics};
use super::registry::{Holds, Kept, Registry, end_freezes};
use crate::cgroup::Cgroup;

pub fn now_ms() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_millisecond()
}

/// Whether a freeze that began at `since` has reached `max_hold_secs` at `now_ms`.
fn due(since: i64, max_hold_secs: u64, now_ms: i64) -> bool {
    let limit = i64::try_from(max_hold_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
    now_ms.saturating_sub(since) >= limit
}

/// Thaws what `cgroup` and `fs_frozen` name (through the descriptors kept for `lease`),
/// clearing each that thawed. True if all did.
fn thaw(
    kept: &mut BTreeMap<String, Kept>,
    lease: &str,
    cgroup: &mut Option<Cgroup>,
    fs_frozen: &mut Option<PathBuf>,
) -> bool {
    let problems = end_freezes(kept, lease, Some(cgroup), Some(fs_frozen));
    for err in &problems {
        tracing::error!(lease, error = %err, "watchdog could not end a freeze");
    }
    problems.is_empty()
}

/// One pass: thaws what has been frozen for max-hold or longer — including the hold of an
/// entry whose other fields cannot be read, if its hold part can. Returns how many.
pub fn sweep(reg: &Registry, metrics: &Metrics, now_ms: i64) -> usize {
    let mut released = 0;
    let mut g = reg.lock();
    let Holds {
        entries,
        unreadable,
        kept,
    } = &mut *g;
    for e in entries.values_mut() {
        let Some(since) = e.hold_since_ms else {
            continue;
        };
        if !e.frozen() || !due(since, e.max_hold_secs, now_ms) {
            continue;
        }
        if thaw(kept, &e.lease, &mut e.cgroup, &mut e.fs_frozen) {
            e.watchdog_released = true;
            released += 1;
            metrics.released(Cause::Watchdog, now_ms - since);
            tracing::warn!(lease = %e.lease, max_hold_secs = e.max_hold_secs, "max-hold reached: released by the watchdog");
        }
    }
    for u in unreadable.values_mut() {
        let Some(mut h) = u.hold() else { continue };
        let Some(since) = h.hold_since_ms else {
            continue;
        };
        if !h.frozen() || !due(since, h.max_hold_secs, now_ms) {
            continue;
        }
        if thaw(kept, &u.lease, &mut h.cgroup, &mut h.fs_frozen) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A v1 freezer directory that reads back what was written, as a real one settles.
    fn fake_frozen_cgroup(dir: &std::path::Path) -> serde_json::Value {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("freezer.state"), "FROZEN").unwrap();
        serde_json::json!({"version": "v1", "dir": dir})
    }

    fn thawed(dir: &std::path::Path) -> bool {
        std::fs::read_to_string(dir.join("freezer.state")).unwrap() == "THAWED"
    }

    fn entry(lease: &str, alias: &str, cgroup: serde_json::Value) -> serde_json::Value {
        serde_json::json!({
            "lease": lease, "pod_uid": "uid", "tablet_alias": alias, "original_type": "replica",
            "vtctld": "vtctld:15999", "container_id": "c", "volume_mount": null,
            "mysqlctl_socket": "/s/mysqlctl.sock", "mysqld_socket": "/s/mysql.sock",
            "stopped_mysqld": true, "cgroup": cgroup, "fs_frozen": null, "hold_since_ms": 0,
            "max_hold_secs": 1, "watchdog_released": false
        })
    }

    #[test]
    fn the_watchdog_thaws_what_it_can_read_of_an_unreadable_entry_and_keeps_the_rest() {
        let d = tempfile::tempdir().unwrap();
        let (good_cg, bad_cg) = (d.path().join("good"), d.path().join("bad"));
        let holds = serde_json::json!({
            "ns/good": entry("ns/good", "zone1-0000000102", fake_frozen_cgroup(&good_cg)),
            "ns/bad": entry("ns/bad", "not an alias", fake_frozen_cgroup(&bad_cg)),
        });
        let state = d.path().join("state");
        std::fs::create_dir_all(&state).unwrap();
        std::fs::write(state.join("holds.json"), holds.to_string()).unwrap();
        let reg = Registry::open(&state).unwrap();
        assert_eq!(reg.unreadable().len(), 1);
        let metrics = Metrics::default();

        // Before max-hold nothing is thawed.
        assert_eq!(sweep(&reg, &metrics, 500), 0);
        assert!(!thawed(&good_cg) && !thawed(&bad_cg));

        assert_eq!(sweep(&reg, &metrics, 10_000), 2);
        assert!(thawed(&good_cg) && thawed(&bad_cg));
        assert_eq!(metrics.releases(Cause::Watchdog), 2);

        // The unreadable entry stays unreadable and in the file, its release recorded.
        let reopened = Registry::open(&state).unwrap();
        assert_eq!(reopened.unreadable().len(), 1);
        let on_disk: serde_json::Value =
            serde_json::from_slice(&std::fs::read(state.join("holds.json")).unwrap()).unwrap();
        let bad = &on_disk["ns/bad"];
        assert_eq!(bad["tablet_alias"], "not an alias");
        assert_eq!(bad["stopped_mysqld"], true);
        assert_eq!(bad["cgroup"], serde_json::Value::Null);
        assert_eq!(bad["watchdog_released"], true);
        assert!(reopened.get("ns/good").unwrap().watchdog_released);
        // Nothing left to thaw.
        assert_eq!(sweep(&reopened, &metrics, 20_000), 0);
    }
}
