//! The GC run's Prometheus metrics, as a textfile (a CronJob's pod is gone before a scrape).

use crate::run::GcReport;

/// The metrics text of one run.
pub fn render(r: &GcReport, now_seconds: i64) -> String {
    let mut out = String::new();
    let mut gauge = |name: &str, help: &str, value: String| {
        out.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}\n"
        ));
    };
    gauge(
        "vtsnap_gc_last_run_timestamp_seconds",
        "When the last GC run ended.",
        now_seconds.to_string(),
    );
    gauge(
        "vtsnap_gc_last_exit_code",
        "Exit code of the last GC run.",
        r.exit_code.to_string(),
    );
    gauge(
        "vtsnap_gc_snapshots_deleted",
        "Snapshots deleted by the last run.",
        r.deleted.len().to_string(),
    );
    gauge(
        "vtsnap_gc_snapshots_kept",
        "Snapshots kept by the last run.",
        r.plan.keep.len().to_string(),
    );
    gauge(
        "vtsnap_gc_owner_references_changed",
        "ownerReferences added or removed by the last run.",
        r.owner_refs_changed.to_string(),
    );
    gauge(
        "vtsnap_gc_fences_recovered",
        "Expired fences recovered by the last run.",
        r.fences_recovered.len().to_string(),
    );
    gauge(
        "vtsnap_gc_snapshots_marked_unusable",
        "Snapshots the last run marked unusable for restores (stuck node-local restore, binlogs purged).",
        r.marked_unusable.len().to_string(),
    );
    gauge(
        "vtsnap_gc_restores_unstuck",
        "Stuck node-local restores whose Pod and PVC the last run deleted.",
        r.unstuck.len().to_string(),
    );
    gauge(
        "vtsnap_gc_unreadable_namespaces",
        "Namespaces left out because a LIST failed.",
        r.unreadable.len().to_string(),
    );
    gauge(
        "vtsnap_gc_skipped_objects",
        "Snapshots and fence leases left alone because they could not be read completely.",
        r.plan.skipped.len().to_string(),
    );
    out
}

pub use vtsnap_core::cli::write_atomic as write;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Plan;

    #[test]
    fn renders_the_counts() {
        let r = GcReport {
            dry_run: false,
            plan: Plan {
                skipped: vec![crate::plan::Skipped {
                    kind: crate::inventory::Kind::Lease,
                    namespace: "ns".into(),
                    name: "l".into(),
                    reason: crate::plan::SkipReason::Unreadable,
                    message: "Lease ns/l: spec.renewTime is missing".into(),
                }],
                ..Plan::default()
            },
            deleted: vec!["a".into(), "b".into()],
            owner_refs_changed: 1,
            fences_recovered: vec![],
            marked_unusable: vec!["ns/s".into()],
            unstuck: vec![],
            unreadable: vec!["ns: boom".into()],
            errors: vec![],
            exit_code: 1,
        };
        let t = render(&r, 7);
        assert!(t.contains("vtsnap_gc_snapshots_deleted 2\n"), "{t}");
        assert!(t.contains("vtsnap_gc_unreadable_namespaces 1\n"), "{t}");
        assert!(t.contains("vtsnap_gc_last_exit_code 1\n"), "{t}");
        assert!(t.contains("vtsnap_gc_skipped_objects 1\n"), "{t}");
        assert!(t.contains("vtsnap_gc_snapshots_marked_unusable 1\n"), "{t}");
        assert!(t.contains("vtsnap_gc_restores_unstuck 0\n"), "{t}");
    }
}
