//! The driver on a real btrfs file system (a loop device), spoken to over real gRPC
//! through its unix socket. Needs root, `mkfs.btrfs`, `btrfs` and `losetup`.

// Test helpers outside #[test] functions: a failure is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{Csi, LoopBtrfs, assert_code, dir_of, driver, from_snapshot, run, tree, volume};
use tonic::Code;
use vtsnap_csi_btrfs::csi::*;

fn readonly(path: &Path) -> String {
    run(Command::new("btrfs")
        .args(["property", "get", "-ts"])
        .arg(path)
        .arg("ro"))
}

fn unix_nanos(t: std::time::SystemTime) -> i128 {
    t.duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as i128
}

/// The subvolume's creation time as btrfs prints it, converted by `date`.
fn kernel_otime(path: &Path) -> i64 {
    let show = run(Command::new("btrfs")
        .args(["subvolume", "show"])
        .arg(path)
        .env("TZ", "UTC"));
    let line = show
        .lines()
        .find_map(|l| l.trim().strip_prefix("Creation time:"))
        .unwrap()
        .trim()
        .to_owned();
    run(Command::new("date").args(["-u", "+%s", "-d", &line]))
        .parse()
        .unwrap()
}

// ---- the tests ----

#[tokio::test]
async fn a_snapshot_holds_its_cut_and_a_clone_of_it_is_writable() {
    let fs = LoopBtrfs::new();
    let sock = tempfile::tempdir().unwrap();
    let (serving, csi) = driver(&fs, sock.path()).await;

    let info: GetPluginInfoResponse = csi
        .call(IDENTITY, "GetPluginInfo", GetPluginInfoRequest {})
        .await
        .unwrap();
    assert_eq!(info.name, "btrfs.csi.vtsnap.io");
    assert_eq!(info.vendor_version, env!("CARGO_PKG_VERSION"));
    let probe: ProbeResponse = csi.call(IDENTITY, "Probe", ProbeRequest {}).await.unwrap();
    assert_eq!(probe.ready, Some(BoolValue { value: true }));
    let plugin: GetPluginCapabilitiesResponse = csi
        .call(
            IDENTITY,
            "GetPluginCapabilities",
            GetPluginCapabilitiesRequest {},
        )
        .await
        .unwrap();
    assert_eq!(
        plugin.capabilities[0].r#type,
        Some(PluginCapabilityType::Service(PluginCapabilityService {
            r#type: PluginServiceType::ControllerService as i32
        }))
    );
    let caps: ControllerGetCapabilitiesResponse = csi
        .call(
            CONTROLLER,
            "ControllerGetCapabilities",
            ControllerGetCapabilitiesRequest {},
        )
        .await
        .unwrap();
    assert_eq!(caps.capabilities.len(), 3);
    assert_eq!(
        plugin.capabilities.len(),
        1,
        "the Node service is served, not advertised"
    );
    let unserved: Result<ProbeResponse, _> =
        csi.call(NODE, "NodeStageVolume", ProbeRequest {}).await;
    assert_code(unserved, Code::Unimplemented, "no staging");

    // An empty volume, written to.
    let vol = csi.create_volume(volume("pvc-data")).await.unwrap();
    assert_eq!(vol.volume_id, "pvc-data");
    assert_eq!(vol.capacity_bytes, 64 << 20);
    assert_eq!(vol.content_source, None);
    let vdir = dir_of(&vol);
    assert_eq!(vdir, fs.root().join("volumes/pvc-data"));
    assert_eq!(readonly(&vdir), "ro=false");
    std::fs::write(vdir.join("table.ibd"), "before the cut").unwrap();

    // The cut, then a change after it.
    let before = unix_nanos(std::time::SystemTime::now());
    let snap = csi.create_snapshot("snapshot-1", "pvc-data").await.unwrap();
    let after = unix_nanos(std::time::SystemTime::now());
    std::fs::write(vdir.join("table.ibd"), "after the cut").unwrap();
    assert_eq!(snap.snapshot_id, "snapshot-1");
    assert_eq!(snap.source_volume_id, "pvc-data");
    assert!(snap.ready_to_use);
    assert_eq!(
        snap.size_bytes,
        64 << 20,
        "restores into a volume like its source"
    );
    let cut = snap.creation_time.clone().unwrap();
    let cut_nanos = i128::from(cut.seconds) * 1_000_000_000 + i128::from(cut.nanos);
    assert!(
        (before..=after).contains(&cut_nanos),
        "the cut {cut:?} is within the call"
    );
    let sdir = fs.root().join("snapshots/snapshot-1");
    assert_eq!(
        cut.seconds,
        kernel_otime(&sdir),
        "btrfs's own record of the cut"
    );
    assert_eq!(readonly(&sdir), "ro=true");
    let e = std::fs::write(sdir.join("table.ibd"), "tamper").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
    assert_eq!(
        std::fs::read_to_string(sdir.join("table.ibd")).unwrap(),
        "before the cut"
    );

    // A volume from the snapshot: its content, writable, independent of both.
    let clone = csi
        .create_volume(from_snapshot(volume("pvc-restored"), "snapshot-1"))
        .await
        .unwrap();
    assert_eq!(
        clone.content_source,
        Some(VolumeContentSource {
            r#type: Some(ContentSource::Snapshot(SnapshotSource {
                snapshot_id: "snapshot-1".into()
            }))
        })
    );
    let cdir = dir_of(&clone);
    assert_eq!(readonly(&cdir), "ro=false");
    assert_eq!(
        std::fs::read_to_string(cdir.join("table.ibd")).unwrap(),
        "before the cut"
    );
    std::fs::write(cdir.join("table.ibd"), "restored and written").unwrap();
    assert_eq!(
        std::fs::read_to_string(sdir.join("table.ibd")).unwrap(),
        "before the cut"
    );
    assert_eq!(
        std::fs::read_to_string(vdir.join("table.ibd")).unwrap(),
        "after the cut"
    );

    let listed = csi.list_snapshots(ListSnapshotsRequest::default()).await;
    assert_eq!(listed, [snap]);

    drop(csi);
    serving.stop().await.unwrap();
    assert!(
        !sock.path().join("csi.sock").exists(),
        "the socket is removed"
    );
}

#[tokio::test]
async fn retries_get_the_same_object_and_conflicts_and_unknown_sources_are_refused() {
    let fs = LoopBtrfs::new();
    let sock = tempfile::tempdir().unwrap();
    let (_serving, csi) = driver(&fs, sock.path()).await;

    // Eight concurrent creates of one name: one volume.
    let creates = (0..8).map(|_| csi.create_volume(volume("pvc-a")));
    let vols = futures::future::join_all(creates).await;
    for v in &vols {
        assert_eq!(v.as_ref().unwrap(), vols[0].as_ref().unwrap());
    }
    let again = csi.create_volume(volume("pvc-a")).await.unwrap();
    assert_eq!(&again, vols[0].as_ref().unwrap());

    let mut bigger = volume("pvc-a");
    bigger.capacity_range = Some(CapacityRange {
        required_bytes: 128 << 20,
        limit_bytes: 0,
    });
    let m = assert_code(
        csi.create_volume(bigger).await,
        Code::AlreadyExists,
        "same name, larger size",
    );
    assert!(m.contains("pvc-a"), "{m}");
    let mut other_params = volume("pvc-a");
    other_params.parameters.insert("k".into(), "v".into());
    assert_code(
        csi.create_volume(other_params).await,
        Code::AlreadyExists,
        "same name, other parameters",
    );

    let s1 = csi.create_snapshot("snap-a", "pvc-a").await.unwrap();
    let s2 = csi.create_snapshot("snap-a", "pvc-a").await.unwrap();
    assert_eq!(s1, s2, "a retry reports the first cut");
    csi.create_volume(volume("pvc-b")).await.unwrap();
    let m = assert_code(
        csi.create_snapshot("snap-a", "pvc-b").await,
        Code::AlreadyExists,
        "same snapshot name, other source",
    );
    assert!(m.contains("pvc-a") && m.contains("pvc-b"), "{m}");

    assert_code(
        csi.create_snapshot("snap-x", "pvc-missing").await,
        Code::NotFound,
        "unknown source volume",
    );
    assert_code(
        csi.create_volume(from_snapshot(volume("pvc-c"), "snap-missing"))
            .await,
        Code::NotFound,
        "unknown source snapshot",
    );
    let mut too_small = from_snapshot(volume("pvc-c"), "snap-a");
    too_small.capacity_range = Some(CapacityRange {
        required_bytes: 1 << 20,
        limit_bytes: 1 << 20,
    });
    assert_code(
        csi.create_volume(too_small).await,
        Code::OutOfRange,
        "smaller than its snapshot",
    );
    assert!(!fs.root().join("volumes/pvc-c").exists());
    assert!(!fs.root().join("snapshots/snap-x").exists());
}

#[tokio::test]
async fn a_class_parameter_delays_the_cut_and_unknown_parameters_are_refused() {
    let fs = LoopBtrfs::new();
    let sock = tempfile::tempdir().unwrap();
    let (_serving, csi) = driver(&fs, sock.path()).await;
    csi.create_volume(volume("pvc-a")).await.unwrap();

    // The cut is taken after the delay: its creation time is at least that much later
    // than the request (the driver reads the clock after the wait).
    let asked = unix_nanos(std::time::SystemTime::now());
    let snap = csi
        .create_snapshot_with(
            "snap-slow",
            "pvc-a",
            &[
                ("cutDelayMillis", "1500"),
                ("csi.storage.k8s.io/volumesnapshot/name", "slow"),
            ],
        )
        .await
        .unwrap();
    let cut = snap.creation_time.unwrap();
    let cut = i128::from(cut.seconds) * 1_000_000_000 + i128::from(cut.nanos);
    assert!(
        cut >= asked + 1_500_000_000,
        "cut at {cut}, asked at {asked}: the delay was not waited"
    );

    let m = assert_code(
        csi.create_snapshot_with("snap-x", "pvc-a", &[("cutDelay", "8s")])
            .await,
        Code::InvalidArgument,
        "an unknown parameter",
    );
    assert!(m.contains("parameters.cutDelay"), "{m}");
    assert_code(
        csi.create_snapshot_with("snap-x", "pvc-a", &[("cutDelayMillis", "600000")])
            .await,
        Code::InvalidArgument,
        "a delay above the sidecar's timeout",
    );
    assert!(!fs.root().join("snapshots/snap-x").exists());
}

#[tokio::test]
async fn hostile_names_and_ids_are_refused_and_nothing_is_made_outside_the_root() {
    let fs = LoopBtrfs::new();
    let sock = tempfile::tempdir().unwrap();
    let (_serving, csi) = driver(&fs, sock.path()).await;
    let layout = tree(&fs.mnt());

    let escape = format!("/var/tmp/vtsnap-csi-escape-{}", std::process::id());
    let long = "x".repeat(4096);
    let hostile = [
        "../x",
        "../../../../var/tmp/x",
        escape.as_str(),
        "a/../../x",
        "..",
        ".",
        "a\0b",
        "\0",
        "a\nb",
        long.as_str(),
        "",
    ];
    for bad in hostile {
        let what = |rpc: &str| format!("{rpc} with {:?}", bad.get(..40).unwrap_or(bad));
        let m = assert_code(
            csi.create_volume(volume(bad)).await,
            Code::InvalidArgument,
            &what("CreateVolume name"),
        );
        assert!(m.starts_with("name "), "{m}");
        let m = assert_code(
            csi.create_volume(from_snapshot(volume("pvc-ok"), bad))
                .await,
            Code::InvalidArgument,
            &what("CreateVolume source"),
        );
        assert!(
            m.starts_with("volume_content_source.snapshot.snapshot_id "),
            "{m}"
        );
        let m = assert_code(
            csi.create_snapshot(bad, "pvc-ok").await,
            Code::InvalidArgument,
            &what("CreateSnapshot name"),
        );
        assert!(m.starts_with("name "), "{m}");
        let m = assert_code(
            csi.create_snapshot("snap-ok", bad).await,
            Code::InvalidArgument,
            &what("CreateSnapshot source"),
        );
        assert!(m.starts_with("source_volume_id "), "{m}");
        let m = assert_code(
            csi.delete_volume(bad).await,
            Code::InvalidArgument,
            &what("DeleteVolume"),
        );
        assert!(m.starts_with("volume_id "), "{m}");
        let m = assert_code(
            csi.delete_snapshot(bad).await,
            Code::InvalidArgument,
            &what("DeleteSnapshot"),
        );
        assert!(m.starts_with("snapshot_id "), "{m}");
        let listed = csi
            .list_snapshots(ListSnapshotsRequest {
                snapshot_id: bad.into(),
                ..Default::default()
            })
            .await;
        assert!(listed.is_empty());
    }

    assert_eq!(tree(&fs.mnt()), layout, "nothing was created or removed");
    assert!(
        layout.iter().all(|p| p == "csi" || p.starts_with("csi/")),
        "{layout:?}"
    );
    assert!(!Path::new(&escape).exists());
    assert!(!fs.dir.path().join("x").exists());
}

#[tokio::test]
async fn deletes_are_idempotent_and_a_restarted_driver_knows_what_was_made() {
    let fs = LoopBtrfs::new();
    let sock = tempfile::tempdir().unwrap();
    let (serving, csi) = driver(&fs, sock.path()).await;

    let vol = csi.create_volume(volume("pvc-keep")).await.unwrap();
    std::fs::write(dir_of(&vol).join("f"), "kept").unwrap();
    let snap = csi.create_snapshot("snap-keep", "pvc-keep").await.unwrap();
    csi.create_volume(volume("pvc-gone")).await.unwrap();
    csi.create_snapshot("snap-gone", "pvc-gone").await.unwrap();
    drop(csi);
    serving.stop().await.unwrap();

    // What a crash leaves: a subvolume without a record, a half-written record.
    let leftover = fs.root().join("volumes/pvc-crashed");
    run(Command::new("btrfs")
        .args(["-q", "subvolume", "create"])
        .arg(&leftover));
    std::fs::write(leftover.join("partial"), "never handed out").unwrap();
    let temp = fs.root().join("meta/volumes/.pvc-crashed.json.tmp");
    std::fs::write(&temp, "{\"version\":").unwrap();

    let (serving, csi) = driver(&fs, sock.path()).await;
    assert!(!temp.exists(), "a half-written record is removed at start");
    let listed = csi.list_snapshots(ListSnapshotsRequest::default()).await;
    let ids: Vec<&str> = listed.iter().map(|s| s.snapshot_id.as_str()).collect();
    assert_eq!(ids, ["snap-gone", "snap-keep"]);
    assert_eq!(
        listed[1], snap,
        "the same cut time and size after a restart"
    );
    assert_eq!(
        csi.create_snapshot("snap-keep", "pvc-keep").await.unwrap(),
        snap
    );
    assert_eq!(csi.create_volume(volume("pvc-keep")).await.unwrap(), vol);
    assert_code(
        csi.create_snapshot("snap-keep", "pvc-gone").await,
        Code::AlreadyExists,
        "a conflict is still a conflict after a restart",
    );
    let restored = csi
        .create_volume(from_snapshot(volume("pvc-again"), "snap-keep"))
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(dir_of(&restored).join("f")).unwrap(),
        "kept"
    );

    let fresh = csi.create_volume(volume("pvc-crashed")).await.unwrap();
    assert!(
        !dir_of(&fresh).join("partial").exists(),
        "the leftover was replaced by an empty volume"
    );

    // Deletes: twice each, and of ids that never existed.
    for _ in 0..2 {
        csi.delete_snapshot("snap-gone").await.unwrap();
        csi.delete_volume("pvc-gone").await.unwrap();
        csi.delete_snapshot("snap-never").await.unwrap();
        csi.delete_volume("pvc-never").await.unwrap();
    }
    for gone in [
        "volumes/pvc-gone",
        "snapshots/snap-gone",
        "meta/volumes/pvc-gone.json",
        "meta/snapshots/snap-gone.json",
    ] {
        assert!(!fs.root().join(gone).exists(), "{gone}");
    }
    let subvolumes = run(Command::new("btrfs")
        .args(["subvolume", "list", "-o"])
        .arg(fs.root().join("volumes")));
    assert!(!subvolumes.contains("pvc-gone"), "{subvolumes}");

    // A snapshot outlives its source volume, and a clone its snapshot.
    csi.delete_volume("pvc-keep").await.unwrap();
    let listed = csi
        .list_snapshots(ListSnapshotsRequest {
            snapshot_id: "snap-keep".into(),
            ..Default::default()
        })
        .await;
    assert_eq!(listed, [snap]);
    csi.delete_snapshot("snap-keep").await.unwrap();
    assert_eq!(
        std::fs::read_to_string(dir_of(&restored).join("f")).unwrap(),
        "kept"
    );
    assert!(
        csi.list_snapshots(ListSnapshotsRequest::default())
            .await
            .is_empty()
    );

    drop(csi);
    serving.stop().await.unwrap();
}

#[tokio::test]
async fn the_binary_serves_on_its_endpoint_and_stops_on_sigterm() {
    use tokio::io::AsyncBufReadExt;

    let fs = LoopBtrfs::new();
    let sock = tempfile::tempdir().unwrap();
    let socket = sock.path().join("csi.sock");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_vtsnap-csi-btrfs"))
        .env(
            "VTSNAP_CSI_ENDPOINT",
            format!("unix://{}", socket.display()),
        )
        .env("VTSNAP_CSI_ROOT", fs.root())
        .args(["--node-id", "node-7", "--log-format", "json"])
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // It logs once it listens; the line is the readiness signal, not a guess of time.
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let ready = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(l) = lines.next_line().await.unwrap() {
            if l.contains("serving CSI") {
                return l;
            }
        }
        panic!("the driver ended without serving");
    })
    .await
    .unwrap();
    assert!(ready.starts_with('{'), "JSON logs: {ready}");

    let csi = Csi::connect(&socket).await;
    let info: GetPluginInfoResponse = csi
        .call(IDENTITY, "GetPluginInfo", GetPluginInfoRequest {})
        .await
        .unwrap();
    assert_eq!(info.name, "btrfs.csi.vtsnap.io");
    assert_eq!(
        info.manifest.get("node-id").map(String::as_str),
        Some("node-7")
    );

    let pid = nix::unistd::Pid::from_raw(child.id().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        status.code(),
        Some(0),
        "a connected client does not hold it up"
    );
    assert!(!socket.exists(), "the socket is removed on a clean stop");
    drop(csi);
}

#[tokio::test]
async fn the_binary_refuses_a_root_that_is_not_on_btrfs() {
    let not_btrfs = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_vtsnap-csi-btrfs"))
        .arg("--endpoint")
        .arg(format!(
            "unix://{}",
            not_btrfs.path().join("csi.sock").display()
        ))
        .arg("--root")
        .arg(not_btrfs.path().join("root"))
        .args(["--log-format", "text"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("not on a btrfs file system"), "{stderr}");
    assert!(!not_btrfs.path().join("csi.sock").exists());
}
