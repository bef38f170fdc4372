//! LIST: label and field selectors, and pages with `limit` and `continue` tokens.

use serde_json::{Value, json};

use super::reply::{Reply, err, json_reply};
use super::request::RequestInfo;
use super::selector::{FieldSelector, LabelSelector};
use super::store::State;

pub(super) fn list(st: &State, info: &RequestInfo) -> Reply {
    let labels = match LabelSelector::parse(info.param("labelSelector")) {
        Ok(s) => s,
        Err(e) => return err(400, "BadRequest", e),
    };
    let fields = match FieldSelector::parse(info.param("fieldSelector")) {
        Ok(s) => s,
        Err(e) => return err(400, "BadRequest", e),
    };
    let after = match info.query.get("continue").filter(|c| !c.is_empty()) {
        Some(c) => match decode_token(c) {
            Some(k) => Some(k),
            None => return err(400, "BadRequest", format!("invalid continue token {c:?}")),
        },
        None => None,
    };
    let limit: usize = info
        .query
        .get("limit")
        .and_then(|l| l.parse().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    let mut items = Vec::new();
    let mut next = None;
    for (k, v) in &st.objects {
        if k.group != info.group || k.plural != info.plural {
            continue;
        }
        if let Some(ns) = &info.namespace
            && &k.namespace != ns
        {
            continue;
        }
        if after
            .as_ref()
            .is_some_and(|a| (&k.namespace, &k.name) <= (&a.0, &a.1))
        {
            continue;
        }
        if !labels.matches(v) || !fields.matches(v) {
            continue;
        }
        if items.len() == limit {
            next = items.last().map(token_after);
            break;
        }
        items.push(v.clone());
    }
    let mut meta = json!({"resourceVersion": st.rv.to_string()});
    if let Some(c) = next {
        meta["continue"] = json!(c);
    }
    json_reply(
        200,
        &json!({"apiVersion": "v1", "kind": "List", "metadata": meta, "items": items}),
    )
}

/// The token of the page that starts after object `last`.
fn token_after(last: &Value) -> String {
    let meta = |f: &str| last.pointer(f).and_then(Value::as_str).unwrap_or("");
    encode_token(meta("/metadata/namespace"), meta("/metadata/name"))
}

fn encode_token(ns: &str, name: &str) -> String {
    format!("{ns}/{name}")
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn decode_token(t: &str) -> Option<(String, String)> {
    if !t.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..t.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(t.get(i..i + 2)?, 16).ok())
        .collect();
    let s = String::from_utf8(bytes?).ok()?;
    let (ns, name) = s.split_once('/')?;
    Some((ns.to_owned(), name.to_owned()))
}
