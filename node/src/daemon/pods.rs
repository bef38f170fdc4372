//! Where a pod's volumes are on this node (kubelet's pods directory).

use std::path::{Path, PathBuf};

/// `<kubelet>/pods/<uid>/volumes/kubernetes.io~empty-dir/vt-root/socket`: the pod's `/vt/socket`.
pub fn socket_dir(kubelet: &Path, pod_uid: &str) -> PathBuf {
    kubelet
        .join("pods")
        .join(pod_uid)
        .join("volumes/kubernetes.io~empty-dir/vt-root/socket")
}

/// The tablet data volume's mount: the one volume of the pod holding `vtdataroot/`
/// (CSI volumes keep their files under `<volume>/mount`).
pub fn volume_mount(kubelet: &Path, pod_uid: &str) -> Result<PathBuf, String> {
    let vols = kubelet.join("pods").join(pod_uid).join("volumes");
    let mut found = Vec::new();
    let plugins = std::fs::read_dir(&vols).map_err(|e| format!("{}: {e}", vols.display()))?;
    for plugin in plugins.flatten() {
        let Ok(vs) = std::fs::read_dir(plugin.path()) else {
            continue;
        };
        for v in vs.flatten() {
            for root in [v.path().join("mount"), v.path()] {
                if root.join("vtdataroot").is_dir() {
                    found.push(root);
                    break;
                }
            }
        }
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(format!(
            "no volume of pod {pod_uid} under {} holds vtdataroot/",
            vols.display()
        )),
        _ => Err(format!(
            "several volumes of pod {pod_uid} hold vtdataroot/: {found:?}"
        )),
    }
}

/// `containerd://abc` → `abc`.
pub fn container_id(raw: &str) -> &str {
    raw.split_once("://").map_or(raw, |(_, id)| id)
}
