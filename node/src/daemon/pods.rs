//! Where a pod's volumes are on this node (kubelet's pods directory).

use std::path::{Path, PathBuf};

use vtsnap_core::naming::TabletUid;

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
/// (CSI volumes keep their files under `<volume>/mount`). When several do, the one whose
/// `vtdataroot/` holds the tablet's directory: vitess-operator's `init-vt-root` makes an
/// empty `vtdataroot/` in the `vt-root` emptyDir of every tablet Pod (docs/design.md §2).
pub fn volume_mount(
    kubelet: &Path,
    pod_uid: &str,
    tablet: TabletUid,
) -> Result<PathBuf, MountError> {
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
    if found.len() > 1 {
        let dir = tablet.tablet_dir_name();
        let holding: Vec<PathBuf> = found
            .iter()
            .filter(|root| root.join("vtdataroot").join(&dir).is_dir())
            .cloned()
            .collect();
        if holding.len() == 1 {
            found = holding;
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

#[cfg(test)]
mod tests {
    use super::*;

    const UID: TabletUid = TabletUid::new(101);

    fn pod_with(dirs: &[&str]) -> (tempfile::TempDir, PathBuf) {
        let kubelet = tempfile::tempdir().unwrap();
        let vols = kubelet.path().join("pods/p-1/volumes");
        for d in dirs {
            std::fs::create_dir_all(vols.join(d)).unwrap();
        }
        (kubelet, vols)
    }

    #[test]
    fn the_operators_empty_vtdataroot_beside_the_pvc_is_not_the_tablets_volume() {
        let (kubelet, vols) = pod_with(&[
            "kubernetes.io~empty-dir/vt-root/vtdataroot",
            "kubernetes.io~csi/pvc-1/mount/vtdataroot/vt_0000000101",
        ]);
        assert_eq!(
            volume_mount(kubelet.path(), "p-1", UID).unwrap(),
            vols.join("kubernetes.io~csi/pvc-1/mount")
        );
    }

    #[test]
    fn one_vtdataroot_is_the_volume_even_without_the_tablets_directory() {
        let (kubelet, vols) = pod_with(&["kubernetes.io~csi/pvc-1/mount/vtdataroot"]);
        assert_eq!(
            volume_mount(kubelet.path(), "p-1", UID).unwrap(),
            vols.join("kubernetes.io~csi/pvc-1/mount")
        );
    }

    #[test]
    fn two_volumes_holding_the_tablet_or_neither_are_refused_by_name() {
        for dirs in [
            [
                "kubernetes.io~empty-dir/vt-root/vtdataroot/vt_0000000101",
                "kubernetes.io~csi/pvc-1/mount/vtdataroot/vt_0000000101",
            ],
            [
                "kubernetes.io~empty-dir/vt-root/vtdataroot",
                "kubernetes.io~csi/pvc-1/mount/vtdataroot",
            ],
        ] {
            let (kubelet, _) = pod_with(&dirs);
            let e = volume_mount(kubelet.path(), "p-1", UID).unwrap_err();
            assert!(
                matches!(&e, MountError::Several { found, .. } if found.len() == 2),
                "{e}"
            );
        }
        let (kubelet, _) = pod_with(&["kubernetes.io~empty-dir/scratch"]);
        assert!(matches!(
            volume_mount(kubelet.path(), "p-1", UID),
            Err(MountError::None { .. })
        ));
    }
}
