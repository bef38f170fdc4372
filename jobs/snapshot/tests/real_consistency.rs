//! Consistency on real data. A MariaDB shard — one primary, two replicas with GTID
//! replication over loopback — on btrfs subvolumes laid out where kubelet would mount the
//! tablet PVCs. The real `run` takes a cold snapshot and then an online one under write
//! load, with the real node daemon stopping, holding and releasing the real replica; the
//! fake CSI controller takes a btrfs snapshot at the cut. Each snapshot is cloned, moved to
//! a new tablet UID by `vtsnap-restore`, started, pointed at the primary with GTID
//! auto-positioning, and must catch up to a CHECKSUM TABLE equal to the primary's.
//!
//! Fakes here (nothing real can run): the Kubernetes API, vtctld (its replication control
//! and positions act on the real servers), mysqlctld (its work is done inside the tablet
//! containers) and the CSI snapshotter. Needs root, btrfs, cgroups and Podman.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::{Value, json};
use vtsnap_core::config::Config;
use vtsnap_core::naming::{TabletAlias, TabletUid};
use vtsnap_node::cgroup::Roots;
use vtsnap_node::daemon::{self, DaemonConfig};
use vtsnap_snapshot::run::{RunOptions, run};
use vtsnap_testkit::btrfs::BtrfsVolume;
use vtsnap_testkit::fake_kube::FakeKube;
use vtsnap_testkit::fake_mysqlctld::{FakeMysqlctld, Serving};
use vtsnap_testkit::fake_snapshotter::{Behaviour, FakeSnapshotter};
use vtsnap_testkit::fake_vtctld::{Backend, FakeVtctld};
use vtsnap_testkit::fixtures::shard;
use vtsnap_testkit::layout::TabletLayout;
use vtsnap_testkit::mariadb::MariaDb;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn btrfs(args: &[&str], path: &Path, more: Option<&Path>) {
    let mut c = Command::new("btrfs");
    c.args(args).arg(path);
    if let Some(m) = more {
        c.arg(m);
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "btrfs {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// vtctld's replication control and positions, acting on the real tablets.
struct LabBackend(HashMap<String, Arc<MariaDb>>);

impl Backend for LabBackend {
    fn stop_replication(&self, alias: TabletAlias) -> BoxFuture<'static, Result<(), String>> {
        let db = self.0.get(&alias.to_string()).cloned();
        async move {
            db.ok_or("unknown tablet")?.query("STOP SLAVE").await;
            Ok(())
        }
        .boxed()
    }

    fn start_replication(&self, alias: TabletAlias) -> BoxFuture<'static, Result<(), String>> {
        let db = self.0.get(&alias.to_string()).cloned();
        async move {
            db.ok_or("unknown tablet")?.query("START SLAVE").await;
            Ok(())
        }
        .boxed()
    }

    fn position(&self, alias: TabletAlias) -> BoxFuture<'static, Option<String>> {
        let db = self.0.get(&alias.to_string()).cloned();
        async move {
            Some(format!(
                "MariaDB/{}",
                db?.value("SELECT @@gtid_current_pos").await
            ))
        }
        .boxed()
    }
}

struct Tablet {
    db: Arc<MariaDb>,
    port: u16,
    _serving: Serving,
}

async fn checksum(db: &MariaDb) -> String {
    db.query("CHECKSUM TABLE vt_commerce.t").await[0][1].clone()
}

/// Starts a restored clone as a new replica of the primary and waits until it caught up.
async fn catch_up(
    clone_root: &Path,
    socket_dir: &Path,
    uid: TabletUid,
    primary: &Tablet,
    want_pos: &str,
) -> Arc<MariaDb> {
    let port = free_port();
    let db = Arc::new(
        MariaDb::start_supervised_with(
            clone_root,
            socket_dir,
            uid,
            true,
            &format!("--port={port}"),
        )
        .await,
    );
    db.query(&format!(
        "CHANGE MASTER TO MASTER_HOST=\"127.0.0.1\", MASTER_PORT={}, MASTER_USER=\"repl\", MASTER_PASSWORD=\"repl\", MASTER_USE_GTID=slave_pos",
        primary.port
    ))
    .await;
    db.query("START SLAVE").await;
    let start = Instant::now();
    loop {
        let pos = db.value("SELECT @@gtid_slave_pos").await;
        if pos == want_pos {
            return db;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "clone stuck at {pos}, primary at {want_pos}: {:?}",
            db.query("SHOW SLAVE STATUS").await
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cold_and_online_snapshots_of_real_data_restore_catch_up_and_match_the_primary() {
    let vol = Arc::new(BtrfsVolume::create(6 << 30));
    let kubelet = vol.path().join("kubelet");
    let fixture = shard().replicas(3).primary(1);
    let kube = FakeKube::new();
    let vtctld = FakeVtctld::new();
    fixture.install(&kube, &vtctld);
    let vt = vtctld.serve().await;

    // Three tablets, each on a btrfs subvolume where kubelet would mount its PVC.
    let mut tablets: HashMap<usize, Tablet> = HashMap::new();
    let mut pvc_dirs: HashMap<String, PathBuf> = HashMap::new();
    for n in 1..=3 {
        let t = fixture.tablet(n);
        let pod_uid = format!("00000000-0000-4000-8000-00000000000{n}");
        let vols = kubelet.join("pods").join(&pod_uid).join("volumes");
        let socket_dir = vols.join("kubernetes.io~empty-dir/vt-root/socket");
        std::fs::create_dir_all(&socket_dir).unwrap();
        let mount = vols.join(format!("kubernetes.io~csi/pv-{n}/mount"));
        std::fs::create_dir_all(mount.parent().unwrap()).unwrap();
        btrfs(&["-q", "subvolume", "create"], &mount, None);
        let root = mount.join("vtdataroot");
        std::fs::create_dir(&root).unwrap();
        let port = free_port();
        let layout = TabletLayout {
            port,
            bind_loopback: true,
            ..TabletLayout::mariadb(t.alias.uid.get())
        };
        layout.write_skeleton(&root).unwrap();
        let db = Arc::new(
            MariaDb::start_supervised_with(&root, &socket_dir, t.alias.uid, true, "").await,
        );
        let ctl = FakeMysqlctld::new(&socket_dir, &root.join(t.alias.uid.tablet_dir_name()));
        let serving = ctl.serve().await;
        let mut pod = kube.get_json("", "pods", "vitess", &t.pod).unwrap();
        pod["metadata"]["uid"] = json!(pod_uid);
        pod["spec"]["nodeName"] = json!("node-a");
        pod["status"]["containerStatuses"] = json!([{"name": "mysqld", "image": "x", "imageID": "", "ready": true,
            "restartCount": 0, "containerID": format!("podman://{}", db.id())}]);
        kube.remove("", "pods", "vitess", &t.pod);
        kube.put_json("", "pods", pod);
        pvc_dirs.insert(t.pod.clone(), mount);
        tablets.insert(
            n,
            Tablet {
                db,
                port,
                _serving: serving,
            },
        );
    }

    // GTID replication: 2 and 3 replicate from 1.
    let primary = &tablets[&1];
    primary.db.query("SET GLOBAL read_only = 0").await;
    primary
        .db
        .query("CREATE USER \"repl\"@\"127.0.0.1\" IDENTIFIED BY \"repl\"")
        .await;
    primary
        .db
        .query("GRANT REPLICATION SLAVE ON *.* TO \"repl\"@\"127.0.0.1\"")
        .await;
    primary.db.query("CREATE DATABASE vt_commerce").await;
    primary.db.query("CREATE TABLE vt_commerce.t (id BIGINT AUTO_INCREMENT PRIMARY KEY, v BIGINT NOT NULL, pad CHAR(32) NOT NULL) ENGINE=InnoDB").await;
    for batch in 0..2u64 {
        primary
            .db
            .query(&format!(
                "INSERT INTO vt_commerce.t (v, pad) WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 1000) SELECT n + {o}, md5(n + {o}) FROM s",
                o = batch * 1000
            ))
            .await;
    }
    for n in [2, 3] {
        let r = &tablets[&n];
        r.db.query(&format!(
            "CHANGE MASTER TO MASTER_HOST=\"127.0.0.1\", MASTER_PORT={}, MASTER_USER=\"repl\", MASTER_PASSWORD=\"repl\", MASTER_USE_GTID=slave_pos",
            primary.port
        ))
        .await;
        r.db.query("START SLAVE").await;
    }
    vtctld.set_backend(Arc::new(LabBackend(
        tablets
            .iter()
            .map(|(n, t)| (fixture.alias(*n).to_string(), t.db.clone()))
            .collect(),
    )));

    // The real node daemon for node-a, and the snapshotter taking btrfs snapshots at the cut.
    let state = tempfile::tempdir().unwrap();
    let node = daemon::start(
        DaemonConfig {
            node: "node-a".into(),
            kubelet_dir: kubelet.clone(),
            roots: Roots::default(),
            state_dir: state.path().to_path_buf(),
            interval: Duration::from_millis(200),
            listen: None,
            start_timeout: Duration::from_secs(120),
            shutdown_timeout: Duration::from_secs(120),
            skip_hold_for_tests: false,
        },
        kube.client(),
    )
    .await
    .unwrap();
    let snaps = vol.path().join("snapshots");
    std::fs::create_dir(&snaps).unwrap();
    let (pvcs, snaps_dir) = (pvc_dirs.clone(), snaps.clone());
    let hook = Arc::new(move |s: &Value| {
        let pvc = s["spec"]["source"]["persistentVolumeClaimName"]
            .as_str()
            .unwrap();
        let name = s["metadata"]["name"].as_str().unwrap();
        btrfs(
            &["-q", "subvolume", "snapshot", "-r"],
            &pvcs[pvc],
            Some(&snaps_dir.join(name)),
        );
    });
    let _snapshotter = FakeSnapshotter::start(
        &kube,
        Behaviour {
            on_cut: Some(hook),
            ..Behaviour::default()
        },
        Duration::from_millis(50),
    );

    let base = format!(
        "clusters:\n- name: example\n  namespace: vitess\n  vtctld: \"{}\"\n",
        vt.endpoint()
    );
    let opts = RunOptions {
        holder: "job".into(),
        lease_duration: Duration::from_secs(10),
        node_timeout: Duration::from_secs(120),
        poll: Duration::from_millis(50),
        ..RunOptions::default()
    };

    // Write load on the primary for the whole run.
    primary.db.start_load("vt_commerce.t", 1_000_000).await;
    let cold = run(
        &Config::from_yaml(&base).unwrap(),
        "example",
        "commerce",
        "-",
        &opts,
        kube.client(),
    )
    .await;
    assert_eq!(cold.exit_code, 0, "cold run: {cold:?}");
    let online_cfg = format!("{base}  snapshot: {{mode: online}}\n");
    let online = run(
        &Config::from_yaml(&online_cfg).unwrap(),
        "example",
        "commerce",
        "-",
        &opts,
        kube.client(),
    )
    .await;
    assert_eq!(online.exit_code, 0, "online run: {online:?}");
    primary.db.stop_load().await;
    let want_pos = primary.db.value("SELECT @@gtid_binlog_pos").await;
    let want_sum = checksum(&primary.db).await;

    for (i, s) in [cold, online].iter().enumerate() {
        let name = s.snapshot.clone().unwrap();
        let clone = vol.path().join(format!("clone-{i}"));
        btrfs(
            &["-q", "subvolume", "snapshot"],
            &snaps.join(&name),
            Some(&clone),
        );
        let new_uid = TabletUid::new(900 + u32::try_from(i).unwrap());
        let out = vtsnap_restore::run(&vtsnap_restore::Options {
            vtdataroot: clone.join("vtdataroot"),
            tablet_uid: new_uid,
            server_id: None,
            dry_run: false,
        })
        .unwrap();
        assert_eq!(out.action, "moved", "{name}");
        let sock = vol.path().join(format!("clone-socket-{i}"));
        std::fs::create_dir(&sock).unwrap();
        let db = catch_up(
            &clone.join("vtdataroot"),
            &sock,
            new_uid,
            primary,
            &want_pos,
        )
        .await;
        assert_eq!(
            checksum(&db).await,
            want_sum,
            "{} snapshot {name}: the caught-up clone differs from the primary",
            s.mode
        );
        let _ = &db;
    }
    node.stop().await;
}
