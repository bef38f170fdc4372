//! The helper's Prometheus metrics, kept in one prometheus-client registry and served on
//! `/metrics` as OpenMetrics text.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Why a hold ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::IntoStaticStr)]
#[strum(serialize_all = "lowercase")]
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
        self.into()
    }
}

impl EncodeLabelValue for Cause {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> std::fmt::Result {
        encoder.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct CauseLabel {
    cause: Cause,
}

/// Upper bounds of the hold-duration buckets, in seconds: from an online fsfreeze (well
/// under a second) to the longest max-hold a fence asks for (600 s).
const HOLD_BUCKETS: [f64; 11] = [
    0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];

#[derive(Debug)]
struct Inner {
    registry: Registry,
    holds_active: Gauge,
    unreadable_entries: Gauge,
    registry_set_aside: Gauge,
    releases: Family<CauseLabel, Counter>,
    hold_duration: Histogram,
    last_hold_duration: Gauge<f64, AtomicU64>,
    cycles: Counter,
    watch_failures: Counter,
    /// Not a metric: what `/readyz` answers.
    api_ok: AtomicBool,
}

impl Default for Inner {
    fn default() -> Self {
        let i = Self {
            registry: Registry::default(),
            holds_active: Gauge::default(),
            unreadable_entries: Gauge::default(),
            registry_set_aside: Gauge::default(),
            releases: Family::default(),
            hold_duration: Histogram::new(HOLD_BUCKETS),
            last_hold_duration: Gauge::default(),
            cycles: Counter::default(),
            watch_failures: Counter::default(),
            api_ok: AtomicBool::new(false),
        };
        // Every cause is exported from the start, at 0.
        for cause in Cause::ALL {
            let _ = i.releases.get_or_create(&CauseLabel { cause });
        }
        i.register()
    }
}

impl Inner {
    /// Help texts without their full stop: the library appends it. Counters without their
    /// `_total`: the library appends that too.
    fn register(mut self) -> Self {
        let r = &mut self.registry;
        r.register(
            "vtsnap_node_holds_active",
            "Freezes (cgroup or file system) this helper holds now",
            self.holds_active.clone(),
        );
        r.register(
            "vtsnap_node_registry_unreadable_entries",
            "Hold-registry entries that cannot be read: kept as they are, never released; fix or remove them by hand",
            self.unreadable_entries.clone(),
        );
        r.register(
            "vtsnap_node_registry_set_aside",
            "1 if this start found the hold registry corrupt and moved it aside (holds.json.corrupt-<unix-ms>)",
            self.registry_set_aside.clone(),
        );
        r.register(
            "vtsnap_node_hold_duration_seconds",
            "How long holds lasted, until released",
            self.hold_duration.clone(),
        );
        r.register(
            "vtsnap_node_last_hold_duration_seconds",
            "The most recent hold's duration",
            self.last_hold_duration.clone(),
        );
        r.register(
            "vtsnap_node_releases",
            "Holds released, by cause",
            self.releases.clone(),
        );
        r.register(
            "vtsnap_node_reconcile_cycles",
            "Reconcile passes over this node's fence leases",
            self.cycles.clone(),
        );
        r.register(
            "vtsnap_node_lease_watch_failures",
            "Errors of the watch of this node's fence leases; each is resumed with backoff",
            self.watch_failures.clone(),
        );
        // Process-wide: the Kubernetes client's retries (docs/design.md §3.8).
        vtsnap_core::metrics::register_api_retries(r);
        self
    }
}

fn gauge_value(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[derive(Debug, Clone, Default)]
pub struct Metrics(Arc<Inner>);

impl Metrics {
    pub fn set_holds_active(&self, n: usize) {
        self.0.holds_active.set(gauge_value(n));
    }

    /// Hold-registry entries that cannot be read (kept, never acted on).
    pub fn set_unreadable_entries(&self, n: usize) {
        self.0.unreadable_entries.set(gauge_value(n));
    }

    /// This start moved a corrupt hold registry aside.
    pub fn set_registry_set_aside(&self, yes: bool) {
        self.0.registry_set_aside.set(i64::from(yes));
    }

    pub fn unreadable_entries(&self) -> i64 {
        self.0.unreadable_entries.get()
    }

    pub fn released(&self, cause: Cause, held_ms: i64) {
        self.0.releases.get_or_create(&CauseLabel { cause }).inc();
        let seconds = held_ms.max(0) as f64 / 1000.0;
        self.0.hold_duration.observe(seconds);
        self.0.last_hold_duration.set(seconds);
    }

    pub fn releases(&self, cause: Cause) -> u64 {
        self.0.releases.get_or_create(&CauseLabel { cause }).get()
    }

    pub fn cycle(&self) {
        self.0.cycles.inc();
    }

    /// Reconcile passes completed so far.
    pub fn cycles(&self) -> u64 {
        self.0.cycles.get()
    }

    pub fn watch_failed(&self) {
        self.0.watch_failures.inc();
    }

    /// Errors of the lease watch so far (each one resumed with backoff).
    pub fn watch_failures(&self) -> u64 {
        self.0.watch_failures.get()
    }

    pub fn set_api_ok(&self, ok: bool) {
        self.0.api_ok.store(ok, Ordering::SeqCst);
    }

    pub fn api_ok(&self) -> bool {
        self.0.api_ok.load(Ordering::SeqCst)
    }

    /// The `/metrics` body: OpenMetrics text.
    pub fn render(&self) -> String {
        vtsnap_core::metrics::openmetrics(&self.0.registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exports_every_metric_under_its_name() {
        let m = Metrics::default();
        m.set_holds_active(2);
        m.set_registry_set_aside(true);
        m.released(Cause::Watchdog, 1500);
        m.released(Cause::Request, -5);
        m.cycle();
        let t = m.render();
        for line in [
            "vtsnap_node_holds_active 2\n",
            "vtsnap_node_registry_unreadable_entries 0\n",
            "vtsnap_node_registry_set_aside 1\n",
            "vtsnap_node_hold_duration_seconds_sum 1.5\n",
            "vtsnap_node_hold_duration_seconds_count 2\n",
            "vtsnap_node_hold_duration_seconds_bucket{le=\"0.1\"} 1\n",
            "vtsnap_node_hold_duration_seconds_bucket{le=\"+Inf\"} 2\n",
            "vtsnap_node_last_hold_duration_seconds 0.0\n",
            "vtsnap_node_releases_total{cause=\"watchdog\"} 1\n",
            "vtsnap_node_releases_total{cause=\"request\"} 1\n",
            "vtsnap_node_releases_total{cause=\"expiry\"} 0\n",
            "vtsnap_node_releases_total{cause=\"deleted\"} 0\n",
            "vtsnap_node_reconcile_cycles_total 1\n",
            "vtsnap_node_lease_watch_failures_total 0\n",
            "# TYPE vtsnap_node_hold_duration_seconds histogram\n",
            "# TYPE vtsnap_node_releases counter\n",
        ] {
            assert!(t.contains(line), "{line:?} missing from\n{t}");
        }
        assert!(t.ends_with("# EOF\n"), "{t}");
        assert_eq!(m.releases(Cause::Watchdog), 1);
    }
}
