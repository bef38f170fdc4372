//! vtsnap as its users run it: the chart installed by the real helm, every program a Pod
//! started by the real kubelet from vtsnap's own images (imported into the node's
//! containerd, never pulled), with the chart's ServiceAccounts, RBAC and securityContexts.
//!
//! - The snapshot CronJob fires on its schedule (the real CronJob and Job controllers) and
//!   its Job's Pod takes a cold snapshot through the real CSI stack; the node helper's
//!   DaemonSet Pod stops and holds the tablet's mysqld container in kubelet's cgroup.
//! - `kubectl create job --from` the CronJob: that Job's Pod, killed mid-fence, leaves the
//!   tablet to the node helper, which releases it at the lease's expiry; after a
//!   `helm upgrade` to `mode: online`, the next ad-hoc Job takes an online snapshot.
//! - The API server calls the webhook through its Service (kube-proxy); a new tablet's PVC
//!   is restored from that snapshot and kubelet runs `vtsnap-restore` from its image as the
//!   Pod's init container on the mounted clone.
//! - No program fell back from a watch to polling; each ran as its ServiceAccount, as the
//!   user its securityContext names (read from the host's /proc); the Events are readable.
//!
//! Real Vitess 24 and MySQL 9.7 throughout: etcd, vtctld and VTOrc run as Pods behind
//! Services, every vtsnap program talks to the real vtctld through its Service, and the
//! tablet Pods are vitess-operator's (init containers, probes, volumes, env, labels)
//! running real mysqlctld and vttablet. Nothing here is a fake; vitess-operator itself is
//! not run (its Pods are reproduced, testkit/src/vitess/pods.rs). Runs only on the
//! cluster with a node (`NODE=1`).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "pods/drill.rs"]
mod drill;
#[path = "pods/plugin.rs"]
mod plugin;
mod pods;
#[path = "pods/purge.rs"]
mod purge;
#[path = "pods/recover.rs"]
mod recover;

use std::time::{Duration, Instant};

use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::json;
use vtsnap_core::fence::{ANN_TABLET_ALIAS, ANN_TARGET_POD};
use vtsnap_core::naming::{TabletAlias, TabletUid};
use vtsnap_core::vtctld::TabletType;
use vtsnap_testkit::fake_mysqlctld;
use vtsnap_testkit::helm::Release;
use vtsnap_testkit::operator_objects::{OperatorShard, operator_shard, pvc_template};
use vtsnap_testkit::pod_backend::{PodBackend, PodSqlClient};
use vtsnap_testkit::real_kube::{
    BTRFS_CLASS, RealKube, container_freezer_cgroup, resource, snapshot_ready,
};
use vtsnap_testkit::vitess::BackupRestore;
use vtsnap_testkit::vitess::pods::VitessPods;

use pods::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chart_runs_as_pods_from_a_scheduled_cold_snapshot_to_a_restored_tablet() {
    let kube = RealKube::from_env().await;
    let (node, node_ip) = kube
        .kubelet_node()
        .await
        .expect("no Node is run by a kubelet: start the local cluster with NODE=1 for this test");
    let kubelet = kubelet_dir(&kube);
    let vitess = kube.namespace("pods-vitess").await;
    let system = kube.namespace("pods-system").await;
    let class = SlowClass::create(&kube, &format!("slow-{}", vitess.name), 8000).await;
    let mut story = Story::new();
    story.mark(&format!(
        "node {node} at {node_ip}, kubelet in {}; snapshot class {} cuts in 8 s (slowed on \
         purpose, so that a Job can be killed mid-fence)",
        kubelet.display(),
        class.name
    ));

    // The topology and vtctld as Pods behind Services; the cell and the keyspace.
    let vt = VitessPods::start(&kube, &vitess.name, &tool("kubectl")).await;
    story.mark(&format!(
        "etcd and vtctld Pods Ready; vtctld's Service at {}",
        vt.vtctld_grpc
    ));
    let db = PodBackend::with_client(
        PodSqlClient::VitessMysql,
        &tool("kubectl"),
        kube.kubeconfig(),
    );

    // The tablets as vitess-operator makes them, each a Pod run by kubelet with its PVC
    // mounted: mysqlctld initializes MySQL 9.7, vttablet joins the shard as a replica.
    let operator = OperatorShard {
        namespace: vitess.name.clone(),
        ..operator_shard()
    };
    let mut template = pvc_template("256Mi");
    template["storageClassName"] = json!(BTRFS_CLASS);
    let mut tablets = Vec::new();
    for i in 1..=3 {
        let op = operator.tablet("replica", i);
        let t = start_tablet(
            &kube,
            &kubelet,
            &vt,
            op,
            &template,
            BackupRestore::StartEmpty,
        )
        .await;
        assert_eq!(t.pod["spec"]["nodeName"], json!(node));
        db.insert(&t.op.alias, &vitess.name, &t.op.name);
        tablets.push(t);
    }
    vt.wait_listed(3).await;
    story.mark("tablet Pods Running: mysqlctld initialized MySQL 9.7, vttablets in the topology");
    // The first tablet becomes the primary; VTOrc watches the shard from now on.
    let primary = &tablets[0];
    vt.reparent(&primary.op.alias).await;
    vt.start_vtorc(&kube).await;
    for t in &tablets {
        wait_tablet_ready(&kube, t, "after PlannedReparentShard").await;
    }
    db.query(&primary.op.alias, SEED).await.unwrap();
    for t in &tablets[1..] {
        caught_up(&db, &primary.op.alias, &t.op.alias).await;
    }
    let client = vt.client();

    // The VitessCluster the tablets belong to: the schedule reconciler reads its shards.
    kube.create(operator.unsharded_vitess_cluster(&template))
        .await;
    // helm install: the real images; the schedule reconciler every minute, and the
    // shard's snapshot CronJob it makes due a few minutes later.
    story.mark(
        "PlannedReparentShard, VTOrc Ready; every tablet Pod Ready, replicas caught up by GTID",
    );
    let schedule = once_later();
    let values = chart_values(&kube, (&vitess.name, &vt, &class.name), &schedule, &kubelet);
    let release = Release::install(RELEASE, &system.name, &values, kube.kubeconfig());
    story.mark(&format!(
        "helm install: the snapshot, GC and vtbackup-storage CronJobs at {schedule:?} (UTC)"
    ));

    // The long-running programs: Ready, as their ServiceAccounts and users.
    let node_pod = wait_pods(
        &kube,
        &system.name,
        "app.kubernetes.io/component=node",
        1,
        "node helper",
        pod_ready,
    )
    .await
    .remove(0);
    let webhook = wait_pods(
        &kube,
        &system.name,
        "app.kubernetes.io/component=admission",
        1,
        "webhook",
        pod_ready,
    )
    .await
    .remove(0);
    assert_eq!(
        node_pod["spec"]["serviceAccountName"],
        json!(format!("{FULL}-node"))
    );
    assert_eq!(node_pod["spec"]["hostPID"], json!(true));
    assert_eq!(
        container_process_uid(&node_pod, "node"),
        0,
        "the node helper runs as root"
    );
    assert_eq!(
        webhook["spec"]["serviceAccountName"],
        json!(format!("{FULL}-admission"))
    );
    assert_restricted(&webhook, "admission");
    assert_eq!(container_process_uid(&webhook, "admission"), NON_ROOT);

    // The schedule reconciler's CronJob fires; its Pod makes the shard's snapshot CronJob
    // from the chart's template (no snapshot CronJob is rendered by the chart itself).
    let reconciler = wait_pods(
        &kube,
        &system.name,
        "app.kubernetes.io/component=schedule",
        1,
        "the schedule reconciler's Job",
        |p| matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")),
    )
    .await
    .remove(0);
    let reconciler_name = reconciler["metadata"]["name"].as_str().unwrap().to_owned();
    let reconciler_log = pod_log(&kube, &system.name, &reconciler_name).await;
    assert_eq!(
        reconciler["status"]["phase"], "Succeeded",
        "the schedule reconciler failed; it logged:\n{reconciler_log}"
    );
    assert_eq!(
        reconciler["spec"]["serviceAccountName"],
        json!(format!("{FULL}-schedule"))
    );
    assert_restricted(&reconciler, "schedule");
    // Quiet from here on: the rest of the story needs no other run.
    let cronjobs: Api<DynamicObject> = Api::namespaced_with(
        kube.client(),
        &system.name,
        &resource("batch", "v1", "CronJob", "cronjobs"),
    );
    cronjobs
        .patch(
            &format!("{FULL}-schedule"),
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"suspend": true}})),
        )
        .await
        .unwrap();
    let made = cronjobs
        .get(&format!("{FULL}-snap-example-commerce-x-x"))
        .await
        .unwrap_or_else(|e| {
            panic!(
                "no snapshot CronJob after the reconciler ran ({e}); it logged:\n{reconciler_log}"
            )
        });
    let made = serde_json::to_value(made).unwrap();
    assert_eq!(
        made["spec"]["schedule"],
        json!(schedule),
        "the override, as written"
    );
    assert_eq!(
        made["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "vtsnap-schedule"
    );
    story.mark("the schedule reconciler ran as a Pod and made the shard's snapshot CronJob");

    // The CronJob fires (the real CronJob controller), its Job's Pod takes a cold snapshot.
    kube.wait_for(
        &resource("batch", "v1", "CronJob", "cronjobs"),
        &system.name,
        &format!("{FULL}-snap-example-commerce-x-x"),
        "the snapshot CronJob fired",
        Duration::from_secs(300),
        |v| !v["status"]["lastScheduleTime"].is_null(),
    )
    .await;
    let job_pod = wait_pods(
        &kube,
        &system.name,
        "app.kubernetes.io/component=snapshot",
        1,
        "the snapshot CronJob's Job",
        |p| matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")),
    )
    .await
    .remove(0);
    story.mark("the snapshot CronJob fired; its Job's Pod ended");
    story.program("snapshot", &job_pod, "snapshot");
    let job_name = job_pod["metadata"]["name"].as_str().unwrap().to_owned();
    let job_log = pod_log(&kube, &system.name, &job_name).await;
    assert_eq!(
        job_pod["status"]["phase"], "Succeeded",
        "the snapshot Job's Pod failed; it logged:\n{job_log}"
    );
    assert_eq!(
        job_pod["spec"]["serviceAccountName"],
        json!(format!("{FULL}-snapshot"))
    );
    assert_restricted(&job_pod, "snapshot");
    let exit = &job_pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"];
    assert_eq!(exit, &json!(0), "{job_log}");
    assert_eq!(job_pod["metadata"]["ownerReferences"][0]["kind"], "Job");
    let summary = summary_line(&job_log);
    let snapshot = summary["snapshot"].as_str().unwrap().to_owned();
    let taken = kube
        .wait_for(
            &snapshots(),
            &vitess.name,
            &snapshot,
            "readyToUse",
            LIMIT,
            snapshot_ready,
        )
        .await;
    assert_eq!(
        taken["metadata"]["labels"]["vtsnap.io/mode"], "cold",
        "{taken}"
    );
    // The GC and vtbackup-storage CronJobs fired at the same minute: each Job's Pod ran
    // to the end as its own ServiceAccount.
    let mut job_logs = vec![("the snapshot Job".to_owned(), job_log.clone())];
    for program in ["gc", "vtbackup-storage"] {
        let p = wait_pods(
            &kube,
            &system.name,
            &format!("app.kubernetes.io/component={program}"),
            1,
            program,
            |p| matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")),
        )
        .await
        .remove(0);
        let log = pod_log(&kube, &system.name, p["metadata"]["name"].as_str().unwrap()).await;
        assert_eq!(
            p["status"]["phase"], "Succeeded",
            "the {program} Job's Pod failed:\n{log}"
        );
        assert_eq!(
            p["spec"]["serviceAccountName"],
            json!(format!("{FULL}-{program}"))
        );
        assert_restricted(&p, p["spec"]["containers"][0]["name"].as_str().unwrap());
        story.program(
            program,
            &p,
            p["spec"]["containers"][0]["name"].as_str().unwrap(),
        );
        job_logs.push((format!("the {program} Job"), log));
    }

    // The target's mysqld was stopped and held, and serves again; no primary was touched.
    let source_uid: TabletUid = taken["metadata"]["labels"]["vtsnap.io/tablet-uid"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let source = tablets
        .iter()
        .find(|t| t.op.alias.uid == source_uid)
        .unwrap();
    assert_ne!(
        source.op.alias, primary.op.alias,
        "the primary was snapshotted"
    );
    wait_answers(
        &source.mysql_socket(),
        "the snapshot's source after the fence",
    )
    .await;
    let frozen = std::fs::read_to_string(
        container_freezer_cgroup(&source.pod, "mysqld").join("freezer.state"),
    )
    .unwrap();
    assert_eq!(frozen.trim(), "THAWED");
    let back = client.get_tablet(&source.op.alias).await.unwrap();
    assert_eq!(
        back.r#type,
        TabletType::Replica as i32,
        "the tablet was not put back"
    );
    wait_tablet_ready(&kube, source, "the snapshot's source after the fence").await;
    assert!(
        job_log.contains("held")
            || job_log.contains("SnapshotQuiesced")
            || job_log.contains("quiesced"),
        "the Job's log does not show the hold:\n{job_log}"
    );

    // A new tablet: the API server calls the webhook through its Service; the PVC is
    // restored from the snapshot, kubelet runs vtsnap-restore from its image, and
    // mysqlctld starts MySQL on the clone. Its vttablet has the operator's backup flags
    // (restore, wait for a backup) and an empty backup storage: had it not skipped its
    // restore, it would wait there and never serve.
    let new_op = operator.tablet("replica", 4);
    let start = Instant::now();
    loop {
        let api: Api<kube::api::DynamicObject> = Api::namespaced_with(
            kube.client(),
            &vitess.name,
            &resource("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
        );
        let pvc: kube::api::DynamicObject = serde_json::from_value(new_op.pvc(&template)).unwrap();
        let p = api
            .create(
                &kube::api::PostParams {
                    dry_run: true,
                    field_manager: None,
                },
                &pvc,
            )
            .await
            .unwrap();
        if p.data["spec"]["dataSourceRef"]["name"] == json!(snapshot) {
            break;
        }
        assert!(
            start.elapsed() < LIMIT,
            "the webhook never offered {snapshot}: {}",
            p.data["spec"]
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    story.mark(&format!(
        "cold snapshot {snapshot} ready; the webhook offers it through its Service"
    ));
    let provisioning = Instant::now();
    let restored = start_tablet(
        &kube,
        &kubelet,
        &vt,
        new_op,
        &template,
        BackupRestore::WaitForBackup,
    )
    .await;
    let provisioning_ms = provisioning.elapsed().as_millis();
    story.program("restore", &restored.pod, "vtsnap-restore");
    story.mark(
        "the new tablet's mysqld answers: vtsnap-restore ran, mysqlctld started MySQL on the clone",
    );
    let pod = &restored.pod;
    let inits: Vec<&str> = pod["spec"]["initContainers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        inits,
        ["init-vt-root", "init-mysql-socket", "vtsnap-restore"]
    );
    assert_eq!(
        pod["spec"]["initContainers"][2]["image"],
        json!("localhost/vtsnap/vtsnap-restore:0.1.0")
    );
    let init = &pod["status"]["initContainerStatuses"][2];
    assert_eq!(init["state"]["terminated"]["exitCode"], json!(0), "{init}");
    let pvc = kube
        .get(
            &resource("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
            &vitess.name,
            &restored.op.name,
        )
        .await
        .unwrap();
    assert_eq!(
        pvc["spec"]["dataSourceRef"]["name"],
        json!(snapshot),
        "{pvc}"
    );
    let pv = pvc["spec"]["volumeName"].as_str().unwrap();
    let root = kube.volume_dir(pv).await.join("vtdataroot");
    assert!(root.join(restored.op.alias.uid.tablet_dir_name()).is_dir());
    assert!(!root.join(source_uid.tablet_dir_name()).exists());
    // vttablet skipped its restore and serves as a replica (VTOrc points it at the
    // primary); it catches up by GTID with what the primary wrote since the cut, and its
    // table's checksum is the primary's. MySQL made it a new server_uuid; its server_id
    // is its own.
    db.insert(&restored.op.alias, &vitess.name, &restored.op.name);
    db.query(&primary.op.alias, MORE_ROWS).await.unwrap();
    let catch_up = Instant::now();
    wait_tablet_ready(&kube, &restored, "the restored tablet").await;
    caught_up(&db, &primary.op.alias, &restored.op.alias).await;
    let catch_up_ms = catch_up.elapsed().as_millis();
    let as_replica = client.get_tablet(&restored.op.alias).await.unwrap();
    assert_eq!(as_replica.r#type, TabletType::Replica as i32);
    let ids = |a| {
        let db = db.clone();
        async move {
            db.query(a, "SELECT @@server_uuid, @@server_id")
                .await
                .unwrap()
        }
    };
    let (source_ids, restored_ids) = (ids(&source.op.alias).await, ids(&restored.op.alias).await);
    assert_ne!(source_ids[0][0], restored_ids[0][0], "the same server_uuid");
    assert_ne!(source_ids[0][1], restored_ids[0][1], "the same server_id");
    let sum = |a| {
        let db = db.clone();
        async move { checksum(&db, a).await }
    };
    let (want, got) = (sum(&primary.op.alias).await, sum(&restored.op.alias).await);
    assert_eq!(
        got, want,
        "the restored tablet's checksum differs from the primary's"
    );
    story.mark(
        "vttablet skipped its restore; the new tablet Ready, caught up by GTID; checksums match",
    );

    // An ad-hoc snapshot, its Job's Pod killed while the tablet is held: the node helper
    // releases it when the fence lease expires, and it serves again.
    let cronjob = kubectl(
        &kube,
        &[
            "-n",
            &system.name,
            "get",
            "cronjob",
            "-l",
            "app.kubernetes.io/component=snapshot",
            "-o",
            "name",
        ],
    );
    let cronjob = cronjob.trim();
    kubectl(
        &kube,
        &[
            "-n",
            &system.name,
            "create",
            "job",
            &format!("--from={cronjob}"),
            "adhoc",
        ],
    );
    let lease = wait_lease_state(&kube, &vitess.name, "held").await;
    let target = annotation(&lease, ANN_TARGET_POD).unwrap().to_owned();
    let alias: TabletAlias = annotation(&lease, ANN_TABLET_ALIAS)
        .unwrap()
        .parse()
        .unwrap();
    let held = tablets
        .iter()
        .find(|t| t.op.name == target)
        .expect("the target is one of the tablets");
    let freezer = container_freezer_cgroup(&held.pod, "mysqld").join("freezer.state");
    assert_eq!(std::fs::read_to_string(&freezer).unwrap().trim(), "FROZEN");
    assert!(
        !fake_mysqlctld::answers(&held.mysql_socket()).await,
        "mysqld answers while held"
    );
    let restarts_before = (
        held.restarts(&kube, "mysqld").await,
        held.restarts(&kube, "vttablet").await,
    );
    let adhoc = wait_pods(
        &kube,
        &system.name,
        "job-name=adhoc",
        1,
        "the ad-hoc Job",
        |p| p["status"]["phase"] == "Running",
    )
    .await
    .remove(0);
    story.mark(&format!("ad-hoc Job: {target} held; its Pod force-deleted"));
    let killed_at = Instant::now();
    kubectl(
        &kube,
        &[
            "-n",
            &system.name,
            "delete",
            "pod",
            adhoc["metadata"]["name"].as_str().unwrap(),
            "--grace-period=0",
            "--force",
        ],
    );
    // What kubelet does with the held tablet Pod: the mysqld container's readiness probe
    // (TCP 3306) fails and the Pod leaves its Service's endpoints; there is no liveness
    // probe on mysqld, and vttablet's (/debug/status) still passes: nothing is killed.
    let not_ready = kube
        .wait_for(
            &pods(),
            &vitess.name,
            &held.op.name,
            "NotReady while held",
            LIMIT,
            |p| !pod_ready(p),
        )
        .await;
    assert_eq!(
        std::fs::read_to_string(&freezer).unwrap().trim(),
        "FROZEN",
        "released before kubelet saw it: {}",
        not_ready["status"]
    );
    let lease_name = lease["metadata"]["name"].as_str().unwrap();
    let duration = lease["spec"]["leaseDurationSeconds"].as_u64().unwrap();
    let bound = Duration::from_secs(duration) + Duration::from_secs(30);
    kube.wait_gone(
        &resource("coordination.k8s.io", "v1", "Lease", "leases"),
        &vitess.name,
        lease_name,
        bound,
    )
    .await;
    wait_answers(
        &held.mysql_socket(),
        "the held tablet after its Job was killed",
    )
    .await;
    let released_ms = killed_at.elapsed().as_millis();
    story.mark("the node helper released the tablet at the lease's expiry; mysqld answers");
    assert!(
        killed_at.elapsed() < bound,
        "the tablet served again {:?} after the kill, over the lease bound {bound:?}",
        killed_at.elapsed()
    );
    assert_eq!(std::fs::read_to_string(&freezer).unwrap().trim(), "THAWED");
    assert_eq!(
        client.get_tablet(&alias).await.unwrap().r#type,
        TabletType::Replica as i32
    );
    wait_tablet_ready(&kube, held, "the held tablet after its release").await;
    assert_eq!(
        (
            held.restarts(&kube, "mysqld").await,
            held.restarts(&kube, "vttablet").await
        ),
        restarts_before,
        "kubelet restarted a container of the held tablet"
    );
    // and its replication was started again: it catches up with a new write
    db.query(&primary.op.alias, MORE_ROWS).await.unwrap();
    caught_up(&db, &primary.op.alias, &alias).await;

    // The logs of the webhook and node helper Pods, before the upgrade rolls them (their
    // config's checksum changes).
    let node_log = pod_log(
        &kube,
        &system.name,
        node_pod["metadata"]["name"].as_str().unwrap(),
    )
    .await;
    let webhook_log = pod_log(
        &kube,
        &system.name,
        webhook["metadata"]["name"].as_str().unwrap(),
    )
    .await;

    // An online snapshot, ad hoc: the same CronJob after `helm upgrade` to mode online.
    let mut online_values = values.clone();
    online_values["config"]["clusters"][0]["snapshot"]["mode"] = json!("online");
    release.upgrade(&online_values);
    // an online snapshot never drains a tablet: vtctld's tablet types, read while it runs
    let drain_watch = DrainWatch::start(vt.client());
    kubectl(
        &kube,
        &[
            "-n",
            &system.name,
            "create",
            "job",
            &format!("--from={cronjob}"),
            "adhoc-online",
        ],
    );
    let online_pod = wait_pods(
        &kube,
        &system.name,
        "job-name=adhoc-online",
        1,
        "the online ad-hoc Job",
        |p| matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")),
    )
    .await
    .remove(0);
    let online_log = pod_log(
        &kube,
        &system.name,
        online_pod["metadata"]["name"].as_str().unwrap(),
    )
    .await;
    assert_eq!(
        online_pod["status"]["phase"], "Succeeded",
        "the online Job's Pod failed; it logged:\n{online_log}"
    );
    let online_summary = summary_line(&online_log);
    let online = online_summary["snapshot"].as_str().unwrap().to_owned();
    let online_taken = kube
        .wait_for(
            &snapshots(),
            &vitess.name,
            &online,
            "readyToUse",
            LIMIT,
            snapshot_ready,
        )
        .await;
    assert_eq!(
        online_taken["metadata"]["labels"]["vtsnap.io/mode"], "online",
        "{online_taken}"
    );
    let drained = drain_watch.stop().await;
    assert!(
        drained.is_empty(),
        "the online Job drained a tablet: {drained:?}"
    );
    story.program("snapshot (online, ad hoc)", &online_pod, "snapshot");
    story.mark(&format!(
        "after helm upgrade to online: ad-hoc Job took {online}, ready"
    ));
    job_logs.push(("the online ad-hoc Job".to_owned(), online_log));

    // Each snapshot proves it restores: a drill Pod per snapshot, run by kubelet.
    let drills = drill::drill_each(
        &kube,
        (&vitess.name, &system.name),
        &vt.vtctld_grpc,
        &[&snapshot, &online],
    )
    .await;
    let rto: Vec<u64> = drills.iter().map(|d| d.rto_ms.unwrap_or(0)).collect();
    story.mark(&format!(
        "restore drills passed as Pods: {snapshot} (RTO {} ms), {online} (RTO {} ms)",
        rto[0], rto[1]
    ));

    // A table dropped by mistake comes back: Vitess's incremental backup on a replica,
    // then recovery Pods from the newest snapshot, to a GTID set and to a time.
    let replicas: Vec<&TabletAlias> = tablets[1..]
        .iter()
        .map(|t| &t.op.alias)
        .chain([&restored.op.alias])
        .collect();
    let recovered = recover::recover_a_dropped_table(
        &kube,
        (&vitess.name, &system.name),
        &vt,
        &db,
        &primary.op.alias,
        &replicas,
    )
    .await;
    story.mark(&recovered.story());

    // Nothing fell back from a watch to polling; the Events are on the server.
    for (what, log) in &job_logs {
        assert_no_fallback(what, log);
    }
    assert_no_fallback("the webhook", &webhook_log);
    assert_no_fallback("the node helper", &node_log);
    assert_events(
        &kube,
        &vitess.name,
        &snapshot,
        &[
            "SnapshotCreated",
            "SnapshotCut",
            "SnapshotReady",
            "DrillPassed",
        ],
    )
    .await;
    story.program("admission", &webhook, "admission");
    story.program("node", &node_pod, "node");

    // kubectl vtsnap on this install; it breaks the install on purpose at its end.
    let adhoc = plugin::plugin_checks(
        &kube,
        &system.name,
        &vitess.name,
        (&restored.op.name, &snapshot),
        plugin::Mysql {
            db: &db,
            primary: &primary.op.alias,
            replica: &tablets[1].op.alias,
        },
    )
    .await;
    story.mark(&format!(
        "kubectl vtsnap: doctor passed, status protected, backup --online --wait took {adhoc}, each seeded fault named and put back"
    ));

    // The primary purges its binlogs past every snapshot: a tablet restored now hits
    // error 1236, and the GC Job re-provisions it.
    let gc_cronjob = format!("{FULL}-gc");
    let purged = purge::purge_then_reprovision(
        &kube,
        &kubelet,
        &vt,
        &db,
        &operator,
        &template,
        primary,
        (&system.name, &gc_cronjob),
    )
    .await;
    story.mark(&format!(
        "PURGE BINARY LOGS on the primary: a tablet restored from {} hit \"{}\"; the GC Job marked {} snapshots and re-provisioned it",
        purged.snapshot, purged.io_error, purged.marked_unusable
    ));
    story.finish(json!({
        "checksum_match": got == want,
        "snapshot": snapshot,
        "source_tablet": source.op.alias.to_string(),
        "snapshot_job": summary,
        "provisioning_ms": provisioning_ms,
        "catch_up_ms": catch_up_ms,
        "killed_job_released_ms": released_ms,
        "reprovisioned_after_purge": {"snapshot": purged.snapshot, "io_error": purged.io_error},
        "online_snapshot": online,
        "drills": drills.iter().map(|d| json!({"snapshot": d.snapshot, "drill": d.drill})).collect::<Vec<_>>(),
        "pitr": {"to_gtid": recover::summary(&recovered.to_gtid), "to_time": recover::summary_of_line(&recovered.to_time)},
        "kube_version": kube.version().await,
    }));
}
