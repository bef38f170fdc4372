//! What the integration tests share: a btrfs file system on a loop device, the driver
//! on it, and a CSI client over its socket. Needs root, `mkfs.btrfs`, `btrfs` and
//! `losetup`.

// Each test binary uses a part of this module.
#![allow(dead_code)]
// Test helpers outside #[test] functions: a failure is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use hyper_util::rt::TokioIo;
use tempfile::TempDir;
use tonic::transport::{Channel, Uri};
use tonic::{Code, Status};
use tonic_prost::ProstCodec;
use vtsnap_csi_btrfs::csi::*;
use vtsnap_csi_btrfs::server::{self, Config, Serving};

// ---- a btrfs file system on a loop device, gone again on drop ----

pub fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A loop device holding a fresh btrfs, mounted; unmounted and detached on drop, also
/// when the test panics.
pub struct LoopBtrfs {
    pub dir: TempDir,
    device: String,
    mounted: bool,
}

impl LoopBtrfs {
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("vtsnap-csi-btrfs-")
            .tempdir_in("/var/tmp")
            .unwrap();
        let image = dir.path().join("disk.img");
        std::fs::File::create(&image)
            .unwrap()
            .set_len(512 << 20)
            .unwrap();
        let device = run(Command::new("losetup")
            .args(["--find", "--show"])
            .arg(&image));
        let mut fs = Self {
            dir,
            device,
            mounted: false,
        };
        run(Command::new("mkfs.btrfs").args(["-q", "-f", &fs.device]));
        std::fs::create_dir(fs.mnt()).unwrap();
        run(Command::new("mount").arg(&fs.device).arg(fs.mnt()));
        fs.mounted = true;
        fs
    }

    pub fn mnt(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }

    /// The driver's root: one level below the mount, so an escape would be visible.
    pub fn root(&self) -> PathBuf {
        self.mnt().join("csi")
    }
}

impl Drop for LoopBtrfs {
    fn drop(&mut self) {
        if self.mounted {
            let ok = Command::new("umount")
                .arg(self.mnt())
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                let _ = Command::new("umount").arg("-l").arg(self.mnt()).status();
            }
        }
        let _ = Command::new("losetup").args(["-d", &self.device]).status();
    }
}

/// Every path under `dir`, relative to it.
pub fn tree(dir: &Path) -> BTreeSet<String> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeSet<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            out.insert(p.strip_prefix(base).unwrap().display().to_string());
            if p.symlink_metadata().unwrap().is_dir() {
                walk(base, &p, out);
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(dir, dir, &mut out);
    out
}
// ---- a CSI client over the socket ----

pub struct Csi {
    pub channel: Channel,
}

impl Csi {
    pub async fn connect(socket: &Path) -> Self {
        let p = socket.to_owned();
        let connector = tower::service_fn(move |_: Uri| {
            let p = p.clone();
            async move {
                Ok::<_, std::io::Error>(TokioIo::new(vtsnap_core::unixsock::connect(&p).await?))
            }
        });
        // The URI is never dialled: the connector is.
        let channel = tonic::transport::Endpoint::from_static("http://csi.local")
            .connect_with_connector(connector)
            .await
            .unwrap();
        Self { channel }
    }

    pub async fn call<Req, Resp>(
        &self,
        service: &str,
        method: &str,
        req: Req,
    ) -> Result<Resp, Status>
    where
        Req: prost::Message + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        let mut grpc = tonic::client::Grpc::new(self.channel.clone());
        grpc.ready().await.unwrap();
        let path = http::uri::PathAndQuery::try_from(format!("/{service}/{method}")).unwrap();
        grpc.unary(
            tonic::Request::new(req),
            path,
            ProstCodec::<Req, Resp>::default(),
        )
        .await
        .map(tonic::Response::into_inner)
    }

    pub async fn create_volume(&self, r: CreateVolumeRequest) -> Result<Volume, Status> {
        let resp: CreateVolumeResponse = self.call(CONTROLLER, "CreateVolume", r).await?;
        Ok(resp.volume.unwrap())
    }

    pub async fn create_snapshot(&self, name: &str, source: &str) -> Result<Snapshot, Status> {
        self.create_snapshot_with(name, source, &[]).await
    }

    pub async fn create_snapshot_with(
        &self,
        name: &str,
        source: &str,
        parameters: &[(&str, &str)],
    ) -> Result<Snapshot, Status> {
        let r = CreateSnapshotRequest {
            name: name.into(),
            source_volume_id: source.into(),
            parameters: parameters
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        };
        let resp: CreateSnapshotResponse = self.call(CONTROLLER, "CreateSnapshot", r).await?;
        Ok(resp.snapshot.unwrap())
    }

    pub async fn delete_volume(&self, id: &str) -> Result<(), Status> {
        let r = DeleteVolumeRequest {
            volume_id: id.into(),
        };
        let _: DeleteVolumeResponse = self.call(CONTROLLER, "DeleteVolume", r).await?;
        Ok(())
    }

    pub async fn delete_snapshot(&self, id: &str) -> Result<(), Status> {
        let r = DeleteSnapshotRequest {
            snapshot_id: id.into(),
        };
        let _: DeleteSnapshotResponse = self.call(CONTROLLER, "DeleteSnapshot", r).await?;
        Ok(())
    }

    pub async fn list_snapshots(&self, r: ListSnapshotsRequest) -> Vec<Snapshot> {
        let resp: ListSnapshotsResponse = self.call(CONTROLLER, "ListSnapshots", r).await.unwrap();
        resp.entries
            .into_iter()
            .filter_map(|e| e.snapshot)
            .collect()
    }
}

/// A CreateVolume the way csi-provisioner sends it for a filesystem PVC.
pub fn volume(name: &str) -> CreateVolumeRequest {
    CreateVolumeRequest {
        name: name.into(),
        capacity_range: Some(CapacityRange {
            required_bytes: 64 << 20,
            limit_bytes: 0,
        }),
        volume_capabilities: vec![VolumeCapability {
            access_type: Some(AccessType::Mount(MountVolume::default())),
            access_mode: Some(AccessMode {
                mode: AccessModeKind::SingleNodeWriter as i32,
            }),
        }],
        ..Default::default()
    }
}

pub fn from_snapshot(mut r: CreateVolumeRequest, snapshot_id: &str) -> CreateVolumeRequest {
    r.volume_content_source = Some(VolumeContentSource {
        r#type: Some(ContentSource::Snapshot(SnapshotSource {
            snapshot_id: snapshot_id.into(),
        })),
    });
    r
}

pub fn dir_of(v: &Volume) -> PathBuf {
    PathBuf::from(&v.volume_context["path"])
}

/// The driver on `fs`, serving on a socket in `sock_dir`, and a client connected to it.
pub async fn driver(fs: &LoopBtrfs, sock_dir: &Path) -> (Serving, Csi) {
    let cfg = Config {
        endpoint: format!("unix://{}", sock_dir.join("csi.sock").display())
            .parse()
            .unwrap(),
        root: fs.root(),
        node_id: Some("node-1".parse().unwrap()),
    };
    let serving = server::start(&cfg).await.unwrap();
    let csi = Csi::connect(serving.socket()).await;
    (serving, csi)
}

pub fn assert_code<T: std::fmt::Debug>(r: Result<T, Status>, code: Code, what: &str) -> String {
    match r {
        Err(s) => {
            assert_eq!(s.code(), code, "{what}: {s:?}");
            s.message().to_owned()
        }
        Ok(v) => panic!("{what}: expected {code:?}, got {v:?}"),
    }
}

// ---- the Node service ----

impl Csi {
    pub async fn publish(&self, r: NodePublishVolumeRequest) -> Result<(), Status> {
        let _: NodePublishVolumeResponse = self.call(NODE, "NodePublishVolume", r).await?;
        Ok(())
    }

    pub async fn unpublish(&self, volume_id: &str, target: &str) -> Result<(), Status> {
        let r = NodeUnpublishVolumeRequest {
            volume_id: volume_id.into(),
            target_path: target.into(),
        };
        let _: NodeUnpublishVolumeResponse = self.call(NODE, "NodeUnpublishVolume", r).await?;
        Ok(())
    }
}

/// A NodePublishVolume the way kubelet sends it for a ReadWriteOnce filesystem PVC to a
/// driver with SINGLE_NODE_MULTI_WRITER.
pub fn publish(volume_id: &str, target: &Path) -> NodePublishVolumeRequest {
    NodePublishVolumeRequest {
        volume_id: volume_id.into(),
        target_path: target.to_str().unwrap().into(),
        volume_capability: Some(VolumeCapability {
            access_type: Some(AccessType::Mount(MountVolume::default())),
            access_mode: Some(AccessMode {
                mode: AccessModeKind::SingleNodeMultiWriter as i32,
            }),
        }),
        ..Default::default()
    }
}

pub fn in_mode(mut r: NodePublishVolumeRequest, mode: AccessModeKind) -> NodePublishVolumeRequest {
    if let Some(c) = r.volume_capability.as_mut() {
        c.access_mode = Some(AccessMode { mode: mode as i32 });
    }
    r
}

pub fn read_only(mut r: NodePublishVolumeRequest) -> NodePublishVolumeRequest {
    r.readonly = true;
    r
}

/// The per-mount options of every mount at `path`, read from the kernel's table (fields
/// 5 and 6 of `/proc/self/mountinfo`; test paths need no unescaping).
pub fn mounts_at(path: &Path) -> Vec<String> {
    let path = path.to_str().unwrap();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[4] == path).then(|| f[5].to_owned())
        })
        .collect()
}

/// A directory for target paths, outside the btrfs; whatever is still mounted under it
/// is unmounted on drop (also when a test panics), before the directory goes.
pub struct TargetDir {
    pub dir: TempDir,
}

impl TargetDir {
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("vtsnap-csi-targets-")
            .tempdir()
            .unwrap();
        Self { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn join(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }
}

impl Drop for TargetDir {
    fn drop(&mut self) {
        let Ok(table) = std::fs::read_to_string("/proc/self/mountinfo") else {
            return;
        };
        let mut points: Vec<PathBuf> = table
            .lines()
            .filter_map(|l| l.split(' ').nth(4).map(PathBuf::from))
            .filter(|p| p.starts_with(self.dir.path()))
            .collect();
        // Deepest and latest first.
        points.reverse();
        points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
        for p in points {
            let ok = Command::new("umount")
                .arg(&p)
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                let _ = Command::new("umount").arg("-l").arg(&p).status();
            }
        }
    }
}
