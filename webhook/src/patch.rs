//! JSON Patch (RFC 6902) operations, as an AdmissionReview response carries them.
//!
//! Built against the object as it was sent: `add` of a map entry first makes sure the map
//! exists (a Pod without annotations has no `metadata.annotations`).

use serde::Serialize;
use serde_json::{Value, json};

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

/// The operations, in order, that set `obj.<map_path>[key] = value` (`map_path` a JSON
/// pointer such as `/metadata/annotations`), creating the map when it is absent or null.
pub fn set_entry(obj: &Value, map_path: &str, key: &str, value: Value) -> Vec<Op> {
    let mut ops = Vec::new();
    match obj.pointer(map_path) {
        Some(Value::Object(_)) => {}
        _ => ops.push(Op::Add {
            path: map_path.to_owned(),
            value: json!({}),
        }),
    }
    ops.push(Op::Add {
        path: format!("{map_path}/{}", escape(key)),
        value,
    });
    ops
}

/// The operations that append `value` to the list at `list_path`, creating it if absent.
pub fn append(obj: &Value, list_path: &str, value: Value) -> Vec<Op> {
    match obj.pointer(list_path) {
        Some(Value::Array(_)) => vec![Op::Add {
            path: format!("{list_path}/-"),
            value,
        }],
        _ => vec![Op::Add {
            path: list_path.to_owned(),
            value: json!([value]),
        }],
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
