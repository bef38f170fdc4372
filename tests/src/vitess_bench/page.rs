//! docs/benchmarks.md from a [`BenchRecord`]; the record rides in the page as JSON, so
//! the page can be rendered again from it (`vtsnap-lab bench-vitess --render-only`).

use std::fmt::Write as _;

use super::record::{BenchRecord, SizeRecord, VitessRun, WINDOW_STEPS};
use super::{BENCH_CNF, ROWS_PER_GIB};

/// vtsnap's own part of the cold fence window (the benchmark issue's target).
pub const OVERHEAD_TARGET_MS: u64 = 100;

const RAW_START: &str = "```json\n";
const RAW_END: &str = "\n```";

fn s(ms: f64) -> String {
    let secs = ms / 1000.0;
    if secs < 10.0 {
        format!("{secs:.2} s")
    } else {
        format!("{secs:.1} s")
    }
}

fn gib_label(z: &SizeRecord) -> String {
    format!("{:.1} GiB", z.table_mib as f64 / 1024.0)
}

fn med_ms(z: &SizeRecord, f: impl Fn(&VitessRun) -> u64) -> f64 {
    z.median(|r| f(r) as f64)
}

fn mib(bytes: f64) -> String {
    format!("{:.0} MiB", bytes / f64::from(1u32 << 20))
}

/// A table's header row and its rule.
fn table_head<'a>(out: &mut String, columns: impl IntoIterator<Item = &'a str>) {
    let (mut head, mut rule) = (String::from("|"), String::from("|"));
    for c in columns {
        let _ = write!(head, " {c} |");
        rule.push_str("---|");
    }
    let _ = writeln!(out, "{head}\n{rule}");
}

/// The largest of `f` over the size's runs (0 without runs).
fn worst_of(z: &SizeRecord, f: impl Fn(&VitessRun) -> u64) -> u64 {
    z.runs.iter().map(f).max().unwrap_or(0)
}

/// The cold window's step columns.
fn step_columns() -> impl Iterator<Item = &'static str> {
    WINDOW_STEPS.iter().map(|(column, _)| *column)
}

fn method(out: &mut String, rec: &BenchRecord) {
    let sizes: Vec<String> = rec
        .sizes
        .iter()
        .map(|z| format!("{} GiB", z.requested_gib))
        .collect();
    let cold = rec.sizes.iter().all(|z| z.cold_caches);
    let _ = writeln!(out, "## Machine and method\n");
    let _ = writeln!(out, "- Machine: {}.", rec.machine);
    let _ = writeln!(
        out,
        "- Vitess {} (vtctld, vttablet, mysqlctld, VTOrc, built from the Go module `vitess.io/vitess`) on MySQL {}, each daemon in a container of the lab's Vitess image; a primary and two replicas with GTID replication, VTOrc watching. Each tablet's volume is a btrfs subvolume on one loop-device image (a sparse file on the machine's disk); the file backup storage is a directory on the same disk. The CSI driver is the lab's in-memory one on btrfs: cut 50 ms after the VolumeSnapshot's creation, ready 100 ms later, like a local driver (LVM thin, TopoLVM); a cloud driver's upload adds to a snapshot's total time, never to its time out of service.",
        rec.vitess, rec.mysql
    );
    let _ = writeln!(
        out,
        "- Every tablet's my.cnf: Vitess's own (`mysqlctld`), the lab's lean file and `{}`, and `plugin-load-add = mysql_clone.so`; the `vt_clone` user of Vitess's `init_clone.sql`.",
        BENCH_CNF.trim().replace('\n', "`, `")
    );
    let _ = writeln!(
        out,
        "- Data: one InnoDB table of {ROWS_PER_GIB} rows per GiB, each ~1 KiB (512 random bytes and 500 repeated letters, so compression has some but not all to gain), seeded on the primary, replicated, binlogs then purged. During every measurement the primary takes a paced write load of single-row inserts, so catch-up has real work."
    );
    let _ = writeln!(
        out,
        "- Sizes: {}; {} run(s) per size. {}",
        sizes.join(", "),
        rec.runs_per_size,
        if cold {
            "**Cold caches:** before every timed phase the bench runs `sync` and drops the page cache (`/proc/sys/vm/drop_caches`), so each phase reads its data from the disk."
        } else {
            "**Warm caches: this machine refused to drop the page cache**, so the figures flatter every path that reads its data."
        }
    );
    for z in rec
        .sizes
        .iter()
        .filter(|z| z.primary_restarts > 0 || z.load_failures > 0)
    {
        let _ = writeln!(
            out,
            "- **At {} GiB the primary's mysqld died {} time(s)** (MySQL's error log ends with a crash report on a single-row insert of the write load; `mysqld_safe` restarted it) and {} inserts of the load failed and were tried again; the runs went on.",
            z.requested_gib, z.primary_restarts, z.load_failures
        );
    }
    for k in &rec.skipped {
        let _ = writeln!(
            out,
            "- **{} GiB was not measured**: it needs about {:.0} GiB of disk (three tablets, a backup, a restored tablet) and {:.0} GiB were free.",
            k.requested_gib, k.needed_gib, k.free_gib
        );
    }
    let _ = writeln!(
        out,
        "- **Backup.** vtsnap's cold and online snapshots are the real `vtsnap-snapshot run` and node helper through the real vtctld and mysqlctld. The builtin engine is `vtctldclient Backup <replica>` (the same replica vtsnap picked; defaults: pargzip compression, concurrency 4) to the file backup storage. *Out of service* is the replica's time not of type REPLICA in vtctld's record, sampled every 50 ms (DRAINED in the cold fence, BACKUP under the builtin engine); *total* is the command's wall time (vtsnap's until the snapshot is ready to use). Both end with something a new tablet can start from."
    );
    let _ = writeln!(
        out,
        "- **Provisioning** ends when the new tablet is a REPLICA in vtctld's record and its `gtid_executed` holds the primary's at the start. vtsnap: a PVC from the online snapshot (the driver's writable clone), `vtsnap-restore`, mysqlctld starting mysqld on it (InnoDB crash recovery), vttablet, VTOrc starting replication, catch-up. Builtin: a new tablet on an empty volume, mysqlctld initializing mysqld, vttablet with the operator's flags (`--restore-from-backup --backup-engine-implementation=builtin --restore-concurrency=10 --wait-for-backup-interval=10s`, file storage). CLONE: the same with `--restore-with-clone --clone-from-primary --mysql-clone-enabled --db-clone-user=vt_clone --db-clone-use-ssl=false` (the lab's mysqlds have no certificates). Bytes are the machine disk's counters (`/sys/dev/block/…/stat`, after `sync`) over the phase: everything read and written on the disk then, the write load's share included."
    );
    let _ = writeln!(
        out,
        "- VTOrc reads the topology every {:.0} s (`--topo-information-refresh-duration`; Vitess's default is 15 s): a tablet provisioned from a snapshot waits up to that long to be found and have its replication started, since vttablet does not start a restored tablet's replication and vtsnap leaves that to VTOrc (docs/design.md §2). The builtin restore and CLONE start their replication themselves.",
        rec.vtorc_refresh_ms as f64 / 1000.0
    );
    let _ = writeln!(out, "- Whole run: {:.0} minutes.\n", rec.total_s / 60.0);
}

fn ratios(out: &mut String, rec: &BenchRecord) {
    let _ = writeln!(
        out,
        "## vtsnap against each peer\n\nEach ratio is the peer's time over vtsnap's, taken within a run (same data, same replica, same minute), then the median over runs: how many times faster vtsnap is.\n"
    );
    table_head(
        out,
        [
            "data",
            "runs",
            "out of service: builtin `Backup` ÷ cold snapshot",
            "out of service: online snapshot",
            "new replica: `--restore-from-backup` ÷ vtsnap",
            "new replica: `--restore-with-clone` ÷ vtsnap",
        ],
    );
    for z in &rec.sizes {
        let _ = writeln!(
            out,
            "| {} | {} | {:.1}× | {} | {:.1}× | {:.1}× |",
            gib_label(z),
            z.runs.len(),
            z.median(VitessRun::backup_ratio),
            s(med_ms(z, |r| r.online.out_of_service_ms)),
            z.median(VitessRun::restore_ratio),
            z.median(VitessRun::clone_ratio),
        );
    }
    let _ = writeln!(out);
}

fn backups(out: &mut String, rec: &BenchRecord) {
    let _ = writeln!(
        out,
        "## Backup: how long the replica is out of service\n\nMedians over runs. `read`/`written`: the disk's bytes over the command.\n"
    );
    table_head(
        out,
        [
            "data",
            "cold: out of service",
            "cold: total",
            "online: out of service",
            "online: total",
            "builtin: out of service",
            "builtin: total",
            "builtin: stored",
            "builtin: read",
            "builtin: written",
        ],
    );
    for z in &rec.sizes {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            gib_label(z),
            s(med_ms(z, |r| r.cold.out_of_service_ms)),
            s(med_ms(z, |r| r.cold.total_ms)),
            s(med_ms(z, |r| r.online.out_of_service_ms)),
            s(med_ms(z, |r| r.online.total_ms)),
            s(med_ms(z, |r| r.builtin.out_of_service_ms)),
            s(med_ms(z, |r| r.builtin.total_ms)),
            mib(med_ms(z, |r| r.builtin_backup_bytes)),
            mib(med_ms(z, |r| r.builtin.read_bytes)),
            mib(med_ms(z, |r| r.builtin.written_bytes)),
        );
    }
    let _ = writeln!(out);
}

fn at_target(worst: u64) -> String {
    if worst <= OVERHEAD_TARGET_MS {
        "yes".into()
    } else {
        format!("no: {} ms over", worst - OVERHEAD_TARGET_MS)
    }
}

fn fence(out: &mut String, rec: &BenchRecord) {
    let _ = writeln!(
        out,
        "## The cold fence window, step by step\n\nEach step's time is from the job's own record (`step_timings`), medians over runs, in milliseconds. mysqld's own shutdown and start are read from its error log (the shutdown request to `Shutdown complete`, the server's start to `ready for connections`). **vtsnap's overhead = window − mysqld's shutdown − mysqld's start − the driver's cut**: the node helper's hand-offs, the real RPCs to vtctld, vttablet and mysqlctld, the hold and the VolumeSnapshot's creation. The last rows give each step's share of it. Target: at most {OVERHEAD_TARGET_MS} ms, flat in data size.\n\nMuch of the shutdown and start steps' excess is Vitess's own path, not vtsnap's: mysqlctld runs `mysqladmin shutdown` and looks for the pid file every 100 ms; its `Start` runs the `mysqld_safe` script before mysqld. To show how much, each run also calls mysqlctld's `Shutdown` and `Start` directly (the node helper's client calls, nothing else of vtsnap) on the replica it provisioned from the snapshot, and reads mysqld's own times for that restart from its error log: *mysqlctld's shutdown + start paths* is what those calls took beyond mysqld's own, and **vtsnap's own** is the overhead less that: the node helper's hand-offs through the fence lease, vtctld's and vttablet's RPCs (drain, StopReplication, the position, StartReplication, the type back), the hold and the VolumeSnapshot's creation.\n"
    );
    table_head(
        out,
        std::iter::once("data").chain(step_columns()).chain([
            "**window**",
            "mysqld shutdown",
            "mysqld start",
            "**overhead** (max)",
            "at target",
            "of it mysqlctld's shutdown + start paths",
            "**vtsnap's own** (max)",
        ]),
    );
    for z in &rec.sizes {
        let mut row = format!("| {} |", gib_label(z));
        for (_, prefix) in WINDOW_STEPS {
            let _ = write!(
                row,
                " {:.0} |",
                med_ms(z, |r| r.cold_window.step_ms(prefix))
            );
        }
        let worst = worst_of(z, |r| r.cold_window.overhead_ms());
        let own_worst = worst_of(z, VitessRun::vtsnap_own_ms);
        let _ = writeln!(
            out,
            "{row} **{:.0}** | {:.0} | {:.0} | **{:.0}** ({worst}) | {} | {:.0} + {:.0} | **{:.0}** ({own_worst}) |",
            med_ms(z, |r| r.cold_window.window_ms),
            med_ms(z, |r| r.cold_window.mysqld_shutdown_ms),
            med_ms(z, |r| r.cold_window.mysqld_start_ms),
            med_ms(z, |r| r.cold_window.overhead_ms()),
            at_target(worst),
            med_ms(z, |r| r.mysqlctld.shutdown_excess_ms()),
            med_ms(z, |r| r.mysqlctld.start_excess_ms()),
            med_ms(z, VitessRun::vtsnap_own_ms),
        );
    }
    let _ = writeln!(
        out,
        "\nThe overhead's share of each step (the step less mysqld's own part or the driver's cut), medians in milliseconds:\n"
    );
    table_head(out, std::iter::once("data").chain(step_columns()));
    for z in &rec.sizes {
        let mut row = format!("| {} |", gib_label(z));
        for (i, _) in WINDOW_STEPS.iter().enumerate() {
            let _ = write!(
                row,
                " {:.0} |",
                med_ms(z, |r| r.cold_window.overhead_by_step()[i].1)
            );
        }
        let _ = writeln!(out, "{row}");
    }
    let _ = writeln!(out);
}

/// One provisioning path of a run.
type PathOf = fn(&VitessRun) -> &super::record::Provisioned;

fn provisioning(out: &mut String, rec: &BenchRecord) {
    let _ = writeln!(
        out,
        "## Provisioning a new replica\n\nFrom nothing to a REPLICA holding the primary's position at the start; medians over runs; each path's phases in the order they ran.\n"
    );
    table_head(
        out,
        ["data", "path", "phases", "**total**", "read", "written"],
    );
    for z in &rec.sizes {
        let paths: [(&str, PathOf); 3] = [
            ("vtsnap (snapshot)", |r| &r.vtsnap),
            ("`--restore-from-backup`", |r| &r.restore),
            ("`--restore-with-clone`", |r| &r.clone),
        ];
        for (name, get) in paths {
            let phases: Vec<String> = z
                .runs
                .first()
                .map(|r| get(r).phases.clone())
                .unwrap_or_default()
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let m = z.median(|r| get(r).phases.get(i).map_or(0.0, |x| x.ms as f64));
                    format!("{} {}", p.phase, s(m))
                })
                .collect();
            let _ = writeln!(
                out,
                "| {} | {name} | {} | **{}** | {} | {} |",
                gib_label(z),
                phases.join(", "),
                s(med_ms(z, |r| get(r).total_ms())),
                mib(med_ms(z, |r| get(r).read_bytes)),
                mib(med_ms(z, |r| get(r).written_bytes)),
            );
        }
    }
    let _ = writeln!(out);
}

/// Whether each median ratio grew from each size to the next.
fn growing(rec: &BenchRecord, f: fn(&VitessRun) -> f64) -> bool {
    rec.sizes
        .windows(2)
        .all(|w| w[1].median(f) >= w[0].median(f))
}

fn targets(out: &mut String, rec: &BenchRecord) {
    let Some(z) = rec.sizes.last() else {
        return;
    };
    let met = |ok: bool| if ok { "**met**" } else { "**missed**" };
    let backup = z.median(VitessRun::backup_ratio);
    let online = med_ms(z, |r| r.online.out_of_service_ms);
    let restore = z.median(VitessRun::restore_ratio);
    let clone = z.median(VitessRun::clone_ratio);
    let worst = worst_of(z, |r| r.cold_window.overhead_ms());
    let grow = [
        VitessRun::backup_ratio as fn(&VitessRun) -> f64,
        VitessRun::restore_ratio,
        VitessRun::clone_ratio,
    ]
    .iter()
    .all(|f| growing(rec, *f));
    let _ = writeln!(
        out,
        "## Targets, at the largest size measured ({})\n\nThe issue's targets are stated for 16 GiB; where that size was not measured, these are the largest size's figures.\n",
        gib_label(z)
    );
    let _ = writeln!(out, "| target | measured | |\n|---|---|---|");
    let _ = writeln!(
        out,
        "| cold snapshot's time out of service ≤ 1/20 of the builtin backup's | 1/{backup:.1} | {} |",
        met(backup >= 20.0)
    );
    let _ = writeln!(
        out,
        "| online snapshot's time out of service 0 | {} | {} |",
        s(online),
        met(online == 0.0)
    );
    let _ = writeln!(
        out,
        "| provisioning ≥ 20× faster than the builtin restore | {restore:.1}× | {} |",
        met(restore >= 20.0)
    );
    let _ = writeln!(
        out,
        "| provisioning ≥ 5× faster than CLONE | {clone:.1}× | {} |",
        met(clone >= 5.0)
    );
    let _ = writeln!(
        out,
        "| every ratio growing with size | {} | {} |",
        if grow { "yes" } else { "no" },
        met(grow)
    );
    let own = worst_of(z, VitessRun::vtsnap_own_ms);
    let _ = writeln!(
        out,
        "| the fence overhead (window − mysqld's own − the cut) ≤ {OVERHEAD_TARGET_MS} ms | {worst} ms (worst run) | {} |",
        met(worst <= OVERHEAD_TARGET_MS)
    );
    let _ = writeln!(
        out,
        "| … of it, without mysqlctld's own shutdown and start paths ≤ {OVERHEAD_TARGET_MS} ms | {own} ms (worst run) | {} |\n",
        met(own <= OVERHEAD_TARGET_MS)
    );
}

/// The whole page.
pub fn render(rec: &BenchRecord) -> String {
    let mut out = String::from(
        "# Benchmarks: vtsnap against Vitess's own backup, restore and clone\n\n\
         Written by `make bench-vitess` (`vtsnap-lab bench-vitess`); every number below was measured by that run, \
         and the page is rendered from the raw record at its end (`vtsnap-lab bench-vitess --render-only` renders it again). \
         The earlier comparison with `mariadb-backup` on MariaDB is in [benchmarks-mariadb.md](benchmarks-mariadb.md).\n\n",
    );
    method(&mut out, rec);
    ratios(&mut out, rec);
    backups(&mut out, rec);
    provisioning(&mut out, rec);
    fence(&mut out, rec);
    targets(&mut out, rec);
    let raw = serde_json::to_string(rec).unwrap_or_default();
    let _ = write!(out, "## Every run\n\n{RAW_START}{raw}{RAW_END}\n");
    out
}

/// The record a page rendered by [`render`] carries.
pub fn read_record(page: &str) -> Result<BenchRecord, String> {
    let at = page
        .rfind(RAW_START)
        .ok_or("the page has no raw record (a ```json block)")?;
    let rest = &page[at + RAW_START.len()..];
    let end = rest
        .find(RAW_END)
        .ok_or("the page's raw record is not closed")?;
    serde_json::from_str(&rest[..end]).map_err(|e| format!("the page's raw record: {e}"))
}

#[cfg(test)]
mod tests {
    use super::super::record::{Backup, ColdWindow, Phase, Provisioned, SkippedSize, Step};
    use super::*;

    fn prov(ms: u64) -> Provisioned {
        Provisioned {
            phases: vec![
                Phase {
                    phase: "a".into(),
                    ms: ms / 2,
                },
                Phase {
                    phase: "b".into(),
                    ms: ms - ms / 2,
                },
            ],
            read_bytes: 1 << 20,
            written_bytes: 2 << 20,
        }
    }

    fn run(builtin_out: u64, restore: u64, overhead: u64) -> VitessRun {
        VitessRun {
            cold: Backup {
                out_of_service_ms: 2000,
                total_ms: 2500,
                ..Backup::default()
            },
            cold_window: ColdWindow {
                window_ms: 1900 + overhead,
                steps: vec![Step {
                    step: "snapshot cut".into(),
                    ms: 100,
                }],
                mysqld_shutdown_ms: 600,
                mysqld_start_ms: 1200,
            },
            builtin: Backup {
                out_of_service_ms: builtin_out,
                total_ms: builtin_out + 500,
                ..Backup::default()
            },
            vtsnap: prov(10_000),
            restore: prov(restore),
            clone: prov(restore / 2),
            ..VitessRun::default()
        }
    }

    fn record(overhead: u64) -> BenchRecord {
        let size = |gib: f64, k: u64| SizeRecord {
            requested_gib: gib,
            table_mib: (gib * 1100.0) as u64,
            cold_caches: true,
            runs: vec![run(20_000 * k, 30_000 * k, overhead); 3],
            ..SizeRecord::default()
        };
        BenchRecord {
            machine: "2 cores".into(),
            vitess: "v0.24.4".into(),
            mysql: "9.7.4".into(),
            runs_per_size: 3,
            vtorc_refresh_ms: 5000,
            sizes: vec![size(1.0, 1), size(4.0, 4)],
            skipped: vec![SkippedSize {
                requested_gib: 16.0,
                needed_gib: 80.0,
                free_gib: 50.0,
            }],
            total_s: 600.0,
        }
    }

    #[test]
    fn the_page_reads_back_the_record_it_was_rendered_from() {
        let rec = record(50);
        let page = render(&rec);
        assert_eq!(read_record(&page).unwrap(), rec);
        assert_eq!(render(&read_record(&page).unwrap()), page);
    }

    #[test]
    fn the_ratios_table_has_a_row_per_size_with_peer_over_vtsnap() {
        let page = render(&record(50));
        // 1 GiB: 20000/2000 = 10×, 30000/10000 = 3×, 15000/10000 = 1.5×
        assert!(
            page.contains("| 1.1 GiB | 3 | 10.0× | 0.00 s | 3.0× | 1.5× |"),
            "{page}"
        );
        assert!(
            page.contains("| 4.3 GiB | 3 | 40.0× | 0.00 s | 12.0× | 6.0× |"),
            "{page}"
        );
    }

    #[test]
    fn targets_are_stated_met_or_missed_with_the_figure() {
        let page = render(&record(50));
        assert!(page.contains("| 1/40.0 | **met** |"), "{page}");
        assert!(page.contains("| 12.0× | **missed** |"), "{page}");
        assert!(page.contains("| 6.0× | **met** |"), "{page}");
        assert!(page.contains("| 50 ms (worst run) | **met** |"), "{page}");
        let mut split = record(180);
        for z in &mut split.sizes {
            for r in &mut z.runs {
                r.mysqlctld = super::super::record::MysqlctldDirect {
                    shutdown_call_ms: 650,
                    start_call_ms: 1250,
                    mysqld_shutdown_ms: 600,
                    mysqld_start_ms: 1200,
                };
            }
        }
        let page = render(&split);
        assert!(
            page.contains("| 180 ms (worst run) | **missed** |"),
            "{page}"
        );
        assert!(page.contains("| 80 ms (worst run) | **met** |"), "{page}");
        assert!(page.contains("| 50 + 50 | **80** (80) |"), "{page}");
        let over = render(&record(180));
        assert!(
            over.contains("| 180 ms (worst run) | **missed** |"),
            "{over}"
        );
        assert!(over.contains("no: 80 ms over"), "{over}");
    }

    #[test]
    fn skipped_sizes_and_warm_caches_are_stated() {
        let mut rec = record(50);
        assert!(render(&rec).contains("**16 GiB was not measured**"));
        assert!(render(&rec).contains("**Cold caches:**"));
        rec.sizes[0].cold_caches = false;
        assert!(render(&rec).contains("**Warm caches"));
    }

    #[test]
    fn a_primary_that_died_is_stated() {
        let mut rec = record(50);
        assert!(!render(&rec).contains("primary's mysqld died"));
        rec.sizes[1].primary_restarts = 1;
        rec.sizes[1].load_failures = 7;
        assert!(render(&rec).contains("**At 4 GiB the primary's mysqld died 1 time(s)**"));
        assert!(render(&rec).contains("7 inserts of the load failed"));
    }

    #[test]
    fn a_page_without_a_record_is_refused_by_name() {
        assert!(
            read_record("# nothing")
                .unwrap_err()
                .contains("no raw record")
        );
        assert!(
            read_record("```json\n{")
                .unwrap_err()
                .contains("not closed")
        );
        assert!(
            read_record("```json\n{\n```")
                .unwrap_err()
                .contains("raw record:")
        );
    }
}
