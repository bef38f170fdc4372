//! A healthy world passes every check; each fault a person can make is the right line.
#![allow(clippy::unwrap_used)]

use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};
use vtsnap_core::config::Config;
use vtsnap_core::shard::ShardRef;

use super::*;
use crate::decide::objects::{
    JobRun, PodOnNode, SnapshotClass, SnapshotCron, SnapshotHandling, TabletPvc,
};
use crate::observe::read;

// The objects as the API gives them, read as `observe` reads them.

fn as_class(v: Value) -> SnapshotClass {
    read::snapshot_class(&v).unwrap()
}

fn as_storage(v: Value) -> StorageClass {
    read::typed(&v).unwrap()
}

fn as_handling(v: Value) -> SnapshotHandling {
    read::snapshot_handling(&v).unwrap()
}

fn as_cron(v: Value) -> SnapshotCron {
    read::snapshot_cron(&v).unwrap()
}

fn as_job(v: Value) -> JobRun {
    read::job(&v).unwrap()
}

fn as_volume(v: Value) -> PersistentVolume {
    read::typed(&v).unwrap()
}

fn shard(namespace: &str, shard: &str) -> ShardRef {
    ShardRef {
        namespace: namespace.into(),
        cluster: "example".into(),
        keyspace: "commerce".into(),
        shard: shard.parse().unwrap(),
    }
}

const NOW: &str = "2026-12-01T12:00:00Z";

fn now() -> Timestamp {
    NOW.parse().unwrap()
}

fn pvc() -> TabletPvc {
    read::tablet_pvc(&json!({"metadata": {"name": "example-vttablet-zone1-0000000101-0ab1", "namespace": "vitess",
        "labels": {"planetscale.com/component": "vttablet", "planetscale.com/cluster": "example",
                   "planetscale.com/keyspace": "commerce", "planetscale.com/shard": "x-x"}},
        "spec": {"storageClassName": "fast", "volumeName": "pv-101"}}))
    .unwrap()
}

/// The PV of [`pvc`], pinned to `node` by a TopoLVM-like key, or usable on any node.
fn pv(node: Option<&str>) -> PersistentVolume {
    let mut v = json!({"metadata": {"name": "pv-101"}, "spec": {}});
    if let Some(n) = node {
        v["spec"]["nodeAffinity"] = json!({"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "topology.topolvm.io/node", "operator": "In", "values": [n]}]}]}});
    }
    as_volume(v)
}

fn pod(node: &str, component: &str, ready: bool) -> PodOnNode {
    read::pod(&json!({"metadata": {"name": format!("{component}-{node}"), "namespace": "vitess",
        "labels": {"planetscale.com/component": component}},
        "spec": {"nodeName": node},
        "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}}))
    .unwrap()
}

fn healthy() -> World {
    let config = Config::from_yaml(
        "clusters:\n- name: example\n  namespace: vitess\n  snapshot: {volumeSnapshotClassName: csi-snap}\n  restore: {enabled: true}\n",
    )
    .unwrap();
    World {
        now: now(),
        install: Some(Install {
            namespace: "vtsnap".into(),
            fullname: "vtsnap".into(),
        }),
        config: Ok(config),
        crds: Ok(SNAPSHOT_CRDS.iter().map(|c| (*c).to_owned()).collect()),
        snapshot_classes: Ok(vec![as_class(json!({"metadata": {"name": "csi-snap"},
            "driver": "csi.example.com", "deletionPolicy": "Delete"}))]),
        storage_classes: Ok(vec![as_storage(json!({"metadata": {"name": "fast"},
            "provisioner": "csi.example.com", "volumeBindingMode": "WaitForFirstConsumer"}))]),
        tablet_pvcs: Ok(vec![pvc()]),
        tablet_volumes: Ok(vec![pv(None)]),
        tablet_pods: Ok(vec![pod("node-1", "vttablet", true)]),
        node_helpers: Ok(vec![pod("node-1", "node", true)]),
        snapshots: Ok(vec![as_handling(json!({"metadata": {"name": "s-1",
            "creationTimestamp": "2026-12-01T10:00:00Z"}, "status": {"readyToUse": true}}))]),
        namespace_labels: Ok(BTreeMap::new()),
        access: vec![Access {
            program: "snapshot".into(),
            namespace: Some("vitess".into()),
            group: "coordination.k8s.io".into(),
            resource: "leases".into(),
            verb: "watch".into(),
            allowed: Ok(true),
        }],
        webhook: Ok(WebhookSeen::Installed {
            name: "vtsnap-admission".into(),
            failure_policy: "Ignore".into(),
            service: "vtsnap/vtsnap-admission".into(),
            ready_endpoints: Ok(1),
            cert_not_after: Ok("2027-12-01T00:00:00Z".parse().unwrap()),
        }),
        spec_shards: Ok(vec![shard("vitess", "-")]),
        snapshot_cronjobs: Ok(vec![as_cron(
            json!({"metadata": {"name": "vtsnap-snap-example-commerce-x-x",
            "labels": {"vtsnap.io/cluster": "example", "vtsnap.io/keyspace": "commerce", "vtsnap.io/shard": "x-x"}}}),
        )]),
        reconciler_jobs: Ok(vec![as_job(
            json!({"metadata": {"name": "vtsnap-schedule-1",
            "creationTimestamp": "2026-12-01T11:55:00Z"}, "status": {"conditions": [{"type": "Complete", "status": "True"}]}}),
        )]),
        mysql: vec![ShardMysql {
            shard: shard("vitess", "-"),
            max_snapshot_age: Duration::from_secs(72 * 3600),
            online: true,
            expiry: Ok(Some(Duration::from_secs(7 * 86_400))),
            crash_safety: Ok(vec![("zone1-0000000101".into(), vec![])]),
        }],
    }
}

/// The one check (by id) that is not a pass, with its level.
fn not_passing(w: &World) -> Vec<(&'static str, Level, String)> {
    checks(w)
        .into_iter()
        .filter(|c| c.level != Level::Pass)
        .map(|c| (c.check, c.level, c.message))
        .collect()
}

#[test]
fn a_healthy_install_passes_every_check() {
    let w = healthy();
    let all = checks(&w);
    assert!(all.iter().all(|c| c.level == Level::Pass), "{all:#?}");
    assert!(!any_failed(&all));
    // One line per kind of check, none forgotten.
    let ids: BTreeSet<&str> = all.iter().map(|c| c.check).collect();
    assert_eq!(ids.len(), 16, "{ids:?}");
}

#[test]
fn each_fault_is_the_right_line() {
    type Fault = (
        &'static str,
        Box<dyn Fn(&mut World)>,
        &'static str,
        Level,
        &'static str,
    );
    let faults: Vec<Fault> = vec![
        (
            "no install",
            Box::new(|w| w.install = None),
            "install",
            Level::Fail,
            "no vtsnap install",
        ),
        (
            "bad config",
            Box::new(|w| w.config = Err("clusters[0].namespace: missing".into())),
            "config",
            Level::Fail,
            "namespace: missing",
        ),
        (
            "no CRDs",
            Box::new(|w| w.crds = Ok(BTreeSet::new())),
            "snapshot-crds",
            Level::Fail,
            "volumesnapshots.snapshot.storage.k8s.io",
        ),
        (
            "no snapshot-controller",
            Box::new(|w| {
                w.snapshots = Ok(vec![as_handling(
                    json!({"metadata": {"name": "s-9", "creationTimestamp": "2026-12-01T11:54:59Z"}}),
                )])
            }),
            "snapshot-controller",
            Level::Fail,
            "s-9",
        ),
        (
            "class missing",
            Box::new(|w| w.snapshot_classes = Ok(vec![])),
            "snapshot-class",
            Level::Fail,
            "csi-snap does not exist",
        ),
        (
            "class of another driver",
            Box::new(|w| {
                w.snapshot_classes = Ok(vec![as_class(
                    json!({"metadata": {"name": "csi-snap"}, "driver": "other.example.com", "deletionPolicy": "Delete"}),
                )])
            }),
            "snapshot-class",
            Level::Fail,
            "other.example.com",
        ),
        (
            "Retain",
            Box::new(|w| {
                w.snapshot_classes = Ok(vec![as_class(
                    json!({"metadata": {"name": "csi-snap"}, "driver": "csi.example.com", "deletionPolicy": "Retain"}),
                )])
            }),
            "snapshot-class",
            Level::Warn,
            "Retain",
        ),
        (
            "watch denied",
            Box::new(|w| w.access[0].allowed = Ok(false)),
            "rbac",
            Level::Fail,
            "polling",
        ),
        (
            "authorizer unreachable",
            Box::new(|w| w.access[0].allowed = Err("403".into())),
            "rbac",
            Level::Warn,
            "could not ask",
        ),
        (
            "webhook without endpoints",
            Box::new(|w| {
                if let Ok(WebhookSeen::Installed {
                    ready_endpoints, ..
                }) = &mut w.webhook
                {
                    *ready_endpoints = Ok(0)
                }
            }),
            "webhook",
            Level::Fail,
            "silently never happen",
        ),
        (
            "certificate expiring",
            Box::new(|w| {
                if let Ok(WebhookSeen::Installed { cert_not_after, .. }) = &mut w.webhook {
                    *cert_not_after = Ok("2026-12-20T00:00:00Z".parse().unwrap())
                }
            }),
            "webhook-cert",
            Level::Warn,
            "within 30 days",
        ),
        (
            "certificate expired",
            Box::new(|w| {
                if let Ok(WebhookSeen::Installed { cert_not_after, .. }) = &mut w.webhook {
                    *cert_not_after = Ok("2026-12-01T11:59:59Z".parse().unwrap())
                }
            }),
            "webhook-cert",
            Level::Fail,
            "expired",
        ),
        (
            "no webhook with restores on",
            Box::new(|w| w.webhook = Ok(WebhookSeen::NotInstalled)),
            "webhook",
            Level::Warn,
            "not installed",
        ),
        (
            "node-local volumes restored anywhere",
            Box::new(|w| w.tablet_volumes = Ok(vec![pv(Some("node-1"))])),
            "topology",
            Level::Fail,
            "PV pv-101 only on node node-1), but restore.nodeLocal is off",
        ),
        (
            "network volumes pinned to a node",
            Box::new(|w| {
                w.config = Ok(Config::from_yaml("clusters:\n- name: example\n  namespace: vitess\n  snapshot: {volumeSnapshotClassName: csi-snap}\n  restore: {enabled: true, nodeLocal: true}\n").unwrap())
            }),
            "topology",
            Level::Warn,
            "StorageClass fast are not pinned to a node (e.g. vitess/example-vttablet-zone1-0000000101-0ab1)",
        ),
        (
            "a reshard's new shard without a CronJob",
            Box::new(|w| {
                if let Ok(s) = &mut w.spec_shards {
                    s.push(shard("vitess", "-80"));
                }
            }),
            "schedules",
            Level::Fail,
            "1 shard(s) without a snapshot CronJob, so never snapshotted: vitess/example/commerce/-80",
        ),
        (
            "the reconciler's last run failed",
            Box::new(|w| {
                if let Ok(j) = &mut w.reconciler_jobs {
                    j.push(as_job(json!({"metadata": {"name": "vtsnap-schedule-2",
                        "creationTimestamp": "2026-12-01T11:59:00Z"},
                        "status": {"conditions": [{"type": "Failed", "status": "True"}]}})));
                }
            }),
            "schedules",
            Level::Warn,
            "last run (vtsnap-schedule-2) failed",
        ),
        (
            "restricted namespace",
            Box::new(|w| {
                w.namespace_labels = Ok([(PSA_ENFORCE.to_owned(), "restricted".to_owned())].into())
            }),
            "pod-security",
            Level::Fail,
            "restricted",
        ),
        (
            "tablet node without helper",
            Box::new(|w| {
                w.tablet_pods = Ok(vec![
                    pod("node-1", "vttablet", true),
                    pod("node-2", "vttablet", true),
                ])
            }),
            "node-helper",
            Level::Fail,
            "node-2",
        ),
        (
            "helper not ready",
            Box::new(|w| w.node_helpers = Ok(vec![pod("node-1", "node", false)])),
            "node-helper",
            Level::Fail,
            "node-1",
        ),
        (
            "whenDeleted: Delete",
            Box::new(|w| {
                w.config = Ok(Config::from_yaml("clusters:\n- name: example\n  namespace: vitess\n  snapshot: {volumeSnapshotClassName: csi-snap}\n  restore: {enabled: true}\n  deletionPolicy: {whenDeleted: Delete}\n").unwrap())
            }),
            "deletion-policy",
            Level::Warn,
            "whenDeleted: Delete",
        ),
        (
            "binlogs expire before maxSnapshotAge",
            Box::new(|w| w.mysql[0].expiry = Ok(Some(Duration::from_secs(86_400)))),
            "binlog-expiry",
            Level::Fail,
            "keeps binlogs 24.0h (restore.maxSnapshotAge 72.0h)",
        ),
        (
            "expiry unknown",
            Box::new(|w| w.mysql[0].expiry = Err("no vtctld".into())),
            "binlog-expiry",
            Level::Warn,
            "no vtctld",
        ),
        (
            "online, not crash-safe",
            Box::new(|w| {
                w.mysql[0].crash_safety = Ok(vec![(
                    "zone1-0000000102".into(),
                    vec!["sync_binlog=0 (needs 1)".into()],
                )])
            }),
            "crash-safety",
            Level::Fail,
            "zone1-0000000102: sync_binlog=0",
        ),
        (
            "crash safety unknown",
            Box::new(|w| w.mysql[0].crash_safety = Err("no vtctld".into())),
            "crash-safety",
            Level::Warn,
            "no vtctld",
        ),
        (
            "node-local on an immediate class",
            Box::new(|w| {
                w.config = Ok(Config::from_yaml("clusters:\n- name: example\n  namespace: vitess\n  snapshot: {volumeSnapshotClassName: csi-snap}\n  restore: {enabled: true, nodeLocal: true}\n").unwrap());
                w.storage_classes = Ok(vec![as_storage(
                    json!({"metadata": {"name": "fast"}, "provisioner": "csi.example.com", "volumeBindingMode": "Immediate"}),
                )]);
                w.tablet_volumes = Ok(vec![pv(Some("node-1"))]);
            }),
            "binding-mode",
            Level::Warn,
            "fast",
        ),
    ];
    for (what, fault, id, level, says) in faults {
        let mut w = healthy();
        fault(&mut w);
        let lines = not_passing(&w);
        // The fault's own line; any other is a check it left unchecked (a warning).
        let (mine, others): (Vec<_>, Vec<_>) = lines.iter().partition(|(i, _, _)| *i == id);
        assert_eq!(mine.len(), 1, "{what}: {lines:#?}");
        let (_, got_level, message) = mine[0];
        assert_eq!(*got_level, level, "{what}: {message}");
        assert!(message.contains(says), "{what}: {message}");
        assert!(
            others
                .iter()
                .all(|(_, l, m)| *l == Level::Warn && m.contains("not checked")),
            "{what}: {lines:#?}"
        );
        assert_eq!(any_failed(&checks(&w)), level == Level::Fail, "{what}");
    }
}

#[test]
fn a_read_that_failed_is_never_a_pass() {
    let mut w = healthy();
    w.crds = Err("forbidden".into());
    w.tablet_pvcs = Err("forbidden".into());
    w.tablet_pods = Err("forbidden".into());
    w.namespace_labels = Err("forbidden".into());
    w.webhook = Err("forbidden".into());
    w.snapshots = Err("forbidden".into());
    w.tablet_volumes = Err("forbidden".into());
    w.spec_shards = Err("forbidden".into());
    let lines = not_passing(&w);
    let ids: BTreeSet<&str> = lines.iter().map(|(id, _, _)| *id).collect();
    for id in [
        "snapshot-crds",
        "snapshot-class",
        "node-helper",
        "pod-security",
        "webhook",
        "snapshot-controller",
        "topology",
        "schedules",
    ] {
        assert!(ids.contains(id), "{id}: {lines:#?}");
    }
    assert!(
        lines
            .iter()
            .all(|(_, l, m)| *l == Level::Warn
                && (m.contains("forbidden") || m.contains("not checked"))),
        "{lines:#?}"
    );
}

#[test]
fn binlogs_that_never_expire_and_cold_shards_pass() {
    let mut w = healthy();
    w.mysql[0].expiry = Ok(Some(Duration::ZERO));
    w.mysql[0].online = false;
    w.mysql[0].crash_safety = Err("not read for a cold shard".into());
    assert_eq!(not_passing(&w), []);
    // Exactly maxSnapshotAge is not enough: the oldest offered snapshot is at the edge.
    w.mysql[0].expiry = Ok(Some(w.mysql[0].max_snapshot_age));
    assert_eq!(not_passing(&w)[0].0, "binlog-expiry");
}

#[test]
fn a_default_class_of_the_driver_serves_when_none_is_configured() {
    let mut w = healthy();
    w.config = Ok(Config::from_yaml(
        "clusters:\n- name: example\n  namespace: vitess\n  restore: {enabled: true}\n",
    )
    .unwrap());
    w.snapshot_classes = Ok(vec![
        as_class(
            json!({"metadata": {"name": "other-default", "annotations": {read::DEFAULT_CLASS: "true"}}, "driver": "other.example.com", "deletionPolicy": "Delete"}),
        ),
        as_class(
            json!({"metadata": {"name": "csi-default", "annotations": {read::DEFAULT_CLASS: "true"}}, "driver": "csi.example.com", "deletionPolicy": "Delete"}),
        ),
    ]);
    assert_eq!(not_passing(&w), []);
    w.snapshot_classes = Ok(vec![as_class(
        json!({"metadata": {"name": "csi-default"}, "driver": "csi.example.com", "deletionPolicy": "Delete"}),
    )]);
    let lines = not_passing(&w);
    assert!(
        lines[0].2.contains("no default VolumeSnapshotClass"),
        "{lines:?}"
    );
}

#[test]
fn boundaries_and_the_right_object_of_several() {
    // A snapshot exactly 5 minutes old without a status is not yet unhandled.
    let mut w = healthy();
    w.snapshots = Ok(vec![as_handling(
        json!({"metadata": {"name": "s-5", "creationTimestamp": "2026-12-01T11:55:00Z"}}),
    )]);
    assert_eq!(not_passing(&w), []);
    // Node-local restores: the tablets' own StorageClass is judged, not another one.
    let mut w = healthy();
    w.config = Ok(Config::from_yaml("clusters:\n- name: example\n  namespace: vitess\n  snapshot: {volumeSnapshotClassName: csi-snap}\n  restore: {enabled: true, nodeLocal: true}\n").unwrap());
    w.storage_classes = Ok(vec![
        as_storage(
            json!({"metadata": {"name": "other"}, "provisioner": "csi.example.com", "volumeBindingMode": "Immediate"}),
        ),
        as_storage(
            json!({"metadata": {"name": "fast"}, "provisioner": "csi.example.com", "volumeBindingMode": "WaitForFirstConsumer"}),
        ),
    ]);
    // ... and the tablets' own volume, not another one.
    w.tablet_volumes = Ok(vec![
        as_volume(json!({"metadata": {"name": "pv-other"}, "spec": {}})),
        pv(Some("node-1")),
    ]);
    assert_eq!(not_passing(&w), []);
    assert!(
        checks(&w).iter().any(|c| c.check == "topology"
            && c.message == "restore.nodeLocal matches the topology of 1 bound tablet volume(s)"),
        "{:#?}",
        checks(&w)
    );
    // A PVC not yet bound says nothing of its topology.
    w.tablet_volumes = Ok(vec![]);
    let all = checks(&w);
    assert!(
        all.iter()
            .any(|c| c.check == "topology" && c.message == "no bound tablet volume yet"),
        "{all:#?}"
    );
}

#[test]
fn only_the_newest_reconciler_run_counts() {
    let mut w = healthy();
    // An older failed run, then a newer complete one: healthy.
    if let Ok(j) = &mut w.reconciler_jobs {
        j.insert(
            0,
            as_job(json!({"metadata": {"name": "vtsnap-schedule-0",
            "creationTimestamp": "2026-12-01T11:50:00Z"},
            "status": {"conditions": [{"type": "Failed", "status": "True"}]}})),
        );
    }
    assert_eq!(not_passing(&w), []);
    assert!(checks(&w).iter().any(|c| c.check == "schedules"
        && c.message
            == "each of the 1 shard(s) of the configured clusters has its snapshot CronJob"));
    // A CronJob of another shard does not stand for this one.
    w.snapshot_cronjobs = Ok(vec![as_cron(
        json!({"metadata": {"labels": {"vtsnap.io/cluster": "example",
        "vtsnap.io/keyspace": "commerce", "vtsnap.io/shard": "x-80"}}}),
    )]);
    assert_eq!(not_passing(&w)[0].0, "schedules");
}

#[test]
fn a_volume_is_pinned_only_when_every_term_allows_one_node() {
    use super::storage::pinned_node;
    let term = |key: &str, op: &str, values: &[&str]| json!({"matchExpressions": [{"key": key, "operator": op, "values": values}]});
    let with = |terms: Vec<Value>| {
        as_volume(json!({"spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": terms}}}}))
    };
    let host = "kubernetes.io/hostname";
    assert_eq!(
        pinned_node(&with(vec![term(host, "In", &["a"])])).as_deref(),
        Some("a")
    );
    assert_eq!(
        pinned_node(&with(vec![term("topology.lvm.csi/nodename", "In", &["b"])])).as_deref(),
        Some("b")
    );
    assert_eq!(
        pinned_node(&with(vec![
            term(host, "In", &["a"]),
            term(host, "In", &["a"])
        ]))
        .as_deref(),
        Some("a")
    );
    // Two nodes, or one term open to any node, or a zone: not node-local.
    assert_eq!(
        pinned_node(&with(vec![term(host, "In", &["a", "b"])])),
        None
    );
    assert_eq!(
        pinned_node(&with(vec![
            term(host, "In", &["a"]),
            term(host, "In", &["b"])
        ])),
        None
    );
    assert_eq!(
        pinned_node(&with(vec![term(host, "In", &["a"]), json!({})])),
        None
    );
    assert_eq!(pinned_node(&with(vec![term(host, "NotIn", &["a"])])), None);
    assert_eq!(
        pinned_node(&with(vec![term(
            "topology.kubernetes.io/zone",
            "In",
            &["z"]
        )])),
        None
    );
    assert_eq!(pinned_node(&with(vec![])), None);
    assert_eq!(
        pinned_node(&as_volume(json!({"spec": {"local": {"path": "/d"}}}))).as_deref(),
        Some("?")
    );
    assert_eq!(pinned_node(&as_volume(json!({"spec": {}}))), None);
}

#[test]
fn a_certificate_with_exactly_30_days_left_passes() {
    let mut w = healthy();
    if let Ok(WebhookSeen::Installed { cert_not_after, .. }) = &mut w.webhook {
        *cert_not_after = Ok("2026-12-31T12:00:00Z".parse().unwrap());
    }
    assert_eq!(not_passing(&w), []);
}

/// Review round three, item 4: `example` in `ns-a` and `ns-b`, one CronJob (ns-a's): the
/// doctor said every shard had its CronJob.
#[test]
fn a_shard_s_cronjob_is_matched_by_its_namespace_and_a_second_is_named() {
    let mut w = healthy();
    w.config = Ok(Config::from_yaml(
        "clusters:\n- name: example\n  namespace: ns-a\n- name: example\n  namespace: ns-b\n",
    )
    .unwrap());
    w.spec_shards = Ok(vec![shard("ns-a", "-"), shard("ns-b", "-")]);
    let cron = |name: &str, ns: &str| {
        as_cron(json!({"metadata": {"name": name,
            "labels": {"vtsnap.io/cluster": "example", "vtsnap.io/keyspace": "commerce", "vtsnap.io/shard": "x-x"},
            "annotations": {"vtsnap.io/schedule-shard": format!("{ns}/example/commerce/-")}}}))
    };
    w.snapshot_cronjobs = Ok(vec![cron("vtsnap-snap-example-commerce-x-x", "ns-a")]);
    let c = checks(&w)
        .into_iter()
        .find(|c| c.check == "schedules")
        .unwrap();
    assert_eq!(c.level, Level::Fail, "{c:?}");
    assert!(
        c.message.contains("ns-b/example/commerce/-"),
        "{}",
        c.message
    );
    assert!(!c.message.contains("ns-a/"), "{}", c.message);
    // Each its own: a pass. A second one of ns-a's: a warning naming both.
    let both = vec![
        cron("vtsnap-snap-example-commerce-x-x", "ns-a"),
        cron("vtsnap-snap-ns-b-example-commerce-x-x", "ns-b"),
    ];
    w.snapshot_cronjobs = Ok(both.clone());
    let c = checks(&w)
        .into_iter()
        .find(|c| c.check == "schedules")
        .unwrap();
    assert_eq!(c.level, Level::Pass, "{c:?}");
    let mut three = both;
    three.push(cron("vtsnap-snap-ns-a-example-commerce-x-x", "ns-a"));
    w.snapshot_cronjobs = Ok(three);
    let c = checks(&w)
        .into_iter()
        .find(|c| c.check == "schedules")
        .unwrap();
    assert_eq!(c.level, Level::Warn, "{c:?}");
    assert!(
        c.message.contains(
            "ns-a/example/commerce/x-x (vtsnap-snap-example-commerce-x-x, vtsnap-snap-ns-a-example-commerce-x-x)"
        ),
        "{}",
        c.message
    );
    // The chart's own CronJob (no record) stands for no shard of a name in two namespaces.
    w.snapshot_cronjobs = Ok(vec![as_cron(
        json!({"metadata": {"name": "vtsnap-snap-example-commerce-x-x",
        "labels": {"vtsnap.io/cluster": "example", "vtsnap.io/keyspace": "commerce", "vtsnap.io/shard": "x-x"}}}),
    )]);
    let c = checks(&w)
        .into_iter()
        .find(|c| c.check == "schedules")
        .unwrap();
    assert!(c.message.starts_with("2 shard(s) without"), "{}", c.message);
}
