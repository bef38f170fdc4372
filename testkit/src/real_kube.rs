//! `RealKube`: a client of a real Kubernetes API server (the local control plane that
//! `make cluster-up` starts, or any cluster a kubeconfig names), with what tests need
//! around it: a fresh namespace per test, objects created from JSON, Pod status set by
//! hand (there is no kubelet), and waits that ride a watch instead of a sleep.
//!
//! The kubeconfig comes from `VTSNAP_TEST_KUBECONFIG`; without it a test fails with
//! the command that starts the local cluster. Nothing here is a fake.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use vtsnap_core::reconcile::{Waited, wait_until};

/// The environment variable naming the kubeconfig of the cluster under test.
pub const KUBECONFIG_ENV: &str = "VTSNAP_TEST_KUBECONFIG";
/// The StorageClass and VolumeSnapshotClass of the local cluster's btrfs CSI driver.
pub const BTRFS_CLASS: &str = "vtsnap-btrfs";
/// The CSI driver's name.
pub const BTRFS_DRIVER: &str = "btrfs.csi.vtsnap.io";

/// A client of the cluster under test.
#[derive(Clone)]
pub struct RealKube {
    client: kube::Client,
    kubeconfig: PathBuf,
}

impl std::fmt::Debug for RealKube {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealKube")
            .field("kubeconfig", &self.kubeconfig)
            .finish()
    }
}

static NAMESPACES: AtomicU32 = AtomicU32::new(0);

/// The API resource of a `group/version` `kind` with its `plural`.
pub fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// The resource of an object from its `apiVersion` and `kind` ([`plural_of`] the kind).
pub fn resource_of(v: &Value) -> ApiResource {
    let api_version = v["apiVersion"].as_str().unwrap_or_default();
    let kind = v["kind"].as_str().unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    resource(group, version, kind, &plural_of(kind))
}

/// The plural of a kind: lower case plus `s`, `es` after an `s`, `ies` for a final `y`.
/// Right for every kind the tests and the chart create (not a general English rule).
pub fn plural_of(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    if let Some(stem) = lower.strip_suffix('y') {
        format!("{stem}ies")
    } else if lower.ends_with('s') {
        format!("{lower}es")
    } else {
        format!("{lower}s")
    }
}

impl RealKube {
    /// The API of a kind in `namespace`, or of a cluster-scoped kind when it is empty.
    fn api(&self, ar: &ApiResource, namespace: &str) -> Api<DynamicObject> {
        if namespace.is_empty() {
            Api::all_with(self.client(), ar)
        } else {
            Api::namespaced_with(self.client(), namespace, ar)
        }
    }

    /// The cluster named by [`KUBECONFIG_ENV`]; panics with how to start one.
    pub async fn from_env() -> Self {
        let path = std::env::var_os(KUBECONFIG_ENV)
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                panic!(
                    "{KUBECONFIG_ENV} is not set: these tests need a real API server. \
                 Run `make cluster-up` and set {KUBECONFIG_ENV}=target/local-cluster/kubeconfig \
                 (`make test-real` does both)"
                )
            });
        Self::from_kubeconfig(&path).await
    }

    pub async fn from_kubeconfig(path: &Path) -> Self {
        let kc = Kubeconfig::read_from(path)
            .unwrap_or_else(|e| panic!("cannot read kubeconfig {}: {e}", path.display()));
        let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .unwrap_or_else(|e| panic!("kubeconfig {}: {e}", path.display()));
        let client = vtsnap_core::cli::client_with(config, vtsnap_core::cli::ApiTimeouts::DEFAULT)
            .unwrap_or_else(|e| panic!("client for {}: {e}", path.display()));
        Self {
            client,
            kubeconfig: path.to_path_buf(),
        }
    }

    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The kubeconfig this client was made from (for child processes such as helm).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// A client that authenticates as the ServiceAccount `namespace/name` (a token from
    /// the TokenRequest API) and nothing else: what that account may do, and no more.
    pub async fn as_service_account(&self, namespace: &str, name: &str) -> kube::Client {
        let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600}});
        let req = http::Request::post(format!(
            "/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"
        ))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&request).unwrap())
        .unwrap();
        let answer: Value = self
            .client
            .request(req)
            .await
            .unwrap_or_else(|e| panic!("TokenRequest for {namespace}/{name}: {e}"));
        let token = answer["status"]["token"]
            .as_str()
            .unwrap_or_else(|| panic!("TokenRequest for {namespace}/{name}: no token: {answer}"))
            .to_owned();
        let kc = Kubeconfig::read_from(&self.kubeconfig).unwrap();
        let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .unwrap();
        config.auth_info = kube::config::AuthInfo {
            token: Some(token.into()),
            ..Default::default()
        };
        vtsnap_core::cli::client_with(config, vtsnap_core::cli::ApiTimeouts::DEFAULT)
            .unwrap_or_else(|e| panic!("client for {namespace}/{name}: {e}"))
    }

    /// The API server's `gitVersion`.
    pub async fn version(&self) -> String {
        self.client
            .apiserver_version()
            .await
            .unwrap_or_else(|e| panic!("GET /version: {e}"))
            .git_version
    }

    /// The directory a PV of the btrfs CSI driver lives in (its `path` volume attribute).
    pub async fn volume_dir(&self, pv: &str) -> PathBuf {
        let api: Api<k8s_openapi::api::core::v1::PersistentVolume> = Api::all(self.client());
        let pv = api
            .get(pv)
            .await
            .unwrap_or_else(|e| panic!("get PV {pv}: {e}"));
        let csi = pv.spec.and_then(|s| s.csi).expect("a CSI volume");
        assert_eq!(csi.driver, BTRFS_DRIVER);
        let path = csi
            .volume_attributes
            .and_then(|a| a.get("path").cloned())
            .expect("the driver's path attribute");
        PathBuf::from(path)
    }

    /// The name of the cluster's first Node (Pods must be bound to one that exists).
    pub async fn first_node(&self) -> String {
        let api: Api<k8s_openapi::api::core::v1::Node> = Api::all(self.client());
        api.list(&Default::default())
            .await
            .unwrap_or_else(|e| panic!("list Nodes: {e}"))
            .items
            .into_iter()
            .find_map(|n| n.metadata.name)
            .unwrap_or_else(|| panic!("the cluster has no Node"))
    }

    /// The Node a kubelet registered (it reports its version) and its InternalIP, if any:
    /// only the local cluster's `NODE=1` has one.
    pub async fn kubelet_node(&self) -> Option<(String, std::net::IpAddr)> {
        let api: Api<k8s_openapi::api::core::v1::Node> = Api::all(self.client());
        let node = api
            .list(&Default::default())
            .await
            .unwrap_or_else(|e| panic!("list Nodes: {e}"))
            .items
            .into_iter()
            .find(|n| {
                n.status
                    .as_ref()
                    .and_then(|s| s.node_info.as_ref())
                    .is_some_and(|i| !i.kubelet_version.is_empty())
            })?;
        let ip = node
            .status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .and_then(|a| a.iter().find(|a| a.type_ == "InternalIP"))
            .and_then(|a| a.address.parse().ok())
            .expect("a kubelet's Node has an InternalIP");
        Some((node.metadata.name?, ip))
    }

    /// A namespace of its own for one test, `<prefix>-<pid>-<n>`; deleted on drop.
    pub async fn namespace(&self, prefix: &str) -> TestNamespace {
        let n = NAMESPACES.fetch_add(1, Ordering::Relaxed);
        let name = format!("{prefix}-{}-{n}", std::process::id());
        let api: Api<Namespace> = Api::all(self.client());
        let ns: Namespace = serde_json::from_value(
            json!({"metadata": {"name": name, "labels": {"vtsnap.io/test": "true"}}}),
        )
        .unwrap();
        api.create(&PostParams::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("create namespace {name}: {e}"));
        TestNamespace {
            kube: self.clone(),
            name,
        }
    }

    /// Creates an object from its JSON (`apiVersion`, `kind`, `metadata.namespace` for a
    /// namespaced one) and returns it as the server stored it.
    pub async fn create(&self, v: Value) -> Value {
        let ar = resource_of(&v);
        let obj: DynamicObject = serde_json::from_value(v.clone()).unwrap();
        let api: Api<DynamicObject> = match v.pointer("/metadata/namespace").and_then(Value::as_str)
        {
            Some(ns) => Api::namespaced_with(self.client(), ns, &ar),
            None => Api::all_with(self.client(), &ar),
        };
        let created = api
            .create(&PostParams::default(), &obj)
            .await
            .unwrap_or_else(|e| panic!("create {} {}: {e}", ar.kind, v["metadata"]["name"]));
        serde_json::to_value(created).unwrap()
    }

    /// Reads an object; `None` if it is not there.
    pub async fn get(&self, ar: &ApiResource, namespace: &str, name: &str) -> Option<Value> {
        let api = self.api(ar, namespace);
        api.get_opt(name)
            .await
            .unwrap_or_else(|e| panic!("get {} {namespace}/{name}: {e}", ar.kind))
            .map(|o| serde_json::to_value(o).unwrap())
    }

    /// Every object of a kind in a namespace (one unpaged LIST).
    pub async fn list(&self, ar: &ApiResource, namespace: &str) -> Vec<Value> {
        let api = self.api(ar, namespace);
        api.list(&Default::default())
            .await
            .unwrap_or_else(|e| panic!("list {} in {namespace}: {e}", ar.kind))
            .items
            .into_iter()
            .map(|o| serde_json::to_value(o).unwrap())
            .collect()
    }

    /// Sets a Pod's status as kubelet would (there is none): Running, and Ready or not.
    pub async fn set_pod_running(&self, namespace: &str, name: &str, ready: bool) {
        let api: Api<Pod> = Api::namespaced(self.client(), namespace);
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        let status = if ready { "True" } else { "False" };
        let patch = json!({"status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": status, "lastTransitionTime": now}],
        }});
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("patch status of pod {namespace}/{name}: {e}"));
    }

    /// Waits (on a watch) until the PVC is Bound; returns its bound PV's name.
    pub async fn wait_pvc_bound(&self, namespace: &str, name: &str, limit: Duration) -> String {
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client(), namespace);
        let bound = |p: Option<&PersistentVolumeClaim>| {
            p.and_then(|p| p.status.as_ref())
                .and_then(|s| s.phase.as_deref())
                == Some("Bound")
        };
        let got = match wait_until(&api, name, limit, bound).await {
            Waited::Met(got) => got,
            Waited::TimedOut { last, watch_error } => panic!(
                "PVC {namespace}/{name} not Bound within {limit:?}; last read {last:?}, \
                 watch error {watch_error:?}"
            ),
            Waited::Refused(why) => panic!("watching PVC {namespace}/{name}: {why}"),
        };
        got.and_then(|p| p.spec)
            .and_then(|s| s.volume_name)
            .unwrap_or_else(|| panic!("PVC {namespace}/{name} is Bound without a volume"))
    }

    /// Waits (on a watch) until `cond` holds for the object, and returns it. A watch the
    /// connection drops (a quiet object outlives the client's read timeout) is started
    /// again, until `limit`.
    pub async fn wait_for(
        &self,
        ar: &ApiResource,
        namespace: &str,
        name: &str,
        what: &str,
        limit: Duration,
        cond: impl Fn(&Value) -> bool + Send + Sync + 'static,
    ) -> Value {
        let api = self.api(ar, namespace);
        let cond = std::sync::Arc::new(cond);
        let c = move |o: Option<&DynamicObject>| {
            o.and_then(|o| serde_json::to_value(o).ok())
                .is_some_and(|v| cond(&v))
        };
        match wait_until(&api, name, limit, c).await {
            Waited::Met(got) => serde_json::to_value(got).unwrap(),
            Waited::TimedOut { last, watch_error } => panic!(
                "{} {namespace}/{name}: not {what} within {limit:?}; last read {last:?}, \
                 watch error {watch_error:?}",
                ar.kind
            ),
            Waited::Refused(why) => panic!("watching {} {namespace}/{name}: {why}", ar.kind),
        }
    }

    /// Waits (on a watch) until the object is gone.
    pub async fn wait_gone(&self, ar: &ApiResource, namespace: &str, name: &str, limit: Duration) {
        let api = self.api(ar, namespace);
        match wait_until(&api, name, limit, |o: Option<&DynamicObject>| o.is_none()).await {
            Waited::Met(_) => {}
            Waited::TimedOut { watch_error, .. } => panic!(
                "{} {namespace}/{name} still there after {limit:?}; watch error {watch_error:?}",
                ar.kind
            ),
            Waited::Refused(why) => panic!("watching {} {namespace}/{name}: {why}", ar.kind),
        }
    }
}

/// A test's own namespace; deleted (in the background, not waited for) on drop.
#[derive(Debug)]
pub struct TestNamespace {
    kube: RealKube,
    pub name: String,
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        let kubeconfig = self.kube.kubeconfig.clone();
        let name = self.name.clone();
        // Drop runs on the test's runtime, which this blocks: a thread of its own with a
        // runtime and a client of its own deletes it (a client's worker lives on the
        // runtime that made it).
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            if let Ok(rt) = rt {
                rt.block_on(async {
                    let kube = RealKube::from_kubeconfig(&kubeconfig).await;
                    let api: Api<Namespace> = Api::all(kube.client());
                    let _ = api.delete(&name, &DeleteParams::background()).await;
                });
            }
        })
        .join();
    }
}

/// A container's cgroup in the freezer hierarchy, as kubelet's cgroupfs driver lays it out:
/// `kubepods/<qos>/pod<uid>/<container id>` (Guaranteed Pods sit directly under kubepods).
pub fn container_freezer_cgroup(pod: &Value, container: &str) -> PathBuf {
    let uid = pod["metadata"]["uid"].as_str().expect("pod uid");
    let status = pod["status"]["containerStatuses"]
        .as_array()
        .and_then(|cs| cs.iter().find(|s| s["name"] == container))
        .unwrap_or_else(|| panic!("no status of container {container}"));
    let id = status["containerID"]
        .as_str()
        .expect("containerID of a running container");
    let id = id.split_once("://").map_or(id, |(_, id)| id);
    let qos = match pod.pointer("/status/qosClass").and_then(Value::as_str) {
        Some("Guaranteed") => String::new(),
        Some(q) => format!("{}/", q.to_ascii_lowercase()),
        None => panic!("pod without qosClass"),
    };
    PathBuf::from(format!(
        "/sys/fs/cgroup/freezer/kubepods/{qos}pod{uid}/{id}"
    ))
}

/// Whether a Pod run by a real kubelet is Running; panics at once when kubelet reports it
/// cannot start one of its containers (no waiting for a timeout that can only fail).
pub fn pod_running(v: &Value) -> bool {
    for list in ["initContainerStatuses", "containerStatuses"] {
        for s in v["status"][list].as_array().into_iter().flatten() {
            if let Some(reason) = s.pointer("/state/waiting/reason").and_then(Value::as_str) {
                assert!(
                    !matches!(
                        reason,
                        "ErrImageNeverPull"
                            | "CreateContainerError"
                            | "CrashLoopBackOff"
                            | "CreateContainerConfigError"
                    ),
                    "pod {}: container {} waiting: {reason}: {}",
                    v["metadata"]["name"],
                    s["name"],
                    s.pointer("/state/waiting/message")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                );
            }
        }
    }
    v.pointer("/status/phase").and_then(Value::as_str) == Some("Running")
}

/// [`pod_running`] with every container ready.
pub fn pod_ready(v: &Value) -> bool {
    pod_running(v)
        && v["status"]["containerStatuses"]
            .as_array()
            .is_some_and(|cs| !cs.is_empty() && cs.iter().all(|c| c["ready"] == json!(true)))
}

/// Whether a VolumeSnapshot is `readyToUse`.
pub fn snapshot_ready(v: &Value) -> bool {
    v.pointer("/status/readyToUse").and_then(Value::as_bool) == Some(true)
}
