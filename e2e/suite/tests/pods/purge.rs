//! Catch-up coverage and re-provisioning on the real primary (docs/design.md §5.7), for
//! `real_pods.rs`: the primary purges its binlogs past every snapshot; a tablet the webhook
//! restores from one of them cannot catch up (MySQL's error 1236, read by the GC from the
//! real vtctld's `GetFullStatus`) and is not Ready; the GC Job marks the snapshots and
//! deletes that tablet's Pod and PVC; made again (the operator's part, played by the test)
//! the PVC is offered no snapshot.

use std::time::{Duration, Instant};

use kube::Api;
use kube::api::{DynamicObject, PostParams};
use serde_json::{Value, json};
use vtsnap_core::snapshot::{ANN_REPROVISIONED_PREFIX, ANN_UNUSABLE};
use vtsnap_testkit::operator_objects::OperatorShard;
use vtsnap_testkit::pod_backend::PodBackend;
use vtsnap_testkit::real_kube::{RealKube, pod_ready, resource};
use vtsnap_testkit::vitess::BackupRestore;
use vtsnap_testkit::vitess::pods::VitessPods;

use super::{
    LIMIT, MORE_ROWS, Tablet, json_line_with, kubectl, pod_log, pods, snapshots, start_tablet,
    wait_pods,
};

/// What the story saw, for the closing line.
pub struct Reprovisioned {
    pub snapshot: String,
    pub io_error: String,
    pub marked_unusable: usize,
}

fn pvcs() -> kube::core::ApiResource {
    resource("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims")
}

/// The PVC a new tablet would get now (a dry run through the webhook).
async fn offered(kube: &RealKube, ns: &str, pvc: &Value) -> Value {
    let api: Api<DynamicObject> = Api::namespaced_with(kube.client(), ns, &pvcs());
    let pvc: DynamicObject = serde_json::from_value(pvc.clone()).unwrap();
    let made = api
        .create(
            &PostParams {
                dry_run: true,
                field_manager: None,
            },
            &pvc,
        )
        .await
        .unwrap();
    serde_json::to_value(made).unwrap()
}

#[allow(clippy::too_many_arguments)] // the story's cast, each needed once
pub async fn purge_then_reprovision(
    kube: &RealKube,
    kubelet: &std::path::Path,
    vt: &VitessPods,
    db: &PodBackend,
    operator: &OperatorShard,
    template: &Value,
    primary: &Tablet,
    (system_ns, gc_cronjob): (&str, &str),
) -> Reprovisioned {
    let ns = &operator.namespace;
    // Writes after every snapshot, then the primary drops every binlog but its newest.
    db.query(&primary.op.alias, MORE_ROWS).await.unwrap();
    db.query(&primary.op.alias, "FLUSH BINARY LOGS")
        .await
        .unwrap();
    let newest = db.value(&primary.op.alias, "SHOW BINARY LOG STATUS").await;
    db.query(
        &primary.op.alias,
        &format!("PURGE BINARY LOGS TO '{newest}'"),
    )
    .await
    .unwrap();
    let purged = db
        .value(&primary.op.alias, "SELECT @@global.gtid_purged")
        .await;
    assert!(!purged.is_empty(), "nothing purged");

    // A new tablet now: the webhook still offers a snapshot (the GC has not run since).
    let op = operator.tablet("replica", 5);
    let restored_from = offered(kube, ns, &op.pvc(template)).await["spec"]["dataSourceRef"]["name"]
        .as_str()
        .unwrap_or_else(|| panic!("the webhook offered no snapshot before the GC ran"))
        .to_owned();
    let t = start_tablet(
        kube,
        kubelet,
        vt,
        op,
        template,
        BackupRestore::WaitForBackup,
    )
    .await;
    // VTOrc points it at the primary, which no longer has what it needs: error 1236, as
    // the real vtctld reports it (what the GC reads); its vttablet is not Ready.
    let client = vt.client();
    let start = Instant::now();
    let io_error = loop {
        let status = client.get_full_status(&t.op.alias).await;
        let io = status
            .as_ref()
            .ok()
            .and_then(|s| s.replication_status.as_ref())
            .map(|r| r.last_io_error.clone())
            .unwrap_or_default();
        if io.contains("1236") {
            break io;
        }
        assert!(
            start.elapsed() < LIMIT,
            "{}: no error 1236 within {LIMIT:?}: {status:?}",
            t.op.alias
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let pod = kube.get(&pods(), ns, &t.op.name).await.unwrap();
    assert!(!pod_ready(&pod), "a tablet that cannot catch up is Ready");

    // The GC, run now from its CronJob: the snapshots purged past are marked, the tablet's
    // Pod and PVC deleted.
    kubectl(
        kube,
        &[
            "-n",
            system_ns,
            "create",
            "job",
            &format!("--from=cronjob/{gc_cronjob}"),
            "gc-after-purge",
        ],
    );
    let gc = wait_pods(
        kube,
        system_ns,
        "job-name=gc-after-purge",
        1,
        "the GC Job after the purge",
        |p| matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")),
    )
    .await
    .remove(0);
    let log = pod_log(kube, system_ns, gc["metadata"]["name"].as_str().unwrap()).await;
    assert_eq!(
        gc["status"]["phase"], "Succeeded",
        "the GC Job failed:\n{log}"
    );
    let line = json_line_with(&log, "reprovisioned");
    assert_eq!(
        line["reprovisioned"],
        json!([format!("{ns}/{}", t.op.name)]),
        "{line}"
    );
    kube.wait_gone(&pods(), ns, &t.op.name, LIMIT).await;
    kube.wait_gone(&pvcs(), ns, &t.op.name, LIMIT).await;
    let snap = kube.get(&snapshots(), ns, &restored_from).await.unwrap();
    let anns = &snap["metadata"]["annotations"];
    assert!(anns.get(ANN_UNUSABLE).is_some(), "{anns}");
    let key = format!("{ANN_REPROVISIONED_PREFIX}{}", t.op.alias.uid.get());
    assert!(anns.get(&key).is_some(), "no {key}: {anns}");
    let marked_unusable = kube
        .list(&snapshots(), ns)
        .await
        .iter()
        .filter(|s| s["metadata"]["annotations"].get(ANN_UNUSABLE).is_some())
        .count();

    // The operator makes the PVC again: no snapshot is offered now.
    let again = offered(kube, ns, &t.op.pvc(template)).await;
    assert!(
        again["spec"].get("dataSourceRef").is_none(),
        "a purged-past snapshot is still offered: {}",
        again["spec"]
    );
    Reprovisioned {
        snapshot: restored_from,
        io_error,
        marked_unusable,
    }
}
