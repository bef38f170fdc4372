//! Fixture builders for a vitess-operator shard: Pods, PVCs and labels in [`FakeKube`],
//! and the matching tablets in [`FakeVtctld`]. Tests read like the situation they set up:
//!
//! ```text
//! shard().replicas(3).primary(1).lagging(2, 30).install(&kube, &vtctld);
//! ```
//!
//! Tablets are numbered by their index in the replica pool (1, 2, …) and then the rdonly
//! pool; UIDs and names follow the operator's formulas.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use serde_json::json;
use vtsnap_core::labels;
use vtsnap_core::naming::{KeyRange, TabletAlias, tablet_pod_name, tablet_uid};
use vtsnap_core::shard::ShardRef;
use vtsnap_core::vtctld::messages::replicationdata::{
    FullStatus, PrimaryStatus, STATE_RUNNING, STATE_STOPPED, Status,
};
use vtsnap_core::vtctld::messages::topodata::{self, Tablet, TabletType};

use crate::fake_kube::FakeKube;
use crate::fake_vtctld::{FakeShard, FakeTablet, FakeVtctld};

/// One tablet of the fixture.
#[derive(Debug, Clone)]
pub struct FixtureTablet {
    pub number: usize,
    pub pool: &'static str,
    pub index: u32,
    pub alias: TabletAlias,
    pub pod: String,
    pub node: String,
}

#[derive(Debug, Clone)]
pub struct ShardFixture {
    pub cluster: String,
    pub namespace: String,
    pub keyspace: String,
    pub shard: KeyRange,
    pub cell: String,
    replicas: u32,
    rdonly: u32,
    primary: Option<usize>,
    lag: BTreeMap<usize, u32>,
    stopped: BTreeSet<usize>,
    not_ready: BTreeSet<usize>,
    pending: BTreeSet<usize>,
    terminating: BTreeSet<usize>,
    no_pod: BTreeSet<usize>,
    no_pvc: BTreeSet<usize>,
    not_in_vtctld: BTreeSet<usize>,
    vt_type: BTreeMap<usize, TabletType>,
    unpadded: bool,
    variables: BTreeMap<String, String>,
    /// Every tablet's Pod on this node (otherwise tablet n is on `node-<n>`).
    node: Option<String>,
}

/// A shard `example/commerce/-` in namespace `vitess`, cell `zone1`, with no tablets yet.
pub fn shard() -> ShardFixture {
    ShardFixture {
        cluster: "example".into(),
        namespace: "vitess".into(),
        keyspace: "commerce".into(),
        shard: "-".parse().unwrap(),
        cell: "zone1".into(),
        replicas: 0,
        rdonly: 0,
        primary: None,
        lag: BTreeMap::new(),
        stopped: BTreeSet::new(),
        not_ready: BTreeSet::new(),
        pending: BTreeSet::new(),
        terminating: BTreeSet::new(),
        no_pod: BTreeSet::new(),
        no_pvc: BTreeSet::new(),
        not_in_vtctld: BTreeSet::new(),
        vt_type: BTreeMap::new(),
        unpadded: false,
        node: None,
        variables: [
            ("sync_binlog", "1"),
            ("innodb_flush_log_at_trx_commit", "1"),
            ("log_bin", "1"),
            ("gtid_mode", "ON"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect(),
    }
}

impl ShardFixture {
    pub fn named(mut self, keyspace: &str, shard: &str) -> Self {
        self.keyspace = keyspace.into();
        self.shard = shard.parse().unwrap();
        self
    }

    /// `n` tablets in the replica pool (the primary is one of them).
    pub fn replicas(mut self, n: u32) -> Self {
        self.replicas = n;
        self
    }

    pub fn rdonly(mut self, n: u32) -> Self {
        self.rdonly = n;
        self
    }

    /// Tablet `number` is the primary (shard record and tablet type).
    pub fn primary(mut self, number: usize) -> Self {
        self.primary = Some(number);
        self
    }

    pub fn lagging(mut self, number: usize, seconds: u32) -> Self {
        self.lag.insert(number, seconds);
        self
    }

    pub fn replication_stopped(mut self, number: usize) -> Self {
        self.stopped.insert(number);
        self
    }

    pub fn not_ready(mut self, number: usize) -> Self {
        self.not_ready.insert(number);
        self
    }

    pub fn pending(mut self, number: usize) -> Self {
        self.pending.insert(number);
        self
    }

    pub fn terminating(mut self, number: usize) -> Self {
        self.terminating.insert(number);
        self
    }

    /// vtctld knows the tablet; Kubernetes has no Pod for it.
    pub fn pod_missing(mut self, number: usize) -> Self {
        self.no_pod.insert(number);
        self
    }

    pub fn pvc_missing(mut self, number: usize) -> Self {
        self.no_pvc.insert(number);
        self
    }

    /// A Pod vtctld does not know.
    pub fn unknown_to_vtctld(mut self, number: usize) -> Self {
        self.not_in_vtctld.insert(number);
        self
    }

    /// vtctld reports this type for the tablet (whatever the shard record says).
    pub fn vtctld_type(mut self, number: usize, t: TabletType) -> Self {
        self.vt_type.insert(number, t);
        self
    }

    /// Every tablet's Pod runs on `node` (one node, as in the local lab).
    pub fn on_node(mut self, node: &str) -> Self {
        self.node = Some(node.to_owned());
        self
    }

    /// `planetscale.com/tablet-uid` labels without zero padding (older operators).
    pub fn unpadded_uid_labels(mut self) -> Self {
        self.unpadded = true;
        self
    }

    /// A MySQL variable every tablet reports (ExecuteFetchAsDBA `SELECT @@name`).
    pub fn variable(mut self, name: &str, value: &str) -> Self {
        self.variables.insert(name.into(), value.into());
        self
    }

    pub fn shard_ref(&self) -> ShardRef {
        ShardRef {
            cluster: self.cluster.clone(),
            namespace: self.namespace.clone(),
            keyspace: self.keyspace.clone(),
            shard: self.shard.clone(),
        }
    }

    /// All tablets, replica pool first.
    pub fn tablets(&self) -> Vec<FixtureTablet> {
        let pools = (1..=self.replicas)
            .map(|i| ("replica", i))
            .chain((1..=self.rdonly).map(|i| ("rdonly", i)));
        pools
            .enumerate()
            .map(|(n, (pool, index))| {
                let uid = tablet_uid(&self.cell, &self.keyspace, &self.shard, pool, index);
                let alias = TabletAlias {
                    cell: self.cell.clone(),
                    uid,
                };
                FixtureTablet {
                    number: n + 1,
                    pool,
                    index,
                    pod: tablet_pod_name(&self.cluster, &alias),
                    node: self
                        .node
                        .clone()
                        .unwrap_or_else(|| format!("node-{}", n + 1)),
                    alias,
                }
            })
            .collect()
    }

    pub fn tablet(&self, number: usize) -> FixtureTablet {
        self.tablets()
            .into_iter()
            .find(|t| t.number == number)
            .unwrap()
    }

    pub fn alias(&self, number: usize) -> TabletAlias {
        self.tablet(number).alias
    }

    fn pod(&self, t: &FixtureTablet) -> Pod {
        let uid_label = if self.unpadded {
            t.alias.uid.get().to_string()
        } else {
            t.alias.uid.padded()
        };
        let ready = !self.not_ready.contains(&t.number) && !self.pending.contains(&t.number);
        let phase = if self.pending.contains(&t.number) {
            "Pending"
        } else {
            "Running"
        };
        let mut meta = json!({
            "name": t.pod, "namespace": self.namespace,
            "labels": {
                labels::COMPONENT: labels::COMPONENT_VTTABLET, labels::CLUSTER: self.cluster,
                labels::KEYSPACE: self.keyspace, labels::SHARD: self.shard.safe_name(),
                labels::CELL: self.cell, labels::TABLET_UID: uid_label,
                labels::TABLET_TYPE: t.pool, labels::TABLET_INDEX: t.index.to_string(),
            }
        });
        if self.terminating.contains(&t.number) {
            meta["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
            meta["finalizers"] = json!(["test/hold"]);
        }
        serde_json::from_value(json!({
            "metadata": meta,
            "spec": {
                "nodeName": if phase == "Pending" { None } else { Some(&t.node) },
                "containers": [{"name": "mysqld", "image": "vitess/lite"}],
                "volumes": [{"name": labels::DATA_VOLUME, "persistentVolumeClaim": {"claimName": t.pod}}],
            },
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
        }))
        .unwrap()
    }

    fn pvc(&self, t: &FixtureTablet) -> PersistentVolumeClaim {
        serde_json::from_value(json!({
            "metadata": {"name": t.pod, "namespace": self.namespace, "labels": {
                labels::COMPONENT: labels::COMPONENT_VTTABLET, labels::CLUSTER: self.cluster,
                labels::KEYSPACE: self.keyspace, labels::SHARD: self.shard.safe_name(),
                labels::CELL: self.cell, labels::TABLET_UID: t.alias.uid.padded(),
            }},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}, "storageClassName": "topolvm-provisioner"},
            "status": {"phase": "Bound"},
        }))
        .unwrap()
    }

    /// The vtctld Service vitess-operator creates.
    pub fn vtctld_service(&self) -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": format!("{}-{}-vtctld-6e7ab2a8", self.cluster, self.cell), "namespace": self.namespace,
                         "labels": {labels::COMPONENT: labels::COMPONENT_VTCTLD, labels::CLUSTER: self.cluster}},
            "spec": {"ports": [{"name": "web", "port": 15000}, {"name": labels::VTCTLD_GRPC_PORT_NAME, "port": 15999}]},
        }))
        .unwrap()
    }

    fn fake_tablet(&self, t: &FixtureTablet, is_primary: bool) -> FakeTablet {
        let ty = self
            .vt_type
            .get(&t.number)
            .copied()
            .unwrap_or(match (is_primary, t.pool) {
                (true, _) => TabletType::Primary,
                (false, "rdonly") => TabletType::Rdonly,
                _ => TabletType::Replica,
            });
        let running = if self.stopped.contains(&t.number) {
            STATE_STOPPED
        } else {
            STATE_RUNNING
        };
        let position = "MariaDB/0-100-1000";
        let uid = t.alias.uid.get();
        let status = (!is_primary).then(|| Status {
            position: position.into(),
            replication_lag_seconds: self.lag.get(&t.number).copied().unwrap_or(0),
            io_state: running,
            sql_state: running,
            auto_position: true,
            using_gtid: true,
            // A stopped replica cannot tell its lag (as real vtctld reports it).
            replication_lag_unknown: running == STATE_STOPPED,
            ..Default::default()
        });
        FakeTablet {
            tablet: Tablet {
                alias: Some((&t.alias).into()),
                hostname: format!("{}.vttablet", t.pod),
                keyspace: self.keyspace.clone(),
                shard: self.shard.to_string(),
                r#type: ty as i32,
                port_map: [("grpc".to_owned(), 15999), ("vt".to_owned(), 15000)].into(),
                mysql_port: 3306,
                ..Default::default()
            },
            status,
            full: FullStatus {
                server_id: 1_000_000 + uid % 1_000_000,
                server_uuid: format!("{uid:08x}-0000-4000-8000-00000000c0de"),
                version: "10.11.18-MariaDB".into(),
                version_comment: "Debian 12".into(),
                gtid_mode: "ON".into(),
                binlog_format: "ROW".into(),
                log_bin_enabled: true,
                log_replica_updates: true,
                // Every tablet writes binlogs (replicas too: log_replica_updates).
                primary_status: Some(PrimaryStatus {
                    position: position.into(),
                    file_position: format!("FilePos/vt-{uid:010}-bin.000001:1000"),
                }),
                read_only: ty != TabletType::Primary,
                super_read_only: ty != TabletType::Primary,
                ..Default::default()
            },
            variables: self.variables.clone(),
            mysqld_down: false,
        }
    }

    /// Creates the vtctld Service, the Pods (Running, Ready as the fixture says: there is
    /// no kubelet, so the status is set by hand; bound to the cluster's first Node unless
    /// [`Self::on_node`] names one) and the PVCs (of `storage_class`, bound by its real
    /// provisioner) in a real API server under `namespace`, and the tablets in vtctld.
    /// Returns each tablet's PVC's bound PV name, by tablet number.
    pub async fn install_real(
        &self,
        kube: &crate::real_kube::RealKube,
        namespace: &str,
        storage_class: &str,
        vtctld: &FakeVtctld,
    ) -> BTreeMap<usize, String> {
        let mut fixture = self.clone();
        fixture.namespace = namespace.to_owned();
        if fixture.node.is_none() {
            // The pod garbage collector deletes Pods bound to a Node that does not exist
            // (after 40 s): bind them to one that does.
            fixture.node = Some(kube.first_node().await);
        }
        let with_kind = |mut v: serde_json::Value, api_version: &str, kind: &str| {
            v["apiVersion"] = json!(api_version);
            v["kind"] = json!(kind);
            v.as_object_mut().map(|o| o.remove("status"));
            v
        };
        kube.create(with_kind(
            serde_json::to_value(fixture.vtctld_service()).unwrap(),
            "v1",
            "Service",
        ))
        .await;
        let mut pvs = BTreeMap::new();
        for t in fixture.tablets() {
            if !fixture.no_pvc.contains(&t.number) {
                kube.create(fixture.real_pvc(t.number, storage_class, None))
                    .await;
            }
            if !fixture.no_pod.contains(&t.number) {
                let pod = serde_json::to_value(fixture.pod(&t)).unwrap();
                let mut pod = with_kind(pod, "v1", "Pod");
                // A deletionTimestamp cannot be set on create; terminating pods are for
                // the fake API only.
                pod["metadata"].as_object_mut().map(|m| {
                    m.remove("deletionTimestamp");
                    m.remove("finalizers")
                });
                kube.create(pod).await;
                if !fixture.pending.contains(&t.number) {
                    let ready = !fixture.not_ready.contains(&t.number);
                    kube.set_pod_running(namespace, &t.pod, ready).await;
                }
            }
        }
        for t in fixture.tablets() {
            if !fixture.no_pvc.contains(&t.number) {
                let pv = kube
                    .wait_pvc_bound(namespace, &t.pod, std::time::Duration::from_secs(60))
                    .await;
                pvs.insert(t.number, pv);
            }
        }
        fixture.install_vtctld(vtctld);
        pvs
    }

    /// Tablet `number`'s PVC as a real API server takes it (64Mi of `storage_class`, no
    /// status), restored from the VolumeSnapshot `from_snapshot` when given: what the
    /// admission webhook makes of the operator's PVC.
    pub fn real_pvc(
        &self,
        number: usize,
        storage_class: &str,
        from_snapshot: Option<&str>,
    ) -> serde_json::Value {
        let mut pvc = serde_json::to_value(self.pvc(&self.tablet(number))).unwrap();
        pvc["apiVersion"] = json!("v1");
        pvc["kind"] = json!("PersistentVolumeClaim");
        pvc.as_object_mut().map(|o| o.remove("status"));
        pvc["spec"]["storageClassName"] = json!(storage_class);
        pvc["spec"]["resources"]["requests"]["storage"] = json!("64Mi");
        if let Some(snapshot) = from_snapshot {
            let source = json!({"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": snapshot});
            pvc["spec"]["dataSource"] = source.clone();
            pvc["spec"]["dataSourceRef"] = source;
        }
        pvc
    }

    /// Creates the Pods, PVCs and vtctld Service in the fake API and the tablets in vtctld.
    pub fn install(&self, kube: &FakeKube, vtctld: &FakeVtctld) {
        kube.put(&self.vtctld_service());
        for t in self.tablets() {
            if !self.no_pod.contains(&t.number) {
                kube.put(&self.pod(&t));
            }
            if !self.no_pvc.contains(&t.number) {
                kube.put(&self.pvc(&t));
            }
        }
        self.install_vtctld(vtctld);
    }

    /// The shard and its tablets in the fake vtctld.
    pub fn install_vtctld(&self, vtctld: &FakeVtctld) {
        let primary_alias = self.primary.map(|n| self.alias(n));
        let mut fake = FakeShard {
            primary: primary_alias.as_ref().map(topodata::TabletAlias::from),
            tablets: BTreeMap::new(),
        };
        for t in self.tablets() {
            if !self.not_in_vtctld.contains(&t.number) {
                let is_primary = self.primary == Some(t.number);
                fake.tablets
                    .insert(t.alias.to_string(), self.fake_tablet(&t, is_primary));
            }
        }
        vtctld.with(|s| {
            s.shards
                .insert((self.keyspace.clone(), self.shard.to_string()), fake)
        });
    }
}

/// A vtsnap VolumeSnapshot of `example/commerce/-` in `ns` that never becomes ready: its
/// source PVC does not exist (for the real API tier, where the CSI stack would act on it).
pub fn unready_snapshot(ns: &str, name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
        "metadata": {"name": name, "namespace": ns, "labels": {
            "app.kubernetes.io/managed-by": "vtsnap", "vtsnap.io/cluster": "example",
            "vtsnap.io/keyspace": "commerce", "vtsnap.io/shard": "x-x",
            "vtsnap.io/phase": "cut", "vtsnap.io/mode": "cold"}},
        "spec": {"volumeSnapshotClassName": "vtsnap-btrfs",
                 "source": {"persistentVolumeClaimName": "no-such-pvc"}}
    })
}
