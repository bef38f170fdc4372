//! The Helm chart installed into the real control plane by the real helm (built from its
//! Go module into target/tools/): every object it renders passes the API server's own
//! validation and exists afterwards; the snapshot CronJob's Job template mounts the
//! config and passes the shard; and each program, run with its own ServiceAccount's token
//! (TokenRequest), does its job while a request outside its documented rules is refused
//! with 403: least privilege proven against the RBAC authorizer, not asserted. The node
//! helper runs for real too (a probe and a lease recovery, no mysqld needed).
//! vtctld and the node helper are fakes (docs/design.md §7), as in the other real-API tests.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "chart/plugin.rs"]
mod plugin;
#[path = "chart/schedule.rs"]
mod schedule;

use std::time::Duration;

use vtsnap_core::shard::ShardName;

use k8s_openapi::api::authorization::v1::SelfSubjectAccessReview;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};
use vtsnap_admission::inventory::Inventory as _;
use vtsnap_core::config::{Config, Mode};
use vtsnap_gc::act::{GcOptions, run as gc_run};
use vtsnap_snapshot::run::{RunOptions, run as snapshot_run};
use vtsnap_snapshot::schedule::decide::Action;
use vtsnap_testkit::fake_node::{ApiLeases, FakeNodeHelper, NodeScript};
use vtsnap_testkit::fake_vtctld::FakeVtctld;
use vtsnap_testkit::fixtures::shard;
use vtsnap_testkit::helm::Release;
use vtsnap_testkit::layout::TabletLayout;
use vtsnap_testkit::operator_objects::{OperatorShard, operator_shard, pvc_template};
use vtsnap_testkit::real_kube::{BTRFS_CLASS, RealKube, plural_of, resource};
use vtsnap_vtbackup_storage::act::{Options as VtbackupOptions, run as vtbackup_run};

const LIMIT: Duration = Duration::from_secs(90);
/// A cron line that does not fire while the test runs (midnight of February 29th, next in
/// 2028): the test runs each program itself. One that never fires at all would be
/// refused by the config's validation.
const NEVER: &str = "0 0 29 2 *";
const RELEASE: &str = "t";
const FULL: &str = "t-vtsnap";

/// Whether the client's identity may `verb` the resource (a SelfSubjectAccessReview:
/// the API server's RBAC authorizer answers).
async fn may(client: &kube::Client, ns: &str, group: &str, resource: &str, verb: &str) -> bool {
    let review: SelfSubjectAccessReview = serde_json::from_value(json!({
        "spec": {"resourceAttributes": {"namespace": ns, "group": group, "resource": resource, "verb": verb}}
    }))
    .unwrap();
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let answer = api.create(&PostParams::default(), &review).await.unwrap();
    answer.status.map(|s| s.allowed).unwrap_or(false)
}

/// A request refused by the API server with 403.
fn assert_forbidden<T: std::fmt::Debug>(what: &str, r: Result<T, kube::Error>) {
    match r {
        Err(kube::Error::Api(s)) if s.code == 403 => {}
        other => panic!("{what}: want 403 Forbidden, got {other:?}"),
    }
}

#[tokio::test]
async fn the_chart_installs_and_each_program_does_its_job_with_only_its_own_rules() {
    let kube = RealKube::from_env().await;
    let vitess = kube.namespace("chart-vitess").await;
    let system = kube.namespace("chart-system").await;

    // A shard whose PVCs the real provisioner bound, each volume with its tablet's files.
    let vtctld = FakeVtctld::new();
    let fixture = shard().replicas(3).primary(1);
    let pvs = fixture
        .install_real(&kube, &vitess.name, BTRFS_CLASS, &vtctld)
        .await;
    for (n, pv) in &pvs {
        let dir = kube.volume_dir(pv).await.join("vtdataroot");
        std::fs::create_dir_all(&dir).unwrap();
        TabletLayout::mariadb(fixture.alias(*n).uid.get())
            .write(&dir)
            .unwrap();
    }
    let vt = vtctld.serve().await;
    let _node = FakeNodeHelper::start_on(
        ApiLeases(kube.client()),
        "",
        NodeScript::default(),
        Duration::from_millis(50),
    );
    // A legacy initial backup (Pod and PVC without vtsnap's hashes) for vtbackup-storage.
    let backup = OperatorShard {
        namespace: vitess.name.clone(),
        ..operator_shard()
    };
    kube.create(backup.unsharded_vitess_cluster(&pvc_template("64Mi")))
        .await;
    kube.create(backup.vtbackup_init_pvc(&pvc_template("64Mi")))
        .await;
    kube.create(backup.vtbackup_init_pod()).await;

    // helm install, with the workloads' Pods kept off the one Node (there is no kubelet).
    let off_node = json!({"vtsnap.io/test-no-such-node": "true"});
    let values = json!({
        "image": {"tag": "0.1.0"},
        "config": {"clusters": [{"name": "example", "namespace": vitess.name, "vtctld": vt.endpoint(),
            "snapshot": {"volumeSnapshotClassName": BTRFS_CLASS, "cutTimeout": "60s", "readyTimeout": "60s", "maxHold": "60s",
                         "schedule": NEVER},
            "retention": {"maxCount": 1}, "restore": {"enabled": true},
            "drill": {"schedule": NEVER, "stagger": "0s"},
            "pitr": {"enabled": true, "schedule": NEVER, "stagger": "0s"}}]},
        "drill": {"enabled": true},
        // The binlog archive's template: Vitess's file backup storage is a Pod volume.
        "pitr": {"enabled": true, "backupStorage": {"volume": {"emptyDir": {}}}},
        "snapshot": {"shards": [{"cluster": "example", "keyspace": "commerce", "shard": "-", "schedule": NEVER}]},
        "gc": {"schedule": NEVER},
        "vtbackupStorage": {"schedule": NEVER},
        "node": {"nodeSelector": off_node},
        "admission": {"replicas": 2, "nodeSelector": off_node},
    });
    let release = Release::install(RELEASE, &system.name, &values, kube.kubeconfig());

    // Every object of the release's manifest is on the server (the API server validated
    // and stored each one; helm would have failed otherwise).
    let manifest = release.manifest();
    let mut kinds = std::collections::BTreeSet::new();
    for doc in manifest.split("\n---") {
        let v: Value = match serde_yaml_ng::from_str(doc) {
            Ok(v) if !Value::is_null(&v) => v,
            _ => continue,
        };
        let (group, version) = v["apiVersion"]
            .as_str()
            .unwrap()
            .rsplit_once('/')
            .unwrap_or(("", v["apiVersion"].as_str().unwrap()));
        let kind = v["kind"].as_str().unwrap();
        let name = v["metadata"]["name"].as_str().unwrap();
        let ns = v["metadata"]["namespace"].as_str().unwrap_or("");
        let ar = resource(group, version, kind, &plural_of(kind));
        assert!(
            kube.get(&ar, ns, name).await.is_some(),
            "{kind} {ns}/{name} of the release is not on the server"
        );
        kinds.insert(kind.to_owned());
    }
    for want in [
        "ConfigMap",
        "CronJob",
        "DaemonSet",
        "Deployment",
        "Service",
        "Secret",
        "MutatingWebhookConfiguration",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "PodDisruptionBudget",
    ] {
        assert!(kinds.contains(want), "no {want} in the release: {kinds:?}");
    }

    // The config every program reads is the ConfigMap's, as the chart rendered it.
    let cm = kube
        .get(
            &resource("", "v1", "ConfigMap", "configmaps"),
            &system.name,
            &format!("{FULL}-config"),
        )
        .await
        .unwrap();
    let config = Config::from_yaml(cm["data"]["config.yaml"].as_str().unwrap())
        .unwrap_or_else(|e| panic!("the chart's config: {e}"));

    let account = |program: &str| format!("{FULL}-{program}");
    let as_snapshot = kube
        .as_service_account(&system.name, &account("snapshot"))
        .await;
    let as_gc = kube.as_service_account(&system.name, &account("gc")).await;
    let as_vtbackup = kube
        .as_service_account(&system.name, &account("vtbackup-storage"))
        .await;
    let as_admission = kube
        .as_service_account(&system.name, &account("admission"))
        .await;
    let as_node = kube
        .as_service_account(&system.name, &account("node"))
        .await;
    let as_schedule = kube
        .as_service_account(&system.name, &account("schedule"))
        .await;
    let as_pitr = kube
        .as_service_account(&system.name, &account("pitr"))
        .await;

    // The RBAC authorizer learns new bindings from a watch: wait until it has them.
    let deadline = std::time::Instant::now() + LIMIT;
    while !may(&as_node, "", "coordination.k8s.io", "leases", "list").await
        || !may(&as_gc, &vitess.name, "", "pods", "list").await
        || !may(&as_schedule, &system.name, "batch", "cronjobs", "create").await
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the chart's bindings never took effect"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The schedule reconciler, as its ServiceAccount: the shard of the VitessCluster gets
    // its snapshot CronJob from the chart's template (the only CronJob no value listed).
    let template = format!("{FULL}-snapshot-schedule");
    let (plan, outcomes) =
        vtsnap_snapshot::schedule::reconcile(&as_schedule, &config, &system.name, &template).await;
    assert!(
        plan.problems.is_empty() && outcomes.iter().all(|o| o.error.is_none()),
        "{plan:#?} {outcomes:#?}"
    );
    assert_eq!(plan.count(Action::Create), 3, "{plan:#?}");
    // The snapshot CronJob as stored: the config mounted, the shard's args, no latest tag.
    let cronjobs = kube
        .list(
            &resource("batch", "v1", "CronJob", "cronjobs"),
            &system.name,
        )
        .await;
    let snap = cronjobs
        .iter()
        .find(|c| c["metadata"]["labels"]["app.kubernetes.io/component"] == "snapshot")
        .expect("a snapshot CronJob");
    assert_eq!(snap["spec"]["concurrencyPolicy"], "Forbid");
    let pod = &snap["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    assert_eq!(
        c["args"],
        json!([
            "run",
            "--cluster",
            "example",
            "--keyspace",
            "commerce",
            "--shard=-"
        ])
    );
    assert!(
        c["image"]
            .as_str()
            .unwrap()
            .ends_with("/vtsnap-snapshot:0.1.0"),
        "{c}"
    );
    assert_eq!(c["volumeMounts"][0]["mountPath"], "/etc/vtsnap");
    assert_eq!(
        pod["volumes"][0]["configMap"]["name"],
        format!("{FULL}-config")
    );
    assert_eq!(pod["serviceAccountName"], format!("{FULL}-snapshot"));
    // Its drill CronJob, from the chart's drill template: the drill's own account, the
    // Job the owner of the drill's objects, the config's drill schedule.
    let drill = cronjobs
        .iter()
        .find(|c| c["metadata"]["labels"]["app.kubernetes.io/component"] == "drill")
        .expect("a drill CronJob");
    assert_eq!(
        drill["metadata"]["annotations"]["vtsnap.io/schedule-kind"],
        "drill"
    );
    assert_eq!(drill["spec"]["schedule"], NEVER);
    let pod = &drill["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], format!("{FULL}-drill"));
    let c = &pod["containers"][0];
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(args[0], "run");
    assert_eq!(
        args[args.len() - 5..],
        [
            "--cluster",
            "example",
            "--keyspace",
            "commerce",
            "--shard=-"
        ]
    );
    // The drill's Job, its owner, from the Pod's labels and namespace (the release's).
    let env = |name: &str| {
        c["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .map(|e| e["valueFrom"]["fieldRef"]["fieldPath"].clone())
    };
    assert_eq!(
        env("VTSNAP_OWNER_UID"),
        Some(json!(
            "metadata.labels['batch.kubernetes.io/controller-uid']"
        )),
        "{c}"
    );
    assert_eq!(
        env("VTSNAP_OWNER_NAMESPACE"),
        Some(json!("metadata.namespace")),
        "{c}"
    );
    // Its binlog-archive CronJob, from the chart's archive template: the pitr account, the
    // backup storage mounted read-only where --archive-root reads it, the shard's args.
    let archive = cronjobs
        .iter()
        .find(|c| c["metadata"]["labels"]["app.kubernetes.io/component"] == "pitr")
        .expect("an archive CronJob");
    assert_eq!(
        archive["metadata"]["annotations"]["vtsnap.io/schedule-kind"],
        "archive"
    );
    assert_eq!(
        archive["metadata"]["name"],
        format!("{FULL}-pitr-example-commerce-x-x")
    );
    assert_eq!(archive["spec"]["schedule"], NEVER);
    let pod = &archive["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], format!("{FULL}-pitr"));
    // Vitess writes its backups without world permission: the tablets' group reads them
    assert_eq!(pod["securityContext"]["supplementalGroups"], json!([999]));
    let c = &pod["containers"][0];
    assert_eq!(
        c["args"],
        json!([
            "archive",
            "--archive-root",
            "/vt/backups",
            "--backup-timeout",
            "1h",
            "--cluster",
            "example",
            "--keyspace",
            "commerce",
            "--shard=-"
        ])
    );
    assert_eq!(
        c["volumeMounts"][1],
        json!({"name": "backups", "mountPath": "/vt/backups", "readOnly": true})
    );
    assert_eq!(
        pod["volumes"][1],
        json!({"name": "backups", "emptyDir": {}})
    );
    for c in &cronjobs {
        let image = c["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"]
            .as_str()
            .unwrap();
        assert!(
            !image.ends_with(":latest") && image.contains(':'),
            "{image}"
        );
    }

    // vtsnap-snapshot with its own token: two cold snapshots through the fence lease.
    let opts = RunOptions {
        mode: Some(Mode::Cold),
        holder: "job-chart".into(),
        lease_duration: Duration::from_secs(15),
        node_timeout: Duration::from_secs(30),
        poll: Duration::from_millis(200),
        ..RunOptions::default()
    };
    let mut cut = Vec::new();
    for _ in 0..2 {
        let s = snapshot_run(
            &config,
            &ShardName::new("example", "commerce", "-"),
            &opts,
            as_snapshot.clone(),
        )
        .await;
        assert_eq!(s.exit_code, 0, "vtsnap-snapshot as its account: {s:?}");
        cut.push(s.snapshot.unwrap());
    }
    // vtsnap-pitr archive as its account (a dry run): it lists the shard's snapshots and
    // finds vtctld and its tablets, then refuses: this fake shard runs MariaDB, whose
    // positions the archive does not replay, and it says so of each snapshot.
    let archive_root = tempfile::tempdir().unwrap();
    let planned = vtsnap_pitr::run::archive(
        &as_pitr,
        &config,
        &ShardName::new("example", "commerce", "-"),
        &vtsnap_pitr::run::ArchiveOptions {
            archive: vtsnap_pitr::archive::ArchivePlace::Folder(archive_root.path().to_owned()),
            mode: vtsnap_pitr::run::Mode::DryRun,
            backup_limit: Duration::from_secs(60),
        },
    )
    .await;
    assert_eq!(
        (planned.outcome, planned.error.as_ref().map(|e| e.code)),
        (
            vtsnap_pitr::report::ArchiveOutcome::Refused,
            Some("no-increment")
        ),
        "vtsnap-pitr archive as its account: {planned:?}"
    );
    let passed: Vec<&str> = planned
        .passed_snapshots
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(passed.len(), cut.len(), "{planned:?}");
    assert!(
        cut.iter().all(|c| passed.contains(&c.as_str())),
        "{planned:?}"
    );
    assert!(
        planned
            .passed_snapshots
            .iter()
            .all(|p| p.why.contains("a MariaDB position")),
        "{planned:?}"
    );
    // Its waits were woken by watches its Role allows: a refused watch falls back to
    // polling, which still passes but lengthens the fence window.
    assert_eq!(
        vtsnap_core::reconcile::watch::fallbacks(),
        0,
        "vtsnap-snapshot as its account fell back from a watch to polling (its Role lacks watch)"
    );
    // vtsnap-gc with its own token: retention maxCount 1 deletes the older one.
    let r = gc_run(
        &config,
        &GcOptions {
            dry_run: false,
            only_cluster: None,
            node_timeout: Duration::from_secs(5),
        },
        as_gc.clone(),
    )
    .await;
    assert_eq!(r.exit_code, 0, "vtsnap-gc as its account: {r:?}");
    assert_eq!(
        r.run.deleted,
        vec![format!("{}/{}", vitess.name, cut[0])],
        "{r:?}"
    );
    // vtsnap-vtbackup-storage with its own token: the legacy backup adopted (hashes set).
    let v = vtbackup_run(
        &config,
        &VtbackupOptions {
            dry_run: false,
            only_cluster: None,
            pod_gone_timeout: Duration::from_secs(30),
        },
        as_vtbackup.clone(),
    )
    .await;
    assert_eq!(
        v.exit_code, 0,
        "vtsnap-vtbackup-storage as its account: {v:?}"
    );
    let pod = kube
        .get(
            &resource("", "v1", "Pod", "pods"),
            &vitess.name,
            &backup.vtbackup_init_name(),
        )
        .await
        .unwrap();
    assert!(
        pod["metadata"]["annotations"][vtsnap_core::vtbackup::ANN_TEMPLATE_HASH].is_string(),
        "not adopted: {pod}"
    );
    // vtsnap-admission as its account: its caches fill from real watches (the snapshot
    // the GC kept), and its vtctld refresh reads the shard.
    let (caches, _watches) = vtsnap_admission::cache::Caches::start(
        &as_admission,
        &std::collections::BTreeSet::from([vitess.name.clone()]),
    );
    tokio::spawn(vtsnap_admission::tablets::refresh_loop(
        as_admission.clone(),
        std::sync::Arc::new(config.clone()),
        caches.clone(),
        Duration::from_millis(500),
    ));
    let key = vtsnap_core::shard::ShardRef {
        namespace: vitess.name.clone(),
        cluster: "example".into(),
        keyspace: "commerce".into(),
        shard: "-".parse().unwrap(),
    };
    let deadline = std::time::Instant::now() + LIMIT;
    while caches.shard_state(&key).is_none_or(|s| s.error.is_some())
        || caches.snapshots(&key).len() != 1
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the webhook as its account never read the shard: {:?}, {} snapshots",
            caches.shard_state(&key),
            caches.snapshots(&key).len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // vtsnap-admission's caches: list and watch in the cluster's namespace.
    for (group, res) in [
        ("snapshot.storage.k8s.io", "volumesnapshots"),
        ("", "persistentvolumeclaims"),
        ("planetscale.com", "vitessclusters"),
    ] {
        for verb in ["list", "watch"] {
            assert!(
                may(&as_admission, &vitess.name, group, res, verb).await,
                "admission {verb} {res}"
            );
        }
    }
    let snaps = Api::<DynamicObject>::namespaced_with(
        as_admission.clone(),
        &vitess.name,
        &resource(
            "snapshot.storage.k8s.io",
            "v1",
            "VolumeSnapshot",
            "volumesnapshots",
        ),
    );
    assert_eq!(
        snaps
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    // vtsnap-node: its fence leases in every namespace, the target Pods.
    let leases = Api::<k8s_openapi::api::coordination::v1::Lease>::all(as_node.clone());
    leases.list(&ListParams::default()).await.unwrap();
    assert!(may(&as_node, "", "coordination.k8s.io", "leases", "watch").await);
    assert!(may(&as_node, &vitess.name, "", "pods", "get").await);
    // The real node helper as its account: a probe answered in a fence lease, and the
    // lease recovered (tablet put back, lease deleted) when the job stops renewing.
    let node_ns = kube.namespace("chart-node").await;
    common::node_helper_answers_and_recovers(&kube, &node_ns.name, as_node.clone()).await;
    assert!(
        may(
            &as_node,
            &vitess.name,
            "coordination.k8s.io",
            "leases",
            "patch"
        )
        .await
    );

    // Outside the rules: refused by the API server itself.
    let secrets = |c: &kube::Client, ns: &str| {
        Api::<k8s_openapi::api::core::v1::Secret>::namespaced(c.clone(), ns)
    };
    for (who, c) in [
        ("snapshot", &as_snapshot),
        ("gc", &as_gc),
        ("vtbackup-storage", &as_vtbackup),
        ("admission", &as_admission),
        ("node", &as_node),
    ] {
        assert_forbidden(
            &format!("{who}: list Secrets"),
            secrets(c, &vitess.name).list(&ListParams::default()).await,
        );
    }
    let snaps_as = |c: &kube::Client| {
        Api::<DynamicObject>::namespaced_with(
            c.clone(),
            &vitess.name,
            &resource(
                "snapshot.storage.k8s.io",
                "v1",
                "VolumeSnapshot",
                "volumesnapshots",
            ),
        )
    };
    assert_forbidden(
        "snapshot: delete a VolumeSnapshot (retention is the GC's)",
        snaps_as(&as_snapshot)
            .delete(&cut[1], &Default::default())
            .await,
    );
    assert_forbidden(
        "admission: delete a VolumeSnapshot",
        snaps_as(&as_admission)
            .delete(&cut[1], &Default::default())
            .await,
    );
    let pods_as = |c: &kube::Client, ns: &str| {
        Api::<k8s_openapi::api::core::v1::Pod>::namespaced(c.clone(), ns)
    };
    assert_forbidden(
        "node: delete a tablet Pod",
        pods_as(&as_node, &vitess.name)
            .delete(&backup.vtbackup_init_name(), &Default::default())
            .await,
    );
    assert_forbidden(
        "gc: list Pods outside the configured namespaces",
        pods_as(&as_gc, "default")
            .list(&ListParams::default())
            .await,
    );
    assert_forbidden(
        "vtbackup-storage: list Pods outside the configured namespaces",
        pods_as(&as_vtbackup, "default")
            .list(&ListParams::default())
            .await,
    );
    let cluster_leases = Api::<k8s_openapi::api::coordination::v1::Lease>::all(as_snapshot.clone());
    assert_forbidden(
        "snapshot: list Leases of every namespace",
        cluster_leases.list(&ListParams::default()).await,
    );
    for (who, c, group, res, verb) in [
        ("snapshot", &as_snapshot, "", "pods", "delete"),
        (
            "snapshot",
            &as_snapshot,
            "coordination.k8s.io",
            "leases",
            "list",
        ),
        (
            "gc",
            &as_gc,
            "snapshot.storage.k8s.io",
            "volumesnapshots",
            "create",
        ),
        ("gc", &as_gc, "coordination.k8s.io", "leases", "create"),
        ("vtbackup-storage", &as_vtbackup, "", "pods", "create"),
        (
            "vtbackup-storage",
            &as_vtbackup,
            "snapshot.storage.k8s.io",
            "volumesnapshots",
            "list",
        ),
        (
            "admission",
            &as_admission,
            "",
            "persistentvolumeclaims",
            "update",
        ),
        ("admission", &as_admission, "", "pods", "create"),
        ("node", &as_node, "", "pods", "list"),
        ("node", &as_node, "coordination.k8s.io", "leases", "create"),
        (
            "node",
            &as_node,
            "snapshot.storage.k8s.io",
            "volumesnapshots",
            "get",
        ),
    ] {
        assert!(
            !may(c, &vitess.name, group, res, verb).await,
            "{who} may {verb} {res}: outside its rules"
        );
    }
    plugin::plugin_through_kubectl(&kube, &system.name);
    // kubectl vtsnap recover: its Job runs as the pitr-recover account, which may make the
    // recovery's PVC, Pod and snapshot in the shard's namespace, and nothing of a tablet's.
    let pod = plugin::recover_through_kubectl(&kube, &system.name, &vitess.name);
    assert_eq!(pod["serviceAccountName"], account("pitr-recover"));
    assert_eq!(pod["securityContext"]["supplementalGroups"], json!([999]));
    let as_recover = kube
        .as_service_account(&system.name, &account("pitr-recover"))
        .await;
    for (group, res, verb) in [
        ("", "persistentvolumeclaims", "create"),
        ("", "pods", "create"),
        ("", "pods", "delete"),
        ("snapshot.storage.k8s.io", "volumesnapshots", "create"),
    ] {
        assert!(
            may(&as_recover, &vitess.name, group, res, verb).await,
            "pitr-recover may not {verb} {res}"
        );
    }
    for (group, res, verb) in [
        ("", "pods", "patch"),
        ("snapshot.storage.k8s.io", "volumesnapshots", "delete"),
        ("planetscale.com", "vitessclusters", "get"),
    ] {
        assert!(
            !may(&as_recover, &vitess.name, group, res, verb).await,
            "pitr-recover may {verb} {res}: outside its rules"
        );
    }
    schedule::reshard(
        &kube,
        &as_schedule,
        &config,
        &system.name,
        &vitess.name,
        &vtctld,
    )
    .await;
    drop(vitess);
}
