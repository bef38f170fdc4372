//! JSON Patch (RFC 6902) operations, as an AdmissionReview response carries them: the
//! output of a decision, written here from typed values.
//!
//! Built against the object as it was sent: `add` of a map entry first makes sure the map
//! exists (a Pod without annotations has no `metadata.annotations`).

use k8s_openapi::api::core::v1::{PersistentVolumeClaimSpec, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde_json::{Value, json};
use vtsnap_core::snapshot::GROUP;
use vtsnap_core::{labels, restore_pod};

use crate::observe::PvcTemplate;

/// One operation.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Op {
    Add { path: String, value: Value },
    Replace { path: String, value: Value },
}

impl Op {
    pub fn path(&self) -> &str {
        match self {
            Self::Add { path, .. } | Self::Replace { path, .. } => path,
        }
    }
}

/// One reference token of a JSON pointer (`/` is `~1`, `~` is `~0`).
pub fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// Whether the map or list an operation adds to is in the object as sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holder {
    Present,
    Absent,
}

impl Holder {
    fn of(present: bool) -> Self {
        if present { Self::Present } else { Self::Absent }
    }
}

fn entry(map: Holder, map_path: &str, key: &str, value: Value) -> Vec<Op> {
    let mut ops = Vec::new();
    if map == Holder::Absent {
        ops.push(Op::Add {
            path: map_path.to_owned(),
            value: json!({}),
        });
    }
    ops.push(Op::Add {
        path: format!("{map_path}/{}", escape(key)),
        value,
    });
    ops
}

fn push(list: Holder, list_path: &str, value: Value) -> Vec<Op> {
    match list {
        Holder::Present => vec![Op::Add {
            path: format!("{list_path}/-"),
            value,
        }],
        Holder::Absent => vec![Op::Add {
            path: list_path.to_owned(),
            value: json!([value]),
        }],
    }
}

/// The operations, in order, that set `obj.<map_path>[key] = value` (`map_path` a JSON
/// pointer such as `/metadata/annotations`), creating the map when it is absent or null.
pub fn set_entry(obj: &Value, map_path: &str, key: &str, value: Value) -> Vec<Op> {
    let map = Holder::of(obj.pointer(map_path).is_some_and(Value::is_object));
    entry(map, map_path, key, value)
}

/// The operations that append `value` to the list at `list_path`, creating it if absent.
pub fn append(obj: &Value, list_path: &str, value: Value) -> Vec<Op> {
    push(
        Holder::of(obj.pointer(list_path).is_some_and(Value::is_array)),
        list_path,
        value,
    )
}

/// The operations that set each annotation, in order, on an object with `meta`.
pub fn annotate(meta: &ObjectMeta, entries: &[(&str, String)]) -> Vec<Op> {
    let mut map = Holder::of(meta.annotations.is_some());
    let mut ops = Vec::new();
    for (key, value) in entries {
        ops.extend(entry(map, "/metadata/annotations", key, json!(value)));
        map = Holder::Present;
    }
    ops
}

/// A new PVC's `dataSource` and `dataSourceRef`: the VolumeSnapshot `snapshot`.
pub fn restore_from(snapshot: &str) -> Vec<Op> {
    let source = json!({"apiGroup": GROUP, "kind": "VolumeSnapshot", "name": snapshot});
    vec![
        Op::Add {
            path: "/spec/dataSource".into(),
            value: source.clone(),
        },
        Op::Add {
            path: "/spec/dataSourceRef".into(),
            value: source,
        },
    ]
}

/// The init container: the tablet's data volume mounted as `mysqld` mounts it, the UID
/// from the Pod's own label, as the pods' user (`vtsnap_core::restore_pod`, which
/// `vtsnap-restore` reads too).
pub fn restore_container(image: &str) -> Value {
    json!({
        "name": restore_pod::CONTAINER,
        "image": image,
        "args": ["--vtdataroot", restore_pod::VTDATAROOT],
        "env": [
            {"name": restore_pod::ENV_TABLET_UID, "valueFrom": {"fieldRef": {"fieldPath": format!("metadata.labels['{}']", labels::TABLET_UID)}}},
            {"name": restore_pod::ENV_LOG_FORMAT, "value": "json"},
        ],
        "volumeMounts": [{"name": labels::DATA_VOLUME, "mountPath": restore_pod::VTDATAROOT, "subPath": restore_pod::VTDATAROOT_SUBPATH}],
        "securityContext": {"runAsUser": restore_pod::POD_USER, "runAsGroup": restore_pod::POD_USER, "allowPrivilegeEscalation": false},
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
    })
}

/// The restore init container of `image`, appended to the Pod's init containers.
pub fn add_restore_container(spec: &PodSpec, image: &str) -> Vec<Op> {
    push(
        Holder::of(spec.init_containers.is_some()),
        "/spec/initContainers",
        restore_container(image),
    )
}

/// The Pod's `nodeSelector` entry `key=node`.
pub fn pin(spec: &PodSpec, key: &str, node: &str) -> Vec<Op> {
    entry(
        Holder::of(spec.node_selector.is_some()),
        "/spec/nodeSelector",
        key,
        json!(node),
    )
}

/// The Pod's volume at `index` (its data volume) made an emptyDir of the same name.
pub fn empty_dir(index: usize) -> Op {
    Op::Replace {
        path: format!("/spec/volumes/{index}"),
        value: json!({"name": labels::DATA_VOLUME, "emptyDir": {}}),
    }
}

/// The PVC's spec (`current`) set to `template`: replaced, or added where there is none (a
/// JSON patch cannot replace a member that is not there).
pub fn set_spec(current: Option<&PersistentVolumeClaimSpec>, template: &PvcTemplate) -> Op {
    let (path, value) = ("/spec".to_owned(), template.json().clone());
    match current {
        Some(_) => Op::Replace { path, value },
        None => Op::Add { path, value },
    }
}

/// Applies operations to a copy of `obj` (what the API server does with them): for the
/// tests and the offline `review`, which show the object as it would be stored.
pub fn apply(obj: &Value, ops: &[Op]) -> Result<Value, String> {
    let mut out = obj.clone();
    for op in ops {
        let (path, value, replace) = match op {
            Op::Add { path, value } => (path, value, false),
            Op::Replace { path, value } => (path, value, true),
        };
        let (parent, last) = path
            .rsplit_once('/')
            .ok_or_else(|| format!("{path}: not a JSON pointer"))?;
        let token = last.replace("~1", "/").replace("~0", "~");
        let target = if parent.is_empty() {
            Some(&mut out)
        } else {
            out.pointer_mut(parent)
        }
        .ok_or_else(|| format!("{path}: {parent} does not exist"))?;
        match target {
            Value::Object(m) => {
                if replace && !m.contains_key(&token) {
                    return Err(format!("{path}: nothing to replace"));
                }
                m.insert(token, value.clone());
            }
            Value::Array(a) if token == "-" && !replace => a.push(value.clone()),
            Value::Array(a) => {
                let i: usize = token
                    .parse()
                    .map_err(|_| format!("{path}: {token:?} is not an index"))?;
                match (replace, i.cmp(&a.len())) {
                    (true, std::cmp::Ordering::Less) => a[i] = value.clone(),
                    (false, std::cmp::Ordering::Less | std::cmp::Ordering::Equal) => {
                        a.insert(i, value.clone());
                    }
                    _ => return Err(format!("{path}: index {i} is out of range")),
                }
            }
            _ => return Err(format!("{path}: {parent} is neither a map nor a list")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_entries_create_their_map_and_escape_their_key() {
        let bare = json!({"metadata": {"name": "p"}});
        let ops = set_entry(
            &bare,
            "/metadata/annotations",
            "vtsnap.io/restored-from",
            json!("s1"),
        );
        assert_eq!(ops.len(), 2);
        assert_eq!(
            ops[1].path(),
            "/metadata/annotations/vtsnap.io~1restored-from"
        );
        let got = apply(&bare, &ops).unwrap();
        assert_eq!(
            got["metadata"]["annotations"]["vtsnap.io/restored-from"],
            "s1"
        );
        let with = json!({"metadata": {"annotations": {"a": "b"}}});
        let ops = set_entry(&with, "/metadata/annotations", "x~y", json!("1"));
        assert_eq!(ops.len(), 1);
        let got = apply(&with, &ops).unwrap();
        assert_eq!(
            got["metadata"]["annotations"],
            json!({"a": "b", "x~y": "1"})
        );
        // A null map (as some clients send) is replaced by a map.
        let null = json!({"metadata": {"annotations": null}});
        let got = apply(
            &null,
            &set_entry(&null, "/metadata/annotations", "k", json!("v")),
        )
        .unwrap();
        assert_eq!(got["metadata"]["annotations"], json!({"k": "v"}));
    }

    #[test]
    fn annotations_from_typed_metadata_are_what_set_entry_makes_one_by_one() {
        for obj in [
            json!({"metadata": {"name": "p"}}),
            json!({"metadata": {"annotations": null}}),
            json!({"metadata": {"annotations": {"a": "b"}}}),
        ] {
            let meta: ObjectMeta = serde_json::from_value(obj["metadata"].clone()).unwrap();
            let entries = [("vtsnap.io/a", "1".to_owned()), ("b", "2".to_owned())];
            let mut by_hand = Vec::new();
            let mut stepped = obj.clone();
            for (k, v) in &entries {
                let ops = set_entry(&stepped, "/metadata/annotations", k, json!(v));
                stepped = apply(&stepped, &ops).unwrap();
                by_hand.extend(ops);
            }
            assert_eq!(annotate(&meta, &entries), by_hand, "{obj}");
        }
    }

    #[test]
    fn lists_are_appended_to_or_created() {
        let none = json!({"spec": {}});
        let got = apply(
            &none,
            &append(&none, "/spec/initContainers", json!({"name": "a"})),
        )
        .unwrap();
        assert_eq!(got["spec"]["initContainers"], json!([{"name": "a"}]));
        let some = json!({"spec": {"initContainers": [{"name": "a"}]}});
        let got = apply(
            &some,
            &append(&some, "/spec/initContainers", json!({"name": "b"})),
        )
        .unwrap();
        assert_eq!(
            got["spec"]["initContainers"],
            json!([{"name": "a"}, {"name": "b"}])
        );
    }

    #[test]
    fn apply_follows_rfc_6902_for_what_it_supports() {
        let v = json!({"spec": {"volumes": [{"name": "a"}, {"name": "b"}]}});
        let r = apply(
            &v,
            &[Op::Replace {
                path: "/spec/volumes/1".into(),
                value: json!({"name": "c"}),
            }],
        )
        .unwrap();
        assert_eq!(r["spec"]["volumes"][1]["name"], "c");
        assert!(
            apply(
                &v,
                &[Op::Replace {
                    path: "/spec/volumes/2".into(),
                    value: json!(1)
                }]
            )
            .is_err()
        );
        assert!(
            apply(
                &v,
                &[Op::Replace {
                    path: "/spec/nothing".into(),
                    value: json!(1)
                }]
            )
            .is_err()
        );
        assert!(
            apply(
                &v,
                &[Op::Add {
                    path: "/missing/x".into(),
                    value: json!(1)
                }]
            )
            .is_err()
        );
        let r = apply(
            &v,
            &[Op::Replace {
                path: "/spec".into(),
                value: json!({"x": 1}),
            }],
        )
        .unwrap();
        assert_eq!(r["spec"], json!({"x": 1}));
        assert_eq!(
            serde_json::to_value(Op::Add {
                path: "/a".into(),
                value: json!(1)
            })
            .unwrap(),
            json!({"op": "add", "path": "/a", "value": 1})
        );
    }
}
