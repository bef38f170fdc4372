//! `vtsnap-gc run` watching the restores the webhook injected, against the in-memory API
//! (`FakeKube`, for fault injection) and the fake vtctld (docs/design.md §7: no vtctld here): a
//! node-local restore stuck Pending is un-stuck once, a tablet that cannot catch up (error
//! 1236) marks its snapshot unusable, one whose replication nothing started is named, and
//! an uncertain read deletes nothing.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};
use vtsnap_core::config::Config;
use vtsnap_core::snapshot::{ANN_UNUSABLE, GROUP, PLURAL, reprovisioned_key};
use vtsnap_core::vtctld::TabletType;
use vtsnap_core::vtctld::messages::replicationdata::{STATE_CONNECTING, STATE_STOPPED, Status};
use vtsnap_gc::act::{GcOptions, run};
use vtsnap_testkit::fake_kube::{FakeKube, Fault, Verb, is};
use vtsnap_testkit::fake_vtctld::FakeVtctld;
use vtsnap_testkit::fixtures::shard;
use vtsnap_testkit::operator_objects::{OperatorTablet, operator_shard, pvc_template};

fn minutes_ago(m: i64) -> String {
    (Timestamp::now() - SignedDuration::from_mins(m)).to_string()
}

/// The restored tablet 4's PVC as the webhook left it, and its Pod.
fn restored(t: &OperatorTablet, phase: &str) -> (Value, Value) {
    let mut pvc = t.pvc(&pvc_template("64Gi"));
    pvc["metadata"]["annotations"] =
        json!({"vtsnap.io/restored-from": "s-1", "vtsnap.io/restore-node": "node-2"});
    pvc["spec"]["dataSourceRef"] =
        json!({"apiGroup": GROUP, "kind": "VolumeSnapshot", "name": "s-1"});
    pvc["status"] = json!({"phase": phase});
    let mut pod = t.pod();
    pod["metadata"]["creationTimestamp"] = json!(minutes_ago(30));
    (pvc, pod)
}

struct World {
    kube: FakeKube,
    vtctld: FakeVtctld,
    tablet: OperatorTablet,
    config: Config,
}

async fn world(pvc_phase: &str, pod_phase: &str) -> (World, vtsnap_testkit::grpc::Running) {
    let kube = FakeKube::new();
    let vtctld = FakeVtctld::new();
    shard().replicas(3).primary(1).install(&kube, &vtctld);
    let vt = vtctld.serve().await;
    let cut = Timestamp::now() - SignedDuration::from_hours(2);
    kube.put_json(
        GROUP,
        PLURAL,
        operator_shard().snapshot("s-1", cut).object(),
    );
    let tablet = operator_shard().tablet("replica", 4);
    let (pvc, mut pod) = restored(&tablet, pvc_phase);
    kube.put_json("", "persistentvolumeclaims", pvc);
    pod["status"] = json!({"phase": pod_phase});
    kube.put_json("", "pods", pod);
    let config = Config::from_yaml(&format!(
        "clusters:\n- name: example\n  namespace: vitess\n  vtctld: \"{}\"\n  restore: {{enabled: true, nodeLocal: true, pendingTimeout: 10m}}\n",
        vt.endpoint()
    ))
    .unwrap();
    (
        World {
            kube,
            vtctld,
            tablet,
            config,
        },
        vt,
    )
}

fn opts(dry_run: bool) -> GcOptions {
    GcOptions {
        dry_run,
        only_cluster: None,
        node_timeout: Duration::from_secs(2),
    }
}

impl World {
    fn snapshot_unusable(&self) -> Option<String> {
        self.kube
            .get_json(GROUP, PLURAL, "vitess", "s-1")
            .and_then(|s| {
                s["metadata"]["annotations"][ANN_UNUSABLE]
                    .as_str()
                    .map(str::to_owned)
            })
    }

    fn has(&self, plural: &str) -> bool {
        self.kube
            .get_json("", plural, "vitess", &self.tablet.name)
            .is_some()
    }

    fn event(&self, reason: &str) -> Option<Value> {
        self.kube
            .events()
            .into_iter()
            .find(|e| e["reason"] == reason)
    }
}

#[tokio::test]
async fn a_stuck_node_local_restore_marks_its_snapshot_then_its_pod_and_pvc_go() {
    let (w, _vt) = world("Pending", "Pending").await;
    // A dry run plans it and changes nothing.
    let r = run(&w.config, &opts(true), w.kube.client_as("gc")).await;
    assert_eq!(r.run.plan.restores.unstick.len(), 1, "{r:?}");
    assert!(w.snapshot_unusable().is_none() && w.has("pods") && w.has("persistentvolumeclaims"));

    let r = run(&w.config, &opts(false), w.kube.client_as("gc")).await;
    assert_eq!(r.exit_code, 0, "{r:?}");
    assert_eq!(r.run.marked_unusable, ["vitess/s-1"]);
    assert_eq!(r.run.unstuck, [format!("vitess/{}", w.tablet.name)]);
    let why = w.snapshot_unusable().expect("marked");
    assert!(
        why.contains("did not provision") && why.contains("node-2"),
        "{why}"
    );
    assert!(!w.has("pods") && !w.has("persistentvolumeclaims"));
    assert_eq!(w.event("SnapshotUnusable").unwrap()["type"], "Warning");
    assert!(
        w.event("RestoreUnstuck").unwrap()["note"]
            .as_str()
            .unwrap()
            .contains("node-2")
    );
    // The snapshot itself is kept (it is still the newest ready one).
    assert!(w.kube.get_json(GROUP, PLURAL, "vitess", "s-1").is_some());

    // The operator recreates them; the webhook picks another snapshot or none — the GC
    // does not touch the snapshot again.
    let (pvc, mut pod) = restored(&w.tablet, "Pending");
    w.kube.put_json("", "persistentvolumeclaims", pvc);
    pod["status"] = json!({"phase": "Pending"});
    w.kube.put_json("", "pods", pod);
    let r = run(&w.config, &opts(false), w.kube.client_as("gc")).await;
    assert!(r.run.marked_unusable.is_empty(), "{r:?}");
    assert_eq!(
        vtsnap_testkit::rbac::refused("gc", &w.kube.log()),
        Vec::<String>::new(),
        "requests its Role does not grant"
    );
}

#[tokio::test]
async fn a_bound_or_running_restore_is_never_deleted() {
    for (pvc, pod) in [("Bound", "Pending"), ("Pending", "Running")] {
        let (w, _vt) = world(pvc, pod).await;
        let r = run(&w.config, &opts(false), w.kube.client_as("gc")).await;
        assert!(
            r.run.unstuck.is_empty() && r.run.plan.restores.unstick.is_empty(),
            "{pvc}/{pod}: {r:?}"
        );
        assert!(
            w.has("pods") && w.has("persistentvolumeclaims"),
            "{pvc}/{pod}"
        );
    }
}

#[tokio::test]
async fn an_uncertain_read_of_pods_deletes_nothing() {
    let (w, _vt) = world("Pending", "Pending").await;
    w.kube.fault(Fault::on(is(Verb::List, "pods")).status(503));
    let r = run(&w.config, &opts(false), w.kube.client_as("gc")).await;
    assert_eq!(r.exit_code, 1, "{r:?}");
    assert!(r.run.unstuck.is_empty() && r.run.marked_unusable.is_empty());
    assert!(w.has("pods") && w.has("persistentvolumeclaims"));
    assert!(w.snapshot_unusable().is_none());
}

#[tokio::test]
async fn a_failed_mark_leaves_the_stuck_restore_for_the_next_run() {
    let (w, _vt) = world("Pending", "Pending").await;
    w.kube
        .fault(Fault::on(is(Verb::Patch, "volumesnapshots")).status(500));
    let r = run(&w.config, &opts(false), w.kube.client_as("gc")).await;
    assert_eq!(r.exit_code, 1, "{r:?}");
    assert!(
        r.run.unstuck.is_empty(),
        "deleted although its snapshot was not marked: {r:?}"
    );
    assert!(w.has("pods") && w.has("persistentvolumeclaims"));
    // Next run: marked, then un-stuck.
    let r = run(&w.config, &opts(false), w.kube.client_as("gc")).await;
    assert_eq!((r.exit_code, r.run.unstuck.len()), (0, 1), "{r:?}");
}

#[tokio::test]
async fn a_restored_tablet_that_cannot_catch_up_marks_its_snapshot() {
    let (w, _vt) = world("Bound", "Running").await;
    // vtctld knows the new tablet; its replication fails with error 1236.
    let alias = w.tablet.alias.clone();
    let status = Status {
        last_io_error: "Got fatal error 1236 from master when reading data from binary log: 'Could not find GTID state requested by slave in any binlog files.'".into(),
        ..Status::default()
    };
    w.vtctld.with(|s| {
        let sh = s.shards.values_mut().next().unwrap();
        let mut t = sh.tablets.values().next().unwrap().clone();
        t.tablet.alias = Some((&alias).into());
        t.status = Some(status);
        sh.tablets.insert(alias.to_string(), t);
    });
    let r = run(&w.config, &opts(false), w.kube.client_as("gc")).await;
    assert_eq!(r.exit_code, 0, "{r:?}");
    assert_eq!(r.run.marked_unusable, ["vitess/s-1"], "{r:?}");
    let why = w.snapshot_unusable().unwrap();
    assert!(
        why.contains(&format!("tablet {alias}")) && why.contains("1236"),
        "{why}"
    );
    assert!(w.vtctld.calls().contains(&format!("GetFullStatus {alias}")));
    // The tablet is left alone.
    assert!(w.has("pods") && w.has("persistentvolumeclaims"));
    // Replication that is merely slow is no reason.
    let (w, _vt) = world("Bound", "Running").await;
    let r = run(&w.config, &opts(false), w.kube.client_as("gc")).await;
    assert!(r.run.marked_unusable.is_empty(), "{r:?}");
    assert_eq!(
        vtsnap_testkit::rbac::refused("gc", &w.kube.log()),
        Vec::<String>::new(),
        "requests its Role does not grant"
    );
}

#[tokio::test]
async fn a_pod_that_starts_between_the_read_and_the_delete_is_not_deleted() {
    let (w, _vt) = world("Pending", "Pending").await;
    let name = w.tablet.name.clone();
    // Someone's write lands after the GC read the Pod: kubelet starts it.
    w.kube.fault(
        Fault::on(is(Verb::Patch, "volumesnapshots")).then_change(move |k| {
            let mut pod = k.get_json("", "pods", "vitess", &name).unwrap();
            pod["status"] = json!({"phase": "Running"});
            k.remove("", "pods", "vitess", &name);
            k.put_json("", "pods", pod);
        }),
    );
    let r = run(&w.config, &opts(false), w.kube.client_as("gc")).await;
    assert_eq!(r.exit_code, 1, "{r:?}");
    assert!(r.run.unstuck.is_empty(), "{r:?}");
    assert!(w.has("pods") && w.has("persistentvolumeclaims"));
    assert!(
        r.errors
            .iter()
            .any(|e| e.cause.contains("409") || e.cause.contains("onflict")),
        "{r:?}"
    );
}

/// vtctld reports the restored tablet's replication failing with error 1236.
fn cannot_catch_up(w: &World) {
    let alias = w.tablet.alias.clone();
    let status = Status {
        last_io_error: "Got fatal error 1236 from master when reading data from binary log: 'Could not find GTID state requested by slave in any binlog files.'".into(),
        ..Status::default()
    };
    w.vtctld.with(|s| {
        let sh = s.shards.values_mut().next().unwrap();
        let mut t = sh.tablets.values().next().unwrap().clone();
        t.tablet.alias = Some((&alias).into());
        t.status = Some(status);
        sh.tablets.insert(alias.to_string(), t);
    });
}

/// The restored tablet's Pod Running with its `Ready` condition `ready` ("True"/"False").
fn pod_ready(w: &World, ready: &str) {
    let mut pod = w
        .kube
        .get_json("", "pods", "vitess", &w.tablet.name)
        .unwrap();
    pod["status"] = json!({"phase": "Running", "conditions": [{"type": "Ready", "status": ready}]});
    w.kube.remove("", "pods", "vitess", &w.tablet.name);
    w.kube.put_json("", "pods", pod);
}

#[tokio::test]
async fn a_restored_tablet_that_cannot_catch_up_is_reprovisioned_once() {
    let (w, _vt) = world("Bound", "Running").await;
    cannot_catch_up(&w);
    pod_ready(&w, "False");
    // A dry run plans it and changes nothing.
    let r = run(&w.config, &opts(true), w.kube.client_as("gc")).await;
    assert_eq!(r.run.plan.restores.reprovision.len(), 1, "{r:?}");
    assert!(w.has("pods") && w.has("persistentvolumeclaims") && w.snapshot_unusable().is_none());

    let r = run(&w.config, &opts(false), w.kube.client_as("gc")).await;
    assert_eq!(r.exit_code, 0, "{r:?}");
    assert_eq!(r.run.marked_unusable, ["vitess/s-1"]);
    assert_eq!(r.run.reprovisioned, [format!("vitess/{}", w.tablet.name)]);
    assert!(!w.has("pods") && !w.has("persistentvolumeclaims"));
    let event = w.event("TabletReprovisioned").expect("an Event");
    assert_eq!(event["type"], "Warning");
    assert!(event.to_string().contains("1236"), "{event}");
    // Once: the next run finds nothing of it left to do.
    let r = run(&w.config, &opts(false), w.kube.client_as("gc")).await;
    assert!(
        r.run.reprovisioned.is_empty() && r.run.plan.restores.reprovision.is_empty(),
        "{r:?}"
    );
    // The record names the tablet on the snapshot it was restored from (the webhook then
    // gives its recreated PVC no restore).
    let s1 = w.kube.get_json(GROUP, PLURAL, "vitess", "s-1").unwrap();
    let key = reprovisioned_key(w.tablet.alias.uid);
    assert!(
        s1["metadata"]["annotations"][key.as_str()]
            .as_str()
            .is_some_and(|v| v.contains("1236")),
        "{s1}"
    );

    // Audit item 2: the operator recreates the Pod and the PVC, and a webhook whose
    // cache had not seen the record yet restores it from another snapshot, which cannot
    // catch up either. The tablet is not re-provisioned a second time: a Warning Event
    // and the plan say so, and its Pod and PVC stay.
    let cut = Timestamp::now() - SignedDuration::from_hours(3);
    w.kube.put_json(
        GROUP,
        PLURAL,
        operator_shard().snapshot("s-2", cut).object(),
    );
    let (mut pvc, pod) = restored(&w.tablet, "Bound");
    pvc["metadata"]["annotations"]["vtsnap.io/restored-from"] = json!("s-2");
    pvc["spec"]["dataSourceRef"]["name"] = json!("s-2");
    w.kube.put_json("", "persistentvolumeclaims", pvc);
    w.kube.put_json("", "pods", pod);
    pod_ready(&w, "False");
    let r = run(&w.config, &opts(false), w.kube.client_as("gc")).await;
    assert_eq!(r.run.marked_unusable, ["vitess/s-2"], "{r:?}");
    assert!(r.run.reprovisioned.is_empty(), "{r:?}");
    let not = &r.run.plan.restores.not_reprovisioned;
    assert_eq!(not.len(), 1, "{r:?}");
    assert!(
        not[0].why.contains("re-provisioned once already"),
        "{not:?}"
    );
    assert!(w.has("pods") && w.has("persistentvolumeclaims"));
    assert_eq!(
        w.event("TabletNotReprovisioned").expect("an Event")["type"],
        "Warning"
    );
    // And never a loop: the next run deletes nothing either.
    let r = run(&w.config, &opts(false), w.kube.client_as("gc")).await;
    assert!(r.run.reprovisioned.is_empty() && w.has("pods"), "{r:?}");
}

/// The record is written before anything is deleted: if it cannot be written, the tablet
/// is not re-provisioned this run.
#[tokio::test]
async fn a_tablet_whose_record_cannot_be_written_is_not_reprovisioned() {
    let (w, _vt) = world("Bound", "Running").await;
    cannot_catch_up(&w);
    pod_ready(&w, "False");
    // The first patch marks the snapshot unusable, the second is the record.
    w.kube.fault(
        Fault::on(is(Verb::Patch, "volumesnapshots"))
            .nth(2)
            .status(403),
    );
    let r = run(&w.config, &opts(false), w.kube.client_as("gc")).await;
    assert_eq!(r.exit_code, 1, "{r:?}");
    assert!(r.run.reprovisioned.is_empty(), "{r:?}");
    assert!(w.has("pods") && w.has("persistentvolumeclaims"));
}

#[tokio::test]
async fn a_serving_tablet_an_unknown_readiness_or_leave_is_never_reprovisioned() {
    // Ready: it serves.
    let (w, _vt) = world("Bound", "Running").await;
    cannot_catch_up(&w);
    pod_ready(&w, "True");
    let r = run(&w.config, &opts(false), w.kube.client_as("gc")).await;
    assert_eq!(r.run.marked_unusable, ["vitess/s-1"], "{r:?}");
    assert!(r.run.reprovisioned.is_empty() && w.has("pods") && w.has("persistentvolumeclaims"));
    // No Ready condition to read.
    let (w, _vt) = world("Bound", "Running").await;
    cannot_catch_up(&w);
    let r = run(&w.config, &opts(false), w.kube.client_as("gc")).await;
    assert!(r.run.reprovisioned.is_empty() && w.has("pods"), "{r:?}");
    // restore.onCatchUpFailure: leave
    let (mut w, vt) = world("Bound", "Running").await;
    cannot_catch_up(&w);
    pod_ready(&w, "False");
    w.config = Config::from_yaml(&format!(
        "clusters:\n- name: example\n  namespace: vitess\n  vtctld: \"{}\"\n  restore: {{enabled: true, nodeLocal: true, pendingTimeout: 10m, onCatchUpFailure: leave}}\n",
        vt.endpoint()
    ))
    .unwrap();
    let r = run(&w.config, &opts(false), w.kube.client_as("gc")).await;
    assert_eq!(r.run.marked_unusable, ["vitess/s-1"], "{r:?}");
    assert!(r.run.reprovisioned.is_empty() && w.has("pods") && w.has("persistentvolumeclaims"));
}

/// The deletes carry the UID and resourceVersion read: a Pod that changed in between (it
/// became Ready, say) is not deleted, and neither is its PVC.
#[tokio::test]
async fn a_tablet_that_changes_between_the_read_and_the_delete_is_not_reprovisioned() {
    let (w, _vt) = world("Bound", "Running").await;
    cannot_catch_up(&w);
    pod_ready(&w, "False");
    let name = w.tablet.name.clone();
    w.kube.fault(
        Fault::on(is(Verb::Patch, "volumesnapshots")).then_change(move |k| {
            let mut pod = k.get_json("", "pods", "vitess", &name).unwrap();
            pod["status"]["conditions"][0]["status"] = json!("True");
            k.remove("", "pods", "vitess", &name);
            k.put_json("", "pods", pod);
        }),
    );
    let r = run(&w.config, &opts(false), w.kube.client_as("gc")).await;
    assert_eq!(r.exit_code, 1, "{r:?}");
    assert!(r.run.reprovisioned.is_empty(), "{r:?}");
    assert!(w.has("pods") && w.has("persistentvolumeclaims"));
    assert!(
        r.errors.iter().any(|e| e.doing.contains("re-provisioning")
            && (e.cause.contains("409") || e.cause.contains("onflict"))),
        "{r:?}"
    );
}

/// A record whose deletes then failed (a Pod that changed since it was read, say) does not
/// use up the tablet's one re-provisioning: it names the PVC still there, and the next run
/// carries it out.
#[tokio::test]
async fn a_record_whose_deletes_failed_is_carried_out_by_the_next_run() {
    let (w, _vt) = world("Bound", "Running").await;
    cannot_catch_up(&w);
    pod_ready(&w, "False");
    w.kube
        .fault(Fault::on(is(Verb::Delete, "pods")).status(409));
    let r = run(&w.config, &opts(false), w.kube.client_as("gc")).await;
    assert_eq!(r.exit_code, 1, "{r:?}");
    assert!(r.run.reprovisioned.is_empty() && w.has("pods") && w.has("persistentvolumeclaims"));
    let s1 = w.kube.get_json(GROUP, PLURAL, "vitess", "s-1").unwrap();
    assert!(
        s1["metadata"]["annotations"]
            .get(reprovisioned_key(w.tablet.alias.uid).as_str())
            .is_some(),
        "{s1}"
    );
    let r = run(&w.config, &opts(false), w.kube.client_as("gc")).await;
    assert_eq!(r.exit_code, 0, "{r:?}");
    assert_eq!(r.run.reprovisioned, [format!("vitess/{}", w.tablet.name)]);
    assert!(r.run.plan.restores.not_reprovisioned.is_empty(), "{r:?}");
    assert!(!w.has("pods") && !w.has("persistentvolumeclaims"));
}

/// vtctld knows the restored tablet as `tablet_type`, its replication stopped with no error
/// (what real vttablet leaves when no VTOrc starts it).
fn never_started(w: &World, tablet_type: TabletType) {
    let alias = w.tablet.alias.clone();
    let status = Status {
        io_state: STATE_STOPPED,
        sql_state: STATE_STOPPED,
        replication_lag_unknown: true,
        ..Status::default()
    };
    w.vtctld.with(|s| {
        let sh = s.shards.values_mut().next().unwrap();
        let mut t = sh.tablets.values().next().unwrap().clone();
        t.tablet.alias = Some((&alias).into());
        t.tablet.r#type = tablet_type as i32;
        t.status = Some(status);
        sh.tablets.insert(alias.to_string(), t);
    });
}

#[tokio::test]
async fn a_restored_replica_nothing_started_is_named_and_left_alone() {
    let (w, _vt) = world("Bound", "Running").await;
    never_started(&w, TabletType::Replica);
    let r = run(&w.config, &opts(false), w.kube.client_as("gc")).await;
    assert_eq!(r.exit_code, 0, "{r:?}");
    let e = w.event("TabletNotReplicating").expect("a Warning Event");
    assert_eq!(e["type"], "Warning");
    assert_eq!(e["regarding"]["name"], "s-1");
    let msg = e["note"].as_str().unwrap();
    assert!(
        msg.contains(&w.tablet.alias.to_string()) && msg.contains("VTOrc"),
        "{msg}"
    );
    // nothing marked, nothing deleted, no replication started
    assert!(r.run.marked_unusable.is_empty(), "{r:?}");
    assert!(w.has("pods") && w.has("persistentvolumeclaims"));
    assert!(
        !w.vtctld
            .calls()
            .iter()
            .any(|c| c.starts_with("StartReplication") || c.starts_with("ChangeTabletType")),
        "{:?}",
        w.vtctld.calls()
    );

    // A drained one is stopped on purpose (a snapshot's fence): not named.
    // Still connecting (no error yet) is someone trying: not named either.
    let (w, _vt) = world("Bound", "Running").await;
    never_started(&w, TabletType::Replica);
    w.vtctld.with(|s| {
        let sh = s.shards.values_mut().next().unwrap();
        let t = sh.tablets.get_mut(&w.tablet.alias.to_string()).unwrap();
        t.status.as_mut().unwrap().io_state = STATE_CONNECTING;
    });
    let r = run(&w.config, &opts(false), w.kube.client_as("gc")).await;
    assert_eq!(r.exit_code, 0, "{r:?}");
    assert!(w.event("TabletNotReplicating").is_none());

    let (w, _vt) = world("Bound", "Running").await;
    never_started(&w, TabletType::Drained);
    let r = run(&w.config, &opts(false), w.kube.client_as("gc")).await;
    assert_eq!(r.exit_code, 0, "{r:?}");
    assert!(w.event("TabletNotReplicating").is_none());
}
