//! The webhook's `/metrics`: one prometheus-client registry, served as OpenMetrics text.

use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::jiff::Timestamp;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::connections::ConnectionMetrics;
use super::drill_metrics::DrillMetrics;
use crate::cache::Caches;
use crate::decide::Decision;
use crate::inventory::Inventory;

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct DecisionLabel {
    decision: String,
}

/// Everything `/metrics` shows.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    reviews: Family<DecisionLabel, Counter>,
    bad_reviews: Counter,
    events_dropped: Counter,
    /// Read from the caches at each scrape.
    cache_synced: Gauge,
    snapshots_cached: Gauge,
    /// Per-shard drill gauges, rebuilt from the cache at each scrape.
    drills: DrillMetrics,
    /// One render at a time: the drill families are cleared and refilled by each.
    render_lock: Mutex<()>,
    /// Open connections and why the server closed others.
    pub connections: Arc<ConnectionMetrics>,
}

impl Default for Metrics {
    fn default() -> Self {
        let m = Self {
            registry: Registry::default(),
            reviews: Family::default(),
            bad_reviews: Counter::default(),
            events_dropped: Counter::default(),
            cache_synced: Gauge::default(),
            snapshots_cached: Gauge::default(),
            drills: DrillMetrics::default(),
            render_lock: Mutex::default(),
            connections: Arc::default(),
        };
        m.register()
    }
}

impl Metrics {
    /// Help texts without their full stop: the library appends it. Counters without their
    /// `_total`: the library appends that too.
    fn register(mut self) -> Self {
        let r = &mut self.registry;
        r.register(
            "vtsnap_admission_reviews",
            "Reviews answered, by the first decision code",
            self.reviews.clone(),
        );
        r.register(
            "vtsnap_admission_bad_reviews",
            "Reviews answered 400 (unreadable)",
            self.bad_reviews.clone(),
        );
        r.register(
            "vtsnap_admission_events_dropped",
            "Events not recorded (queue full)",
            self.events_dropped.clone(),
        );
        r.register(
            "vtsnap_admission_cache_synced",
            "Whether every cache has been filled",
            self.cache_synced.clone(),
        );
        r.register(
            "vtsnap_admission_snapshots_cached",
            "VolumeSnapshots in the cache",
            self.snapshots_cached.clone(),
        );
        self.connections.register(r);
        self.drills.register(r);
        // Process-wide: the Kubernetes client's retries (docs/design.md §3.8).
        vtsnap_core::metrics::register_api_retries(r);
        self
    }

    pub(crate) fn count(&self, d: &Decision) {
        let decision = d
            .notes
            .first()
            .map(|n| n.code.as_str().to_owned())
            .unwrap_or_default();
        self.reviews
            .get_or_create(&DecisionLabel { decision })
            .inc();
    }

    pub(crate) fn bad_review(&self) {
        self.bad_reviews.inc();
    }

    pub(crate) fn event_dropped(&self) {
        self.events_dropped.inc();
    }

    /// The `/metrics` body: OpenMetrics text.
    pub(crate) fn render(&self, caches: &Caches) -> String {
        self.render_at(caches, Timestamp::now())
    }

    /// [`Self::render`] as of `now` (what a drill record may not be later than).
    pub(super) fn render_at(&self, caches: &Caches, now: Timestamp) -> String {
        let drills = caches.drill_records();
        let _one = self
            .render_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.drills.set(&drills, now);
        self.cache_synced.set(i64::from(caches.synced()));
        self.snapshots_cached
            .set(i64::try_from(caches.snapshot_count()).unwrap_or(i64::MAX));
        vtsnap_core::metrics::openmetrics(&self.registry)
    }
}

#[cfg(test)]
mod tests {
    use super::super::connections::CloseReason;
    use super::*;

    #[test]
    fn keeps_the_exposed_names() {
        let m = Metrics::default();
        m.bad_review();
        m.count(&Decision::note(crate::decide::Code::NotVtsnaps, "a Secret"));
        m.connections.opened();
        m.connections.count_close(CloseReason::IdleDeadline);
        let t = vtsnap_core::metrics::openmetrics(&m.registry);
        for line in [
            "vtsnap_admission_reviews_total{decision=\"not-vtsnaps\"} 1\n",
            "vtsnap_admission_bad_reviews_total 1\n",
            "vtsnap_admission_events_dropped_total 0\n",
            "vtsnap_admission_cache_synced 0\n",
            "vtsnap_admission_snapshots_cached 0\n",
            "vtsnap_admission_connections_open 1\n",
            "vtsnap_admission_connections_closed_total{reason=\"idle-deadline\"} 1\n",
            "vtsnap_admission_connections_closed_total{reason=\"full\"} 0\n",
            "# TYPE vtsnap_admission_bad_reviews counter\n",
            "# TYPE vtsnap_admission_connections_open gauge\n",
        ] {
            assert!(t.contains(line), "{line:?} missing from\n{t}");
        }
        assert_eq!(
            t.matches("vtsnap_admission_connections_closed_total{")
                .count(),
            5
        );
        assert!(t.ends_with("# EOF\n"), "{t}");
    }
}
