//! `FakeNodeHelper`: answers fence leases the way `vtsnap-node run` does, without cgroups,
//! mysqld or a node — for tests of the snapshot job and the GC, where the node's actions
//! are not what is under test (`node/tests` test the real helper), on the in-memory API
//! or on a real API server. It can be told to
//! refuse, to fail one request, or to be dead.
//!
//! Requests are answered in `vtsnap.io/node-state`; an expired lease is recovered as the
//! real helper does: StartReplication and ChangeTabletType back through vtctld, then the
//! lease is deleted.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::future::Future;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};
use vtsnap_core::fence::put_back::{TabletChanges, put_tablet_back};
use vtsnap_core::fence::{ANN_NODE_ERROR, ANN_NODE_STATE, Fence, LABEL_NODE, NodeState, Request};
use vtsnap_core::vtctld::VtctldClient;
use vtsnap_core::vtctld::client::CallLimits;

use crate::fake_kube::FakeKube;

/// Where the fake node reads and writes leases: the in-memory API directly (so that its
/// writes are not in the request log and meet no injected fault), or a real API server.
pub trait LeaseStore: Clone + Send + Sync + 'static {
    /// Every lease, as JSON.
    fn leases(&self) -> impl Future<Output = Vec<Value>> + Send;
    fn remove(&self, namespace: &str, name: &str) -> impl Future<Output = ()> + Send;
    /// Stores `v` only if it still has the stored resourceVersion; whether it did.
    fn compare_and_put(&self, v: Value) -> impl Future<Output = bool> + Send;
}

impl LeaseStore for FakeKube {
    async fn leases(&self) -> Vec<Value> {
        self.list_json("coordination.k8s.io", "leases")
    }
    async fn remove(&self, namespace: &str, name: &str) {
        FakeKube::remove(self, "coordination.k8s.io", "leases", namespace, name);
    }
    async fn compare_and_put(&self, v: Value) -> bool {
        FakeKube::compare_and_put(self, "coordination.k8s.io", "leases", v)
    }
}

/// The leases of a real API server (vtsnap's only, by label), through a client.
#[derive(Clone)]
pub struct ApiLeases(pub kube::Client);

impl std::fmt::Debug for ApiLeases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiLeases")
    }
}

impl LeaseStore for ApiLeases {
    async fn leases(&self) -> Vec<Value> {
        let api: Api<Lease> = Api::all(self.0.clone());
        let lp = ListParams::default().labels(&format!(
            "{}={}",
            vtsnap_core::labels::MANAGED_BY,
            vtsnap_core::labels::MANAGED_BY_VTSNAP
        ));
        match api.list(&lp).await {
            Ok(l) => l
                .items
                .into_iter()
                .filter_map(|l| serde_json::to_value(l).ok())
                .collect(),
            Err(_) => Vec::new(),
        }
    }
    async fn remove(&self, namespace: &str, name: &str) {
        let api: Api<Lease> = Api::namespaced(self.0.clone(), namespace);
        let _ = api.delete(name, &DeleteParams::default()).await;
    }
    async fn compare_and_put(&self, v: Value) -> bool {
        let Ok(lease) = serde_json::from_value::<Lease>(v) else {
            return false;
        };
        let (Some(ns), Some(name)) = (
            lease.metadata.namespace.clone(),
            lease.metadata.name.clone(),
        ) else {
            return false;
        };
        let api: Api<Lease> = Api::namespaced(self.0.clone(), &ns);
        // The object carries the resourceVersion it was read at: a replace is the swap.
        api.replace(&name, &PostParams::default(), &lease)
            .await
            .is_ok()
    }
}

/// How the fake node behaves.
#[derive(Debug, Clone, Default)]
pub struct NodeScript {
    /// Answer every request with `refused` and this error.
    pub refuse: Option<String>,
    /// Answer this request with `failed` and this error.
    pub fail: Option<(Request, String)>,
    /// Answer nothing at all (a dead helper).
    pub dead: bool,
    /// Die when this request arrives: answer neither it nor anything after.
    pub silent_from: Option<Request>,
}

#[derive(Debug, Default)]
struct Seen {
    requests: Vec<String>,
    recovered: Vec<String>,
    silent: bool,
}

/// The running fake; stops when dropped.
#[derive(Debug)]
pub struct FakeNodeHelper {
    script: Arc<Mutex<NodeScript>>,
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeNodeHelper {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn state_for(r: Request) -> NodeState {
    match r {
        Request::Probe => NodeState::Probed,
        Request::Stop => NodeState::Stopped,
        Request::Hold => NodeState::Held,
        Request::Fsfreeze => NodeState::Fsfrozen,
        Request::Release => NodeState::Released,
    }
}

impl FakeNodeHelper {
    /// Serves the leases labelled `vtsnap.io/node=<node>` in `kube` (every node's when `node`
    /// is empty), polling every `every`.
    pub fn start(kube: &FakeKube, node: &str, script: NodeScript, every: Duration) -> Self {
        Self::start_on(kube.clone(), node, script, every)
    }

    /// The same on any [`LeaseStore`], e.g. a real API server ([`ApiLeases`]).
    pub fn start_on<S: LeaseStore>(
        kube: S,
        node: &str,
        script: NodeScript,
        every: Duration,
    ) -> Self {
        let script = Arc::new(Mutex::new(script));
        let seen: Arc<Mutex<Seen>> = Arc::default();
        let (node, s, w) = (node.to_owned(), script.clone(), seen.clone());
        let task = tokio::spawn(async move {
            loop {
                let current = s.lock().map(|g| g.clone()).unwrap_or_default();
                for v in kube.leases().await {
                    let labelled = v
                        .pointer(&format!(
                            "/metadata/labels/{}",
                            LABEL_NODE.replace('/', "~1")
                        ))
                        .and_then(Value::as_str);
                    if current.dead || (!node.is_empty() && labelled != Some(node.as_str())) {
                        continue;
                    }
                    serve(&kube, &current, &w, v).await;
                }
                tokio::time::sleep(every).await;
            }
        });
        Self { script, seen, task }
    }

    pub fn set(&self, f: impl FnOnce(&mut NodeScript)) {
        if let Ok(mut g) = self.script.lock() {
            f(&mut g);
        }
    }

    /// The requests answered so far, in order, as `<lease> <request>` (each change once).
    pub fn requests(&self) -> Vec<String> {
        self.seen
            .lock()
            .map(|s| s.requests.clone())
            .unwrap_or_default()
    }

    /// Leases this fake recovered after they expired.
    pub fn recovered(&self) -> Vec<String> {
        self.seen
            .lock()
            .map(|s| s.recovered.clone())
            .unwrap_or_default()
    }
}

async fn serve<S: LeaseStore>(kube: &S, script: &NodeScript, seen: &Arc<Mutex<Seen>>, v: Value) {
    let Ok(lease) = serde_json::from_value::<Lease>(v.clone()) else {
        return;
    };
    let Ok(f) = Fence::from_lease(&lease) else {
        return;
    };
    if let Ok(mut s) = seen.lock() {
        if script.silent_from == Some(f.request) {
            s.silent = true;
        }
        if s.silent {
            return;
        }
    }
    let ns = f.namespace.clone();
    if f.expired(k8s_openapi::jiff::Timestamp::now()) {
        // The dead-man's switch, as the real helper does it.
        if let Ok(vt) = VtctldClient::new(
            &f.vtctld,
            CallLimits {
                read_attempts: 1,
                timeout: Duration::from_secs(5),
            },
        ) {
            let problems =
                put_tablet_back(&vt, &f.tablet_alias, f.original_type, TabletChanges::ALL).await;
            if problems.is_empty() {
                kube.remove(&ns, &f.name).await;
                if let Ok(mut s) = seen.lock() {
                    s.recovered.push(f.name.clone());
                }
            }
        }
        return;
    }
    let (state, error) = match (&script.refuse, &script.fail) {
        (Some(e), _) if f.request != Request::Release => (NodeState::Refused, e.clone()),
        (_, Some((r, e))) if *r == f.request => (NodeState::Failed, e.clone()),
        _ => (state_for(f.request), String::new()),
    };
    if f.node_state == Some(state) {
        return;
    }
    let mut v = v;
    v["metadata"]["annotations"][ANN_NODE_STATE] = json!(state.as_str());
    v["metadata"]["annotations"][ANN_NODE_ERROR] = json!(error);
    // Compare-and-swap: only if nobody wrote the lease since it was read.
    if kube.compare_and_put(v).await
        && let Ok(mut s) = seen.lock()
    {
        s.requests.push(format!("{} {}", f.name, f.request));
    }
}
