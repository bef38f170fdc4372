//! What a request is, read from its method, query, kube's verb tag and body: its verb,
//! and whether a repeat is harmless (docs/design.md §3.8).

use http::Method;
use serde_json::Value;

use super::decide::{Replay, Shape, Verb};

/// The shape of a request with these `parts` and this `body`.
pub fn shape_of(parts: &http::request::Parts, body: &[u8]) -> Shape {
    // kube tags each request with its verb ("list", "delete_collection", …).
    let tag = parts
        .extensions
        .get::<&'static str>()
        .copied()
        .unwrap_or("");
    let verb = match parts.method {
        Method::GET | Method::HEAD if is_watch(parts.uri.query()) => Verb::Watch,
        Method::GET | Method::HEAD if tag.starts_with("list") => Verb::List,
        Method::GET | Method::HEAD => Verb::Get,
        Method::POST => Verb::Create,
        Method::PUT => Verb::Update,
        Method::PATCH => Verb::Patch,
        Method::DELETE if tag == "delete_collection" => Verb::DeleteCollection,
        Method::DELETE => Verb::Delete,
        _ => Verb::Other,
    };
    let harmless = match verb {
        Verb::Get | Verb::List | Verb::Watch => true,
        Verb::Update => has_resource_version(body),
        Verb::Patch => has_resource_version(body) || tests_resource_version(body),
        Verb::Delete | Verb::DeleteCollection => has_delete_precondition(body),
        // A repeated create either makes a second object (generateName) or answers 409
        // AlreadyExists, which its caller would read as someone else's object.
        Verb::Create | Verb::Other => false,
    };
    Shape {
        verb,
        replay: if harmless {
            Replay::Harmless
        } else {
            Replay::OnlyUnhandled
        },
    }
}

fn is_watch(query: Option<&str>) -> bool {
    query
        .unwrap_or("")
        .split('&')
        .any(|kv| matches!(kv, "watch=true" | "watch=1"))
}

fn json(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap_or(Value::Null)
}

fn non_empty(v: Option<&Value>) -> bool {
    v.and_then(Value::as_str).is_some_and(|s| !s.is_empty())
}

/// A PUT or a merge patch that names the version it changes (409 if it moved on).
fn has_resource_version(body: &[u8]) -> bool {
    non_empty(json(body).pointer("/metadata/resourceVersion"))
}

/// A JSON patch whose `test` op checks the resourceVersion.
fn tests_resource_version(body: &[u8]) -> bool {
    json(body).as_array().is_some_and(|ops| {
        ops.iter().any(|op| {
            op.get("op").and_then(Value::as_str) == Some("test")
                && op.get("path").and_then(Value::as_str) == Some("/metadata/resourceVersion")
                && non_empty(op.get("value"))
        })
    })
}

/// DeleteOptions with a UID or resourceVersion precondition (404 or 409 once gone).
fn has_delete_precondition(body: &[u8]) -> bool {
    let v = json(body);
    non_empty(v.pointer("/preconditions/uid"))
        || non_empty(v.pointer("/preconditions/resourceVersion"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(method: &str, uri: &str, tag: Option<&'static str>, body: &str) -> Shape {
        let mut req = http::Request::builder()
            .method(method)
            .uri(uri)
            .body(())
            .unwrap();
        if let Some(t) = tag {
            req.extensions_mut().insert(t);
        }
        shape_of(&req.into_parts().0, body.as_bytes())
    }

    fn harmless(method: &str, body: &str) -> bool {
        shape(method, "/api/v1/namespaces/ns/configmaps/c", None, body).replay == Replay::Harmless
    }

    #[test]
    fn verbs_from_method_query_and_tag() {
        let v = |m, u, t| shape(m, u, t, "").verb;
        assert_eq!(
            v(
                "GET",
                "/api/v1/pods?watch=true&resourceVersion=1",
                Some("watch")
            ),
            Verb::Watch
        );
        assert_eq!(
            v("GET", "/api/v1/pods?labelSelector=a&watch=1", None),
            Verb::Watch
        );
        assert_eq!(
            v("GET", "/api/v1/pods?watch=false", Some("list")),
            Verb::List
        );
        assert_eq!(v("GET", "/api/v1/pods", Some("list_metadata")), Verb::List);
        assert_eq!(
            v("GET", "/api/v1/namespaces/a/pods/p", Some("get")),
            Verb::Get
        );
        assert_eq!(v("POST", "/api/v1/pods", Some("create")), Verb::Create);
        assert_eq!(v("PUT", "/api/v1/pods", None), Verb::Update);
        assert_eq!(v("PATCH", "/api/v1/pods", None), Verb::Patch);
        assert_eq!(
            v(
                "DELETE",
                "/api/v1/namespaces/a/pods",
                Some("delete_collection")
            ),
            Verb::DeleteCollection
        );
        assert_eq!(
            v("DELETE", "/api/v1/namespaces/a/pods/p", Some("delete")),
            Verb::Delete
        );
        assert_eq!(v("CONNECT", "/api/v1/pods", None), Verb::Other);
    }

    #[test]
    fn reads_are_harmless() {
        assert!(harmless("GET", ""));
    }

    #[test]
    fn a_put_is_harmless_only_with_a_resource_version() {
        assert!(harmless(
            "PUT",
            r#"{"metadata":{"name":"c","resourceVersion":"7"}}"#
        ));
        assert!(!harmless("PUT", r#"{"metadata":{"name":"c"}}"#));
        assert!(!harmless(
            "PUT",
            r#"{"metadata":{"name":"c","resourceVersion":""}}"#
        ));
        assert!(!harmless("PUT", "not json"));
    }

    #[test]
    fn a_patch_is_harmless_with_a_resource_version_or_a_test_of_it() {
        assert!(harmless(
            "PATCH",
            r#"{"metadata":{"resourceVersion":"7","labels":{"a":"b"}}}"#
        ));
        assert!(harmless(
            "PATCH",
            r#"[{"op":"test","path":"/metadata/resourceVersion","value":"7"},{"op":"remove","path":"/x"}]"#
        ));
        assert!(!harmless(
            "PATCH",
            r#"[{"op":"replace","path":"/metadata/resourceVersion","value":"7"}]"#
        ));
        assert!(!harmless("PATCH", r#"{"metadata":{"labels":{"a":"b"}}}"#));
    }

    #[test]
    fn a_delete_is_harmless_with_a_precondition() {
        assert!(harmless("DELETE", r#"{"preconditions":{"uid":"u-1"}}"#));
        assert!(harmless(
            "DELETE",
            r#"{"preconditions":{"resourceVersion":"7"}}"#
        ));
        assert!(!harmless("DELETE", r#"{"propagationPolicy":"Background"}"#));
        assert!(!harmless("DELETE", ""));
    }

    #[test]
    fn a_create_is_never_harmless() {
        assert!(!harmless(
            "POST",
            r#"{"metadata":{"name":"c","resourceVersion":"7"}}"#
        ));
    }
}
