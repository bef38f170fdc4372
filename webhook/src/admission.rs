//! `admission.k8s.io/v1` AdmissionReview on the wire, in kube's types: the request read
//! strictly — every field the webhook relies on checked first, so that a refusal names it —
//! then as kube's `AdmissionRequest`; the response is kube's `AdmissionResponse`.
//!
//! A review that cannot be read is answered with HTTP 400 and the reason; the API server
//! then applies `failurePolicy: Ignore` and creates the object unchanged.

use base64::Engine as _;
use kube::core::admission::{
    AdmissionRequest, AdmissionResponse, AdmissionReview, META_API_VERSION_V1, META_KIND, PatchType,
};
use kube::core::{DynamicObject, TypeMeta};
use serde::Serialize;
use serde_json::{Value, json};
use vtsnap_core::k8s_names::{cut_to_bytes, escape_controls, json_kind, untrusted};

use crate::decide::Decision;
use crate::observe::Kind;

/// The largest review body read (the API server's own request limit is 3 MiB; a review
/// carries the object once, plus its old copy on updates).
pub const MAX_BODY: usize = 8 << 20;

/// A review request; its object is typed by [`crate::observe`].
pub type Request = AdmissionRequest<DynamicObject>;

/// The operations kube's `Operation` reads.
const OPERATIONS: [&str; 4] = ["CREATE", "UPDATE", "DELETE", "CONNECT"];

/// The longest part of a serde message kept: it may quote the value it could not read.
const DETAIL_MAX: usize = 240;

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
    /// A field the webhook does not rely on, which kube's types read.
    #[error("{field}: {detail}")]
    Unreadable { field: String, detail: String },
}

fn text<'a>(v: &'a Value, pointer: &str, field: &'static str) -> Result<&'a str, ReviewError> {
    match v.pointer(pointer) {
        None | Some(Value::Null) => Err(ReviewError::Missing { field }),
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(ReviewError::Wrong {
            field,
            found: json_kind(other).to_owned(),
            expected: "a string",
        }),
    }
}

/// Reads a review body. serde_json refuses nesting deeper than 128 (no deep recursion).
pub fn parse(body: &[u8]) -> Result<Request, ReviewError> {
    let mut v: Value =
        serde_json::from_slice(body).map_err(|e| ReviewError::NotJson(e.to_string()))?;
    check(&v)?;
    zero_absent(&mut v);
    let review: AdmissionReview<DynamicObject> =
        serde_path_to_error::deserialize(v).map_err(|e| ReviewError::Unreadable {
            field: e.path().to_string(),
            detail: escape_controls(cut_to_bytes(&e.inner().to_string(), DETAIL_MAX)).into_owned(),
        })?;
    review
        .try_into()
        .map_err(|_| ReviewError::Missing { field: "request" })
}

/// The webhook's own checks of what it relies on, in the order a refusal names them.
fn check(v: &Value) -> Result<(), ReviewError> {
    let api_version = text(v, "/apiVersion", "apiVersion")?;
    if api_version != META_API_VERSION_V1 {
        return Err(ReviewError::Wrong {
            field: "apiVersion",
            found: untrusted(api_version).to_string(),
            expected: META_API_VERSION_V1,
        });
    }
    let kind = text(v, "/kind", "kind")?;
    if kind != META_KIND {
        return Err(ReviewError::Wrong {
            field: "kind",
            found: untrusted(kind).to_string(),
            expected: META_KIND,
        });
    }
    match v.get("request") {
        Some(Value::Object(_)) => {}
        None | Some(Value::Null) => return Err(ReviewError::Missing { field: "request" }),
        Some(other) => {
            return Err(ReviewError::Wrong {
                field: "request",
                found: json_kind(other).to_owned(),
                expected: "an object",
            });
        }
    }
    let uid = text(v, "/request/uid", "request.uid")?;
    if uid.is_empty() {
        return Err(ReviewError::Missing {
            field: "request.uid",
        });
    }
    let group = match v.pointer("/request/kind/group") {
        None | Some(Value::Null) => "",
        Some(_) => text(v, "/request/kind/group", "request.kind.group")?,
    };
    let version = text(v, "/request/kind/version", "request.kind.version")?;
    let object_kind = text(v, "/request/kind/kind", "request.kind.kind")?;
    let kind = Kind::of(&kube::core::GroupVersionKind::gvk(
        group,
        version,
        object_kind,
    ));
    let operation = text(v, "/request/operation", "request.operation")?;
    if !OPERATIONS.contains(&operation) {
        return Err(ReviewError::Wrong {
            field: "request.operation",
            found: untrusted(operation).to_string(),
            expected: "CREATE, UPDATE, DELETE or CONNECT",
        });
    }
    let namespace = match v.pointer("/request/namespace") {
        None | Some(Value::Null) => "",
        Some(_) => text(v, "/request/namespace", "request.namespace")?,
    };
    match v.pointer("/request/dryRun") {
        None | Some(Value::Null | Value::Bool(_)) => {}
        Some(other) => {
            return Err(ReviewError::Wrong {
                field: "request.dryRun",
                found: json_kind(other).to_owned(),
                expected: "a boolean",
            });
        }
    }
    let object = match v.pointer("/request/object") {
        Some(o @ Value::Object(_)) => Some(o),
        None | Some(Value::Null) if operation != "CREATE" => None,
        None | Some(Value::Null) => {
            return Err(ReviewError::Missing {
                field: "request.object",
            });
        }
        Some(other) => {
            return Err(ReviewError::Wrong {
                field: "request.object",
                found: json_kind(other).to_owned(),
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
        match object.and_then(|o| o.pointer("/metadata/namespace")) {
            None | Some(Value::Null) => {}
            Some(Value::String(ns)) if ns.is_empty() || ns == namespace => {}
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
                    found: json_kind(other).to_owned(),
                    expected: "a string",
                });
            }
        }
    }
    Ok(())
}

/// Sets the members that the API's own (Go) types leave at their zero value when a review
/// omits them or sends null, and kube's types require. The API server always sends them;
/// a hand-made review (the offline `review`, a test) may not, and was read before.
fn zero_absent(v: &mut Value) {
    let Some(request) = v.get_mut("request").and_then(Value::as_object_mut) else {
        return;
    };
    for (member, zero) in [
        ("userInfo", json!({})),
        ("resource", json!({})),
        ("dryRun", json!(false)),
        ("name", json!("")),
    ] {
        if request.get(member).is_none_or(Value::is_null) {
            request.insert(member.to_owned(), zero);
        }
    }
    for (map, members) in [
        ("kind", &["group"][..]),
        ("resource", &["group", "version", "resource"][..]),
    ] {
        if let Some(m) = request.get_mut(map).and_then(Value::as_object_mut) {
            for member in members {
                if m.get(*member).is_none_or(Value::is_null) {
                    m.insert((*member).to_owned(), json!(""));
                }
            }
        }
    }
}

/// The answer on the wire: kube's review envelope and response, with the patch beside the
/// response in base64 (kube writes its `patch` as a list of numbers, kube-rs/kube#1781).
#[derive(Debug, Clone, Serialize)]
pub struct Answer {
    #[serde(flatten)]
    types: TypeMeta,
    response: WireResponse,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct WireResponse {
    #[serde(flatten)]
    response: AdmissionResponse,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<PatchType>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<String>,
}

impl Answer {
    /// kube's response (without the patch, which only the wire form carries).
    pub fn response(&self) -> &AdmissionResponse {
        &self.response.response
    }

    pub fn to_json(&self) -> Result<String, AnswerError> {
        serde_json::to_string(self).map_err(|e| AnswerError(e.to_string()))
    }
}

/// Why an answer could not be encoded (it is then not sent: the API server applies
/// `failurePolicy: Ignore`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the answer could not be encoded: {0}")]
pub struct AnswerError(String);

/// The answer: allowed, with the patch when there is one, the decision's codes as an audit
/// annotation.
pub fn respond(req: &Request, d: &Decision) -> Result<Answer, AnswerError> {
    let mut response = AdmissionResponse::from(req);
    response
        .audit_annotations
        .insert("decision".to_owned(), d.codes());
    let patch = if d.patch.is_empty() {
        None
    } else {
        let bytes = serde_json::to_vec(&d.patch).map_err(|e| AnswerError(e.to_string()))?;
        Some(base64::engine::general_purpose::STANDARD.encode(bytes))
    };
    Ok(Answer {
        types: response.types.clone(),
        response: WireResponse {
            response,
            patch_type: patch.as_ref().map(|_| PatchType::JsonPatch),
            patch,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::{Code, Decision};
    use crate::patch::Op;
    use kube::core::admission::Operation;

    fn review(request: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})).unwrap()
    }

    fn pvc_request() -> Value {
        json!({"uid": "u-1", "kind": {"group": "", "version": "v1", "kind": "PersistentVolumeClaim"},
               "operation": "CREATE", "namespace": "vitess",
               "object": {"metadata": {"name": "p", "namespace": "vitess"}}})
    }

    fn namespace(r: &Request) -> &str {
        r.namespace.as_deref().unwrap_or("")
    }

    #[test]
    fn a_well_formed_review_is_read() {
        let r = parse(&review(pvc_request())).unwrap();
        assert_eq!(r.uid, "u-1");
        assert_eq!(Kind::of(&r.kind), Some(Kind::PersistentVolumeClaim));
        assert_eq!(r.operation, Operation::Create);
        assert_eq!(namespace(&r), "vitess");
        assert!(!r.dry_run);
        let mut pod = pvc_request();
        pod["kind"] = json!({"version": "v1", "kind": "Pod"});
        pod["dryRun"] = json!(true);
        pod["object"]["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("namespace");
        let r = parse(&review(pod)).unwrap();
        assert_eq!((Kind::of(&r.kind), r.dry_run), (Some(Kind::Pod), true));
        let mut other = pvc_request();
        other["kind"] = json!({"group": "apps", "version": "v1", "kind": "Deployment"});
        assert_eq!(Kind::of(&parse(&review(other)).unwrap().kind), None);
    }

    #[test]
    fn what_the_api_servers_types_leave_at_zero_is_read_as_zero() {
        // kube's types require `userInfo` and `resource`; the API (Go) reads their absence,
        // and a null, as empty.
        let mut r = pvc_request();
        r["kind"]["group"] = Value::Null;
        r["dryRun"] = Value::Null;
        r["userInfo"] = Value::Null;
        r["resource"] = json!({"resource": "persistentvolumeclaims"});
        let got = parse(&review(r)).unwrap();
        assert_eq!(Kind::of(&got.kind), Some(Kind::PersistentVolumeClaim));
        assert!(!got.dry_run);
        assert_eq!(got.resource.resource, "persistentvolumeclaims");
        let full = json!({"uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "userInfo": {"username": "system:serviceaccount:vitess:vitess-operator", "groups": ["system:serviceaccounts"]},
            "operation": "CREATE", "namespace": "n", "object": {"metadata": {"name": "p"}},
            "oldObject": null, "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}});
        let got = parse(&review(full)).unwrap();
        assert_eq!(got.object.unwrap().metadata.name.as_deref(), Some("p"));
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
    fn what_kubes_types_cannot_read_is_refused_by_its_path() {
        let mut r = pvc_request();
        r["operation"] = json!("PATCH\u{1b}[2J");
        assert_eq!(
            parse(&review(r)).unwrap_err().to_string(),
            "request.operation is \"PATCH\\u{1b}[2J\", expected CREATE, UPDATE, DELETE or CONNECT"
        );
        let mut r = pvc_request();
        r["userInfo"] = json!({"groups": "x"});
        let e = parse(&review(r)).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("request.userInfo.groups: invalid type"),
            "{e}"
        );
        let mut r = pvc_request();
        r["object"]["metadata"]["labels"] = json!({"a": ["\u{1b}[2J"]});
        let e = parse(&review(r)).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("request.object.metadata.labels.a: "),
            "{e}"
        );
        assert!(!e.to_string().chars().any(char::is_control), "{e}");
    }

    #[test]
    fn the_response_carries_the_patch_in_base64_and_the_codes() {
        let req = parse(&review(pvc_request())).unwrap();
        let mut d = Decision::note(Code::RestoredFromSnapshot, "s1");
        d.patch.push(Op::Add {
            path: "/spec/dataSourceRef".into(),
            value: json!({"name": "s1"}),
        });
        let r = serde_json::to_value(respond(&req, &d).unwrap()).unwrap();
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
        let mut other = pvc_request();
        other["uid"] = json!("u-2");
        let req = parse(&review(other)).unwrap();
        let answer = respond(&req, &Decision::note(Code::NotVtsnaps, "x")).unwrap();
        let none = serde_json::to_value(&answer).unwrap();
        assert!(none["response"].get("patch").is_none());
        assert!(none["response"].get("patchType").is_none());
        assert_eq!(answer.response().uid, "u-2");
        assert_eq!(
            serde_json::from_str::<Value>(&answer.to_json().unwrap()).unwrap(),
            none
        );
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
            assert_eq!(namespace(&r), "a");
        }
        assert_eq!(namespace(&pod(json!({"namespace": "a"})).unwrap()), "a");
        // Not a creation of a kind vtsnap changes: the namespace is not required.
        let r = pod(json!({"operation": "DELETE", "object": null})).unwrap();
        assert_eq!(namespace(&r), "");
    }
}
