//! Tolerant reads of the API objects the deciders look at (a missing or mistyped field
//! reads as empty or false, never as a panic), and the policy a tablet PVC falls under.

use serde_json::Value;
use vtsnap_core::config::{Config, ResolvedPolicy, resolve_in};
use vtsnap_core::labels;
use vtsnap_core::naming::KeyRange;

/// The string at a JSON pointer, or "".
pub fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

/// A label's value, or "".
pub fn label<'a>(v: &'a Value, key: &str) -> &'a str {
    v.pointer("/metadata/labels")
        .and_then(|l| l.get(key))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Whether a Pod's `Ready` condition is `True`.
pub fn pod_ready(v: &Value) -> bool {
    v.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// The resolved policy of a tablet PVC's shard (by its operator labels), if its cluster
/// is configured.
pub fn policy_of(config: &Config, pvc: &Value) -> Option<ResolvedPolicy> {
    let cl = config.cluster_in(s(pvc, "/metadata/namespace"), label(pvc, labels::CLUSTER))?;
    let safe = label(pvc, labels::SHARD);
    let shard = KeyRange::from_safe_name(safe).map_or_else(|_| safe.to_owned(), |k| k.to_string());
    Some(resolve_in(cl, label(pvc, labels::KEYSPACE), &shard))
}
