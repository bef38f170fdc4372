//! What the real API server refuses of an events.k8s.io/v1 Event (kubernetes
//! `pkg/apis/core/validation/events.go`: `ValidateEventCreate`, `ValidateEventUpdate`), so
//! an Event the fake stores is one a cluster would have stored too. Other kinds are not
//! validated (see the module's list of differences).

use serde_json::Value;

use super::request::RequestInfo;

const GROUP: &str = "events.k8s.io";
const REPORTING_INSTANCE_LIMIT: usize = 128;
const ACTION_LIMIT: usize = 128;
const REASON_LIMIT: usize = 128;
const NOTE_LIMIT: usize = 1024;

/// Whether the request is about events.k8s.io Events, the only kind validated here.
pub(super) fn applies(info: &RequestInfo) -> bool {
    info.group == GROUP && info.plural == "events"
}

fn text<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

/// The field errors of a new Event, as `field: what is wrong`; empty if it is valid.
pub(super) fn event_create(ev: &Value) -> Vec<String> {
    let mut errs = Vec::new();
    let mut required = |ptr: &str, field: &str, limit: Option<usize>| {
        let s = text(ev, ptr);
        if s.is_empty() {
            errs.push(format!("{field}: Required value"));
        } else if let Some(l) = limit.filter(|l| s.len() > *l) {
            errs.push(format!("{field}: can have at most {l} characters"));
        }
    };
    required("/eventTime", "eventTime", None);
    required("/reportingController", "reportingController", None);
    required(
        "/reportingInstance",
        "reportingInstance",
        Some(REPORTING_INSTANCE_LIMIT),
    );
    required("/action", "action", Some(ACTION_LIMIT));
    required("/reason", "reason", Some(REASON_LIMIT));
    if text(ev, "/note").len() > NOTE_LIMIT {
        errs.push(format!("note: can have at most {NOTE_LIMIT} characters"));
    }
    if !matches!(text(ev, "/type"), "Normal" | "Warning") {
        errs.push(format!("type: has invalid value: {}", text(ev, "/type")));
    }
    // An Event about a cluster-scoped object lives in `default` or `kube-system`.
    if text(ev, "/regarding/namespace").is_empty()
        && !matches!(text(ev, "/metadata/namespace"), "default" | "kube-system")
    {
        errs.push("regarding.namespace: does not match event.namespace".into());
    }
    for f in [
        "deprecatedFirstTimestamp",
        "deprecatedLastTimestamp",
        "deprecatedCount",
        "deprecatedSource",
    ] {
        if ev.get(f).is_some_and(|v| !v.is_null()) {
            errs.push(format!("{f}: needs to be unset"));
        }
    }
    errs.extend(series(ev));
    errs
}

/// The field errors of a changed Event: only its series may change.
pub(super) fn event_update(old: &Value, new: &Value) -> Vec<String> {
    let mut errs: Vec<String> = [
        "regarding",
        "related",
        "reason",
        "note",
        "type",
        "eventTime",
        "action",
        "reportingController",
        "reportingInstance",
    ]
    .into_iter()
    .filter(|f| old.get(f) != new.get(f))
    .map(|f| format!("{f}: field is immutable"))
    .collect();
    if old.get("series") != new.get("series") {
        errs.extend(series(new));
    }
    errs
}

fn series(ev: &Value) -> Vec<String> {
    let Some(s) = ev.get("series").filter(|s| !s.is_null()) else {
        return Vec::new();
    };
    let mut errs = Vec::new();
    if s.get("count").and_then(Value::as_i64).unwrap_or(0) < 2 {
        errs.push("series.count: should be at least 2".into());
    }
    if text(s, "/lastObservedTime").is_empty() {
        errs.push("series.lastObservedTime: Required value".into());
    }
    errs
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn valid() -> Value {
        json!({
            "metadata": {"name": "s-1.17a", "namespace": "vitess"},
            "eventTime": "2026-12-01T10:00:00.000000Z",
            "reportingController": "vtsnap-gc",
            "reportingInstance": "vtsnap-gc-29xk1",
            "action": "DeleteSnapshot",
            "reason": "SnapshotDeleted",
            "note": "deleted VolumeSnapshot s-1 (beyond-max-count)",
            "type": "Normal",
            "regarding": {"kind": "VitessCluster", "name": "example", "namespace": "vitess"},
        })
    }

    #[test]
    fn a_complete_event_is_valid_and_each_missing_field_is_named() {
        assert_eq!(event_create(&valid()), Vec::<String>::new());
        for f in [
            "eventTime",
            "reportingController",
            "reportingInstance",
            "action",
            "reason",
        ] {
            let mut ev = valid();
            ev.as_object_mut().unwrap().remove(f);
            assert_eq!(event_create(&ev), [format!("{f}: Required value")]);
        }
    }

    #[test]
    fn a_long_note_an_odd_type_and_old_style_fields_are_refused() {
        let mut ev = valid();
        ev["note"] = json!("x".repeat(1025));
        ev["type"] = json!("Info");
        ev["deprecatedCount"] = json!(1);
        assert_eq!(
            event_create(&ev),
            [
                "note: can have at most 1024 characters",
                "type: has invalid value: Info",
                "deprecatedCount: needs to be unset"
            ]
        );
        ev["note"] = json!("x".repeat(1024));
        assert_eq!(event_create(&ev).len(), 2);
    }

    #[test]
    fn an_event_about_a_node_lives_in_default() {
        let mut ev = valid();
        ev["regarding"] = json!({"kind": "Node", "name": "node-a"});
        assert_eq!(
            event_create(&ev),
            ["regarding.namespace: does not match event.namespace"]
        );
        ev["metadata"]["namespace"] = json!("default");
        assert_eq!(event_create(&ev), Vec::<String>::new());
    }

    #[test]
    fn only_the_series_may_change_and_it_counts_from_two() {
        let old = valid();
        let mut new = old.clone();
        new["series"] = json!({"count": 2, "lastObservedTime": "2026-12-01T10:01:00.000000Z"});
        assert_eq!(event_update(&old, &new), Vec::<String>::new());
        new["series"]["count"] = json!(1);
        new["note"] = json!("another");
        assert_eq!(
            event_update(&old, &new),
            [
                "note: field is immutable",
                "series.count: should be at least 2"
            ]
        );
    }
}
