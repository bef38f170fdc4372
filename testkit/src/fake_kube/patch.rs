//! PUT and PATCH: a resourceVersion check, merge or JSON patch, the status subresource
//! kept apart, and the fields only the server writes kept.

use serde_json::{Value, json};

use super::FakeKube;
use super::reply::{Reply, err, invalid, json_reply, not_found, stale};
use super::request::RequestInfo;
use super::store::{Key, State, merge_patch};
use super::validate;

impl FakeKube {
    /// PUT: the body replaces the object, unless it names a stale resourceVersion.
    pub(super) fn update(
        &self,
        st: &mut State,
        info: &RequestInfo,
        key: &Key,
        body: Value,
    ) -> Reply {
        let Some(current) = st.objects.get(key).cloned() else {
            return not_found(info, key);
        };
        let sent_rv = body
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !sent_rv.is_empty() && Some(sent_rv) != resource_version(&current) {
            return stale(sent_rv);
        }
        self.write_over(st, info, key, &current, body)
    }

    /// PATCH: a JSON patch, or a merge patch (strategic and apply are treated as merge).
    pub(super) fn patch(
        &self,
        st: &mut State,
        info: &RequestInfo,
        key: &Key,
        body: Value,
    ) -> Reply {
        let Some(current) = st.objects.get(key).cloned() else {
            return not_found(info, key);
        };
        match patched(info, &current, body) {
            Ok(new) => self.write_over(st, info, key, &current, new),
            Err(r) => r,
        }
    }

    /// Stores `new` in place of `current` as the server would; an object marked for
    /// deletion whose last finalizer went is removed.
    fn write_over(
        &self,
        st: &mut State,
        info: &RequestInfo,
        key: &Key,
        current: &Value,
        new: Value,
    ) -> Reply {
        let status_only = info.subresource.as_deref() == Some("status");
        let mut merged = keep_status_apart(current, new, status_only);
        keep_server_fields(current, &mut merged);
        if validate::applies(info) {
            let errs = validate::event_update(current, &merged);
            if !errs.is_empty() {
                return invalid(info, key, &errs);
            }
        }
        if !status_only && current.get("spec") != merged.get("spec") {
            let g = current
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(1)
                + 1;
            merge_patch(&mut merged, &json!({"metadata": {"generation": g}}));
        }
        Self::stamp(st, &mut merged, false);
        let finalizers_gone = merged
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        if merged.pointer("/metadata/deletionTimestamp").is_some() && finalizers_gone {
            st.objects.remove(key);
            self.emit(st, key, "DELETED", merged.clone());
        } else {
            st.objects.insert(key.clone(), merged.clone());
            self.emit(st, key, "MODIFIED", merged.clone());
        }
        json_reply(200, &merged)
    }
}

fn resource_version(v: &Value) -> Option<&str> {
    v.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
}

/// `current` with the patch in `body` applied, or the error answer.
fn patched(info: &RequestInfo, current: &Value, body: Value) -> Result<Value, Reply> {
    let mut new = current.clone();
    let ct = info.content_type.as_deref().unwrap_or("");
    if ct.starts_with("application/json-patch+json") {
        let patch: json_patch::Patch = serde_json::from_value(body)
            .map_err(|e| err(400, "BadRequest", format!("bad JSON patch: {e}")))?;
        json_patch::patch(&mut new, &patch)
            .map_err(|e| err(422, "Invalid", format!("JSON patch failed: {e}")))?;
    } else {
        if let Some(rv) = body
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            && Some(rv) != resource_version(current)
        {
            return Err(stale(rv));
        }
        merge_patch(&mut new, &body);
    }
    Ok(new)
}

/// The status subresource: a write to it changes only `status`, a write to the object
/// everything but `status`.
fn keep_status_apart(current: &Value, new: Value, status_only: bool) -> Value {
    let (mut merged, status) = if status_only {
        (current.clone(), new.get("status").cloned())
    } else {
        let status = current.get("status").cloned();
        (new, status)
    };
    if let Some(o) = merged.as_object_mut() {
        match status {
            Some(s) => {
                o.insert("status".into(), s);
            }
            None => {
                o.remove("status");
            }
        }
    }
    merged
}

/// Identity and bookkeeping are the server's: a write cannot change them.
fn keep_server_fields(current: &Value, merged: &mut Value) {
    for f in [
        "uid",
        "creationTimestamp",
        "name",
        "namespace",
        "deletionTimestamp",
    ] {
        let ptr = format!("/metadata/{f}");
        if let (Some(old), Some(m)) = (
            current.pointer(&ptr).cloned(),
            merged.get_mut("metadata").and_then(Value::as_object_mut),
        ) {
            m.insert(f.into(), old);
        }
    }
}
