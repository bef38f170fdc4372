//! Report: what a review leaves besides its answer — the decision counted in the metrics,
//! one log line, and its Event (never for a dry run). Events go through a bounded queue to
//! a task of their own: a review never waits for the API server.

use k8s_openapi::api::core::v1::ObjectReference;
use tokio::sync::mpsc;
use vtsnap_core::events::{EventType, Events, Subject};

use crate::admission::{AnswerError, Request, ReviewError};
use crate::decide::{Decision, EventNote};
use crate::observe::Kind;
use crate::server::budget::Exhausted;
use crate::server::metrics::Metrics;

const EVENT_QUEUE: usize = 256;
const COMPONENT: &str = "vtsnap-admission";

/// The `action` of the webhook's Events: it admitted the object (with or without a change).
const EVENT_ACTION: &str = "Admit";

/// An Event to record.
#[derive(Debug)]
struct EventJob {
    about: ObjectReference,
    note: EventNote,
}

/// The queue of Events to record.
#[derive(Debug, Clone)]
pub struct EventQueue(mpsc::Sender<EventJob>);

impl EventQueue {
    /// The queue and the task that records what is put on it.
    pub fn start(client: kube::Client) -> (Self, tokio::task::JoinHandle<()>) {
        let (tx, mut rx) = mpsc::channel::<EventJob>(EVENT_QUEUE);
        let events = Events::new(client, COMPONENT);
        let task = tokio::spawn(async move {
            while let Some(job) = rx.recv().await {
                let type_ = if job.note.warning {
                    EventType::Warning
                } else {
                    EventType::Normal
                };
                events
                    .publish(
                        &job.about,
                        type_,
                        EVENT_ACTION,
                        job.note.reason,
                        &job.note.message,
                    )
                    .await;
            }
        });
        (Self(tx), task)
    }
}

/// A review answered: counted by its first code, logged, and its Event queued.
pub fn reviewed(metrics: &Metrics, events: &EventQueue, req: &Request, d: &Decision) {
    metrics.count(d);
    let namespace = req.namespace.as_deref().unwrap_or("");
    let name = req
        .object
        .as_ref()
        .and_then(|o| o.metadata.name.as_deref())
        .unwrap_or("");
    tracing::info!(
        uid = %req.uid, namespace, name,
        decision = %d.codes(), patch_ops = d.patch.len(), "reviewed"
    );
    let Some(note) = d.event.clone().filter(|_| !req.dry_run) else {
        return;
    };
    // Only a Pod's or a PVC's decision has an Event.
    let Some(kind) = Kind::of(&req.kind) else {
        return;
    };
    let about = match kind {
        Kind::Pod => Subject::pod(namespace, name, ""),
        Kind::PersistentVolumeClaim => Subject::persistent_volume_claim(namespace, name),
    };
    let job = EventJob { about, note };
    if events.0.try_send(job).is_err() {
        metrics.event_dropped();
    }
}

/// A review that was not read (answered 4xx or 503).
pub fn refused(metrics: &Metrics, why: &Refused<'_>) {
    metrics.bad_review();
    match why {
        Refused::Unreadable(e) => tracing::warn!(error = %e, "unreadable AdmissionReview"),
        Refused::BudgetExhausted(e) => {
            tracing::warn!(error = %e, "review refused: the body budget is exhausted");
        }
        Refused::Body => {}
    }
}

/// Why a review was not read.
#[derive(Debug)]
pub enum Refused<'a> {
    /// Its body was read, and is no review.
    Unreadable(&'a ReviewError),
    /// Its body was not kept: no room in the shared budget.
    BudgetExhausted(&'a Exhausted),
    /// Its body could not be read, or was too large.
    Body,
}

/// An answer that could not be encoded (it is not sent).
pub fn unanswered(e: &AnswerError) {
    tracing::error!(error = %e, "the answer could not be encoded");
}
