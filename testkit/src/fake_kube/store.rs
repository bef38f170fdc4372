//! The objects, their history of changes for watches, and the direct access tests use to
//! lay out and inspect the world (no request, no fault, not logged).

use std::collections::BTreeMap;

use kube::Resource;
use serde::Serialize;
use serde_json::{Value, json};

use super::FakeKube;
use super::fault::{Fault, Observer, Predicate};
use super::request::{Logged, RequestInfo};

/// RFC 7386 JSON merge patch.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    if let Value::Object(p) = patch {
        if !target.is_object() {
            *target = json!({});
        }
        if let Value::Object(t) = target {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
    } else {
        *target = patch.clone();
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct Key {
    pub(super) group: String,
    pub(super) plural: String,
    pub(super) namespace: String,
    pub(super) name: String,
}

impl Key {
    fn new(group: &str, plural: &str, namespace: &str, name: &str) -> Self {
        Self {
            group: group.into(),
            plural: plural.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The object a request names ("" for a missing namespace or name).
    pub(super) fn of(info: &RequestInfo) -> Self {
        Self {
            group: info.group.clone(),
            plural: info.plural.clone(),
            namespace: info.namespace.clone().unwrap_or_default(),
            name: info.name.clone().unwrap_or_default(),
        }
    }

    /// The key of object `v` of group/plural, from its own metadata.
    fn of_object(group: &str, plural: &str, v: &Value) -> Self {
        let meta = |f: &str| v.pointer(f).and_then(Value::as_str).unwrap_or("");
        Self::new(
            group,
            plural,
            meta("/metadata/namespace"),
            meta("/metadata/name"),
        )
    }
}

/// One change, as a watch reports it.
#[derive(Debug, Clone)]
pub(super) struct Event {
    pub(super) rv: u64,
    pub(super) group: String,
    pub(super) plural: String,
    pub(super) namespace: String,
    pub(super) kind: &'static str,
    pub(super) object: Value,
}

#[derive(Default)]
pub(super) struct State {
    pub(super) rv: u64,
    pub(super) uid: u64,
    pub(super) objects: BTreeMap<Key, Value>,
    pub(super) history: Vec<Event>,
    pub(super) faults: Vec<Fault>,
    /// Run on every matching request, before faults (see [`FakeKube::observe`]).
    pub(super) observers: Vec<(Predicate, Observer)>,
    pub(super) log: Vec<Logged>,
    pub(super) down: bool,
}

/// Now, as the API writes timestamps.
pub(super) fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

impl FakeKube {
    /// Stores a typed object directly (no request, no fault, not logged).
    pub fn put<K>(&self, obj: &K) -> Value
    where
        K: Resource<DynamicType = ()> + Serialize,
    {
        let v = serde_json::to_value(obj).unwrap_or(Value::Null);
        self.put_json(&K::group(&()), &K::plural(&()), v)
    }

    /// Stores a JSON object of group/plural directly.
    pub fn put_json(&self, group: &str, plural: &str, mut v: Value) -> Value {
        let key = Key::of_object(group, plural, &v);
        let mut st = self.state();
        let existed = st.objects.contains_key(&key);
        Self::stamp(&mut st, &mut v, !existed);
        st.objects.insert(key.clone(), v.clone());
        let kind = if existed { "MODIFIED" } else { "ADDED" };
        self.emit(&mut st, &key, kind, v.clone());
        v
    }

    /// Stores `v` only if the stored object still has `v`'s resourceVersion (atomic
    /// compare-and-swap, as a controller's update would be). Returns whether it stored.
    pub fn compare_and_put(&self, group: &str, plural: &str, mut v: Value) -> bool {
        let key = Key::of_object(group, plural, &v);
        let mut st = self.state();
        let Some(current) = st.objects.get(&key) else {
            return false;
        };
        if current.pointer("/metadata/resourceVersion") != v.pointer("/metadata/resourceVersion") {
            return false;
        }
        Self::stamp(&mut st, &mut v, false);
        st.objects.insert(key.clone(), v.clone());
        self.emit(&mut st, &key, "MODIFIED", v);
        true
    }

    /// Replaces only the `status` of an object, atomically (what a controller's status
    /// subresource write does). Returns false if the object is gone.
    pub fn set_status(
        &self,
        group: &str,
        plural: &str,
        namespace: &str,
        name: &str,
        status: Value,
    ) -> bool {
        let key = Key::new(group, plural, namespace, name);
        let mut st = self.state();
        let Some(mut obj) = st.objects.get(&key).cloned() else {
            return false;
        };
        obj["status"] = status;
        Self::stamp(&mut st, &mut obj, false);
        st.objects.insert(key.clone(), obj.clone());
        self.emit(&mut st, &key, "MODIFIED", obj);
        true
    }

    /// Reads an object as JSON.
    pub fn get_json(
        &self,
        group: &str,
        plural: &str,
        namespace: &str,
        name: &str,
    ) -> Option<Value> {
        let key = Key::new(group, plural, namespace, name);
        self.state().objects.get(&key).cloned()
    }

    /// Reads a typed object.
    pub fn get<K>(&self, namespace: &str, name: &str) -> Option<K>
    where
        K: Resource<DynamicType = ()> + serde::de::DeserializeOwned,
    {
        let v = self.get_json(&K::group(&()), &K::plural(&()), namespace, name)?;
        serde_json::from_value(v).ok()
    }

    /// Every object of group/plural, sorted by namespace and name.
    pub fn list_json(&self, group: &str, plural: &str) -> Vec<Value> {
        self.state()
            .objects
            .iter()
            .filter(|(k, _)| k.group == group && k.plural == plural)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// The events.k8s.io/v1 Events recorded so far (what kube's Recorder writes), sorted
    /// by namespace and name.
    pub fn events(&self) -> Vec<Value> {
        self.list_json("events.k8s.io", "events")
    }

    /// Removes an object directly (no finalizers, not logged).
    pub fn remove(&self, group: &str, plural: &str, namespace: &str, name: &str) -> Option<Value> {
        let key = Key::new(group, plural, namespace, name);
        let mut st = self.state();
        let v = st.objects.remove(&key)?;
        st.rv += 1;
        self.emit(&mut st, &key, "DELETED", v.clone());
        Some(v)
    }

    /// Gives `v` the next resourceVersion and, for a new object, what the server fills in.
    pub(super) fn stamp(st: &mut State, v: &mut Value, created: bool) {
        st.rv += 1;
        let rv = st.rv.to_string();
        if created {
            st.uid += 1;
            // A UID or timestamp the caller set (a fixture) is kept; the server fills the rest.
            if v.pointer("/metadata/uid").and_then(Value::as_str).is_none() {
                let uid = format!("00000000-0000-4000-8000-{:012x}", st.uid);
                merge_patch(v, &json!({"metadata": {"uid": uid}}));
            }
            if v.pointer("/metadata/creationTimestamp")
                .and_then(Value::as_str)
                .is_none()
            {
                merge_patch(v, &json!({"metadata": {"creationTimestamp": now()}}));
            }
            merge_patch(v, &json!({"metadata": {"generation": 1}}));
        }
        merge_patch(v, &json!({"metadata": {"resourceVersion": rv}}));
    }

    /// Records a change of the object at `key` for the watches, at the current version.
    pub(super) fn emit(&self, st: &mut State, key: &Key, kind: &'static str, object: Value) {
        let ev = Event {
            rv: st.rv,
            group: key.group.clone(),
            plural: key.plural.clone(),
            namespace: key.namespace.clone(),
            kind,
            object,
        };
        st.history.push(ev.clone());
        let _ = self.inner.events.send(ev);
    }
}
