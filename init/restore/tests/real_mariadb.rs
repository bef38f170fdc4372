//! End to end on real things: a MariaDB tablet laid out exactly as Vitess lays it out, on
//! a btrfs subvolume (the "PVC"), under write load. Two atomic snapshots — one while it
//! runs (a crash image) and one after a clean shutdown — are cloned, moved to new tablet
//! UIDs by the real `vtsnap-restore` binary, and started with mariadbd on the rewritten
//! my.cnf. Needs root, btrfs, loop devices and the Podman API socket (`make test` sets
//! all of that up).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use vtsnap_core::naming::TabletUid;
use vtsnap_restore::mycnf::{MyCnf, mentions_uid};
mod common;

use common::names_left;
use vtsnap_testkit::btrfs::BtrfsVolume;
use vtsnap_testkit::layout::{Flavor, TabletLayout, resolve};
use vtsnap_testkit::mariadb::{self, MariaDb};

const SOURCE: u32 = 101;
const LOAD_MARK: u64 = 1_000_000;

fn restore(vtdataroot: &Path, uid: u32) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_vtsnap-restore"))
        .arg("--vtdataroot")
        .arg(vtdataroot)
        .arg("--tablet-uid")
        .arg(uid.to_string())
        .env("VTSNAP_LOG_FORMAT", "text")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "vtsnap-restore failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap()).unwrap()
}

/// The sequence number of the newest GTID (single-source shard).
async fn gtid_seq(db: &MariaDb) -> u64 {
    let pos = match db.flavor() {
        Flavor::MariaDb => db.value("SELECT @@gtid_binlog_pos").await,
        Flavor::MySql80 => db.value("SELECT @@gtid_executed").await,
    };
    pos.rsplit(['-', ':'])
        .next()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("bad GTID {pos:?}"))
}

async fn writable(db: &MariaDb) {
    if db.flavor() == Flavor::MySql80 {
        db.query("SET GLOBAL super_read_only = 0").await;
    }
    db.query("SET GLOBAL read_only = 0").await;
}

async fn checksum(db: &MariaDb, table: &str) -> String {
    db.query(&format!("CHECKSUM TABLE vt_commerce.{table}"))
        .await[0][1]
        .clone()
}

async fn count(db: &MariaDb, filter: &str) -> u64 {
    db.value(&format!(
        "SELECT COUNT(*) FROM vt_commerce.t WHERE {filter}"
    ))
    .await
    .parse()
    .unwrap()
}

async fn wait_for_load_rows(db: &MariaDb, at_least: u64) {
    for _ in 0..600 {
        if count(db, &format!("v >= {LOAD_MARK}")).await >= at_least {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("write load made no progress");
}

/// Checks the clone after the restore and before any server touched it.
fn assert_no_old_names(vtdataroot: &Path, new: TabletUid) {
    let old = TabletUid::new(SOURCE);
    let left = names_left(vtdataroot, old);
    assert!(left.is_empty(), "names of the old tablet remain: {left:?}");
    let t = vtdataroot.join(new.tablet_dir_name());
    let cnf = std::fs::read_to_string(t.join("my.cnf")).unwrap();
    assert!(
        !mentions_uid(&cnf, old),
        "my.cnf names the old tablet:\n{cnf}"
    );
    let index = resolve(
        vtdataroot,
        &t.join(format!("bin-logs/vt-{}-bin.index", new.padded())),
    );
    let index = std::fs::read_to_string(index).unwrap();
    assert!(
        !mentions_uid(&index, old),
        "binlog index names the old tablet:\n{index}"
    );
    assert!(!t.join("data/auto.cnf").exists());
}

/// What every restored server must show: its my.cnf server-id, renamed binlogs.
async fn assert_is_new_tablet(db: &MariaDb, vtdataroot: &Path, new: TabletUid, old_server_id: u32) {
    let cnf =
        std::fs::read_to_string(vtdataroot.join(new.tablet_dir_name()).join("my.cnf")).unwrap();
    let want = MyCnf::parse(&cnf).unwrap().server_id().unwrap();
    let running: u32 = db.value("SELECT @@server_id").await.parse().unwrap();
    assert_eq!(running, want, "server_id must be the one in my.cnf");
    assert_ne!(
        running, old_server_id,
        "server_id must differ from the source's"
    );
    let logs = db.query("SHOW BINARY LOGS").await;
    assert!(logs.len() >= 4, "binary logs lost: {logs:?}");
    let prefix = format!("vt-{}-bin.", new.padded());
    for row in &logs {
        assert!(
            row[0].starts_with(&prefix),
            "binlog {} is not named after the new tablet",
            row[0]
        );
    }
    let datadir = db.value("SELECT @@datadir").await;
    assert!(
        datadir.contains(&new.tablet_dir_name()),
        "datadir {datadir}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clones_of_a_running_and_a_stopped_tablet_start_as_new_tablets() {
    let vol = BtrfsVolume::create(3 << 30);
    let pvc = vol.subvolume("pvc-source");
    let root = pvc.join("vtdataroot");
    std::fs::create_dir(&root).unwrap();
    let layout = TabletLayout {
        flavor: mariadb::flavor(),
        ..TabletLayout::mariadb(SOURCE)
    };
    layout.write_skeleton(&root).unwrap();

    // The source tablet: data, a few binlog rotations, then a steady write load.
    let src = MariaDb::start(&root, layout.uid).await;
    writable(&src).await;
    src.query("CREATE DATABASE vt_commerce").await;
    src.query(
        "CREATE TABLE vt_commerce.t (id BIGINT AUTO_INCREMENT PRIMARY KEY, v BIGINT NOT NULL, \
         pad CHAR(32) NOT NULL) ENGINE=InnoDB",
    )
    .await;
    for batch in 0..3u64 {
        src.query(&format!(
            "INSERT INTO vt_commerce.t (v, pad) WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL \
             SELECT n + 1 FROM s WHERE n < 1000) SELECT n + {off}, md5(n + {off}) FROM s",
            off = batch * 1000
        ))
        .await;
        src.query("FLUSH BINARY LOGS").await;
    }
    let seq_before_load = gtid_seq(&src).await;
    src.start_load("vt_commerce.t", LOAD_MARK).await;
    wait_for_load_rows(&src, 300).await;

    // Snapshot 1: the running server, mid-load (a power-loss image).
    let lower_bound = gtid_seq(&src).await;
    vol.snapshot("pvc-source", "snap-running", true);
    let rows_at_snapshot = count(&src, "1").await;
    wait_for_load_rows(&src, rows_at_snapshot - 3000 + 300).await;

    // Snapshot 2: after a clean shutdown.
    src.stop_load().await;
    let final_seq = gtid_seq(&src).await;
    let final_sum = checksum(&src, "t").await;
    let final_rows = count(&src, "1").await;
    assert!(
        final_seq > lower_bound,
        "the load must go on after the first snapshot"
    );
    src.shutdown().await;
    vol.snapshot("pvc-source", "snap-stopped", true);

    // Clone of the clean image → tablet 202.
    let clean_uid = TabletUid::new(202);
    let clean_root = vol
        .snapshot("snap-stopped", "pvc-202", false)
        .join("vtdataroot");
    let out = restore(&clean_root, clean_uid.get());
    assert_eq!(out["action"], "moved");
    assert_no_old_names(&clean_root, clean_uid);
    let clean = MariaDb::start(&clean_root, clean_uid).await;
    assert_is_new_tablet(&clean, &clean_root, clean_uid, layout.server_id).await;
    assert_eq!(
        gtid_seq(&clean).await,
        final_seq,
        "clean image: GTID position must be exact"
    );
    assert_eq!(
        checksum(&clean, "t").await,
        final_sum,
        "clean image: data must equal the source"
    );
    assert_eq!(count(&clean, "1").await, final_rows);

    // Clone of the crash image → tablet 203: crash recovery on renamed binlogs.
    let crash_uid = TabletUid::new(203);
    let crash_root = vol
        .snapshot("snap-running", "pvc-203", false)
        .join("vtdataroot");
    let out = restore(&crash_root, crash_uid.get());
    assert_eq!(out["action"], "moved");
    if layout.flavor == Flavor::MariaDb {
        let ops: Vec<&str> = out["steps"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|s| s["op"].as_str())
            .collect();
        assert!(
            ops.contains(&"patch-binlog-checkpoints"),
            "a crash image needs its checkpoints patched: {ops:?}"
        );
    }
    assert_no_old_names(&crash_root, crash_uid);
    let crashed = MariaDb::start(&crash_root, crash_uid).await;
    assert_is_new_tablet(&crashed, &crash_root, crash_uid, layout.server_id).await;

    // Recovered data and GTID position agree: one GTID per load row.
    let seq = gtid_seq(&crashed).await;
    let load_rows = count(&crashed, &format!("v >= {LOAD_MARK}")).await;
    let max_id: u64 = crashed
        .value("SELECT MAX(id) FROM vt_commerce.t")
        .await
        .parse()
        .unwrap();
    assert!(
        seq >= lower_bound,
        "recovered GTID {seq} is behind the snapshot's lower bound {lower_bound}"
    );
    assert_eq!(
        seq,
        seq_before_load + load_rows,
        "GTID position and data disagree after recovery"
    );

    // Its table equals the source's at that position (the clean clone holds the source's rows).
    writable(&clean).await;
    clean
        .query("CREATE TABLE vt_commerce.t_at LIKE vt_commerce.t")
        .await;
    clean
        .query(&format!(
            "INSERT INTO vt_commerce.t_at SELECT * FROM vt_commerce.t WHERE id <= {max_id}"
        ))
        .await;
    assert_eq!(
        count(&crashed, "1").await,
        count(&clean, &format!("id <= {max_id}")).await,
        "crash image: rows missing below the recovered MAX(id)"
    );
    assert_eq!(
        checksum(&crashed, "t").await,
        checksum(&clean, "t_at").await,
        "crash image: data must equal the source at the recovered position"
    );

    clean.remove().await;
    crashed.remove().await;
}
