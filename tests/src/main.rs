//! `vtsnap-lab`: the local lab's entry point (`make demo`, `make bench-lab`, `make soak-lab`).

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use vtsnap_lab::bench::{self, BenchResults, render};
use vtsnap_lab::control_plane::Choice;
use vtsnap_lab::demo::run_demo;
use vtsnap_lab::shard::{Lab, LabOptions};
use vtsnap_lab::timeline::Timeline;
use vtsnap_lab::vitess_demo::run_vitess_demo;
use vtsnap_lab::vitess_lab::{VitessLab, drop_and_check_nothing_left};

#[derive(Debug, Parser)]
#[command(
    name = "vtsnap-lab",
    about = "A Vitess shard on one machine: real Vitess 24 on MySQL 9.7 (vitess), or real MariaDB behind fakes of vtctld and mysqlctld (demo, bench, soak), on btrfs, with the real vtsnap programs and the in-memory Kubernetes API and CSI driver or a real cluster",
    after_help = "Examples:\n  vtsnap-lab vitess\n  vtsnap-lab demo\n  vtsnap-lab demo --seed-rows 200000\n  vtsnap-lab demo --kubeconfig target/local-cluster/kubeconfig\n  vtsnap-lab bench-vitess --sizes-gib 1,4 --runs 3\n  vtsnap-lab bench-vitess --render-only --out docs/benchmarks.md\n  vtsnap-lab bench --sizes-gib 1,4,8 --runs 3 --out docs/benchmarks-mariadb.md\n  vtsnap-lab soak --duration 30m\n\nNeeds root, Podman (DOCKER_HOST pointing at its API socket), btrfs and loop devices:\nrun through `make demo`, which installs and builds what is missing.\n\nExit codes: 0 every check held; 1 a check failed (the JSON line says which); 2 bad\nflags; 101 a lab step failed (the message names it). The lab's containers and loop\ndevice are removed in every case, also on Ctrl-C."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// `make demo`: a real Vitess 24 shard on MySQL 9.7 (etcd, vtctld, VTOrc, mysqlctld
    /// and vttablet); cold and online snapshots under load by the real vtsnap-snapshot and
    /// node helper through the real vtctld and mysqlctld, a new tablet from each that
    /// vttablet serves and VTOrc catches up, checksums, GC.
    Vitess,
    /// The MariaDB lab (`make demo-mariadb`, `make demo-real`): cold and online snapshots
    /// under load, a new replica from each, checksums, drills, GC, with fakes of vtctld and
    /// mysqlctld.
    Demo {
        /// Rows seeded into the shard before the load starts.
        #[arg(long, env = "VTSNAP_LAB_SEED_ROWS", default_value_t = 50_000)]
        seed_rows: u64,
        /// Seconds from VolumeSnapshot creation to the cut. Longer than the supervisor's
        /// restart delay plus a mysqld start, so that its `Start` lands inside the cold cut.
        #[arg(long, env = "VTSNAP_LAB_CUT_DELAY", default_value_t = 8.0)]
        cut_delay: f64,
        /// Seconds from the cut to `readyToUse` (the driver's upload; in-memory only).
        #[arg(long, env = "VTSNAP_LAB_UPLOAD_DELAY", default_value_t = 2.0)]
        upload_delay: f64,
        /// Run on the real cluster this kubeconfig names (`make demo-real`: the local
        /// control plane) instead of the in-memory API and fake CSI driver.
        #[arg(long, env = "VTSNAP_LAB_KUBECONFIG")]
        kubeconfig: Option<std::path::PathBuf>,
    },
    /// vtsnap against Vitess's own backup (`vtctldclient Backup`, builtin engine), restore
    /// (`--restore-from-backup`) and clone (`--restore-with-clone`) on the real Vitess lab;
    /// writes a Markdown page with the raw record of every run.
    BenchVitess {
        /// Data sizes in GiB, comma-separated (fractions allowed).
        #[arg(
            long,
            env = "VTSNAP_LAB_BENCH_SIZES",
            value_delimiter = ',',
            default_value = "1,4"
        )]
        sizes_gib: Vec<f64>,
        /// Runs per size (medians are taken over them).
        #[arg(long, env = "VTSNAP_LAB_BENCH_RUNS", default_value_t = 3)]
        runs: usize,
        /// Where the page goes.
        #[arg(
            long,
            env = "VTSNAP_LAB_BENCH_OUT",
            default_value = "docs/benchmarks.md"
        )]
        out: std::path::PathBuf,
        /// Measure nothing: render the page again from the raw record it carries.
        #[arg(long)]
        render_only: bool,
        /// VTOrc's topology refresh (`--topo-information-refresh-duration`): how long a
        /// tablet provisioned from a snapshot may wait for VTOrc to start its replication.
        #[arg(long, env = "VTSNAP_LAB_VTORC_REFRESH", default_value = "5s", value_parser = parse_duration)]
        vtorc_refresh: Duration,
    },
    /// Snapshots against mariadb-backup and mariadb-dump; writes a Markdown page.
    Bench {
        /// Data sizes in GiB, comma-separated (fractions allowed).
        #[arg(
            long,
            env = "VTSNAP_LAB_BENCH_SIZES",
            value_delimiter = ',',
            default_value = "1,4,8"
        )]
        sizes_gib: Vec<f64>,
        /// Runs per size (medians are taken over them).
        #[arg(long, env = "VTSNAP_LAB_BENCH_RUNS", default_value_t = 3)]
        runs: usize,
        /// Where the page goes.
        #[arg(
            long,
            env = "VTSNAP_LAB_BENCH_OUT",
            default_value = "docs/benchmarks-mariadb.md"
        )]
        out: std::path::PathBuf,
        /// After the sizes, also time snapshots on the real control plane: this script's
        /// `up` starts it (and prints nothing on stdout), its `down` stops it again unless
        /// its `status` said it was running already (`make bench-lab` gives
        /// e2e/local-cluster/cluster.sh). Brought up only then, so that its processes do not
        /// share the cores with the sizes' measurements.
        #[arg(long, env = "VTSNAP_LAB_CLUSTER_SCRIPT")]
        cluster_script: Option<std::path::PathBuf>,
        /// The kubeconfig that script's cluster writes.
        #[arg(
            long,
            env = "VTSNAP_LAB_KUBECONFIG",
            default_value = "target/local-cluster/kubeconfig"
        )]
        kubeconfig: std::path::PathBuf,
    },
    /// Online snapshots under transactional load, each restored and checked, until the
    /// time is up.
    Soak {
        /// How long to keep starting rounds (e.g. 90s, 10m, 2h).
        #[arg(long, env = "VTSNAP_LAB_SOAK_DURATION", default_value = "10m", value_parser = parse_duration)]
        duration: Duration,
        /// At most this many rounds.
        #[arg(long, env = "VTSNAP_LAB_SOAK_MAX_ROUNDS", default_value_t = 10_000)]
        max_rounds: usize,
    },
}

/// `90s`, `10m`, `2h` or plain seconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let (n, unit) = s
        .find(|c: char| !c.is_ascii_digit())
        .map_or((s, ""), |i| s.split_at(i));
    let n: u64 = n
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 90s, 10m or 2h"))?;
    let secs = match unit {
        "" | "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        other => return Err(format!("unknown unit {other:?} in {s:?} (use s, m or h)")),
    };
    Ok(Duration::from_secs(secs))
}

/// Checks `--sizes-gib` and `--runs`; the sizes sorted, or why not.
fn checked_sizes(mut sizes: Vec<f64>, runs: usize) -> Result<Vec<f64>, String> {
    if let Some(bad) = sizes.iter().find(|s| s.is_nan() || **s <= 0.0) {
        return Err(format!("--sizes-gib: {bad} is not a positive size in GiB"));
    }
    if sizes.is_empty() || runs == 0 {
        return Err("needs at least one size (--sizes-gib) and one run (--runs)".into());
    }
    sizes.sort_by(f64::total_cmp);
    Ok(sizes)
}

async fn bench_vitess(
    (sizes, runs): (Vec<f64>, usize),
    out: std::path::PathBuf,
    render_only: bool,
    vtorc_refresh: Duration,
) -> ExitCode {
    use vtsnap_lab::vitess_bench::{BenchOptions, bench_vitess, page};
    let record = if render_only {
        let read = std::fs::read_to_string(&out)
            .map_err(|e| e.to_string())
            .and_then(|p| page::read_record(&p));
        match read {
            Ok(r) => r,
            Err(e) => {
                eprintln!("vtsnap-lab bench-vitess: {}: {e}", out.display());
                return ExitCode::from(2);
            }
        }
    } else {
        let sizes_gib = match checked_sizes(sizes, runs) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("vtsnap-lab bench-vitess: {e}");
                return ExitCode::from(2);
            }
        };
        let timeline = Timeline::new(true);
        let opts = BenchOptions {
            sizes_gib,
            runs,
            vtorc_refresh,
        };
        let write = |r: &vtsnap_lab::vitess_bench::record::BenchRecord| {
            if let Err(e) = std::fs::write(&out, page::render(r)) {
                eprintln!(
                    "vtsnap-lab bench-vitess: cannot write {}: {e}",
                    out.display()
                );
            }
        };
        bench_vitess(&opts, &timeline, write).await
    };
    if let Err(e) = std::fs::write(&out, page::render(&record)) {
        eprintln!(
            "vtsnap-lab bench-vitess: cannot write {}: {e}",
            out.display()
        );
        return ExitCode::from(1);
    }
    eprintln!("vtsnap-lab bench-vitess: wrote {}", out.display());
    ExitCode::SUCCESS
}

async fn bench(
    sizes: Vec<f64>,
    runs: usize,
    out: std::path::PathBuf,
    cluster: Option<(std::path::PathBuf, std::path::PathBuf)>,
) -> ExitCode {
    let sizes = match checked_sizes(sizes, runs) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("vtsnap-lab bench: {e}");
            return ExitCode::from(2);
        }
    };
    let timeline = Timeline::new(true);
    let start = std::time::Instant::now();
    let mut results = BenchResults::default();
    let write =
        |results: &BenchResults| match std::fs::write(&out, render(results, start.elapsed())) {
            Ok(()) => {
                timeline.mark(format!("bench: wrote {}", out.display()));
                true
            }
            Err(e) => {
                eprintln!("vtsnap-lab bench: cannot write {}: {e}", out.display());
                false
            }
        };
    for gib in &sizes {
        // The logical dump runs at the smallest size that was measured.
        let dump_too = results.sizes.is_empty();
        match bench::bench_size(*gib, runs, dump_too, timeline.clone()).await {
            Ok(r) => results.sizes.push(r),
            Err(skipped) => results.skipped.push(skipped),
        }
        // Written after every size, so a long run that is stopped still leaves a page.
        if !write(&results) {
            return ExitCode::from(1);
        }
    }
    if let Some((script, kubeconfig)) = cluster {
        results
            .series
            .push(bench::snapshot_series(Choice::InMemory, runs, timeline.clone()).await);
        let was_up = cluster_script(&script, "status").is_ok_and(|out| out.contains("running"));
        if let Err(e) = cluster_script(&script, "up") {
            eprintln!("vtsnap-lab bench: {} up: {e}", script.display());
            return ExitCode::from(1);
        }
        let real =
            bench::snapshot_series(Choice::Real { kubeconfig }, runs, timeline.clone()).await;
        if !was_up && let Err(e) = cluster_script(&script, "down") {
            eprintln!("vtsnap-lab bench: {} down: {e}", script.display());
        }
        results.series.push(real);
        if !write(&results) {
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}

/// Runs the cluster script with `verb`: `status`'s stdout is returned, the others' goes
/// to our stderr (stdout is the lab's result); why it failed otherwise.
fn cluster_script(script: &std::path::Path, verb: &str) -> Result<String, String> {
    let redirect = if verb == "status" { "" } else { " >&2" };
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!("bash \"$0\" \"$1\"{redirect}"))
        .arg(script)
        .arg(verb)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!("exited with {}", out.status))
    }
}

async fn soak(duration: Duration, max_rounds: usize) -> ExitCode {
    let timeline = Timeline::new(true);
    let mut lab = Lab::start(
        LabOptions {
            seed_rows: 10_000,
            cut_delay: Duration::from_millis(500),
            upload_delay: Duration::from_millis(500),
            ..LabOptions::default()
        },
        timeline.clone(),
    )
    .await;
    let report = vtsnap_lab::soak::run_soak(&lab, duration, 1, max_rounds).await;
    lab.stop_node().await;
    let clean = nothing_left(lab, "soak").await;
    println!(
        "{}",
        serde_json::json!({
            "rounds": report.rounds.len(),
            "all_ok": report.all_ok(),
            "failed_rounds": report.rounds.iter().filter(|r| !r.ok()).map(|r| r.round).collect::<Vec<_>>(),
            "restore_ms": report.restore_ms(),
        })
    );
    if report.all_ok() && clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Drops the lab; false (each named on stderr) if anything of it stays on the host.
async fn nothing_left(lab: Lab, what: &str) -> bool {
    match vtsnap_lab::shard::drop_and_check_nothing_left(lab, vtsnap_lab::shard::LEFTOVER_LIMIT)
        .await
    {
        Ok(()) => true,
        Err(left) => {
            eprintln!("vtsnap-lab {what}: the lab left behind:");
            for l in left {
                eprintln!("  {l}");
            }
            false
        }
    }
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

async fn demo(
    seed_rows: u64,
    cut_delay: f64,
    upload_delay: f64,
    kubeconfig: Option<std::path::PathBuf>,
) -> ExitCode {
    if cut_delay > 50.0 {
        eprintln!(
            "vtsnap-lab demo: --cut-delay {cut_delay}: at most 50 seconds (the CSI sidecar's timeout)"
        );
        return ExitCode::from(2);
    }
    let timeline = Timeline::new(true);
    let mut lab = Lab::start(
        LabOptions {
            seed_rows,
            cut_delay: secs(cut_delay),
            upload_delay: secs(upload_delay),
            supervisor_restart: Some(Duration::from_secs(1)),
            control_plane: kubeconfig
                .map_or(Choice::InMemory, |kubeconfig| Choice::Real { kubeconfig }),
            ..LabOptions::default()
        },
        timeline.clone(),
    )
    .await;
    let report = run_demo(&lab).await;
    lab.stop_node().await;
    let clean = nothing_left(lab, "demo").await;
    // The timeline went to stderr as it happened; stdout gets the one summary line.
    println!("{}", report.summary());
    let ok = report.cold.checksum_match
        && report.online.checksum_match
        && report.cold.image_without_running_mysqld
        && report.gc_exit_code == 0
        && clean;
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

async fn vitess() -> ExitCode {
    let timeline = Timeline::new(true);
    let mut lab = VitessLab::start(timeline).await;
    let report = run_vitess_demo(&mut lab).await;
    let clean = match drop_and_check_nothing_left(lab, vtsnap_lab::shard::LEFTOVER_LIMIT).await {
        Ok(()) => true,
        Err(left) => {
            eprintln!("vtsnap-lab vitess: the lab left behind:");
            for l in left {
                eprintln!("  {l}");
            }
            false
        }
    };
    // The timeline went to stderr as it happened; stdout gets the one summary line.
    println!("{}", report.summary());
    if report.ok() && clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    vtsnap_core::logging::init(vtsnap_core::logging::LogFormat::Auto);
    let work = async {
        match cli.command {
            Command::Vitess => vitess().await,
            Command::Demo {
                seed_rows,
                cut_delay,
                upload_delay,
                kubeconfig,
            } => demo(seed_rows, cut_delay, upload_delay, kubeconfig).await,
            Command::BenchVitess {
                sizes_gib,
                runs,
                out,
                render_only,
                vtorc_refresh,
            } => bench_vitess((sizes_gib, runs), out, render_only, vtorc_refresh).await,
            Command::Bench {
                sizes_gib,
                runs,
                out,
                cluster_script,
                kubeconfig,
            } => {
                bench(
                    sizes_gib,
                    runs,
                    out,
                    cluster_script.map(|s| (s, kubeconfig)),
                )
                .await
            }
            Command::Soak {
                duration,
                max_rounds,
            } => soak(duration, max_rounds).await,
        }
    };
    // Interrupted: dropping the work removes the containers and unmounts the volume.
    tokio::select! {
        code = work => code,
        _ = tokio::signal::ctrl_c() => {
            eprintln!("vtsnap-lab: interrupted; removing the lab's containers and volume");
            ExitCode::from(130)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_positive_sorted_and_need_a_run() {
        assert_eq!(checked_sizes(vec![4.0, 1.0], 3), Ok(vec![1.0, 4.0]));
        assert!(
            checked_sizes(vec![0.0], 3)
                .unwrap_err()
                .contains("0 is not a positive")
        );
        assert!(
            checked_sizes(vec![f64::NAN], 3)
                .unwrap_err()
                .contains("NaN")
        );
        assert!(
            checked_sizes(vec![], 3)
                .unwrap_err()
                .contains("at least one size")
        );
        assert!(checked_sizes(vec![1.0], 0).unwrap_err().contains("one run"));
    }

    #[test]
    fn durations_take_seconds_minutes_and_hours() {
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert!(parse_duration("2d").unwrap_err().contains("unknown unit"));
        assert!(
            parse_duration("soon")
                .unwrap_err()
                .contains("not a duration")
        );
    }
}
