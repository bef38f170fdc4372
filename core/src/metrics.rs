//! Metrics exposition through the Prometheus project's client (`prometheus-client`): its
//! types and label escaping, and the encoder each consumer reads — OpenMetrics for a
//! scraped `/metrics`, the Prometheus text format for a `--metrics-file` textfile.

use std::path::Path;
use std::sync::LazyLock;

use prometheus_client::encoding::{EncodeLabelSet, prometheus_text, text};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// The labels of every per-shard series, in every program: the shard's namespace,
/// cluster, keyspace and key range as Vitess prints it (`-80`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ShardLabels {
    pub namespace: String,
    pub cluster: String,
    pub keyspace: String,
    pub shard: String,
}

impl ShardLabels {
    /// `None` if a part is not a label value (at most 63 characters of a small set): the
    /// API server never stores such a label, and no unbounded value gets into a series.
    pub fn of(s: &crate::shard::ShardRef) -> Option<Self> {
        let parts = [
            s.namespace.as_str(),
            &s.cluster,
            &s.keyspace,
            &s.shard.safe_name(),
        ];
        if parts
            .iter()
            .any(|p| crate::k8s_names::label_value(p).is_err())
        {
            return None;
        }
        Some(Self {
            namespace: s.namespace.clone(),
            cluster: s.cluster.clone(),
            keyspace: s.keyspace.clone(),
            shard: s.shard.to_string(),
        })
    }
}

/// The labels of [`api_retries`]: the API verb and what caused the retry (`429`, `503`,
/// `transport`, …).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ApiRetryLabels {
    pub verb: &'static str,
    pub code: &'static str,
}

/// Process-wide: the retry layer counts here, whichever client retried.
static API_RETRIES: LazyLock<Family<ApiRetryLabels, Counter>> = LazyLock::new(Family::default);

/// Kubernetes API requests this process sent again (docs/design.md §3.8).
pub fn api_retries() -> &'static Family<ApiRetryLabels, Counter> {
    &API_RETRIES
}

/// Counts one retry of a `verb` request caused by `code`.
pub fn count_api_retry(verb: &'static str, code: &'static str) {
    API_RETRIES
        .get_or_create(&ApiRetryLabels { verb, code })
        .inc();
}

/// Adds `vtsnap_api_retries_total{verb,code}` to `registry` (docs/operations.md).
pub fn register_api_retries(registry: &mut Registry) {
    registry.register(
        "vtsnap_api_retries",
        "Kubernetes API requests sent again after a 429, a 5xx or a broken connection",
        API_RETRIES.clone(),
    );
}

/// The `Content-Type` of [`openmetrics`] text.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// `registry` as OpenMetrics text, ending in `# EOF`. Encoding into a String fails only if
/// a metric's own encoder does; the text then lacks its `# EOF`, so a scraper rejects it
/// instead of reading half.
pub fn openmetrics(registry: &Registry) -> String {
    let mut out = String::new();
    if let Err(e) = text::encode(&mut out, registry) {
        tracing::error!(error = %e, "cannot encode the metrics");
    }
    out
}

/// `registry` in the Prometheus text format (0.0.4): what node-exporter's textfile
/// collector reads. It has no end marker, so a failure is returned rather than written.
pub fn textfile(registry: &Registry) -> Result<String, std::fmt::Error> {
    let mut out = String::new();
    prometheus_text::encode(&mut out, registry)?;
    Ok(out)
}

/// A registry whose every metric is labelled with one shard (`cluster`, `keyspace`,
/// `shard`): the textfile of a per-shard job's run.
pub fn shard_registry(cluster: &str, keyspace: &str, shard: &str) -> Registry {
    let labels = [
        ("cluster", cluster),
        ("keyspace", keyspace),
        ("shard", shard),
    ]
    .map(|(k, v)| {
        (
            std::borrow::Cow::Borrowed(k),
            std::borrow::Cow::Owned(v.to_owned()),
        )
    });
    Registry::with_labels(labels.into_iter())
}

/// Seconds since the Unix epoch now (0 if the clock is before it): a textfile's
/// `last_run_timestamp_seconds`.
pub fn unix_now_seconds() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// `--metrics-file`: [`textfile`] written atomically. Best effort, as metrics never change
/// a run's outcome: a failure is logged.
pub fn write_textfile(path: &Path, registry: &Registry) {
    match textfile(registry) {
        Ok(t) => crate::textfile::write_metrics_file(path, &t),
        Err(e) => {
            tracing::warn!(error = %e, path = %path.display(), "cannot encode the metrics file");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::EncodeLabelSet;
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::family::Family;

    #[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
    struct Labels {
        name: String,
    }

    fn registry() -> Registry {
        let mut r = Registry::default();
        let c = Family::<Labels, Counter>::default();
        c.get_or_create(&Labels {
            name: "a\"b\\c\nd".into(),
        })
        .inc();
        r.register("vtsnap_test_things", "Things", c);
        r
    }

    #[test]
    fn openmetrics_escapes_labels_and_ends_in_eof() {
        let t = openmetrics(&registry());
        assert_eq!(
            t,
            "# HELP vtsnap_test_things Things.\n\
             # TYPE vtsnap_test_things counter\n\
             vtsnap_test_things_total{name=\"a\\\"b\\\\c\\nd\"} 1\n\
             # EOF\n"
        );
    }

    #[test]
    fn textfile_is_the_prometheus_text_format() {
        let t = textfile(&registry()).unwrap();
        assert_eq!(
            t,
            "# HELP vtsnap_test_things_total Things.\n\
             # TYPE vtsnap_test_things_total counter\n\
             vtsnap_test_things_total{name=\"a\\\"b\\\\c\\nd\"} 1\n"
        );
    }

    #[test]
    fn api_retries_are_counted_process_wide_and_registered_anywhere() {
        let mut r = Registry::default();
        register_api_retries(&mut r);
        count_api_retry("a-verb", "a-code");
        count_api_retry("a-verb", "a-code");
        let t = openmetrics(&r);
        assert!(
            t.contains("vtsnap_api_retries_total{verb=\"a-verb\",code=\"a-code\"} 2\n"),
            "{t}"
        );
        assert!(t.contains("# TYPE vtsnap_api_retries counter\n"), "{t}");
        let labels = ApiRetryLabels {
            verb: "a-verb",
            code: "a-code",
        };
        assert_eq!(api_retries().get_or_create(&labels).get(), 2);
    }

    #[test]
    fn writes_the_textfile() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("vtsnap.prom");
        write_textfile(&p, &registry());
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            textfile(&registry()).unwrap()
        );
    }
}
