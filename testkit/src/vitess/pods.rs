//! Real Vitess as Pods on a kubelet node (the node tier): etcd, vtctld and VTOrc as Pods
//! behind Services, and tablet Pods in vitess-operator's shape running the Vitess image
//! (`localhost/vtsnap-vitess:24`, imported into the node's containerd, never pulled).
//!
//! The tablet Pod is [`OperatorTablet::pod`] filled in as the operator fills it
//! (planetscale/vitess-operator `pkg/operator/vttablet/{pod,mysqlctld,flags,datastore,
//! env_vars,backup,constants}.go`): init containers that copy mysqlctld and `mycnf/` into
//! `vt-root` and point every `vt_*/my.cnf` at `/vt/socket/mysql.sock`; `vttablet` with
//! readiness `/healthz` and liveness `/debug/status` (300 s delay, 30 failures); `mysqld`
//! running mysqlctld with a TCP readiness probe on 3306 every 2 s and no liveness probe;
//! `EXTRA_MY_CNF` naming `rbr.cnf`, `log-error.cnf`, `socket.cnf`; the init script from a
//! Secret under `/vt/secrets/db-init-script`; UID and fsGroup 999.
//!
//! Differences, on purpose: the lab's lean my.cnf is one more `EXTRA_MY_CNF` file (from
//! a ConfigMap); the backup location (`/vt/backups`, the file storage) is one host
//! directory every tablet Pod mounts, as tablets share an NFS volume, and the test reads
//! it as the recovery does; termination grace is 60 s, not
//! 30 minutes; no mysqld-exporter container; no `--logtostderr` (Vitess 24 logs to
//! stderr, structured, and has no such flag).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use vtsnap_core::naming::TabletAlias;
use vtsnap_core::vtctld::client::{CallLimits, VtctldClient};

use super::{
    BackupRestore, IMAGE, KEYSPACE, SHARD, binary_dir, mysqlctld_flags, vtctld_flags, vtorc_flags,
    vttablet_flags,
};
use crate::operator_objects::OperatorTablet;
use crate::real_kube::{RealKube, pod_ready, resource};

pub const WEB_PORT: u16 = 15000;
pub const GRPC_PORT: u16 = 15999;
pub const ETCD_PORT: u16 = 2379;
const INIT_DB_SECRET: &str = "vitess-db-init-script";
const INIT_DB_DIR: &str = "/vt/secrets/db-init-script";
const LAB_CNF: &str = "vitess-lab-cnf";
const LAB_CNF_DIR: &str = "/vt/lab";
const LIMIT: Duration = Duration::from_secs(180);

/// The lab's lean my.cnf for Pods: every Pod has its own network, so mysqld listens on
/// all of its interfaces (replication crosses Pods).
pub const POD_LEAN_CNF: &str = "performance_schema = OFF
innodb_buffer_pool_size = 32M
innodb_redo_log_capacity = 16M
";

/// `init-vt-root`: mysqlctld and Vitess's `mycnf/` into `vt-root`, and the my.cnf pieces
/// the operator writes there (error log to the container's stderr, row-based binlogs,
/// the socket, the exporter's client file).
const VT_ROOT_INIT: &str = "set -ex
install -d /mnt/vt/bin /mnt/vt/config/mycnf /mnt/vt/vtdataroot
[ -e /mnt/vt/bin/mysqlctld ] || cp /vt/bin/mysqlctld /mnt/vt/bin/
cp -R -n /vt/config/mycnf/. /mnt/vt/config/mycnf/
ln -sfn /dev/stderr /mnt/vt/config/stderr.symlink
printf 'log-error = /vt/config/stderr.symlink\\n' > /mnt/vt/config/mycnf/log-error.cnf
printf 'binlog_format=row\\n' > /mnt/vt/config/mycnf/rbr.cnf
printf 'socket = /vt/socket/mysql.sock\\n' > /mnt/vt/config/mycnf/socket.cnf
printf '[client]\\nuser=vt_dba\\nsocket=/vt/socket/mysql.sock\\n' > /mnt/vt/config/mycnf/client.cnf
";

/// `init-mysql-socket`: every tablet my.cnf on the volume gets the shared socket's path.
const MYSQL_SOCKET_INIT: &str = "set -ex
cd /vt/vtdataroot
find . -mindepth 2 -maxdepth 2 -path './vt_*/my.cnf' -exec sed -i -e 's,^socket[ \\t]*=.*$,socket = /vt/socket/mysql.sock,' {} +
";

fn pods() -> kube::core::ApiResource {
    resource("", "v1", "Pod", "pods")
}

fn services() -> kube::core::ApiResource {
    resource("", "v1", "Service", "services")
}

/// The tablets' environment (env_vars.go): both containers see the same `EXTRA_MY_CNF`,
/// so that they generate the same my.cnf.
fn tablet_env() -> Value {
    json!([
        {"name": "VTROOT", "value": "/vt"},
        {"name": "VTDATAROOT", "value": "/vt/vtdataroot"},
        {"name": "VT_MYSQL_ROOT", "value": "/usr"},
        {"name": "MYSQL_FLAVOR", "value": "MySQL80"},
        {"name": "EXTRA_MY_CNF", "value": format!(
            "/vt/config/mycnf/rbr.cnf:/vt/config/mycnf/log-error.cnf:/vt/config/mycnf/socket.cnf:{LAB_CNF_DIR}/lean.cnf")},
    ])
}

fn run_as_vitess() -> Value {
    json!({"runAsUser": 999})
}

/// A control-plane Pod of one container from the Vitess image, with a readiness probe.
fn daemon_pod(ns: &str, name: &str, command: Vec<String>, ready: Value, volumes: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "vitess"}},
        "spec": {
            "securityContext": {"runAsUser": 999, "fsGroup": 999},
            "terminationGracePeriodSeconds": 10,
            "containers": [{
                "name": name, "image": IMAGE, "imagePullPolicy": "Never",
                "command": command,
                "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                "readinessProbe": ready,
                "volumeMounts": [{"name": "scratch", "mountPath": "/vt/backups"}],
            }],
            "volumes": volumes,
        }
    })
}

fn http_ready(path: &str) -> Value {
    json!({"httpGet": {"path": path, "port": WEB_PORT}, "periodSeconds": 2})
}

/// The shard's topology and control: etcd, vtctld (and later VTOrc) as Pods.
#[derive(Debug, Clone)]
pub struct VitessPods {
    pub namespace: String,
    /// etcd's Service (`<ClusterIP>:2379`).
    pub etcd: String,
    /// vtctld's Service (`<ClusterIP>:15999`): what vtsnap's programs are configured with.
    pub vtctld_grpc: String,
    kubectl: PathBuf,
    kubeconfig: PathBuf,
    /// The tablets' shared backup storage on the host (owned by Vitess's user).
    backups: std::sync::Arc<tempfile::TempDir>,
}

impl VitessPods {
    /// The Secret and ConfigMap tablets mount, etcd and vtctld as Pods behind Services,
    /// the cell and the keyspace (durability `none`).
    pub async fn start(kube: &RealKube, ns: &str, kubectl: &Path) -> Self {
        let init_db = binary_dir().join("vitess/config/init_db.sql");
        let script = std::fs::read_to_string(&init_db)
            .unwrap_or_else(|e| panic!("{}: {e}: run `make vitess`", init_db.display()));
        kube.create(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": INIT_DB_SECRET, "namespace": ns},
            "stringData": {"init_db.sql": script}}))
            .await;
        kube.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": LAB_CNF, "namespace": ns},
            "data": {"lean.cnf": POD_LEAN_CNF}}))
            .await;
        let scratch = json!([{"name": "scratch", "emptyDir": {}}]);

        let etcd_ip = service(kube, ns, "etcd", &[("client", ETCD_PORT)]).await;
        let etcd = format!("{etcd_ip}:{ETCD_PORT}");
        let etcd_cmd = [
            "/vt/bin/etcd",
            "--data-dir=/vt/backups/etcd",
            "--listen-client-urls=http://0.0.0.0:2379",
            "--advertise-client-urls=http://$(POD_IP):2379",
            "--listen-peer-urls=http://127.0.0.1:2380",
            "--initial-advertise-peer-urls=http://127.0.0.1:2380",
            "--initial-cluster=default=http://127.0.0.1:2380",
            "--log-level=error",
        ]
        .map(str::to_owned)
        .to_vec();
        let ready = json!({"tcpSocket": {"port": ETCD_PORT}, "periodSeconds": 2});
        kube.create(daemon_pod(ns, "etcd", etcd_cmd, ready, scratch.clone()))
            .await;

        let vtctld_ip = service(
            kube,
            ns,
            "vtctld",
            &[("web", WEB_PORT), ("grpc", GRPC_PORT)],
        )
        .await;
        let mut cmd = vec!["/vt/bin/vtctld".to_owned()];
        cmd.extend(vtctld_flags(&etcd, (WEB_PORT, GRPC_PORT)));
        kube.create(daemon_pod(
            ns,
            "vtctld",
            cmd,
            http_ready("/debug/health"),
            scratch,
        ))
        .await;
        for name in ["etcd", "vtctld"] {
            kube.wait_for(&pods(), ns, name, "Ready", LIMIT, pod_ready)
                .await;
        }
        let backups = tempfile::tempdir()
            .unwrap_or_else(|e| panic!("no directory for the tablets' backups: {e}"));
        super::give_to_vitess(backups.path());
        // readable by vtsnap's own Pods too (UID 65532), as an NFS export would be
        let readable =
            <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755);
        std::fs::set_permissions(backups.path(), readable)
            .unwrap_or_else(|e| panic!("{}: {e}", backups.path().display()));
        let p = Self {
            backups: std::sync::Arc::new(backups),
            namespace: ns.to_owned(),
            vtctld_grpc: format!("{vtctld_ip}:{GRPC_PORT}"),
            etcd,
            kubectl: kubectl.to_path_buf(),
            kubeconfig: kube.kubeconfig().to_path_buf(),
        };
        let cell_root = format!("/vitess/{}", super::CELL);
        p.ctl(&[
            "AddCellInfo",
            "--root",
            &cell_root,
            "--server-address",
            &p.etcd,
            super::CELL,
        ])
        .await;
        p.ctl(&["CreateKeyspace", "--durability-policy=none", KEYSPACE])
            .await;
        p
    }

    /// The tablets' backup storage (`/vt/backups` in their Pods) on the host.
    pub fn backups(&self) -> &Path {
        self.backups.path()
    }

    /// VTOrc as a Pod, watching the cell.
    pub async fn start_vtorc(&self, kube: &RealKube) {
        let mut cmd = vec!["/vt/bin/vtorc".to_owned()];
        cmd.extend(vtorc_flags(&self.etcd, super::VTORC_REFRESH));
        cmd.push(format!("--port={WEB_PORT}"));
        let scratch = json!([{"name": "scratch", "emptyDir": {}}]);
        kube.create(daemon_pod(
            &self.namespace,
            "vtorc",
            cmd,
            http_ready("/debug/health"),
            scratch,
        ))
        .await;
        kube.wait_for(&pods(), &self.namespace, "vtorc", "Ready", LIMIT, pod_ready)
            .await;
    }

    /// A client of vtctld through its Service (kube-proxy's rules work from the host).
    pub fn client(&self) -> VtctldClient {
        VtctldClient::new(
            &self.vtctld_grpc,
            CallLimits {
                timeout: Duration::from_secs(30),
                read_attempts: 3,
            },
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// `vtctldclient` in the vtctld Pod; panics with its output when it fails. Retries
    /// while vtctld has not read the topology yet.
    pub async fn ctl(&self, args: &[&str]) -> String {
        let start = Instant::now();
        loop {
            let out = self.exec("vtctld", "vtctld", &{
                let mut c = vec!["/vt/bin/vtctldclient", "--server=localhost:15999"];
                c.extend_from_slice(args);
                c
            });
            match out {
                Ok(stdout) => return stdout,
                Err(e)
                    if (e.contains("Unavailable") || e.contains("connection refused"))
                        && start.elapsed() < Duration::from_secs(60) =>
                {
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(e) => panic!("vtctldclient {args:?}: {e}"),
            }
        }
    }

    /// Runs `command` in a container of a Pod of this namespace (`kubectl exec`).
    pub fn exec(&self, pod: &str, container: &str, command: &[&str]) -> Result<String, String> {
        let out = std::process::Command::new(&self.kubectl)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["-n", &self.namespace, "exec", pod, "-c", container, "--"])
            .args(command)
            .output()
            .map_err(|e| format!("{}: {e}", self.kubectl.display()))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    /// Makes `new_primary` the shard's primary (`PlannedReparentShard`).
    pub async fn reparent(&self, new_primary: &TabletAlias) {
        self.ctl(&[
            "PlannedReparentShard",
            &format!("{KEYSPACE}/{SHARD}"),
            "--new-primary",
            &new_primary.to_string(),
        ])
        .await;
    }

    /// Waits until vtctld lists `want` tablets of the shard.
    pub async fn wait_listed(&self, want: usize) {
        super::wait_listed(&self.client(), want, LIMIT, String::new).await;
    }

    /// `op`'s Pod as vitess-operator makes it, running real Vitess.
    pub fn tablet_pod(&self, op: &OperatorTablet, backups: BackupRestore) -> Value {
        let mut pod = op.pod();
        let spec = &mut pod["spec"];
        spec["terminationGracePeriodSeconds"] = json!(60);
        let env = tablet_env();
        let mut vttablet_env =
            json!([{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]);
        vttablet_env
            .as_array_mut()
            .into_iter()
            .for_each(|v| v.extend(env.as_array().cloned().unwrap_or_default()));
        let lab_cnf = json!({"name": LAB_CNF, "mountPath": LAB_CNF_DIR, "readOnly": true});
        let backups_mount = json!({"name": "vitess-backups", "mountPath": "/vt/backups"});
        for (i, script) in [VT_ROOT_INIT, MYSQL_SOCKET_INIT].into_iter().enumerate() {
            let c = &mut spec["initContainers"][i];
            c["image"] = json!(IMAGE);
            c["imagePullPolicy"] = json!("Never");
            c["command"] = json!(["bash", "-c"]);
            c["args"] = json!([script]);
            c["securityContext"] = run_as_vitess();
        }

        let mut vttablet =
            vttablet_flags(&self.etcd, &op.alias, "$(POD_IP)", (WEB_PORT, GRPC_PORT));
        vttablet.extend(backups.flags());
        vttablet.push("--health-check-interval=5s".into());
        let t = &mut spec["containers"][0];
        t["image"] = json!(IMAGE);
        t["imagePullPolicy"] = json!("Never");
        t["args"] = json!(vttablet);
        t["ports"] = json!([{"name": "web", "containerPort": WEB_PORT, "protocol": "TCP"},
                            {"name": "grpc", "containerPort": GRPC_PORT, "protocol": "TCP"}]);
        t["securityContext"] = run_as_vitess();
        t["readinessProbe"] = json!({"httpGet": {"path": "/healthz", "port": "web"}});
        t["livenessProbe"] = json!({"httpGet": {"path": "/debug/status", "port": "web"},
                                    "initialDelaySeconds": 300, "failureThreshold": 30});
        t["env"] = vttablet_env;
        push_mounts(t, &[lab_cnf.clone(), backups_mount]);

        let init_db = format!("{INIT_DB_DIR}/init_db.sql");
        let mysqlctld = mysqlctld_flags(op.alias.uid.get(), &init_db);
        let m = &mut spec["containers"][1];
        m["image"] = json!(IMAGE);
        m["imagePullPolicy"] = json!("Never");
        m["args"] = json!(mysqlctld);
        m["ports"] = json!([{"name": "mysql", "containerPort": 3306, "protocol": "TCP"}]);
        m["securityContext"] = run_as_vitess();
        m["readinessProbe"] = json!({"tcpSocket": {"port": 3306}, "periodSeconds": 2});
        m["env"] = env;
        push_mounts(
            m,
            &[
                json!({"name": "vt-root", "mountPath": "/vt/bin", "subPath": "bin", "readOnly": true}),
                json!({"name": "db-init-script-secret", "mountPath": INIT_DB_DIR, "readOnly": true}),
                lab_cnf,
            ],
        );
        if let Some(vs) = spec["volumes"].as_array_mut() {
            vs.extend([
                json!({"name": "db-init-script-secret", "secret": {"secretName": INIT_DB_SECRET}}),
                json!({"name": LAB_CNF, "configMap": {"name": LAB_CNF}}),
                json!({"name": "vitess-backups", "hostPath": {"path": self.backups().display().to_string(), "type": "Directory"}}),
            ]);
        }
        pod
    }
}

fn push_mounts(container: &mut Value, mounts: &[Value]) {
    if let Some(ms) = container["volumeMounts"].as_array_mut() {
        ms.extend_from_slice(mounts);
    }
}

/// A ClusterIP Service selecting the Pod `name`; returns its address.
async fn service(kube: &RealKube, ns: &str, name: &str, ports: &[(&str, u16)]) -> String {
    let ports: Vec<Value> = ports
        .iter()
        .map(|(n, p)| json!({"name": n, "port": p, "targetPort": p, "protocol": "TCP"}))
        .collect();
    let s = kube
        .create(json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": {"app.kubernetes.io/name": name}, "ports": ports}}))
        .await;
    let ip = s["spec"]["clusterIP"].as_str().map(str::to_owned);
    match ip {
        Some(ip) => ip,
        None => kube
            .get(&services(), ns, name)
            .await
            .and_then(|s| s["spec"]["clusterIP"].as_str().map(str::to_owned))
            .unwrap_or_else(|| panic!("Service {ns}/{name} has no clusterIP")),
    }
}
