//! Decide: from one fence lease (or its absence), the local record of what this helper
//! holds for it, and whether it expired — the steps to take. Pure; level-triggered: the
//! same inputs always give the same steps, so running them again is harmless.

use k8s_openapi::jiff::Timestamp;
use vtsnap_core::fence::{Fence, NodeState, Request};

use super::metrics::Cause;
use super::registry::Entry;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Check the pod (exists, same UID, on this node) and that the tablet is not the primary;
    /// record it. Refuses, or waits on an uncertain read.
    CheckTarget,
    Probe,
    StopMysqld,
    FreezeCgroup,
    FreezeFs,
    ThawCgroup,
    /// Thaw everything, `Start` mysqld if this helper stopped it, then do to the tablet and
    /// the lease what `tablet` and `lease` say. Every part is attempted even if an earlier
    /// one failed.
    Release {
        cause: Cause,
        tablet: TabletAfter,
        lease: LeaseAfter,
    },
    Report(NodeState, Option<String>),
}

/// What a release does to the tablet the fence changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TabletAfter {
    /// Core's put-back: StartReplication, ChangeTabletType back to the original type.
    PutBack,
    /// Left as it is: the job that asked for the release puts it back itself.
    Untouched,
}

/// What a release does to the lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseAfter {
    /// Deleted, unless it changed since it was read.
    Delete,
    /// Answered `released`.
    ReportReleased,
    /// Not written (it is gone).
    Untouched,
}

/// A fence lease as the helper finds it.
#[derive(Debug, Clone, Copy)]
pub enum LeaseSeen<'a> {
    /// Deleted (or never there).
    Gone,
    /// Renewed in time.
    Live(&'a Fence),
    /// Its holder stopped renewing it (`renewTime + leaseDurationSeconds` is past).
    Expired(&'a Fence),
}

impl<'a> LeaseSeen<'a> {
    /// `fence` as it stands at `now`.
    pub fn at(fence: &'a Fence, now: Timestamp) -> Self {
        if fence.expired(now) {
            Self::Expired(fence)
        } else {
            Self::Live(fence)
        }
    }
}

/// The steps for one lease.
pub fn decide(lease: LeaseSeen<'_>, entry: Option<&Entry>) -> Vec<Step> {
    let f = match lease {
        LeaseSeen::Gone => None,
        LeaseSeen::Live(f) | LeaseSeen::Expired(f) => Some(f),
    };
    let Some(f) = f else {
        // Deleted: the job is gone or finished. Undo what we hold, and restore the tablet.
        return entry
            .map(|_| {
                vec![Step::Release {
                    cause: Cause::Deleted,
                    tablet: TabletAfter::PutBack,
                    lease: LeaseAfter::Untouched,
                }]
            })
            .unwrap_or_default();
    };
    if matches!(lease, LeaseSeen::Expired(_)) {
        // The dead-man's switch: recover the whole fence (docs/design.md §5.4), then remove it.
        return vec![Step::Release {
            cause: Cause::Expiry,
            tablet: TabletAfter::PutBack,
            lease: LeaseAfter::Delete,
        }];
    }
    let reported = |s: NodeState| f.node_state == Some(s);
    let report = |s: NodeState, steps: &mut Vec<Step>| {
        if !reported(s) {
            steps.push(Step::Report(s, None));
        }
    };
    let mut steps = Vec::new();
    match f.request {
        Request::Release => match entry {
            Some(_) => steps.push(Step::Release {
                cause: Cause::Request,
                tablet: TabletAfter::Untouched,
                lease: LeaseAfter::ReportReleased,
            }),
            None => report(NodeState::Released, &mut steps),
        },
        Request::Probe => {
            if !(reported(NodeState::Probed) || reported(NodeState::Refused)) {
                steps.push(Step::Probe);
            }
        }
        Request::Stop | Request::Hold | Request::Fsfreeze => {
            if let Some(e) = entry.filter(|e| e.watchdog_released) {
                let _ = e;
                if !reported(NodeState::Failed) {
                    steps.push(Step::Report(
                        NodeState::Failed,
                        Some("max-hold reached: the watchdog released the hold".into()),
                    ));
                }
                return steps;
            }
            if reported(NodeState::Refused) {
                return steps;
            }
            if entry.is_none() {
                steps.push(Step::CheckTarget);
            }
            // Stopped only once mysqlctld confirmed it; a frozen cgroup was frozen after that
            // (and a call into a frozen container would hang).
            let stopped = entry.is_some_and(|e| e.mysqld_down || e.cgroup.is_some());
            let cgroup = entry.is_some_and(|e| e.cgroup.is_some());
            let fs = entry.is_some_and(|e| e.fs_frozen.is_some());
            match f.request {
                Request::Stop => {
                    if cgroup {
                        steps.push(Step::ThawCgroup);
                    }
                    if !stopped {
                        steps.push(Step::StopMysqld);
                    }
                    report(NodeState::Stopped, &mut steps);
                }
                Request::Hold => {
                    if !stopped {
                        steps.push(Step::StopMysqld);
                    }
                    if !cgroup {
                        steps.push(Step::FreezeCgroup);
                    }
                    report(NodeState::Held, &mut steps);
                }
                _ => {
                    if !fs {
                        steps.push(Step::FreezeFs);
                    }
                    report(NodeState::Fsfrozen, &mut steps);
                }
            }
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use vtsnap_core::vtctld::TabletType;

    use super::*;
    use crate::cgroup::{Cgroup, Version};

    fn fence(request: Request, state: Option<NodeState>) -> Fence {
        Fence {
            namespace: "ns".into(),
            name: "f".into(),
            resource_version: Some("1".into()),
            target_pod: "p".into(),
            target_pod_uid: "u".into(),
            tablet_alias: "zone1-0000000101".parse().unwrap(),
            original_type: TabletType::Replica,
            vtctld: "v:1".into(),
            request,
            max_hold: Duration::from_secs(60),
            renew_time: None,
            lease_duration: Duration::from_secs(10),
            node_state: state,
        }
    }

    fn entry(stopped: bool, frozen: bool) -> Entry {
        Entry {
            lease: "ns/f".into(),
            pod_uid: "u".into(),
            tablet_alias: "zone1-0000000101".parse().unwrap(),
            original_type: TabletType::Replica,
            vtctld: "v:1".into(),
            container_id: Some("c".into()),
            volume_mount: None,
            mysqlctl_socket: "/s".into(),
            mysqld_socket: "/m".into(),
            stopped_mysqld: stopped,
            mysqld_down: stopped,
            cgroup: frozen.then(|| Cgroup {
                version: Version::V1,
                dir: "/cg".into(),
            }),
            fs_frozen: None,
            hold_since_ms: frozen.then_some(1),
            max_hold_secs: 60,
            watchdog_released: false,
        }
    }

    #[test]
    fn a_new_hold_checks_then_stops_then_freezes() {
        assert_eq!(
            decide(LeaseSeen::Live(&fence(Request::Hold, None)), None),
            vec![
                Step::CheckTarget,
                Step::StopMysqld,
                Step::FreezeCgroup,
                Step::Report(NodeState::Held, None)
            ]
        );
    }

    #[test]
    fn a_hold_in_place_needs_nothing() {
        assert!(
            decide(
                LeaseSeen::Live(&fence(Request::Hold, Some(NodeState::Held))),
                Some(&entry(true, true))
            )
            .is_empty()
        );
    }

    #[test]
    fn a_restarted_helper_finishes_what_is_missing() {
        // Stopped and recorded, but the freeze had not happened yet.
        assert_eq!(
            decide(
                LeaseSeen::Live(&fence(Request::Hold, Some(NodeState::Stopped))),
                Some(&entry(true, false))
            ),
            vec![Step::FreezeCgroup, Step::Report(NodeState::Held, None)]
        );
    }

    #[test]
    fn a_shutdown_that_did_not_return_is_asked_again_not_reported_stopped() {
        // Recorded before the call (so the release starts mysqld), but the call failed.
        let mut e = entry(true, false);
        e.mysqld_down = false;
        assert_eq!(
            decide(LeaseSeen::Live(&fence(Request::Stop, None)), Some(&e)),
            vec![Step::StopMysqld, Step::Report(NodeState::Stopped, None)]
        );
        assert_eq!(
            decide(LeaseSeen::Live(&fence(Request::Hold, None)), Some(&e)),
            vec![
                Step::StopMysqld,
                Step::FreezeCgroup,
                Step::Report(NodeState::Held, None)
            ]
        );
    }

    #[test]
    fn expiry_and_deletion_release_and_restore() {
        let expired = decide(
            LeaseSeen::Expired(&fence(Request::Hold, Some(NodeState::Held))),
            Some(&entry(true, true)),
        );
        assert_eq!(
            expired,
            vec![Step::Release {
                cause: Cause::Expiry,
                tablet: TabletAfter::PutBack,
                lease: LeaseAfter::Delete,
            }]
        );
        // Even with nothing held here: the job may have drained the tablet and died.
        assert_eq!(
            decide(LeaseSeen::Expired(&fence(Request::Stop, None)), None).len(),
            1
        );
        let gone = decide(LeaseSeen::Gone, Some(&entry(true, true)));
        assert_eq!(
            gone,
            vec![Step::Release {
                cause: Cause::Deleted,
                tablet: TabletAfter::PutBack,
                lease: LeaseAfter::Untouched,
            }]
        );
        assert!(decide(LeaseSeen::Gone, None).is_empty());
    }

    #[test]
    fn a_release_request_is_node_local() {
        assert_eq!(
            decide(
                LeaseSeen::Live(&fence(Request::Release, Some(NodeState::Held))),
                Some(&entry(true, true))
            ),
            vec![Step::Release {
                cause: Cause::Request,
                tablet: TabletAfter::Untouched,
                lease: LeaseAfter::ReportReleased,
            }]
        );
        assert!(
            decide(
                LeaseSeen::Live(&fence(Request::Release, Some(NodeState::Released))),
                None
            )
            .is_empty()
        );
    }

    #[test]
    fn the_watchdog_release_is_never_undone() {
        let mut e = entry(true, false);
        e.watchdog_released = true;
        let steps = decide(
            LeaseSeen::Live(&fence(Request::Hold, Some(NodeState::Held))),
            Some(&e),
        );
        assert!(
            matches!(steps.as_slice(), [Step::Report(NodeState::Failed, Some(_))]),
            "{steps:?}"
        );
    }

    #[test]
    fn a_refusal_is_final_for_the_lease() {
        assert!(
            decide(
                LeaseSeen::Live(&fence(Request::Hold, Some(NodeState::Refused))),
                None
            )
            .is_empty()
        );
    }

    #[test]
    fn a_probe_is_answered_once_whatever_the_answer() {
        assert_eq!(
            decide(LeaseSeen::Live(&fence(Request::Probe, None)), None),
            vec![Step::Probe]
        );
        // A stale answer to an earlier request is no answer to the probe.
        assert_eq!(
            decide(
                LeaseSeen::Live(&fence(Request::Probe, Some(NodeState::Released))),
                None
            ),
            vec![Step::Probe]
        );
        for done in [NodeState::Probed, NodeState::Refused] {
            assert!(
                decide(LeaseSeen::Live(&fence(Request::Probe, Some(done))), None).is_empty(),
                "{done:?}"
            );
        }
    }

    #[test]
    fn an_fsfreeze_freezes_once_and_reports_once() {
        assert_eq!(
            decide(LeaseSeen::Live(&fence(Request::Fsfreeze, None)), None),
            vec![
                Step::CheckTarget,
                Step::FreezeFs,
                Step::Report(NodeState::Fsfrozen, None)
            ]
        );
        let mut frozen = entry(false, false);
        frozen.fs_frozen = Some("/vol".into());
        // Frozen but not yet reported (a restarted helper): report only, never freeze twice.
        assert_eq!(
            decide(
                LeaseSeen::Live(&fence(Request::Fsfreeze, None)),
                Some(&frozen)
            ),
            vec![Step::Report(NodeState::Fsfrozen, None)]
        );
        assert!(
            decide(
                LeaseSeen::Live(&fence(Request::Fsfreeze, Some(NodeState::Fsfrozen))),
                Some(&frozen)
            )
            .is_empty()
        );
    }
}
