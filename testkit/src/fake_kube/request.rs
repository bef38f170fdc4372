//! What a request asks, read from its method, path, query and headers.

use std::collections::BTreeMap;

use http::Method;
use http::request::Parts;

/// What kind of request this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
    DeleteCollection,
}

impl Verb {
    pub fn is_write(self) -> bool {
        !matches!(self, Self::Get | Self::List | Self::Watch)
    }

    fn of(method: &Method, named: bool, watch: bool) -> Self {
        match (method, named) {
            (&Method::GET, true) => Self::Get,
            (&Method::GET, false) if watch => Self::Watch,
            (&Method::GET, false) => Self::List,
            (&Method::POST, _) => Self::Create,
            (&Method::PUT, _) => Self::Update,
            (&Method::PATCH, _) => Self::Patch,
            (&Method::DELETE, true) => Self::Delete,
            (&Method::DELETE, false) => Self::DeleteCollection,
            _ => Self::Get,
        }
    }
}

/// A request as the fake understood it; fault predicates look at this.
#[derive(Debug, Clone)]
pub struct RequestInfo {
    pub verb: Verb,
    pub method: Method,
    pub group: String,
    pub plural: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
    pub query: BTreeMap<String, String>,
    pub content_type: Option<String>,
    /// The program that sent it, for a client made by [`super::FakeKube::client_as`].
    pub client: Option<String>,
}

/// The header [`super::FakeKube::client_as`]'s clients name themselves with.
pub(super) const CLIENT_HEADER: &str = "x-vtsnap-test-client";

/// One logged request and the status it got.
#[derive(Debug, Clone)]
pub struct Logged {
    pub info: RequestInfo,
    pub status: u16,
}

impl RequestInfo {
    /// `None` if the path is not an API path.
    pub(super) fn read(parts: &Parts) -> Option<Self> {
        let query = parse_query(parts.uri.query());
        let ApiPath {
            group,
            plural,
            namespace,
            name,
            subresource,
        } = parse_path(parts.uri.path())?;
        let watch = query.get("watch").is_some_and(|w| w == "true" || w == "1");
        let header = |h: &str| {
            parts
                .headers
                .get(h)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        Some(Self {
            verb: Verb::of(&parts.method, name.is_some(), watch),
            method: parts.method.clone(),
            group,
            plural,
            namespace,
            name,
            subresource,
            query,
            content_type: header(http::header::CONTENT_TYPE.as_str()),
            client: header(CLIENT_HEADER),
        })
    }

    /// A query parameter, "" if absent.
    pub(super) fn param(&self, name: &str) -> &str {
        self.query.get(name).map_or("", String::as_str)
    }
}

fn parse_query(query: Option<&str>) -> BTreeMap<String, String> {
    query
        .map(|q| {
            q.split('&')
                .map(|kv| {
                    let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                    (decode(k), decode(v))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The parts of an API path: group, plural, namespace, name, subresource.
struct ApiPath {
    group: String,
    plural: String,
    namespace: Option<String>,
    name: Option<String>,
    subresource: Option<String>,
}

fn parse_path(path: &str) -> Option<ApiPath> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match segs.as_slice() {
        ["api", "v1", rest @ ..] => (String::new(), rest),
        ["apis", g, _v, rest @ ..] => ((*g).to_owned(), rest),
        _ => return None,
    };
    let s = |i: usize| rest.get(i).map(|x| (*x).to_owned());
    if rest.first() == Some(&"namespaces") && rest.len() >= 3 {
        Some(ApiPath {
            group,
            plural: rest[2].to_owned(),
            namespace: s(1),
            name: s(3),
            subresource: s(4),
        })
    } else {
        Some(ApiPath {
            group,
            plural: rest.first()?.to_string(),
            namespace: None,
            name: s(1),
            subresource: s(2),
        })
    }
}

/// Percent-decodes a query component (`+` is a space).
fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b[i], hex) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
