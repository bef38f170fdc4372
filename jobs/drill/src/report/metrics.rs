//! Prometheus metrics of one drill run, as a textfile (`--metrics-file`, for
//! node-exporter's textfile collector or a sidecar that pushes it), like the snapshot
//! job's: a CronJob's Pod does not live long enough to be scraped.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::registry::Registry;

use crate::report::{Outcome, Summary};

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct PartLabels {
    part: &'static str,
}

fn outcome_name(o: Outcome) -> &'static str {
    match o {
        Outcome::Passed => "passed",
        Outcome::Failed => "failed",
        Outcome::Refused => "refused",
        Outcome::Error => "error",
        Outcome::Planned => "planned",
    }
}

/// The metrics of a drill of shard `cluster/keyspace/shard`, each labelled with the shard.
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
        "vtsnap_drill_last_run_timestamp_seconds",
        "When the last drill run ended",
        ConstGauge::new(now_seconds),
    );
    let outcome = Family::<OutcomeLabels, Gauge>::default();
    outcome
        .get_or_create(&OutcomeLabels {
            outcome: outcome_name(s.outcome),
        })
        .set(1);
    reg.register(
        "vtsnap_drill_last_outcome",
        "1 for the last drill run's outcome (passed, failed, refused, error)",
        outcome,
    );
    if let Some(rto) = s.drill.as_ref().and_then(|d| d.rto) {
        let parts = Family::<PartLabels, Gauge>::default();
        for (part, ms) in [
            ("pvc_bound", rto.pvc_bound_ms),
            ("restore", rto.restore_ms),
            ("mysqld_ready", rto.mysqld_ready_ms),
            ("total", rto.total_ms()),
        ] {
            parts
                .get_or_create(&PartLabels { part })
                .set(i64::try_from(ms).unwrap_or(i64::MAX));
        }
        reg.register(
            "vtsnap_drill_last_rto_milliseconds",
            "The last drill's measured restore time, by part",
            parts,
        );
    }
    reg
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;
    use vtsnap_core::snapshot::{DrillRecord, Rto};

    #[test]
    fn a_passed_drill_has_its_outcome_and_every_rto_part() {
        let rto = Rto {
            pvc_bound_ms: 1200,
            restore_ms: 80,
            mysqld_ready_ms: 3000,
        };
        let of = vtsnap_core::snapshot::DrillOf {
            uid: "uid-s1".into(),
            cut: Timestamp::UNIX_EPOCH,
        };
        let s = Summary::new("example/commerce/-80".into()).drilled(DrillRecord::passed(
            &of,
            Timestamp::UNIX_EPOCH,
            rto,
            None,
        ));
        let text = vtsnap_core::metrics::textfile(&registry(
            &s,
            "example",
            "commerce",
            "-80",
            1_800_000_000,
        ))
        .unwrap();
        for want in [
            r#"vtsnap_drill_last_outcome{cluster="example",keyspace="commerce",shard="-80",outcome="passed"} 1"#,
            r#"vtsnap_drill_last_rto_milliseconds{cluster="example",keyspace="commerce",shard="-80",part="total"} 4280"#,
            r#"vtsnap_drill_last_rto_milliseconds{cluster="example",keyspace="commerce",shard="-80",part="pvc_bound"} 1200"#,
            r#"vtsnap_drill_last_run_timestamp_seconds{cluster="example",keyspace="commerce",shard="-80"} 1800000000"#,
        ] {
            assert!(text.contains(want), "{want}\n{text}");
        }
        let refused = Summary::new("x".into()).refused(crate::decide::Refusal::NoTabletImage);
        let text = vtsnap_core::metrics::textfile(&registry(&refused, "e", "c", "-", 1)).unwrap();
        assert!(text.contains(r#"outcome="refused"} 1"#), "{text}");
        assert!(!text.contains("rto"), "{text}");
    }
}
