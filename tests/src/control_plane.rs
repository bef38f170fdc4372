//! The lab's control plane: where its Kubernetes objects live, and what cuts and clones
//! its volumes.
//!
//! - **In memory** (`make demo`, the default): the test kit's `FakeKube` and the lab's
//!   `FakeCsi`, on the lab's own btrfs loop device.
//! - **Real** (`make demo-real`): a real API server (the local control plane, or any
//!   cluster a kubeconfig names), the real snapshot-controller, csi-snapshotter and
//!   csi-provisioner, and vtsnap's btrfs CSI driver. Tablet PVCs are bound by the real
//!   provisioner; the lab bind-mounts each bound PV's directory where kubelet would mount
//!   it for the Pod's real UID (there is no kubelet here). VolumeSnapshots are cut by the
//!   real stack through the driver; new replicas' PVCs name them in `dataSourceRef`.
//!
//! Both are driven through a real `kube::Client`, so everything above this module is the
//! same code in both modes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::{Value, json};
use vtsnap_core::snapshot::GROUP;
use vtsnap_testkit::btrfs::btrfs;
use vtsnap_testkit::fake_kube::FakeKube;
use vtsnap_testkit::fake_vtctld::FakeVtctld;
use vtsnap_testkit::fixtures::ShardFixture;
use vtsnap_testkit::real_kube::{BTRFS_CLASS, BTRFS_DRIVER, RealKube, TestNamespace, resource};

use crate::csi::FakeCsi;
use crate::resources;
use crate::timeline::Timeline;

/// The in-memory lab's node, namespace and StorageClass.
pub const IN_MEMORY_NODE: &str = "node-a";
pub const IN_MEMORY_NAMESPACE: &str = "vitess";
const IN_MEMORY_STORAGE_CLASS: &str = "topolvm-provisioner";
/// How long a PVC may take to bind or a snapshot to become ready on the real stack.
const REAL_LIMIT: Duration = Duration::from_secs(120);

/// Which control plane a lab runs on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Choice {
    #[default]
    InMemory,
    /// The cluster this kubeconfig names.
    Real { kubeconfig: PathBuf },
}

/// A running control plane.
#[derive(Debug)]
pub enum ControlPlane {
    InMemory(InMemory),
    Real(Box<Real>),
}

#[derive(Debug)]
pub struct InMemory {
    pub kube: FakeKube,
    pub csi: FakeCsi,
}

/// The real one. Fields drop in order: the bind mounts are undone before the namespace
/// (and with it the PVCs, hence the volumes) is deleted, and the kubelet directory last.
#[derive(Debug)]
pub struct Real {
    binds: Binds,
    watch: tokio::task::JoinHandle<()>,
    kube: RealKube,
    ns: TestNamespace,
    version: String,
    node: String,
    snapshot_class: String,
    kubelet: tempfile::TempDir,
}

impl Drop for Real {
    fn drop(&mut self) {
        self.watch.abort();
    }
}

fn snapshots() -> kube::core::ApiResource {
    resource(GROUP, "v1", "VolumeSnapshot", "volumesnapshots")
}

fn contents() -> kube::core::ApiResource {
    resource(
        GROUP,
        "v1",
        "VolumeSnapshotContent",
        "volumesnapshotcontents",
    )
}

impl ControlPlane {
    /// The in-memory one: its fake CSI keeps volumes under `root` (on the lab's btrfs).
    pub fn in_memory(root: &Path, cut: Duration, upload: Duration, timeline: Timeline) -> Self {
        let kube = FakeKube::new();
        let csi = FakeCsi::start(&kube, root, cut, upload, timeline);
        Self::InMemory(InMemory { kube, csi })
    }

    /// The cluster of `kubeconfig`: a namespace of the lab's own, a VolumeSnapshotClass
    /// of the btrfs driver whose cuts take `cut` (see the driver's `cutDelayMillis`), and
    /// a watch that puts what the real controllers do on the timeline.
    pub async fn real(kubeconfig: &Path, cut: Duration, timeline: Timeline) -> Self {
        let kube = RealKube::from_kubeconfig(kubeconfig).await;
        let version = kube.version().await;
        // Pods bound to a Node that does not exist are deleted by the pod garbage collector.
        let node = kube.first_node().await;
        let ns = kube.namespace("lab").await;
        let cut_ms = cut.as_millis();
        let snapshot_class = format!("{BTRFS_CLASS}-cut-{cut_ms}ms");
        create_or_keep(
            &kube,
            json!({
                "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotClass",
                "metadata": {"name": snapshot_class, "labels": {"vtsnap.io/test": "true"}},
                "driver": BTRFS_DRIVER, "deletionPolicy": "Delete",
                "parameters": {"cutDelayMillis": cut_ms.to_string()},
            }),
        )
        .await;
        let kubelet = tempfile::Builder::new()
            .prefix("vtsnap-lab-kubelet-")
            .tempdir_in("/var/tmp")
            .unwrap_or_else(|e| panic!("kubelet directory: {e}"));
        resources::tree(kubelet.path());
        timeline.mark(format!(
            "lab: real API server {version} (node {node}, namespace {}), VolumeSnapshotClass {snapshot_class}",
            ns.name
        ));
        let watch = tokio::spawn(watch_storage(kube.client(), ns.name.clone(), timeline));
        Self::Real(Box::new(Real {
            binds: Binds::default(),
            watch,
            kube,
            ns,
            version,
            node,
            snapshot_class,
            kubelet,
        }))
    }

    pub fn client(&self) -> kube::Client {
        match self {
            Self::InMemory(m) => m.kube.client(),
            Self::Real(r) => r.kube.client(),
        }
    }

    pub fn namespace(&self) -> &str {
        match self {
            Self::InMemory(_) => IN_MEMORY_NAMESPACE,
            Self::Real(r) => &r.ns.name,
        }
    }

    /// The node every tablet Pod is bound to (and the node helper serves).
    pub fn node(&self) -> &str {
        match self {
            Self::InMemory(_) => IN_MEMORY_NODE,
            Self::Real(r) => &r.node,
        }
    }

    pub fn storage_class(&self) -> &str {
        match self {
            Self::InMemory(_) => IN_MEMORY_STORAGE_CLASS,
            Self::Real(_) => BTRFS_CLASS,
        }
    }

    /// The VolumeSnapshotClass vtsnap is configured with (`None`: the default class).
    pub fn snapshot_class(&self) -> Option<&str> {
        match self {
            Self::InMemory(_) => None,
            Self::Real(r) => Some(&r.snapshot_class),
        }
    }

    /// The API server's version, for the demo's JSON line.
    pub fn kube_version(&self) -> Option<&str> {
        match self {
            Self::InMemory(_) => None,
            Self::Real(r) => Some(&r.version),
        }
    }

    /// Where kubelet would keep the Pods' volumes (`<dir>/pods/<uid>/volumes`): on the
    /// lab's own btrfs in memory (the volumes are subvolumes there).
    pub fn kubelet_dir(&self, lab_disk: Option<&Path>) -> PathBuf {
        match (self, lab_disk) {
            (Self::InMemory(_), Some(disk)) => disk.join("kubelet"),
            (Self::InMemory(_), None) => {
                panic!("the in-memory control plane needs the lab's btrfs")
            }
            (Self::Real(r), _) => r.kubelet.path().to_path_buf(),
        }
    }

    /// Creates the shard's vtctld Service, Pods and PVCs, and its tablets in vtctld. On the
    /// real stack only the primary's PVC: the replicas' are made from a snapshot later
    /// ([`Self::replica_volumes`]).
    pub async fn install(&self, fixture: &ShardFixture, vtctld: &FakeVtctld) {
        match self {
            Self::InMemory(m) => fixture.install(&m.kube, vtctld),
            Self::Real(r) => {
                let primary_only = fixture.clone().pvc_missing(2).pvc_missing(3);
                primary_only
                    .install_real(&r.kube, &r.ns.name, BTRFS_CLASS, vtctld)
                    .await;
            }
        }
    }

    /// The UID the API server gave a Pod.
    pub async fn pod_uid(&self, pod: &str) -> String {
        let api: Api<Pod> = Api::namespaced(self.client(), self.namespace());
        api.get(pod)
            .await
            .unwrap_or_else(|e| panic!("get pod {pod}: {e}"))
            .metadata
            .uid
            .unwrap_or_else(|| panic!("pod {pod} has no uid"))
    }

    /// Sets the Pod's mysqld container status as kubelet would (the node helper finds the
    /// container's cgroup from its ID).
    pub async fn set_mysqld_container(&self, pod: &str, container_id: &str) {
        let api: Api<Pod> = Api::namespaced(self.client(), self.namespace());
        let patch = json!({"status": {"containerStatuses": [{"name": "mysqld", "image": "vtsnap-mariadb", "imageID": "",
            "ready": true, "restartCount": 0, "started": true, "state": {"running": {}},
            "containerID": format!("podman://{container_id}")}]}});
        api.patch_status(pod, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("set the container status of pod {pod}: {e}"));
    }

    /// The primary's data volume, empty, mounted at `mount` (kubelet's path for its Pod).
    pub async fn primary_volume(&self, fixture: &ShardFixture, mount: &Path) {
        let pvc = fixture.tablet(1).pod;
        match self {
            Self::InMemory(m) => {
                std::fs::create_dir_all(mount.parent().unwrap()).unwrap();
                must(btrfs(&["-q", "subvolume", "create"], &[mount]));
                m.csi.register_pvc(&pvc, mount);
            }
            Self::Real(r) => {
                let dir = r.bound_volume(&pvc).await;
                r.binds.bind(&dir, mount);
            }
        }
    }

    /// The replicas' data volumes, each a copy of the (stopped) primary's at `primary`,
    /// mounted at their kubelet paths. In memory: btrfs clones. Real: a VolumeSnapshot of
    /// the primary's PVC and a PVC per replica with `dataSourceRef` to it, bound by
    /// csi-provisioner — the way vtsnap provisions replicas.
    pub async fn replica_volumes(
        &self,
        fixture: &ShardFixture,
        primary: &Path,
        mounts: &BTreeMap<usize, PathBuf>,
    ) {
        match self {
            Self::InMemory(m) => {
                for (n, mount) in mounts {
                    std::fs::create_dir_all(mount.parent().unwrap()).unwrap();
                    must(btrfs(&["-q", "subvolume", "snapshot"], &[primary, mount]));
                    m.csi.register_pvc(&fixture.tablet(*n).pod, mount);
                }
            }
            Self::Real(r) => {
                let seed = "lab-seed";
                r.kube
                    .create(json!({
                        "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
                        "metadata": {"name": seed, "namespace": r.ns.name},
                        "spec": {"volumeSnapshotClassName": BTRFS_CLASS,
                                 "source": {"persistentVolumeClaimName": fixture.tablet(1).pod}},
                    }))
                    .await;
                r.kube
                    .wait_for(&snapshots(), &r.ns.name, seed, "ready", REAL_LIMIT, |v| {
                        v.pointer("/status/readyToUse").and_then(Value::as_bool) == Some(true)
                    })
                    .await;
                let mut in_namespace = fixture.clone();
                in_namespace.namespace.clone_from(&r.ns.name);
                for n in mounts.keys() {
                    r.kube
                        .create(in_namespace.real_pvc(*n, BTRFS_CLASS, Some(seed)))
                        .await;
                }
                for (n, mount) in mounts {
                    let dir = r.bound_volume(&fixture.tablet(*n).pod).await;
                    r.binds.bind(&dir, mount);
                }
                // The clones are subvolumes of their own: the seed snapshot can go.
                let api = Api::<DynamicObject>::namespaced_with(
                    r.kube.client(),
                    &r.ns.name,
                    &snapshots(),
                );
                let _ = api.delete(seed, &DeleteParams::default()).await;
            }
        }
    }

    /// Creates PVC `name` of 10Gi with `dataSourceRef` to `snapshot` and returns its
    /// volume's directory once it is bound (a writable copy of the snapshot).
    pub async fn restore_pvc(&self, name: &str, snapshot: &str) -> PathBuf {
        let source = json!({"apiGroup": GROUP, "kind": "VolumeSnapshot", "name": snapshot});
        self.create_pvc(json!({
            "metadata": {"name": name, "namespace": self.namespace()},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}},
                     "storageClassName": self.storage_class(),
                     "dataSource": source, "dataSourceRef": source},
        }))
        .await
    }

    /// Creates the PVC `pvc` (its namespace set to the lab's) and returns its volume's
    /// directory once it is bound.
    pub async fn create_pvc(&self, mut pvc: Value) -> PathBuf {
        pvc["metadata"]["namespace"] = json!(self.namespace());
        let name = pvc["metadata"]["name"]
            .as_str()
            .unwrap_or_else(|| panic!("a PVC without a name: {pvc}"))
            .to_owned();
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client(), self.namespace());
        let pvc: PersistentVolumeClaim = serde_json::from_value(pvc).unwrap();
        let created = api
            .create(&PostParams::default(), &pvc)
            .await
            .unwrap_or_else(|e| panic!("create PVC {name}: {e}"));
        match self {
            Self::InMemory(m) => {
                let uid = created.metadata.uid.unwrap_or_default();
                let mine = || {
                    m.csi
                        .pvc_volume(&name)
                        .filter(|p| p.to_string_lossy().ends_with(&format!("-{uid}")))
                };
                crate::shard::until(
                    &format!("PVC {name} is bound"),
                    Duration::from_secs(300),
                    || async { mine().is_some() },
                )
                .await;
                mine().unwrap()
            }
            Self::Real(r) => r.bound_volume(&name).await,
        }
    }

    /// Runs `f` on the PVC's name and volume just before the next cut. In memory only:
    /// the real stack cuts on its own.
    pub fn before_next_cut(&self, f: impl FnOnce(&str, &Path) + Send + 'static) {
        match self {
            Self::InMemory(m) => m.csi.before_next_cut(f),
            Self::Real(_) => panic!("before_next_cut: the real CSI stack has no such hook"),
        }
    }

    /// Each VolumeSnapshot of the lab's namespace that has been cut, with the read-only
    /// btrfs snapshot that holds its image.
    pub async fn snapshot_images(&self) -> BTreeMap<String, PathBuf> {
        match self {
            Self::InMemory(m) => m.csi.snapshot_paths(),
            Self::Real(r) => r.snapshot_images().await,
        }
    }
}

impl Real {
    /// Waits until PVC `name` is bound and returns its volume's directory (the driver's
    /// `path` attribute on the PV).
    async fn bound_volume(&self, name: &str) -> PathBuf {
        let pv = self
            .kube
            .wait_pvc_bound(&self.ns.name, name, REAL_LIMIT)
            .await;
        let api: Api<PersistentVolume> = Api::all(self.kube.client());
        let pv = api
            .get(&pv)
            .await
            .unwrap_or_else(|e| panic!("get PV {pv}: {e}"));
        let csi = pv
            .spec
            .and_then(|s| s.csi)
            .unwrap_or_else(|| panic!("PVC {name} is bound to a volume that is not CSI"));
        assert_eq!(
            csi.driver, BTRFS_DRIVER,
            "PVC {name}: bound by another driver"
        );
        csi.volume_attributes
            .and_then(|a| a.get("path").cloned())
            .map(PathBuf::from)
            .unwrap_or_else(|| panic!("PVC {name}: the PV has no path attribute"))
    }

    /// VolumeSnapshot → content → `snapshotHandle` → `<driver root>/snapshots/<handle>`;
    /// the root is where the PVs of this namespace live (`<root>/volumes/<id>`).
    async fn snapshot_images(&self) -> BTreeMap<String, PathBuf> {
        let Some(root) = self.driver_root().await else {
            return BTreeMap::new();
        };
        let handles: BTreeMap<String, String> = self
            .kube
            .list(&contents(), "")
            .await
            .into_iter()
            .filter_map(|c| {
                let name = c.pointer("/metadata/name")?.as_str()?.to_owned();
                let handle = c.pointer("/status/snapshotHandle")?.as_str()?.to_owned();
                Some((name, handle))
            })
            .collect();
        self.kube
            .list(&snapshots(), &self.ns.name)
            .await
            .into_iter()
            .filter_map(|s| {
                let name = s.pointer("/metadata/name")?.as_str()?.to_owned();
                let content = s
                    .pointer("/status/boundVolumeSnapshotContentName")?
                    .as_str()?;
                s.pointer("/status/creationTime")?;
                let handle = handles.get(content)?;
                Some((name, root.join("snapshots").join(handle)))
            })
            .collect()
    }

    async fn driver_root(&self) -> Option<PathBuf> {
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.kube.client(), &self.ns.name);
        let pvcs = api.list(&Default::default()).await.ok()?;
        let bound = pvcs.items.into_iter().find_map(|p| {
            let name = p.metadata.name?;
            (p.status?.phase.as_deref() == Some("Bound")).then_some(name)
        })?;
        let dir = self.bound_volume(&bound).await;
        // <root>/volumes/<id>
        Some(dir.parent()?.parent()?.to_path_buf())
    }
}

/// Creates a cluster-scoped object unless one of its name exists.
async fn create_or_keep(kube: &RealKube, v: Value) {
    let ar = resource(
        "snapshot.storage.k8s.io",
        "v1",
        "VolumeSnapshotClass",
        "volumesnapshotclasses",
    );
    let name = v["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    if kube.get(&ar, "", &name).await.is_none() {
        let api = Api::<DynamicObject>::all_with(kube.client(), &ar);
        let obj: DynamicObject = serde_json::from_value(v).unwrap();
        match api.create(&PostParams::default(), &obj).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => panic!("create VolumeSnapshotClass {name}: {e}"),
        }
    }
}

/// Puts on the timeline what the real controllers do in the lab's namespace: each
/// VolumeSnapshot's cut and readiness, each PVC's binding, each snapshot's deletion.
async fn watch_storage(client: kube::Client, ns: String, timeline: Timeline) {
    let snaps = Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &snapshots());
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client, &ns);
    let seen: Arc<Mutex<BTreeMap<String, &'static str>>> = Arc::default();
    let mark = |key: String, state: &'static str, line: String| {
        let mut seen = seen.lock().unwrap();
        if seen.get(&key) != Some(&state) {
            seen.insert(key, state);
            timeline.mark(line);
        }
    };
    let snap_events = watcher(snaps, watcher::Config::default())
        .map(|e| e.map(Left))
        .boxed();
    let pvc_events = watcher(pvcs, watcher::Config::default())
        .map(|e| e.map(Right))
        .boxed();
    let mut events = futures::stream::select(snap_events, pvc_events);
    while let Some(e) = events.next().await {
        match e {
            Ok(Left(watcher::Event::Apply(s) | watcher::Event::InitApply(s))) => {
                let v = serde_json::to_value(&s).unwrap_or_default();
                let name = s.metadata.name.clone().unwrap_or_default();
                let content = v
                    .pointer("/status/boundVolumeSnapshotContentName")
                    .and_then(Value::as_str)
                    .unwrap_or("?");
                if v.pointer("/status/readyToUse").and_then(Value::as_bool) == Some(true) {
                    mark(
                        format!("snapshot {name}"),
                        "ready",
                        format!(
                            "csi: {name} cut and readyToUse (snapshot-controller, csi-snapshotter, vtsnap-csi-btrfs; content {content})"
                        ),
                    );
                } else if v.pointer("/status/creationTime").is_some() {
                    mark(
                        format!("snapshot {name}"),
                        "cut",
                        format!("csi: {name} cut (content {content}), not ready yet"),
                    );
                }
            }
            Ok(Left(watcher::Event::Delete(s))) => {
                let name = s.metadata.name.clone().unwrap_or_default();
                mark(
                    format!("snapshot {name}"),
                    "deleted",
                    format!(
                        "csi: VolumeSnapshot {name} deleted; the content goes with it (deletionPolicy Delete)"
                    ),
                );
            }
            Ok(Right(watcher::Event::Apply(p) | watcher::Event::InitApply(p))) => {
                let name = p.metadata.name.clone().unwrap_or_default();
                let spec = p.spec.unwrap_or_default();
                let bound = p.status.and_then(|s| s.phase).as_deref() == Some("Bound");
                if bound {
                    let from = spec
                        .data_source_ref
                        .map(|d| format!(" from VolumeSnapshot {}", d.name))
                        .unwrap_or_default();
                    mark(
                        format!("pvc {name}"),
                        "bound",
                        format!(
                            "csi: PVC {name} bound to {} by csi-provisioner{from}",
                            spec.volume_name.unwrap_or_default()
                        ),
                    );
                }
            }
            Ok(_) => {}
            Err(e) => timeline.mark(format!("csi: watch interrupted ({e}); it resumes")),
        }
    }
}

enum Either<A, B> {
    Left(A),
    Right(B),
}
use Either::{Left, Right};

/// Bind mounts of PV directories at kubelet paths; undone on drop.
#[derive(Debug, Default)]
struct Binds(Mutex<Vec<PathBuf>>);

impl Binds {
    fn bind(&self, source: &Path, target: &Path) {
        std::fs::create_dir_all(target).unwrap();
        resources::bind(target);
        run(
            "mount",
            &["--bind".as_ref(), source.as_os_str(), target.as_os_str()],
        );
        self.0.lock().unwrap().push(target.to_path_buf());
    }
}

impl Drop for Binds {
    fn drop(&mut self) {
        let binds = std::mem::take(
            &mut *self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        for target in binds.iter().rev() {
            // A lazy unmount when busy: either way nothing below the kubelet directory
            // leads into a volume once this returns.
            let ok = std::process::Command::new("umount")
                .arg(target)
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                let _ = std::process::Command::new("umount")
                    .arg("-l")
                    .arg(target)
                    .status();
            }
        }
    }
}

fn run(cmd: &str, args: &[&std::ffi::OsStr]) {
    let out = std::process::Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn must(r: Result<(), String>) {
    if let Err(e) = r {
        panic!("{e}");
    }
}
