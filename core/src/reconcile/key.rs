//! A namespaced object's identity.

use std::fmt;

use serde::Serialize;

/// `namespace/name` of one object; the kind is the caller's context.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ObjectKey {
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The key of an object as read (`metadata.namespace`, `metadata.name`); `None` when
    /// either is missing or empty.
    pub fn of(object: &serde_json::Value) -> Option<Self> {
        let field = |f: &str| {
            object
                .pointer(&format!("/metadata/{f}"))
                .and_then(serde_json::Value::as_str)
                .filter(|s| !s.is_empty())
        };
        Some(Self::new(field("namespace")?, field("name")?))
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_the_key_of_an_object_and_refuses_a_partial_one() {
        let k = ObjectKey::of(&json!({"metadata": {"namespace": "ns", "name": "a"}})).unwrap();
        assert_eq!(k, ObjectKey::new("ns", "a"));
        assert_eq!(k.to_string(), "ns/a");
        assert_eq!(ObjectKey::of(&json!({"metadata": {"name": "a"}})), None);
        assert_eq!(
            ObjectKey::of(&json!({"metadata": {"namespace": "", "name": "a"}})),
            None
        );
        assert_eq!(
            ObjectKey::of(&json!({"metadata": {"namespace": "ns", "name": 3}})),
            None
        );
    }

    #[test]
    fn orders_by_namespace_then_name() {
        let mut keys = [
            ObjectKey::new("b", "a"),
            ObjectKey::new("a", "z"),
            ObjectKey::new("a", "b"),
        ];
        keys.sort();
        let shown: Vec<String> = keys.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["a/b", "a/z", "b/a"]);
    }
}
