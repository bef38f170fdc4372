//! `kubectl vtsnap explain`: why a snapshot is kept, deleted or unusable (the GC's own
//! decider on live data), and why a PVC was or was not restored (the webhook's recorded
//! decision and Events).

use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use serde::Serialize;
use serde_json::Value;
use vtsnap_core::api_error::message;
use vtsnap_core::config::Config;
use vtsnap_core::k8s_names::escape_controls;
use vtsnap_core::restored::{ANN_RESTORE_NODE, ANN_RESTORE_REASON, ANN_RESTORED_FROM};
use vtsnap_core::snapshot::ANN_UNUSABLE;
use vtsnap_gc::decide::{Plan, plan};

/// The GC's word on one snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SnapshotExplained {
    pub namespace: String,
    pub name: String,
    /// `keep`, `delete`, `skipped`, or `not-vtsnaps` (not in the GC's view at all).
    pub decision: &'static str,
    /// The rule that decided it (the GC's reason), or why it was skipped.
    pub reason: String,
    /// Why restores pass over it, when it is marked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unusable: Option<String>,
    /// Marked unusable by this run's plan (not yet written).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to_be_marked: Option<String>,
}

/// What the plan says of `namespace/name`, pure.
pub fn snapshot_in_plan(
    plan: &Plan,
    namespace: &str,
    name: &str,
    unusable: Option<String>,
) -> SnapshotExplained {
    let is = |ns: &str, n: &str| ns == namespace && n == name;
    let (decision, reason) = if let Some(i) = plan.delete.iter().find(|i| is(&i.namespace, &i.name))
    {
        ("delete", i.reason.as_str().to_owned())
    } else if let Some(i) = plan.keep.iter().find(|i| is(&i.namespace, &i.name)) {
        ("keep", i.reason.as_str().to_owned())
    } else if let Some(s) = plan.skipped.iter().find(|s| is(&s.namespace, &s.name)) {
        ("skipped", format!("{}: {}", s.reason.as_str(), s.message))
    } else {
        (
            "not-vtsnaps",
            "not one of vtsnap's snapshots of a configured cluster".to_owned(),
        )
    };
    let to_be_marked = plan
        .restores
        .mark_unusable
        .iter()
        .find(|m| is(&m.namespace, &m.snapshot))
        .map(|m| m.message.clone());
    SnapshotExplained {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        decision,
        reason,
        unusable,
        to_be_marked,
    }
}

/// Runs the GC's observe and decide (read-only) and explains one snapshot.
pub async fn snapshot(
    kube: &kube::Client,
    config: &Config,
    namespace: &str,
    name: &str,
) -> Result<SnapshotExplained, String> {
    let now = Timestamp::now();
    let seen = vtsnap_gc::observe::observe(kube, config, None, now).await;
    if let Some(u) = seen
        .unreadable
        .iter()
        .find(|u| u.starts_with(&format!("{namespace}:")))
    {
        return Err(format!("namespace {u}: the GC would change nothing there"));
    }
    let p = plan(config, &seen.inventory, now, None);
    let shown = format!("{}/{}", escape_controls(namespace), escape_controls(name));
    let obj = Api::<kube::api::DynamicObject>::namespaced_with(
        kube.clone(),
        namespace,
        &crate::observe::snapshots_resource(),
    )
    .get_opt(name)
    .await
    .map_err(|e| format!("get VolumeSnapshot {shown}: {}", message(&e)))?
    .ok_or_else(|| format!("VolumeSnapshot {shown} not found"))?;
    let unusable = obj
        .metadata
        .annotations
        .and_then(|a| a.get(ANN_UNUSABLE).cloned());
    Ok(snapshot_in_plan(&p, namespace, name, unusable))
}

/// Events of a PVC shown at most: the newest (a PVC retried for days can have thousands).
pub const EVENTS_SHOWN: usize = 20;

/// Why a PVC was or was not restored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PvcExplained {
    pub namespace: String,
    pub name: String,
    /// The snapshot it was restored from, if any.
    pub restored_from: Option<String>,
    /// The webhook's recorded reason (why this snapshot, or why none).
    pub reason: Option<String>,
    pub pinned_to_node: Option<String>,
    pub phase: Option<String>,
    /// The newest [`EVENTS_SHOWN`] Events about the PVC, oldest first: `reason: message`.
    pub events: Vec<String>,
    /// Older Events left out.
    #[serde(skip_serializing_if = "is_zero")]
    pub older_events: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// When an Event last happened: `lastTimestamp`, else `eventTime`, else its creation.
fn when(e: &Event) -> Option<Timestamp> {
    e.last_timestamp
        .as_ref()
        .map(|t| t.0)
        .or_else(|| e.event_time.as_ref().map(|t| t.0))
        .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// Keeps the newest [`EVENTS_SHOWN`] of a stream of Events, counting those dropped, so a
/// huge list never stays in memory.
#[derive(Debug, Default)]
pub struct NewestEvents {
    kept: Vec<Event>,
    dropped: usize,
}

impl NewestEvents {
    pub fn push(&mut self, e: Event) {
        self.kept.push(e);
        if self.kept.len() >= 2 * EVENTS_SHOWN {
            self.trim();
        }
    }

    fn trim(&mut self) {
        // Newest first, the name breaking ties so the result does not depend on the order read.
        self.kept
            .sort_by(|a, b| (when(b), &b.metadata.name).cmp(&(when(a), &a.metadata.name)));
        let extra = self.kept.len().saturating_sub(EVENTS_SHOWN);
        self.kept.truncate(EVENTS_SHOWN);
        self.dropped += extra;
    }

    /// The kept Events, oldest first, and how many were dropped.
    pub fn finish(mut self) -> (Vec<Event>, usize) {
        self.trim();
        self.kept.reverse();
        (self.kept, self.dropped)
    }
}

/// A PVC and the Events read about it, explained (pure).
pub fn pvc_explained(p: &PersistentVolumeClaim, events: NewestEvents) -> PvcExplained {
    let ann = p.metadata.annotations.clone().unwrap_or_default();
    let (events, older_events) = events.finish();
    PvcExplained {
        namespace: p.metadata.namespace.clone().unwrap_or_default(),
        name: p.metadata.name.clone().unwrap_or_default(),
        restored_from: ann.get(ANN_RESTORED_FROM).cloned(),
        reason: ann.get(ANN_RESTORE_REASON).cloned(),
        pinned_to_node: ann.get(ANN_RESTORE_NODE).cloned(),
        phase: p.status.as_ref().and_then(|s| s.phase.clone()),
        events: events
            .into_iter()
            .map(|e| {
                format!(
                    "{}: {}",
                    e.reason.unwrap_or_default(),
                    e.message.unwrap_or_default()
                )
            })
            .collect(),
        older_events,
    }
}

/// Reads the PVC `namespace/name` (a name checked as the API's) and its Events, every page.
pub async fn pvc(kube: &kube::Client, namespace: &str, name: &str) -> Result<PvcExplained, String> {
    let shown = format!("{}/{}", escape_controls(namespace), escape_controls(name));
    vtsnap_core::k8s_names::dns_subdomain(name)
        .map_err(|e| format!("{shown} is not a PVC's name: {e}"))?;
    let p = Api::<PersistentVolumeClaim>::namespaced(kube.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|e| format!("get PVC {shown}: {}", message(&e)))?
        .ok_or_else(|| format!("PVC {shown} not found"))?;
    let mut events = NewestEvents::default();
    vtsnap_core::reconcile::list::for_each(
        &Api::<Event>::namespaced(kube.clone(), namespace),
        &ListParams::default().fields(&format!(
            "involvedObject.kind=PersistentVolumeClaim,involvedObject.name={name}"
        )),
        |e| events.push(e),
    )
    .await
    .map_err(|e| format!("list Events of PVC {shown}: {}", message(&e)))?;
    Ok(pvc_explained(&p, events))
}

/// The table form of an explanation: `field: value` lines, control characters escaped
/// (names, annotations and Events come from outside).
pub fn lines(v: &Value) -> String {
    let mut out = String::new();
    if let Some(m) = v.as_object() {
        for (k, val) in m {
            match val {
                Value::Null => {}
                Value::Array(items) => {
                    out.push_str(&format!("{k}:\n"));
                    for i in items {
                        out.push_str(&format!(
                            "  - {}\n",
                            i.as_str()
                                .map_or_else(|| i.to_string(), |s| escape_controls(s).into_owned())
                        ));
                    }
                }
                Value::String(s) => out.push_str(&format!("{k}: {}\n", escape_controls(s))),
                other => out.push_str(&format!("{k}: {other}\n")),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use vtsnap_gc::decide::{Item, Reason};

    use super::*;

    #[test]
    fn the_plan_s_word_on_a_snapshot_is_its_explanation() {
        let plan = Plan {
            delete: vec![Item {
                namespace: "vitess".into(),
                name: "old".into(),
                reason: Reason::BeyondMaxCount,
            }],
            keep: vec![Item {
                namespace: "vitess".into(),
                name: "new".into(),
                reason: Reason::NewestCovered,
            }],
            ..Plan::default()
        };
        let e = snapshot_in_plan(&plan, "vitess", "old", None);
        assert_eq!(
            (e.decision, e.reason.as_str()),
            ("delete", "beyond-max-count")
        );
        let e = snapshot_in_plan(&plan, "vitess", "new", Some("purged".into()));
        assert_eq!((e.decision, e.reason.as_str()), ("keep", "newest-covered"));
        assert_eq!(e.unusable.as_deref(), Some("purged"));
        // Another namespace's snapshot of the same name is not this one.
        assert_eq!(
            snapshot_in_plan(&plan, "other", "new", None).decision,
            "not-vtsnaps"
        );
        let v = serde_json::to_value(snapshot_in_plan(&plan, "vitess", "old", None))
            .unwrap_or_default();
        assert_eq!(
            lines(&v),
            "decision: delete\nname: old\nnamespace: vitess\nreason: beyond-max-count\n"
        );
    }

    #[test]
    fn only_the_newest_events_are_kept_however_many_are_read() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        let event = |i: i64| Event {
            metadata: kube::api::ObjectMeta {
                name: Some(format!("e{i:03}")),
                ..Default::default()
            },
            reason: Some(format!("R{i}")),
            last_timestamp: Some(Time(Timestamp::from_second(1_800_000_000 + i).unwrap())),
            ..Default::default()
        };
        let mut kept = NewestEvents::default();
        // Read in an order that is neither oldest nor newest first.
        for i in (0..45).map(|i| (i * 17) % 45) {
            kept.push(event(i));
        }
        let (events, dropped) = kept.finish();
        assert_eq!(dropped, 25);
        let names: Vec<String> = events
            .iter()
            .filter_map(|e| e.metadata.name.clone())
            .collect();
        let want: Vec<String> = (25..45).map(|i| format!("e{i:03}")).collect();
        assert_eq!(names, want, "the newest 20, oldest first");
        // Fewer than the bound: all of them, nothing said dropped.
        let mut few = NewestEvents::default();
        few.push(event(2));
        few.push(event(1));
        let (events, dropped) = few.finish();
        assert_eq!((events.len(), dropped), (2, 0));
        assert_eq!(events[0].metadata.name.as_deref(), Some("e001"));
    }
}
