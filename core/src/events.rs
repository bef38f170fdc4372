//! Kubernetes Events (on a tablet Pod, a VolumeSnapshot, a VitessCluster, a Lease, a
//! Node), so `kubectl describe` tells the story. Written as events.k8s.io/v1 Events by
//! kube's [`Recorder`]; `kubectl describe` reads them as core/v1 Events and shows Type,
//! Reason, Message (the note) and From (the program, `reportingController`) as before;
//! `kubectl get events -o wide` adds the Pod's hostname (`reportingInstance`). Best
//! effort: an event that cannot be written is logged, never fatal.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::runtime::events::{Event, Recorder, Reporter};

pub use kube::runtime::events::EventType;

use crate::k8s_names::cut_to_bytes;

/// The longest note the API server takes from an events.k8s.io Event, in bytes
/// (kubernetes `pkg/apis/core/validation/events.go`, `NoteLengthLimit`).
pub const NOTE_LIMIT: usize = 1024;

/// How long a note's Recorder is kept unused: as long as kube's Recorder remembers an
/// Event to count its repeats (kube-runtime `events.rs`, `CACHE_TTL`).
const NOTE_KEPT: SignedDuration = SignedDuration::from_mins(6);

/// The object an Event is about, as the `regarding` reference of the Event.
#[derive(Debug, Clone, Copy)]
pub struct Subject;

impl Subject {
    /// A tablet's (or any) Pod; an empty `uid` is left out.
    pub fn pod(namespace: &str, name: &str, uid: &str) -> ObjectReference {
        ObjectReference {
            uid: Some(uid.to_owned()).filter(|u| !u.is_empty()),
            ..reference("v1", "Pod", Some(namespace), name)
        }
    }

    pub fn persistent_volume_claim(namespace: &str, name: &str) -> ObjectReference {
        reference("v1", "PersistentVolumeClaim", Some(namespace), name)
    }

    pub fn vitess_cluster(namespace: &str, name: &str, uid: Option<&str>) -> ObjectReference {
        ObjectReference {
            uid: uid.map(str::to_owned),
            ..reference("planetscale.com/v2", "VitessCluster", Some(namespace), name)
        }
    }

    pub fn snapshot(namespace: &str, name: &str) -> ObjectReference {
        reference(
            "snapshot.storage.k8s.io/v1",
            "VolumeSnapshot",
            Some(namespace),
            name,
        )
    }

    pub fn lease(namespace: &str, name: &str) -> ObjectReference {
        reference("coordination.k8s.io/v1", "Lease", Some(namespace), name)
    }

    /// A Node: cluster-scoped, so its Events are written in the `default` namespace.
    pub fn node(name: &str) -> ObjectReference {
        reference("v1", "Node", None, name)
    }
}

fn reference(
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
) -> ObjectReference {
    ObjectReference {
        api_version: Some(api_version.to_owned()),
        kind: Some(kind.to_owned()),
        namespace: namespace.map(str::to_owned),
        name: Some(name.to_owned()),
        ..ObjectReference::default()
    }
}

/// One program's Events. Cheap to clone; clones share what was recorded.
#[derive(Clone)]
pub struct Events {
    client: kube::Client,
    reporter: Reporter,
    /// kube's Recorder (as client-go's) counts an Event repeated on an object with the same
    /// type, action and reason as a series of the first, keeping the first note: two
    /// snapshots deleted of one VitessCluster would show as one. One Recorder per note
    /// keeps a new note a new Event, and the same note again a series.
    by_note: Arc<Mutex<HashMap<String, (Recorder, Timestamp)>>>,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events")
            .field("reporter", &self.reporter)
            .finish_non_exhaustive()
    }
}

impl Events {
    /// Events reported by `component` (e.g. `vtsnap-snapshot`), from this host: in a Pod,
    /// the Pod's name.
    pub fn new(client: kube::Client, component: &str) -> Self {
        Self {
            client,
            reporter: Reporter::from(component),
            by_note: Arc::default(),
        }
    }

    /// Records that `action` (what the program did, PascalCase) on `about` came to
    /// `reason`, with `message` as the note (cut to [`NOTE_LIMIT`] bytes, which is all
    /// the API server takes). Best effort: a failure is logged.
    pub async fn publish(
        &self,
        about: &ObjectReference,
        type_: EventType,
        action: &str,
        reason: &str,
        message: &str,
    ) {
        let note = cut_to_bytes(message, NOTE_LIMIT);
        let event = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(note.to_owned()),
            action: action.to_owned(),
            secondary: None,
        };
        if let Err(e) = self.recorder_for(note).publish(&event, about).await {
            tracing::warn!(error = %e, reason, action, "cannot record an event");
        }
    }

    /// The Recorder of `note`; those unused for longer than kube's cache are dropped.
    fn recorder_for(&self, note: &str) -> Recorder {
        let now = Timestamp::now();
        let mut by_note = self.by_note.lock().unwrap_or_else(PoisonError::into_inner);
        by_note.retain(|_, (_, used)| *used + NOTE_KEPT > now);
        let (recorder, used) = by_note.entry(note.to_owned()).or_insert_with(|| {
            (
                Recorder::new(self.client.clone(), self.reporter.clone()),
                now,
            )
        });
        *used = now;
        recorder.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_name_their_namespace_except_a_nodes() {
        let pod = Subject::pod("vitess", "tablet-a", "");
        assert_eq!(pod.namespace.as_deref(), Some("vitess"));
        assert_eq!(pod.uid, None);
        assert_eq!(
            Subject::pod("vitess", "tablet-a", "u-1").uid.as_deref(),
            Some("u-1")
        );
        let cluster = Subject::vitess_cluster("vitess", "example", Some("u-2"));
        assert_eq!(
            (cluster.api_version.as_deref(), cluster.kind.as_deref()),
            (Some("planetscale.com/v2"), Some("VitessCluster"))
        );
        assert_eq!(
            Subject::snapshot("vitess", "s-1").api_version.as_deref(),
            Some("snapshot.storage.k8s.io/v1")
        );
        assert_eq!(Subject::node("node-a").namespace, None);
    }
}
