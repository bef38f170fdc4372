//! `FakeNodeHelper`: answers fence leases the way `vtsnap-node run` does, without cgroups,
//! mysqld or a node — for tests of the snapshot job and the GC, where the node's actions
//! are not what is under test (`node/tests` test the real helper). It can be told to
//! refuse, to fail one request, or to be dead.
//!
//! Requests are answered in `vtsnap.io/node-state`; an expired lease is recovered as the
//! real helper does: StartReplication and ChangeTabletType back through vtctld, then the
//! lease is deleted.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use serde_json::{Value, json};
use vtsnap_core::fence::put_back::{TabletChanges, put_tablet_back};
use vtsnap_core::fence::{ANN_NODE_ERROR, ANN_NODE_STATE, Fence, LABEL_NODE, NodeState, Request};
use vtsnap_core::vtctld::VtctldClient;
use vtsnap_core::vtctld::client::CallLimits;

use crate::fake_kube::FakeKube;

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
        let script = Arc::new(Mutex::new(script));
        let seen: Arc<Mutex<Seen>> = Arc::default();
        let (kube, node, s, w) = (kube.clone(), node.to_owned(), script.clone(), seen.clone());
        let task = tokio::spawn(async move {
            loop {
                let current = s.lock().map(|g| g.clone()).unwrap_or_default();
                for v in kube.list_json("coordination.k8s.io", "leases") {
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

async fn serve(kube: &FakeKube, script: &NodeScript, seen: &Arc<Mutex<Seen>>, v: Value) {
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
                kube.remove("coordination.k8s.io", "leases", &ns, &f.name);
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
    if kube.compare_and_put("coordination.k8s.io", "leases", v)
        && let Ok(mut s) = seen.lock()
    {
        s.requests.push(format!("{} {}", f.name, f.request));
    }
}
