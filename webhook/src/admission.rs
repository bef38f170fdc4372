//! `admission.k8s.io/v1` AdmissionReview on the wire: the request read strictly (every
//! field the webhook relies on checked, an error names it), the response built.
//!
//! A review that cannot be read is answered with HTTP 400 and the reason; the API server
//! then applies `failurePolicy: Ignore` and creates the object unchanged.

use base64::Engine as _;
use serde_json::{Value, json};
use vtsnap_core::k8s_names::untrusted;

use crate::decide::{Decision, Kind, kind_of};

/// The largest review body read (the API server's own request limit is 3 MiB; a review
/// carries the object once, plus its old copy on updates).
pub const MAX_BODY: usize = 8 << 20;

/// Why a review cannot be answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReviewError {
    #[error("the body is not JSON: {0}")]
    NotJson(String),
    #[error("{field} is missing")]
    Missing { field: &'static str },
    #[error("{field} is {found}, expected {expected}")]
    Wrong {
        field: &'static str,
        found: String,
        expected: &'static str,
    },
}

/// The request part of a review.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub uid: String,
    /// `None` for a kind other than core/v1 Pod or PersistentVolumeClaim.
    pub kind: Option<Kind>,
    pub operation: String,
    pub namespace: String,
    pub object: Value,
    pub dry_run: bool,
}

fn text<'a>(v: &'a Value, pointer: &str, field: &'static str) -> Result<&'a str, ReviewError> {
    match v.pointer(pointer) {
        None | Some(Value::Null) => Err(ReviewError::Missing { field }),
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(ReviewError::Wrong {
            field,
            found: kind_of(other),
            expected: "a string",
        }),
    }
}

/// Reads a review body. serde_json refuses nesting deeper than 128 (no deep recursion).
pub fn parse(body: &[u8]) -> Result<Request, ReviewError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| ReviewError::NotJson(e.to_string()))?;
    let api_version = text(&v, "/apiVersion", "apiVersion")?;
    if api_version != "admission.k8s.io/v1" {
        return Err(ReviewError::Wrong {
            field: "apiVersion",
            found: untrusted(api_version).to_string(),
            expected: "admission.k8s.io/v1",
        });
    }
    let kind = text(&v, "/kind", "kind")?;
    if kind != "AdmissionReview" {
        return Err(ReviewError::Wrong {
            field: "kind",
            found: untrusted(kind).to_string(),
            expected: "AdmissionReview",
        });
    }
    if !v.get("request").is_some_and(Value::is_object) {
        return Err(match v.get("request") {
            None | Some(Value::Null) => ReviewError::Missing { field: "request" },
            Some(other) => ReviewError::Wrong {
                field: "request",
                found: kind_of(other),
                expected: "an object",
            },
        });
    }
    let uid = text(&v, "/request/uid", "request.uid")?;
    if uid.is_empty() {
        return Err(ReviewError::Missing {
            field: "request.uid",
        });
    }
    let group = match v.pointer("/request/kind/group") {
        None | Some(Value::Null) => "",
        Some(_) => text(&v, "/request/kind/group", "request.kind.group")?,
    };
    let version = text(&v, "/request/kind/version", "request.kind.version")?;
    let object_kind = text(&v, "/request/kind/kind", "request.kind.kind")?;
    let kind = match (group, version, object_kind) {
        ("", "v1", "PersistentVolumeClaim") => Some(Kind::PersistentVolumeClaim),
        ("", "v1", "Pod") => Some(Kind::Pod),
        _ => None,
    };
    let operation = text(&v, "/request/operation", "request.operation")?.to_owned();
    let namespace = match v.pointer("/request/namespace") {
        None | Some(Value::Null) => String::new(),
        Some(_) => text(&v, "/request/namespace", "request.namespace")?.to_owned(),
    };
    let dry_run = match v.pointer("/request/dryRun") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(ReviewError::Wrong {
                field: "request.dryRun",
                found: kind_of(other),
                expected: "a boolean",
            });
        }
    };
    let object = match v.pointer("/request/object") {
        Some(o @ Value::Object(_)) => o.clone(),
        None | Some(Value::Null) if operation != "CREATE" => Value::Null,
        None | Some(Value::Null) => {
            return Err(ReviewError::Missing {
                field: "request.object",
            });
        }
        Some(other) => {
            return Err(ReviewError::Wrong {
                field: "request.object",
                found: kind_of(other),
                expected: "an object",
            });
        }
    };
    if kind.is_some() && operation == "CREATE" {
        // The namespace of a namespaced object's review is always set; an object that
        // names another would be a forged review. The request's own field is checked
        // first: its absence is the request's fault, not the object's.
        if namespace.is_empty() {
            return Err(ReviewError::Missing {
                field: "request.namespace",
            });
        }
        match object.pointer("/metadata/namespace") {
            None | Some(Value::Null) => {}
            Some(Value::String(ns)) if ns.is_empty() || *ns == namespace => {}
            Some(Value::String(ns)) => {
                return Err(ReviewError::Wrong {
                    field: "request.object.metadata.namespace",
                    found: untrusted(ns).to_string(),
                    expected: "the request's namespace",
                });
            }
            Some(other) => {
                return Err(ReviewError::Wrong {
                    field: "request.object.metadata.namespace",
                    found: kind_of(other),
                    expected: "a string",
                });
            }
        }
    }
    Ok(Request {
        uid: uid.to_owned(),
        kind,
        operation,
        namespace,
        object,
        dry_run,
    })
}

/// The response review: allowed, with the patch when there is one, the decision's codes
/// as an audit annotation.
pub fn respond(uid: &str, d: &Decision) -> Value {
    let mut response = json!({
        "uid": uid,
        "allowed": true,
        "auditAnnotations": {"decision": d.codes()},
    });
    if !d.patch.is_empty() {
        let patch = serde_json::to_vec(&d.patch).unwrap_or_default();
        response["patchType"] = json!("JSONPatch");
        response["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(patch));
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::{Code, Decision};
    use crate::patch::Op;

    fn review(request: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})).unwrap()
    }

    fn pvc_request() -> Value {
        json!({"uid": "u-1", "kind": {"group": "", "version": "v1", "kind": "PersistentVolumeClaim"},
               "operation": "CREATE", "namespace": "vitess",
               "object": {"metadata": {"name": "p", "namespace": "vitess"}}})
    }

    #[test]
    fn a_well_formed_review_is_read() {
        let r = parse(&review(pvc_request())).unwrap();
        assert_eq!(r.uid, "u-1");
        assert_eq!(r.kind, Some(Kind::PersistentVolumeClaim));
        assert_eq!(r.operation, "CREATE");
        assert_eq!(r.namespace, "vitess");
        assert!(!r.dry_run);
        let mut pod = pvc_request();
        pod["kind"] = json!({"version": "v1", "kind": "Pod"});
        pod["dryRun"] = json!(true);
        pod["object"]["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("namespace");
        let r = parse(&review(pod)).unwrap();
        assert_eq!((r.kind, r.dry_run), (Some(Kind::Pod), true));
        let mut other = pvc_request();
        other["kind"] = json!({"group": "apps", "version": "v1", "kind": "Deployment"});
        assert_eq!(parse(&review(other)).unwrap().kind, None);
    }

    #[test]
    fn malformed_reviews_are_errors_naming_the_field() {
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"{".to_vec(), "the body is not JSON"),
            (b"[]".to_vec(), "apiVersion is missing"),
            (
                serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"})).unwrap(),
                "apiVersion is \"admission.k8s.io/v1beta1\", expected admission.k8s.io/v1",
            ),
            (
                serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "Review"})).unwrap(),
                "kind is \"Review\", expected AdmissionReview",
            ),
            (
                serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"})).unwrap(),
                "request is missing",
            ),
            (
                serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": []})).unwrap(),
                "request is a list, expected an object",
            ),
            (review(json!({})), "request.uid is missing"),
            (review(json!({"uid": ""})), "request.uid is missing"),
            (review(json!({"uid": 7})), "request.uid is a number, expected a string"),
            (review(json!({"uid": "u"})), "request.kind.version is missing"),
            (
                review(json!({"uid": "u", "kind": {"version": "v1", "kind": "Pod"}})),
                "request.operation is missing",
            ),
            (
                review(json!({"uid": "u", "kind": {"version": "v1", "kind": "Pod"}, "operation": "CREATE", "namespace": "n"})),
                "request.object is missing",
            ),
            (
                review(json!({"uid": "u", "kind": {"version": "v1", "kind": "Pod"}, "operation": "CREATE", "namespace": "n", "object": "x"})),
                "request.object is a string, expected an object",
            ),
            (
                review(json!({"uid": "u", "kind": {"version": "v1", "kind": "Pod"}, "operation": "CREATE", "namespace": "n", "dryRun": "yes", "object": {}})),
                "request.dryRun is a string, expected a boolean",
            ),
            (
                review(json!({"uid": "u", "kind": {"version": "v1", "kind": "Pod"}, "operation": "CREATE", "object": {}})),
                "request.namespace is missing",
            ),
            (
                review(json!({"uid": "u", "kind": {"version": "v1", "kind": "Pod"}, "operation": "CREATE", "namespace": "a",
                              "object": {"metadata": {"namespace": "b"}}})),
                "request.object.metadata.namespace is \"b\", expected the request's namespace",
            ),
        ];
        for (body, want) in cases {
            let got = parse(&body).unwrap_err().to_string();
            assert!(got.starts_with(want), "{got:?} should start with {want:?}");
        }
        // A deep nest is an error, not a stack overflow.
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(matches!(
            parse(deep.as_bytes()),
            Err(ReviewError::NotJson(_))
        ));
    }

    #[test]
    fn the_response_carries_the_patch_in_base64_and_the_codes() {
        let mut d = Decision::note(Code::RestoredFromSnapshot, "s1");
        d.patch.push(Op::Add {
            path: "/spec/dataSourceRef".into(),
            value: json!({"name": "s1"}),
        });
        let r = respond("u-1", &d);
        assert_eq!(r["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(r["kind"], "AdmissionReview");
        assert_eq!(r["response"]["uid"], "u-1");
        assert_eq!(r["response"]["allowed"], true);
        assert_eq!(r["response"]["patchType"], "JSONPatch");
        assert_eq!(
            r["response"]["auditAnnotations"]["decision"],
            "restored-from-snapshot"
        );
        let raw = base64::engine::general_purpose::STANDARD
            .decode(r["response"]["patch"].as_str().unwrap())
            .unwrap();
        let ops: Value = serde_json::from_slice(&raw).unwrap();
        assert_eq!(
            ops,
            json!([{"op": "add", "path": "/spec/dataSourceRef", "value": {"name": "s1"}}])
        );
        let none = respond("u-2", &Decision::note(Code::NotVtsnaps, "x"));
        assert!(none["response"].get("patch").is_none());
        assert!(none["response"].get("patchType").is_none());
    }

    #[test]
    fn the_namespace_is_blamed_on_the_field_that_is_wrong() {
        let pod = |extra: Value| {
            let mut r = json!({"uid": "u", "kind": {"version": "v1", "kind": "Pod"}, "operation": "CREATE",
                               "object": {"metadata": {"name": "p"}}});
            for (k, v) in extra.as_object().unwrap() {
                r[k] = v.clone();
            }
            parse(&review(r))
        };
        // No request.namespace, though the object names one: the request lacks it.
        let e = pod(json!({"object": {"metadata": {"namespace": "b"}}})).unwrap_err();
        assert_eq!(e.to_string(), "request.namespace is missing");
        let e = pod(json!({"namespace": ""})).unwrap_err();
        assert_eq!(e.to_string(), "request.namespace is missing");
        // A namespace that is not a string, in the request or in the object.
        let e = pod(json!({"namespace": 7})).unwrap_err();
        assert_eq!(
            e.to_string(),
            "request.namespace is a number, expected a string"
        );
        for (ns, found) in [
            (json!(7), "a number"),
            (json!(["a"]), "a list"),
            (json!({}), "an object"),
        ] {
            let e = pod(json!({"namespace": "a", "object": {"metadata": {"namespace": ns}}}))
                .unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("request.object.metadata.namespace is {found}, expected a string")
            );
        }
        // Escaped and bounded when it is shown.
        let e = pod(json!({"namespace": "a", "object": {"metadata": {"namespace": "b\u{1b}[2J"}}}))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "request.object.metadata.namespace is \"b\\u{1b}[2J\", expected the request's namespace"
        );
        // Empty, absent, null or equal: read.
        for ns in [json!(""), json!(null), json!("a")] {
            let r =
                pod(json!({"namespace": "a", "object": {"metadata": {"namespace": ns}}})).unwrap();
            assert_eq!(r.namespace, "a");
        }
        assert_eq!(pod(json!({"namespace": "a"})).unwrap().namespace, "a");
        // Not a creation of a kind vtsnap changes: the namespace is not required.
        let r = pod(json!({"operation": "DELETE", "object": null})).unwrap();
        assert_eq!(r.namespace, "");
    }
}
