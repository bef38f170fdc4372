//! Shared by the tests that run vtsnap as Pods on the local cluster's real node
//! (`real_pods.rs`): operator-shaped tablet Pods of real Vitess (MySQL 9.7), GTID
//! catch-up checks, waits on Pods and leases, and the tools from target/tools/.
#![allow(dead_code)] // each test binary that includes it uses a part

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, LogParams};
use serde_json::{Value, json};
use vtsnap_core::fence::ANN_NODE_STATE;
use vtsnap_core::naming::TabletAlias;
use vtsnap_testkit::fake_mysqlctld;
use vtsnap_testkit::operator_objects::OperatorTablet;
use vtsnap_testkit::pod_backend::PodBackend;
pub use vtsnap_testkit::real_kube::pod_ready;
use vtsnap_testkit::real_kube::{RealKube, container_freezer_cgroup, resource};
use vtsnap_testkit::vitess::pods::VitessPods;
use vtsnap_testkit::vitess::{BackupRestore, give_to_vitess, mysqlctld_serving};

pub const RELEASE: &str = "p";
pub const FULL: &str = "p-vtsnap";
pub const LIMIT: Duration = Duration::from_secs(120);
/// The chart's non-root user (images/vtsnap/Containerfile, values' securityContext).
pub const NON_ROOT: u32 = 65532;
/// What a program logs when a watch is refused and it polls instead (core/src/wake.rs),
/// and when a cache's or the lease watch fails.
pub const FALLBACK_LOGS: &[&str] = &[
    "polling instead",
    "watch failed",
    "watch of the fence leases failed",
];

pub fn pods() -> kube::core::ApiResource {
    resource("", "v1", "Pod", "pods")
}

pub fn snapshots() -> kube::core::ApiResource {
    resource(
        "snapshot.storage.k8s.io",
        "v1",
        "VolumeSnapshot",
        "volumesnapshots",
    )
}

/// kubelet's root directory: the local cluster keeps it beside its kubeconfig.
pub fn kubelet_dir(kube: &RealKube) -> PathBuf {
    let dir = kube.kubeconfig().parent().unwrap().join("node/kubelet");
    assert!(
        dir.join("pods").is_dir(),
        "no kubelet pods directory in {}",
        dir.display()
    );
    dir
}

/// Waits until the Pods selected by `selector` are `want` many and all satisfy `cond`.
pub async fn wait_pods(
    kube: &RealKube,
    ns: &str,
    selector: &str,
    want: usize,
    what: &str,
    cond: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    let start = Instant::now();
    loop {
        let api: Api<kube::api::DynamicObject> = Api::namespaced_with(kube.client(), ns, &pods());
        let list: Vec<Value> = api
            .list(&ListParams::default().labels(selector))
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|o| serde_json::to_value(o).unwrap())
            .collect();
        if list.len() == want && list.iter().all(&cond) {
            return list;
        }
        assert!(
            start.elapsed() < LIMIT,
            "{what}: pods {selector} in {ns} not there within {LIMIT:?}: {}",
            serde_json::to_string_pretty(&list.iter().map(|p| &p["status"]).collect::<Vec<_>>())
                .unwrap()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

pub async fn pod_log(kube: &RealKube, ns: &str, name: &str) -> String {
    let api: Api<Pod> = Api::namespaced(kube.client(), ns);
    api.logs(name, &LogParams::default())
        .await
        .unwrap_or_else(|e| panic!("log of pod {ns}/{name} (the API server asks kubelet): {e}"))
}

/// The uid the container's first process runs as, read on the host from its cgroup.
pub fn container_process_uid(pod: &Value, container: &str) -> u32 {
    let procs = container_freezer_cgroup(pod, container).join("cgroup.procs");
    let text =
        std::fs::read_to_string(&procs).unwrap_or_else(|e| panic!("{}: {e}", procs.display()));
    let pid = text
        .lines()
        .next()
        .unwrap_or_else(|| panic!("{} is empty", procs.display()));
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A cron line that fires once, at the first minute boundary at least 40 s from now (UTC).
/// A cron line that fires once, at the start of a minute 150 to 210 s from now: time for
/// the schedule reconciler (every minute) to make the CronJob that carries it first.
pub fn once_later() -> String {
    let t = k8s_openapi::jiff::Timestamp::now() + Duration::from_secs(210);
    let t = t.to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC);
    format!("{} {} {} {} *", t.minute(), t.hour(), t.day(), t.month())
}

pub fn once_soon() -> String {
    let t = k8s_openapi::jiff::Timestamp::now() + Duration::from_secs(100);
    let t = t.to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC);
    // the boundary at the start of t's minute is between 40 and 100 s away
    format!("{} {} {} {} *", t.minute(), t.hour(), t.day(), t.month())
}

/// The chart's securityContext for every program but the node helper, as the API server
/// stored it.
pub fn assert_restricted(pod: &Value, container: &str) {
    let name = &pod["metadata"]["name"];
    let c = pod["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == container)
        .unwrap();
    let sc = &c["securityContext"];
    assert_eq!(sc["readOnlyRootFilesystem"], json!(true), "{name}: {sc}");
    assert_eq!(sc["allowPrivilegeEscalation"], json!(false), "{name}: {sc}");
    let pod_sc = &pod["spec"]["securityContext"];
    assert_eq!(pod_sc["runAsNonRoot"], json!(true), "{name}: {pod_sc}");
}

pub fn assert_no_fallback(what: &str, log: &str) {
    for l in log.lines() {
        assert!(
            !FALLBACK_LOGS.iter().any(|f| l.contains(f)),
            "{what} fell back from a watch: {l}"
        );
    }
}

/// A tablet Pod of real Vitess (mysqlctld and vttablet, MySQL 9.7) running on the node.
pub struct Tablet {
    pub op: OperatorTablet,
    pub pod: Value,
    /// The Pod's `/vt/socket` on the host (kubelet's emptyDir).
    pub socket_dir: PathBuf,
}

impl Tablet {
    pub fn mysql_socket(&self) -> PathBuf {
        self.socket_dir.join("mysql.sock")
    }

    /// The container's restart count, as kubelet reports it now.
    pub async fn restarts(&self, kube: &RealKube, container: &str) -> u64 {
        let pod = kube
            .get(&pods(), &self.op.shard.namespace, &self.op.name)
            .await
            .unwrap();
        container_status(&pod, container)["restartCount"]
            .as_u64()
            .unwrap_or_else(|| panic!("{}: no status of {container}", self.op.name))
    }
}

/// The chart's values for the story: the real images; the snapshot, GC and
/// vtbackup-storage CronJobs at `schedule`, the schedule reconciler every minute; the
/// node helper in `kubelet`'s directory; the archive's and the recovery's templates.
pub fn chart_values(
    kube: &RealKube,
    (vitess_ns, vt, class): (&str, &VitessPods, &str),
    schedule: &str,
    kubelet: &Path,
) -> Value {
    let node_state = kube
        .kubeconfig()
        .parent()
        .unwrap()
        .join("node/vtsnap-node-state");
    json!({
        "image": {"registry": "localhost", "repository": "vtsnap", "tag": "0.1.0", "pullPolicy": "Never"},
        "config": {"clusters": [{"name": "example", "namespace": vitess_ns, "vtctld": vt.vtctld_grpc,
            "snapshot": {"mode": "cold", "volumeSnapshotClassName": class,
                         "cutTimeout": "60s", "readyTimeout": "60s", "maxHold": "120s"},
            "restore": {"enabled": true, "nodeLocal": true}}]},
        "snapshot": {"timeZone": "UTC", "activeDeadlineSeconds": 300, "backoffLimit": 0,
                     "reconcile": {"schedule": "* * * * *"},
                     "shards": [{"cluster": "example", "keyspace": "commerce", "shard": "-", "schedule": schedule}]},
        "gc": {"schedule": schedule, "timeZone": "UTC", "backoffLimit": 0},
        "vtbackupStorage": {"schedule": schedule, "timeZone": "UTC", "backoffLimit": 0},
        "node": {"kubeletDir": kubelet.display().to_string(), "stateDir": node_state.display().to_string()},
        "admission": {"replicas": 1, "refresh": "2s", "podDisruptionBudget": {"enabled": false}},
        // the archive's template (no shard's config turns the archive on: the story takes
        // its increment itself) and the recovery's, for `kubectl vtsnap recover`
        "pitr": {"enabled": true, "backupStorage": {"root": "/vt/backups",
            "volume": {"hostPath": {"path": vt.backups().display().to_string(), "type": "Directory"}}},
            "recover": {"deadline": "10m", "activeDeadlineSeconds": 900,
                "mysqldResources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "1Gi"}}}},
    })
}

/// vtctld's tablet types of the shard, read every 200 ms until stopped: every tablet
/// that was ever in another type than PRIMARY or REPLICA (drained).
pub struct DrainWatch {
    watching: std::sync::Arc<std::sync::atomic::AtomicBool>,
    sampler: tokio::task::JoinHandle<Vec<String>>,
}

impl DrainWatch {
    pub fn start(client: vtsnap_core::vtctld::client::VtctldClient) -> Self {
        use std::sync::atomic::Ordering;
        use vtsnap_core::vtctld::TabletType;
        let watching = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let still = watching.clone();
        let sampler = tokio::spawn(async move {
            let mut drained = Vec::new();
            while still.load(Ordering::Relaxed) {
                for t in client
                    .get_tablets("commerce", "-")
                    .await
                    .unwrap_or_default()
                {
                    let serving = [TabletType::Primary as i32, TabletType::Replica as i32];
                    if !serving.contains(&t.r#type) {
                        drained.push(format!("{:?} type {}", t.alias, t.r#type));
                    }
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            drained
        });
        Self { watching, sampler }
    }

    /// Stops reading; what was seen drained.
    pub async fn stop(self) -> Vec<String> {
        self.watching
            .store(false, std::sync::atomic::Ordering::Relaxed);
        self.sampler.await.unwrap()
    }
}

/// Each of `reasons` is an Event (events.k8s.io) about the object `name` in `ns`.
pub async fn assert_events(kube: &RealKube, ns: &str, name: &str, reasons: &[&str]) {
    let events = kube
        .list(&resource("events.k8s.io", "v1", "Event", "events"), ns)
        .await;
    let seen: Vec<&str> = events
        .iter()
        .filter(|e| e["regarding"]["name"] == json!(name))
        .filter_map(|e| e["reason"].as_str())
        .collect();
    for want in reasons {
        assert!(seen.contains(want), "no {want} Event on {name}: {seen:?}");
    }
}

/// The status kubelet reports for one container of `pod`.
pub fn container_status<'a>(pod: &'a Value, container: &str) -> &'a Value {
    pod["status"]["containerStatuses"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == container))
        .unwrap_or(&Value::Null)
}

/// Whether `pod`'s mysqld container is running and its readiness probe (TCP 3306) passes.
pub fn mysqld_ready(pod: &Value) -> bool {
    container_status(pod, "mysqld")["ready"] == json!(true)
}

/// Creates the tablet's PVC (bound by the real provisioner; an empty vtdataroot owned by
/// the Pod's user unless it is restored) and its Pod of real Vitess; waits until the
/// Pod's mysqld answers. Its vttablet is Ready only once it serves (for a replica: once
/// it replicates), which the caller waits for.
pub async fn start_tablet(
    kube: &RealKube,
    kubelet: &Path,
    vitess: &VitessPods,
    op: OperatorTablet,
    template: &Value,
    backups: BackupRestore,
) -> Tablet {
    let ns = op.shard.namespace.clone();
    let pvc = kube.create(op.pvc(template)).await;
    let pv = kube.wait_pvc_bound(&ns, &op.name, LIMIT).await;
    let vtdataroot = kube.volume_dir(&pv).await.join("vtdataroot");
    if pvc["spec"].get("dataSourceRef").is_none() {
        // mysqlctld initializes the data directory (init_db.sql) as UID 999
        give_to_vitess(&vtdataroot);
    }
    kube.create(vitess.tablet_pod(&op, backups)).await;
    let start = Instant::now();
    let pod = loop {
        let pod = kube.get(&pods(), &ns, &op.name).await.unwrap();
        if mysqld_ready(&pod) {
            break pod;
        }
        if start.elapsed() > LIMIT {
            let logs = container_logs(kube, &ns, &op.name).await;
            panic!(
                "{}: mysqld not ready within {LIMIT:?}: {}\n{logs}",
                op.name, pod["status"]
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let uid = pod["metadata"]["uid"].as_str().unwrap();
    let socket_dir = kubelet.join(format!(
        "pods/{uid}/volumes/kubernetes.io~empty-dir/vt-root/socket"
    ));
    let t = Tablet {
        op,
        pod,
        socket_dir,
    };
    if !answers_within(&t.mysql_socket(), LIMIT).await {
        let logs = container_logs(kube, &ns, &t.op.name).await;
        panic!(
            "{}: mysqld does not answer on its socket within {LIMIT:?}:\n{logs}",
            t.op.name
        );
    }
    // mysqld answers before init_db.sql has made the tablet's users; a PlannedReparentShard
    // then fails on a replica (GetGlobalStatusVars meets MySQL's decoy account)
    let start = Instant::now();
    while !mysqlctld_serving(&t.socket_dir.join("mysqlctl.sock")).await {
        if start.elapsed() > LIMIT {
            let logs = container_logs(kube, &ns, &t.op.name).await;
            panic!(
                "{}: mysqlctld did not finish initializing within {LIMIT:?}:\n{logs}",
                t.op.name
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    t
}

/// The last lines of a tablet Pod's containers (the API server asks kubelet).
pub async fn container_logs(kube: &RealKube, ns: &str, pod: &str) -> String {
    let api: Api<Pod> = Api::namespaced(kube.client(), ns);
    let mut out = String::new();
    for c in ["mysqld", "vttablet"] {
        let log = api
            .logs(
                pod,
                &LogParams {
                    container: Some(c.into()),
                    tail_lines: Some(40),
                    ..LogParams::default()
                },
            )
            .await
            .unwrap_or_else(|e| e.to_string());
        out.push_str(&format!("--- {c}:\n{log}\n"));
    }
    out
}

/// Waits until the tablet Pod is Ready: mysqld answers on 3306 and vttablet's `/healthz`
/// passes (a replica: it replicates).
pub async fn wait_tablet_ready(kube: &RealKube, t: &Tablet, what: &str) -> Value {
    let ns = &t.op.shard.namespace;
    let start = Instant::now();
    loop {
        let pod = kube.get(&pods(), ns, &t.op.name).await.unwrap();
        if pod_ready(&pod) {
            return pod;
        }
        if start.elapsed() > LIMIT {
            let logs = container_logs(kube, ns, &t.op.name).await;
            panic!(
                "{what}: {} not Ready within {LIMIT:?}: {}\n{logs}",
                t.op.name, pod["status"]
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Whether mysqld answers on its socket (it greets with protocol 10) within `limit`.
pub async fn answers_within(socket: &Path, limit: Duration) -> bool {
    let start = Instant::now();
    while !fake_mysqlctld::answers(socket).await {
        if start.elapsed() > limit {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    true
}

/// Waits until mysqld answers on its socket (it greets with protocol 10).
pub async fn wait_answers(socket: &Path, what: &str) {
    assert!(
        answers_within(socket, LIMIT).await,
        "{what}: mysqld does not answer on {} within {LIMIT:?}",
        socket.display()
    );
}

/// The primary's data: a table of 1024 rows (10 doublings) in the keyspace's database,
/// written once. (A restored tablet whose keyspace database has no table is "empty" to
/// vttablet, which would restore from a backup instead: `checkNoDB`, go/vt/mysqlctl.)
pub const SEED: &str = "CREATE DATABASE IF NOT EXISTS vt_commerce; \
    CREATE TABLE vt_commerce.t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(64)) ENGINE=InnoDB; \
    INSERT INTO vt_commerce.t (v) VALUES ('row'); \
    INSERT INTO vt_commerce.t (v) SELECT v FROM vt_commerce.t; INSERT INTO vt_commerce.t (v) SELECT v FROM vt_commerce.t; \
    INSERT INTO vt_commerce.t (v) SELECT v FROM vt_commerce.t; INSERT INTO vt_commerce.t (v) SELECT v FROM vt_commerce.t; \
    INSERT INTO vt_commerce.t (v) SELECT v FROM vt_commerce.t; INSERT INTO vt_commerce.t (v) SELECT v FROM vt_commerce.t; \
    INSERT INTO vt_commerce.t (v) SELECT v FROM vt_commerce.t; INSERT INTO vt_commerce.t (v) SELECT v FROM vt_commerce.t; \
    INSERT INTO vt_commerce.t (v) SELECT v FROM vt_commerce.t; INSERT INTO vt_commerce.t (v) SELECT v FROM vt_commerce.t";
/// Writes on the primary after a snapshot: a replica made from it must catch up with them.
pub const MORE_ROWS: &str =
    "INSERT INTO vt_commerce.t (v) SELECT CONCAT(v, '-later') FROM vt_commerce.t LIMIT 100";

/// A MySQL GTID set as `mysql -B` prints it (newlines between sources escaped), whole.
pub fn gtid_set(printed: &str) -> String {
    printed.replace("\\n", "").replace('\n', "")
}

/// `CHECKSUM TABLE vt_commerce.t` on the tablet: the checksum (its second cell), never empty.
pub async fn checksum(db: &PodBackend, tablet: &TabletAlias) -> String {
    let rows = db
        .query(tablet, "CHECKSUM TABLE vt_commerce.t")
        .await
        .unwrap();
    let sum = rows
        .first()
        .and_then(|r| r.get(1))
        .cloned()
        .unwrap_or_default();
    assert!(
        !sum.is_empty() && sum != "NULL",
        "{tablet}: no checksum of vt_commerce.t: {rows:?}"
    );
    sum
}

/// Waits until `replica` has applied everything the primary has written (the primary's
/// `gtid_executed` is a subset of the replica's); panics with the replica's replication
/// status otherwise.
pub async fn caught_up(db: &PodBackend, primary: &TabletAlias, replica: &TabletAlias) {
    let want = gtid_set(&db.value(primary, "SELECT @@global.gtid_executed").await);
    assert!(!want.is_empty(), "{primary} has executed nothing");
    let start = Instant::now();
    loop {
        let q = format!("SELECT GTID_SUBSET('{want}', @@global.gtid_executed)");
        if db
            .query(replica, &q)
            .await
            .ok()
            .and_then(|r| r.into_iter().next())
            == Some(vec!["1".to_owned()])
        {
            return;
        }
        if start.elapsed() > LIMIT {
            let status = db.query(replica, "SHOW REPLICA STATUS").await;
            panic!("{replica} did not catch up with {want}: {status:?}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A tool from target/tools/ (`make tools`).
pub fn tool(name: &str) -> PathBuf {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/tools")
        .join(name);
    assert!(
        bin.exists(),
        "{} is missing: run `make tools`",
        bin.display()
    );
    bin
}

/// kubectl from target/tools/ (`make tools`), against the test's cluster.
pub fn kubectl(kube: &RealKube, args: &[&str]) -> String {
    let bin = tool("kubectl");
    let out = Command::new(bin)
        .arg("--kubeconfig")
        .arg(kube.kubeconfig())
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

pub fn annotation<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v["metadata"]["annotations"][key].as_str()
}

/// A VolumeSnapshotClass of the btrfs driver whose cuts take `delay_ms` (the driver's
/// `cutDelayMillis`), so a fence lasts long enough to be interrupted; deleted on drop.
pub struct SlowClass {
    pub name: String,
    kubeconfig: PathBuf,
}

impl SlowClass {
    pub async fn create(kube: &RealKube, name: &str, delay_ms: u64) -> Self {
        kube.create(json!({
            "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotClass",
            "metadata": {"name": name},
            "driver": vtsnap_testkit::real_kube::BTRFS_DRIVER, "deletionPolicy": "Delete",
            "parameters": {"cutDelayMillis": delay_ms.to_string()},
        }))
        .await;
        Self {
            name: name.into(),
            kubeconfig: kube.kubeconfig().to_path_buf(),
        }
    }
}

impl Drop for SlowClass {
    fn drop(&mut self) {
        let _ = Command::new(tool("kubectl"))
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["delete", "volumesnapshotclass", &self.name, "--wait=false"])
            .output();
    }
}

/// Waits until a fence lease in `ns` reports `state` from the node helper.
pub async fn wait_lease_state(kube: &RealKube, ns: &str, state: &str) -> Value {
    let start = Instant::now();
    loop {
        let leases = kube
            .list(
                &resource("coordination.k8s.io", "v1", "Lease", "leases"),
                ns,
            )
            .await;
        if let Some(l) = leases
            .iter()
            .find(|l| annotation(l, ANN_NODE_STATE) == Some(state))
        {
            return l.clone();
        }
        assert!(
            start.elapsed() < LIMIT,
            "no lease in {ns} reached {state}: {leases:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A run's timeline on stderr (each step with the seconds since the start), and the
/// programs' Pods for the closing JSON line.
pub struct Story {
    start: Instant,
    pub programs: Vec<Value>,
}

impl Story {
    pub fn new() -> Self {
        Self {
            start: Instant::now(),
            programs: Vec::new(),
        }
    }

    pub fn mark(&self, what: &str) {
        eprintln!("[{:>6.1}s] {what}", self.start.elapsed().as_secs_f64());
    }

    /// One program's Pod: its name, image, ServiceAccount and (once it ended) exit code.
    pub fn program(&mut self, program: &str, pod: &Value, container: &str) {
        let status = ["containerStatuses", "initContainerStatuses"]
            .iter()
            .filter_map(|l| pod["status"][l].as_array())
            .flatten()
            .find(|c| c["name"] == container);
        let spec = ["containers", "initContainers"]
            .iter()
            .filter_map(|l| pod["spec"][l].as_array())
            .flatten()
            .find(|c| c["name"] == container);
        self.programs.push(json!({
            "program": program,
            "pod": pod["metadata"]["name"],
            "image": spec.map(|c| c["image"].clone()),
            "service_account": pod["spec"]["serviceAccountName"],
            "exit_code": status.map(|s| s["state"]["terminated"]["exitCode"].clone()),
        }));
    }

    /// Prints the closing line on stdout and, when `VTSNAP_DEMO_SUMMARY` names a file
    /// (`make demo-node`), writes it there.
    pub fn finish(&self, mut line: Value) {
        line["programs"] = json!(self.programs);
        line["elapsed_s"] = json!(self.start.elapsed().as_secs());
        println!("{line}");
        if let Some(path) = std::env::var_os("VTSNAP_DEMO_SUMMARY") {
            std::fs::write(path, format!("{line}\n")).unwrap();
        }
    }
}

/// The snapshot job's closing JSON line (the one naming its snapshot) in its Pod's log.
pub fn summary_line(log: &str) -> Value {
    json_line_with(log, "snapshot")
}

/// A program's closing JSON line: the last line of `log` that is a JSON object with `key`.
pub fn json_line_with(log: &str, key: &str) -> Value {
    log.lines()
        .rev()
        .find_map(|l| {
            serde_json::from_str::<Value>(l)
                .ok()
                .filter(|v| v.get(key).is_some())
        })
        .unwrap_or_else(|| panic!("no JSON line with {key:?} in the log:\n{log}"))
}
