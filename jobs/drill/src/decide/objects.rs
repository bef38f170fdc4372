//! The drill's throwaway objects (docs/design.md §5.9): a PVC restored from the snapshot
//! and a Pod that restores, starts and checks it. Pure builders: the decider calls them,
//! `plan` prints what they make.
//!
//! The Pod never touches a tablet: its PVC is its own clone of the snapshot, mysqld has no
//! network listener (`--skip-networking`), no replication (`--skip-replica-start`, MariaDB's
//! `--skip-slave-start`) and no
//! grant tables (only the Pod's two containers share its socket, an `emptyDir`), and it
//! belongs to no Service (its labels are vtsnap's, not the operator's). Its error log is
//! the clone's own `error.log`: vitess-operator's tablets log to
//! `/vt/config/stderr.symlink` (an `EXTRA_MY_CNF` file, so it is in the cloned my.cnf), a
//! path the drill Pod does not have.

use std::collections::BTreeMap;
use vtsnap_core::restore_pod::throwaway;

use k8s_openapi::api::core::v1::PodSecurityContext;
use serde_json::{Value, json};
use vtsnap_core::coverage::Exactness;
use vtsnap_core::labels::MANAGED_BY;
use vtsnap_core::naming::{TabletUid, join_with_limit};
use vtsnap_core::shard::ShardRef;
use vtsnap_core::shard::{LABEL_CLUSTER, LABEL_KEYSPACE, LABEL_SHARD};

/// The `app.kubernetes.io/managed-by` value of a drill's objects.
pub const MANAGED_BY_DRILL: &str = "vtsnap-drill";
/// The snapshot a drill object restores (annotation: names may exceed a label value).
pub const ANN_DRILL_OF: &str = "vtsnap.io/drill-of";
/// Labels the drill Pods, for the one-drill-per-node rule.
pub const LABEL_COMPONENT: &str = "app.kubernetes.io/component";
pub const COMPONENT_DRILL: &str = "drill";

pub use vtsnap_core::labels::MYSQLD_CONTAINER;
pub const CHECKER_CONTAINER: &str = "checker";
/// Where the checker leaves its report (the kubelet's default terminationMessagePath).
pub const RESULT_FILE: &str = "/dev/termination-log";
/// A container's termination message holds at most this many bytes.
pub const MAX_RESULT_BYTES: usize = 4096;
/// The Pod's own annotation holding the recorded position, which the checker reads as a
/// downward API file: a position may be longer than one argument or environment string may
/// be (128 KiB on Linux, `MAX_ARG_STRLEN`), but never longer than an annotation.
pub const ANN_POSITION: &str = "vtsnap.io/drill-position";
const POSITION_VOLUME: &str = "position";
const POSITION_DIR: &str = "/vtsnap/drill";
/// The file the checker reads the position from.
pub const POSITION_FILE: &str = "/vtsnap/drill/position";

/// The install's settings for drills (the chart's values; flags of `run` and `plan`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// `vtsnap-restore`'s image (the init container).
    pub restore_image: String,
    /// This program's image (the checker).
    pub checker_image: String,
    /// The tablet UID the restored directory is moved to (never a serving tablet's).
    pub drill_uid: TabletUid,
    /// The server binary in the tablet's image (`mysqld`, `mariadbd`).
    pub mysqld_command: String,
    /// `resources` of the mysqld container (the scheduler finds a node with room).
    pub mysqld_resources: Value,
    /// How long the Pod may run in all.
    pub deadline_seconds: u64,
    /// How long the checker may spend on `CHECK TABLE`.
    pub table_budget: String,
    /// How long mysqld may take to answer.
    pub ready_timeout: String,
    /// Secrets the kubelet pulls the drill Pod's images with (the chart's
    /// `imagePullSecrets`): the tablet's image and vtsnap's may both be private.
    pub image_pull_secrets: Vec<String>,
}

/// `run`'s defaults, written once for the command line and for every caller.
pub mod defaults {
    pub const DRILL_UID: u32 = 999_999_999;
    pub const MYSQLD_COMMAND: &str = "mysqld";
    pub const MYSQLD_RESOURCES: &str = vtsnap_core::cli::MYSQLD_RESOURCES;
    pub const DEADLINE: &str = "1h";
    pub const READY_TIMEOUT: &str = "10m";
    pub const TABLE_BUDGET: &str = "5m";
}

impl Settings {
    /// The settings of `run` with only its two images given: the command line's defaults.
    pub fn with_images(restore_image: &str, checker_image: &str) -> Self {
        Self {
            restore_image: restore_image.to_owned(),
            checker_image: checker_image.to_owned(),
            drill_uid: TabletUid::new(defaults::DRILL_UID),
            mysqld_command: defaults::MYSQLD_COMMAND.to_owned(),
            mysqld_resources: serde_json::from_str(defaults::MYSQLD_RESOURCES)
                .unwrap_or_else(|_| json!({})),
            deadline_seconds: 3600,
            table_budget: defaults::TABLE_BUDGET.to_owned(),
            ready_timeout: defaults::READY_TIMEOUT.to_owned(),
            image_pull_secrets: Vec::new(),
        }
    }
}

/// Who owns the drill's objects: the drill Job, so that the garbage collector removes
/// them when a killed drill leaves them behind.
pub use vtsnap_core::restore_pod::JobOwner as Owner;

/// What the drill restores and where.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub shard: ShardRef,
    pub snapshot: String,
    /// The recorded position and what it promises.
    pub position: String,
    pub exactness: Exactness,
    /// Bytes the PVC asks for (the tablets' request, at least the snapshot's size).
    pub storage_bytes: u128,
    /// The tablets' StorageClass (`None`: the cluster's default).
    pub storage_class: Option<String>,
    /// The tablet's mysqld image.
    pub mysqld_image: String,
    /// The tablet Pod's `securityContext` (the data's owner), if it has one.
    pub pod_security: Option<PodSecurityContext>,
    /// Node-local restore: `(restore.nodeLabel, the snapshot's source node)`.
    pub pin_to: Option<(String, String)>,
    /// Rotates which tables the checker samples first.
    pub sample_seed: u64,
}

/// `vtsnap-drill-<cluster>-<keyspace>-<shard>-<stamp>`, a valid name of at most 63
/// characters (a Pod's name is its hostname).
pub fn drill_name(shard: &ShardRef, stamp: &str) -> String {
    join_with_limit(
        &[
            "vtsnap-drill",
            &shard.cluster,
            &shard.keyspace,
            &shard.shard.safe_name(),
            stamp,
        ],
        63,
    )
}

fn labels(shard: &ShardRef) -> BTreeMap<&'static str, String> {
    BTreeMap::from([
        (MANAGED_BY, MANAGED_BY_DRILL.to_owned()),
        (LABEL_COMPONENT, COMPONENT_DRILL.to_owned()),
        (LABEL_CLUSTER, shard.cluster.clone()),
        (LABEL_KEYSPACE, shard.keyspace.clone()),
        (LABEL_SHARD, shard.shard.safe_name()),
    ])
}

fn metadata(name: &str, t: &Target, owner: Option<&Owner>) -> Value {
    let mut m = json!({
        "name": name,
        "namespace": t.shard.namespace,
        "labels": labels(&t.shard),
        "annotations": {ANN_DRILL_OF: t.snapshot},
    });
    if let Some(o) = owner {
        o.mark(&t.shard.namespace, &mut m);
    }
    m
}

/// The PVC: a clone of the snapshot, as a new tablet's would be.
pub fn pvc(name: &str, t: &Target, owner: Option<&Owner>) -> Value {
    let source = json!({"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": t.snapshot});
    let mut spec = json!({
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": t.storage_bytes.to_string()}},
        "dataSource": source,
        "dataSourceRef": source,
    });
    if let Some(class) = &t.storage_class {
        spec["storageClassName"] = json!(class);
    }
    json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": metadata(name, t, owner),
        "spec": spec,
    })
}

fn position_kind(e: Exactness) -> &'static str {
    match e {
        Exactness::Exact => "exact",
        Exactness::LowerBound => "lower-bound",
    }
}

/// The option that keeps replication from starting: MariaDB's name, or MySQL's since
/// 8.0.26 (the old one is deprecated there).
fn skip_replication(position: &str) -> &'static str {
    if position.starts_with("MariaDB/") {
        "--skip-slave-start"
    } else {
        "--skip-replica-start"
    }
}

/// The Pod: `vtsnap-restore` moves the clone to the drill's UID, mysqld starts on it with
/// no network, the checker judges it through the socket and then shuts it down.
pub fn pod(name: &str, t: &Target, s: &Settings, owner: Option<&Owner>) -> Value {
    let uid = s.drill_uid;
    let mysqld = throwaway::mysqld_container(
        MYSQLD_CONTAINER,
        (&t.mysqld_image, &s.mysqld_command),
        uid,
        skip_replication(&t.position),
        &s.mysqld_resources,
    );
    let mut spec = json!({
        "restartPolicy": "Never",
        "activeDeadlineSeconds": s.deadline_seconds,
        "automountServiceAccountToken": false,
        "enableServiceLinks": false,
        "securityContext": throwaway::pod_security(t.pod_security.as_ref()),
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {MANAGED_BY: MANAGED_BY_DRILL, LABEL_COMPONENT: COMPONENT_DRILL}},
            "namespaceSelector": {},
            "topologyKey": "kubernetes.io/hostname",
        }]}},
        "initContainers": [throwaway::restore_container(&s.restore_image, uid)],
        "containers": [
            mysqld,
            {
                "name": CHECKER_CONTAINER,
                "image": s.checker_image,
                "args": [
                    "check",
                    "--socket", throwaway::SOCKET,
                    "--position-file", POSITION_FILE,
                    "--position-kind", position_kind(t.exactness),
                    "--ready-timeout", s.ready_timeout,
                    "--table-budget", s.table_budget,
                    "--sample-seed", t.sample_seed.to_string(),
                    "--result-file", RESULT_FILE,
                    "--shutdown",
                ],
                "env": [{"name": "VTSNAP_LOG_FORMAT", "value": "json"}],
                "volumeMounts": [
                    throwaway::socket_mount(),
                    {"name": POSITION_VOLUME, "mountPath": POSITION_DIR, "readOnly": true},
                ],
                "securityContext": throwaway::unprivileged(),
                "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
                "terminationMessagePath": RESULT_FILE,
                "terminationMessagePolicy": "File",
            },
        ],
        "volumes": [
            {"name": throwaway::DATA_VOLUME, "persistentVolumeClaim": {"claimName": name}},
            {"name": throwaway::SOCKET_VOLUME, "emptyDir": {}},
            {"name": POSITION_VOLUME, "downwardAPI": {"items": [{
                "path": "position",
                "fieldRef": {"fieldPath": format!("metadata.annotations['{ANN_POSITION}']")},
            }]}},
        ],
    });
    if let Some((label, node)) = &t.pin_to {
        spec["nodeSelector"] = json!({ label.clone(): node });
    }
    if let Some(secrets) = throwaway::pull_secrets(&s.image_pull_secrets) {
        spec["imagePullSecrets"] = secrets;
    }
    let mut meta = metadata(name, t, owner);
    // No operator label: no Service selects it, no operator or vtsnap tablet logic sees it.
    meta["labels"]["vtsnap.io/drill-uid"] = json!(uid.get().to_string());
    meta["annotations"][ANN_POSITION] = json!(t.position);
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn settings() -> Settings {
        Settings::with_images("vtsnap/vtsnap-restore:1", "vtsnap/vtsnap-drill:1")
    }

    pub(crate) fn target() -> Target {
        Target {
            shard: ShardRef {
                namespace: "vitess".into(),
                cluster: "example".into(),
                keyspace: "commerce".into(),
                shard: "-80".parse().unwrap(),
            },
            snapshot: "example-commerce-x-80-20261203100000".into(),
            position: "MariaDB/0-1-100".into(),
            exactness: Exactness::Exact,
            storage_bytes: 10 << 30,
            storage_class: Some("topolvm".into()),
            mysqld_image: "vitess/mysql:8.0".into(),
            pod_security: None,
            pin_to: None,
            sample_seed: 7,
        }
    }

    #[test]
    fn the_drill_pod_pulls_with_the_install_s_secrets_only_when_given() {
        let none = pod("d", &target(), &settings(), None);
        assert!(none["spec"].get("imagePullSecrets").is_none(), "{none}");
        let s = Settings {
            image_pull_secrets: vec!["regcred".into(), "tablets".into()],
            ..settings()
        };
        let with = pod("d", &target(), &s, None);
        assert_eq!(
            with["spec"]["imagePullSecrets"],
            json!([{"name": "regcred"}, {"name": "tablets"}])
        );
    }

    #[test]
    fn the_defaults_are_the_command_line_s() {
        let s = settings();
        assert_eq!(s.drill_uid.get(), defaults::DRILL_UID);
        assert_eq!(
            s.mysqld_resources["limits"]["memory"], "2Gi",
            "{}",
            s.mysqld_resources
        );
        assert_eq!(
            defaults::DEADLINE
                .parse::<vtsnap_core::config::GoDuration>()
                .unwrap()
                .get()
                .as_secs(),
            s.deadline_seconds
        );
    }

    #[test]
    fn names_are_valid_hostnames_however_long_the_shard() {
        let t = target();
        // The operator's join: the parts, then a hash of them.
        let n = drill_name(&t.shard, "20261203100000");
        assert!(
            n.starts_with("vtsnap-drill-example-commerce-x-80-20261203100000-"),
            "{n}"
        );
        assert_ne!(n, drill_name(&t.shard, "20261203100001"));
        let mut long = t.shard.clone();
        long.keyspace = "k".repeat(80);
        let n = drill_name(&long, "20261203100000");
        assert!(n.len() <= 63, "{n}");
        assert!(vtsnap_core::k8s_names::dns_label(&n).is_ok(), "{n}");
    }

    #[test]
    fn the_pvc_clones_the_snapshot_and_is_owned_by_the_job() {
        let t = target();
        let owner = Owner {
            name: "drill-1".into(),
            uid: "u-1".into(),
            namespace: None,
        };
        let p = pvc("d", &t, Some(&owner));
        assert_eq!(p["spec"]["dataSourceRef"]["name"], t.snapshot);
        assert_eq!(p["spec"]["dataSource"], p["spec"]["dataSourceRef"]);
        assert_eq!(p["spec"]["storageClassName"], "topolvm");
        assert_eq!(p["spec"]["resources"]["requests"]["storage"], "10737418240");
        assert_eq!(p["metadata"]["ownerReferences"][0]["uid"], "u-1");
        assert_eq!(p["metadata"]["ownerReferences"][0]["kind"], "Job");
        assert_eq!(p["metadata"]["labels"][MANAGED_BY], MANAGED_BY_DRILL);
        assert_eq!(p["metadata"]["annotations"][ANN_DRILL_OF], t.snapshot);
        assert!(
            pvc(
                "d",
                &Target {
                    storage_class: None,
                    ..t
                },
                None
            )["spec"]
                .get("storageClassName")
                .is_none()
        );
    }

    #[test]
    fn the_pod_has_no_network_no_grants_no_replication_and_one_per_node() {
        let t = target();
        let p = pod("d", &t, &settings(), None);
        let spec = &p["spec"];
        assert_eq!(spec["restartPolicy"], "Never");
        assert_eq!(spec["automountServiceAccountToken"], false);
        let mysqld = &spec["containers"][0];
        let args: Vec<&str> = mysqld["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        for want in [
            "--skip-networking",
            "--skip-slave-start",
            "--skip-grant-tables",
            "--socket=/vt/socket/mysql.sock",
            "--defaults-file=/vt/vtdataroot/vt_0999999999/my.cnf",
            "--log-error=/vt/vtdataroot/vt_0999999999/error.log",
        ] {
            assert!(args.contains(&want), "{want}: {args:?}");
        }
        assert!(mysqld.get("ports").is_none());
        assert_eq!(mysqld["image"], "vitess/mysql:8.0");
        assert_eq!(mysqld["resources"]["requests"]["memory"], "1Gi");
        let restore = &spec["initContainers"][0];
        assert_eq!(restore["env"][0]["value"], "999999999");
        let checker = &spec["containers"][1];
        let cargs: Vec<&str> = checker["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(&cargs[..1], ["check"]);
        assert!(
            cargs
                .windows(2)
                .any(|w| w == ["--position-file", POSITION_FILE])
        );
        assert_eq!(
            p["metadata"]["annotations"][ANN_POSITION],
            "MariaDB/0-1-100"
        );
        assert!(cargs.windows(2).any(|w| w == ["--position-kind", "exact"]));
        assert!(cargs.windows(2).any(|w| w == ["--sample-seed", "7"]));
        assert!(cargs.contains(&"--shutdown"));
        assert_eq!(checker["terminationMessagePath"], RESULT_FILE);
        let anti = &spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            [0];
        assert_eq!(anti["topologyKey"], "kubernetes.io/hostname");
        assert_eq!(
            anti["labelSelector"]["matchLabels"][LABEL_COMPONENT],
            COMPONENT_DRILL
        );
        assert_eq!(
            spec["volumes"][0]["persistentVolumeClaim"]["claimName"],
            "d"
        );
        assert!(spec.get("nodeSelector").is_none());
        // No operator label: nothing of the operator's selects it.
        let labels = p["metadata"]["labels"].as_object().unwrap();
        assert!(
            labels.keys().all(|k| !k.starts_with("planetscale.com/")),
            "{labels:?}"
        );
        assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
    }

    /// Every string the kubelet hands the kernel as an argument or environment entry.
    fn exec_strings(p: &Value) -> Vec<String> {
        let mut out = Vec::new();
        for list in ["initContainers", "containers"] {
            for c in p["spec"][list].as_array().unwrap() {
                for key in ["command", "args"] {
                    for a in c[key].as_array().into_iter().flatten() {
                        out.push(a.as_str().unwrap().to_owned());
                    }
                }
                for e in c["env"].as_array().into_iter().flatten() {
                    let (n, v) = (e["name"].as_str().unwrap(), e["value"].as_str().unwrap());
                    out.push(format!("{n}={v}"));
                }
            }
        }
        out
    }

    #[test]
    fn a_144_kb_position_reaches_the_checker_as_a_file_not_an_argument() {
        // Round three item 14: the position was one argument, and a 144 KB one is over
        // Linux's 128 KiB per argument (E2BIG: the checker never starts).
        let sources: Vec<String> = (0..3600u32)
            .map(|i| format!("{i:08x}-71ca-11e1-9e33-c80aa9429562:1-9"))
            .collect();
        let position = format!("MySQL56/{}", sources.join(","));
        assert!(position.len() > 144_000, "{}", position.len());
        let t = Target {
            position: position.clone(),
            ..target()
        };
        let p = pod("d", &t, &settings(), None);
        let longest = exec_strings(&p).into_iter().map(|s| s.len()).max();
        assert!(longest < Some(128 * 1024), "{longest:?}");
        // Instead: the Pod's own annotation, projected into the checker as a file.
        assert_eq!(
            p["metadata"]["annotations"][ANN_POSITION],
            position.as_str()
        );
        let volume = p["spec"]["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v.get("downwardAPI").is_some())
            .unwrap();
        let item = &volume["downwardAPI"]["items"][0];
        assert_eq!(
            item["fieldRef"]["fieldPath"],
            "metadata.annotations['vtsnap.io/drill-position']"
        );
        let checker = &p["spec"]["containers"][1];
        let mount = checker["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == volume["name"])
            .unwrap();
        let path = format!(
            "{}/{}",
            mount["mountPath"].as_str().unwrap(),
            item["path"].as_str().unwrap()
        );
        assert_eq!(path, POSITION_FILE);
        assert_eq!(mount["readOnly"], true);
        // Nothing else carries it: the PVC has no copy.
        assert!(
            pvc("d", &t, None)["metadata"]["annotations"]
                .get(ANN_POSITION)
                .is_none()
        );
        // And the flavor still chooses mysqld's option.
        let margs = p["spec"]["containers"][0]["args"].as_array().unwrap();
        assert!(margs.contains(&json!("--skip-replica-start")));
    }

    #[test]
    fn node_local_pins_and_online_asks_for_a_lower_bound() {
        let t = Target {
            pin_to: Some(("kubernetes.io/hostname".into(), "node-2".into())),
            exactness: Exactness::LowerBound,
            pod_security: Some(PodSecurityContext {
                fs_group: Some(2000),
                ..PodSecurityContext::default()
            }),
            ..target()
        };
        let p = pod("d", &t, &settings(), None);
        assert_eq!(
            p["spec"]["nodeSelector"]["kubernetes.io/hostname"],
            "node-2"
        );
        assert_eq!(p["spec"]["securityContext"], json!({"fsGroup": 2000}));
        let cargs = p["spec"]["containers"][1]["args"].as_array().unwrap();
        assert!(
            cargs
                .windows(2)
                .any(|w| w[0] == "--position-kind" && w[1] == "lower-bound")
        );
    }
}
