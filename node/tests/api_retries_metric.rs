//! The node helper's `/metrics` carries the Kubernetes client's retries
//! (`vtsnap_api_retries_total{verb,code}`, docs/design.md §3.8). A test binary of its own:
//! the counter is process-wide, and a retry counted here must not show up in the other
//! scrape tests' family lists.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use vtsnap_node::daemon::metrics::Metrics;
use vtsnap_testkit::prom_parse::{Format, Kind, parse};

#[test]
fn the_clients_retries_are_served_once_one_happened() {
    let m = Metrics::default();
    let before = parse(&m.render(), Format::OpenMetrics).unwrap();
    assert!(before.family("vtsnap_api_retries").is_none());

    vtsnap_core::metrics::count_api_retry("list", "429");
    vtsnap_core::metrics::count_api_retry("list", "429");
    vtsnap_core::metrics::count_api_retry("update", "503");
    let text = m.render();
    let e = parse(&text, Format::OpenMetrics).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let f = e.family("vtsnap_api_retries").unwrap();
    assert_eq!(f.kind, Kind::Counter);
    assert!(f.help.as_deref().is_some_and(|h| !h.is_empty()), "{f:?}");
    let total = "vtsnap_api_retries_total";
    assert_eq!(
        f.value(total, &[("verb", "list"), ("code", "429")]),
        Some(2.0)
    );
    assert_eq!(
        f.value(total, &[("verb", "update"), ("code", "503")]),
        Some(1.0)
    );
}
