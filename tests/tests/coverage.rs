//! Catch-up coverage on real MariaDB (docs/design.md §5.7): a cold snapshot is covered
//! while the primary keeps every binlog after it; once the primary has written, rotated
//! and purged its binlogs past the snapshot, `vtsnap-gc` reads that from the primary itself
//! (`SHOW BINARY LOGS`, `BINLOG_GTID_POS`, through the fake vtctld's real-MariaDB backend)
//! and marks the snapshot unusable, so that the webhook never offers it.
//! Fakes: Kubernetes API, vtctld, mysqlctld, CSI driver. Needs root, Podman and btrfs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use vtsnap_core::config::Config;
use vtsnap_core::snapshot::ANN_UNUSABLE;
use vtsnap_gc::act::{GcOptions, run};
use vtsnap_gc::decide::CoverageState;
use vtsnap_gc::report::GcReport;
use vtsnap_lab::demo::take_snapshot;
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
    let obj = vtsnap_core::snapshot::api(&lab.cp.client(), ns)
        .get(&name)
        .await
        .unwrap();
    let why = obj.metadata.annotations.unwrap_or_default()[ANN_UNUSABLE].clone();
    assert!(why.contains("purged"), "{why}");

    drop_and_check_nothing_left(lab, LEFTOVER_LIMIT)
        .await
        .unwrap_or_else(|left| panic!("the lab left behind:\n  {}", left.join("\n  ")));
}
