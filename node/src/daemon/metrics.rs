//! Prometheus metrics, rendered by hand in the text exposition format.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

/// Why a hold ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The job asked (`request: release`).
    Request,
    /// The lease expired.
    Expiry,
    /// The lease was deleted.
    Deleted,
    /// max-hold reached.
    Watchdog,
}

impl Cause {
    const ALL: [Cause; 4] = [
        Cause::Request,
        Cause::Expiry,
        Cause::Deleted,
        Cause::Watchdog,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Request => "request",
            Self::Expiry => "expiry",
            Self::Deleted => "deleted",
            Self::Watchdog => "watchdog",
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    holds_active: AtomicI64,
    unreadable_entries: AtomicI64,
    registry_set_aside: AtomicBool,
    released: [AtomicU64; 4],
    hold_ms_sum: AtomicU64,
    hold_count: AtomicU64,
    hold_ms_last: AtomicU64,
    cycles: AtomicU64,
    watch_failures: AtomicU64,
    api_ok: AtomicBool,
}

#[derive(Debug, Clone, Default)]
pub struct Metrics(Arc<Inner>);

impl Metrics {
    pub fn set_holds_active(&self, n: usize) {
        self.0
            .holds_active
            .store(i64::try_from(n).unwrap_or(i64::MAX), Ordering::SeqCst);
    }

    /// Hold-registry entries that cannot be read (kept, never acted on).
    pub fn set_unreadable_entries(&self, n: usize) {
        self.0
            .unreadable_entries
            .store(i64::try_from(n).unwrap_or(i64::MAX), Ordering::SeqCst);
    }

    /// This start moved a corrupt hold registry aside.
    pub fn set_registry_set_aside(&self, yes: bool) {
        self.0.registry_set_aside.store(yes, Ordering::SeqCst);
    }

    pub fn unreadable_entries(&self) -> i64 {
        self.0.unreadable_entries.load(Ordering::SeqCst)
    }

    pub fn released(&self, cause: Cause, held_ms: i64) {
        let i = Cause::ALL.iter().position(|c| *c == cause).unwrap_or(0);
        self.0.released[i].fetch_add(1, Ordering::SeqCst);
        let ms = u64::try_from(held_ms.max(0)).unwrap_or(0);
        self.0.hold_ms_sum.fetch_add(ms, Ordering::SeqCst);
        self.0.hold_count.fetch_add(1, Ordering::SeqCst);
        self.0.hold_ms_last.store(ms, Ordering::SeqCst);
    }

    pub fn releases(&self, cause: Cause) -> u64 {
        let i = Cause::ALL.iter().position(|c| *c == cause).unwrap_or(0);
        self.0.released[i].load(Ordering::SeqCst)
    }

    pub fn cycle(&self) {
        self.0.cycles.fetch_add(1, Ordering::SeqCst);
    }

    /// Reconcile passes completed so far.
    pub fn cycles(&self) -> u64 {
        self.0.cycles.load(Ordering::SeqCst)
    }

    pub fn watch_failed(&self) {
        self.0.watch_failures.fetch_add(1, Ordering::SeqCst);
    }

    /// Errors of the lease watch so far (each one resumed with backoff).
    pub fn watch_failures(&self) -> u64 {
        self.0.watch_failures.load(Ordering::SeqCst)
    }

    pub fn set_api_ok(&self, ok: bool) {
        self.0.api_ok.store(ok, Ordering::SeqCst);
    }

    pub fn api_ok(&self) -> bool {
        self.0.api_ok.load(Ordering::SeqCst)
    }

    pub fn render(&self) -> String {
        let i = &self.0;
        let mut s = String::new();
        s.push_str("# HELP vtsnap_node_holds_active Freezes (cgroup or file system) this helper holds now.\n");
        s.push_str("# TYPE vtsnap_node_holds_active gauge\n");
        s.push_str(&format!(
            "vtsnap_node_holds_active {}\n",
            i.holds_active.load(Ordering::SeqCst)
        ));
        s.push_str("# HELP vtsnap_node_registry_unreadable_entries Hold-registry entries that cannot be read: kept as they are, never released; fix or remove them by hand.\n");
        s.push_str("# TYPE vtsnap_node_registry_unreadable_entries gauge\n");
        s.push_str(&format!(
            "vtsnap_node_registry_unreadable_entries {}\n",
            i.unreadable_entries.load(Ordering::SeqCst)
        ));
        s.push_str("# HELP vtsnap_node_registry_set_aside 1 if this start found the hold registry corrupt and moved it aside (holds.json.corrupt-<unix-ms>).\n");
        s.push_str("# TYPE vtsnap_node_registry_set_aside gauge\n");
        s.push_str(&format!(
            "vtsnap_node_registry_set_aside {}\n",
            u8::from(i.registry_set_aside.load(Ordering::SeqCst))
        ));
        s.push_str(
            "# HELP vtsnap_node_hold_duration_seconds How long holds lasted, until released.\n",
        );
        s.push_str("# TYPE vtsnap_node_hold_duration_seconds summary\n");
        s.push_str(&format!(
            "vtsnap_node_hold_duration_seconds_sum {:.3}\n",
            i.hold_ms_sum.load(Ordering::SeqCst) as f64 / 1000.0
        ));
        s.push_str(&format!(
            "vtsnap_node_hold_duration_seconds_count {}\n",
            i.hold_count.load(Ordering::SeqCst)
        ));
        s.push_str(
            "# HELP vtsnap_node_last_hold_duration_seconds The most recent hold's duration.\n",
        );
        s.push_str("# TYPE vtsnap_node_last_hold_duration_seconds gauge\n");
        s.push_str(&format!(
            "vtsnap_node_last_hold_duration_seconds {:.3}\n",
            i.hold_ms_last.load(Ordering::SeqCst) as f64 / 1000.0
        ));
        s.push_str("# HELP vtsnap_node_releases_total Holds released, by cause.\n");
        s.push_str("# TYPE vtsnap_node_releases_total counter\n");
        for (n, c) in Cause::ALL.iter().enumerate() {
            s.push_str(&format!(
                "vtsnap_node_releases_total{{cause=\"{}\"}} {}\n",
                c.as_str(),
                i.released[n].load(Ordering::SeqCst)
            ));
        }
        s.push_str("# HELP vtsnap_node_reconcile_cycles_total Reconcile passes over this node's fence leases.\n");
        s.push_str("# TYPE vtsnap_node_reconcile_cycles_total counter\n");
        s.push_str(&format!(
            "vtsnap_node_reconcile_cycles_total {}\n",
            i.cycles.load(Ordering::SeqCst)
        ));
        s.push_str("# HELP vtsnap_node_lease_watch_failures_total Errors of the watch of this node's fence leases; each is resumed with backoff.\n");
        s.push_str("# TYPE vtsnap_node_lease_watch_failures_total counter\n");
        s.push_str(&format!(
            "vtsnap_node_lease_watch_failures_total {}\n",
            i.watch_failures.load(Ordering::SeqCst)
        ));
        s
    }
}
