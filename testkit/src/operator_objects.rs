//! Pods and PVCs shaped exactly as vitess-operator creates them (names, labels, volumes,
//! mounts, init containers), for the admission webhook's and the storage reconciler's
//! tests. Each shape is read from the operator's source (planetscale/vitess-operator):
//!
//! - tablet Pod: `pkg/operator/vttablet/pod.go` (`NewPod`, `UpdatePod`), volumes from
//!   `volumes.go` and `mysqlctld.go`, init containers `init-vt-root` and
//!   `init-mysql-socket` (`mysqlctld.go`), then the pool's; containers `vttablet`, `mysqld`
//!   (`constants.go`); labels from `pkg/controller/vitessshard/reconcile_tablets.go`;
//! - tablet PVC: `pkg/operator/vttablet/pvc.go` (`NewPVC`): the Pod's name and labels, the
//!   pool's `dataVolumeClaimTemplate` as its spec;
//! - vtbackup initial-backup Pod and PVC: `pkg/operator/vttablet/vtbackup_pod.go`
//!   (`InitialBackupPodName`, `NewBackupPod`), labels from
//!   `pkg/operator/vitessbackup/labels.go`; restartPolicy OnFailure; container `vtbackup`
//!   mounting `persistent-volume-claim` at `/vt/vtdataroot` (subPath `vtdataroot`); pool
//!   `extraVolumes` merged by name and `extraVolumeMounts` by mountPath;
//! - scheduled-backup PVC: `pkg/controller/vitessbackupschedule/vitessbackupschedule_controller.go`
//!   (`createVtbackupJob`): the Job's name (at most 63 characters), labels
//!   `backup.planetscale.com/type=update`, `planetscale.com/backup-schedule`, …

use serde_json::{Value, json};
use vtsnap_core::labels;
use vtsnap_core::naming::{
    KeyRange, TabletAlias, join_name, join_with_limit, tablet_pod_name, tablet_uid,
};

/// A shard's coordinates as the operator's labels carry them.
#[derive(Debug, Clone)]
pub struct OperatorShard {
    pub namespace: String,
    pub cluster: String,
    pub keyspace: String,
    pub shard: KeyRange,
    pub cell: String,
}

/// `example/commerce/-` in namespace `vitess`, cell `zone1`.
pub fn operator_shard() -> OperatorShard {
    OperatorShard {
        namespace: "vitess".into(),
        cluster: "example".into(),
        keyspace: "commerce".into(),
        shard: KeyRange::from_safe_name("x-x").unwrap_or_else(|e| panic!("{e}")),
        cell: "zone1".into(),
    }
}

/// A pool's `dataVolumeClaimTemplate` of `size`.
pub fn pvc_template(size: &str) -> Value {
    json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}})
}

impl OperatorShard {
    pub fn named(mut self, keyspace: &str, shard: &str) -> Self {
        self.keyspace = keyspace.into();
        self.shard = shard.parse().unwrap_or_else(|e| panic!("{e}"));
        self
    }

    fn shard_labels(&self) -> serde_json::Map<String, Value> {
        let mut m = serde_json::Map::new();
        m.insert(labels::CLUSTER.into(), json!(self.cluster));
        m.insert(labels::KEYSPACE.into(), json!(self.keyspace));
        m.insert(labels::SHARD.into(), json!(self.shard.safe_name()));
        m
    }

    /// Tablet `index` (from 1) of pool `pool`.
    pub fn tablet(&self, pool: &str, index: u32) -> OperatorTablet {
        let uid = tablet_uid(&self.cell, &self.keyspace, &self.shard, pool, index);
        let alias = TabletAlias {
            cell: self.cell.clone(),
            uid,
        };
        OperatorTablet {
            shard: self.clone(),
            pool: pool.into(),
            index,
            name: tablet_pod_name(&self.cluster, &alias),
            alias,
        }
    }

    /// The shard's VitessCluster, for an unsharded keyspace (`equal.parts: 1`): one
    /// replica pool of three tablets with `template` as its data volume claim template.
    pub fn unsharded_vitess_cluster(&self, template: &Value) -> Value {
        json!({"apiVersion": "planetscale.com/v2", "kind": "VitessCluster",
            "metadata": {"name": self.cluster, "namespace": self.namespace},
            "spec": {"keyspaces": [{"name": self.keyspace, "partitionings": [{"equal": {"parts": 1, "shardTemplate": {
                "tabletPools": [{"cell": self.cell, "type": "replica", "replicas": 3, "dataVolumeClaimTemplate": template}]}}}]}]}})
    }

    /// `<cluster>-<keyspace>-<shardSafe>-vtbackup-init-<hash8>`.
    pub fn vtbackup_init_name(&self) -> String {
        join_name(&[
            &self.cluster,
            &self.keyspace,
            &self.shard.safe_name(),
            "vtbackup",
            "init",
        ])
    }

    fn vtbackup_labels(&self) -> Value {
        let mut m = self.shard_labels();
        m.insert(labels::COMPONENT.into(), json!(labels::COMPONENT_VTBACKUP));
        m.insert("backup.planetscale.com/type".into(), json!("init"));
        m.insert("backup.planetscale.com/location".into(), json!(""));
        Value::Object(m)
    }

    /// The initial-backup Pod, built from the first pool (no extra volumes or mounts).
    pub fn vtbackup_init_pod(&self) -> Value {
        let name = self.vtbackup_init_name();
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": self.namespace, "labels": self.vtbackup_labels()},
            "spec": {
                "restartPolicy": "OnFailure",
                "securityContext": {"fsGroup": 999, "runAsUser": 999},
                "initContainers": [{"name": "init-vt-root", "image": "vitess/lite", "command": ["bash", "-c"],
                    "volumeMounts": [{"name": "vt-root", "mountPath": "/mnt/vt"}]}],
                "containers": [{"name": "vtbackup", "image": "vitess/lite", "command": ["/vt/bin/vtbackup"],
                    "volumeMounts": [
                        {"name": "vt-root", "mountPath": "/etc/ssl/certs", "subPath": "certs", "readOnly": true},
                        {"name": "vt-root", "mountPath": "/vt/bin", "subPath": "bin"},
                        {"name": "vt-root", "mountPath": "/vt/config", "subPath": "config"},
                        {"name": "vt-root", "mountPath": "/vt/socket", "subPath": "socket"},
                        {"name": labels::DATA_VOLUME, "mountPath": "/vt/vtdataroot", "subPath": "vtdataroot"}]}],
                "volumes": [
                    {"name": "vt-root", "emptyDir": {}},
                    {"name": labels::DATA_VOLUME, "persistentVolumeClaim": {"claimName": name}}],
            }
        })
    }

    /// The initial backup's PVC: the first pool's template as its spec.
    pub fn vtbackup_init_pvc(&self, template: &Value) -> Value {
        json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": self.vtbackup_init_name(), "namespace": self.namespace, "labels": self.vtbackup_labels()},
            "spec": template,
        })
    }

    /// A scheduled backup's PVC (named as its Job: at most 63 characters).
    pub fn scheduled_backup_pvc(
        &self,
        schedule: &str,
        scheduled_unix: i64,
        template: &Value,
    ) -> Value {
        let vbsc = join_name(&[&self.cluster, "vbsc", schedule]);
        let name = join_with_limit(
            &[
                &vbsc,
                &self.keyspace,
                &self.shard.safe_name(),
                &scheduled_unix.to_string(),
            ],
            63,
        );
        let mut l = self.shard_labels();
        l.insert("backup.planetscale.com/type".into(), json!("update"));
        l.insert("backup.planetscale.com/location".into(), json!(""));
        l.insert("planetscale.com/backup-schedule".into(), json!(vbsc));
        l.insert("planetscale.com/backup-method".into(), json!("vtbackup"));
        json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": self.namespace, "labels": l},
            "spec": template,
        })
    }
}

/// A pool's `extraVolumes` entry applied the operator's way: replaces the volume of its
/// name, or is appended.
pub fn with_extra_volume(mut pod: Value, volume: Value) -> Value {
    let name = volume.get("name").cloned();
    if let Some(vs) = pod
        .pointer_mut("/spec/volumes")
        .and_then(Value::as_array_mut)
    {
        match vs.iter_mut().find(|v| v.get("name") == name.as_ref()) {
            Some(v) => *v = volume,
            None => vs.push(volume),
        }
    }
    pod
}

/// A pool's `extraVolumeMounts` entry: replaces the mount at its path in every container,
/// or is appended.
pub fn with_extra_mount(mut pod: Value, mount: Value) -> Value {
    let path = mount.get("mountPath").cloned();
    if let Some(cs) = pod
        .pointer_mut("/spec/containers")
        .and_then(Value::as_array_mut)
    {
        for c in cs {
            if let Some(ms) = c.get_mut("volumeMounts").and_then(Value::as_array_mut) {
                match ms.iter_mut().find(|m| m.get("mountPath") == path.as_ref()) {
                    Some(m) => *m = mount.clone(),
                    None => ms.push(mount.clone()),
                }
            }
        }
    }
    pod
}

/// What a runnable tablet Pod's `mysqld` container runs.
#[derive(Debug, Clone)]
pub enum MysqldContainer<'a> {
    /// A FAKE: it only sleeps (no database; enough for an online snapshot's probe).
    Sleeper,
    /// A real database server under a supervisor that stands in for mysqlctld
    /// ([`crate::mariadb::pod_mysqld_command`]).
    Supervised {
        image: &'a str,
        command: Vec<String>,
    },
}

/// One tablet of a pool.
#[derive(Debug, Clone)]
pub struct OperatorTablet {
    pub shard: OperatorShard,
    pub pool: String,
    pub index: u32,
    pub alias: TabletAlias,
    /// The Pod's and the PVC's name.
    pub name: String,
}

impl OperatorTablet {
    fn labels(&self) -> Value {
        let mut m = self.shard.shard_labels();
        m.insert(labels::COMPONENT.into(), json!(labels::COMPONENT_VTTABLET));
        m.insert(labels::CELL.into(), json!(self.shard.cell));
        m.insert(labels::TABLET_UID.into(), json!(self.alias.uid.padded()));
        m.insert(labels::TABLET_TYPE.into(), json!(self.pool));
        m.insert(labels::TABLET_INDEX.into(), json!(self.index.to_string()));
        Value::Object(m)
    }

    /// The data PVC, with the pool's template as its spec.
    pub fn pvc(&self, template: &Value) -> Value {
        json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": self.name, "namespace": self.shard.namespace, "labels": self.labels()},
            "spec": template,
        })
    }

    /// The Pod (a pool with a data volume template, mysqld and no pool init containers).
    pub fn pod(&self) -> Value {
        let socket = json!({"name": "vt-root", "mountPath": "/vt/socket", "subPath": "socket"});
        let config = json!({"name": "vt-root", "mountPath": "/vt/config", "subPath": "config", "readOnly": true});
        let data = json!({"name": labels::DATA_VOLUME, "mountPath": "/vt/vtdataroot", "subPath": "vtdataroot"});
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": self.name, "namespace": self.shard.namespace, "labels": self.labels()},
            "spec": {
                "securityContext": {"fsGroup": 999, "runAsUser": 999},
                "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 2, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {
                        labels::CLUSTER: self.shard.cluster, labels::KEYSPACE: self.shard.keyspace, labels::SHARD: self.shard.shard.safe_name()}}}}]}},
                "initContainers": [
                    {"name": "init-vt-root", "image": "vitess/lite", "volumeMounts": [{"name": "vt-root", "mountPath": "/mnt/vt"}]},
                    {"name": "init-mysql-socket", "image": "vitess/lite", "volumeMounts": [data]}],
                "containers": [
                    {"name": "vttablet", "image": "vitess/lite", "command": ["/vt/bin/vttablet"], "volumeMounts": [config, socket, data]},
                    {"name": "mysqld", "image": "vitess/lite", "command": ["/vt/bin/mysqlctld"], "volumeMounts": [config, socket, data]}],
                "volumes": [
                    {"name": "vt-root", "emptyDir": {}},
                    {"name": labels::DATA_VOLUME, "persistentVolumeClaim": {"claimName": self.name}}],
            }
        })
    }

    /// [`Self::pod`] made runnable by a real kubelet from local images (never pulled): the
    /// operator's names, labels, volumes and mounts, with commands that stand in for
    /// Vitess's. The init containers make `/vt/socket` and `/vt/config` in `vt-root`;
    /// `vttablet` is a FAKE (a sleeper: vttablet cannot run here) and `mysqld` is `mysqld`.
    /// Every container ends at once on SIGTERM.
    pub fn runnable_pod(&self, shell_image: &str, mysqld: &MysqldContainer) -> Value {
        let sleeper = json!(["/bin/sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]);
        let mut pod = self.pod();
        let spec = &mut pod["spec"];
        spec["terminationGracePeriodSeconds"] = json!(5);
        let (mysqld_image, mysqld_command) = match mysqld {
            MysqldContainer::Sleeper => (shell_image, sleeper.clone()),
            MysqldContainer::Supervised { image, command } => (*image, json!(command)),
        };
        let commands = [
            (
                "initContainers",
                0,
                shell_image,
                json!(["/bin/sh", "-c", "mkdir -p /mnt/vt/socket /mnt/vt/config"]),
            ),
            (
                "initContainers",
                1,
                shell_image,
                json!(["/bin/sh", "-c", "test -d /vt/vtdataroot"]),
            ),
            ("containers", 0, shell_image, sleeper),
            ("containers", 1, mysqld_image, mysqld_command),
        ];
        for (list, i, image, command) in commands {
            let c = &mut spec[list][i];
            c["image"] = json!(image);
            c["imagePullPolicy"] = json!("Never");
            c["command"] = command;
        }
        pod
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_operators_formulas() {
        let s = operator_shard();
        // pkg/operator/vttablet/uid.go and names/join.go (see core's naming tests).
        assert_eq!(
            s.tablet("replica", 1).name,
            "example-vttablet-zone1-2548885007-46a852d0"
        );
        assert_eq!(
            s.vtbackup_init_name(),
            "example-commerce-x-x-vtbackup-init-c6db73c9"
        );
        let p = s.scheduled_backup_pvc("daily", 1_800_000_000, &pvc_template("10Gi"));
        let name = p["metadata"]["name"].as_str().unwrap();
        assert!(name.len() <= 63, "{name}");
    }
}

/// One of vtsnap's VolumeSnapshots of `shard` as `vtsnap-snapshot run` leaves it once
/// ready: cut at `cut`, of the PVC of the shard's second replica (a MySQL 8.0.36 tablet on
/// `node-2`), `restoreSize` 64Gi.
#[derive(Debug, Clone)]
pub struct VtsnapSnapshot {
    pub shard: OperatorShard,
    pub name: String,
    pub cut: k8s_openapi::jiff::Timestamp,
    pub ready: bool,
    pub phase: &'static str,
    pub version: String,
    pub flavor: &'static str,
    pub size: Option<String>,
    pub node: String,
    pub unusable: Option<String>,
    /// The `vtsnap.io/drill` value, as written.
    pub drill: Option<String>,
}

impl OperatorShard {
    pub fn snapshot(&self, name: &str, cut: k8s_openapi::jiff::Timestamp) -> VtsnapSnapshot {
        VtsnapSnapshot {
            shard: self.clone(),
            name: name.into(),
            cut,
            ready: true,
            phase: "ready",
            version: "8.0.36".into(),
            flavor: "mysql",
            size: Some("64Gi".into()),
            node: "node-2".into(),
            unusable: None,
            drill: None,
        }
    }
}

impl VtsnapSnapshot {
    /// Its `metadata.uid` (the fixture's: `uid-<name>`).
    pub fn uid(&self) -> String {
        format!("uid-{}", self.name)
    }

    /// What a drill record of it names: its UID and cut.
    pub fn drill_of(&self) -> vtsnap_core::snapshot::DrillOf {
        vtsnap_core::snapshot::DrillOf {
            uid: self.uid(),
            cut: self.cut,
        }
    }

    /// A well-formed position of the snapshot's flavor (snapshots with others are refused).
    fn gtid_executed(&self) -> &'static str {
        if self.flavor == "mariadb" {
            "MariaDB/0-1-100"
        } else {
            "MySQL56/3e11fa47-71ca-11e1-9e33-c80aa9429562:1-100"
        }
    }

    pub fn object(&self) -> Value {
        use vtsnap_core::snapshot::{
            ANN_CUT_TIME, ANN_DRILL, ANN_GTID_EXECUTED, ANN_UNUSABLE, LABEL_PHASE, NewSnapshot,
            build,
        };
        let r = vtsnap_core::shard::ShardRef {
            cluster: self.shard.cluster.clone(),
            namespace: self.shard.namespace.clone(),
            keyspace: self.shard.keyspace.clone(),
            shard: self.shard.shard.clone(),
        };
        let none = std::collections::BTreeMap::new();
        // Taken of the shard's second replica, as the snapshot job records it (a source
        // that is not a tablet PVC of the labelled shard is refused).
        let source = self.shard.tablet("replica", 2);
        let alias = source.alias.to_string();
        let mut o = build(&NewSnapshot {
            shard: &r,
            name: self.name.clone(),
            class: None,
            source_pvc: &source.name,
            source_tablet: &alias,
            source_uid: source.alias.uid.get(),
            source_node: &self.node,
            mode: "cold",
            gtid: (ANN_GTID_EXECUTED, self.gtid_executed()),
            mysql_version: &self.version,
            mysql_flavor: self.flavor,
            extra_labels: &none,
            extra_annotations: &none,
            owner: None,
        });
        let cut = self.cut.to_string();
        o["metadata"]["creationTimestamp"] = json!(cut);
        o["metadata"]["uid"] = json!(self.uid());
        o["metadata"]["labels"][LABEL_PHASE] = json!(self.phase);
        o["metadata"]["annotations"][ANN_CUT_TIME] = json!(cut);
        if let Some(u) = &self.unusable {
            o["metadata"]["annotations"][ANN_UNUSABLE] = json!(u);
        }
        if let Some(d) = &self.drill {
            o["metadata"]["annotations"][ANN_DRILL] = json!(d);
        }
        o["status"] = json!({"boundVolumeSnapshotContentName": format!("c-{}", self.name), "creationTime": cut,
            "readyToUse": self.ready});
        if let Some(s) = &self.size {
            o["status"]["restoreSize"] = json!(s);
        }
        o
    }
}
