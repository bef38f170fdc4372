//! Decide, after the fact: what a drill Pod's status says (docs/design.md §5.9). Pure:
//! the Pod's status as last read ([`PodStatus`]), and what the Job measured itself, become
//! the record written on the snapshot. Everything in the status is the kubelet's or the
//! checker's word and is taken as hostile: a report is bounded, a message escaped and cut.

use k8s_openapi::jiff::Timestamp;
use serde::Deserialize;
use vtsnap_core::coverage::Coverage;
use vtsnap_core::k8s_names::escape_controls;
use vtsnap_core::snapshot::{DrillOf, DrillRecord, DrillResult, Rto};

use super::objects::MAX_RESULT_BYTES;
use crate::observe::pod::{Ended, Phase, PodStatus};

/// An exit without a code is not a clean one.
const NO_EXIT_CODE: i32 = -1;

impl Ended {
    fn code(&self) -> i32 {
        self.exit_code.unwrap_or(NO_EXIT_CODE)
    }

    fn failed(&self) -> bool {
        self.code() != 0
    }
}

/// Whether the Job can stop waiting: the checker ended, or something that makes its
/// result moot did (the Pod ended, the restore or mysqld failed).
pub fn finished(pod: &PodStatus) -> bool {
    pod.phase == Phase::Ended
        || pod.checker.is_some()
        || pod.restore.as_ref().is_some_and(Ended::failed)
        || pod.mysqld.as_ref().is_some_and(Ended::failed)
}

/// The checker's report, as the termination message carries it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    verdict: ReportVerdict,
    mysqld_ready_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct ReportVerdict {
    passed: bool,
    reason: Option<String>,
}

fn report(message: &str) -> Result<Report, String> {
    if message.len() > MAX_RESULT_BYTES {
        return Err(format!(
            "its report is {} bytes, more than {MAX_RESULT_BYTES}",
            message.len()
        ));
    }
    serde_json::from_str(message).map_err(|e| format!("its report does not read: {e}"))
}

fn ms_between(a: Option<Timestamp>, b: Option<Timestamp>) -> u64 {
    match (a, b) {
        (Some(a), Some(b)) if b >= a => {
            u64::try_from(b.duration_since(a).as_millis()).unwrap_or(u64::MAX)
        }
        _ => 0,
    }
}

/// Why the Job stopped waiting for the Pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitEnd {
    /// The Pod [`finished`].
    Finished,
    /// The wait reached its limit first.
    Deadline,
}

/// What the Job itself measured and saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watched {
    /// From the PVC's creation until the Job saw it bound (`None`: never).
    pub pvc_bound_ms: Option<u64>,
    /// The Pod's status as last read (`None`: it could not be read).
    pub pod: Option<PodStatus>,
    pub wait: WaitEnd,
    /// Why the Pod is not scheduled, if the scheduler said so.
    pub unschedulable: Option<String>,
}

fn cut(s: &str) -> String {
    escape_controls(s).chars().take(512).collect()
}

/// A passed drill of a snapshot the shard can no longer catch up from fails: a tablet
/// restored from it would stop at error 1236. Unknown coverage does not fail it.
pub fn with_catch_up(record: DrillRecord, catch_up: &Coverage) -> DrillRecord {
    match (record.result, catch_up) {
        (DrillResult::Passed, Coverage::NotCovered { missing }) => DrillRecord::failed(
            &record.of(),
            record.at,
            &format!(
                "restored and checked, but a tablet restored from it cannot catch up: the primary purged {missing}"
            ),
            record.rto,
            record.job,
        ),
        _ => record,
    }
}

/// The record a finished (or abandoned) drill leaves on its snapshot.
pub fn record(w: &Watched, of: &DrillOf, now: Timestamp, job: Option<String>) -> DrillRecord {
    let pod = w.pod.as_ref();
    let restore = pod.and_then(|p| p.restore.as_ref());
    let checker = pod.and_then(|p| p.checker.as_ref());
    let mysqld = pod.and_then(|p| p.mysqld.as_ref());
    let parsed = checker.map(|c| report(&c.message));
    let rto = Rto {
        pvc_bound_ms: w.pvc_bound_ms.unwrap_or(0),
        restore_ms: restore.map_or(0, |r| ms_between(r.started, r.finished)),
        mysqld_ready_ms: parsed
            .as_ref()
            .and_then(|r| r.as_ref().ok())
            .and_then(|r| r.mysqld_ready_ms)
            .unwrap_or(0),
    };
    let fail = |why: String| DrillRecord::failed(of, now, &why, Some(rto), job.clone());
    if w.pvc_bound_ms.is_none() {
        return fail(match &w.unschedulable {
            Some(m) => format!("the drill Pod was never scheduled: {}", cut(m)),
            None => "the drill PVC never bound to a volume restored from the snapshot".into(),
        });
    }
    if let Some(r) = restore
        && r.failed()
    {
        return fail(format!(
            "vtsnap-restore exited {} ({}): {}",
            r.code(),
            cut(&r.reason),
            cut(&r.message)
        ));
    }
    match parsed {
        Some(Ok(r)) if r.verdict.passed => DrillRecord::passed(of, now, rto, job),
        Some(Ok(r)) => fail(
            r.verdict
                .reason
                .unwrap_or_else(|| "the checker failed".into()),
        ),
        Some(Err(e)) => fail(format!("the checker ended, but {e}")),
        None => fail(match (mysqld, w.wait) {
            (Some(m), _) if m.failed() => format!(
                "mysqld exited {} ({}) before the check was done: {}",
                m.code(),
                cut(&m.reason),
                cut(&m.message)
            ),
            (_, WaitEnd::Deadline) => "no result before the drill's deadline".into(),
            _ => "the drill Pod ended without a result from the checker".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::decide::objects::{CHECKER_CONTAINER, MYSQLD_CONTAINER};
    use vtsnap_core::restore_pod::CONTAINER as RESTORE_CONTAINER;

    fn now() -> Timestamp {
        "2026-12-03T12:00:00Z".parse().unwrap()
    }

    /// The drilled snapshot.
    fn of() -> DrillOf {
        DrillOf {
            uid: "uid-s1".into(),
            cut: "2026-12-03T06:00:00Z".parse().unwrap(),
        }
    }

    /// One container's status: its name, and how it ended (`None`: it did not).
    type Container = (&'static str, Option<Ended>);

    /// A Pod in `phase` whose init containers and containers are as listed.
    fn pod(init: Vec<Container>, containers: Vec<Container>, phase: &str) -> PodStatus {
        let ended = |list: &[Container], name: &str| {
            list.iter()
                .find(|(n, _)| *n == name)
                .and_then(|(_, e)| e.clone())
        };
        PodStatus {
            phase: if matches!(phase, "Succeeded" | "Failed") {
                Phase::Ended
            } else {
                Phase::NotEnded
            },
            restore: ended(&init, RESTORE_CONTAINER),
            mysqld: ended(&containers, MYSQLD_CONTAINER),
            checker: ended(&containers, CHECKER_CONTAINER),
        }
    }

    /// Ended with `code`; times that are not RFC 3339 are not read.
    fn done(name: &'static str, code: i32, message: &str, from: &str, to: &str) -> Container {
        let ended = Ended {
            exit_code: Some(code),
            reason: if code == 0 { "Completed" } else { "Error" }.into(),
            message: message.into(),
            started: from.parse().ok(),
            finished: to.parse().ok(),
        };
        (name, Some(ended))
    }

    fn running(name: &'static str) -> Container {
        (name, None)
    }

    fn watched(p: PodStatus) -> Watched {
        Watched {
            pvc_bound_ms: Some(1500),
            pod: Some(p),
            wait: WaitEnd::Finished,
            unschedulable: None,
        }
    }

    const PASSED: &str = r#"{"verdict":{"passed":true,"tablesTotal":3,"tablesChecked":3,"sampled":false},"mysqldReadyMs":2300}"#;

    #[test]
    fn a_passed_check_is_a_passed_drill_with_every_part_measured() {
        let p = pod(
            vec![done(
                RESTORE_CONTAINER,
                0,
                "",
                "2026-12-03T11:58:00Z",
                "2026-12-03T11:58:02Z",
            )],
            vec![
                done(MYSQLD_CONTAINER, 0, "", "x", "y"),
                done(CHECKER_CONTAINER, 0, PASSED, "x", "y"),
            ],
            "Succeeded",
        );
        assert!(finished(&p));
        let r = record(&watched(p), &of(), now(), Some("job-1".into()));
        assert_eq!(
            r,
            DrillRecord::passed(
                &of(),
                now(),
                Rto {
                    pvc_bound_ms: 1500,
                    restore_ms: 2000,
                    mysqld_ready_ms: 2300
                },
                Some("job-1".into())
            )
        );
    }

    #[test]
    fn a_failed_check_carries_the_checkers_reason() {
        let failed = r#"{"verdict":{"passed":false,"failure":"table-corrupt","reason":"table shop.orders: corrupt"},"mysqldReadyMs":10}"#;
        let p = pod(
            vec![done(RESTORE_CONTAINER, 0, "", "a", "b")],
            vec![
                running(MYSQLD_CONTAINER),
                done(CHECKER_CONTAINER, 1, failed, "x", "y"),
            ],
            "Running",
        );
        assert!(finished(&p), "the checker ended: nothing more to wait for");
        let r = record(&watched(p), &of(), now(), None);
        assert_eq!(r.reason.as_deref(), Some("table shop.orders: corrupt"));
        assert_eq!(r.rto.unwrap().mysqld_ready_ms, 10);
    }

    #[test]
    fn every_way_a_pod_fails_is_named() {
        let cases = [
            (
                pod(
                    vec![done(RESTORE_CONTAINER, 3, "no tablet directory", "a", "b")],
                    vec![],
                    "Failed",
                ),
                "vtsnap-restore exited 3 (Error): no tablet directory",
            ),
            (
                pod(
                    vec![done(RESTORE_CONTAINER, 0, "", "a", "b")],
                    vec![
                        done(MYSQLD_CONTAINER, 1, "InnoDB: corrupt\u{1b}", "a", "b"),
                        running(CHECKER_CONTAINER),
                    ],
                    "Running",
                ),
                "mysqld exited 1 (Error) before the check was done: InnoDB: corrupt\\u{1b}",
            ),
            (
                pod(
                    vec![done(RESTORE_CONTAINER, 0, "", "a", "b")],
                    vec![done(CHECKER_CONTAINER, 1, "not json", "a", "b")],
                    "Failed",
                ),
                "the checker ended, but its report does not read",
            ),
            (
                pod(
                    vec![done(RESTORE_CONTAINER, 0, "", "a", "b")],
                    vec![done(CHECKER_CONTAINER, 1, &"x".repeat(5000), "a", "b")],
                    "Failed",
                ),
                "its report is 5000 bytes",
            ),
            (
                pod(
                    vec![done(RESTORE_CONTAINER, 0, "", "a", "b")],
                    vec![running(MYSQLD_CONTAINER), running(CHECKER_CONTAINER)],
                    "Running",
                ),
                "the drill Pod ended without a result",
            ),
        ];
        for (p, want) in cases {
            assert!(finished(&p) || want.contains("without a result"), "{want}");
            let r = record(&watched(p), &of(), now(), None);
            let reason = r.reason.unwrap();
            assert!(
                reason.starts_with(want) || reason.contains(want),
                "{want}: {reason}"
            );
        }
        let mut w = watched(pod(vec![], vec![], "Pending"));
        w.wait = WaitEnd::Deadline;
        assert!(!finished(w.pod.as_ref().unwrap()));
        w.pvc_bound_ms = None;
        assert_eq!(
            record(&w, &of(), now(), None).reason.as_deref(),
            Some("the drill PVC never bound to a volume restored from the snapshot")
        );
        w.unschedulable = Some("0/3 nodes are available: 3 Insufficient memory.".into());
        assert_eq!(
            record(&w, &of(), now(), None).reason.as_deref(),
            Some(
                "the drill Pod was never scheduled: 0/3 nodes are available: 3 Insufficient memory."
            )
        );
        let mut w = watched(pod(
            vec![done(RESTORE_CONTAINER, 0, "", "a", "b")],
            vec![running(CHECKER_CONTAINER)],
            "Running",
        ));
        w.wait = WaitEnd::Deadline;
        assert_eq!(
            record(&w, &of(), now(), None).reason.as_deref(),
            Some("no result before the drill's deadline")
        );
        assert_eq!(
            record(&Watched { pod: None, ..w }, &of(), now(), None)
                .reason
                .as_deref(),
            Some("no result before the drill's deadline")
        );
    }

    proptest::proptest! {
        /// Whatever the checker's termination message holds: no panic, a bounded reason,
        /// and a pass only when the message is a report that says passed.
        #[test]
        fn any_termination_message_is_read_safely(message in proptest::prelude::any::<String>(), passed in proptest::prelude::any::<bool>()) {
            let report = format!(r#"{{"verdict":{{"passed":{passed}}},"mysqldReadyMs":1}}"#);
            for m in [message.clone(), report, format!("{message}{message}")] {
                let p = pod(vec![done(RESTORE_CONTAINER, 0, "", "a", "b")], vec![done(CHECKER_CONTAINER, 0, &m, "a", "b")], "Succeeded");
                let r = record(&watched(p), &of(), now(), None);
                let said_passed = serde_json::from_str::<Value>(&m)
                    .ok()
                    .and_then(|v| v.pointer("/verdict/passed").and_then(Value::as_bool))
                    == Some(true);
                proptest::prop_assert_eq!(r.result == vtsnap_core::snapshot::DrillResult::Passed, said_passed && m.len() <= MAX_RESULT_BYTES);
                proptest::prop_assert!(r.reason.as_deref().is_none_or(|x| x.len() <= vtsnap_core::snapshot::MAX_REASON_BYTES));
                proptest::prop_assert!(DrillRecord::parse(&r.render()).is_ok());
            }
        }
    }

    #[test]
    fn a_failed_step_ends_the_wait_before_the_phase_says_so() {
        let restore_failed = pod(
            vec![done(RESTORE_CONTAINER, 3, "", "a", "b")],
            vec![],
            "Pending",
        );
        assert!(finished(&restore_failed));
        let restored = pod(
            vec![done(RESTORE_CONTAINER, 0, "", "a", "b")],
            vec![running(MYSQLD_CONTAINER)],
            "Pending",
        );
        assert!(!finished(&restored));
        let mysqld_stopped = pod(
            vec![done(RESTORE_CONTAINER, 0, "", "a", "b")],
            vec![
                done(MYSQLD_CONTAINER, 0, "", "a", "b"),
                running(CHECKER_CONTAINER),
            ],
            "Running",
        );
        assert!(
            !finished(&mysqld_stopped),
            "a clean stop: the checker's report is still to come"
        );
        let no_checker = pod(
            vec![done(RESTORE_CONTAINER, 0, "", "a", "b")],
            vec![done(MYSQLD_CONTAINER, 0, "", "a", "b")],
            "Succeeded",
        );
        assert_eq!(
            record(&watched(no_checker), &of(), now(), None)
                .reason
                .as_deref(),
            Some("the drill Pod ended without a result from the checker")
        );
        // A status without an exit code is not a clean exit.
        let no_code = PodStatus {
            restore: Some(Ended {
                exit_code: None,
                reason: "Error".into(),
                message: String::new(),
                started: None,
                finished: None,
            }),
            ..pod(vec![], vec![], "Running")
        };
        assert!(finished(&no_code));
        let r = record(&watched(no_code), &of(), now(), None);
        assert!(
            r.reason
                .unwrap()
                .starts_with("vtsnap-restore exited -1 (Error)")
        );
    }

    #[test]
    fn a_report_of_exactly_the_message_limit_is_read() {
        let body = r#"{"verdict":{"passed":true},"mysqldReadyMs":1}"#;
        let exact = format!("{body}{}", " ".repeat(MAX_RESULT_BYTES - body.len()));
        assert_eq!(exact.len(), MAX_RESULT_BYTES);
        let p = |m: &str| {
            pod(
                vec![done(RESTORE_CONTAINER, 0, "", "a", "b")],
                vec![done(CHECKER_CONTAINER, 0, m, "a", "b")],
                "Succeeded",
            )
        };
        assert_eq!(
            record(&watched(p(&exact)), &of(), now(), None).result,
            vtsnap_core::snapshot::DrillResult::Passed
        );
        let over = format!("{exact} ");
        assert!(
            record(&watched(p(&over)), &of(), now(), None)
                .reason
                .unwrap()
                .contains("more than 4096")
        );
    }

    #[test]
    fn a_pass_the_shard_cannot_catch_up_from_is_a_failure() {
        let rto = Rto {
            pvc_bound_ms: 1,
            restore_ms: 2,
            mysqld_ready_ms: 3,
        };
        let passed = DrillRecord::passed(&of(), now(), rto, Some("j".into()));
        let gone = Coverage::NotCovered {
            missing: "0-1-40".into(),
        };
        let r = with_catch_up(passed.clone(), &gone);
        assert_eq!(r.result, DrillResult::Failed);
        assert!(
            r.reason
                .as_deref()
                .unwrap()
                .ends_with("the primary purged 0-1-40")
        );
        assert_eq!(
            (r.rto, r.job.as_deref(), r.at),
            (Some(rto), Some("j"), now())
        );
        assert_eq!(with_catch_up(passed.clone(), &Coverage::Covered), passed);
        assert_eq!(
            with_catch_up(passed.clone(), &Coverage::Unknown { why: "x".into() }),
            passed
        );
        let failed = DrillRecord::failed(&of(), now(), "table t: corrupt", None, None);
        assert_eq!(
            with_catch_up(failed.clone(), &gone),
            failed,
            "the first failure is kept"
        );
    }

    #[test]
    fn a_restore_that_went_backwards_in_time_measures_nothing() {
        assert_eq!(
            ms_between(Some(now()), Some("2026-12-03T11:00:00Z".parse().unwrap())),
            0
        );
        assert_eq!(ms_between(None, Some(now())), 0);
    }
}
