//! `FakeKube`: a stateful, in-memory Kubernetes API server for tests, because no real API
//! server can run here. It is a `tower::Service` that a real `kube::Client` talks to, so
//! the code under test is the production code.
//!
//! What it does, per the API conventions: objects of any kind (core and custom, stored as
//! JSON, keyed by group/plural/namespace/name); resourceVersion on every write and 409 on
//! a stale update or a duplicate create; 404; label and field selectors; merge, strategic
//! (treated as merge) and JSON patch; the `status` subresource (the main resource keeps
//! its status, `/status` changes only status); paginated LIST with continue tokens; watch
//! streams from a resourceVersion; finalizers and deletionTimestamp; generateName.
//!
//! Where it differs from a real kube-apiserver (found by running the same code against
//! the real control plane of `make cluster-up`; the real-API tier in `e2e/suite` covers
//! each of these for real), kept because the fake exists for fault injection and for
//! situations a real server will not produce:
//! - a create keeps `metadata.creationTimestamp`, `deletionTimestamp` and `status` as sent
//!   (a real server sets the first, refuses to set the second and drops `status` of kinds
//!   with a status subresource), so tests can lay out snapshots of any age and terminating
//!   Pods; on a real server ages are real and status is the controllers' to write;
//! - no garbage collector (ownerReferences never cascade), no admission, no defaulting,
//!   and no schema validation of custom resources (a VolumeSnapshot without a source is
//!   accepted);
//! - strategic-merge and apply patches are applied as merge patches;
//! - a paginated LIST reads live state page by page (a real server serves every page from
//!   the snapshot of the first page's resourceVersion);
//! - PVCs are Bound and Pods Ready because the fixture says so; nothing provisions, binds
//!   or schedules, and no controller throttles (the real snapshot-controller does, at 5
//!   requests/s by default).
//!
//! Fault injection: [`Fault`] rules fail or delay the n-th request matching a predicate
//! with any status code, or drop the connection; [`FakeKube::set_down`] makes every request
//! fail as if the server were unreachable, and ends every open watch;
//! [`FakeKube::drop_watches`] ends the open watches alone (a server restart or a load
//! balancer cutting long requests). A watch whose reader falls too far behind is ended
//! too, as a real server ends a slow watcher, so clients must re-list. Every request is
//! logged for assertions.

mod http_front;
mod selector;

pub use http_front::HttpFront;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody, combinators::UnsyncBoxBody};
use kube::Resource;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::broadcast;

pub use selector::{FieldSelector, LabelSelector};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub type FakeBody = UnsyncBoxBody<Bytes, Infallible>;

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
    /// The program that sent it, for a client made by [`FakeKube::client_as`].
    pub client: Option<String>,
}

/// The header [`FakeKube::client_as`]'s clients name themselves with.
const CLIENT_HEADER: &str = "x-vtsnap-test-client";

/// One logged request and the status it got.
#[derive(Debug, Clone)]
pub struct Logged {
    pub info: RequestInfo,
    pub status: u16,
}

/// What an armed fault does.
#[derive(Debug, Clone, Copy)]
pub enum FaultAction {
    /// Answer with this HTTP status and a Status body.
    Status(u16),
    /// Wait, then handle the request normally.
    Delay(Duration),
    /// Wait, then answer with this status.
    DelayThenStatus(Duration, u16),
    /// Fail as a broken connection would.
    Drop,
}

type Predicate = Arc<dyn Fn(&RequestInfo) -> bool + Send + Sync>;

/// A fault rule: fires on matches number `nth` (1-based) through `nth + times - 1`.
#[derive(Clone)]
pub struct Fault {
    when: Predicate,
    nth: u32,
    times: u32,
    action: FaultAction,
    seen: u32,
    /// Changes the world when the rule fires, before the request is handled (a write
    /// from someone else that lands between two of the program's calls: a stale read).
    change: Option<Change>,
}

type Change = Arc<dyn Fn(&FakeKube) + Send + Sync>;
type Observer = Arc<dyn Fn(&RequestInfo, &FakeKube) + Send + Sync>;

impl std::fmt::Debug for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fault")
            .field("nth", &self.nth)
            .field("times", &self.times)
            .field("action", &self.action)
            .finish()
    }
}

impl Fault {
    /// A rule for requests matching `when`; by default it fires once, on the first match.
    pub fn on(when: impl Fn(&RequestInfo) -> bool + Send + Sync + 'static) -> Self {
        Self {
            when: Arc::new(when),
            nth: 1,
            times: 1,
            action: FaultAction::Status(500),
            seen: 0,
            change: None,
        }
    }

    /// When the rule fires, first runs `change` on the fake's objects, then handles the
    /// request normally (unless another action is set after this).
    pub fn then_change(mut self, change: impl Fn(&FakeKube) + Send + Sync + 'static) -> Self {
        self.change = Some(Arc::new(change));
        self.action = FaultAction::Delay(Duration::ZERO);
        self
    }

    pub fn nth(mut self, n: u32) -> Self {
        self.nth = n.max(1);
        self
    }

    pub fn times(mut self, n: u32) -> Self {
        self.times = n;
        self
    }

    pub fn always(mut self) -> Self {
        self.times = u32::MAX;
        self
    }

    pub fn status(mut self, code: u16) -> Self {
        self.action = FaultAction::Status(code);
        self
    }

    pub fn delay(mut self, d: Duration) -> Self {
        self.action = FaultAction::Delay(d);
        self
    }

    pub fn action(mut self, a: FaultAction) -> Self {
        self.action = a;
        self
    }

    pub fn drop_connection(mut self) -> Self {
        self.action = FaultAction::Drop;
        self
    }
}

/// Matches any request of this verb on this plural.
pub fn is(
    verb: Verb,
    plural: &'static str,
) -> impl Fn(&RequestInfo) -> bool + Send + Sync + 'static {
    move |r| r.verb == verb && r.plural == plural
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Key {
    group: String,
    plural: String,
    namespace: String,
    name: String,
}

#[derive(Debug, Clone)]
struct Event {
    rv: u64,
    group: String,
    plural: String,
    namespace: String,
    kind: &'static str,
    object: Value,
}

#[derive(Default)]
struct State {
    rv: u64,
    uid: u64,
    objects: BTreeMap<Key, Value>,
    history: Vec<Event>,
    faults: Vec<Fault>,
    /// Run on every matching request, before faults (see [`FakeKube::observe`]).
    observers: Vec<(Predicate, Observer)>,
    log: Vec<Logged>,
    down: bool,
}

struct Inner {
    state: Mutex<State>,
    events: broadcast::Sender<Event>,
    /// Bumped by [`FakeKube::drop_watches`]: every watch stream open then ends.
    watch_epoch: tokio::sync::watch::Sender<u64>,
}

/// The fake API server. Cheap to clone; clones share state.
#[derive(Clone)]
pub struct FakeKube {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for FakeKube {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FakeKube")
    }
}

impl Default for FakeKube {
    fn default() -> Self {
        Self::new()
    }
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn status_body(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "code": code})
}

/// RFC 7386 JSON merge patch.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    if let Value::Object(p) = patch {
        if !target.is_object() {
            *target = json!({});
        }
        if let Value::Object(t) = target {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
    } else {
        *target = patch.clone();
    }
}

struct Reply {
    status: u16,
    body: FakeBody,
}

fn json_reply(status: u16, v: &Value) -> Reply {
    let bytes = serde_json::to_vec(v).unwrap_or_default();
    Reply {
        status,
        body: Full::new(Bytes::from(bytes)).boxed_unsync(),
    }
}

fn err(code: u16, reason: &str, message: impl Into<String>) -> Reply {
    json_reply(code, &status_body(code, reason, &message.into()))
}

fn reason_of(code: u16) -> &'static str {
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

impl FakeKube {
    pub fn new() -> Self {
        let (events, _) = broadcast::channel(4096);
        Self {
            inner: Arc::new(Inner {
                state: Mutex::new(State::default()),
                events,
                watch_epoch: tokio::sync::watch::Sender::new(0),
            }),
        }
    }

    /// A real `kube::Client` whose requests this fake answers.
    pub fn client(&self) -> kube::Client {
        kube::Client::new(self.service(), "default")
    }

    /// As [`Self::client`], its requests logged as `program`'s (see `crate::rbac`).
    pub fn client_as(&self, program: &str) -> kube::Client {
        let service = FakeKubeService {
            inner: self.inner.clone(),
            client: Some(Arc::from(program)),
        };
        kube::Client::new(service, "default")
    }

    pub fn service(&self) -> FakeKubeService {
        FakeKubeService {
            inner: self.inner.clone(),
            client: None,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Arms a fault rule.
    pub fn fault(&self, f: Fault) {
        self.state().faults.push(f);
    }

    /// Calls `f` with every request matching `when` and the objects as they are at that
    /// moment, before any fault or handling (to check an invariant at each write).
    pub fn observe(
        &self,
        when: impl Fn(&RequestInfo) -> bool + Send + Sync + 'static,
        f: impl Fn(&RequestInfo, &FakeKube) + Send + Sync + 'static,
    ) {
        self.state().observers.push((Arc::new(when), Arc::new(f)));
    }

    pub fn clear_faults(&self) {
        self.state().faults.clear();
    }

    /// Ends every watch stream open now, as a dropped connection or an API server restart
    /// would; the clients' next watch requests go through the fault rules as usual.
    pub fn drop_watches(&self) {
        self.inner.watch_epoch.send_modify(|e| *e += 1);
    }

    /// With `down`, every request fails like an unreachable server, and the watches open
    /// now end (an unreachable server has no open connections).
    pub fn set_down(&self, down: bool) {
        self.state().down = down;
        if down {
            self.drop_watches();
        }
    }

    /// Every request so far.
    pub fn log(&self) -> Vec<Logged> {
        self.state().log.clone()
    }

    /// The successful writes so far, as `VERB plural ns/name`.
    pub fn writes(&self) -> Vec<String> {
        self.state()
            .log
            .iter()
            .filter(|l| l.info.verb.is_write() && l.status < 300)
            .map(|l| {
                format!(
                    "{:?} {} {}/{}",
                    l.info.verb,
                    l.info.plural,
                    l.info.namespace.clone().unwrap_or_default(),
                    l.info.name.clone().unwrap_or_default()
                )
            })
            .collect()
    }

    /// Stores a typed object directly (no request, no fault, not logged).
    pub fn put<K>(&self, obj: &K) -> Value
    where
        K: Resource<DynamicType = ()> + Serialize,
    {
        let v = serde_json::to_value(obj).unwrap_or(Value::Null);
        self.put_json(&K::group(&()), &K::plural(&()), v)
    }

    /// Stores a JSON object of group/plural directly.
    pub fn put_json(&self, group: &str, plural: &str, mut v: Value) -> Value {
        let ns = v
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let name = v
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let mut st = self.state();
        let key = Key {
            group: group.into(),
            plural: plural.into(),
            namespace: ns.clone(),
            name,
        };
        let existed = st.objects.contains_key(&key);
        Self::stamp(&mut st, &mut v, !existed);
        st.objects.insert(key, v.clone());
        let kind = if existed { "MODIFIED" } else { "ADDED" };
        self.emit(&mut st, group, plural, &ns, kind, v.clone());
        v
    }

    /// Stores `v` only if the stored object still has `v`'s resourceVersion (atomic
    /// compare-and-swap, as a controller's update would be). Returns whether it stored.
    pub fn compare_and_put(&self, group: &str, plural: &str, mut v: Value) -> bool {
        let ns = v
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let name = v
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let key = Key {
            group: group.into(),
            plural: plural.into(),
            namespace: ns.clone(),
            name,
        };
        let mut st = self.state();
        let Some(current) = st.objects.get(&key) else {
            return false;
        };
        if current.pointer("/metadata/resourceVersion") != v.pointer("/metadata/resourceVersion") {
            return false;
        }
        Self::stamp(&mut st, &mut v, false);
        st.objects.insert(key, v.clone());
        self.emit(&mut st, group, plural, &ns, "MODIFIED", v);
        true
    }

    /// Replaces only the `status` of an object, atomically (what a controller's status
    /// subresource write does). Returns false if the object is gone.
    pub fn set_status(
        &self,
        group: &str,
        plural: &str,
        namespace: &str,
        name: &str,
        status: Value,
    ) -> bool {
        let key = Key {
            group: group.into(),
            plural: plural.into(),
            namespace: namespace.into(),
            name: name.into(),
        };
        let mut st = self.state();
        let Some(mut obj) = st.objects.get(&key).cloned() else {
            return false;
        };
        obj["status"] = status;
        Self::stamp(&mut st, &mut obj, false);
        st.objects.insert(key, obj.clone());
        self.emit(&mut st, group, plural, namespace, "MODIFIED", obj);
        true
    }

    /// Reads an object as JSON.
    pub fn get_json(
        &self,
        group: &str,
        plural: &str,
        namespace: &str,
        name: &str,
    ) -> Option<Value> {
        let key = Key {
            group: group.into(),
            plural: plural.into(),
            namespace: namespace.into(),
            name: name.into(),
        };
        self.state().objects.get(&key).cloned()
    }

    /// Reads a typed object.
    pub fn get<K>(&self, namespace: &str, name: &str) -> Option<K>
    where
        K: Resource<DynamicType = ()> + serde::de::DeserializeOwned,
    {
        let v = self.get_json(&K::group(&()), &K::plural(&()), namespace, name)?;
        serde_json::from_value(v).ok()
    }

    /// Every object of group/plural, sorted by namespace and name.
    pub fn list_json(&self, group: &str, plural: &str) -> Vec<Value> {
        self.state()
            .objects
            .iter()
            .filter(|(k, _)| k.group == group && k.plural == plural)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// Removes an object directly (no finalizers, not logged).
    pub fn remove(&self, group: &str, plural: &str, namespace: &str, name: &str) -> Option<Value> {
        let key = Key {
            group: group.into(),
            plural: plural.into(),
            namespace: namespace.into(),
            name: name.into(),
        };
        let mut st = self.state();
        let v = st.objects.remove(&key)?;
        st.rv += 1;
        self.emit(&mut st, group, plural, namespace, "DELETED", v.clone());
        Some(v)
    }

    fn stamp(st: &mut State, v: &mut Value, created: bool) {
        st.rv += 1;
        let rv = st.rv.to_string();
        if created {
            st.uid += 1;
            // A UID or timestamp the caller set (a fixture) is kept; the server fills the rest.
            if v.pointer("/metadata/uid").and_then(Value::as_str).is_none() {
                let uid = format!("00000000-0000-4000-8000-{:012x}", st.uid);
                merge_patch(v, &json!({"metadata": {"uid": uid}}));
            }
            if v.pointer("/metadata/creationTimestamp")
                .and_then(Value::as_str)
                .is_none()
            {
                merge_patch(v, &json!({"metadata": {"creationTimestamp": now()}}));
            }
            merge_patch(v, &json!({"metadata": {"generation": 1}}));
        }
        merge_patch(v, &json!({"metadata": {"resourceVersion": rv}}));
    }

    fn emit(
        &self,
        st: &mut State,
        group: &str,
        plural: &str,
        ns: &str,
        kind: &'static str,
        object: Value,
    ) {
        let ev = Event {
            rv: st.rv,
            group: group.into(),
            plural: plural.into(),
            namespace: ns.into(),
            kind,
            object,
        };
        st.history.push(ev.clone());
        let _ = self.inner.events.send(ev);
    }

    async fn handle(
        &self,
        req: Request<kube::client::Body>,
    ) -> Result<Response<FakeBody>, BoxError> {
        let (parts, body) = req.into_parts();
        let query: BTreeMap<String, String> = parts
            .uri
            .query()
            .map(|q| {
                q.split('&')
                    .map(|kv| {
                        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                        (decode(k), decode(v))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let Some(ApiPath {
            group,
            plural,
            namespace,
            name,
            subresource,
        }) = parse_path(parts.uri.path())
        else {
            let r = err(
                404,
                "NotFound",
                format!("no such path {}", parts.uri.path()),
            );
            return Ok(respond(r));
        };
        let watch = query.get("watch").is_some_and(|w| w == "true" || w == "1");
        let verb = match (&parts.method, name.is_some()) {
            (&Method::GET, true) => Verb::Get,
            (&Method::GET, false) if watch => Verb::Watch,
            (&Method::GET, false) => Verb::List,
            (&Method::POST, _) => Verb::Create,
            (&Method::PUT, _) => Verb::Update,
            (&Method::PATCH, _) => Verb::Patch,
            (&Method::DELETE, true) => Verb::Delete,
            (&Method::DELETE, false) => Verb::DeleteCollection,
            _ => Verb::Get,
        };
        let info = RequestInfo {
            verb,
            method: parts.method.clone(),
            group,
            plural,
            namespace,
            name,
            subresource,
            query,
            content_type: parts
                .headers
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            client: parts
                .headers
                .get(CLIENT_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
        };

        let observers: Vec<Observer> = self
            .state()
            .observers
            .iter()
            .filter(|(when, _)| when(&info))
            .map(|(_, f)| f.clone())
            .collect();
        for f in observers {
            f(
                &info,
                &FakeKube {
                    inner: self.inner.clone(),
                },
            );
        }
        // Faults and outages come before anything else.
        let action = {
            let mut st = self.state();
            if st.down {
                st.log.push(Logged {
                    info: info.clone(),
                    status: 0,
                });
                return Err("fake API server is down: connection refused".into());
            }
            let mut fire = None;
            for f in &mut st.faults {
                if (f.when)(&info) {
                    f.seen += 1;
                    if fire.is_none()
                        && f.seen >= f.nth
                        && u64::from(f.seen) < u64::from(f.nth) + u64::from(f.times)
                    {
                        fire = Some((f.action, f.change.clone()));
                    }
                }
            }
            fire
        };
        // A change runs without the state lock held (it takes it itself).
        let action = action.map(|(a, change)| {
            if let Some(c) = change {
                c(&FakeKube {
                    inner: self.inner.clone(),
                });
            }
            a
        });
        match action {
            Some(FaultAction::Drop) => {
                self.state().log.push(Logged { info, status: 0 });
                return Err("fake API server dropped the connection".into());
            }
            Some(FaultAction::Status(code)) => {
                self.state().log.push(Logged { info, status: code });
                return Ok(respond(err(
                    code,
                    reason_of(code),
                    format!("injected fault {code}"),
                )));
            }
            Some(FaultAction::DelayThenStatus(d, code)) => {
                tokio::time::sleep(d).await;
                self.state().log.push(Logged { info, status: code });
                return Ok(respond(err(
                    code,
                    reason_of(code),
                    format!("injected fault {code}"),
                )));
            }
            Some(FaultAction::Delay(d)) => tokio::time::sleep(d).await,
            None => {}
        }

        let body = body
            .collect_bytes()
            .await
            .map_err(|e| -> BoxError { Box::new(e) })?;
        let mut info = info;
        let reply = if info.verb == Verb::Watch {
            self.watch(&info)
        } else {
            let body: Value = if body.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice(&body).unwrap_or(Value::Null)
            };
            if info.verb == Verb::Create && info.name.is_none() {
                info.name = body
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
            }
            self.serve(&info, body)
        };
        self.state().log.push(Logged {
            info,
            status: reply.status,
        });
        Ok(respond(reply))
    }

    fn key(info: &RequestInfo) -> Key {
        Key {
            group: info.group.clone(),
            plural: info.plural.clone(),
            namespace: info.namespace.clone().unwrap_or_default(),
            name: info.name.clone().unwrap_or_default(),
        }
    }

    fn serve(&self, info: &RequestInfo, body: Value) -> Reply {
        let mut st = self.state();
        let key = Self::key(info);
        let not_found = || {
            err(
                404,
                "NotFound",
                format!("{} {:?} not found", info.plural, key.name),
            )
        };
        match info.verb {
            Verb::Get => st
                .objects
                .get(&key)
                .map(|o| json_reply(200, o))
                .unwrap_or_else(not_found),
            Verb::List => self.list(&st, info),
            Verb::Create => {
                let mut obj = body;
                let mut key = key;
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
                Self::stamp(&mut st, &mut obj, true);
                st.objects.insert(key.clone(), obj.clone());
                self.emit(
                    &mut st,
                    &key.group,
                    &key.plural,
                    &key.namespace,
                    "ADDED",
                    obj.clone(),
                );
                json_reply(201, &obj)
            }
            Verb::Update | Verb::Patch => {
                let Some(current) = st.objects.get(&key).cloned() else {
                    return not_found();
                };
                let mut new = current.clone();
                if info.verb == Verb::Update {
                    let sent_rv = body
                        .pointer("/metadata/resourceVersion")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    if !sent_rv.is_empty()
                        && Some(sent_rv)
                            != current
                                .pointer("/metadata/resourceVersion")
                                .and_then(Value::as_str)
                    {
                        return err(
                            409,
                            "Conflict",
                            format!(
                                "the object has been modified; resourceVersion {sent_rv} is stale"
                            ),
                        );
                    }
                    new = body;
                } else {
                    let ct = info.content_type.as_deref().unwrap_or("");
                    if ct.starts_with("application/json-patch+json") {
                        let patch: json_patch::Patch = match serde_json::from_value(body) {
                            Ok(p) => p,
                            Err(e) => {
                                return err(400, "BadRequest", format!("bad JSON patch: {e}"));
                            }
                        };
                        if let Err(e) = json_patch::patch(&mut new, &patch) {
                            return err(422, "Invalid", format!("JSON patch failed: {e}"));
                        }
                    } else {
                        if let Some(rv) = body
                            .pointer("/metadata/resourceVersion")
                            .and_then(Value::as_str)
                            && Some(rv)
                                != current
                                    .pointer("/metadata/resourceVersion")
                                    .and_then(Value::as_str)
                        {
                            return err(
                                409,
                                "Conflict",
                                format!(
                                    "the object has been modified; resourceVersion {rv} is stale"
                                ),
                            );
                        }
                        merge_patch(&mut new, &body);
                    }
                }
                // The status subresource: each side keeps the other's part.
                let status_only = info.subresource.as_deref() == Some("status");
                let mut merged = if status_only {
                    current.clone()
                } else {
                    new.clone()
                };
                let status = if status_only {
                    new.get("status").cloned()
                } else {
                    current.get("status").cloned()
                };
                if let Some(o) = merged.as_object_mut() {
                    match status {
                        Some(s) => {
                            o.insert("status".into(), s);
                        }
                        None => {
                            o.remove("status");
                        }
                    }
                }
                // Identity and bookkeeping are the server's.
                for f in [
                    "uid",
                    "creationTimestamp",
                    "name",
                    "namespace",
                    "deletionTimestamp",
                ] {
                    let ptr = format!("/metadata/{f}");
                    if let (Some(old), Some(m)) = (
                        current.pointer(&ptr).cloned(),
                        merged.get_mut("metadata").and_then(Value::as_object_mut),
                    ) {
                        m.insert(f.into(), old);
                    }
                }
                if !status_only && current.get("spec") != merged.get("spec") {
                    let g = current
                        .pointer("/metadata/generation")
                        .and_then(Value::as_i64)
                        .unwrap_or(1)
                        + 1;
                    merge_patch(&mut merged, &json!({"metadata": {"generation": g}}));
                }
                Self::stamp(&mut st, &mut merged, false);
                let finalizers_gone = merged
                    .pointer("/metadata/finalizers")
                    .and_then(Value::as_array)
                    .is_none_or(Vec::is_empty);
                if merged.pointer("/metadata/deletionTimestamp").is_some() && finalizers_gone {
                    st.objects.remove(&key);
                    self.emit(
                        &mut st,
                        &key.group,
                        &key.plural,
                        &key.namespace,
                        "DELETED",
                        merged.clone(),
                    );
                } else {
                    st.objects.insert(key.clone(), merged.clone());
                    self.emit(
                        &mut st,
                        &key.group,
                        &key.plural,
                        &key.namespace,
                        "MODIFIED",
                        merged.clone(),
                    );
                }
                json_reply(200, &merged)
            }
            Verb::Delete => {
                let Some(current) = st.objects.get(&key).cloned() else {
                    return not_found();
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
                self.delete(&mut st, &key, current)
            }
            Verb::DeleteCollection => {
                let sel = match LabelSelector::parse(
                    info.query
                        .get("labelSelector")
                        .map(String::as_str)
                        .unwrap_or(""),
                ) {
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
                    self.delete(&mut st, &k, v);
                }
                json_reply(
                    200,
                    &json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "metadata": {}}),
                )
            }
            Verb::Watch => err(500, "InternalError", "watch is served elsewhere"),
        }
    }

    fn delete(&self, st: &mut State, key: &Key, mut current: Value) -> Reply {
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
                self.emit(
                    st,
                    &key.group,
                    &key.plural,
                    &key.namespace,
                    "MODIFIED",
                    current.clone(),
                );
            }
            return json_reply(200, &current);
        }
        st.objects.remove(key);
        st.rv += 1;
        self.emit(
            st,
            &key.group,
            &key.plural,
            &key.namespace,
            "DELETED",
            current.clone(),
        );
        json_reply(200, &current)
    }

    fn list(&self, st: &State, info: &RequestInfo) -> Reply {
        let labels = match LabelSelector::parse(
            info.query
                .get("labelSelector")
                .map(String::as_str)
                .unwrap_or(""),
        ) {
            Ok(s) => s,
            Err(e) => return err(400, "BadRequest", e),
        };
        let fields = match FieldSelector::parse(
            info.query
                .get("fieldSelector")
                .map(String::as_str)
                .unwrap_or(""),
        ) {
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
                next = items.last().map(|last: &Value| {
                    let ns = last
                        .pointer("/metadata/namespace")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    let n = last
                        .pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    encode_token(ns, n)
                });
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

    fn watch(&self, info: &RequestInfo) -> Reply {
        let labels = LabelSelector::parse(
            info.query
                .get("labelSelector")
                .map(String::as_str)
                .unwrap_or(""),
        )
        .unwrap_or_default();
        let fields = FieldSelector::parse(
            info.query
                .get("fieldSelector")
                .map(String::as_str)
                .unwrap_or(""),
        )
        .unwrap_or_default();
        let timeout = Duration::from_secs(
            info.query
                .get("timeoutSeconds")
                .and_then(|t| t.parse().ok())
                .unwrap_or(290),
        );
        let (group, plural, ns) = (
            info.group.clone(),
            info.plural.clone(),
            info.namespace.clone(),
        );
        let matches = move |e: &Event| {
            e.group == group
                && e.plural == plural
                && ns.as_ref().is_none_or(|n| *n == e.namespace)
                && labels.matches(&e.object)
                && fields.matches(&e.object)
        };
        let mut rx = self.inner.events.subscribe();
        let mut epoch = self.inner.watch_epoch.subscribe();
        epoch.mark_unchanged();
        let st = self.state();
        let start: Option<u64> = info
            .query
            .get("resourceVersion")
            .and_then(|r| r.parse().ok())
            .filter(|r| *r > 0);
        let backlog: Vec<Event> = match start {
            Some(rv) => st
                .history
                .iter()
                .filter(|e| e.rv > rv && matches(e))
                .cloned()
                .collect(),
            None => st
                .objects
                .iter()
                .map(|(k, v)| Event {
                    rv: st.rv,
                    group: k.group.clone(),
                    plural: k.plural.clone(),
                    namespace: k.namespace.clone(),
                    kind: "ADDED",
                    object: v.clone(),
                })
                .filter(|e| matches(e))
                .collect(),
        };
        let seen = st.rv;
        drop(st);
        let line =
            |e: &Event| Bytes::from(format!("{}\n", json!({"type": e.kind, "object": e.object})));
        let first: Vec<Bytes> = backlog.iter().map(line).collect();
        let live = async_stream(move |tx| async move {
            let deadline = tokio::time::sleep(timeout);
            tokio::pin!(deadline);
            loop {
                tokio::select! {
                    // Ending first: a write made after `drop_watches` returned never
                    // reaches a stream it ended, though both are ready when it next runs.
                    biased;
                    _ = epoch.changed() => return,
                    () = &mut deadline => return,
                    ev = rx.recv() => match ev {
                        Ok(e) if e.rv > seen && matches(&e) => {
                            if tx.send(line(&e)).await.is_err() { return; }
                        }
                        Ok(_) => {}
                        // Events were lost to this watcher: end the stream (as a real server
                        // ends a watch it cannot serve) so that the client resumes or relists.
                        Err(broadcast::error::RecvError::Lagged(_)) => return,
                        Err(broadcast::error::RecvError::Closed) => return,
                    }
                }
            }
        });
        let stream = futures::stream::iter(first)
            .chain(live)
            .map(|b| Ok::<_, Infallible>(http_body::Frame::data(b)));
        Reply {
            status: 200,
            body: StreamBody::new(stream).boxed_unsync(),
        }
    }
}

/// A stream fed by a task; ends when the task returns.
fn async_stream<F, Fut>(f: F) -> impl futures::Stream<Item = Bytes> + Send + 'static
where
    F: FnOnce(tokio::sync::mpsc::Sender<Bytes>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(f(tx));
    tokio_stream::wrappers::ReceiverStream::new(rx)
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

fn respond(r: Reply) -> Response<FakeBody> {
    let mut resp = Response::new(r.body);
    *resp.status_mut() =
        StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    resp
}

/// The `tower::Service` side of [`FakeKube`].
#[derive(Clone)]
pub struct FakeKubeService {
    inner: Arc<Inner>,
    client: Option<Arc<str>>,
}

impl std::fmt::Debug for FakeKubeService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FakeKubeService")
    }
}

impl tower::Service<Request<kube::client::Body>> for FakeKubeService {
    type Response = Response<FakeBody>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: Request<kube::client::Body>) -> Self::Future {
        let fake = FakeKube {
            inner: self.inner.clone(),
        };
        if let Some(v) = self
            .client
            .as_deref()
            .and_then(|c| http::HeaderValue::from_str(c).ok())
        {
            req.headers_mut().insert(CLIENT_HEADER, v);
        }
        Box::pin(async move { fake.handle(req).await })
    }
}

#[cfg(test)]
mod tests;
