//! `make bench-vitess`: vtsnap against Vitess's own backup, restore and clone, on the
//! lab's real Vitess 24 shard on MySQL 9.7, in one run on one disk.
//!
//! Per size: a lab shard (primary and two replicas, VTOrc) seeded with that much InnoDB
//! data and a paced write load on the primary throughout. Per run ([`run::one_run`]):
//! the cold and online snapshots and the builtin engine's `Backup` of the same replica,
//! then a new replica from the snapshot, by `--restore-from-backup` and by
//! `--restore-with-clone --clone-from-primary`. Ratios are taken within each run, then
//! the median over runs.

pub mod measure;
pub mod page;
pub mod record;
pub mod run;

use std::path::Path;
use std::time::{Duration, Instant};

use vtsnap_testkit::vitess::{CloneSupport, DATABASE};

use self::measure::Disk;
use self::record::{BenchRecord, SizeRecord, SkippedSize};
use self::run::{RunContext, one_run};
use crate::bench::{LAB_IMAGE_DIR, free_gib};
use crate::timeline::Timeline;
use crate::vitess_lab::{LabSpec, Load, OnFailure, VitessLab};

/// Rows per GiB of generated data: ~1 KiB each, half random bytes and half a repeated
/// letter, so the builtin engine's compression (pargzip, its default) has some but not
/// everything to gain, as with real rows.
pub const ROWS_PER_GIB: u64 = 1_000_000;
/// Rows per seeding statement (~33 MiB of row events, one transaction).
const SEED_BATCH: u64 = 32_768;

/// The tablets' my.cnf beyond the lab's lean one: performance_schema on (a CLONE's
/// recipient waits on `performance_schema.clone_status`, which is empty without it, and
/// then times out: go/vt/mysqlctl/clone.go in Vitess v0.24.4), and a buffer pool and redo
/// log of a small production tablet rather than a test's.
pub const BENCH_CNF: &str = "performance_schema = ON
innodb_buffer_pool_size = 256M
innodb_redo_log_capacity = 256M
";

/// How long the replicas may take to apply the seeded rows.
const SEED_LIMIT: Duration = Duration::from_secs(4 * 3600);

/// The write load's pace: one single-row insert, then this pause.
const LOAD_PAUSE: Duration = Duration::from_millis(100);

#[derive(Debug, Clone)]
pub struct BenchOptions {
    pub sizes_gib: Vec<f64>,
    pub runs: usize,
    /// VTOrc's topology refresh: how long a tablet provisioned from a snapshot may wait
    /// to be found and have its replication started.
    pub vtorc_refresh: Duration,
}

/// Disk one size needs at its peak: three tablets' data, the compressed backup and a
/// restored or cloned tablet, and room for redo, binlogs and the load.
pub fn disk_needed_gib(gib: f64) -> f64 {
    gib * 1.15 * 4.0 + gib * 0.6 + 4.0
}

/// The lab's btrfs image: a sparse file, larger than what is written so that the file
/// system never runs short (a CLONE checks the recipient's free space first).
pub fn image_gib(gib: f64) -> f64 {
    gib * 10.0 + 10.0
}

/// Every size of `opts`; `after_size` gets the record so far after each one (a page
/// written then survives a run stopped later).
pub async fn bench_vitess(
    opts: &BenchOptions,
    timeline: &Timeline,
    mut after_size: impl FnMut(&BenchRecord),
) -> BenchRecord {
    let started = Instant::now();
    let mut record = BenchRecord {
        machine: crate::bench::machine(),
        vitess: "v0.24.4".into(),
        runs_per_size: opts.runs,
        vtorc_refresh_ms: u64::try_from(opts.vtorc_refresh.as_millis()).unwrap_or(u64::MAX),
        ..BenchRecord::default()
    };
    let disk = Disk::of(Path::new(LAB_IMAGE_DIR));
    for &gib in &opts.sizes_gib {
        let needed = disk_needed_gib(gib);
        let free = free_gib(Path::new(LAB_IMAGE_DIR)).unwrap_or(0.0);
        if free < needed {
            timeline.mark(format!(
                "bench-vitess: {gib} GiB skipped: it needs about {needed:.0} GiB of disk, {free:.0} GiB free"
            ));
            record.skipped.push(SkippedSize {
                requested_gib: gib,
                needed_gib: needed,
                free_gib: free,
            });
            continue;
        }
        let (size, mysql) = bench_size(gib, opts, &disk, timeline).await;
        record.mysql = mysql;
        record.sizes.push(size);
        record.total_s = started.elapsed().as_secs_f64();
        after_size(&record);
    }
    record.total_s = started.elapsed().as_secs_f64();
    record
}

async fn bench_size(
    gib: f64,
    opts: &BenchOptions,
    disk: &Disk,
    timeline: &Timeline,
) -> (SizeRecord, String) {
    let spec = LabSpec {
        // Sparse: only what is written takes disk; room for btrfs's own allocation and
        // for InnoDB's files beside the data (redo, undo, doublewrite) on every tablet.
        disk_bytes: (image_gib(gib).ceil() as u64) << 30,
        // A local driver's cut and readiness (LVM thin, btrfs); a cloud driver's upload
        // adds to the snapshot's total, never to its time out of service.
        cut: Duration::from_millis(50),
        upload: Duration::from_millis(100),
        clone: CloneSupport::On,
        extra_cnf: BENCH_CNF.into(),
        vtorc_refresh: opts.vtorc_refresh,
    };
    let mut lab = VitessLab::start_with(timeline.clone(), spec).await;
    let mysql = lab.shard.primary().must_sql("SELECT @@version").await;
    let seeding = Instant::now();
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let rows = (gib * ROWS_PER_GIB as f64) as u64;
    seed(&lab, rows).await;
    let seeded = lab.shard.primary().gtid_executed().await;
    let seed_s = seeding.elapsed().as_secs_f64();
    let replica = &lab.shard.tablets[1];
    let table_mib = std::fs::metadata(
        replica
            .tablet_dir()
            .join(format!("data/{DATABASE}/bulk.ibd")),
    )
    .map(|m| m.len() >> 20)
    .unwrap_or(0);
    timeline.mark(format!(
        "bench-vitess {gib} GiB: {rows} rows seeded and replicated in {seed_s:.0} s; the table is {table_mib} MiB"
    ));
    let load = Load::start_paced(&lab.shard, LOAD_PAUSE, OnFailure::Retry);
    load.until_more(10).await;
    let mut cold_caches = true;
    let mut out = Vec::new();
    for n in 0..opts.runs {
        let mut cx = RunContext {
            disk,
            cold_caches: &mut cold_caches,
            uid_base: 3000 + 10 * u32::try_from(n).unwrap_or(0),
            seeded: &seeded,
        };
        out.push(one_run(&mut lab, &mut cx, n + 1).await);
    }
    let load_failures = load.failures();
    load.stop().await;
    let primary_log = std::fs::read_to_string(lab.shard.primary().tablet_dir().join("error.log"))
        .unwrap_or_default();
    let primary_restarts = mysqld_safe_restarts(&primary_log);
    if primary_restarts > 0 {
        timeline.mark(format!(
            "bench-vitess {gib} GiB: the primary's mysqld died and mysqld_safe restarted it {primary_restarts} time(s); {load_failures} inserts of the load failed meanwhile"
        ));
    }
    drop(lab);
    (
        SizeRecord {
            requested_gib: gib,
            rows,
            table_mib,
            seed_s,
            cold_caches,
            load_failures,
            primary_restarts,
            runs: out,
        },
        mysql,
    )
}

/// How often `mysqld_safe` restarted a mysqld that died, by its error log.
pub fn mysqld_safe_restarts(log: &str) -> u64 {
    log.lines()
        .filter(|l| l.contains("mysqld_safe mysqld restarted"))
        .count() as u64
}

/// `rows` rows into `bulk` on the primary, in transactions of [`SEED_BATCH`]; then waits
/// for both replicas and purges the binlogs on every tablet (they would double the disk).
async fn seed(lab: &VitessLab, rows: u64) {
    let primary = lab.shard.primary();
    primary
        .must_sql(&format!(
            "CREATE TABLE IF NOT EXISTS {DATABASE}.bulk \
             (id BIGINT AUTO_INCREMENT PRIMARY KEY, pad VARBINARY(1024))"
        ))
        .await;
    // Until the table holds `rows`: a batch the primary lost (its mysqld died and
    // `mysqld_safe` restarted it, read-only until VTOrc undoes that) is simply not counted.
    let started = Instant::now();
    loop {
        let have: u64 = primary
            .sql(&format!("SELECT COALESCE(MAX(id), 0) FROM {DATABASE}.bulk"))
            .await
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        if have >= rows {
            break;
        }
        // Explicit ids, one after another: `MAX(id)` is then the row count (an
        // auto-increment would leave gaps in a multi-row insert).
        let n = (rows - have).min(SEED_BATCH);
        let inserted = primary
            .sql(&format!(
                "SET SESSION cte_max_recursion_depth = {n}; \
                 INSERT INTO {DATABASE}.bulk (id, pad) \
                 WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < {n}) \
                 SELECT {have} + n, CONCAT(RANDOM_BYTES(512), REPEAT('v', 500)) FROM s"
            ))
            .await;
        if let Err(e) = inserted {
            assert!(
                started.elapsed() < SEED_LIMIT,
                "seeding failed for {SEED_LIMIT:?}: {e}"
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    let want = primary.gtid_executed().await;
    let waiting = Instant::now();
    for t in &lab.shard.tablets[1..] {
        while t.gtid_executed().await != want {
            assert!(
                waiting.elapsed() < SEED_LIMIT,
                "{} did not replicate the seeded rows within {SEED_LIMIT:?}",
                t.alias
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    for t in &lab.shard.tablets {
        // Every log but the one just opened: `BEFORE NOW()` keeps a log closed in the
        // same second, and MySQL never purges the active one.
        t.must_sql("FLUSH BINARY LOGS; PURGE BINARY LOGS BEFORE NOW() + INTERVAL 1 DAY")
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restarts_are_counted_from_mysqld_safes_lines() {
        let log = "2026-12-07T02:31:48.74Z mysqld_safe Number of processes running now: 0\n\
                   2026-12-07T02:31:48.90Z mysqld_safe mysqld restarted\n\
                   2026-12-07T02:31:49.00Z 0 [System] [MY-015015] [Server] MySQL Server - start.\n";
        assert_eq!(mysqld_safe_restarts(log), 1);
        assert_eq!(mysqld_safe_restarts(""), 0);
    }

    #[test]
    fn the_image_is_larger_than_the_disk_it_needs() {
        for gib in [0.0625, 1.0, 4.0, 16.0] {
            assert!(image_gib(gib) > disk_needed_gib(gib), "{gib}");
        }
    }

    #[test]
    fn the_disk_estimate_grows_with_the_size() {
        assert!(disk_needed_gib(16.0) > disk_needed_gib(8.0));
        assert!(disk_needed_gib(16.0) > 80.0);
        assert!(disk_needed_gib(1.0) < 12.0);
    }
}
