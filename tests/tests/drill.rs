//! Restore drills on real MariaDB (docs/design.md §5.9): a good cold and a good online
//! snapshot pass their drill with the RTO measured; a cold snapshot of a replica whose
//! `orders` tablespace was truncated while its mysqld was down (before the cut) fails its
//! drill, naming that table; the GC then keeps the newest snapshot whose drill passed
//! beside the newest one.
//! Fakes: Kubernetes API, vtctld, mysqlctld, CSI driver. Needs root, Podman and btrfs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use vtsnap_core::config::Config;
use vtsnap_core::naming::TabletUid;
use vtsnap_drill::act;
use vtsnap_drill::decide::verdict::Failure;
use vtsnap_gc::act::GcOptions;
use vtsnap_lab::demo::take_snapshot;
use vtsnap_lab::drill::{damaged_cold_snapshot, drill};
use vtsnap_lab::shard::{DATABASE, Lab, LabOptions};
use vtsnap_lab::timeline::Timeline;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drills_pass_good_snapshots_and_name_the_damaged_table_on_real_mariadb() {
    let timeline = Timeline::new(false);
    let lab = Lab::start(
        LabOptions {
            volume_bytes: 2 << 30,
            seed_rows: 2_000,
            ..LabOptions::default()
        },
        timeline.clone(),
    )
    .await;
    // A second table, so that the damaged one is told apart from a sound one.
    lab.primary()
        .value(&format!(
            "CREATE TABLE {DATABASE}.orders (id INT PRIMARY KEY, note VARCHAR(64)); \
             INSERT INTO {DATABASE}.orders SELECT seq, md5(seq) FROM {DATABASE}.seq_1_to_5000; SELECT 1"
        ))
        .await;
    let cold = take_snapshot(&lab, false).await.snapshot.unwrap();
    let online = take_snapshot(&lab, true).await.snapshot.unwrap();

    let good_cold = drill(&lab, &cold, TabletUid::new(901)).await;
    let v = &good_cold.report.verdict;
    assert!(v.passed, "cold: {v:?}\n{}", timeline.render());
    assert_eq!(
        (v.tables_total, v.tables_checked, v.sampled),
        (2, 2, false),
        "{v:?}"
    );
    assert!(
        good_cold.rto.pvc_bound_ms > 0 && good_cold.rto.mysqld_ready_ms > 0,
        "{:?}",
        good_cold.rto
    );

    let good_online = drill(&lab, &online, TabletUid::new(902)).await;
    assert!(
        good_online.report.verdict.passed,
        "online: {:?}\n{}",
        good_online.report,
        timeline.render()
    );

    // The newest snapshot is of damaged data: its source's tablespace was truncated
    // between the job's stop of mysqld and the cut. Taken last, as its replica keeps the
    // damage; the primary (tablet 1) is never a cold target, so it stays sound.
    let damaged = damaged_cold_snapshot(&lab, DATABASE, "orders").await;
    assert_ne!(lab.tablet_by_alias(&damaged.target).0, 1, "{damaged:?}");
    assert!(
        damaged.mysqld_was_down,
        "{damaged:?}\n{}",
        timeline.render()
    );
    let newest = damaged.snapshot;
    let failing = drill(&lab, &newest, TabletUid::new(903)).await;
    let v = &failing.report.verdict;
    assert!(!v.passed, "{v:?}\n{}", timeline.render());
    assert_eq!(v.failure, Some(Failure::TableCorrupt), "{v:?}");
    let reason = v.reason.as_deref().unwrap();
    assert!(
        reason.starts_with(&format!("table {DATABASE}.orders: ")),
        "{reason}\n{}",
        timeline.render()
    );
    assert!(
        !reason.contains(&format!("{DATABASE}.t:")),
        "the sound table is not named: {reason}"
    );

    // Recorded by vtsnap-drill's own code: the cold and online drills passed, the newest
    // snapshot's failed. Retention keeps one snapshot, and also the newest one whose
    // drill passed.
    for (snapshot, d) in [
        (&cold, &good_cold),
        (&online, &good_online),
        (&newest, &failing),
    ] {
        act::write_record(&lab.cp.client(), lab.cp.namespace(), snapshot, &d.record)
            .await
            .unwrap();
    }
    let cfg = Config::from_yaml(&lab.config("  retention: {maxCount: 1}\n")).unwrap();
    let opts = GcOptions {
        dry_run: false,
        only_cluster: None,
        node_timeout: Duration::from_secs(60),
    };
    let gc = vtsnap_gc::act::run(&cfg, &opts, lab.cp.client()).await;
    assert_eq!(gc.exit_code, 0, "{}", serde_json::to_string(&gc).unwrap());
    let reason_of = |name: &str| {
        gc.run
            .plan
            .keep
            .iter()
            .chain(&gc.run.plan.delete)
            .find(|i| i.name == name)
            .map(|i| i.reason.as_str())
    };
    assert!(
        matches!(reason_of(&newest), Some("newest-covered" | "newest-ready")),
        "{:?}\n{}",
        gc.run.plan,
        timeline.render()
    );
    assert_eq!(
        reason_of(&online),
        Some("newest-drilled"),
        "{:?}",
        gc.run.plan
    );
    assert_eq!(
        reason_of(&cold),
        Some("beyond-max-count"),
        "{:?}",
        gc.run.plan
    );
}
