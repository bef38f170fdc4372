//! `make bench-lab`: vtsnap's snapshots against `mariadb-backup` (the MariaDB build of
//! xtrabackup, what Vitess's xtrabackup engine runs) and `mariadb-dump`, on the same
//! generated data, the same replica and the same machine in every row of a run.
//!
//! Per size: a lab shard seeded with that much data and a throttled write load on the
//! primary. Per run, on the replica vtsnap picks:
//! - backup: a cold snapshot (out of service = the fence window), an online snapshot (out
//!   of service: none), `mariadb-backup --backup` (out of service for its whole duration:
//!   Vitess moves a tablet to type BACKUP while a backup engine runs);
//! - provisioning: snapshot clone → vtsnap-restore → start → catch-up, against
//!   `--backup` → `--prepare` → `--copy-back` → start → catch-up; at the smallest size
//!   also `mariadb-dump` → load → start → catch-up.
//!
//! Ratios are taken within each run, then the median over runs.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;
use vtsnap_core::naming::TabletUid;
use vtsnap_testkit::layout::TabletLayout;
use vtsnap_testkit::mariadb::MariaDb;

use crate::control_plane::Choice;
use crate::demo::{SnapshotReport, snapshot_report};
use crate::provision::{self, ProvisionTimes, catch_up_from, ms, start_server};
use crate::resources;
use crate::shard::{DATABASE, Lab, LabOptions, free_port, inserts_load};
use crate::timeline::Timeline;
use vtsnap_snapshot::run::StepTiming;
use vtsnap_testkit::btrfs::{BtrfsVolume, btrfs};

/// Rows per GiB of generated data (rows of ~1 KiB of padding).
const ROWS_PER_GIB: u64 = 1_000_000;
const ROW_BYTES: u32 = 1024;

#[derive(Debug, Clone, Default, Serialize)]
pub struct Run {
    pub cold_fence_ms: u64,
    pub cold_total_ms: u64,
    /// The cold run's steps, each with its time (the fence window broken down).
    pub cold_steps: Vec<StepTiming>,
    /// mysqld's clean shutdown and its start, as the target's mysqlctld timed them.
    pub cold_mysqld_shutdown_ms: u64,
    pub cold_mysqld_start_ms: u64,
    /// The lab's fake vtctld's calls into the tablets' servers during the cold run (all in
    /// the window: StopReplication, the position, StartReplication).
    pub cold_fake_vtctld_ms: u64,
    pub online_total_ms: u64,
    pub xb_backup_ms: u64,
    /// A new replica from the online snapshot.
    pub snap: ProvisionTimes,
    pub xb_prepare_ms: u64,
    pub xb_copy_back_ms: u64,
    pub xb_start_ms: u64,
    pub xb_catch_up_ms: u64,
    pub dump_ms: Option<u64>,
    pub load_ms: Option<u64>,
    pub dump_start_ms: Option<u64>,
    pub dump_catch_up_ms: Option<u64>,
}

impl Run {
    pub fn snap_total(&self) -> u64 {
        self.snap.total_ms()
    }

    /// Provisioning from a backup that already exists.
    pub fn xb_restore_total(&self) -> u64 {
        self.xb_prepare_ms + self.xb_copy_back_ms + self.xb_start_ms + self.xb_catch_up_ms
    }

    pub fn xb_total(&self) -> u64 {
        self.xb_backup_ms + self.xb_restore_total()
    }

    pub fn dump_total(&self) -> Option<u64> {
        Some(self.dump_ms? + self.dump_start_ms? + self.load_ms? + self.dump_catch_up_ms?)
    }

    /// The cold fence window less mysqld's own shutdown and start: what vtsnap (its
    /// hand-offs, vtctld's calls, the hold and the CSI driver's cut) adds.
    pub fn cold_overhead_ms(&self) -> u64 {
        self.cold_fence_ms
            .saturating_sub(self.cold_mysqld_shutdown_ms + self.cold_mysqld_start_ms)
    }

    /// [`Self::cold_overhead_ms`] less the lab's fake vtctld, whose every call runs a SQL
    /// client through `podman exec` (a real vttablet answers over a connection it holds).
    pub fn cold_own_overhead_ms(&self) -> u64 {
        self.cold_overhead_ms()
            .saturating_sub(self.cold_fake_vtctld_ms)
    }

    /// The time of the cold run's steps whose names start with `prefix`.
    pub fn cold_step_ms(&self, prefix: &str) -> u64 {
        self.cold_steps
            .iter()
            .filter(|s| s.step.starts_with(prefix))
            .map(|s| s.ms)
            .sum()
    }
}

/// docs/design.md §8 / the benchmark issue: vtsnap's own part of the cold fence window.
pub const OVERHEAD_TARGET_MS: u64 = 200;

/// The cold run's steps in the breakdown table: (column, step-name prefix). Fence and
/// probe come before the window; the rest are inside it.
pub const COLD_STEPS: [(&str, &str); 12] = [
    ("fence", "fence acquired"),
    ("probe", "layout probed"),
    ("drain", "tablet DRAINED"),
    ("stop replication", "replication stopped"),
    ("position", "position recorded"),
    ("shutdown", "mysqld stopped"),
    ("hold", "mysqld held"),
    ("create", "VolumeSnapshot"),
    ("cut", "snapshot cut"),
    ("release (start)", "node released"),
    ("replication, type", "tablet put back"),
    ("unfence", "fence deleted"),
];

#[derive(Debug, Clone, Serialize)]
pub struct SizeResult {
    pub requested_gib: f64,
    pub mariadb_version: String,
    /// The replica's whole volume as `du` counts it (data, redo, binlogs).
    pub measured_mib: u64,
    /// The generated table's file.
    pub table_mib: u64,
    pub rows: u64,
    pub seed_s: f64,
    /// Every timed phase began with the page cache dropped.
    pub cold_caches: bool,
    pub runs: Vec<Run>,
}

/// A size that was not measured, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    pub requested_gib: f64,
    pub needed_gib: f64,
    pub free_gib: f64,
}

pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Median over runs of `f`, in seconds.
fn med_s(runs: &[Run], f: impl Fn(&Run) -> u64) -> f64 {
    median(runs.iter().map(|r| f(r) as f64 / 1000.0).collect())
}

/// Median over runs of the per-run ratio `a / b`.
fn med_ratio(runs: &[Run], a: impl Fn(&Run) -> u64, b: impl Fn(&Run) -> u64) -> f64 {
    median(
        runs.iter()
            .map(|r| a(r) as f64 / (b(r).max(1)) as f64)
            .collect(),
    )
}

async fn sh_ok(tool: &MariaDb, what: &str, cmd: &str) -> Duration {
    let t = Instant::now();
    let (code, out, err) = tool.sh(cmd).await;
    assert_eq!(
        code,
        0,
        "{what} failed ({code}):\n{}\n{}",
        tail(&out),
        tail(&err)
    );
    t.elapsed()
}

fn tail(s: &str) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// What `p` takes on its disk, in MiB rounded up (as `du --block-size=1M` prints it).
fn du_mib(p: &Path) -> u64 {
    du_bytes(p).div_ceil(1 << 20)
}

/// What `p` takes on its disk, in bytes (`du -s`); 0 if `du` cannot tell.
pub fn du_bytes(p: &Path) -> u64 {
    std::process::Command::new("du")
        .args(["-s", "--block-size=1"])
        .arg(p)
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// Writes dirty pages out and drops the page cache, so the next phase reads from disk.
/// False if this machine does not allow it (the figures are then warm, and say so).
pub fn drop_page_cache() -> bool {
    let synced = std::process::Command::new("sync")
        .status()
        .is_ok_and(|s| s.success());
    synced && std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok()
}

/// Where the lab's disk images go (see `BtrfsVolume::create`).
pub const LAB_IMAGE_DIR: &str = "/var/tmp";

/// Disk one size needs at its peak: the primary's data, the backup's copy and the
/// copy-back's (the replicas and clones share the primary's extents), the logical dump's
/// text and load at the smallest size, and room for redo, binlogs and the load.
pub fn disk_needed_gib(gib: f64, dump_too: bool) -> f64 {
    let copies = if dump_too { 5.0 } else { 3.0 };
    gib * copies * 1.1 + 4.0
}

/// Free space where the lab's images go, in GiB.
pub fn free_gib(dir: &Path) -> Option<f64> {
    let out = std::process::Command::new("df")
        .args(["--output=avail", "-B1"])
        .arg(dir)
        .output()
        .ok()?;
    let bytes: f64 = String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)?
        .trim()
        .parse()
        .ok()?;
    Some(bytes / f64::from(1u32 << 30))
}

/// A fresh subvolume with an empty tablet directory for `uid` (my.cnf and directories).
fn fresh_tablet_volume(lab: &Lab, name: &str, uid: TabletUid) -> PathBuf {
    let vol = lab_disk(lab).join(name);
    btrfs(&["-q", "subvolume", "create"], &[&vol]).unwrap_or_else(|e| panic!("{e}"));
    let root = vol.join("vtdataroot");
    std::fs::create_dir(&root).unwrap();
    TabletLayout {
        port: free_port(),
        bind_loopback: true,
        ..TabletLayout::mariadb(uid.get())
    }
    .write_skeleton(&root)
    .unwrap();
    vol
}

/// The lab's own btrfs: the benchmark runs on the in-memory control plane.
fn lab_disk(lab: &Lab) -> &Path {
    lab.vol
        .as_ref()
        .map(BtrfsVolume::path)
        .unwrap_or_else(|| panic!("the benchmark needs the in-memory lab's btrfs"))
}

fn delete_subvolume(p: &Path) {
    // The server on it is gone; a failure only costs disk space.
    let _ = btrfs(&["-q", "subvolume", "delete"], &[p]);
}

/// One run of every method on the lab's current replica.
async fn one_run(lab: &Lab, run: usize, dump_too: bool, cold: &mut bool) -> Run {
    let mut r = Run::default();
    let tl = &lab.timeline;

    // Backups, each from a cold page cache.
    *cold &= drop_page_cache();
    let t = Instant::now();
    let c: SnapshotReport = snapshot_report(lab, false, 0).await;
    r.cold_total_ms = ms(t.elapsed());
    r.cold_fence_ms = c.fence_window_ms;
    r.cold_steps = c.step_timings;
    r.cold_mysqld_shutdown_ms = c.mysqld_shutdown_ms.unwrap_or(0);
    r.cold_mysqld_start_ms = c.mysqld_start_ms.unwrap_or(0);
    r.cold_fake_vtctld_ms = c.fake_vtctld_ms;
    tl.mark(format!(
        "bench {run}: cold fence window {} ms = mysqld shutdown {} ms + start {} ms + the fake vtctld's podman exec {} ms + vtsnap {} ms",
        r.cold_fence_ms,
        r.cold_mysqld_shutdown_ms,
        r.cold_mysqld_start_ms,
        r.cold_fake_vtctld_ms,
        r.cold_own_overhead_ms()
    ));
    *cold &= drop_page_cache();
    let t = Instant::now();
    let online = snapshot_report(lab, true, 0).await;
    r.online_total_ms = ms(t.elapsed());
    let (_, replica) = lab.tablet_by_alias(&online.target);

    // Provisioning from the online snapshot, right after it was taken.
    let snap_uid = TabletUid::new(400 + u32::try_from(run).unwrap_or(0));
    *cold &= drop_page_cache();
    r.snap = provision::from_snapshot(lab, &online.snapshot, snap_uid)
        .await
        .times;

    let scratch = lab_disk(lab).join(format!("scratch-{run}"));
    std::fs::create_dir_all(&scratch).unwrap();
    let xb_uid = TabletUid::new(500 + u32::try_from(run).unwrap_or(0));
    let xb_vol = fresh_tablet_volume(lab, &format!("xb-{run}"), xb_uid);
    let xb_dir = format!("/new/{}", xb_uid.tablet_dir_name());
    let tool = MariaDb::toolbox(&[
        (&replica.mount.join("vtdataroot"), "/vt/vtdataroot"),
        (&replica.socket_dir, "/vt/socket"),
        (&scratch, "/backup"),
        (&xb_vol.join("vtdataroot"), "/new"),
    ])
    .await;
    resources::container(tool.id());
    let cnf = format!(
        "/vt/vtdataroot/{}/my.cnf",
        replica.alias.uid.tablet_dir_name()
    );
    *cold &= drop_page_cache();
    r.xb_backup_ms = ms(sh_ok(
        &tool,
        "mariadb-backup --backup",
        &format!(
            "mariadb-backup --defaults-file={cnf} --backup --user=root --socket=/vt/socket/mysql.sock \
             --target-dir=/backup/full 2>/backup/backup.log"
        ),
    )
    .await);
    tl.mark(format!(
        "bench {run}: mariadb-backup --backup took {} ms",
        r.xb_backup_ms
    ));

    // Provisioning from the mariadb-backup backup.
    *cold &= drop_page_cache();
    r.xb_prepare_ms = ms(sh_ok(
        &tool,
        "mariadb-backup --prepare",
        "mariadb-backup --prepare --target-dir=/backup/full 2>/backup/prepare.log",
    )
    .await);
    std::fs::write(
        scratch.join("copy-back.cnf"),
        format!(
            "[mysqld]\ndatadir={xb_dir}/data\ninnodb_data_home_dir={xb_dir}/innodb/data\n\
             innodb_log_group_home_dir={xb_dir}/innodb/logs\ninnodb_data_file_path=ibdata1:10M:autoextend\n"
        ),
    )
    .unwrap();
    *cold &= drop_page_cache();
    r.xb_copy_back_ms = ms(sh_ok(
        &tool,
        "mariadb-backup --copy-back",
        "mariadb-backup --defaults-file=/backup/copy-back.cnf --copy-back --target-dir=/backup/full 2>/backup/copy-back.log",
    )
    .await);
    let info = ["mariadb_backup_binlog_info", "xtrabackup_binlog_info"]
        .iter()
        .find_map(|f| std::fs::read_to_string(scratch.join("full").join(f)).ok())
        .unwrap_or_else(|| panic!("mariadb-backup wrote no binlog info"));
    let gtid = info
        .split_whitespace()
        .nth(2)
        .unwrap_or_default()
        .to_owned();
    *cold &= drop_page_cache();
    let (xb_db, start) = start_server(lab, &xb_vol, xb_uid).await;
    r.xb_start_ms = ms(start);
    r.xb_catch_up_ms = ms(catch_up_from(lab, &xb_db, &gtid).await);
    drop(xb_db);
    tl.mark(format!(
        "bench {run}: snapshot path {} ms, mariadb-backup path {} ms",
        r.snap_total(),
        r.xb_total()
    ));

    if dump_too {
        let dump_uid = TabletUid::new(600 + u32::try_from(run).unwrap_or(0));
        let dump_vol = fresh_tablet_volume(lab, &format!("dump-{run}"), dump_uid);
        *cold &= drop_page_cache();
        r.dump_ms = Some(ms(sh_ok(
            &tool,
            "mariadb-dump",
            &format!(
                "mariadb-dump --socket=/vt/socket/mysql.sock -uroot --single-transaction --gtid --master-data=2 \
                 --databases {DATABASE} >/backup/dump.sql"
            ),
        )
        .await));
        let dump = std::fs::read_to_string(scratch.join("dump.sql")).unwrap_or_default();
        let gtid = dump
            .lines()
            .find_map(|l| {
                let rest = l.split("gtid_slave_pos='").nth(1)?;
                Some(rest.split('\'').next()?.to_owned())
            })
            .unwrap_or_else(|| panic!("mariadb-dump wrote no GTID position"));
        let (db, start) = start_server(lab, &dump_vol, dump_uid).await;
        r.dump_start_ms = Some(ms(start));
        let loader = MariaDb::toolbox(&[
            (&scratch, "/backup"),
            (&dump_vol.join("socket"), "/newsock"),
        ])
        .await;
        resources::container(loader.id());
        *cold &= drop_page_cache();
        r.load_ms = Some(ms(sh_ok(
            &loader,
            "load the dump",
            "mariadb --socket=/newsock/mysql.sock -uroot --init-command='SET SESSION sql_log_bin=0' </backup/dump.sql",
        )
        .await));
        r.dump_catch_up_ms = Some(ms(catch_up_from(lab, &db, &gtid).await));
        drop(db);
        drop(loader);
        delete_subvolume(&dump_vol);
    }
    drop(tool);
    let _ = std::fs::remove_dir_all(&scratch);
    delete_subvolume(&xb_vol);
    r
}

/// Measures one data size, or skips it when the disk cannot hold it (checked first).
pub async fn bench_size(
    gib: f64,
    runs: usize,
    dump_too: bool,
    timeline: Timeline,
) -> Result<SizeResult, Skipped> {
    let needed_gib = disk_needed_gib(gib, dump_too);
    let free = free_gib(Path::new(LAB_IMAGE_DIR)).unwrap_or(0.0);
    if free < needed_gib {
        timeline.mark(format!(
            "bench: {gib} GiB skipped: it needs {needed_gib:.0} GiB free in {LAB_IMAGE_DIR}, there are {free:.0} GiB"
        ));
        return Err(Skipped {
            requested_gib: gib,
            needed_gib,
            free_gib: free,
        });
    }
    let rows = (gib * ROWS_PER_GIB as f64).round() as u64;
    let t = Instant::now();
    let lab = Lab::start(
        LabOptions {
            volume_bytes: ((gib * 5.0 + 6.0) * f64::from(1u32 << 30)) as u64,
            seed_rows: rows,
            row_bytes: ROW_BYTES,
            supervisor_restart: None,
            cut_delay: Duration::from_millis(50),
            upload_delay: Duration::from_millis(100),
            ..LabOptions::default()
        },
        timeline.clone(),
    )
    .await;
    let seed_s = t.elapsed().as_secs_f64();
    let measured_mib = du_mib(&lab.tablets[&2].mount);
    let table_mib = du_mib(
        &lab.tablets[&2]
            .mount
            .join("vtdataroot")
            .join(lab.tablets[&2].alias.uid.tablet_dir_name())
            .join("data")
            .join(DATABASE)
            .join("t.ibd"),
    );
    let mariadb_version = lab.primary().value("SELECT VERSION()").await;
    lab.primary().start_load_script(&inserts_load(100)).await;
    let mut out = Vec::new();
    let mut cold_caches = true;
    for run in 1..=runs {
        timeline.mark(format!("bench: {gib} GiB, run {run} of {runs}"));
        out.push(one_run(&lab, run, dump_too, &mut cold_caches).await);
    }
    lab.primary().stop_load().await;
    // Each size starts from a clean host: nothing of this lab may remain.
    if let Err(left) =
        crate::shard::drop_and_check_nothing_left(lab, crate::shard::LEFTOVER_LIMIT).await
    {
        panic!(
            "bench: the {gib} GiB lab left behind:\n  {}",
            left.join("\n  ")
        );
    }
    Ok(SizeResult {
        requested_gib: gib,
        mariadb_version,
        measured_mib,
        table_mib,
        rows,
        seed_s,
        cold_caches,
        runs: out,
    })
}

/// One snapshot run of the control-plane comparison.
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotRun {
    pub mode: &'static str,
    /// `vtsnap-snapshot run` start → the cut observed (the step that waits for it).
    pub to_cut_ms: u64,
    /// Start → exit, which is once the snapshot is readyToUse.
    pub to_ready_ms: u64,
    pub fence_window_ms: u64,
    /// VolumeSnapshot created → cut observed.
    pub cut_latency_ms: u64,
}

/// Snapshot timings on one control plane, at the same small shard.
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotSeries {
    /// "in-memory" or "real".
    pub control_plane: &'static str,
    pub kube_version: Option<String>,
    pub runs: Vec<SnapshotRun>,
}

/// Rows of the control-plane comparison's shard: its figures are about the API and the
/// snapshot stack, not the data.
const SERIES_ROWS: u64 = 50_000;

fn to_cut_ms(steps: &[StepTiming]) -> u64 {
    let mut total = 0;
    for s in steps {
        total += s.ms;
        if s.step == "snapshot cut" || s.step == "snapshot ready" {
            break;
        }
    }
    total
}

/// `runs` cold and `runs` online snapshots under the write load, on `control_plane` (the
/// real one: the real API server, snapshot-controller, csi-snapshotter and the btrfs CSI
/// driver with the same 50 ms cut).
pub async fn snapshot_series(
    control_plane: Choice,
    runs: usize,
    timeline: Timeline,
) -> SnapshotSeries {
    let label = match control_plane {
        Choice::InMemory => "in-memory",
        Choice::Real { .. } => "real",
    };
    let lab = Lab::start(
        LabOptions {
            seed_rows: SERIES_ROWS,
            supervisor_restart: None,
            cut_delay: Duration::from_millis(50),
            upload_delay: Duration::from_millis(100),
            control_plane,
            ..LabOptions::default()
        },
        timeline.clone(),
    )
    .await;
    lab.primary().start_load_script(&inserts_load(100)).await;
    let mut out = Vec::new();
    for run in 1..=runs {
        for online in [false, true] {
            timeline.mark(format!(
                "bench: {label} control plane, snapshot {run} of {runs}"
            ));
            let s = snapshot_report(&lab, online, 0).await;
            out.push(SnapshotRun {
                mode: s.mode,
                to_cut_ms: to_cut_ms(&s.step_timings),
                to_ready_ms: s.run_ms,
                fence_window_ms: s.fence_window_ms,
                cut_latency_ms: s.cut_latency_ms,
            });
        }
    }
    lab.primary().stop_load().await;
    let kube_version = lab.cp.kube_version().map(str::to_owned);
    if let Err(left) =
        crate::shard::drop_and_check_nothing_left(lab, crate::shard::LEFTOVER_LIMIT).await
    {
        panic!(
            "bench: the {label} control plane's lab left behind:\n  {}",
            left.join("\n  ")
        );
    }
    SnapshotSeries {
        control_plane: label,
        kube_version,
        runs: out,
    }
}

pub fn machine() -> String {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpu = read("/proc/cpuinfo")
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).to_owned())
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem_gib = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|l| l.trim().trim_end_matches(" kB").parse::<u64>().ok())
        .map_or(0, |kb| kb >> 20);
    // major.minor only: the rest names the build, not the machine's behaviour.
    let release = read("/proc/sys/kernel/osrelease");
    let kernel: String = release.split('.').take(2).collect::<Vec<_>>().join(".");
    format!(
        "{cores} cores ({cpu}), {mem_gib} GiB RAM, Linux {}",
        kernel.trim()
    )
}

/// Everything one `vtsnap-lab bench` measured.
#[derive(Debug, Clone, Default)]
pub struct BenchResults {
    pub sizes: Vec<SizeResult>,
    pub skipped: Vec<Skipped>,
    /// The control-plane comparison (in memory, then real), when a cluster was given.
    pub series: Vec<SnapshotSeries>,
}

fn gib_of(r: &SizeResult) -> f64 {
    r.table_mib as f64 / 1024.0
}

fn method(s: &mut String, res: &BenchResults, total: Duration) {
    let results = &res.sizes;
    let mariadb_version = results.first().map_or("?", |r| r.mariadb_version.as_str());
    let cold = results.iter().all(|r| r.cold_caches);
    let caches = if cold {
        "**Cold caches.** Before every timed phase of every path (each snapshot, the snapshot \
         provisioning, `--backup`, `--prepare`, `--copy-back`, the backup's server start, the dump and \
         its load) the bench runs `sync` and writes 3 to `/proc/sys/vm/drop_caches`, so each phase \
         reads its data from the disk, as a 1.3 TB shard would; only mysqld's own buffer pools stay warm."
    } else {
        "**Warm caches: this machine refused to drop the page cache** (`/proc/sys/vm/drop_caches`), \
         so `mariadb-backup` and `mariadb-dump` read much of their data from memory, which favors them."
    };
    let runs = results.iter().map(|r| r.runs.len()).max().unwrap_or(0);
    let sizes = results
        .iter()
        .map(|r| format!("{} GiB", r.requested_gib))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(
        s,
        "# Benchmarks: volume snapshots against mariadb-backup\n\n\
         Written by `make bench-lab` (`vtsnap-lab bench`); every number below was measured by that run. \
         Times are medians over runs; each ratio is computed within a run (same data, same replica, same \
         minute) and then the median is taken.\n\n\
         ## Machine and method\n\n\
         - Machine: {}.\n\
         - {caches}\n\
         - Sizes requested: {sizes}; {runs} runs per size.",
        machine(),
    );
    for k in &res.skipped {
        let _ = writeln!(
            s,
            "- **{} GiB skipped:** it needs about {:.0} GiB free in `{LAB_IMAGE_DIR}` (the primary's data, \
             the backup's copy and the copy-back's, with room for redo and binlogs), and there were {:.0} GiB.",
            k.requested_gib, k.needed_gib, k.free_gib
        );
    }
    let _ = writeln!(
        s,
        "- MariaDB {mariadb_version} from Debian, in Podman containers; each tablet's volume is a btrfs \
           subvolume on one loop-device image (a sparse file on the machine's disk). The snapshots are \
           btrfs snapshots, which are atomic and copy-on-write like LVM thin (TopoLVM) or cloud disk \
           snapshots; the backup copies are real copies on the same disk.\n\
         - The shard is the lab's: a primary and two replicas with GTID replication, tablets laid out as \
           vitess-operator lays them out, the real vtsnap-snapshot, vtsnap-node and vtsnap-restore logic, \
           and fakes for the Kubernetes API, vtctld, mysqlctld and the CSI driver (cut after about 50 ms, \
           ready 100 ms later: a local driver; a cloud driver's upload adds to the snapshot's total time \
           but not to its out-of-service time). The last section repeats the snapshots on the real \
           control plane, which runs only for that section, so that its processes do not share the \
           cores with the rest.\n\
         - Data: one InnoDB table of rows with ~1 KiB of padding, generated on the primary. During every \
           measurement the primary takes ~100 single-row transactions a second, so catch-up has real work.\n\
         - Backup methods run against the same replica (the one vtsnap picks). `mariadb-backup --backup` \
           writes to a directory on the same disk (Vitess would stream it to object storage, which is \
           slower still). A replica running a Vitess backup engine is type BACKUP for the whole backup, \
           so its out-of-service time is the backup's duration.\n\
         - Provisioning ends when the new replica has applied everything the primary had when replication \
           started. Snapshot path: PVC from the online snapshot (writable clone), `vtsnap-restore`, mysqld \
           start with InnoDB crash recovery, catch-up. Backup path: `--backup`, `--prepare`, `--copy-back` \
           into an empty tablet directory, start, catch-up from the backup's GTID. Logical path (smallest \
           size only): `mariadb-dump --single-transaction --gtid`, a new initialized server, load without \
           binlog, catch-up.\n\
         - Whole run: {:.0} minutes.\n",
        total.as_secs_f64() / 60.0
    );
}

fn backup_table(s: &mut String, results: &[SizeResult]) {
    let _ = writeln!(
        s,
        "## Backup: how long the replica is out of service\n\n\
         `data` is the generated table's file; the replica's whole volume (redo, binlogs, system \
         tables) is listed with every run at the end.\n\n\
         | data | runs | cold snapshot: out of service | cold: total | online snapshot: out of service | online: total | mariadb-backup: out of service (= duration) | mariadb-backup ÷ cold out of service | mariadb-backup ÷ online total |\n\
         |---|---|---|---|---|---|---|---|---|"
    );
    for r in results {
        let _ = writeln!(
            s,
            "| {:.1} GiB | {} | {:.1} s | {:.1} s | 0 s | {:.1} s | {:.1} s | {:.1}× | {:.1}× |",
            gib_of(r),
            r.runs.len(),
            med_s(&r.runs, |x| x.cold_fence_ms),
            med_s(&r.runs, |x| x.cold_total_ms),
            med_s(&r.runs, |x| x.online_total_ms),
            med_s(&r.runs, |x| x.xb_backup_ms),
            med_ratio(&r.runs, |x| x.xb_backup_ms, |x| x.cold_fence_ms),
            med_ratio(&r.runs, |x| x.xb_backup_ms, |x| x.online_total_ms),
        );
    }
}

fn med_ms(runs: &[Run], f: impl Fn(&Run) -> u64) -> f64 {
    median(runs.iter().map(|r| f(r) as f64).collect())
}

fn at_target(worst: u64) -> String {
    if worst <= OVERHEAD_TARGET_MS {
        "yes".to_owned()
    } else {
        format!("no: {} ms over", worst - OVERHEAD_TARGET_MS)
    }
}

fn fence_table(s: &mut String, results: &[SizeResult]) {
    let _ = write!(
        s,
        "\n## The cold fence window, step by step\n\n\
         Each step's time is from the job's own record (`step_timings` in its JSON line): from the end \
         of the step before to the end of this one, in milliseconds, medians over runs. Fence and probe \
         come before the window; the window runs from the probe's answer to the fence's deletion. \
         `shutdown` is the job asking the node helper to stop mysqld until the helper reports it \
         stopped; `release (start)` the same for the release, in which the helper starts mysqld. \
         mysqld's own shutdown and start are as mysqlctld timed them. **Overhead = window − (mysqld \
         shutdown + mysqld start)**, as the issue defines it: the node helper's hand-offs, vtctld's calls, \
         the hold, the VolumeSnapshot's creation and the CSI driver's cut (about 50 ms of it here). The \
         lab's vtctld is a fake whose StopReplication, position and StartReplication each run a SQL \
         client through `podman exec` (its time is measured, and a real vttablet answers over the \
         connection it holds), so the last columns also give **vtsnap's own overhead = overhead − the \
         fake vtctld's exec time**. Target: at most {OVERHEAD_TARGET_MS} ms.\n\n|"
    );
    let _ = write!(s, " data |");
    for (col, _) in COLD_STEPS {
        let _ = write!(s, " {col} |");
    }
    let _ = writeln!(
        s,
        " **window** | mysqld shutdown (mysqlctld) | mysqld start (mysqlctld) | overhead (max) | at target | fake vtctld's exec | **vtsnap's own overhead** (max) | at target |"
    );
    let _ = writeln!(s, "|{}", "---|".repeat(COLD_STEPS.len() + 9));
    for r in results {
        let x = &r.runs;
        let _ = write!(s, "| {:.1} GiB |", gib_of(r));
        for (_, prefix) in COLD_STEPS {
            let _ = write!(s, " {:.0} |", med_ms(x, |r| r.cold_step_ms(prefix)));
        }
        let worst = x.iter().map(Run::cold_overhead_ms).max().unwrap_or(0);
        let worst_own = x.iter().map(Run::cold_own_overhead_ms).max().unwrap_or(0);
        let _ = writeln!(
            s,
            " **{:.0}** | {:.0} | {:.0} | {:.0} ({worst}) | {} | {:.0} | **{:.0}** ({worst_own}) | {} |",
            med_ms(x, |r| r.cold_fence_ms),
            med_ms(x, |r| r.cold_mysqld_shutdown_ms),
            med_ms(x, |r| r.cold_mysqld_start_ms),
            med_ms(x, Run::cold_overhead_ms),
            at_target(worst),
            med_ms(x, |r| r.cold_fake_vtctld_ms),
            med_ms(x, Run::cold_own_overhead_ms),
            at_target(worst_own),
        );
    }
}

fn provisioning_table(s: &mut String, results: &[SizeResult]) {
    let _ = writeln!(
        s,
        "\n## Provisioning a new replica\n\n\
         | data | snapshot: clone | restore | start | catch-up | **snapshot total** | backup: --backup | --prepare | --copy-back | start | catch-up | **backup total** | backup total ÷ snapshot total | (without --backup) ÷ snapshot total |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for r in results {
        let x = &r.runs;
        let _ = writeln!(
            s,
            "| {:.1} GiB | {:.2} s | {:.3} s | {:.1} s | {:.1} s | **{:.1} s** | {:.1} s | {:.1} s | {:.1} s | {:.1} s | {:.1} s | **{:.1} s** | {:.1}× | {:.1}× |",
            gib_of(r),
            med_s(x, |x| x.snap.clone_ms),
            med_s(x, |x| x.snap.restore_ms),
            med_s(x, |x| x.snap.start_ms),
            med_s(x, |x| x.snap.catch_up_ms),
            med_s(x, Run::snap_total),
            med_s(x, |x| x.xb_backup_ms),
            med_s(x, |x| x.xb_prepare_ms),
            med_s(x, |x| x.xb_copy_back_ms),
            med_s(x, |x| x.xb_start_ms),
            med_s(x, |x| x.xb_catch_up_ms),
            med_s(x, Run::xb_total),
            med_ratio(x, Run::xb_total, Run::snap_total),
            med_ratio(x, Run::xb_restore_total, Run::snap_total),
        );
    }
}

fn dump_table(s: &mut String, results: &[SizeResult]) {
    let Some(r) = results
        .iter()
        .find(|r| r.runs.iter().any(|x| x.dump_ms.is_some()))
    else {
        return;
    };
    let x: Vec<Run> = r
        .runs
        .iter()
        .filter(|x| x.dump_ms.is_some())
        .cloned()
        .collect();
    let o = |f: fn(&Run) -> Option<u64>| move |r: &Run| f(r).unwrap_or(0);
    let _ = writeln!(
        s,
        "\n## Logical dump at the smallest size\n\n\
         | data | mariadb-dump | new server start (initialize) | load | catch-up | **total** | dump total ÷ snapshot total | dump total ÷ backup total |\n\
         |---|---|---|---|---|---|---|---|\n\
         | {:.1} GiB | {:.1} s | {:.1} s | {:.1} s | {:.1} s | **{:.1} s** | {:.1}× | {:.1}× |",
        gib_of(r),
        med_s(&x, o(|r| r.dump_ms)),
        med_s(&x, o(|r| r.dump_start_ms)),
        med_s(&x, o(|r| r.load_ms)),
        med_s(&x, o(|r| r.dump_catch_up_ms)),
        med_s(&x, o(Run::dump_total)),
        med_ratio(&x, o(Run::dump_total), Run::snap_total),
        med_ratio(&x, o(Run::dump_total), Run::xb_total),
    );
}

fn series_table(s: &mut String, series: &[SnapshotSeries]) {
    if series.is_empty() {
        return;
    }
    let real = series
        .iter()
        .find_map(|x| x.kube_version.as_deref())
        .unwrap_or("?");
    let _ = writeln!(
        s,
        "\n## Snapshots through the real control plane\n\n\
         The same snapshots on a small shard ({SERIES_ROWS} rows) under the same load, once on the \
         in-memory API with the fake CSI driver and once on the real control plane (`make cluster-up`: \
         etcd, kube-apiserver {real}, kube-controller-manager, snapshot-controller, csi-snapshotter, \
         csi-provisioner and vtsnap's btrfs CSI driver, its cut delayed by the same 50 ms through the \
         VolumeSnapshotClass). Medians over runs, in milliseconds. `to cut` is from the job's start to \
         the cut observed; `to ready` from its start to its exit, once `readyToUse`.\n\n\
         | control plane | mode | runs | to cut | to ready | fence window | created → cut |\n\
         |---|---|---|---|---|---|---|"
    );
    for x in series {
        for mode in ["cold", "online"] {
            let runs: Vec<&SnapshotRun> = x.runs.iter().filter(|r| r.mode == mode).collect();
            let med =
                |f: fn(&SnapshotRun) -> u64| median(runs.iter().map(|r| f(r) as f64).collect());
            let _ = writeln!(
                s,
                "| {} | {mode} | {} | {:.0} | {:.0} | {:.0} | {:.0} |",
                x.control_plane,
                runs.len(),
                med(|r| r.to_cut_ms),
                med(|r| r.to_ready_ms),
                med(|r| r.fence_window_ms),
                med(|r| r.cut_latency_ms),
            );
        }
    }
}

/// Per-GiB rate of `f` at the largest size, in seconds per GiB.
fn per_gib(r: &SizeResult, f: impl Fn(&Run) -> u64) -> f64 {
    med_s(&r.runs, f) / gib_of(r).max(f64::MIN_POSITIVE)
}

fn one_terabyte(s: &mut String, results: &[SizeResult]) {
    let Some(big) = results.last() else {
        return;
    };
    const TIB: f64 = 1024.0;
    let backup = per_gib(big, |x| x.xb_backup_ms);
    let restore = per_gib(big, Run::xb_restore_total);
    let flat =
        |f: &dyn Fn(&Run) -> u64| median(results.iter().map(|r| med_s(&r.runs, f)).collect());
    let window = flat(&|x| x.cold_fence_ms);
    let online = flat(&|x| x.online_total_ms);
    let snap_ready = flat(&|x| x.snap.provisioning_ms());
    let hours = |secs: f64| secs / 3600.0;
    let _ = writeln!(
        s,
        "\n## At 1 TB: a model, not a measurement\n\n\
         What each path's cost grows with, from the rates above (the {:.1} GiB row for the per-GiB \
         rates, the median over sizes for what did not grow with size). **This section is arithmetic \
         on this machine's figures, not a run at 1 TB.**\n\n\
         - `mariadb-backup --backup` reads and writes every byte: {backup:.2} s per GiB here, so about \
           {:.1} hours at 1 TB, and the replica is out of service for all of it. Streaming to object \
           storage is usually slower than this local disk.\n\
         - Provisioning from that backup (`--prepare`, `--copy-back`, start, catch-up) copies every byte \
           again: {restore:.2} s per GiB, about {:.1} hours at 1 TB, plus the download from object \
           storage, which this lab does not have.\n\
         - A cold snapshot's out-of-service time is the fence window, which did not grow from the \
           smallest size to the largest here (median {window:.1} s): mysqld's clean shutdown (it grows with \
           the dirty pages in the buffer pool, not with the data), mysqld's start, and vtsnap's \
           overhead. An online snapshot takes the replica out of service for no time at all \
           (median total {online:.1} s). On a real disk the snapshot's cut is metadata (LVM thin, \
           btrfs, a cloud disk's incremental snapshot); the upload of a cloud snapshot happens after \
           the cut and outside the window.\n\
         - A replica from a snapshot: clone, `vtsnap-restore` and start took a median {snap_ready:.1} s \
           at every size here, because the clone is copy-on-write. A cloud disk made from a snapshot \
           is lazily hydrated: its first reads are slower, which this lab does not show. Catch-up \
           then replays the writes made since the snapshot: its cost is (the snapshot's age × the \
           shard's write rate) ÷ the replica's apply rate, independent of the data size. With a \
           snapshot every hour and a shard writing far below its apply rate, that is minutes, not \
           the hours of the backup path.\n",
        gib_of(big),
        hours(backup * TIB),
        hours(restore * TIB),
    );
}

/// The benchmarks page.
pub fn render(res: &BenchResults, total: Duration) -> String {
    let results = &res.sizes;
    let mut s = String::new();
    method(&mut s, res, total);
    backup_table(&mut s, results);
    fence_table(&mut s, results);
    provisioning_table(&mut s, results);
    dump_table(&mut s, results);
    series_table(&mut s, &res.series);
    one_terabyte(&mut s, results);
    let _ = writeln!(s, "\n## Every run\n\n```json");
    for r in results {
        let _ = writeln!(
            s,
            "{}",
            serde_json::json!({"requested_gib": r.requested_gib, "volume_mib": r.measured_mib, "table_mib": r.table_mib,
                "rows": r.rows, "setup_s": (r.seed_s * 10.0).round() / 10.0, "cold_caches": r.cold_caches, "runs": r.runs})
        );
    }
    for k in &res.skipped {
        let _ = writeln!(s, "{}", serde_json::json!({ "skipped": k }));
    }
    for x in &res.series {
        let _ = writeln!(s, "{}", serde_json::json!({ "control_plane_series": x }));
    }
    let _ = writeln!(s, "```");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(snap: u64, xb_backup: u64) -> Run {
        Run {
            cold_fence_ms: 2_000,
            snap: ProvisionTimes {
                clone_ms: snap,
                ..ProvisionTimes::default()
            },
            xb_backup_ms: xb_backup,
            xb_prepare_ms: 1_000,
            ..Run::default()
        }
    }

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(vec![]).is_nan());
    }

    #[test]
    fn ratios_are_taken_per_run_then_the_median() {
        // Per run 10/1, 40/2, 900/3 → 10, 20, 300: the median ratio is 20, while the ratio
        // of the sums (950/6 ≈ 158) would let one slow run dominate.
        let r = |snap: u64, backup: u64| Run {
            snap: ProvisionTimes {
                clone_ms: snap,
                ..ProvisionTimes::default()
            },
            xb_backup_ms: backup,
            ..Run::default()
        };
        let runs = vec![r(1, 10), r(2, 40), r(3, 900)];
        assert_eq!(med_ratio(&runs, Run::xb_total, Run::snap_total), 20.0);
    }

    fn size(gib: f64) -> SizeResult {
        SizeResult {
            requested_gib: gib,
            mariadb_version: "10.11.x".into(),
            measured_mib: 1200,
            table_mib: 1024,
            rows: 1_000_000,
            seed_s: 1.0,
            cold_caches: true,
            runs: vec![run(1_000, 9_000)],
        }
    }

    fn step(step: &str, ms: u64) -> StepTiming {
        StepTiming {
            step: step.into(),
            ms,
        }
    }

    #[test]
    fn the_overhead_is_the_window_less_mysqlds_shutdown_and_start() {
        let r = Run {
            cold_fence_ms: 1_900,
            cold_mysqld_shutdown_ms: 1_200,
            cold_mysqld_start_ms: 550,
            ..Run::default()
        };
        assert_eq!(r.cold_overhead_ms(), 150);
        // A window shorter than mysqld's own times (clock skew between the two) is 0, not
        // a wrapped number.
        let odd = Run {
            cold_fence_ms: 100,
            ..r.clone()
        };
        assert_eq!(odd.cold_overhead_ms(), 0);
        let exec = Run {
            cold_fake_vtctld_ms: 100,
            ..r
        };
        assert_eq!(exec.cold_own_overhead_ms(), 50);
    }

    #[test]
    fn step_times_are_summed_by_prefix_and_the_cut_ends_the_way_to_it() {
        let steps = vec![
            step("fence acquired", 5),
            step("VolumeSnapshot a created", 7),
            step("VolumeSnapshot b created", 3),
            step("snapshot cut", 60),
            step("node released", 500),
            step("snapshot ready", 100),
        ];
        let r = Run {
            cold_steps: steps.clone(),
            ..Run::default()
        };
        assert_eq!(r.cold_step_ms("VolumeSnapshot"), 10);
        assert_eq!(r.cold_step_ms("hold"), 0);
        assert_eq!(to_cut_ms(&steps), 75);
        assert_eq!(to_cut_ms(&steps[4..]), 600, "no cut: every step counts");
    }

    #[test]
    fn the_fence_table_says_whether_each_size_is_at_target() {
        let mut big = size(8.0);
        big.runs = vec![
            Run {
                cold_fence_ms: 2_000,
                cold_mysqld_shutdown_ms: 1_000,
                cold_mysqld_start_ms: 500,
                cold_steps: vec![step("mysqld stopped", 1_100)],
                cold_fake_vtctld_ms: 350,
                ..Run::default()
            },
            Run {
                cold_fence_ms: 1_650,
                cold_mysqld_shutdown_ms: 1_000,
                cold_mysqld_start_ms: 500,
                cold_steps: vec![step("mysqld stopped", 1_050)],
                ..Run::default()
            },
        ];
        let mut small = size(1.0);
        small.runs[0].cold_mysqld_shutdown_ms = 1_900;
        let page = render(
            &BenchResults {
                sizes: vec![small, big],
                ..BenchResults::default()
            },
            Duration::from_secs(60),
        );
        // 8 GiB: overheads 500 and 150 → median 325, worst 500, 300 over the target; less
        // the fake vtctld's 350 and 0: 150 and 150.
        assert!(
            page.contains("| 325 (500) | no: 300 ms over | 175 | **150** (150) | yes |"),
            "{page}"
        );
        assert!(
            page.contains("| 1075 |"),
            "the shutdown step's median: {page}"
        );
        assert!(
            page.contains("| 100 (100) | yes | 0 | **100** (100) | yes |"),
            "{page}"
        );
    }

    #[test]
    fn skipped_sizes_and_warm_caches_are_stated() {
        let mut warm = size(1.0);
        warm.cold_caches = false;
        let page = render(
            &BenchResults {
                sizes: vec![warm],
                skipped: vec![Skipped {
                    requested_gib: 16.0,
                    needed_gib: 57.0,
                    free_gib: 40.0,
                }],
                series: vec![],
            },
            Duration::from_secs(60),
        );
        assert!(
            page.contains("**16 GiB skipped:** it needs about 57 GiB"),
            "{page}"
        );
        assert!(page.contains("there were 40 GiB"), "{page}");
        assert!(page.contains("refused to drop the page cache"), "{page}");
        assert!(page.contains(r#"{"skipped":{"free_gib":40.0"#), "{page}");
    }

    #[test]
    fn the_disk_estimate_grows_with_the_size_and_the_dump() {
        assert!(disk_needed_gib(16.0, false) > 16.0 * 3.0);
        assert!(disk_needed_gib(1.0, true) > disk_needed_gib(1.0, false));
        assert!(free_gib(Path::new("/")).is_some_and(|g| g > 0.0));
    }

    #[test]
    fn the_page_has_a_row_per_size_and_the_ratio_columns() {
        let page = render(
            &BenchResults {
                sizes: vec![size(1.0), size(4.0)],
                ..BenchResults::default()
            },
            Duration::from_secs(60),
        );
        assert!(page.contains("MariaDB 10.11.x"));
        assert_eq!(page.matches("| 1.0 GiB | 1 | 2.0 s |").count(), 2, "{page}");
        assert!(page.contains("| **1.0 s** |"), "{page}");
        assert!(page.contains("| **10.0 s** | 10.0× | 1.0× |"), "{page}");
    }
}
