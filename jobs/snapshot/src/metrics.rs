//! Prometheus metrics of one run, as a textfile (for node-exporter's textfile collector or
//! a sidecar that pushes it): a CronJob's pod does not live long enough to be scraped.
//! Written atomically (temp file, rename) so a reader never sees half a file.

use crate::run::Summary;

fn esc(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// The metrics text for a run of shard `cluster/keyspace/shard`.
pub fn render(s: &Summary, cluster: &str, keyspace: &str, shard: &str, now_seconds: i64) -> String {
    let l = format!(
        "cluster=\"{}\",keyspace=\"{}\",shard=\"{}\"",
        esc(cluster),
        esc(keyspace),
        esc(shard)
    );
    let mut out = String::new();
    let mut gauge = |name: &str, help: &str, labels: &str, value: String| {
        out.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} gauge\n{name}{{{labels}}} {value}\n"
        ));
    };
    gauge(
        "vtsnap_snapshot_last_run_timestamp_seconds",
        "When the last run ended.",
        &l,
        now_seconds.to_string(),
    );
    gauge(
        "vtsnap_snapshot_last_exit_code",
        "Exit code of the last run (0 done, 1 failed, 3 refused, 4 unfence incomplete).",
        &l,
        s.exit_code.to_string(),
    );
    gauge(
        "vtsnap_snapshot_last_outcome",
        "1 for the last run's outcome.",
        &format!(
            "{l},outcome=\"{}\",mode=\"{}\"",
            s.outcome.as_str(),
            s.mode.map_or("", crate::run::decide::mode_name)
        ),
        "1".into(),
    );
    if s.exit_code == 0 && !s.dry_run {
        gauge(
            "vtsnap_snapshot_last_success_timestamp_seconds",
            "When the last successful run ended.",
            &l,
            now_seconds.to_string(),
        );
    }
    for (name, help, v) in [
        (
            "vtsnap_snapshot_fence_window_seconds",
            "How long the tablet was fenced (0 for online without fsfreeze).",
            s.fence_window_ms,
        ),
        (
            "vtsnap_snapshot_cut_latency_seconds",
            "From creating the VolumeSnapshot to its cut.",
            s.cut_latency_ms,
        ),
        (
            "vtsnap_snapshot_ready_latency_seconds",
            "From the cut to readyToUse.",
            s.ready_latency_ms,
        ),
    ] {
        if let Some(ms) = v {
            gauge(name, help, &l, format!("{:.3}", ms as f64 / 1000.0));
        }
    }
    out
}

pub use vtsnap_core::cli::write_atomic as write;

#[cfg(test)]
mod tests {
    use super::*;

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
        let t = render(&s, "example", "commerce", "-80", 1_700_000_000);
        assert!(t.contains("vtsnap_snapshot_last_exit_code{cluster=\"example\",keyspace=\"commerce\",shard=\"-80\"} 0"), "{t}");
        assert!(t.contains("vtsnap_snapshot_fence_window_seconds{cluster=\"example\",keyspace=\"commerce\",shard=\"-80\"} 1.500"), "{t}");
        assert!(t.contains("outcome=\"done\",mode=\"cold\"} 1"), "{t}");
        assert!(t.contains("vtsnap_snapshot_last_success_timestamp_seconds"));
        assert!(
            !t.contains("ready_latency"),
            "absent values are not exported"
        );
        let failed = render(
            &Summary {
                outcome: crate::run::Outcome::Failed,
                exit_code: 1,
                ..Summary::default()
            },
            "e",
            "k",
            "-",
            1,
        );
        assert!(!failed.contains("last_success"));
        assert_eq!(esc("a\"b\\c"), "a\\\"b\\\\c");
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
