//! Catch-up coverage on real MariaDB (docs/design.md §5.7): a cold snapshot is covered
//! while the primary keeps every binlog after it; once the primary has written, rotated
//! and purged its binlogs past the snapshot, `vtsnap-gc` reads that from the primary itself
//! (`SHOW BINARY LOGS`, `BINLOG_GTID_POS`, through the fake vtctld's real-MariaDB backend)
//! and marks the snapshot unusable, so that the webhook never offers it. A replica forced
//! onto it by hand cannot catch up (error 1236 from the real primary); the GC
//! re-provisions that tablet once, and it comes back from the regular backup.
//! Fakes: Kubernetes API, vtctld, mysqlctld, CSI driver, and (tests/src/reprovision.rs)
//! the operator and vttablet's restore. Needs root, Podman and btrfs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use vtsnap_core::config::Config;
use vtsnap_core::snapshot::ANN_UNUSABLE;
use vtsnap_core::snapshot::choice::Rejection;
use vtsnap_gc::act::{GcOptions, run};
use vtsnap_gc::decide::CoverageState;
use vtsnap_gc::report::GcReport;
use vtsnap_lab::demo::take_snapshot;
use vtsnap_lab::reprovision::{force_onto, offered, operator_recreates};
use vtsnap_lab::shard::{
    DATABASE, LEFTOVER_LIMIT, Lab, LabOptions, drop_and_check_nothing_left, until,
};
use vtsnap_lab::timeline::Timeline;

async fn gc(lab: &Lab) -> GcReport {
    let cfg = Config::from_yaml(&lab.config("")).unwrap();
    let opts = GcOptions {
        dry_run: false,
        only_cluster: None,
        node_timeout: Duration::from_secs(60),
    };
    let r = run(&cfg, &opts, lab.cp.client()).await;
    assert_eq!(r.exit_code, 0, "{}", serde_json::to_string(&r).unwrap());
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_the_primary_purged_past_is_marked_unusable_on_real_mariadb() {
    let timeline = Timeline::new(false);
    let lab = Lab::start(
        LabOptions {
            volume_bytes: 2 << 30,
            seed_rows: 1_000,
            ..LabOptions::default()
        },
        timeline.clone(),
    )
    .await;
    let taken = take_snapshot(&lab, false).await;
    let name = taken.snapshot.clone().unwrap();

    // Covered: the primary still has every binlog since the cut.
    let r = gc(&lab).await;
    let CoverageState::Known {
        newest_covered,
        not_covered,
        ..
    } = &r.run.plan.coverage[0].state
    else {
        panic!(
            "{:?}\ntimeline:\n{}",
            r.run.plan.coverage,
            timeline.render()
        )
    };
    assert_eq!(newest_covered.as_deref(), Some(name.as_str()));
    assert!(not_covered.is_empty() && r.run.marked_unusable.is_empty());
    assert_eq!(r.run.plan.keep[0].reason.as_str(), "newest-covered");
    // Restore injection's rule offers it.
    assert_eq!(
        offered(&lab).await.map_err(|r| format!("{r:?}")),
        Ok(name.clone())
    );

    // The primary writes, rotates its binlog and purges every binlog before the new one.
    let primary = lab.primary();
    primary
        .query(&format!(
            "INSERT INTO {DATABASE}.t (v, pad) VALUES (424242, 'after the cut')"
        ))
        .await;
    primary.query("FLUSH BINARY LOGS").await;
    let logs = primary.query("SHOW BINARY LOGS").await;
    let newest = logs.last().unwrap()[0].clone();
    // A binlog a replica's dump thread still reads is not purged: purge again until the
    // replicas have moved on to the new one and only it is left.
    until(
        "the primary has purged every binlog before the new one",
        Duration::from_secs(60),
        || {
            let primary = primary.clone();
            let newest = newest.clone();
            async move {
                primary
                    .query(&format!("PURGE BINARY LOGS TO '{newest}'"))
                    .await;
                primary.query("SHOW BINARY LOGS").await.len() == 1
            }
        },
    )
    .await;
    // the lab owns its servers: a handle kept past here would outlive it
    drop(primary);

    let r = gc(&lab).await;
    assert_eq!(r.run.marked_unusable.len(), 1, "{:?}", r.run.plan.coverage);
    assert!(r.run.marked_unusable[0].ends_with(&format!("/{name}")));
    let CoverageState::Known {
        newest_covered,
        not_covered,
        ..
    } = &r.run.plan.coverage[0].state
    else {
        panic!("{:?}", r.run.plan.coverage)
    };
    assert_eq!(newest_covered, &None);
    assert_eq!(not_covered, std::slice::from_ref(&name));
    let (ns, _) = r.run.marked_unusable[0].split_once('/').unwrap();
    let obj = vtsnap_core::reconcile::apis::volume_snapshots(&lab.cp.client(), ns)
        .get(&name)
        .await
        .unwrap();
    let why = obj.metadata.annotations.unwrap_or_default()[ANN_UNUSABLE].clone();
    assert!(why.contains("purged"), "{why}");
    // Restore injection's rule passes over it now, for that reason.
    let passed_over = offered(&lab).await.unwrap_err();
    assert!(
        passed_over
            .iter()
            .any(|(n, r)| n == &name && matches!(r, Rejection::MarkedUnusable { .. })),
        "{passed_over:?}"
    );

    // A person forces a new tablet's PVC onto it anyway: its replica stops with 1236.
    let forced = force_onto(&lab, &name).await;
    let tablet = forced.tablet.clone();
    assert!(forced.io_error.contains("1236"), "{}", forced.io_error);
    let r = gc(&lab).await;
    let pvc_key = format!("{ns}/{}", tablet.name);
    assert_eq!(
        r.run.reprovisioned,
        std::slice::from_ref(&pvc_key),
        "{:?}",
        r.run.plan.restores
    );
    assert!(
        r.run.marked_unusable.is_empty(),
        "already unusable: not marked twice"
    );
    let pods: Api<Pod> = Api::namespaced(lab.cp.client(), ns);
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(lab.cp.client(), ns);
    assert!(pods.get_opt(&tablet.name).await.unwrap().is_none());
    assert!(pvcs.get_opt(&tablet.name).await.unwrap().is_none());

    // The operator makes both again; the webhook offers nothing, so the tablet restores
    // the regular backup and catches up: a working tablet, without a person.
    assert!(offered(&lab).await.is_err());
    let db = operator_recreates(&lab, forced).await;
    let rows = db
        .value(&format!(
            "SELECT COUNT(*) FROM {DATABASE}.t WHERE v = 424242"
        ))
        .await;
    assert_eq!(rows, "1", "the write after the cut reached the new tablet");
    let restored_from = pvcs.get(&tablet.name).await.unwrap().metadata.annotations;
    assert!(
        restored_from.unwrap_or_default().is_empty(),
        "made without a snapshot"
    );

    // Once: the next run finds nothing of it to do.
    let r = gc(&lab).await;
    assert!(
        r.run.reprovisioned.is_empty() && r.run.plan.restores.reprovision.is_empty(),
        "{:?}",
        r.run.plan.restores
    );
    // One Event trail, on the snapshot: marked once, its tablet re-provisioned once (read
    // as events.k8s.io Events, which the in-memory API serves and the real one too).
    let events: Vec<Event> = Api::<Event>::namespaced(lab.cp.client(), ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let about = |reason: &str, object: &str| -> Vec<String> {
        events
            .iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(object))
            .map(|e| e.note.clone().unwrap_or_default())
            .collect()
    };
    let marked = about("SnapshotUnusable", &name);
    assert_eq!(marked.len(), 1, "{marked:?}");
    let reprovisioned = about("TabletReprovisioned", &name);
    assert_eq!(reprovisioned.len(), 1, "{reprovisioned:?}");
    assert!(reprovisioned[0].contains("1236"), "{reprovisioned:?}");
    drop(db);

    drop_and_check_nothing_left(lab, LEFTOVER_LIMIT)
        .await
        .unwrap_or_else(|left| panic!("the lab left behind:\n  {}", left.join("\n  ")));
}
