//! Shared by the real-API tests: the real node helper (in-process) serving a fence lease
//! on the real API server with a given client, so it can run as the chart's ServiceAccount.

use std::time::Duration;

use serde_json::{Value, json};
use vtsnap_core::fence::{
    ANN_MAX_HOLD, ANN_MODE, ANN_NODE_STATE, ANN_ORIGINAL_TYPE, ANN_REQUEST, ANN_TABLET_ALIAS,
    ANN_TARGET_POD, ANN_TARGET_POD_UID, ANN_VTCTLD, LABEL_NODE, lease_name,
};
use vtsnap_core::labels::{MANAGED_BY, MANAGED_BY_VTSNAP};
use vtsnap_core::vtctld::TabletType;
use vtsnap_node::cgroup::Roots;
use vtsnap_node::daemon::{self, DaemonConfig};
use vtsnap_testkit::fake_kube::FakeKube;
use vtsnap_testkit::fake_vtctld::FakeVtctld;
use vtsnap_testkit::fixtures::shard;
use vtsnap_testkit::layout::TabletLayout;
use vtsnap_testkit::real_kube::{RealKube, resource};

const NODE: &str = "vtsnap-local-node";

fn leases() -> kube::core::ApiResource {
    resource("coordination.k8s.io", "v1", "Lease", "leases")
}

fn node_state(v: &Value) -> Option<&str> {
    v.pointer(&format!(
        "/metadata/annotations/{}",
        ANN_NODE_STATE.replace('/', "~1")
    ))
    .and_then(Value::as_str)
}

/// The node helper, with `client` as its identity, answers a probe in a fence lease in
/// `namespace`; when the job stops renewing, it puts the tablet back and deletes the lease.
pub async fn node_helper_answers_and_recovers(
    kube: &RealKube,
    namespace: &str,
    client: kube::Client,
) {
    // vtctld knows the shard; tablet 2 was drained by a job that then died.
    let fixture = shard()
        .replicas(3)
        .primary(1)
        .vtctld_type(2, TabletType::Drained);
    let vtctld = FakeVtctld::new();
    fixture.install(&FakeKube::new(), &vtctld);
    let vt = vtctld.serve().await;
    let alias = fixture.alias(2);
    let pod_name = fixture.tablet(2).pod;

    // The tablet's pod on this node, and its volume where kubelet would mount it.
    let pod = kube
        .create(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod_name, "namespace": namespace},
            "spec": {"nodeName": NODE, "containers": [{"name": "mysqld", "image": "vitess/lite"}]}
        }))
        .await;
    let pod_uid = pod["metadata"]["uid"].as_str().unwrap().to_owned();
    let dir = tempfile::tempdir().unwrap();
    let kubelet = dir.path().join("kubelet");
    let root = kubelet
        .join("pods")
        .join(&pod_uid)
        .join("volumes/kubernetes.io~csi/pv-1/mount/vtdataroot");
    std::fs::create_dir_all(&root).unwrap();
    TabletLayout::mariadb(alias.uid.get()).write(&root).unwrap();

    let h = daemon::start(
        DaemonConfig {
            node: NODE.into(),
            kubelet_dir: kubelet,
            roots: Roots::default(),
            // The tests run on the host: its `/` is the node root.
            host_root: "/".into(),
            state_dir: dir.path().join("state"),
            resync: Duration::from_secs(30),
            listen: None,
            start_timeout: Duration::from_secs(30),
            shutdown_timeout: Duration::from_secs(30),
        },
        client,
    )
    .await
    .unwrap();

    // The job's lease asks for a probe and is renewed for the last time now.
    let name = lease_name("example", "commerce", "x-x");
    let now = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S.%6fZ")
        .to_string();
    kube.create(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace,
            "labels": {LABEL_NODE: NODE, MANAGED_BY: MANAGED_BY_VTSNAP},
            "annotations": {
                ANN_TARGET_POD: pod_name, ANN_TARGET_POD_UID: pod_uid,
                ANN_TABLET_ALIAS: alias.to_string(), ANN_ORIGINAL_TYPE: "replica",
                ANN_VTCTLD: vt.endpoint(), ANN_MODE: "cold", ANN_REQUEST: "probe",
                ANN_MAX_HOLD: "60"}},
        "spec": {"holderIdentity": "snapshot-job", "leaseDurationSeconds": 6,
                 "acquireTime": now, "renewTime": now}
    }))
    .await;

    // The answer, written into the lease on the server.
    let answered = kube
        .wait_for(
            &leases(),
            namespace,
            &name,
            "answered",
            Duration::from_secs(30),
            |v| node_state(v).is_some(),
        )
        .await;
    assert_eq!(node_state(&answered), Some("probed"), "{answered}");

    // Not renewed: once it expires the node helper puts the tablet back and deletes it.
    kube.wait_gone(&leases(), namespace, &name, Duration::from_secs(60))
        .await;
    let calls = vtctld.calls();
    assert!(
        calls.contains(&format!("StartReplication {alias}")),
        "{calls:?}"
    );
    assert!(
        calls.contains(&format!("ChangeTabletType {alias} REPLICA")),
        "{calls:?}"
    );
    let t = vtctld.tablet(&alias).unwrap();
    assert_eq!(t.tablet.r#type, TabletType::Replica as i32);
    h.stop().await;
}
