//! `FakeNodeHelper`: answers fence leases the way `vtsnap-node run` does, without cgroups,
//! mysqld or a node — for tests of the snapshot job and the GC, where the node's actions
//! are not what is under test (`node/tests` test the real helper), on the in-memory API
//! or on a real API server. It can be told to
//! refuse, to fail one request, or to be dead.
//!
//! What to do for a lease is decided by the real helper's pure decider
//! ([`vtsnap_node::daemon::decide::decide`]), from the lease and a simulated record of what
//! this fake "holds" for it; only the steps are simulated (no pod check, no mysqlctld, no
//! freezer), and the script turns a step into a refusal or a failure. Requests are answered
//! in `vtsnap.io/node-state`; an expired lease is recovered as the real helper does:
//! StartReplication and ChangeTabletType back through vtctld, then the lease is deleted. A
//! deleted lease's record is dropped without restoring the tablet (the job or the GC under
//! test does that; the real helper's put-back on deletion is tested in `node/tests`).

use std::collections::{BTreeMap, BTreeSet};
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
use vtsnap_node::cgroup::{Cgroup, Version};
use vtsnap_node::daemon::decide::{LeaseAfter, LeaseSeen, Step, TabletAfter, decide};
use vtsnap_node::daemon::metrics::Cause;
use vtsnap_node::daemon::registry::Entry;

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
    /// The simulated hold record of each lease served, by `namespace/name`, with the
    /// lease's UID (a lease deleted and created again starts afresh).
    held: BTreeMap<String, (Option<String>, Entry)>,
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
                let mut served = BTreeSet::new();
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
                    if let Some(key) = serve(&kube, &current, &w, v).await {
                        served.insert(key);
                    }
                }
                // The records of leases gone (or no longer this node's) are dropped.
                if let Ok(mut g) = w.lock() {
                    g.held.retain(|k, _| served.contains(k));
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

/// Serves one lease: the real decider's steps, simulated. The lease's key if it was served.
async fn serve<S: LeaseStore>(
    kube: &S,
    script: &NodeScript,
    seen: &Arc<Mutex<Seen>>,
    v: Value,
) -> Option<String> {
    let lease = serde_json::from_value::<Lease>(v.clone()).ok()?;
    let f = Fence::from_lease(&lease).ok()?;
    let key = f.key();
    let uid = lease.metadata.uid.clone();
    let mut entry = {
        let mut s = seen.lock().ok()?;
        if script.silent_from == Some(f.request) {
            s.silent = true;
        }
        if s.silent {
            return None;
        }
        s.held
            .get(&key)
            .filter(|(u, e)| *u == uid && e.pod_uid == f.target_pod_uid)
            .map(|(_, e)| e.clone())
    };
    let steps = decide(
        LeaseSeen::at(&f, k8s_openapi::jiff::Timestamp::now()),
        entry.as_ref(),
    );
    let mut answer = None;
    for step in steps {
        match step {
            Step::Release {
                cause,
                tablet,
                lease,
            } => {
                if cause == Cause::Request
                    && let Some(e) = failure(script, f.request)
                {
                    answer = Some(e);
                    break;
                }
                // Thawed, and mysqld started again: nothing is held any more.
                entry = None;
                if tablet == TabletAfter::PutBack && !put_back(&f).await {
                    break;
                }
                match lease {
                    LeaseAfter::Delete => {
                        // The dead-man's switch, as the real helper does it.
                        kube.remove(&f.namespace, &f.name).await;
                        if let Ok(mut s) = seen.lock() {
                            s.recovered.push(f.name.clone());
                        }
                    }
                    LeaseAfter::ReportReleased => {
                        answer = Some((NodeState::Released, String::new()));
                    }
                    LeaseAfter::Untouched => {}
                }
            }
            step => match simulate(&step, &f, script, &mut entry) {
                Ok(Some(a)) => answer = Some(a),
                Ok(None) => {}
                Err(a) => {
                    answer = Some(a);
                    break;
                }
            },
        }
    }
    if let Ok(mut s) = seen.lock() {
        match entry {
            Some(e) => s.held.insert(key.clone(), (uid, e)),
            None => s.held.remove(&key),
        };
    }
    if let Some((state, error)) = answer {
        report(kube, seen, &f, v, state, error).await;
    }
    Some(key)
}

/// The script's failure for a step serving `request`, if it asks for one.
fn failure(script: &NodeScript, request: Request) -> Option<(NodeState, String)> {
    match &script.fail {
        Some((r, e)) if *r == request => Some((NodeState::Failed, e.clone())),
        _ => None,
    }
}

/// One step other than a release, on the simulated record: the answer it gives, if any;
/// `Err` for a step that did not complete (answered, and the rest not done).
fn simulate(
    step: &Step,
    f: &Fence,
    script: &NodeScript,
    entry: &mut Option<Entry>,
) -> Result<Option<(NodeState, String)>, (NodeState, String)> {
    if let Step::Report(state, msg) = step {
        // A failure the script asks for shows even where nothing is left to do.
        if *state != NodeState::Failed
            && let Some(e) = failure(script, f.request)
        {
            return Err(e);
        }
        return Ok(Some((*state, msg.clone().unwrap_or_default())));
    }
    if let Some(e) = &script.refuse
        && matches!(step, Step::CheckTarget | Step::Probe)
    {
        return Err((NodeState::Refused, e.clone()));
    }
    if let Step::CheckTarget = step {
        *entry = Some(new_entry(f));
        return Ok(None);
    }
    if let Some(e) = failure(script, f.request) {
        return Err(e);
    }
    if let Step::Probe = step {
        return Ok(Some((NodeState::Probed, String::new())));
    }
    let Some(e) = entry.as_mut() else {
        return Err((NodeState::Failed, format!("no hold record for {}", f.key())));
    };
    let now_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    };
    match step {
        Step::StopMysqld => {
            e.stopped_mysqld = true;
            e.mysqld_down = true;
        }
        Step::FreezeCgroup => {
            e.cgroup = Some(Cgroup {
                version: Version::V2,
                dir: "/fake-node/cgroup".into(),
            });
            e.hold_since_ms.get_or_insert_with(now_ms);
        }
        Step::FreezeFs => {
            e.fs_frozen = Some("/fake-node/volume".into());
            e.hold_since_ms.get_or_insert_with(now_ms);
        }
        Step::ThawCgroup => e.cgroup = None,
        _ => {}
    }
    Ok(None)
}

/// The record the real helper starts when it takes a lease on; nothing held yet.
fn new_entry(f: &Fence) -> Entry {
    Entry {
        lease: f.key(),
        pod_uid: f.target_pod_uid.clone(),
        tablet_alias: f.tablet_alias.clone(),
        original_type: f.original_type,
        vtctld: f.vtctld.clone(),
        container_id: None,
        volume_mount: None,
        mysqlctl_socket: "/fake-node/mysqlctl.sock".into(),
        mysqld_socket: "/fake-node/mysql.sock".into(),
        stopped_mysqld: false,
        mysqld_down: false,
        cgroup: None,
        fs_frozen: None,
        hold_since_ms: None,
        max_hold_secs: f.max_hold.as_secs(),
        watchdog_released: false,
    }
}

/// Core's put-back through the lease's vtctld; whether all of it was done.
async fn put_back(f: &Fence) -> bool {
    let Ok(vt) = VtctldClient::new(
        &f.vtctld,
        CallLimits {
            read_attempts: 1,
            timeout: Duration::from_secs(5),
        },
    ) else {
        return false;
    };
    put_tablet_back(&vt, &f.tablet_alias, f.original_type, TabletChanges::ALL)
        .await
        .is_empty()
}

/// Writes the answer on the lease by compare-and-swap, unless it already says that state.
async fn report<S: LeaseStore>(
    kube: &S,
    seen: &Arc<Mutex<Seen>>,
    f: &Fence,
    v: Value,
    state: NodeState,
    error: String,
) {
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
