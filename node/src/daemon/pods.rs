//! Where a pod's volumes are on this node (kubelet's pods directory).

use std::path::{Path, PathBuf};

/// `<kubelet>/pods/<uid>/volumes/kubernetes.io~empty-dir/vt-root/socket`: the pod's `/vt/socket`.
pub fn socket_dir(kubelet: &Path, pod_uid: &str) -> PathBuf {
    kubelet
        .join("pods")
        .join(pod_uid)
        .join("volumes/kubernetes.io~empty-dir/vt-root/socket")
}

/// Why the tablet volume's mount was not found.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    #[error("cannot read the volumes of pod {pod_uid} at {dir}: {source}")]
    Unreadable {
        pod_uid: String,
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no volume of pod {pod_uid} under {dir} holds vtdataroot/")]
    None { pod_uid: String, dir: PathBuf },
    #[error("several volumes of pod {pod_uid} hold vtdataroot/: {found:?}")]
    Several {
        pod_uid: String,
        found: Vec<PathBuf>,
    },
}

/// The tablet data volume's mount: the one volume of the pod holding `vtdataroot/`
/// (CSI volumes keep their files under `<volume>/mount`).
pub fn volume_mount(kubelet: &Path, pod_uid: &str) -> Result<PathBuf, MountError> {
    let vols = kubelet.join("pods").join(pod_uid).join("volumes");
    let mut found = Vec::new();
    let plugins = std::fs::read_dir(&vols).map_err(|source| MountError::Unreadable {
        pod_uid: pod_uid.to_owned(),
        dir: vols.clone(),
        source,
    })?;
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
        0 => Err(MountError::None {
            pod_uid: pod_uid.to_owned(),
            dir: vols,
        }),
        _ => Err(MountError::Several {
            pod_uid: pod_uid.to_owned(),
            found,
        }),
    }
}

/// `containerd://abc` → `abc`.
pub fn container_id(raw: &str) -> &str {
    raw.split_once("://").map_or(raw, |(_, id)| id)
}
