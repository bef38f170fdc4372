//! vtsnap against a real kube-apiserver (with etcd, kube-controller-manager and the CSI
//! snapshot stack): the API behaviour the in-memory fake only imitates — compare-and-swap
//! on create, paging with continue tokens, field selectors, ownerReferences and the real
//! garbage collector, delete preconditions. Each test works in a namespace of its own.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, PersistentVolume, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use vtsnap_core::config::Config;
use vtsnap_core::events::{EventType, Events, Subject};
use vtsnap_core::fence::client::{
    FenceClientError, FenceSpec, acquire, delete_if_unchanged, renew,
};
use vtsnap_core::fence::{Request, lease_name};
use vtsnap_core::naming::TabletAlias;
use vtsnap_core::snapshot::GROUP;
use vtsnap_core::vtctld::TabletType;
use vtsnap_core::vtctld::messages::replicationdata::Status;
use vtsnap_gc::act::{GcOptions, run as gc_run};
use vtsnap_testkit::fake_vtctld::{Backend, FakeVtctld};
use vtsnap_testkit::fixtures::{shard, unready_snapshot};
use vtsnap_testkit::grpc::Running;
use vtsnap_testkit::operator_objects::{OperatorTablet, operator_shard, pvc_template};
use vtsnap_testkit::real_kube::{RealKube, resource};

fn snapshots() -> kube::core::ApiResource {
    resource(GROUP, "v1", "VolumeSnapshot", "volumesnapshots")
}

fn clusters() -> kube::core::ApiResource {
    resource("planetscale.com", "v2", "VitessCluster", "vitessclusters")
}

/// A VolumeSnapshot with vtsnap's labels of `example/commerce/-` whose source PVC does not
/// exist: the snapshot controller leaves it unready, which is all these tests need.
fn config(ns: &str, extra: &str) -> Config {
    config_with_vtctld(ns, "127.0.0.1:1", extra)
}

fn config_with_vtctld(ns: &str, vtctld: &str, extra: &str) -> Config {
    Config::from_yaml(&format!(
        "clusters:\n- name: example\n  namespace: {ns}\n  vtctld: \"{vtctld}\"\n{extra}"
    ))
    .unwrap()
}

fn gc_opts(dry_run: bool) -> GcOptions {
    GcOptions {
        dry_run,
        only_cluster: None,
        node_timeout: Duration::from_secs(2),
    }
}

#[tokio::test]
async fn the_api_server_is_a_real_kube_apiserver() {
    let kube = RealKube::from_env().await;
    let v = kube.version().await;
    assert!(v.starts_with("v1."), "not a Kubernetes version: {v}");
    // The fake API has no /version at all; a real server reports the build's version.
    let minor: u32 = v
        .trim_start_matches("v1.")
        .split('.')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(minor >= 30, "{v}");
}

fn fence_spec(ns: &str, holder: &str) -> FenceSpec {
    FenceSpec {
        namespace: ns.into(),
        name: lease_name("example", "commerce", "x-x"),
        holder: holder.into(),
        node: "vtsnap-local-node".into(),
        lease_duration: Duration::from_secs(30),
        target_pod: "example-vttablet-zone1-0000000102-00000000".into(),
        target_pod_uid: "uid".into(),
        tablet_alias: "zone1-0000000102".parse::<TabletAlias>().unwrap(),
        original_type: TabletType::Replica,
        vtctld: "127.0.0.1:1".into(),
        mode: "cold".into(),
        max_hold: Duration::from_secs(60),
    }
}

#[tokio::test]
async fn two_jobs_racing_for_one_fence_get_one_winner() {
    let kube = RealKube::from_env().await;
    let ns = kube.namespace("fence").await;
    let api: Api<Lease> = Api::namespaced(kube.client(), &ns.name);
    for round in 0..5 {
        let (a, b) = (fence_spec(&ns.name, "job-a"), fence_spec(&ns.name, "job-b"));
        let (ra, rb) = tokio::join!(
            acquire(&api, &a, Request::Probe),
            acquire(&api, &b, Request::Probe)
        );
        let (won, lost, winner, loser) = match (ra, rb) {
            (Ok(l), Err(e)) => (l, e, "job-a", "job-b"),
            (Err(e), Ok(l)) => (l, e, "job-b", "job-a"),
            (ra, rb) => panic!("round {round}: not exactly one winner: {ra:?} / {rb:?}"),
        };
        match &lost {
            FenceClientError::Held { holder, .. } => {
                assert_eq!(holder, winner, "round {round}: {loser} was told {lost}");
            }
            other => panic!("round {round}: {loser} got {other:?}, not Held"),
        }
        // The lease on the server is the winner's.
        let stored = api.get(&a.name).await.unwrap();
        assert_eq!(
            stored.spec.as_ref().unwrap().holder_identity.as_deref(),
            Some(winner)
        );
        // The loser may not renew it; the winner's renew is a new version, after which
        // a delete by the version first read is refused and the lease stays.
        let lost = renew(&api, &a.name, loser, None).await;
        assert!(
            matches!(lost, Err(FenceClientError::Lost { .. })),
            "round {round}: {lost:?}"
        );
        let renewed = renew(&api, &a.name, winner, Some(Request::Stop))
            .await
            .unwrap();
        let old = won.metadata.resource_version.as_deref();
        assert_ne!(old, renewed.metadata.resource_version.as_deref());
        let stale = delete_if_unchanged(&api, &a.name, old).await;
        assert!(stale.is_err(), "round {round}: a stale delete went through");
        assert!(api.get_opt(&a.name).await.unwrap().is_some());
        let current = renewed.metadata.resource_version.as_deref();
        delete_if_unchanged(&api, &a.name, current).await.unwrap();
        assert!(
            api.get_opt(&a.name).await.unwrap().is_none(),
            "round {round}"
        );
    }
}

#[tokio::test]
async fn events_are_found_by_a_field_selector_on_their_object() {
    let kube = RealKube::from_env().await;
    let ns = kube.namespace("events").await;
    let client = kube.client();
    let events = Events::new(client.clone(), "vtsnap-snapshot");
    for (pod, reason) in [("tablet-a", "Fenced"), ("tablet-b", "Unfenced")] {
        events
            .publish(
                &Subject::pod(&ns.name, pod, ""),
                EventType::Normal,
                "Fence",
                reason,
                &format!("{reason} {pod}"),
            )
            .await;
    }
    // Written as events.k8s.io/v1 Events, read here (as `kubectl describe` reads them) as
    // core/v1 ones: the same objects, `note` as `message`, `reportingController` as
    // `reportingComponent`.
    let api: Api<Event> = Api::namespaced(client, &ns.name);
    let lp = ListParams::default().fields("involvedObject.kind=Pod,involvedObject.name=tablet-a");
    let found = api.list(&lp).await.unwrap().items;
    let reasons: Vec<_> = found
        .iter()
        .map(|e| e.reason.clone().unwrap_or_default())
        .collect();
    assert_eq!(reasons, ["Fenced"], "{found:?}");
    assert_eq!(found[0].message.as_deref(), Some("Fenced tablet-a"));
    assert_eq!(found[0].type_.as_deref(), Some("Normal"));
    assert_eq!(
        found[0].reporting_component.as_deref(),
        Some("vtsnap-snapshot")
    );
}

#[tokio::test]
async fn gc_and_list_page_through_1500_snapshots_with_continue_tokens() {
    const N: usize = 1500;
    let kube = RealKube::from_env().await;
    let ns = kube.namespace("paging").await;
    // Created a few at a time: the API server takes them as fast as etcd commits.
    let names: Vec<String> = (0..N).map(|i| format!("snap-{i:04}")).collect();
    for chunk in names.chunks(50) {
        futures::future::join_all(
            chunk
                .iter()
                .map(|n| kube.create(unready_snapshot(&ns.name, n))),
        )
        .await;
    }
    // One LIST of 500 cannot hold them: the server hands out continue tokens.
    let api: Api<kube::api::DynamicObject> =
        Api::namespaced_with(kube.client(), &ns.name, &snapshots());
    let first = api.list(&ListParams::default().limit(500)).await.unwrap();
    assert_eq!(first.items.len(), 500);
    assert!(
        first
            .metadata
            .continue_
            .as_deref()
            .is_some_and(|c| !c.is_empty()),
        "no continue token after 500 of {N}"
    );

    let cfg = config(&ns.name, "  retention: {maxCount: 1}\n");
    let r = gc_run(&cfg, &gc_opts(true), kube.client()).await;
    assert_eq!(r.exit_code, 0, "{r:?}");
    let planned: BTreeSet<String> = r
        .run
        .plan
        .keep
        .iter()
        .chain(&r.run.plan.delete)
        .map(|i| i.name.clone())
        .collect();
    assert_eq!(planned.len(), N, "the GC saw {} of {N}", planned.len());
    assert!(
        r.run.plan.delete.is_empty(),
        "unready and young: nothing goes"
    );
    assert!(
        r.run
            .plan
            .keep
            .iter()
            .all(|i| i.reason.as_str() == "not-ready-yet"),
        "{:?}",
        r.run.plan.keep.first()
    );

    let rows = vtsnap_snapshot::list::list(
        &cfg,
        &vtsnap_snapshot::list::Filter::default(),
        kube.client(),
    )
    .await
    .unwrap();
    assert_eq!(rows.len(), N, "list shows {} of {N}", rows.len());

    // Gone before the next test: the snapshot controller retries every one of them.
    api.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .unwrap();
}

#[tokio::test]
async fn owned_snapshots_follow_the_policy_and_go_with_their_cluster() {
    let kube = RealKube::from_env().await;
    let ns = kube.namespace("owners").await;
    let cluster = kube
        .create(json!({
            "apiVersion": "planetscale.com/v2", "kind": "VitessCluster",
            "metadata": {"name": "example", "namespace": ns.name},
            "spec": {"keyspaces": [{"name": "commerce", "partitionings": [{"equal": {"parts": 1}}]}]}
        }))
        .await;
    let uid = cluster["metadata"]["uid"].as_str().unwrap().to_owned();
    let names = ["snap-a", "snap-b", "snap-c"];
    for n in names {
        kube.create(unready_snapshot(&ns.name, n)).await;
    }
    let owners = |v: &Value| -> Vec<String> {
        v.pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|r| r["kind"] == "VitessCluster")
            .map(|r| r["uid"].as_str().unwrap_or_default().to_owned())
            .collect()
    };

    // whenDeleted: Delete → an ownerReference to the VitessCluster on each.
    let delete = config(&ns.name, "  deletionPolicy: {whenDeleted: Delete}\n");
    let r = gc_run(&delete, &gc_opts(false), kube.client()).await;
    assert_eq!((r.exit_code, r.run.owner_refs_changed), (0, 3), "{r:?}");
    for n in names {
        let s = kube.get(&snapshots(), &ns.name, n).await.unwrap();
        assert_eq!(owners(&s), std::slice::from_ref(&uid), "{n}");
    }
    // Retain → removed again; Delete once more → back.
    let retain = config(&ns.name, "  deletionPolicy: {whenDeleted: Retain}\n");
    let r = gc_run(&retain, &gc_opts(false), kube.client()).await;
    assert_eq!((r.exit_code, r.run.owner_refs_changed), (0, 3), "{r:?}");
    for n in names {
        let s = kube.get(&snapshots(), &ns.name, n).await.unwrap();
        assert!(owners(&s).is_empty(), "{n}: {s}");
    }
    let r = gc_run(&delete, &gc_opts(false), kube.client()).await;
    assert_eq!((r.exit_code, r.run.owner_refs_changed), (0, 3), "{r:?}");
    // Nothing to change the second time.
    let r = gc_run(&delete, &gc_opts(false), kube.client()).await;
    assert_eq!((r.exit_code, r.run.owner_refs_changed), (0, 0), "{r:?}");

    // The VitessCluster goes: kube-controller-manager's garbage collector takes the
    // snapshots with it (vtsnap deletes nothing here).
    let api: Api<kube::api::DynamicObject> =
        Api::namespaced_with(kube.client(), &ns.name, &clusters());
    api.delete("example", &DeleteParams::background())
        .await
        .unwrap();
    for n in names {
        kube.wait_gone(&snapshots(), &ns.name, n, Duration::from_secs(90))
            .await;
    }
}

/// The fake vtctld's answer for the restored tablet: error 1236; when `change_pod` is
/// set, the Pod is changed first (between the GC's read of it and its delete).
struct CannotCatchUp {
    change_pod: Option<(kube::Client, String, String)>,
}

const PURGED: &str = "Got fatal error 1236 from master when reading data from binary log: 'Could not find GTID state requested by slave in any binlog files.'";

impl Backend for CannotCatchUp {
    fn stop_replication(&self, _: TabletAlias) -> BoxFuture<'static, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }
    fn start_replication(&self, _: TabletAlias) -> BoxFuture<'static, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }
    fn position(&self, _: TabletAlias) -> BoxFuture<'static, Option<String>> {
        Box::pin(async { None })
    }
    fn replication_io_error(&self, _: TabletAlias) -> BoxFuture<'static, Option<String>> {
        let change = self.change_pod.clone();
        Box::pin(async move {
            if let Some((client, ns, pod)) = change {
                let patch = json!({"metadata": {"labels": {"vtsnap.io/test-changed": "yes"}}});
                Api::<Pod>::namespaced(client, &ns)
                    .patch(&pod, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .unwrap();
            }
            Some(PURGED.to_owned())
        })
    }
}

/// A restored tablet whose replica cannot catch up, in namespace `ns`: a snapshot, the
/// tablet's PVC (restored from it, Bound to a static PV, so that no driver is involved)
/// and its Pod (held back from scheduling by a gate; Running and not Ready, as kubelet
/// would report it).
async fn restored_tablet(kube: &RealKube, ns: &str) -> (OperatorTablet, String) {
    kube.create(unready_snapshot(ns, "s-1")).await;
    let mut shard = operator_shard();
    shard.namespace = ns.to_owned();
    let tablet = shard.tablet("replica", 4);
    let pv = format!("{ns}-tablet");
    kube.create(json!({"apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": pv, "labels": {"vtsnap.io/test": "true"}},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "vtsnap-static",
                 "hostPath": {"path": "/nonexistent/vtsnap-static"},
                 "claimRef": {"namespace": ns, "name": tablet.name}}}))
        .await;
    let mut pvc = tablet.pvc(&pvc_template("1Gi"));
    pvc["metadata"]["annotations"] = json!({"vtsnap.io/restored-from": "s-1"});
    pvc["spec"]["storageClassName"] = json!("vtsnap-static");
    pvc["spec"]["volumeName"] = json!(pv);
    kube.create(pvc).await;
    kube.wait_pvc_bound(ns, &tablet.name, Duration::from_secs(60))
        .await;
    let mut pod = tablet.pod();
    pod["spec"]["schedulingGates"] = json!([{"name": "vtsnap.io/never"}]);
    kube.create(pod).await;
    kube.set_pod_running(ns, &tablet.name, false).await;
    (tablet, pv)
}

async fn vtctld_knowing(tablet: &OperatorTablet, backend: CannotCatchUp) -> (FakeVtctld, Running) {
    let vtctld = FakeVtctld::new();
    shard().replicas(3).primary(1).install_vtctld(&vtctld);
    vtctld.with(|s| {
        let sh = s.shards.values_mut().next().unwrap();
        let mut t = sh.tablets.values().nth(1).unwrap().clone();
        t.tablet.alias = Some((&tablet.alias).into());
        t.status = Some(Status::default());
        sh.tablets.insert(tablet.alias.to_string(), t);
    });
    vtctld.set_backend(Arc::new(backend));
    let running = vtctld.serve().await;
    (vtctld, running)
}

/// Re-provisioning deletes the Pod and the PVC with the UID and resourceVersion it read,
/// and the real API server holds it to them: unchanged, both go (and the snapshot is
/// marked first); a Pod changed after the read is refused with a conflict and nothing is
/// deleted, until a run that reads it again.
#[tokio::test]
async fn reprovisioning_deletes_only_what_it_read() {
    let kube = RealKube::from_env().await;
    let pvs: Api<PersistentVolume> = Api::all(kube.client());
    let restore = "  restore: {enabled: true}\n";

    // Unchanged between the read and the delete: both go.
    let ns = kube.namespace("reprovision").await;
    let (tablet, pv) = restored_tablet(&kube, &ns.name).await;
    let (_vtctld, vt) = vtctld_knowing(&tablet, CannotCatchUp { change_pod: None }).await;
    let cfg = config_with_vtctld(&ns.name, &vt.endpoint(), restore);
    let r = gc_run(&cfg, &gc_opts(false), kube.client()).await;
    assert_eq!(r.exit_code, 0, "{r:?}");
    assert_eq!(
        r.run.reprovisioned,
        [format!("{}/{}", ns.name, tablet.name)]
    );
    assert_eq!(r.run.marked_unusable, [format!("{}/s-1", ns.name)]);
    let pod_ar = resource("", "v1", "Pod", "pods");
    let pvc_ar = resource("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims");
    kube.wait_gone(&pod_ar, &ns.name, &tablet.name, Duration::from_secs(60))
        .await;
    kube.wait_gone(&pvc_ar, &ns.name, &tablet.name, Duration::from_secs(60))
        .await;
    let _ = pvs.delete(&pv, &DeleteParams::default()).await;

    // The Pod changes after the read: the API server refuses the delete (409), the PVC
    // is not touched.
    let ns = kube.namespace("reprovision").await;
    let (tablet, pv) = restored_tablet(&kube, &ns.name).await;
    let change = (kube.client(), ns.name.clone(), tablet.name.clone());
    let (_vtctld, vt) = vtctld_knowing(
        &tablet,
        CannotCatchUp {
            change_pod: Some(change),
        },
    )
    .await;
    let cfg = config_with_vtctld(&ns.name, &vt.endpoint(), restore);
    let r = gc_run(&cfg, &gc_opts(false), kube.client()).await;
    assert_eq!(r.exit_code, 1, "{r:?}");
    assert!(r.run.reprovisioned.is_empty(), "{r:?}");
    assert!(
        r.errors
            .iter()
            .any(|e| e.doing.contains("re-provisioning") && e.cause.contains("409")),
        "{r:?}"
    );
    assert!(kube.get(&pod_ar, &ns.name, &tablet.name).await.is_some());
    assert!(kube.get(&pvc_ar, &ns.name, &tablet.name).await.is_some());
    // The next run reads the Pod as it is now (the snapshot is already unusable): it goes.
    let (_vtctld, vt) = vtctld_knowing(&tablet, CannotCatchUp { change_pod: None }).await;
    let cfg = config_with_vtctld(&ns.name, &vt.endpoint(), restore);
    let r = gc_run(&cfg, &gc_opts(false), kube.client()).await;
    assert_eq!(r.exit_code, 0, "{r:?}");
    assert_eq!(
        r.run.reprovisioned,
        [format!("{}/{}", ns.name, tablet.name)]
    );
    assert!(r.run.marked_unusable.is_empty(), "{r:?}");
    kube.wait_gone(&pvc_ar, &ns.name, &tablet.name, Duration::from_secs(60))
        .await;
    let _ = pvs.delete(&pv, &DeleteParams::default()).await;
}
