//! The snapshot job, the GC and the restore on a real API server with the real CSI
//! snapshot stack: VolumeSnapshot → snapshot-controller → VolumeSnapshotContent →
//! csi-snapshotter → the btrfs CSI driver, and PVC `dataSourceRef` → csi-provisioner →
//! the driver → PV bound. vtctld and the node helper are fakes (neither can run here;
//! docs/design.md §7); the fake node answers the fence lease on the real API server.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;
use vtsnap_core::shard::ShardName;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use serde_json::{Value, json};
use vtsnap_core::config::{Config, Mode};
use vtsnap_core::fence::lease_name;
use vtsnap_core::naming::{TabletAlias, TabletUid};
use vtsnap_core::snapshot::{ANN_GTID_EXECUTED, ANN_GTID_LOWER_BOUND, GROUP, LABEL_PHASE};
use vtsnap_core::vtctld::TabletType;
use vtsnap_gc::act::{GcOptions, run as gc_run};
use vtsnap_snapshot::run::{Outcome, RunOptions, Summary, run};
use vtsnap_testkit::fake_node::{ApiLeases, FakeNodeHelper, NodeScript};
use vtsnap_testkit::fake_vtctld::FakeVtctld;
use vtsnap_testkit::fixtures::{ShardFixture, shard};
use vtsnap_testkit::grpc::Running;
use vtsnap_testkit::layout::TabletLayout;
use vtsnap_testkit::real_kube::{
    BTRFS_CLASS, BTRFS_DRIVER, RealKube, TestNamespace, resource, snapshot_ready,
};

const LIMIT: Duration = Duration::from_secs(90);

fn snapshots() -> kube::core::ApiResource {
    resource(GROUP, "v1", "VolumeSnapshot", "volumesnapshots")
}

fn contents() -> kube::core::ApiResource {
    resource(
        GROUP,
        "v1",
        "VolumeSnapshotContent",
        "volumesnapshotcontents",
    )
}

/// A shard of three tablets whose PVCs the real provisioner bound, each volume holding
/// its tablet's directory as vitess-operator pods leave it.
struct RealShard {
    kube: RealKube,
    ns: TestNamespace,
    vtctld: FakeVtctld,
    vt: Running,
    _node: FakeNodeHelper,
}

impl RealShard {
    async fn start(prefix: &str, fixture: ShardFixture) -> Self {
        let kube = RealKube::from_env().await;
        let ns = kube.namespace(prefix).await;
        let vtctld = FakeVtctld::new();
        let pvs = fixture
            .install_real(&kube, &ns.name, BTRFS_CLASS, &vtctld)
            .await;
        for (n, pv) in &pvs {
            let dir = kube.volume_dir(pv).await.join("vtdataroot");
            std::fs::create_dir_all(&dir).unwrap();
            TabletLayout::mariadb(fixture.alias(*n).uid.get())
                .write(&dir)
                .unwrap();
        }
        let vt = vtctld.serve().await;
        let node = FakeNodeHelper::start_on(
            ApiLeases(kube.client()),
            "",
            NodeScript::default(),
            Duration::from_millis(50),
        );
        Self {
            kube,
            ns,
            vtctld,
            vt,
            _node: node,
        }
    }

    fn config(&self, extra: &str) -> Config {
        Config::from_yaml(&format!(
            "clusters:\n- name: example\n  namespace: {}\n  vtctld: \"{}\"\n  \
             snapshot: {{volumeSnapshotClassName: {BTRFS_CLASS}, cutTimeout: 60s, readyTimeout: 60s, maxHold: 60s}}\n{extra}",
            self.ns.name,
            self.vt.endpoint()
        ))
        .unwrap()
    }

    async fn snapshot(&self, mode: Mode) -> Summary {
        self.snapshot_as(mode, "job-real").await
    }

    async fn snapshot_as(&self, mode: Mode, holder: &str) -> Summary {
        let opts = RunOptions {
            mode: Some(mode),
            holder: holder.into(),
            lease_duration: Duration::from_secs(15),
            node_timeout: Duration::from_secs(30),
            poll: Duration::from_millis(200),
            ..RunOptions::default()
        };
        run(
            &self.config(""),
            &ShardName::new("example", "commerce", "-"),
            &opts,
            self.kube.client(),
        )
        .await
    }

    async fn stored_snapshot(&self, name: &str) -> Value {
        self.kube
            .get(&snapshots(), &self.ns.name, name)
            .await
            .unwrap_or_else(|| panic!("VolumeSnapshot {name} is not on the server"))
    }

    /// The target ends as it began: original type.
    fn assert_back_to_replica(&self, s: &Summary) {
        let alias = s.target.as_deref().expect("a target");
        let t = self.vtctld.tablet(&alias.parse().unwrap()).unwrap();
        assert_eq!(
            t.tablet.r#type,
            TabletType::Replica as i32,
            "{alias}: {:?}",
            self.vtctld.calls()
        );
    }

    async fn lease_left(&self) -> bool {
        let api: Api<Lease> = Api::namespaced(self.kube.client(), &self.ns.name);
        api.get_opt(&lease_name("example", "commerce", "x-x"))
            .await
            .unwrap()
            .is_some()
    }
}

fn label<'a>(v: &'a Value, k: &str) -> &'a str {
    v["metadata"]["labels"][k].as_str().unwrap_or("")
}

fn annotation<'a>(v: &'a Value, k: &str) -> &'a str {
    v["metadata"]["annotations"][k].as_str().unwrap_or("")
}

#[tokio::test]
async fn a_cold_snapshot_is_cut_by_the_real_csi_stack_and_a_new_tablet_restores_from_it() {
    let w = RealShard::start("cold", shard().replicas(3).primary(1)).await;
    let s = w.snapshot(Mode::Cold).await;
    assert_eq!((s.exit_code, s.outcome), (0, Outcome::Done), "{s:?}");
    w.assert_back_to_replica(&s);
    assert!(!w.lease_left().await, "the fence lease was left behind");
    let target = s.target.clone().unwrap();
    let calls: Vec<String> = w
        .vtctld
        .calls()
        .into_iter()
        .filter(|c| c.contains(&target) && (c.starts_with("Change") || c.contains("Replication ")))
        .collect();
    assert_eq!(
        calls,
        [
            format!("ChangeTabletType {target} DRAINED"),
            format!("StopReplication {target}"),
            format!("StartReplication {target}"),
            format!("ChangeTabletType {target} REPLICA"),
        ]
    );

    // The object on the server: vtsnap's labels and annotations, cut and ready by the
    // real controllers, bound to a content our driver made.
    let name = s.snapshot.clone().expect("a snapshot name");
    let v = w.stored_snapshot(&name).await;
    assert_eq!(label(&v, LABEL_PHASE), "ready", "{v}");
    assert!(snapshot_ready(&v), "{v}");
    assert!(
        annotation(&v, ANN_GTID_EXECUTED).starts_with("MariaDB/"),
        "{v}"
    );
    let content = v["status"]["boundVolumeSnapshotContentName"]
        .as_str()
        .expect("bound to a content");
    let c = w
        .kube
        .get(&contents(), "", content)
        .await
        .unwrap_or_else(|| panic!("VolumeSnapshotContent {content}"));
    assert_eq!(c["spec"]["driver"], BTRFS_DRIVER);
    assert!(c["status"]["snapshotHandle"].as_str().is_some(), "{c}");

    // A new tablet's PVC from that snapshot, bound by csi-provisioner to a clone; the
    // restore moves the source tablet's directory to the new tablet.
    let new_uid: TabletUid = "2548885007".parse().unwrap();
    w.kube
        .create(json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "new-tablet", "namespace": w.ns.name},
            "spec": {"storageClassName": BTRFS_CLASS, "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "64Mi"}},
                     "dataSourceRef": {"apiGroup": GROUP, "kind": "VolumeSnapshot", "name": name}}
        }))
        .await;
    let pv = w.kube.wait_pvc_bound(&w.ns.name, "new-tablet", LIMIT).await;
    let root = w.kube.volume_dir(&pv).await.join("vtdataroot");
    let source_uid = target.parse::<TabletAlias>().unwrap().uid;
    assert!(
        root.join(source_uid.tablet_dir_name()).is_dir(),
        "the clone lacks the source tablet's directory"
    );
    let out = vtsnap_restore::run(&vtsnap_restore::Options {
        vtdataroot: root.clone(),
        tablet_uid: new_uid,
        server_id: Some(4242),
        dry_run: false,
    })
    .unwrap();
    assert_eq!(out.action, vtsnap_restore::Action::Moved);
    let cnf = std::fs::read_to_string(root.join(new_uid.tablet_dir_name()).join("my.cnf")).unwrap();
    assert!(cnf.contains("server-id = 4242"), "{cnf}");
    assert!(!cnf.contains(&source_uid.tablet_dir_name()), "{cnf}");
    // The snapshot itself is read-only and still the source's.
    let snap_dir = w.stored_snapshot(&name).await;
    assert!(snapshot_ready(&snap_dir));
}

#[tokio::test]
async fn an_online_snapshot_fences_nothing_and_records_a_lower_bound() {
    let fixture = shard()
        .replicas(3)
        .primary(1)
        .variable("sync_binlog", "1")
        .variable("innodb_flush_log_at_trx_commit", "1")
        .variable("log_bin", "ON")
        .variable("gtid_mode", "ON");
    let w = RealShard::start("online", fixture).await;
    let s = w.snapshot(Mode::Online).await;
    assert_eq!((s.exit_code, s.outcome), (0, Outcome::Done), "{s:?}");
    let writes: Vec<String> = w
        .vtctld
        .calls()
        .into_iter()
        .filter(|c| c.starts_with("Change") || c.starts_with("Stop") || c.starts_with("Start"))
        .collect();
    assert!(
        writes.is_empty(),
        "an online snapshot touched the tablet: {writes:?}"
    );
    let v = w.stored_snapshot(s.snapshot.as_deref().unwrap()).await;
    assert_eq!(label(&v, "vtsnap.io/mode"), "online");
    assert!(!annotation(&v, ANN_GTID_LOWER_BOUND).is_empty(), "{v}");
    assert!(snapshot_ready(&v), "{v}");
}

#[tokio::test]
async fn gc_keeps_max_count_of_real_snapshots_and_the_driver_deletes_the_rest() {
    let w = RealShard::start("retention", shard().replicas(3).primary(1)).await;
    let mut names = Vec::new();
    for _ in 0..3 {
        let s = w.snapshot(Mode::Cold).await;
        assert_eq!(s.exit_code, 0, "{s:?}");
        names.push(s.snapshot.unwrap());
    }
    // Contents of the two that go, to see them deleted by the driver's sidecar.
    let mut doomed_contents = Vec::new();
    for n in &names[..2] {
        let v = w.stored_snapshot(n).await;
        doomed_contents.push(
            v["status"]["boundVolumeSnapshotContentName"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    let r = gc_run(
        &w.config("  retention: {maxCount: 1}\n"),
        &GcOptions {
            dry_run: false,
            only_cluster: None,
            node_timeout: Duration::from_secs(5),
        },
        w.kube.client(),
    )
    .await;
    assert_eq!(r.exit_code, 0, "{r:?}");
    let mut deleted = r.run.deleted.clone();
    deleted.sort();
    let mut want: Vec<String> = names[..2]
        .iter()
        .map(|n| format!("{}/{n}", w.ns.name))
        .collect();
    want.sort();
    assert_eq!(deleted, want, "{r:?}");
    for n in &names[..2] {
        w.kube.wait_gone(&snapshots(), &w.ns.name, n, LIMIT).await;
    }
    // deletionPolicy Delete on the class: the contents (and the driver's snapshots) go too.
    for c in &doomed_contents {
        w.kube.wait_gone(&contents(), "", c, LIMIT).await;
    }
    assert!(
        w.kube
            .get(&snapshots(), &w.ns.name, &names[2])
            .await
            .is_some()
    );
}

#[tokio::test]
async fn two_jobs_on_one_shard_one_runs_and_the_other_is_refused() {
    let w = RealShard::start("two-jobs", shard().replicas(3).primary(1)).await;
    let (a, b) = tokio::join!(
        w.snapshot_as(Mode::Cold, "job-a"),
        w.snapshot_as(Mode::Cold, "job-b")
    );
    let mut outcomes = [(a.exit_code, a.outcome), (b.exit_code, b.outcome)];
    outcomes.sort_by_key(|(code, _)| *code);
    assert_eq!(
        outcomes,
        [(0, Outcome::Done), (3, Outcome::Refused)],
        "{a:?}\n{b:?}"
    );
    let done = if a.exit_code == 0 { &a } else { &b };
    w.assert_back_to_replica(done);
    assert!(!w.lease_left().await, "the fence lease was left behind");
    // Only the winner's snapshot exists.
    let all = w.kube.list(&snapshots(), &w.ns.name).await;
    assert_eq!(all.len(), 1, "{all:?}");
}
