//! Report: what a GC run did (the JSON line printed at exit, [`GcReport`]) and the plan as
//! printed for a terminal ([`table`]) or a program ([`plan_json`]).

use serde::Serialize;
use serde_json::{Value, json};
use vtsnap_core::reconcile::Report;

use crate::decide::CoverageState;
use crate::decide::Plan;

/// What a run did: the program's record of the JSON line (beside `errors` and `exit_code`).
#[derive(Debug, Clone, Serialize)]
pub struct GcRun {
    pub dry_run: bool,
    pub plan: Plan,
    /// Snapshots deleted (`namespace/name`).
    pub deleted: Vec<String>,
    pub owner_refs_changed: usize,
    /// Expired fences recovered (`namespace/name`).
    pub fences_recovered: Vec<String>,
    /// Snapshots marked unusable for restores (`namespace/name`).
    pub marked_unusable: Vec<String>,
    /// Stuck restores whose Pod and PVC were deleted (`namespace/name`).
    pub unstuck: Vec<String>,
    /// Restored tablets that could not catch up, whose Pod and PVC were deleted so that
    /// the operator recreates them from the regular backup (`namespace/name`).
    pub reprovisioned: Vec<String>,
    /// Namespaces left out because a LIST failed (`namespace: why`).
    pub unreadable: Vec<String>,
}

impl GcRun {
    /// A run that has done nothing yet.
    pub fn new(dry_run: bool, plan: Plan, unreadable: Vec<String>) -> Self {
        Self {
            dry_run,
            plan,
            deleted: Vec::new(),
            owner_refs_changed: 0,
            fences_recovered: Vec::new(),
            marked_unusable: Vec::new(),
            unstuck: Vec::new(),
            reprovisioned: Vec::new(),
            unreadable,
        }
    }
}

/// The JSON line printed at exit.
pub type GcReport = Report<GcRun>;

/// Logs what the plan deletes (so a dry run says it in the log too).
pub(crate) fn log(p: &Plan, dry_run: bool) {
    for d in &p.delete {
        tracing::info!(snapshot = %format!("{}/{}", d.namespace, d.name), reason = d.reason.as_str(), dry_run, "delete");
    }
}

/// The plan as a table.
pub fn table(p: &Plan) -> String {
    let mut out = String::new();
    for (what, items) in [("DELETE", &p.delete), ("KEEP", &p.keep)] {
        for i in items {
            out.push_str(&format!(
                "{what:<7} {}/{}  {}\n",
                i.namespace, i.name, i.reason
            ));
        }
    }
    for c in &p.owner_refs.add {
        out.push_str(&format!(
            "OWN     {}/{}  add ownerReference to VitessCluster {}\n",
            c.namespace, c.name, c.cluster
        ));
    }
    for c in &p.owner_refs.remove {
        out.push_str(&format!(
            "DISOWN  {}/{}  remove ownerReference to VitessCluster {}\n",
            c.namespace, c.name, c.cluster
        ));
    }
    for f in &p.recover_fences {
        out.push_str(&format!(
            "RECOVER {}/{}  expired fence\n",
            f.namespace, f.name
        ));
    }
    for m in &p.restores.mark_unusable {
        out.push_str(&format!(
            "UNUSABLE {}/{}  {}\n",
            m.namespace, m.snapshot, m.message
        ));
    }
    for u in &p.restores.unstick {
        out.push_str(&format!(
            "UNSTICK {}/{}  Pending {}s; snapshot {} restores only on {}\n",
            u.namespace, u.pvc, u.pending_seconds, u.snapshot, u.node
        ));
    }
    for c in &p.coverage {
        let shard = format!("{}/{}/{}/{}", c.namespace, c.cluster, c.keyspace, c.shard);
        let what = match &c.state {
            CoverageState::Known {
                newest_covered: Some(n),
                headroom_seconds,
                ..
            } => format!(
                "newest covered {n}, headroom {}",
                headroom_seconds.map_or("unbounded".to_owned(), |h| format!("{}h", h / 3600))
            ),
            CoverageState::Known {
                newest_covered: None,
                ..
            } => "no snapshot can catch up: the newest ready one is kept".to_owned(),
            CoverageState::Unknown { why } => format!("unknown: {why}"),
        };
        out.push_str(&format!("COVER   {shard}  {what}\n"));
    }
    for r in &p.restores.reprovision {
        out.push_str(&format!(
            "REPROVISION {}/{}  cannot catch up from snapshot {}: {}\n",
            r.namespace, r.pvc, r.snapshot, r.io_error
        ));
    }
    for n in &p.restores.not_replicating {
        out.push_str(&format!(
            "NOREPL  {}/{}  {}\n",
            n.namespace,
            n.pvc,
            n.message()
        ));
    }
    for s in &p.skipped {
        out.push_str(&format!(
            "SKIP    {}/{}  {:?} {}: {}\n",
            s.namespace,
            s.name,
            s.kind,
            s.reason.as_str(),
            s.message
        ));
    }
    out.push_str(&format!(
        "{} to delete, {} kept, {} ownerReference changes, {} fences to recover, {} skipped\n",
        p.delete.len(),
        p.keep.len(),
        p.owner_refs.add.len() + p.owner_refs.remove.len(),
        p.recover_fences.len(),
        p.skipped.len()
    ));
    out
}

/// JSON of a plan: `{"delete","keep","owner_refs":{"add","remove"},"recover_fences","skipped"}`.
pub fn plan_json(p: &Plan) -> Value {
    json!(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vtsnap_core::reconcile::{ActError, Completeness, ObjectKey};

    #[test]
    fn the_json_line_keeps_its_field_names() {
        let mut r = GcReport::new(GcRun::new(true, Plan::default(), vec!["ns: boom".into()]));
        r.run.deleted.push("ns/a".into());
        r.errors.push(ActError::new(
            "deleting VolumeSnapshot",
            ObjectKey::new("ns", "b"),
            "forbidden",
        ));
        r.finish(Completeness::Partial);
        let v = serde_json::to_value(&r).unwrap();
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        let mut want = [
            "dry_run",
            "plan",
            "deleted",
            "owner_refs_changed",
            "fences_recovered",
            "marked_unusable",
            "unstuck",
            "reprovisioned",
            "unreadable",
            "errors",
            "exit_code",
        ];
        want.sort_unstable();
        keys.sort_unstable();
        assert_eq!(keys, want);
        assert_eq!(
            v["errors"],
            json!(["deleting VolumeSnapshot ns/b: forbidden"])
        );
        assert_eq!(v["exit_code"], json!(1));
    }
}
