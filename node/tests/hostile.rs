//! `vtsnap-node run` against hostile and broken inputs: a corrupt hold registry, a flood of
//! idle connections under a low file-descriptor limit, an API server that accepts and never
//! answers, a request that arrives one byte first, and flags that would select the wrong
//! leases. Freezes are fake v1 freezer directories (a `freezer.state` file), so nothing
//! here needs root or a container.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use vtsnap_core::fence::*;
use vtsnap_node::cgroup::Roots;
use vtsnap_node::daemon::{self, ConfigError, DaemonConfig, DaemonError, Handle};
use vtsnap_testkit::fake_kube::FakeKube;

const NS: &str = "vitess";

fn now_ms() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_millisecond()
}

/// A v1 freezer directory whose `freezer.state` says FROZEN; reads back what is written.
fn fake_frozen_cgroup(dir: &Path) -> Value {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("freezer.state"), "FROZEN").unwrap();
    json!({"version": "v1", "dir": dir})
}

fn freezer_state(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("freezer.state")).unwrap()
}

/// A hold-registry entry holding `cgroup` since `since_ms`.
fn entry(lease: &str, cgroup: Value, since_ms: i64, max_hold_secs: u64) -> Value {
    json!({
        "lease": lease, "pod_uid": "uid", "tablet_alias": "zone1-0000000102", "original_type": "replica",
        "vtctld": "http://127.0.0.1:1", "container_id": "c", "volume_mount": null,
        "mysqlctl_socket": "/nowhere/mysqlctl.sock", "mysqld_socket": "/nowhere/mysql.sock",
        "stopped_mysqld": false, "cgroup": cgroup, "fs_frozen": null, "hold_since_ms": since_ms,
        "max_hold_secs": max_hold_secs, "watchdog_released": false
    })
}

fn config(dir: &Path, roots: Roots, listen: Option<SocketAddr>) -> DaemonConfig {
    DaemonConfig {
        node: "node-a".into(),
        kubelet_dir: dir.join("kubelet"),
        roots,
        // The tests run on the host: its `/` is the node root.
        host_root: "/".into(),
        state_dir: dir.join("state"),
        resync: Duration::from_millis(100),
        listen,
        start_timeout: Duration::from_secs(5),
        shutdown_timeout: Duration::from_secs(5),
    }
}

async fn until(what: &str, limit: Duration, cond: impl Fn() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn cycles(h: &Handle, n: u64) {
    let target = h.metrics.cycles() + n;
    until("enough reconcile cycles", Duration::from_secs(30), || {
        h.metrics.cycles() >= target
    })
    .await;
}

fn events(kube: &FakeKube, reason: &str) -> Vec<Value> {
    kube.events()
        .into_iter()
        .filter(|e| e["reason"] == reason)
        .collect()
}

fn corrupt_files(state: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(state)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("holds.json.corrupt-")
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_registry_is_moved_aside_reported_and_its_complete_entries_still_guarded() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let (kept_cg, lost_cg) = (dir.path().join("kept"), dir.path().join("lost"));
    let kept = entry("vitess/kept", fake_frozen_cgroup(&kept_cg), now_ms(), 1);
    let lost = entry("vitess/lost", fake_frozen_cgroup(&lost_cg), now_ms(), 1);
    let whole =
        serde_json::to_string_pretty(&json!({"vitess/kept": kept, "vitess/lost": lost})).unwrap();
    // Cut inside the second entry, as a torn write or a full disk leaves it.
    let truncated = &whole[..whole.find("\"vitess/lost\"").unwrap() + 40];
    std::fs::write(state.join("holds.json"), truncated).unwrap();

    let kube = FakeKube::new();
    let h = daemon::start(config(dir.path(), Roots::default(), None), kube.client())
        .await
        .expect("a corrupt registry must not stop the daemon");

    // Moved aside byte for byte; the complete entry before the damage kept.
    let aside = corrupt_files(&state);
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert_eq!(std::fs::read_to_string(&aside[0]).unwrap(), truncated);
    let now: Value =
        serde_json::from_slice(&std::fs::read(state.join("holds.json")).unwrap()).unwrap();
    assert!(now.get("vitess/kept").is_some(), "{now}");
    assert!(now.get("vitess/lost").is_none(), "{now}");

    // The entry it could read is served as always: its lease is gone, so it is released
    // (thawed; the tablet's put-back then waits for a vtctld).
    until(
        "the salvaged hold is released",
        Duration::from_secs(10),
        || freezer_state(&kept_cg) == "THAWED",
    )
    .await;

    // Reported: metric, Event on the node; the lost-holds marker goes once looked for.
    assert!(
        h.metrics
            .render()
            .contains("\nvtsnap_node_registry_set_aside 1\n"),
        "{}",
        h.metrics.render()
    );
    // Announced by the first pass after the leases are listed (the watchdog may thaw the
    // hold before that); then never again.
    until(
        "the set-aside is announced",
        Duration::from_secs(60),
        || !events(&kube, "HoldRegistryCorrupt").is_empty(),
    )
    .await;
    cycles(&h, 3).await;
    let ev = events(&kube, "HoldRegistryCorrupt");
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0]["regarding"]["kind"], "Node");
    assert_eq!(ev[0]["regarding"]["name"], "node-a");
    let message = ev[0]["note"].as_str().unwrap();
    assert!(
        message.contains(aside[0].file_name().unwrap().to_str().unwrap()),
        "{message}"
    );
    assert!(!state.join("holds.lost").exists());
    h.stop().await;

    // A restart finds a valid registry: nothing more is moved aside.
    let h = daemon::start(config(dir.path(), Roots::default(), None), kube.client())
        .await
        .unwrap();
    assert_eq!(corrupt_files(&state).len(), 1);
    assert!(
        h.metrics
            .render()
            .contains("\nvtsnap_node_registry_set_aside 0\n")
    );
    h.stop().await;
}

/// Fake `/proc` and cgroup roots: process 4242 runs container `abc123` in a v1 freezer
/// cgroup that is frozen.
fn fake_container(dir: &Path) -> (Roots, PathBuf) {
    let proc = dir.join("proc");
    for (pid, text) in [
        ("4242".to_owned(), "7:freezer:/kubepods/pod1/abc123\n"),
        (std::process::id().to_string(), "7:freezer:/\n"),
    ] {
        std::fs::create_dir_all(proc.join(&pid)).unwrap();
        std::fs::write(proc.join(&pid).join("cgroup"), text).unwrap();
    }
    let cgroup = dir.join("cgroup");
    let cg = cgroup.join("freezer/kubepods/pod1/abc123");
    fake_frozen_cgroup(&cg);
    (Roots { cgroup, proc }, cg)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_freeze_lost_with_a_corrupt_registry_is_found_on_the_leases_target_and_ended() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(
        state.join("holds.json"),
        "{\"vitess/fence\": {\"lease\": \"vit",
    )
    .unwrap();
    let (roots, cg) = fake_container(dir.path());

    let kube = FakeKube::new();
    kube.put_json("", "pods", json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "tablet", "namespace": NS, "uid": "uid-1"},
        "spec": {"nodeName": "node-a", "containers": [{"name": "mysqld", "image": "vitess/lite"}]},
        "status": {"containerStatuses": [{"name": "mysqld", "image": "vitess/lite", "imageID": "",
            "ready": true, "restartCount": 0, "containerID": "containerd://abc123"}]}
    }));
    let renewed = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S.%6fZ")
        .to_string();
    kube.put_json("coordination.k8s.io", "leases", json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "fence", "namespace": NS, "labels": {LABEL_NODE: "node-a"}, "annotations": {
            ANN_TARGET_POD: "tablet", ANN_TARGET_POD_UID: "uid-1", ANN_TABLET_ALIAS: "zone1-0000000102",
            ANN_ORIGINAL_TYPE: "replica", ANN_VTCTLD: "http://127.0.0.1:1", ANN_MODE: "cold",
            ANN_REQUEST: "hold", ANN_MAX_HOLD: "600", ANN_NODE_STATE: "held"}},
        "spec": {"holderIdentity": "snapshot-job", "leaseDurationSeconds": 600, "renewTime": renewed, "acquireTime": renewed}
    }));
    let h = daemon::start(config(dir.path(), roots, None), kube.client())
        .await
        .unwrap();

    until("the lost freeze is ended", Duration::from_secs(10), || {
        freezer_state(&cg) == "THAWED"
    })
    .await;
    let annotation = |a: &str| {
        kube.get_json("coordination.k8s.io", "leases", NS, "fence")
            .and_then(|l| l["metadata"]["annotations"][a].as_str().map(str::to_owned))
    };
    until("the lease is told", Duration::from_secs(10), || {
        annotation(ANN_NODE_STATE).as_deref() == Some("failed")
    })
    .await;
    let error = annotation(ANN_NODE_ERROR).unwrap();
    assert!(
        error.contains("corrupt") && error.contains("zone1-0000000102"),
        "{error}"
    );
    assert!(!state.join("holds.lost").exists());

    // Never frozen again for this lease, though it still asks for a hold.
    cycles(&h, 5).await;
    assert_eq!(freezer_state(&cg), "THAWED");
    assert_eq!(annotation(ANN_NODE_STATE).as_deref(), Some("failed"));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flags_that_would_busy_loop_or_select_other_leases_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let kube = FakeKube::new();
    let mut cfg = config(dir.path(), Roots::default(), None);
    cfg.resync = Duration::ZERO;
    assert!(matches!(
        daemon::start(cfg, kube.client()).await,
        Err(DaemonError::Config(ConfigError::ResyncZero))
    ));
    for bad in ["a,b=c", "", "node a", "-node", &"n".repeat(64)] {
        let mut cfg = config(dir.path(), Roots::default(), None);
        cfg.node = bad.to_owned();
        let r = daemon::start(cfg, kube.client()).await;
        assert!(
            matches!(&r, Err(DaemonError::Config(ConfigError::NodeName { node })) if node == bad),
            "{bad:?}: {r:?}"
        );
    }
    // Nothing was asked of the API server.
    assert!(kube.log().is_empty(), "{:?}", kube.log());
}

/// Reads a whole HTTP response from `s`.
fn response(mut s: TcpStream) -> String {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_arrives_one_byte_first_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let kube = FakeKube::new();
    let h = daemon::start(
        config(
            dir.path(),
            Roots::default(),
            Some("127.0.0.1:0".parse().unwrap()),
        ),
        kube.client(),
    )
    .await
    .unwrap();
    let addr = h.addr.unwrap();
    let out = tokio::task::spawn_blocking(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_nodelay(true).unwrap();
        s.write_all(b"G").unwrap();
        std::thread::sleep(Duration::from_millis(200));
        s.write_all(b"ET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            .unwrap();
        response(s)
    })
    .await
    .unwrap();
    assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
    h.stop().await;
}

/// An API server that accepts connections and never answers.
struct SilentApiServer {
    addr: SocketAddr,
}

impl SilentApiServer {
    fn start() -> Self {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for s in l.incoming().flatten() {
                held.push(s);
            }
        });
        Self { addr }
    }

    fn kubeconfig(&self, dir: &Path) -> PathBuf {
        let p = dir.join("kubeconfig");
        std::fs::write(
            &p,
            format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: silent\n\
                 clusters: [{{name: silent, cluster: {{server: \"http://{}\"}}}}]\n\
                 users: [{{name: nobody, user: {{}}}}]\n\
                 contexts: [{{name: silent, context: {{cluster: silent, user: nobody}}}}]\n",
                self.addr
            ),
        )
        .unwrap();
        p
    }
}

/// `vtsnap-node run` as a child process with at most `nofile` file descriptors.
struct NodeProcess(Child);

impl Drop for NodeProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl NodeProcess {
    /// CPU time (user + system) used so far.
    fn cpu(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.0.id())).unwrap();
        // Fields after the command name (which is in parentheses): utime and stime are 14 and 15.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let f: Vec<&str> = rest.split(' ').collect();
        let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
        Duration::from_millis(ticks * 10) // USER_HZ is 100 on Linux
    }
}

fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

fn get(addr: SocketAddr, path: &str) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

#[test]
fn under_a_flood_of_idle_connections_and_a_silent_api_server_a_freeze_still_ends_at_max_hold() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let cg = dir.path().join("cg");
    let max_hold = 4;
    std::fs::write(
        state.join("holds.json"),
        json!({"vitess/fence": entry("vitess/fence", fake_frozen_cgroup(&cg), now_ms(), max_hold)})
            .to_string(),
    )
    .unwrap();
    let api = SilentApiServer::start();
    let listen = free_port();
    let log = std::fs::File::create(dir.path().join("node.log")).unwrap();
    let child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 64 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_vtsnap-node"))
        .args([
            "run",
            "--node-name",
            "node-a",
            "--resync",
            "100ms",
            "--log-format",
            "json",
        ])
        .arg("--state-dir")
        .arg(&state)
        .arg("--kubelet-dir")
        .arg(dir.path().join("kubelet"))
        .arg("--listen")
        .arg(listen.to_string())
        .env("KUBECONFIG", api.kubeconfig(dir.path()))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let started = Instant::now();
    let node = NodeProcess(child);
    let log = || std::fs::read_to_string(dir.path().join("node.log")).unwrap_or_default();

    let deadline = Instant::now() + Duration::from_secs(10);
    while get(listen, "/healthz").is_none_or(|r| !r.contains("200 OK")) {
        assert!(
            Instant::now() < deadline,
            "the helper never served:\n{}",
            log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // Many more idle connections than the helper may have descriptors; none sends a byte.
    // Past the listener's cap they wait in the kernel's queues, so they are opened from
    // another thread while this one watches the hold.
    let stop = Arc::new(AtomicBool::new(false));
    let flood = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut open = Vec::new();
            for _ in 0..300 {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(s) = TcpStream::connect_timeout(&listen, Duration::from_millis(500)) {
                    open.push(s);
                }
            }
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(20));
            }
            open.len()
        })
    };
    let cpu_before = node.cpu();
    let flood_began = Instant::now();

    while freezer_state(&cg) != "THAWED" {
        assert!(
            started.elapsed() < Duration::from_secs(max_hold + 3),
            "still frozen {:?} after the hold began (max-hold {max_hold} s):\n{}",
            started.elapsed(),
            log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // No spinning on the flood.
    std::thread::sleep(Duration::from_secs(3).saturating_sub(flood_began.elapsed()));
    let busy = node.cpu() - cpu_before;
    assert!(
        busy < flood_began.elapsed() / 2,
        "{busy:?} of CPU in {:?} under the flood",
        flood_began.elapsed()
    );

    // The flood ends: the listener serves again.
    stop.store(true, Ordering::SeqCst);
    let flooded = flood.join().unwrap();
    assert!(flooded > 64, "only {flooded} connections were opened");
    let deadline = Instant::now() + Duration::from_secs(15);
    while get(listen, "/metrics").is_none_or(|r| !r.contains("200 OK")) {
        assert!(
            Instant::now() < deadline,
            "the listener did not recover:\n{}",
            log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let metrics = get(listen, "/metrics").unwrap();
    assert!(
        metrics.contains("vtsnap_node_releases_total{cause=\"watchdog\"} 1"),
        "{metrics}"
    );
    // The API server never answered: not ready.
    assert!(!get(listen, "/readyz").unwrap().contains("200 OK"));
}
