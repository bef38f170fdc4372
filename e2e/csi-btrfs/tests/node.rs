//! The Node service on a real btrfs file system: real bind mounts at target paths, seen
//! through the kernel's mount table and the file system, over real gRPC. Needs root,
//! `mkfs.btrfs`, `btrfs`, `losetup` and `mount`.

// Test helpers outside #[test] functions: a failure is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

use common::{
    Csi, LoopBtrfs, TargetDir, assert_code, dir_of, driver, in_mode, mounts_at, publish, read_only,
    run, tree, volume,
};
use tonic::Code;
use vtsnap_csi_btrfs::csi::*;
use vtsnap_csi_btrfs::server::{self, Config};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn options(target: &Path) -> Vec<String> {
    let all = mounts_at(target);
    assert_eq!(all.len(), 1, "one mount at {}: {all:?}", target.display());
    all[0].split(',').map(str::to_owned).collect()
}

fn write(path: &Path, text: &str) -> std::io::Result<()> {
    std::fs::write(path, text)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

/// The kernel's mount table under `dirs` (other tests mount and unmount elsewhere at the
/// same time): a refused request must not change it.
fn mounts_under(dirs: &[&Path]) -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| {
            l.split(' ')
                .nth(4)
                .is_some_and(|p| dirs.iter().any(|d| Path::new(p).starts_with(d)))
        })
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn a_published_volume_is_its_subvolume_bound_at_the_target_until_unpublished() {
    let fs = LoopBtrfs::new();
    let targets = TargetDir::new();
    let sock = tempfile::tempdir().unwrap();
    let (_serving, csi) = driver(&fs, sock.path()).await;
    let vol = csi.create_volume(volume("pvc-a")).await.unwrap();
    let vdir = dir_of(&vol);
    write(&vdir.join("before"), "on the volume").unwrap();

    // The CO makes the parent; the plugin makes the target.
    let pod = targets.join("pod-1");
    std::fs::create_dir(&pod).unwrap();
    let target = pod.join("mount");
    csi.publish(publish("pvc-a", &target)).await.unwrap();
    let opts = options(&target);
    assert!(opts.contains(&"rw".to_owned()), "{opts:?}");
    let (t, v) = (
        std::fs::metadata(&target).unwrap(),
        std::fs::metadata(&vdir).unwrap(),
    );
    assert_eq!(
        (t.dev(), t.ino()),
        (v.dev(), v.ino()),
        "the target shows the subvolume's root itself"
    );
    assert_eq!(read(&target.join("before")), "on the volume");
    write(&target.join("through"), "the bind").unwrap();
    assert_eq!(read(&vdir.join("through")), "the bind");

    // A retry is the same publication, not a second mount.
    csi.publish(publish("pvc-a", &target)).await.unwrap();
    assert_eq!(mounts_at(&target).len(), 1);

    // Unpublished: unmounted, the directory it made removed, the data kept.
    csi.unpublish("pvc-a", s(&target)).await.unwrap();
    assert!(mounts_at(&target).is_empty());
    assert!(!target.exists(), "the plugin removes the target it made");
    assert!(pod.is_dir(), "the CO's parent stays");
    assert_eq!(read(&vdir.join("through")), "the bind");

    // Retries, and targets that never were, are OK.
    csi.unpublish("pvc-a", s(&target)).await.unwrap();
    csi.unpublish("pvc-a", s(&pod.join("never"))).await.unwrap();
    csi.unpublish("pvc-a", s(&targets.join("no-parent/mount")))
        .await
        .unwrap();

    // An empty directory the CO made is mounted on, and removed after.
    std::fs::create_dir(&target).unwrap();
    csi.publish(publish("pvc-a", &target)).await.unwrap();
    assert_eq!(read(&target.join("before")), "on the volume");
    csi.unpublish("pvc-a", s(&target)).await.unwrap();
    assert!(!target.exists());

    csi.delete_volume("pvc-a").await.unwrap();
    assert!(!vdir.exists());
}

#[tokio::test]
async fn a_read_only_publish_refuses_writes_with_erofs_and_keeps_its_flags() {
    let fs = LoopBtrfs::new();
    let targets = TargetDir::new();
    let sock = tempfile::tempdir().unwrap();
    let (_serving, csi) = driver(&fs, sock.path()).await;
    let a = dir_of(&csi.create_volume(volume("pvc-a")).await.unwrap());
    let b = dir_of(&csi.create_volume(volume("pvc-b")).await.unwrap());
    write(&a.join("f"), "a").unwrap();

    // readonly: true.
    let ro = targets.join("ro");
    csi.publish(read_only(publish("pvc-a", &ro))).await.unwrap();
    assert!(options(&ro).contains(&"ro".to_owned()));
    let e = write(&ro.join("f"), "tampered").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
    let e = std::fs::create_dir(ro.join("d")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
    assert_eq!(read(&ro.join("f")), "a");
    write(&a.join("f"), "the volume itself stays writable").unwrap();
    assert_eq!(read(&ro.join("f")), "the volume itself stays writable");

    // The same target asked for writable, or with other flags: ALREADY_EXISTS, and the
    // mount is left as it was. The same flags in another order are a retry.
    assert_code(
        csi.publish(publish("pvc-a", &ro)).await,
        Code::AlreadyExists,
        "read-write over a read-only publication",
    );
    let mut noexec = read_only(publish("pvc-a", &ro));
    if let Some(AccessType::Mount(m)) = noexec
        .volume_capability
        .as_mut()
        .and_then(|c| c.access_type.as_mut())
    {
        m.mount_flags = vec!["noexec".into()];
    }
    assert_code(
        csi.publish(noexec).await,
        Code::AlreadyExists,
        "other mount flags",
    );
    assert!(options(&ro).contains(&"ro".to_owned()));
    csi.publish(read_only(publish("pvc-a", &ro))).await.unwrap();

    // A reader-only access mode is read-only whatever `readonly` says.
    let reader = targets.join("reader");
    csi.publish(in_mode(
        publish("pvc-b", &reader),
        AccessModeKind::SingleNodeReaderOnly,
    ))
    .await
    .unwrap();
    let e = write(&reader.join("g"), "x").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
    assert!(!b.join("g").exists());

    // Mount flags become the bind's own.
    let flagged = targets.join("flagged");
    let mut r = publish("pvc-b", &flagged);
    r = in_mode(r, AccessModeKind::MultiNodeMultiWriter);
    if let Some(AccessType::Mount(m)) = r
        .volume_capability
        .as_mut()
        .and_then(|c| c.access_type.as_mut())
    {
        m.mount_flags = ["nosuid", "nodev", "noexec", "noatime", "rw"]
            .map(String::from)
            .to_vec();
    }
    csi.publish(r.clone()).await.unwrap();
    let opts = options(&flagged);
    for o in ["rw", "nosuid", "nodev", "noexec", "noatime"] {
        assert!(opts.contains(&o.to_owned()), "{o} in {opts:?}");
    }
    write(&flagged.join("h"), "writable").unwrap();
    if let Some(AccessType::Mount(m)) = r
        .volume_capability
        .as_mut()
        .and_then(|c| c.access_type.as_mut())
    {
        m.mount_flags.reverse();
    }
    csi.publish(r).await.unwrap();
    assert_eq!(mounts_at(&flagged).len(), 1);

    for (v, t) in [("pvc-a", &ro), ("pvc-b", &reader), ("pvc-b", &flagged)] {
        csi.unpublish(v, s(t)).await.unwrap();
        assert!(mounts_at(t).is_empty() && !t.exists(), "{}", t.display());
    }
}

#[tokio::test]
async fn second_targets_and_taken_targets_follow_the_specs_table() {
    let fs = LoopBtrfs::new();
    let targets = TargetDir::new();
    let sock = tempfile::tempdir().unwrap();
    let (_serving, csi) = driver(&fs, sock.path()).await;
    let a = dir_of(&csi.create_volume(volume("pvc-a")).await.unwrap());
    csi.create_volume(volume("pvc-b")).await.unwrap();
    write(&a.join("owner"), "pvc-a").unwrap();
    let (t1, t2) = (targets.join("t1"), targets.join("t2"));

    // One target only for SINGLE_NODE_SINGLE_WRITER (ReadWriteOncePod) and
    // SINGLE_NODE_WRITER; the second is refused before it is made.
    let single = |t: &Path, mode| in_mode(publish("pvc-a", t), mode);
    csi.publish(single(&t1, AccessModeKind::SingleNodeSingleWriter))
        .await
        .unwrap();
    for mode in [
        AccessModeKind::SingleNodeSingleWriter,
        AccessModeKind::SingleNodeWriter,
    ] {
        let m = assert_code(
            csi.publish(single(&t2, mode)).await,
            Code::FailedPrecondition,
            &format!("{mode:?} at a second target"),
        );
        assert!(m.contains(s(&t1)), "{m}");
        assert!(!t2.exists());
    }

    // SINGLE_NODE_MULTI_WRITER (ReadWriteOnce) may be at several targets of this node.
    let (u1, u2) = (targets.join("u1"), targets.join("u2"));
    csi.publish(publish("pvc-b", &u1)).await.unwrap();
    csi.publish(publish("pvc-b", &u2)).await.unwrap();
    write(&u1.join("seen"), "by both").unwrap();
    assert_eq!(read(&u2.join("seen")), "by both");

    // Another volume at a taken target: FAILED_PRECONDITION, and the target keeps its own.
    let m = assert_code(
        csi.publish(publish("pvc-b", &t1)).await,
        Code::FailedPrecondition,
        "another volume at a mounted target",
    );
    assert!(m.contains("another mount"), "{m}");
    assert_code(
        csi.unpublish("pvc-b", s(&t1)).await,
        Code::FailedPrecondition,
        "unpublishing another volume's mount",
    );
    assert_eq!(read(&t1.join("owner")), "pvc-a");
    assert_eq!(mounts_at(&t1).len(), 1);

    // A published volume is in use: DeleteVolume refuses it, and so does a bind of a
    // directory inside it (kubelet's subPath) once the publication is gone.
    let m = assert_code(
        csi.delete_volume("pvc-a").await,
        Code::FailedPrecondition,
        "deleting a published volume",
    );
    assert!(m.contains("in use") && m.contains(s(&t1)), "{m}");
    std::fs::create_dir(a.join("sub")).unwrap();
    let sub = targets.join("subpath");
    std::fs::create_dir(&sub).unwrap();
    run(Command::new("mount")
        .arg("--bind")
        .arg(t1.join("sub"))
        .arg(&sub));
    csi.unpublish("pvc-a", s(&t1)).await.unwrap();
    let m = assert_code(
        csi.delete_volume("pvc-a").await,
        Code::FailedPrecondition,
        "deleting a volume with a subPath bind",
    );
    assert!(m.contains(s(&sub)), "{m}");
    assert_eq!(read(&a.join("owner")), "pvc-a");
    run(Command::new("umount").arg(&sub));
    csi.delete_volume("pvc-a").await.unwrap();

    for t in [&u1, &u2] {
        csi.unpublish("pvc-b", s(t)).await.unwrap();
    }
    csi.delete_volume("pvc-b").await.unwrap();
}

#[tokio::test]
async fn bad_node_requests_get_the_specs_codes_and_touch_nothing() {
    let fs = LoopBtrfs::new();
    let targets = TargetDir::new();
    let sock = tempfile::tempdir().unwrap();
    let (_serving, csi) = driver(&fs, sock.path()).await;
    csi.create_volume(volume("pvc-a")).await.unwrap();
    let full = targets.join("full");
    std::fs::create_dir(&full).unwrap();
    write(&full.join("data"), "not ours").unwrap();
    write(&targets.join("file"), "").unwrap();
    std::fs::create_dir(targets.join("empty")).unwrap();
    std::os::unix::fs::symlink(targets.join("empty"), targets.join("link")).unwrap();
    let ours = [targets.path(), fs.dir.path()];
    let (layout, target_layout, table) =
        (tree(&fs.mnt()), tree(targets.path()), mounts_under(&ours));

    let ok = targets.join("t");
    let long_id = "x".repeat(4096);
    for bad in ["", "../x", "/etc", "a/b", "a\0b", ".", long_id.as_str()] {
        let m = assert_code(
            csi.publish(publish(bad, &ok)).await,
            Code::InvalidArgument,
            &format!("publish volume_id {:?}", bad.get(..20).unwrap_or(bad)),
        );
        assert!(m.starts_with("volume_id "), "{m}");
        let m = assert_code(
            csi.unpublish(bad, s(&ok)).await,
            Code::InvalidArgument,
            "unpublish volume_id",
        );
        assert!(m.starts_with("volume_id "), "{m}");
    }

    let up = format!("{}/../../etc", targets.path().display());
    let long_path = format!("{}/{}", targets.path().display(), "n/".repeat(2100));
    let long_name = format!("{}/{}", targets.path().display(), "n".repeat(256));
    for bad in [
        "",
        "relative/t",
        "/",
        up.as_str(),
        "/tmp/./t",
        "/tmp//t",
        "/tmp/t/",
        "/tmp/t\0x",
        long_path.as_str(),
        long_name.as_str(),
    ] {
        let mut r = publish("pvc-a", &ok);
        r.target_path = bad.into();
        let what = format!("target_path {:?}", bad.get(..40).unwrap_or(bad));
        let m = assert_code(csi.publish(r).await, Code::InvalidArgument, &what);
        assert!(m.starts_with("target_path "), "{what}: {m}");
        let m = assert_code(
            csi.unpublish("pvc-a", bad).await,
            Code::InvalidArgument,
            &what,
        );
        assert!(m.starts_with("target_path "), "{what}: {m}");
    }

    // Capabilities: malformed is INVALID_ARGUMENT; well-formed but beyond what a
    // subvolume can be is FAILED_PRECONDITION ("Exceeds capabilities").
    let cap = |f: &dyn Fn(&mut VolumeCapability)| {
        let mut r = publish("pvc-a", &ok);
        f(r.volume_capability.as_mut().unwrap());
        r
    };
    let mount = |f: &dyn Fn(&mut MountVolume)| {
        cap(&|c| {
            let mut m = MountVolume::default();
            f(&mut m);
            c.access_type = Some(AccessType::Mount(m));
        })
    };
    let mut none = publish("pvc-a", &ok);
    none.volume_capability = None;
    let cases: Vec<(NodePublishVolumeRequest, Code, &str)> = vec![
        (none, Code::InvalidArgument, "volume_capability is required"),
        (
            cap(&|c| c.access_type = None),
            Code::InvalidArgument,
            "volume_capability.access_type",
        ),
        (
            cap(&|c| c.access_mode = Some(AccessMode { mode: 42 })),
            Code::InvalidArgument,
            "volume_capability.access_mode",
        ),
        (
            mount(&|m| m.mount_flags = vec!["x".repeat(5000)]),
            Code::InvalidArgument,
            "volume_capability.mount.mount_flags",
        ),
        (
            cap(&|c| c.access_type = Some(AccessType::Block(BlockVolume {}))),
            Code::FailedPrecondition,
            "volume_capability.block",
        ),
        (
            mount(&|m| m.fs_type = "ext4".into()),
            Code::FailedPrecondition,
            "volume_capability.mount.fs_type",
        ),
        (
            mount(&|m| m.volume_mount_group = "2000".into()),
            Code::FailedPrecondition,
            "volume_capability.mount.volume_mount_group",
        ),
        (
            mount(&|m| m.mount_flags = vec!["bind".into()]),
            Code::FailedPrecondition,
            "volume_capability.mount.mount_flags",
        ),
    ];
    for (r, code, prefix) in cases {
        let m = assert_code(csi.publish(r).await, code, prefix);
        assert!(m.starts_with(prefix), "{prefix}: {m}");
    }

    // Unknown volumes; targets that cannot be used.
    assert_code(
        csi.publish(publish("pvc-missing", &ok)).await,
        Code::NotFound,
        "publish of an unknown volume",
    );
    assert_code(
        csi.unpublish("pvc-missing", s(&ok)).await,
        Code::NotFound,
        "unpublish of an unknown volume",
    );
    for (t, code, words) in [
        (
            fs.root().join("volumes/x"),
            Code::InvalidArgument,
            "inside the driver's root",
        ),
        (
            fs.root().join("volumes/pvc-a"),
            Code::InvalidArgument,
            "inside the driver's root",
        ),
        (fs.mnt(), Code::InvalidArgument, "above the driver's root"),
        (
            targets.join("no-parent/t"),
            Code::FailedPrecondition,
            "parent directory does not exist",
        ),
        (full.clone(), Code::FailedPrecondition, "with content"),
        (targets.join("file"), Code::FailedPrecondition, "a file"),
        (targets.join("link"), Code::FailedPrecondition, "a symlink"),
    ] {
        let what = format!("publish at {}", t.display());
        let m = assert_code(csi.publish(publish("pvc-a", &t)).await, code, &what);
        assert!(m.contains(words), "{what}: {m}");
    }
    // An unpublish leaves what it did not make: a directory with content, a file.
    for t in [&full, &targets.join("file"), &targets.join("link")] {
        csi.unpublish("pvc-a", s(t)).await.unwrap();
    }
    assert_eq!(read(&full.join("data")), "not ours");

    assert_eq!(
        tree(&fs.mnt()),
        layout,
        "nothing made or removed on the btrfs"
    );
    assert_eq!(tree(targets.path()), target_layout, "nor among the targets");
    assert_eq!(mounts_under(&ours), table, "nothing mounted or unmounted");
}

#[tokio::test]
async fn node_info_capabilities_and_validation_answer_what_is_implemented() {
    let fs = LoopBtrfs::new();
    let sock = tempfile::tempdir().unwrap();
    let (_serving, csi) = driver(&fs, sock.path()).await;

    let info: NodeGetInfoResponse = csi
        .call(NODE, "NodeGetInfo", NodeGetInfoRequest {})
        .await
        .unwrap();
    assert_eq!(info.node_id, "node-1");
    assert_eq!(info.max_volumes_per_node, 0);
    let caps: NodeGetCapabilitiesResponse = csi
        .call(NODE, "NodeGetCapabilities", NodeGetCapabilitiesRequest {})
        .await
        .unwrap();
    let caps: Vec<i32> = caps
        .capabilities
        .into_iter()
        .filter_map(|c| c.r#type.map(|NodeCapabilityType::Rpc(r)| r.r#type))
        .collect();
    assert_eq!(
        caps,
        [NodeRpcType::SingleNodeMultiWriter as i32],
        "no staging, stats, expansion or mount group"
    );

    let vol = csi.create_volume(volume("pvc-a")).await.unwrap();
    let mount = |mode: AccessModeKind| VolumeCapability {
        access_type: Some(AccessType::Mount(MountVolume::default())),
        access_mode: Some(AccessMode { mode: mode as i32 }),
    };
    let validate = |caps: Vec<VolumeCapability>| ValidateVolumeCapabilitiesRequest {
        volume_id: "pvc-a".into(),
        volume_capabilities: caps,
        ..Default::default()
    };
    let call = |r: ValidateVolumeCapabilitiesRequest| {
        let csi = &csi;
        async move {
            csi.call::<_, ValidateVolumeCapabilitiesResponse>(
                CONTROLLER,
                "ValidateVolumeCapabilities",
                r,
            )
            .await
        }
    };

    let all_modes: Vec<VolumeCapability> = (1..=7)
        .map(|m| mount(AccessModeKind::try_from(m).unwrap()))
        .collect();
    let mut r = validate(all_modes.clone());
    r.volume_context = vol.volume_context.clone();
    let ok = call(r).await.unwrap();
    let confirmed = ok.confirmed.unwrap();
    assert_eq!(confirmed.volume_capabilities, all_modes);
    assert_eq!(confirmed.volume_context, vol.volume_context);

    let block = VolumeCapability {
        access_type: Some(AccessType::Block(BlockVolume {})),
        ..mount(AccessModeKind::SingleNodeWriter)
    };
    let no = call(validate(vec![
        mount(AccessModeKind::SingleNodeWriter),
        block,
    ]))
    .await
    .unwrap();
    assert_eq!(no.confirmed, None);
    assert!(
        no.message.contains("volume_capabilities[1].block"),
        "{}",
        no.message
    );
    let mut other_context = validate(vec![mount(AccessModeKind::SingleNodeWriter)]);
    other_context
        .volume_context
        .insert("path".into(), "/elsewhere".into());
    let no = call(other_context).await.unwrap();
    assert!(no.confirmed.is_none() && no.message.contains("volume_context"));
    let mut other_params = validate(vec![mount(AccessModeKind::SingleNodeWriter)]);
    other_params.parameters.insert("k".into(), "v".into());
    let no = call(other_params).await.unwrap();
    assert!(no.confirmed.is_none() && no.message.contains("parameters"));

    let m = assert_code(
        call(validate(vec![])).await,
        Code::InvalidArgument,
        "no capabilities",
    );
    assert!(m.contains("volume_capabilities is required"), "{m}");
    let mut no_id = validate(vec![mount(AccessModeKind::SingleNodeWriter)]);
    no_id.volume_id = String::new();
    assert_code(call(no_id).await, Code::InvalidArgument, "no volume id");
    let mut malformed = mount(AccessModeKind::SingleNodeWriter);
    malformed.access_mode = None;
    assert_code(
        call(validate(vec![malformed])).await,
        Code::InvalidArgument,
        "a capability without a mode",
    );
    let mut unknown = validate(vec![mount(AccessModeKind::SingleNodeWriter)]);
    unknown.volume_id = "pvc-missing".into();
    assert_code(call(unknown).await, Code::NotFound, "an unknown volume");

    // CreateVolume refuses what a volume could never serve, as Validate does.
    let mut ext4 = volume("pvc-ext4");
    if let Some(AccessType::Mount(m)) = ext4.volume_capabilities[0].access_type.as_mut() {
        m.fs_type = "ext4".into();
    }
    let m = assert_code(
        csi.create_volume(ext4).await,
        Code::InvalidArgument,
        "an ext4 volume",
    );
    assert!(m.starts_with("volume_capabilities[0].mount.fs_type"), "{m}");

    // Without --node-id there is no answer to give.
    let sock2 = tempfile::tempdir().unwrap();
    let anonymous = server::start(&Config {
        endpoint: format!("unix://{}", sock2.path().join("csi.sock").display())
            .parse()
            .unwrap(),
        root: fs.root(),
        node_id: None,
    })
    .await
    .unwrap();
    let csi2 = Csi::connect(anonymous.socket()).await;
    let r: Result<NodeGetInfoResponse, _> =
        csi2.call(NODE, "NodeGetInfo", NodeGetInfoRequest {}).await;
    let m = assert_code(r, Code::FailedPrecondition, "no node id");
    assert!(m.contains("--node-id"), "{m}");
}

#[tokio::test]
async fn a_restarted_driver_knows_its_publications_from_the_mount_table() {
    let fs = LoopBtrfs::new();
    let targets = TargetDir::new();
    let sock = tempfile::tempdir().unwrap();
    let (serving, csi) = driver(&fs, sock.path()).await;
    csi.create_volume(volume("pvc-a")).await.unwrap();
    let t = targets.join("t");
    csi.publish(read_only(publish("pvc-a", &t))).await.unwrap();
    drop(csi);
    serving.stop().await.unwrap();

    let (_serving, csi) = driver(&fs, sock.path()).await;
    csi.publish(read_only(publish("pvc-a", &t))).await.unwrap();
    assert_eq!(mounts_at(&t).len(), 1, "a retry after a restart");
    assert_code(
        csi.publish(publish("pvc-a", &t)).await,
        Code::AlreadyExists,
        "read-write over the read-only publication of the driver before",
    );
    csi.unpublish("pvc-a", s(&t)).await.unwrap();
    assert!(mounts_at(&t).is_empty() && !t.exists());
}
