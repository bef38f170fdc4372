//! `vtsnap-node run` (in-process) against the fake Kubernetes API and the fake vtctld, on a
//! real MariaDB tablet container with the fake mysqlctld: the daemon really stops mysqld,
//! really freezes the container's cgroup and really releases it.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use vtsnap_core::fence::*;
use vtsnap_core::naming::TabletAlias;
use vtsnap_node::cgroup::{Cgroup, Roots};
use vtsnap_node::daemon::metrics::Cause;
use vtsnap_node::daemon::{self, DaemonConfig, Handle};
use vtsnap_node::mysqlctl::mysqld_answers;
use vtsnap_testkit::btrfs::BtrfsVolume;
use vtsnap_testkit::fake_kube::{FakeKube, Fault};
use vtsnap_testkit::fake_mysqlctld::{FakeMysqlctld, Serving};
use vtsnap_testkit::fake_vtctld::FakeVtctld;
use vtsnap_testkit::fixtures::shard;
use vtsnap_testkit::grpc::Running;
use vtsnap_testkit::layout::TabletLayout;
use vtsnap_testkit::mariadb::{self, MariaDb};

const NS: &str = "vitess";
const POD: &str = "example-vttablet-zone1-tablet";
const POD_UID: &str = "6f1d2c3b-0000-4000-8000-000000000001";
const LEASE: &str = "vtsnap-example-commerce-x-x-0f00ba11";

struct Rig {
    kube: FakeKube,
    vtctld: FakeVtctld,
    vt: Running,
    ctl: FakeMysqlctld,
    _serving: Serving,
    db: Option<MariaDb>,
    alias: TabletAlias,
    state_dir: PathBuf,
    kubelet: PathBuf,
    mysqld_sock: PathBuf,
    volume_mount: PathBuf,
    _bind: Option<BindMount>,
    _vol: Option<BtrfsVolume>,
    _dir: tempfile::TempDir,
}

/// A loop file system bind-mounted where kubelet would mount the PVC; unmounted on drop.
struct BindMount(PathBuf);

impl Drop for BindMount {
    fn drop(&mut self) {
        let _ = vtsnap_node::fsfreeze::thaw(&self.0);
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

impl Rig {
    /// A tablet pod on node-a; `primary` makes the lease's tablet the shard's primary.
    async fn new(primary: bool) -> Self {
        Self::build(primary, false).await
    }

    /// With `real_volume`, the PVC mount is a real (loop) file system, so it can be frozen.
    async fn build(primary: bool, real_volume: bool) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("vtsnap-daemon-")
            .tempdir_in("/var/tmp")
            .unwrap();
        let kubelet = dir.path().join("kubelet");
        let vols = kubelet.join("pods").join(POD_UID).join("volumes");
        let socket_dir = vols.join("kubernetes.io~empty-dir/vt-root/socket");
        let volume_mount = vols.join("kubernetes.io~csi/pv-1/mount");
        std::fs::create_dir_all(&socket_dir).unwrap();
        std::fs::create_dir_all(&volume_mount).unwrap();
        let (vol, bind) = if real_volume {
            let v = BtrfsVolume::create(1 << 30);
            let ok = std::process::Command::new("mount")
                .arg("--bind")
                .arg(v.path())
                .arg(&volume_mount)
                .status()
                .unwrap()
                .success();
            assert!(ok, "bind mount failed");
            (Some(v), Some(BindMount(volume_mount.clone())))
        } else {
            (None, None)
        };
        let root = volume_mount.join("vtdataroot");
        std::fs::create_dir_all(&root).unwrap();

        // vtctld knows the shard; the lease names tablet 1 (primary) or 2 (replica).
        let fixture = shard().replicas(3).primary(1);
        let vtctld = FakeVtctld::new();
        fixture.install(&FakeKube::new(), &vtctld);
        let vt = vtctld.serve().await;
        let alias = fixture.alias(if primary { 1 } else { 2 });

        let layout = TabletLayout {
            flavor: mariadb::flavor(),
            ..TabletLayout::mariadb(alias.uid.get())
        };
        layout.write_skeleton(&root).unwrap();
        let db = MariaDb::start_supervised(&root, &socket_dir, alias.uid).await;
        let ctl = FakeMysqlctld::new(&socket_dir, &root.join(alias.uid.tablet_dir_name()));
        let serving = ctl.serve().await;

        let kube = FakeKube::new();
        kube.put_json("", "pods", json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": POD, "namespace": NS, "uid": POD_UID},
            "spec": {"nodeName": "node-a", "containers": [{"name": "mysqld", "image": "vitess/lite"}]},
            "status": {"phase": "Running", "containerStatuses": [{
                "name": "mysqld", "image": "vitess/lite", "imageID": "", "ready": true, "restartCount": 0,
                "containerID": format!("podman://{}", db.id())}]}
        }));
        let mysqld_sock = ctl.mysql_socket();
        Self {
            kube,
            vtctld,
            vt,
            ctl,
            _serving: serving,
            db: Some(db),
            alias,
            state_dir: dir.path().join("state"),
            kubelet,
            mysqld_sock,
            volume_mount,
            _bind: bind,
            _vol: vol,
            _dir: dir,
        }
    }

    fn cgroup(&self) -> Cgroup {
        Cgroup::containing(&Roots::default(), self.db.as_ref().unwrap().id())
            .unwrap()
            .unwrap()
            .1
    }

    fn frozen(&self) -> bool {
        self.cgroup().is_frozen().unwrap()
    }

    /// Creates (or replaces) the fence lease, renewed now.
    fn lease(&self, node: &str, request: &str, duration_secs: u32, max_hold_secs: u32) {
        let now = k8s_openapi::jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%S.%6fZ")
            .to_string();
        self.kube.put_json("coordination.k8s.io", "leases", json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": LEASE, "namespace": NS, "labels": {LABEL_NODE: node}, "annotations": {
                ANN_TARGET_POD: POD, ANN_TARGET_POD_UID: POD_UID, ANN_TABLET_ALIAS: self.alias.to_string(),
                ANN_ORIGINAL_TYPE: "replica", ANN_VTCTLD: self.vt.endpoint(), ANN_MODE: "cold",
                ANN_REQUEST: request, ANN_MAX_HOLD: max_hold_secs.to_string()}},
            "spec": {"holderIdentity": "snapshot-job", "leaseDurationSeconds": duration_secs, "renewTime": now, "acquireTime": now}
        }));
    }

    fn set_request(&self, request: &str) {
        let mut l = self.lease_json().unwrap();
        l["metadata"]["annotations"][ANN_REQUEST] = json!(request);
        self.kube.put_json("coordination.k8s.io", "leases", l);
    }

    fn lease_json(&self) -> Option<Value> {
        self.kube
            .get_json("coordination.k8s.io", "leases", NS, LEASE)
    }

    fn node_state(&self) -> Option<String> {
        self.lease_json()?["metadata"]["annotations"][ANN_NODE_STATE]
            .as_str()
            .map(str::to_owned)
    }

    /// The helper, resyncing every 200 ms (tests that count passes).
    async fn daemon(&self) -> Handle {
        self.daemon_resyncing(Duration::from_millis(200)).await
    }

    /// The helper with a one-hour resync: whatever it does within a test, a watch event
    /// or a lease's expiry made it do.
    async fn watching_daemon(&self) -> Handle {
        self.daemon_resyncing(Duration::from_secs(3600)).await
    }

    async fn daemon_resyncing(&self, resync: Duration) -> Handle {
        let cfg = DaemonConfig {
            node: "node-a".into(),
            kubelet_dir: self.kubelet.clone(),
            roots: Roots::default(),
            // The tests run on the host: its `/` is the node root.
            host_root: "/".into(),
            state_dir: self.state_dir.clone(),
            resync,
            listen: Some("127.0.0.1:0".parse().unwrap()),
            start_timeout: Duration::from_secs(60),
            shutdown_timeout: Duration::from_secs(120),
        };
        daemon::start(cfg, self.kube.client()).await.unwrap()
    }

    /// Waits (bounded) until `cond` holds.
    async fn until(&self, what: &str, limit: Duration, cond: impl Fn(&Self) -> bool) {
        let start = Instant::now();
        while !cond(self) {
            assert!(
                start.elapsed() < limit,
                "timed out waiting until {what}; node-state {:?}, lease {:?}",
                self.node_state(),
                self.lease_json()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn mysqld_up(&self) -> bool {
        mysqld_answers(&self.mysqld_sock).await
    }

    /// Waits until mysqld answers again.
    async fn until_mysqld_up(&self, limit: Duration) {
        let start = Instant::now();
        while !self.mysqld_up().await {
            assert!(start.elapsed() < limit, "mysqld did not come back");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the tablet is put back: replication started and the original type set.
    async fn until_tablet_restored(&self) {
        let start_repl = format!("StartReplication {}", self.alias);
        let change = format!("ChangeTabletType {} REPLICA", self.alias);
        self.until("the tablet is restored", Duration::from_secs(30), |r| {
            let calls = r.vtctld.calls();
            calls.contains(&start_repl) && calls.contains(&change)
        })
        .await;
    }

    async fn held(&self) {
        self.until("held", Duration::from_secs(60), |r| {
            r.node_state().as_deref() == Some("held")
        })
        .await;
        assert!(
            self.frozen(),
            "node-state says held but the cgroup is not frozen"
        );
        assert!(!self.mysqld_up().await);
    }

    /// Waits until the watchdog's one release is counted: it thaws first, then counts, so
    /// a thawed freeze alone does not say the count is there yet.
    async fn watchdog_release_counted(&self, h: &Handle) {
        self.until(
            "the watchdog's release is counted",
            Duration::from_secs(30),
            |_| h.metrics.releases(Cause::Watchdog) >= 1,
        )
        .await;
        assert_eq!(h.metrics.releases(Cause::Watchdog), 1);
    }

    async fn cycles(&self, h: &Handle, n: u64) {
        let target = h.metrics.cycles() + n;
        self.until("enough reconcile cycles", Duration::from_secs(30), |_| {
            h.metrics.cycles() >= target
        })
        .await;
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        // A frozen container cannot be killed: always thaw before it is removed.
        if let Some(db) = &self.db
            && let Ok(Some((_, cg))) = Cgroup::containing(&Roots::default(), db.id())
        {
            let _ = cg.thaw();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_expiry_while_held_releases_within_the_lease_duration_plus_2s() {
    let rig = Rig::new(false).await;
    let h = rig.watching_daemon().await;
    rig.lease("node-a", "hold", 4, 600);
    let renewed = Instant::now();
    rig.held().await;
    // The job stops renewing. The lease expires 4 s after the last renewal.
    rig.until("thawed", Duration::from_secs(30), |r| !r.frozen())
        .await;
    let released_after = renewed.elapsed();
    assert!(
        released_after <= Duration::from_secs(4 + 2),
        "released {released_after:?} after the last renewal"
    );
    rig.until_mysqld_up(Duration::from_secs(60)).await;
    rig.until(
        "lease deleted after recovery",
        Duration::from_secs(30),
        |r| r.lease_json().is_none(),
    )
    .await;
    rig.until_tablet_restored().await;
    assert_eq!(h.metrics.releases(Cause::Expiry), 1);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_lease_releases_everything() {
    let rig = Rig::new(false).await;
    let h = rig.watching_daemon().await;
    rig.lease("node-a", "hold", 60, 600);
    rig.held().await;
    rig.kube.remove("coordination.k8s.io", "leases", NS, LEASE);
    rig.until("thawed", Duration::from_secs(30), |r| !r.frozen())
        .await;
    rig.until_mysqld_up(Duration::from_secs(60)).await;
    rig.until_tablet_restored().await;
    // Nothing outside signals the end of a deletion's release: wait for the count.
    rig.until("the release is counted", Duration::from_secs(30), |_| {
        h.metrics.releases(Cause::Deleted) == 1
    })
    .await;
    // The endpoints answer.
    let body = http_get(h.addr.unwrap(), "/metrics").await;
    assert!(
        body.contains("vtsnap_node_releases_total{cause=\"deleted\"} 1"),
        "{body}"
    );
    assert!(
        http_get(h.addr.unwrap(), "/healthz")
            .await
            .contains("200 OK")
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_request_releases_on_the_node_only() {
    let rig = Rig::new(false).await;
    let h = rig.watching_daemon().await;
    rig.lease("node-a", "hold", 60, 600);
    rig.held().await;
    rig.set_request("release");
    rig.until("released", Duration::from_secs(60), |r| {
        r.node_state().as_deref() == Some("released")
    })
    .await;
    assert!(!rig.frozen());
    assert!(rig.mysqld_up().await);
    // The job restores the tablet itself after a requested release.
    assert!(
        !rig.vtctld
            .calls()
            .iter()
            .any(|c| c.starts_with("ChangeTabletType")),
        "{:?}",
        rig.vtctld.calls()
    );
    assert!(rig.lease_json().is_some(), "the job deletes its own lease");
    assert_eq!(h.metrics.releases(Cause::Request), 1);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_api_server_down_the_watchdog_releases_at_max_hold() {
    let rig = Rig::new(false).await;
    let h = rig.daemon().await;
    rig.lease("node-a", "hold", 600, 3);
    rig.held().await;
    rig.kube.set_down(true);
    rig.until("thawed by the watchdog", Duration::from_secs(30), |r| {
        !r.frozen()
    })
    .await;
    rig.watchdog_release_counted(&h).await;
    assert!(
        !http_get(h.addr.unwrap(), "/readyz")
            .await
            .contains("200 OK")
    );
    // The API comes back: the lease still asks for a hold, but a watchdog release is final.
    rig.kube.set_down(false);
    rig.until("failed reported", Duration::from_secs(30), |r| {
        r.node_state().as_deref() == Some("failed")
    })
    .await;
    rig.cycles(&h, 5).await;
    assert!(!rig.frozen(), "a watchdog release must never be re-frozen");
    // The job (or GC) gives up the fence: mysqld comes back and the tablet is restored.
    rig.kube.remove("coordination.k8s.io", "leases", NS, LEASE);
    rig.until_mysqld_up(Duration::from_secs(60)).await;
    rig.until_tablet_restored().await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_api_server_silent_the_watchdog_releases_at_max_hold() {
    let rig = Rig::new(false).await;
    let h = rig.daemon().await;
    rig.lease("node-a", "hold", 600, 3);
    rig.held().await;
    // From now on every request is accepted and never answered: the loop's calls hang.
    rig.kube.fault(
        Fault::on(|_| true)
            .always()
            .delay(Duration::from_secs(3600)),
    );
    rig.until(
        "thawed by the watchdog within max-hold + 2 s",
        Duration::from_secs(3 + 2),
        |r| !r.frozen(),
    )
    .await;
    rig.watchdog_release_counted(&h).await;
    assert!(
        !http_get(h.addr.unwrap(), "/metrics").await.is_empty(),
        "the listener must still answer"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_helper_killed_mid_hold_continues_a_valid_hold_after_restart() {
    let rig = Rig::new(false).await;
    let h = rig.daemon().await;
    rig.lease("node-a", "hold", 600, 600);
    rig.held().await;
    h.stop().await; // killed: nothing released
    assert!(rig.frozen());
    let h = rig.daemon().await;
    rig.cycles(&h, 5).await;
    assert!(
        rig.frozen(),
        "a restarted helper must keep a hold its valid lease still asks for"
    );
    assert_eq!(rig.node_state().as_deref(), Some("held"));
    assert_eq!(
        rig.ctl
            .calls()
            .iter()
            .filter(|c| c.as_str() == "Shutdown")
            .count(),
        1,
        "mysqld was stopped once"
    );
    rig.set_request("release");
    rig.until("released", Duration::from_secs(60), |r| {
        r.node_state().as_deref() == Some("released")
    })
    .await;
    assert!(!rig.frozen() && rig.mysqld_up().await);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_helper_killed_mid_hold_releases_after_restart_if_the_lease_is_gone() {
    let rig = Rig::new(false).await;
    let h = rig.daemon().await;
    rig.lease("node-a", "hold", 600, 600);
    rig.held().await;
    h.stop().await;
    rig.kube.remove("coordination.k8s.io", "leases", NS, LEASE);
    let h = rig.daemon().await;
    rig.until("thawed after restart", Duration::from_secs(30), |r| {
        !r.frozen()
    })
    .await;
    rig.until_mysqld_up(Duration::from_secs(60)).await;
    rig.until_tablet_restored().await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_for_another_node_is_ignored() {
    let rig = Rig::new(false).await;
    let h = rig.daemon().await;
    rig.lease("node-b", "hold", 600, 600);
    rig.cycles(&h, 8).await;
    assert!(rig.ctl.calls().is_empty(), "{:?}", rig.ctl.calls());
    assert!(!rig.frozen() && rig.mysqld_up().await);
    assert_eq!(rig.node_state(), None);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_naming_the_primary_is_refused() {
    let rig = Rig::new(true).await;
    let h = rig.daemon().await;
    rig.lease("node-a", "hold", 600, 600);
    rig.until("refused", Duration::from_secs(30), |r| {
        r.node_state().as_deref() == Some("refused")
    })
    .await;
    let err = rig.lease_json().unwrap()["metadata"]["annotations"][ANN_NODE_ERROR]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(err.contains("primary"), "{err}");
    rig.cycles(&h, 5).await;
    assert!(
        rig.ctl.calls().is_empty(),
        "mysqld must not be touched: {:?}",
        rig.ctl.calls()
    );
    assert!(!rig.frozen() && rig.mysqld_up().await);
    h.stop().await;
}

async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

/// A write + fsync on the volume in another thread; reports when it completes.
fn write_on(dir: &std::path::Path) -> std::sync::mpsc::Receiver<()> {
    let (tx, rx) = std::sync::mpsc::channel();
    let p = dir.join("probe-write");
    std::thread::spawn(move || {
        use std::io::Write;
        let mut f = std::fs::File::create(&p).unwrap();
        f.write_all(b"x").unwrap();
        f.sync_all().unwrap();
        let _ = tx.send(());
    });
    rx
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_fsfreeze_request_freezes_the_volume_until_released() {
    let rig = Rig::build(false, true).await;
    let h = rig.daemon().await;
    rig.lease("node-a", "fsfreeze", 600, 600);
    rig.until("fsfrozen", Duration::from_secs(60), |r| {
        r.node_state().as_deref() == Some("fsfrozen")
    })
    .await;
    assert!(!rig.frozen(), "online mode never freezes mysqld's cgroup");
    let done = write_on(&rig.volume_mount);
    assert!(
        done.recv_timeout(Duration::from_millis(500)).is_err(),
        "a write completed on a frozen volume"
    );
    rig.set_request("release");
    rig.until("released", Duration::from_secs(60), |r| {
        r.node_state().as_deref() == Some("released")
    })
    .await;
    done.recv_timeout(Duration::from_secs(30))
        .expect("the write did not complete after the release");
    assert!(
        rig.ctl.calls().is_empty(),
        "online mode never stops mysqld: {:?}",
        rig.ctl.calls()
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_ends_a_filesystem_freeze_at_max_hold() {
    let rig = Rig::build(false, true).await;
    let h = rig.daemon().await;
    rig.lease("node-a", "fsfreeze", 600, 2);
    rig.until("fsfrozen", Duration::from_secs(60), |r| {
        r.node_state().as_deref() == Some("fsfrozen")
    })
    .await;
    let done = write_on(&rig.volume_mount);
    rig.kube.set_down(true);
    done.recv_timeout(Duration::from_secs(30))
        .expect("the watchdog did not thaw the volume");
    rig.watchdog_release_counted(&h).await;
    rig.kube.set_down(false);
    rig.until("failed reported", Duration::from_secs(30), |r| {
        r.node_state().as_deref() == Some("failed")
    })
    .await;
    h.stop().await;
}
