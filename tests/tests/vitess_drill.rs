//! The restore drill fails a damaged snapshot on MySQL 9.7 and passes the same snapshot
//! undamaged. A cold snapshot of the shard is taken by the real `vtsnap-snapshot run`, as
//! the demo takes it; two drills restore it into two PVC clones (`vtsnap-restore`, mysqld
//! on the restored `my.cnf` with no network and no grant tables, the real checker
//! `vtsnap_drill::check` on its socket). In one clone, before its mysqld starts, the
//! tablespace of `vt_commerce.t` is truncated to its first 16 KiB page (the damage the
//! MariaDB drill test does to `orders`); that drill must fail, the other must pass.
//!
//! Unlike MariaDB, which starts and reports the table corrupt, MySQL 9.7 does not come up
//! on the damaged clone: InnoDB asserts the first time it opens a tablespace file shorter
//! than its minimum ("The size of tablespace file ./vt_commerce/t.ibd is only 16384, should
//! be at least 98304!") and mysqld aborts. On a cold snapshot that is at startup, while
//! the buffer pool is loaded from the `ib_buffer_pool` its clean shutdown dumped (which
//! lists pages of `t`), usually before the server answers on its socket: the verdict is
//! `Failure::NotReady`. When the checker gets in first (a busy CPU delays the reload), the
//! abort comes in its `CHECK TABLE vt_commerce.t` and the verdict names the table. The
//! drill is recorded as failed either way.
//!
//! Real: Vitess 24 (etcd, vtctld, VTOrc, mysqlctld, vttablet), MySQL 9.7 in containers of
//! the Vitess image, btrfs snapshots and clones, vtsnap's node helper, snapshot, restore
//! and checker code. Fake: the in-memory Kubernetes API and CSI driver.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use vtsnap_core::config::Config;
use vtsnap_core::naming::TabletUid;
use vtsnap_core::shard::ShardName;
use vtsnap_core::snapshot::DrillResult;
use vtsnap_drill::decide::verdict::Failure;
use vtsnap_lab::demo::run_options;
use vtsnap_lab::timeline::Timeline;
use vtsnap_lab::vitess_demo::{drill, drill_with};
use vtsnap_lab::vitess_lab::{VitessLab, until};
use vtsnap_testkit::vitess::DATABASE;

/// One InnoDB page (the default `innodb_page_size`).
const PAGE: u64 = 16 * 1024;

/// The tablespace file of `vt_commerce.t` under a tablet directory.
fn tablespace(tablet_dir: &Path) -> PathBuf {
    tablet_dir.join("data").join(DATABASE).join("t.ibd")
}

#[tokio::test]
async fn drill_on_mysql_fails_a_truncated_tablespace_and_passes_the_same_snapshot_whole() {
    let lab = VitessLab::start(Timeline::new(false)).await;
    let timeline = lab.timeline.clone();

    // Rows enough for the table to span many pages, on every tablet before the cut.
    let primary = lab.shard.primary();
    primary
        .must_sql(&format!(
            "SET SESSION cte_max_recursion_depth = 3000; \
             INSERT INTO {DATABASE}.t (v) \
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000) \
             SELECT REPEAT('x', 180) FROM n"
        ))
        .await;
    let written = primary.gtid_executed().await;
    for t in &lab.shard.tablets {
        until(&format!("{} has the primary's rows", t.alias), async || {
            t.gtid_executed().await == written
        })
        .await;
    }
    timeline.mark("seed: 2000 rows in vt_commerce.t, on every tablet");

    // A cold snapshot through the real `vtsnap-snapshot run`, as the demo takes it.
    let cfg = Config::from_yaml(&lab.config("")).unwrap();
    let s = vtsnap_snapshot::run::run(
        &cfg,
        &ShardName::new("example", "commerce", "-"),
        &run_options(),
        lab.cp.client(),
    )
    .await;
    assert_eq!(
        s.exit_code,
        0,
        "the cold snapshot failed: {}\n{}",
        serde_json::to_string(&s).unwrap_or_default(),
        timeline.render()
    );
    let snapshot = s.snapshot.clone().unwrap();
    timeline.mark(format!(
        "snapshot: {snapshot} of {} (cold)",
        s.target.as_deref().unwrap_or("?")
    ));

    // The damaged drill: its clone's tablespace cut to one page before its mysqld starts.
    let mut damaged: Option<(PathBuf, u64)> = None;
    let (bad, bad_record) =
        drill_with(&lab, &snapshot, TabletUid::new(999_999_981), |tablet_dir| {
            let file = tablespace(tablet_dir);
            let was = std::fs::metadata(&file)
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
                .len();
            std::fs::OpenOptions::new()
                .write(true)
                .open(&file)
                .and_then(|f| f.set_len(PAGE))
                .unwrap_or_else(|e| panic!("truncating {}: {e}", file.display()));
            timeline.mark(format!(
                "damage: {} truncated from {was} bytes to its first page, mysqld not started",
                file.display()
            ));
            damaged = Some((file, was));
        })
        .await;
    let (file, was) = damaged.expect("the drill never offered its clone to damage");
    let error_log = std::fs::read_to_string(
        file.parent()
            .and_then(Path::parent)
            .and_then(Path::parent)
            .unwrap()
            .join("error.log"),
    )
    .unwrap_or_default();
    let lines: Vec<&str> = error_log.lines().collect();
    let context = format!(
        "{bad:?}\n{}\n--- the damaged drill's mysqld error log, last lines:\n{}",
        timeline.render(),
        lines[lines.len().saturating_sub(40)..].join("\n")
    );
    assert!(
        was > 4 * PAGE,
        "the table was too small to damage: {was} bytes"
    );
    assert_eq!(std::fs::metadata(&file).unwrap().len(), PAGE, "{context}");

    // The typed outcome: failed, because MySQL 9.7 aborts the first time it reads the
    // damaged tablespace. When that is at startup (the buffer pool reloaded from
    // `ib_buffer_pool` reaches `t` first), mysqld exits before it answers: `not-ready`,
    // and the lab's drill ends at the container's exit, as the drill Job does. When the
    // checker answers first (a busy CPU delays the reload), its `CHECK TABLE` is what
    // reads `t`, and the verdict names the table. Either way, never a pass.
    let v = &bad.verdict;
    assert!(!v.passed, "the damaged clone passed its drill: {context}");
    let reason = v.reason.as_deref().unwrap_or("");
    match v.failure {
        Some(Failure::NotReady) => {
            assert!(
                reason.contains("mysqld exited before the check was done"),
                "{context}"
            );
            assert_eq!(bad.mysqld_ready_ms, None, "{context}");
            assert_eq!((v.tables_total, v.tables_checked), (0, 0), "{context}");
        }
        Some(Failure::TableCorrupt) => {
            assert!(reason.contains(&format!("{DATABASE}.t")), "{context}");
            assert!(bad.mysqld_ready_ms.is_some(), "{context}");
        }
        other => panic!("the damaged clone failed as {other:?}, not for its table: {context}"),
    }
    assert_eq!(bad_record.result, DrillResult::Failed, "{bad_record:?}");
    assert_eq!(
        bad_record.reason.as_deref(),
        v.reason.as_deref(),
        "{bad_record:?}"
    );

    // The same snapshot, undamaged: mysqld answers and every user table checks out.
    let (good, good_record) = drill(&lab, &snapshot, TabletUid::new(999_999_982)).await;
    let v = &good.verdict;
    assert!(
        v.passed,
        "the undamaged drill of {snapshot} failed: {good:?}\n{}",
        timeline.render()
    );
    assert_eq!((v.failure, v.reason.as_deref()), (None, None), "{good:?}");
    assert!(good.mysqld_ready_ms.is_some(), "{good:?}");
    assert!(
        v.tables_total >= 1 && v.tables_checked == v.tables_total && !v.sampled,
        "{good:?}"
    );
    assert_eq!(good_record.result, DrillResult::Passed, "{good_record:?}");
    eprintln!(
        "{}\ndamaged drill: {}\nundamaged drill: {}",
        timeline.render(),
        bad.to_json(),
        good.to_json()
    );
}
