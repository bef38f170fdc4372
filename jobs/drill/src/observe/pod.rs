//! The drill Pod's status as the Job watches it (docs/design.md §5.9): how each of its
//! containers ended, and why it is not scheduled. Everything here is the kubelet's or the
//! checker's word, kept as said; [`crate::decide::outcome`] judges it.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::jiff::Timestamp;

use vtsnap_core::restore_pod::CONTAINER as RESTORE_CONTAINER;

use crate::decide::objects::{CHECKER_CONTAINER, MYSQLD_CONTAINER};

/// How a container ended, as its status says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    /// `None`: the status gives none.
    pub exit_code: Option<i32>,
    pub reason: String,
    /// The termination message (the checker's report).
    pub message: String,
    pub started: Option<Timestamp>,
    pub finished: Option<Timestamp>,
}

/// The Pod's `status.phase`, as far as waiting for it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// `Succeeded` or `Failed`: nothing more will happen in it.
    Ended,
    /// Any other phase, or none.
    NotEnded,
}

/// The drill Pod's status: its phase and which of its three containers ended, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodStatus {
    pub phase: Phase,
    /// `vtsnap-restore` (the init container).
    pub restore: Option<Ended>,
    pub mysqld: Option<Ended>,
    pub checker: Option<Ended>,
}

/// How the first container named `name` among `statuses` ended, if it did.
fn ended(statuses: Option<&Vec<ContainerStatus>>, name: &str) -> Option<Ended> {
    let t = statuses?
        .iter()
        .find(|c| c.name == name)?
        .state
        .as_ref()?
        .terminated
        .as_ref()?;
    Some(Ended {
        exit_code: Some(t.exit_code),
        reason: t.reason.clone().unwrap_or_default(),
        message: t.message.clone().unwrap_or_default(),
        started: t.started_at.as_ref().map(|s| s.0),
        finished: t.finished_at.as_ref().map(|s| s.0),
    })
}

impl PodStatus {
    pub fn read(pod: &Pod) -> Self {
        let status = pod.status.as_ref();
        let init = status.and_then(|s| s.init_container_statuses.as_ref());
        let containers = status.and_then(|s| s.container_statuses.as_ref());
        Self {
            phase: match status.and_then(|s| s.phase.as_deref()) {
                Some("Succeeded" | "Failed") => Phase::Ended,
                _ => Phase::NotEnded,
            },
            restore: ended(init, RESTORE_CONTAINER),
            mysqld: ended(containers, MYSQLD_CONTAINER),
            checker: ended(containers, CHECKER_CONTAINER),
        }
    }
}

/// Why the Pod is not scheduled, if the scheduler said so (its `PodScheduled` condition).
pub fn unschedulable(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")
        .and_then(|c| c.message.clone())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_container_s_end_is_read_from_its_own_list() {
        let pod: Pod = serde_json::from_value(json!({"status": {"phase": "Failed",
            "conditions": [{"type": "PodScheduled", "status": "False", "message": "0/3 nodes"}],
            "initContainerStatuses": [{"name": RESTORE_CONTAINER, "image": "r", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": 3, "reason": "Error", "message": "no tablet directory",
                "startedAt": "2026-12-03T11:58:00Z", "finishedAt": "2026-12-03T11:58:02Z"}}}],
            "containerStatuses": [
                {"name": CHECKER_CONTAINER, "image": "c", "imageID": "", "ready": false, "restartCount": 0,
                 "state": {"running": {"startedAt": "2026-12-03T11:59:00Z"}}},
                {"name": RESTORE_CONTAINER, "image": "m", "imageID": "", "ready": false, "restartCount": 0,
                 "state": {"terminated": {"exitCode": 0}}}]}}))
        .unwrap();
        let s = PodStatus::read(&pod);
        assert_eq!(s.phase, Phase::Ended);
        let restore = s.restore.unwrap();
        assert_eq!(
            (
                restore.exit_code,
                restore.reason.as_str(),
                restore.message.as_str()
            ),
            (Some(3), "Error", "no tablet directory")
        );
        assert_eq!(
            restore
                .started
                .zip(restore.finished)
                .map(|(a, b)| b.as_second() - a.as_second()),
            Some(2)
        );
        assert_eq!(
            (s.mysqld, s.checker),
            (None, None),
            "running, or in the other list"
        );
        assert_eq!(unschedulable(&pod).as_deref(), Some("0/3 nodes"));
        assert_eq!(PodStatus::read(&Pod::default()).phase, Phase::NotEnded);
    }
}
