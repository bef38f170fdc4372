//! The GC run's Prometheus metrics, as a textfile (a CronJob's pod is gone before a scrape).

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::registry::Registry;

use vtsnap_core::metrics::ShardLabels;

use crate::decide::CoverageState;
use crate::report::GcReport;

/// The metrics of one run, for [`vtsnap_core::metrics::write_textfile`].
pub fn registry(r: &GcReport, now_seconds: i64) -> Registry {
    // Help texts without their full stop: the library appends it.
    let mut reg = Registry::default();
    reg.register(
        "vtsnap_gc_last_run_timestamp_seconds",
        "When the last GC run ended",
        ConstGauge::new(now_seconds),
    );
    reg.register(
        "vtsnap_gc_last_exit_code",
        "Exit code of the last GC run",
        ConstGauge::new(i64::from(r.exit_code)),
    );
    for (name, help, n) in [
        (
            "vtsnap_gc_snapshots_deleted",
            "Snapshots deleted by the last run",
            r.run.deleted.len(),
        ),
        (
            "vtsnap_gc_snapshots_kept",
            "Snapshots kept by the last run",
            r.run.plan.keep.len(),
        ),
        (
            "vtsnap_gc_owner_references_changed",
            "ownerReferences added or removed by the last run",
            r.run.owner_refs_changed,
        ),
        (
            "vtsnap_gc_fences_recovered",
            "Expired fences recovered by the last run",
            r.run.fences_recovered.len(),
        ),
        (
            "vtsnap_gc_snapshots_marked_unusable",
            "Snapshots the last run marked unusable for restores (stuck node-local restore, binlogs purged)",
            r.run.marked_unusable.len(),
        ),
        (
            "vtsnap_gc_restores_unstuck",
            "Stuck node-local restores whose Pod and PVC the last run deleted",
            r.run.unstuck.len(),
        ),
        (
            "vtsnap_gc_unreadable_namespaces",
            "Namespaces left out because a LIST failed",
            r.run.unreadable.len(),
        ),
        (
            "vtsnap_gc_skipped_objects",
            "Snapshots and fence leases left alone because they could not be read completely",
            r.run.plan.skipped.len(),
        ),
    ] {
        reg.register(name, help, ConstGauge::new(n));
    }
    // Only shards with a newest covered snapshot on a primary that expires binlogs by
    // time: an unknown or unbounded headroom has no value to give.
    let headroom = Family::<ShardLabels, Gauge>::default();
    for c in &r.run.plan.coverage {
        if let CoverageState::Known {
            headroom_seconds: Some(h),
            ..
        } = &c.state
        {
            let labels = ShardLabels {
                namespace: c.namespace.clone(),
                cluster: c.cluster.clone(),
                keyspace: c.keyspace.clone(),
                shard: c.shard.clone(),
            };
            headroom
                .get_or_create(&labels)
                .set(i64::try_from(*h).unwrap_or(i64::MAX));
        }
    }
    reg.register(
        "vtsnap_gc_coverage_headroom_seconds",
        "How long the newest snapshot a new tablet can catch up from stays so (binlog expiry minus its age)",
        headroom,
    );
    reg
}

pub use vtsnap_core::cli::write_atomic as write;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::Plan;

    #[test]
    fn renders_the_counts() {
        let r = GcReport {
            run: crate::report::GcRun {
                dry_run: false,
                plan: Plan {
                    skipped: vec![crate::decide::Skipped {
                        kind: crate::observe::Kind::Lease,
                        namespace: "ns".into(),
                        name: "l".into(),
                        reason: crate::decide::SkipReason::Unreadable,
                        message: "Lease ns/l: spec.renewTime is missing".into(),
                    }],
                    ..Plan::default()
                },
                deleted: vec!["a".into(), "b".into()],
                owner_refs_changed: 1,
                fences_recovered: vec![],
                marked_unusable: vec!["ns/s".into()],
                unstuck: vec![],
                reprovisioned: vec![],
                unreadable: vec!["ns: boom".into()],
            },
            errors: vec![],
            exit_code: 1,
        };
        let t = vtsnap_core::metrics::textfile(&registry(&r, 7)).unwrap();
        assert!(t.contains("vtsnap_gc_snapshots_deleted 2\n"), "{t}");
        assert!(t.contains("vtsnap_gc_unreadable_namespaces 1\n"), "{t}");
        assert!(t.contains("vtsnap_gc_last_exit_code 1\n"), "{t}");
        assert!(t.contains("vtsnap_gc_skipped_objects 1\n"), "{t}");
        assert!(t.contains("vtsnap_gc_snapshots_marked_unusable 1\n"), "{t}");
        assert!(t.contains("vtsnap_gc_restores_unstuck 0\n"), "{t}");
        assert!(
            t.contains(
                "# HELP vtsnap_gc_last_exit_code Exit code of the last GC run.\n\
                 # TYPE vtsnap_gc_last_exit_code gauge\n"
            ),
            "{t}"
        );
        assert_eq!(t.matches("# TYPE ").count(), 10, "{t}");
        assert!(t.ends_with("vtsnap_gc_skipped_objects 1\n"), "{t}");
    }
}
