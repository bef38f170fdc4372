//! Prometheus metrics of one run, as a textfile (for node-exporter's textfile collector or
//! a sidecar that pushes it): a CronJob's pod does not live long enough to be scraped.
//! Written atomically (temp file, rename) so a reader never sees half a file.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::registry::Registry;

use crate::run::Summary;
use crate::run::decide::mode_name;

/// The labels of `vtsnap_snapshot_last_outcome`, after the shard's.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
    mode: &'static str,
}

/// The metrics of a run of shard `cluster/keyspace/shard`, each labelled with the shard,
/// for [`vtsnap_core::metrics::write_textfile`].
pub fn registry(
    s: &Summary,
    cluster: &str,
    keyspace: &str,
    shard: &str,
    now_seconds: i64,
) -> Registry {
    // Help texts without their full stop: the library appends it.
    let mut reg = vtsnap_core::metrics::shard_registry(cluster, keyspace, shard);
    reg.register(
        "vtsnap_snapshot_last_run_timestamp_seconds",
        "When the last run ended",
        ConstGauge::new(now_seconds),
    );
    reg.register(
        "vtsnap_snapshot_last_exit_code",
        "Exit code of the last run (0 done, 1 failed, 3 refused, 4 unfence incomplete)",
        ConstGauge::new(i64::from(s.exit_code)),
    );
    let outcome = Family::<OutcomeLabels, Gauge>::default();
    outcome
        .get_or_create(&OutcomeLabels {
            outcome: s.outcome.as_str(),
            mode: s.mode.map_or("", mode_name),
        })
        .set(1);
    reg.register(
        "vtsnap_snapshot_last_outcome",
        "1 for the last run's outcome",
        outcome,
    );
    if s.exit_code == 0 && !s.dry_run {
        reg.register(
            "vtsnap_snapshot_last_success_timestamp_seconds",
            "When the last successful run ended",
            ConstGauge::new(now_seconds),
        );
    }
    for (name, help, v) in [
        (
            "vtsnap_snapshot_fence_window_seconds",
            "How long the tablet was fenced (0 for online without fsfreeze)",
            s.fence_window_ms,
        ),
        (
            "vtsnap_snapshot_cut_latency_seconds",
            "From creating the VolumeSnapshot to its cut",
            s.cut_latency_ms,
        ),
        (
            "vtsnap_snapshot_ready_latency_seconds",
            "From the cut to readyToUse",
            s.ready_latency_ms,
        ),
    ] {
        if let Some(ms) = v {
            reg.register(name, help, ConstGauge::new(ms as f64 / 1000.0));
        }
    }
    reg
}

pub use vtsnap_core::cli::write_atomic as write;

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &Summary, cluster: &str, keyspace: &str, shard: &str) -> String {
        vtsnap_core::metrics::textfile(&registry(s, cluster, keyspace, shard, 1_700_000_000))
            .unwrap()
    }

    #[test]
    fn renders_the_run() {
        let s = Summary {
            outcome: crate::run::Outcome::Done,
            exit_code: 0,
            mode: Some(vtsnap_core::config::Mode::Cold),
            fence_window_ms: Some(1500),
            cut_latency_ms: Some(250),
            ..Summary::default()
        };
        let t = text(&s, "example", "commerce", "-80");
        assert!(t.contains("vtsnap_snapshot_last_exit_code{cluster=\"example\",keyspace=\"commerce\",shard=\"-80\"} 0\n"), "{t}");
        assert!(t.contains("vtsnap_snapshot_fence_window_seconds{cluster=\"example\",keyspace=\"commerce\",shard=\"-80\"} 1.5\n"), "{t}");
        assert!(t.contains("vtsnap_snapshot_cut_latency_seconds{cluster=\"example\",keyspace=\"commerce\",shard=\"-80\"} 0.25\n"), "{t}");
        assert!(
            t.contains("shard=\"-80\",outcome=\"done\",mode=\"cold\"} 1\n"),
            "{t}"
        );
        assert!(
            t.contains("# TYPE vtsnap_snapshot_last_outcome gauge\n"),
            "{t}"
        );
        assert!(t.contains("vtsnap_snapshot_last_success_timestamp_seconds"));
        assert!(
            !t.contains("ready_latency"),
            "absent values are not exported"
        );
        let failed = Summary {
            outcome: crate::run::Outcome::Failed,
            exit_code: 1,
            ..Summary::default()
        };
        let failed = text(&failed, "e", "k", "-");
        assert!(!failed.contains("last_success"));
        assert!(
            failed.contains("outcome=\"failed\",mode=\"\"} 1\n"),
            "{failed}"
        );
    }

    #[test]
    fn the_library_escapes_label_values() {
        let t = text(&Summary::default(), "a\"b\\c", "k", "-");
        assert!(
            t.contains("vtsnap_snapshot_last_exit_code{cluster=\"a\\\"b\\\\c\",keyspace=\"k\",shard=\"-\"} 0\n"),
            "{t}"
        );
    }

    #[test]
    fn writes_atomically() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("vtsnap.prom");
        write(&p, "a 1\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "a 1\n");
        assert!(!p.with_extension("tmp").exists());
    }
}
