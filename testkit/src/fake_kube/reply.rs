//! Answers in the API's shape: a JSON body, or a `Status` with the reason a code means.

use std::convert::Infallible;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Full, combinators::UnsyncBoxBody};
use serde_json::{Value, json};

use super::request::RequestInfo;
use super::store::Key;

pub type FakeBody = UnsyncBoxBody<Bytes, Infallible>;

pub(super) struct Reply {
    pub(super) status: u16,
    pub(super) body: FakeBody,
    /// `Retry-After` in seconds (a throttled request).
    pub(super) retry_after: Option<u32>,
}

pub(super) fn json_reply(status: u16, v: &Value) -> Reply {
    let bytes = serde_json::to_vec(v).unwrap_or_default();
    Reply {
        status,
        body: Full::new(Bytes::from(bytes)).boxed_unsync(),
        retry_after: None,
    }
}

pub(super) fn err(code: u16, reason: &str, message: impl Into<String>) -> Reply {
    json_reply(code, &status_body(code, reason, &message.into()))
}

pub(super) fn not_found(info: &RequestInfo, key: &Key) -> Reply {
    err(
        404,
        "NotFound",
        format!("{} {:?} not found", info.plural, key.name),
    )
}

/// The answer to a write the API server's validation refuses, naming each field.
pub(super) fn invalid(info: &RequestInfo, key: &Key, errors: &[String]) -> Reply {
    err(
        422,
        "Invalid",
        format!(
            "{}.{} {:?} is invalid: [{}]",
            info.plural,
            info.group,
            key.name,
            errors.join(", ")
        ),
    )
}

/// The answer to a write that names a resourceVersion other than the stored one.
pub(super) fn stale(rv: &str) -> Reply {
    err(
        409,
        "Conflict",
        format!("the object has been modified; resourceVersion {rv} is stale"),
    )
}

fn status_body(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "code": code})
}

pub(super) fn reason_of(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        409 => "Conflict",
        410 => "Expired",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "Unknown",
    }
}

pub(super) fn respond(r: Reply) -> Response<FakeBody> {
    let mut resp = Response::new(r.body);
    *resp.status_mut() =
        StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    if let Some(secs) = r.retry_after {
        resp.headers_mut()
            .insert(http::header::RETRY_AFTER, http::HeaderValue::from(secs));
    }
    resp
}
