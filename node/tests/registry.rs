//! `vtsnap-node run` (in-process) against the fake Kubernetes API and the fake vtctld, with
//! no tablet container: what the helper does with its on-disk hold registry and how it puts
//! a tablet back. Nothing here freezes anything, so it needs neither root nor MariaDB.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use vtsnap_core::fence::*;
use vtsnap_core::naming::TabletAlias;
use vtsnap_node::cgroup::Roots;
use vtsnap_node::daemon::{self, DaemonConfig, Handle};
use vtsnap_testkit::fake_kube::FakeKube;
use vtsnap_testkit::fake_vtctld::FakeVtctld;
use vtsnap_testkit::fixtures::{ShardFixture, shard};
use vtsnap_testkit::grpc::Running;

const NS: &str = "vitess";

struct Rig {
    kube: FakeKube,
    fixture: ShardFixture,
    vtctld: FakeVtctld,
    vt: Running,
    dir: tempfile::TempDir,
}

impl Rig {
    async fn new() -> Self {
        let fixture = shard().replicas(3).primary(1);
        let vtctld = FakeVtctld::new();
        fixture.install(&FakeKube::new(), &vtctld);
        let vt = vtctld.serve().await;
        Self {
            kube: FakeKube::new(),
            fixture,
            vtctld,
            vt,
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    fn holds_path(&self) -> PathBuf {
        self.state_dir().join("holds.json")
    }

    fn holds_text(&self) -> String {
        std::fs::read_to_string(self.holds_path()).unwrap()
    }

    /// Writes `holds.json` with these entries, each exactly as given.
    fn write_holds(&self, entries: &[(&str, &str)]) {
        std::fs::create_dir_all(self.state_dir()).unwrap();
        let body = entries
            .iter()
            .map(|(k, raw)| format!("{k:?}: {raw}"))
            .collect::<Vec<_>>()
            .join(",\n");
        std::fs::write(self.holds_path(), format!("{{\n{body}\n}}\n")).unwrap();
    }

    /// A fence lease on node-a for tablet `number`; `expired` puts its last renewal a minute
    /// in the past.
    fn lease(&self, name: &str, number: usize, request: &str, expired: bool, vtctld: &str) {
        let renewed = k8s_openapi::jiff::Timestamp::now()
            - if expired {
                k8s_openapi::jiff::SignedDuration::from_secs(60)
            } else {
                k8s_openapi::jiff::SignedDuration::ZERO
            };
        let renewed = renewed.strftime("%Y-%m-%dT%H:%M:%S.%6fZ").to_string();
        self.kube.put_json("coordination.k8s.io", "leases", json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": NS, "labels": {LABEL_NODE: "node-a"}, "annotations": {
                ANN_TARGET_POD: "pod", ANN_TARGET_POD_UID: "uid", ANN_TABLET_ALIAS: self.fixture.alias(number).to_string(),
                ANN_ORIGINAL_TYPE: "replica", ANN_VTCTLD: vtctld, ANN_MODE: "cold",
                ANN_REQUEST: request, ANN_MAX_HOLD: "600"}},
            "spec": {"holderIdentity": "snapshot-job", "leaseDurationSeconds": 10, "renewTime": renewed, "acquireTime": renewed}
        }));
    }

    fn lease_json(&self, name: &str) -> Option<Value> {
        self.kube
            .get_json("coordination.k8s.io", "leases", NS, name)
    }

    fn annotation(&self, name: &str, ann: &str) -> Option<String> {
        self.lease_json(name)?["metadata"]["annotations"][ann]
            .as_str()
            .map(str::to_owned)
    }

    async fn daemon(&self) -> Handle {
        let cfg = DaemonConfig {
            node: "node-a".into(),
            kubelet_dir: self.dir.path().join("kubelet"),
            roots: Roots::default(),
            // The tests run on the host: its `/` is the node root.
            host_root: "/".into(),
            state_dir: self.state_dir(),
            resync: Duration::from_millis(100),
            listen: None,
            start_timeout: Duration::from_secs(5),
            shutdown_timeout: Duration::from_secs(5),
        };
        daemon::start(cfg, self.kube.client()).await.unwrap()
    }

    /// A hold-registry entry for tablet `alias` (as written), holding nothing.
    fn entry(&self, lease: &str, alias: &str, original_type: &str) -> String {
        json!({
            "lease": lease, "pod_uid": "uid", "tablet_alias": alias, "original_type": original_type,
            "vtctld": self.vt.endpoint(), "container_id": null, "volume_mount": null,
            "mysqlctl_socket": "/nowhere/mysqlctl.sock", "mysqld_socket": "/nowhere/mysql.sock",
            "stopped_mysqld": false, "cgroup": null, "fs_frozen": null, "hold_since_ms": null,
            "max_hold_secs": 600, "watchdog_released": false
        })
        .to_string()
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

fn mentions(calls: &[String], alias: &TabletAlias) -> Vec<String> {
    calls
        .iter()
        .filter(|c| c.contains(&alias.to_string()))
        .cloned()
        .collect()
}

fn events(kube: &FakeKube, kind: &str, name: &str) -> Vec<Value> {
    kube.events()
        .into_iter()
        .filter(|e| {
            e["reason"] == "HoldRecordUnreadable"
                && e["regarding"]["kind"] == kind
                && e["regarding"]["name"] == name
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_registry_entries_are_kept_reported_and_never_guessed() {
    let rig = Rig::new().await;
    let (a2, a3) = (rig.fixture.alias(2), rig.fixture.alias(3));
    let bad_alias = rig.entry("vitess/bad-alias", "zone1-01x1", "rdonly");
    let bad_type = rig.entry("vitess/bad-type", &a3.to_string(), "replcia");
    let good = rig.entry("vitess/good", &a2.to_string(), "rdonly");
    rig.write_holds(&[
        ("vitess/bad-alias", &bad_alias),
        ("vitess/bad-type", &bad_type),
        ("vitess/good", &good),
    ]);
    // The lease of the bad-type entry is live and asks for a hold; the others are gone.
    rig.lease("bad-type", 3, "hold", false, &rig.vt.endpoint());
    let h = rig.daemon().await;

    // The readable entry beside them is released as always: tablet put back, entry gone.
    until(
        "the good entry is released",
        Duration::from_secs(30),
        || !rig.holds_text().contains("vitess/good"),
    )
    .await;
    let calls = rig.vtctld.calls();
    assert!(
        calls.contains(&format!("StartReplication {a2}"))
            && calls.contains(&format!("ChangeTabletType {a2} RDONLY")),
        "{calls:?}"
    );
    until("the live lease is told", Duration::from_secs(30), || {
        rig.annotation("bad-type", ANN_NODE_STATE).as_deref() == Some("failed")
    })
    .await;
    let error = rig.annotation("bad-type", ANN_NODE_ERROR).unwrap();
    assert!(error.contains("unreadable"), "{error}");
    cycles(&h, 5).await;

    // Never guessed: nothing at all was asked of vtctld for the bad-type tablet (no hold,
    // no type change), and the only type change is the good entry's.
    let calls = rig.vtctld.calls();
    assert_eq!(mentions(&calls, &a3), Vec::<String>::new());
    let changes: Vec<_> = calls
        .iter()
        .filter(|c| c.starts_with("ChangeTabletType"))
        .collect();
    assert_eq!(changes, vec![&format!("ChangeTabletType {a2} RDONLY")]);

    // Kept, byte for byte, through the rewrite that removed the good entry.
    let text = rig.holds_text();
    assert!(text.contains(&bad_alias), "{text}");
    assert!(text.contains(&bad_type), "{text}");
    assert!(rig.lease_json("bad-type").is_some());

    // Reported: the metric, and one Event each — on the live lease, and on the node for the
    // entry whose lease is gone.
    assert!(
        h.metrics
            .render()
            .contains("\nvtsnap_node_registry_unreadable_entries 2\n"),
        "{}",
        h.metrics.render()
    );
    assert_eq!(events(&rig.kube, "Lease", "bad-type").len(), 1);
    let on_node = events(&rig.kube, "Node", "node-a");
    assert_eq!(on_node.len(), 1, "{on_node:?}");
    assert!(
        on_node[0]["note"]
            .as_str()
            .unwrap()
            .contains("vitess/bad-alias")
    );
    h.stop().await;

    // A restarted helper reads them the same way.
    let h = rig.daemon().await;
    assert_eq!(h.metrics.unreadable_entries(), 2);
    cycles(&h, 3).await;
    assert!(rig.holds_text().contains(&bad_type));
    h.stop().await;
}

/// Points an expired lease's vtctld somewhere else (still expired).
fn set_vtctld(rig: &Rig, name: &str, endpoint: &str) {
    let mut l = rig.lease_json(name).unwrap();
    l["metadata"]["annotations"][ANN_VTCTLD] = json!(endpoint);
    rig.kube.put_json("coordination.k8s.io", "leases", l);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lease_is_put_back_through_the_shared_path_and_kept_until_that_succeeds() {
    let rig = Rig::new().await;
    let a2 = rig.fixture.alias(2);
    // A vtctld whose StartReplication keeps failing.
    let failing = FakeVtctld::new();
    rig.fixture.install(&FakeKube::new(), &failing);
    failing.fail(
        "StartReplication",
        10_000,
        tonic::Status::unavailable("replication is wedged"),
    );
    let failing_vt = failing.serve().await;
    rig.lease("expired", 2, "hold", true, &failing_vt.endpoint());
    let h = rig.daemon().await;

    until("the failure is reported", Duration::from_secs(30), || {
        rig.annotation("expired", ANN_NODE_STATE).as_deref() == Some("failed")
    })
    .await;
    let error = rig.annotation("expired", ANN_NODE_ERROR).unwrap();
    // The shared put-back names the step and the tablet.
    assert!(
        error.contains(&format!("StartReplication on {a2}")),
        "{error}"
    );
    cycles(&h, 3).await;
    assert!(
        rig.lease_json("expired").is_some(),
        "the lease must stay until the tablet is back"
    );
    // Every step is attempted: the type is restored although replication did not start.
    assert!(
        failing
            .calls()
            .contains(&format!("ChangeTabletType {a2} REPLICA")),
        "{:?}",
        failing.calls()
    );

    // vtctld recovers: the next pass finishes and deletes the lease.
    set_vtctld(&rig, "expired", &rig.vt.endpoint());
    until("the lease is deleted", Duration::from_secs(30), || {
        rig.lease_json("expired").is_none()
    })
    .await;
    let calls = rig.vtctld.calls();
    assert!(
        calls.contains(&format!("StartReplication {a2}"))
            && calls.contains(&format!("ChangeTabletType {a2} REPLICA")),
        "{calls:?}"
    );
    h.stop().await;
}
