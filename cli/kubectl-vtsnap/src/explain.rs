//! `kubectl vtsnap explain`: why a snapshot is kept, deleted or unusable (the GC's own
//! decider on live data), and why a PVC was or was not restored (the webhook's recorded
//! decision and Events).

use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use serde::Serialize;
use serde_json::Value;
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
    .map_err(|e| format!("get VolumeSnapshot {shown}: {e}"))?
    .ok_or_else(|| format!("VolumeSnapshot {shown} not found"))?;
    let unusable = obj
        .metadata
        .annotations
        .and_then(|a| a.get(ANN_UNUSABLE).cloned());
    Ok(snapshot_in_plan(&p, namespace, name, unusable))
}

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
    /// Events about the PVC, oldest first: `reason: message`.
    pub events: Vec<String>,
}

pub async fn pvc(kube: &kube::Client, namespace: &str, name: &str) -> Result<PvcExplained, String> {
    let shown = format!("{}/{}", escape_controls(namespace), escape_controls(name));
    let p = Api::<PersistentVolumeClaim>::namespaced(kube.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|e| format!("get PVC {shown}: {e}"))?
        .ok_or_else(|| format!("PVC {shown} not found"))?;
    let ann = p.metadata.annotations.clone().unwrap_or_default();
    let mut events: Vec<Event> = Api::<Event>::namespaced(kube.clone(), namespace)
        .list(&ListParams::default().fields(&format!(
            "involvedObject.kind=PersistentVolumeClaim,involvedObject.name={name}"
        )))
        .await
        .map_err(|e| format!("list Events of PVC {shown}: {e}"))?
        .items;
    events.sort_by_key(|e| e.last_timestamp.clone().map(|t| t.0));
    Ok(PvcExplained {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        restored_from: ann.get(ANN_RESTORED_FROM).cloned(),
        reason: ann.get(ANN_RESTORE_REASON).cloned(),
        pinned_to_node: ann.get(ANN_RESTORE_NODE).cloned(),
        phase: p.status.and_then(|s| s.phase),
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
    })
}

/// The table form of an explanation: `field: value` lines.
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
                            i.as_str().map_or_else(|| i.to_string(), str::to_owned)
                        ));
                    }
                }
                Value::String(s) => out.push_str(&format!("{k}: {s}\n")),
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
}
