use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use vtsnap_core::cli::{self, CommonArgs};
use vtsnap_core::config::GoDuration;
use vtsnap_core::coverage::Exactness;
use vtsnap_core::exit::Exit;
use vtsnap_core::snapshot::parse_position;
use vtsnap_drill::check::{self, Expectation, ProbeOptions};

/// Restore drills: prove that a shard's snapshot restores, and measure how long it takes.
#[derive(Debug, Parser)]
#[command(name = "vtsnap-drill", version = vtsnap_core::cli::VERSION)]
struct Cli {
    #[command(flatten)]
    common: CommonArgs,
    #[command(subcommand)]
    command: Command,
}

/// What the recorded position promises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PositionKind {
    /// A cold snapshot: the restored server is exactly at the position.
    Exact,
    /// An online snapshot: the restored server has at least the position.
    LowerBound,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The drill Pod's checker: wait for the restored mysqld on its socket, compare its
    /// GTID position with the snapshot's, and CHECK TABLE … QUICK the user tables.
    #[command(after_help = "Example:\n  \
        vtsnap-drill check --socket /vt/socket/mysql.sock --position MariaDB/0-1-100 \\\n    \
        --position-kind exact --result-file /dev/termination-log\n\n\
        One JSON report on stdout (and in --result-file). Exit codes: 0 passed; 1 failed (the\n  \
        report says where); 2 usage.")]
    Check {
        /// mysqld's unix socket (shared with the checker through an emptyDir).
        #[arg(long, env = "VTSNAP_SOCKET")]
        socket: PathBuf,
        /// The snapshot's recorded position (`vtsnap.io/gtid-executed` or `gtid-lower-bound`).
        #[arg(long, env = "VTSNAP_POSITION")]
        position: String,
        #[arg(long, env = "VTSNAP_POSITION_KIND", value_enum)]
        position_kind: PositionKind,
        /// The user to connect as (the drill's mysqld skips grant tables).
        #[arg(long, env = "VTSNAP_USER", default_value = "vt_dba")]
        user: String,
        /// How long mysqld may take to answer (crash recovery included).
        #[arg(long, env = "VTSNAP_READY_TIMEOUT", default_value = "10m")]
        ready_timeout: GoDuration,
        /// How long the table checks may take; beyond it the rest is sampled out.
        #[arg(long, env = "VTSNAP_TABLE_BUDGET", default_value = "5m")]
        table_budget: GoDuration,
        /// Where in the sorted table list the checks start (rotates what is sampled).
        #[arg(long, env = "VTSNAP_SAMPLE_SEED", default_value_t = 0)]
        sample_seed: u64,
        /// Also write the report here (the container's terminationMessagePath).
        #[arg(long, env = "VTSNAP_RESULT_FILE")]
        result_file: Option<PathBuf>,
        /// Then stop mysqld (SHUTDOWN), so that the drill Pod completes.
        #[arg(long, env = "VTSNAP_SHUTDOWN", action = clap::ArgAction::SetTrue, value_parser = clap::builder::BoolishValueParser::new())]
        shutdown: bool,
    },
}

fn main() -> ExitCode {
    let args: Cli = match cli::parse(|_, _| {}) {
        Ok(a) => a,
        Err(exit) => return exit.into(),
    };
    args.common.init();
    let exit = match args.command {
        Command::Check {
            socket,
            position,
            position_kind,
            user,
            ready_timeout,
            table_budget,
            sample_seed,
            result_file,
            shutdown,
        } => {
            let exactness = match position_kind {
                PositionKind::Exact => Exactness::Exact,
                PositionKind::LowerBound => Exactness::LowerBound,
            };
            let flavor = match parse_position(&position) {
                Ok(f) => f,
                Err(e) => {
                    eprintln!("--position {position:?}: {e}");
                    return Exit::Usage.into();
                }
            };
            let expect = match Expectation::parse(&position, exactness) {
                Ok(e) => e,
                Err(e) => {
                    eprintln!("--position: {e}");
                    return Exit::Usage.into();
                }
            };
            let opts = ProbeOptions {
                socket,
                user,
                ready_timeout: ready_timeout.get(),
                table_budget: table_budget.get(),
                sample_seed,
                flavor,
            };
            let then = if shutdown {
                Then::ShutDown
            } else {
                Then::LeaveRunning
            };
            run_check(&opts, &expect, result_file.as_deref(), then)
        }
    };
    exit.into()
}

/// What the checker does with mysqld once it has judged it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Then {
    ShutDown,
    LeaveRunning,
}

fn run_check(
    opts: &ProbeOptions,
    expect: &Expectation,
    result_file: Option<&std::path::Path>,
    then: Then,
) -> Exit {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cannot start the async runtime: {e}");
            return Exit::Failed;
        }
    };
    let report = runtime.block_on(check::check(opts, expect));
    println!("{}", report.to_json());
    if let Some(path) = result_file
        && let Err(e) = check::write_result(path, &report)
    {
        eprintln!("cannot write {}: {e}", path.display());
    }
    if then == Then::ShutDown
        && report.mysqld_ready_ms.is_some()
        && let Err(e) = runtime.block_on(check::shutdown(opts))
    {
        tracing::warn!(error = %e, "mysqld was not shut down; the Pod's deadline ends it");
    }
    if report.verdict.passed {
        Exit::Ok
    } else {
        Exit::Failed
    }
}
