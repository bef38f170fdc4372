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

use crate::demo::take_snapshot;
use crate::provision::{self, ProvisionTimes, catch_up_from, ms, start_server};
use crate::resources;
use crate::shard::{DATABASE, Lab, LabOptions, free_port, inserts_load};
use crate::timeline::Timeline;
use vtsnap_testkit::btrfs::{BtrfsVolume, btrfs};

/// Rows per GiB of generated data (rows of ~1 KiB of padding).
const ROWS_PER_GIB: u64 = 1_000_000;
const ROW_BYTES: u32 = 1024;

#[derive(Debug, Clone, Default, Serialize)]
pub struct Run {
    pub cold_fence_ms: u64,
    pub cold_total_ms: u64,
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
}

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
    pub runs: Vec<Run>,
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

fn du_mib(p: &Path) -> u64 {
    std::process::Command::new("du")
        .args(["-s", "--block-size=1M"])
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
async fn one_run(lab: &Lab, run: usize, dump_too: bool) -> Run {
    let mut r = Run::default();
    let tl = &lab.timeline;

    // Backups.
    let t = Instant::now();
    let cold = take_snapshot(lab, false).await;
    r.cold_total_ms = ms(t.elapsed());
    r.cold_fence_ms = cold.fence_window_ms.unwrap_or(0);
    let t = Instant::now();
    let online = take_snapshot(lab, true).await;
    r.online_total_ms = ms(t.elapsed());
    let (_, replica) = lab.tablet_by_alias(online.target.as_deref().unwrap_or_default());

    // Provisioning from the online snapshot, right after it was taken.
    let snap_uid = TabletUid::new(400 + u32::try_from(run).unwrap_or(0));
    r.snap = provision::from_snapshot(lab, online.snapshot.as_deref().unwrap_or(""), snap_uid)
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

/// Measures one data size.
pub async fn bench_size(gib: f64, runs: usize, dump_too: bool, timeline: Timeline) -> SizeResult {
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
    for run in 1..=runs {
        timeline.mark(format!("bench: {gib} GiB, run {run} of {runs}"));
        out.push(one_run(&lab, run, dump_too).await);
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
    SizeResult {
        requested_gib: gib,
        mariadb_version,
        measured_mib,
        table_mib,
        rows,
        seed_s,
        runs: out,
    }
}

fn machine() -> String {
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

/// The benchmarks page.
pub fn render(results: &[SizeResult], total: Duration) -> String {
    let mariadb_version = results.first().map_or("?", |r| r.mariadb_version.as_str());
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Benchmarks: volume snapshots against mariadb-backup\n\n\
         Written by `make bench-lab` (`vtsnap-lab bench`); every number below was measured by that run. \
         Times are medians over runs; each ratio is computed within a run (same data, same replica, same \
         minute) and then the median is taken.\n\n\
         ## Machine and method\n\n\
         - Machine: {}.\n\
         - MariaDB {mariadb_version} from Debian, in Podman containers; each tablet's volume is a btrfs \
           subvolume on one loop-device image (a sparse file on the machine's disk). The snapshots are \
           btrfs snapshots, which are atomic and copy-on-write like LVM thin (TopoLVM) or cloud disk \
           snapshots; the backup copies are real copies on the same disk.\n\
         - The shard is the lab's: a primary and two replicas with GTID replication, tablets laid out as \
           vitess-operator lays them out, the real vtsnap-snapshot, vtsnap-node and vtsnap-restore logic, \
           and fakes for the Kubernetes API, vtctld, mysqlctld and the CSI driver (cut after about 50 ms, \
           ready 100 ms later: a local driver; a cloud driver's upload adds to the snapshot's total time \
           but not to its out-of-service time).\n\
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
         - The machine's RAM holds the generated data, so much of it is in the page cache: \
           `mariadb-backup` and `mariadb-dump` read it from memory, which favors them. A 1.3 TB \
           shard is read from disk.\n\
         - Whole run: {:.0} minutes.\n",
        machine(),
        total.as_secs_f64() / 60.0
    );
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
            r.table_mib as f64 / 1024.0,
            r.runs.len(),
            med_s(&r.runs, |x| x.cold_fence_ms),
            med_s(&r.runs, |x| x.cold_total_ms),
            med_s(&r.runs, |x| x.online_total_ms),
            med_s(&r.runs, |x| x.xb_backup_ms),
            med_ratio(&r.runs, |x| x.xb_backup_ms, |x| x.cold_fence_ms),
            med_ratio(&r.runs, |x| x.xb_backup_ms, |x| x.online_total_ms),
        );
    }
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
            r.table_mib as f64 / 1024.0,
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
    if let Some(r) = results
        .iter()
        .find(|r| r.runs.iter().any(|x| x.dump_ms.is_some()))
    {
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
            r.table_mib as f64 / 1024.0,
            med_s(&x, o(|r| r.dump_ms)),
            med_s(&x, o(|r| r.dump_start_ms)),
            med_s(&x, o(|r| r.load_ms)),
            med_s(&x, o(|r| r.dump_catch_up_ms)),
            med_s(&x, o(Run::dump_total)),
            med_ratio(&x, o(Run::dump_total), Run::snap_total),
            med_ratio(&x, o(Run::dump_total), Run::xb_total),
        );
    }
    let _ = writeln!(s, "\n## Every run\n\n```json");
    for r in results {
        let _ = writeln!(
            s,
            "{}",
            serde_json::json!({"requested_gib": r.requested_gib, "volume_mib": r.measured_mib, "table_mib": r.table_mib,
                "rows": r.rows, "setup_s": (r.seed_s * 10.0).round() / 10.0, "runs": r.runs})
        );
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

    #[test]
    fn the_page_has_a_row_per_size_and_the_ratio_columns() {
        let size = |gib: f64| SizeResult {
            requested_gib: gib,
            mariadb_version: "10.11.x".into(),
            measured_mib: 1200,
            table_mib: 1024,
            rows: 1_000_000,
            seed_s: 1.0,
            runs: vec![run(1_000, 9_000)],
        };
        let page = render(&[size(1.0), size(4.0)], Duration::from_secs(60));
        assert!(page.contains("MariaDB 10.11.x"));
        assert_eq!(page.matches("| 1.0 GiB | 1 | 2.0 s |").count(), 2, "{page}");
        assert!(page.contains("| **1.0 s** |"), "{page}");
        assert!(page.contains("| **10.0 s** | 10.0× | 1.0× |"), "{page}");
    }
}
