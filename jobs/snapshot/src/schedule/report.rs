//! The schedule reconciler's output: one line per decision (a table on a terminal), then
//! one JSON line with the counts, the problems and what failed to be written.

use serde_json::{Value, json};
use vtsnap_core::exit::Exit;
use vtsnap_core::k8s_names::escape_controls;

use super::act::Outcome;
use super::decide::{Plan, to_json};

/// `ACTION  NAME  REASON  DETAIL`, one per decision, then the problems.
pub fn table(plan: &Plan) -> String {
    let mut out = String::new();
    for d in &plan.decisions {
        let action: &str = d.action.into();
        out.push_str(&format!(
            "{action:<7} {:<52} {:<22} {}\n",
            d.name,
            d.reason.as_str(),
            escape_controls(&d.message)
        ));
    }
    for p in &plan.problems {
        out.push_str(&format!("problem: {}\n", escape_controls(p)));
    }
    out
}

/// The last line: the plan's counts and decisions, and the writes that failed.
pub fn summary(plan: &Plan, outcomes: Option<&[Outcome]>) -> Value {
    let mut v = to_json(plan);
    if let Some(o) = outcomes {
        v["failed"] = json!(o.iter().filter(|o| o.error.is_some()).collect::<Vec<_>>());
    }
    v
}

/// 0 when every read and write went through; 1 otherwise (what could be done was done).
pub fn exit(plan: &Plan, outcomes: &[Outcome]) -> Exit {
    if plan.problems.is_empty() && outcomes.iter().all(|o| o.error.is_none()) {
        Exit::Ok
    } else {
        Exit::Failed
    }
}

#[cfg(test)]
mod tests {
    use super::super::decide::{Action, Decision, Reason};
    use super::*;

    #[test]
    fn each_decision_is_a_line_with_its_reason_and_problems_follow() {
        let plan = Plan {
            decisions: vec![Decision {
                name: "vtsnap-snap-example-commerce-x-x".into(),
                shard: Some("vitess/example/commerce/-".into()),
                action: Action::Create,
                reason: Reason::NewShard,
                message: "schedule \"17 0,6,12,18 * * *\"\u{1b}[2J".into(),
                desired: None,
                resource_version: None,
                uid: None,
            }],
            problems: vec!["VitessCluster vitess/example: forbidden".into()],
        };
        let t = table(&plan);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 2, "{t}");
        assert!(
            lines[0].starts_with("create  vtsnap-snap-example-commerce-x-x"),
            "{t}"
        );
        assert!(lines[0].contains(" new-shard "), "{t}");
        assert!(!t.contains('\u{1b}'), "control characters are escaped: {t}");
        assert_eq!(lines[1], "problem: VitessCluster vitess/example: forbidden");
        assert_eq!(Reason::StillInVtctld.as_str(), "still-in-vtctld");
        assert_eq!(summary(&plan, None)["created"], 1);
        assert_eq!(exit(&plan, &[]), Exit::Failed, "a problem is exit 1");
        let clean = Plan {
            problems: vec![],
            ..plan
        };
        assert_eq!(exit(&clean, &[]), Exit::Ok);
    }
}
