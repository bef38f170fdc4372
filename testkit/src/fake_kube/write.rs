//! POST and DELETE: create (with generateName), delete with preconditions and finalizers,
//! and delete by label selector.

use serde_json::{Value, json};

use super::FakeKube;
use super::reply::{Reply, err, invalid, json_reply, not_found};
use super::request::RequestInfo;
use super::selector::LabelSelector;
use super::store::merge_patch;
use super::store::{Key, State, now};
use super::validate;

impl FakeKube {
    pub(super) fn create(
        &self,
        st: &mut State,
        info: &RequestInfo,
        mut key: Key,
        mut obj: Value,
    ) -> Reply {
        if let Some(n) = obj.pointer("/metadata/name").and_then(Value::as_str) {
            key.name = n.to_owned();
        } else if let Some(g) = obj
            .pointer("/metadata/generateName")
            .and_then(Value::as_str)
        {
            key.name = format!("{g}{:05x}", st.uid + 1);
        }
        if key.name.is_empty() {
            return err(422, "Invalid", "metadata.name is required");
        }
        if st.objects.contains_key(&key) {
            return err(
                409,
                "AlreadyExists",
                format!("{} {:?} already exists", info.plural, key.name),
            );
        }
        let meta = json!({"metadata": {"name": key.name, "namespace": info.namespace}});
        merge_patch(&mut obj, &meta);
        if info.namespace.is_none()
            && let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut)
        {
            m.remove("namespace");
        }
        if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
        }
        if validate::applies(info) {
            let errs = validate::event_create(&obj);
            if !errs.is_empty() {
                return invalid(info, &key, &errs);
            }
        }
        Self::stamp(st, &mut obj, true);
        st.objects.insert(key.clone(), obj.clone());
        self.emit(st, &key, "ADDED", obj.clone());
        json_reply(201, &obj)
    }

    /// DELETE of one object, if the body's preconditions (resourceVersion, UID) hold.
    pub(super) fn delete(
        &self,
        st: &mut State,
        info: &RequestInfo,
        key: &Key,
        body: &Value,
    ) -> Reply {
        let Some(current) = st.objects.get(key).cloned() else {
            return not_found(info, key);
        };
        for (f, ptr) in [
            ("resourceVersion", "/preconditions/resourceVersion"),
            ("uid", "/preconditions/uid"),
        ] {
            if let Some(want) = body.pointer(ptr).and_then(Value::as_str)
                && current
                    .pointer(&format!("/metadata/{f}"))
                    .and_then(Value::as_str)
                    != Some(want)
            {
                return err(
                    409,
                    "Conflict",
                    format!("precondition failed: {f} is not {want}"),
                );
            }
        }
        self.delete_object(st, key, current)
    }

    /// DELETE of every object of the kind (in the namespace) its label selector matches.
    pub(super) fn delete_collection(&self, st: &mut State, info: &RequestInfo, key: &Key) -> Reply {
        let sel = match LabelSelector::parse(info.param("labelSelector")) {
            Ok(s) => s,
            Err(e) => return err(400, "BadRequest", e),
        };
        let keys: Vec<(Key, Value)> = st
            .objects
            .iter()
            .filter(|(k, v)| {
                k.group == key.group
                    && k.plural == key.plural
                    && (info.namespace.is_none() || k.namespace == key.namespace)
                    && sel.matches(v)
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (k, v) in keys {
            self.delete_object(st, &k, v);
        }
        json_reply(
            200,
            &json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "metadata": {}}),
        )
    }

    /// Removes the object, or, while it has finalizers, only marks it for deletion.
    fn delete_object(&self, st: &mut State, key: &Key, mut current: Value) -> Reply {
        let has_finalizers = current
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
        if has_finalizers {
            if current.pointer("/metadata/deletionTimestamp").is_none() {
                merge_patch(
                    &mut current,
                    &json!({"metadata": {"deletionTimestamp": now()}}),
                );
                Self::stamp(st, &mut current, false);
                st.objects.insert(key.clone(), current.clone());
                self.emit(st, key, "MODIFIED", current.clone());
            }
            return json_reply(200, &current);
        }
        st.objects.remove(key);
        st.rv += 1;
        self.emit(st, key, "DELETED", current.clone());
        json_reply(200, &current)
    }
}
