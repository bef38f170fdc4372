//! The lab's CSI driver, on the fake Kubernetes API, with real btrfs underneath:
//! - a VolumeSnapshot is cut as a read-only btrfs snapshot of its PVC's subvolume (the
//!   [`FakeSnapshotter`] decides when: `creationTime` at the cut, `readyToUse` after the
//!   configured upload delay);
//! - a PVC whose `dataSourceRef` names a ready VolumeSnapshot becomes a writable btrfs
//!   snapshot of it and is Bound;
//! - a tablet PVC (`planetscale.com/component=vttablet`) without a data source becomes an
//!   empty btrfs subvolume and is Bound (the operator's normal provisioning);
//! - a PVC deleted and made again under its name gets a volume of its own;
//! - when a VolumeSnapshot object is gone (deleted by `vtsnap-gc`), its btrfs snapshot is
//!   deleted too (deletionPolicy Delete);
//! - a test may change a volume just before its next cut ([`FakeCsi::before_next_cut`]),
//!   e.g. damage a stopped tablet's data.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use vtsnap_testkit::btrfs::btrfs;
use vtsnap_testkit::fake_kube::FakeKube;
use vtsnap_testkit::fake_snapshotter::{Behaviour, FakeSnapshotter};

use crate::timeline::Timeline;

const GROUP: &str = "snapshot.storage.k8s.io";
const SNAPSHOTS: &str = "volumesnapshots";
const PVCS: &str = "persistentvolumeclaims";
/// How often the fake controllers look at the API.
pub const POLL: Duration = Duration::from_millis(50);

/// Run on the PVC's name and volume just before the cut.
type BeforeCut = Box<dyn FnOnce(&str, &Path) + Send>;

#[derive(Debug, Default)]
struct Volumes {
    /// PVC name → its subvolume (the volume kubelet mounts).
    pvcs: HashMap<String, PathBuf>,
    /// VolumeSnapshot name → its read-only subvolume.
    snapshots: HashMap<String, PathBuf>,
    /// PVC name → the UID of the object its volume was provisioned for (registered
    /// volumes have none: they are the lab's own).
    provisioned_for: HashMap<String, String>,
}

/// The fake CSI driver; stops when dropped.
pub struct FakeCsi {
    volumes: Arc<Mutex<Volumes>>,
    before_cut: Arc<Mutex<Option<BeforeCut>>>,
    pub snapshotter: FakeSnapshotter,
    provisioner: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for FakeCsi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeCsi")
            .field("volumes", &self.volumes)
            .field("snapshotter", &self.snapshotter)
            .finish_non_exhaustive()
    }
}

impl Drop for FakeCsi {
    fn drop(&mut self) {
        self.provisioner.abort();
    }
}

impl FakeCsi {
    /// Snapshots go to `<root>/snapshots`, provisioned volumes to `<root>/pvs`.
    pub fn start(
        kube: &FakeKube,
        root: &Path,
        cut_delay: Duration,
        upload_delay: Duration,
        timeline: Timeline,
    ) -> Self {
        let volumes: Arc<Mutex<Volumes>> = Arc::default();
        let snap_dir = root.join("snapshots");
        let pv_dir = root.join("pvs");
        for d in [&snap_dir, &pv_dir] {
            let _ = std::fs::create_dir_all(d);
        }
        let before_cut: Arc<Mutex<Option<BeforeCut>>> = Arc::default();
        let (v, tl, before) = (volumes.clone(), timeline.clone(), before_cut.clone());
        let on_cut = Arc::new(move |s: &Value| {
            let pvc = s
                .pointer("/spec/source/persistentVolumeClaimName")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let name = s
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let Ok(mut vols) = v.lock() else { return };
            let Some(src) = vols.pvcs.get(pvc).cloned() else {
                tl.mark(format!("csi: snapshot {name}: no volume for PVC {pvc}"));
                return;
            };
            if let Some(f) = before.lock().ok().and_then(|mut b| b.take()) {
                f(pvc, &src);
            }
            let dst = snap_dir.join(name);
            match btrfs(&["-q", "subvolume", "snapshot", "-r"], &[&src, &dst]) {
                Ok(()) => {
                    tl.mark(format!(
                        "csi: cut {name} (btrfs read-only snapshot of {pvc})"
                    ));
                    vols.snapshots.insert(name.to_owned(), dst);
                }
                Err(e) => tl.mark(format!("csi: cut {name} failed: {e}")),
            }
        });
        let ticks = |d: Duration| {
            u32::try_from(d.as_millis() / POLL.as_millis())
                .unwrap_or(u32::MAX)
                .max(1)
        };
        let snapshotter = FakeSnapshotter::start(
            kube,
            Behaviour {
                cut_after: ticks(cut_delay),
                ready_after: Some(ticks(upload_delay)),
                on_cut: Some(on_cut),
                ..Behaviour::default()
            },
            POLL,
        );
        let (k, v) = (kube.clone(), volumes.clone());
        let provisioner = tokio::spawn(async move {
            loop {
                provision_and_collect(&k, &v, &pv_dir, &timeline);
                tokio::time::sleep(POLL).await;
            }
        });
        Self {
            volumes,
            before_cut,
            snapshotter,
            provisioner,
        }
    }

    /// Registers the subvolume behind a PVC (the tablets' own volumes).
    pub fn register_pvc(&self, pvc: &str, subvolume: &Path) {
        if let Ok(mut v) = self.volumes.lock() {
            v.pvcs.insert(pvc.to_owned(), subvolume.to_path_buf());
            v.provisioned_for.remove(pvc);
        }
    }

    /// Runs `f` on the PVC's name and volume just before the next cut, after whatever the
    /// snapshot job did first (a cold job has stopped mysqld by then).
    pub fn before_next_cut(&self, f: impl FnOnce(&str, &Path) + Send + 'static) {
        if let Ok(mut b) = self.before_cut.lock() {
            *b = Some(Box::new(f));
        }
    }

    /// The subvolume behind a PVC, once it is bound.
    pub fn pvc_volume(&self, pvc: &str) -> Option<PathBuf> {
        self.volumes.lock().ok()?.pvcs.get(pvc).cloned()
    }

    /// Each VolumeSnapshot that has a btrfs snapshot, with its path.
    pub fn snapshot_paths(&self) -> std::collections::BTreeMap<String, PathBuf> {
        self.volumes
            .lock()
            .map(|v| v.snapshots.clone().into_iter().collect())
            .unwrap_or_default()
    }
}

fn provision_and_collect(kube: &FakeKube, vols: &Mutex<Volumes>, pv_dir: &Path, tl: &Timeline) {
    let snaps = kube.list_json(GROUP, SNAPSHOTS);
    let Ok(mut v) = vols.lock() else { return };
    for mut pvc in kube.list_json("", PVCS) {
        let name = pvc["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let ns = pvc["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let uid = pvc["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        // Made again under the same name: the old volume is no longer this PVC's.
        if v.provisioned_for.get(&name).is_some_and(|u| *u != uid) {
            v.pvcs.remove(&name);
            v.provisioned_for.remove(&name);
        }
        if v.pvcs.contains_key(&name) {
            continue;
        }
        let src = &pvc["spec"]["dataSourceRef"];
        let tablet = pvc["metadata"]["labels"]["planetscale.com/component"] == "vttablet";
        let bound = pvc["status"]["phase"] == "Bound";
        if src.is_null() && tablet && !bound {
            let dst = pv_dir.join(format!("{name}-{uid}"));
            match btrfs(&["-q", "subvolume", "create"], &[&dst]) {
                Ok(()) => {
                    tl.mark(format!("csi: PVC {name} provisioned empty"));
                    v.pvcs.insert(name.clone(), dst);
                    v.provisioned_for.insert(name.clone(), uid);
                    kube.set_status("", PVCS, &ns, &name, json!({"phase": "Bound"}));
                }
                Err(e) => tl.mark(format!("csi: PVC {name}: {e}")),
            }
            continue;
        }
        if src["kind"] != "VolumeSnapshot" {
            continue;
        }
        let snap_name = src["name"].as_str().unwrap_or_default();
        let ready = snaps
            .iter()
            .any(|s| s["metadata"]["name"] == snap_name && s["status"]["readyToUse"] == true);
        let Some(snap) = v.snapshots.get(snap_name).cloned() else {
            continue;
        };
        if !ready {
            continue;
        }
        let dst = pv_dir.join(format!("{name}-{uid}"));
        match btrfs(&["-q", "subvolume", "snapshot"], &[&snap, &dst]) {
            Ok(()) => {
                tl.mark(format!(
                    "csi: PVC {name} provisioned from {snap_name} (writable btrfs clone)"
                ));
                v.pvcs.insert(name.clone(), dst);
                v.provisioned_for.insert(name.clone(), uid);
                pvc["status"] = json!({"phase": "Bound"});
                kube.set_status("", PVCS, &ns, &name, pvc["status"].clone());
            }
            Err(e) => tl.mark(format!("csi: PVC {name}: {e}")),
        }
    }
    let live: Vec<&str> = snaps
        .iter()
        .filter_map(|s| s["metadata"]["name"].as_str())
        .collect();
    let gone: Vec<String> = v
        .snapshots
        .keys()
        .filter(|n| !live.contains(&n.as_str()))
        .cloned()
        .collect();
    for name in gone {
        if let Some(path) = v.snapshots.remove(&name) {
            match btrfs(&["-q", "subvolume", "delete"], &[&path]) {
                Ok(()) => tl.mark(format!(
                    "csi: snapshot {name} deleted (btrfs subvolume removed)"
                )),
                Err(e) => tl.mark(format!("csi: snapshot {name}: {e}")),
            }
        }
    }
}
