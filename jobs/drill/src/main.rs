use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use k8s_openapi::jiff::Timestamp;
use vtsnap_core::cli::{self, CommonArgs};
use vtsnap_core::config::GoDuration;
use vtsnap_core::coverage::Exactness;
use vtsnap_core::exit::Exit;
use vtsnap_core::naming::TabletUid;
use vtsnap_core::snapshot::parse_position;
use vtsnap_drill::check;
use vtsnap_drill::decide;
use vtsnap_drill::decide::objects::{Settings, defaults};
use vtsnap_drill::decide::verdict::Expectation;
use vtsnap_drill::observe::server::{self, ProbeOptions};
use vtsnap_drill::observe::{self, dump};
use vtsnap_drill::report::{Summary, metrics};
use vtsnap_drill::run::{self, RunOptions};

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

/// The shard, and how its drill is built (the chart's values).
#[derive(Debug, Clone, clap::Args)]
struct DrillArgs {
    #[command(flatten)]
    shard: cli::ShardArgs,
    /// Drill this snapshot (a ready one of the shard) instead of the one a new tablet
    /// would get.
    #[arg(long, env = "VTSNAP_SNAPSHOT")]
    snapshot: Option<String>,
    /// vtsnap-restore's image (the drill Pod's init container).
    #[arg(long, env = "VTSNAP_RESTORE_IMAGE")]
    restore_image: String,
    /// This program's image (the drill Pod's checker).
    #[arg(long, env = "VTSNAP_CHECKER_IMAGE")]
    checker_image: String,
    /// The tablet UID the restored data is moved to (no serving tablet may have it).
    #[arg(long, env = "VTSNAP_DRILL_UID", default_value_t = defaults::DRILL_UID)]
    drill_uid: u32,
    /// The server binary in the tablet's mysqld image.
    #[arg(long, env = "VTSNAP_MYSQLD_COMMAND", default_value = defaults::MYSQLD_COMMAND)]
    mysqld_command: String,
    /// How long the drill Pod may run in all.
    #[arg(long, env = "VTSNAP_DEADLINE", default_value = defaults::DEADLINE)]
    deadline: GoDuration,
    /// How long mysqld may take to answer (crash recovery included).
    #[arg(long, env = "VTSNAP_READY_TIMEOUT", default_value = defaults::READY_TIMEOUT)]
    ready_timeout: GoDuration,
    /// How long CHECK TABLE may take; beyond it the rest is sampled out.
    #[arg(long, env = "VTSNAP_TABLE_BUDGET", default_value = defaults::TABLE_BUDGET)]
    table_budget: GoDuration,
    /// The drill mysqld's resources and the Pod's pull Secrets.
    #[command(flatten)]
    pod: vtsnap_core::cli::ThrowawayPodArgs,
    /// The drill Job (the owner of the drill's objects).
    #[command(flatten)]
    owner: vtsnap_core::cli::OwnerArgs,
    /// Write the run's Prometheus metrics (outcome, RTO parts) to this textfile.
    #[arg(long, env = "VTSNAP_METRICS_FILE")]
    metrics_file: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Drill one shard: restore its snapshot into a throwaway PVC and Pod, check it,
    /// record the result on the snapshot (vtsnap.io/drill), remove what it made.
    #[command(after_help = "Examples:\n  \
        vtsnap-drill run --config /etc/vtsnap/config.yaml --cluster example --keyspace commerce --shard -80 \\\n    \
        --restore-image vtsnap/vtsnap-restore:0.1.0 --checker-image vtsnap/vtsnap-drill:0.1.0\n\n\
        The last stdout line is one JSON summary. Exit codes: 0 passed; 1 the drill failed or could\n  \
        not run (the line says which); 2 bad config or usage; 3 refused (nothing was created).")]
    Run(DrillArgs),
    /// What a run would drill, and the PVC and Pod it would create. Changes nothing.
    /// From the cluster, or from a dump (`--objects`), where vtctld is not asked.
    #[command(after_help = "Examples:\n  \
        vtsnap-drill plan --config cfg.yaml --cluster example --keyspace commerce --shard - \\\n    \
        --restore-image vtsnap/vtsnap-restore:0.1.0 --checker-image vtsnap/vtsnap-drill:0.1.0\n  \
        kubectl get volumesnapshots,pods,persistentvolumeclaims -n vitess -o json > dump.json\n  \
        vtsnap-drill plan --objects dump.json --shard-state shard.json --config cfg.yaml \\\n    \
        --cluster example --keyspace commerce --shard - --restore-image r:1 --checker-image c:1\n\n\
        --shard-state is the shard's entry of the webhook's /debug/shards; without it the\n  \
        shard's MySQL series is unknown and the plan refuses as a run would.")]
    Plan {
        #[command(flatten)]
        args: DrillArgs,
        /// Decide from this `kubectl get volumesnapshots,pods,persistentvolumeclaims -o json`
        /// List of the shard's namespace instead of the cluster.
        #[arg(long, env = "VTSNAP_OBJECTS")]
        objects: Option<PathBuf>,
        /// vtctld's view of the shard for an offline plan (one entry of the webhook's
        /// `/debug/shards`).
        #[arg(long, env = "VTSNAP_SHARD_STATE", requires = "objects")]
        shard_state: Option<PathBuf>,
    },
    /// The drill Pod's checker: wait for the restored mysqld on its socket, compare its
    /// GTID position with the snapshot's, and CHECK TABLE … QUICK the user tables.
    #[command(after_help = "Example:\n  \
        vtsnap-drill check --socket /vt/socket/mysql.sock --position MariaDB/0-1-100 \\\n    \
        --position-kind exact --result-file /dev/termination-log\n\n\
        The drill Pod passes --position-file (its own annotation as a downward API file): a\n  \
        position may be longer than one argument may be (128 KiB on Linux).\n\n\
        One JSON report on stdout (and in --result-file). Exit codes: 0 passed; 1 failed (the\n  \
        report says where); 2 usage.")]
    Check {
        /// mysqld's unix socket (shared with the checker through an emptyDir).
        #[arg(long, env = "VTSNAP_SOCKET")]
        socket: PathBuf,
        /// The snapshot's recorded position (`vtsnap.io/gtid-executed` or `gtid-lower-bound`).
        #[arg(
            long,
            env = "VTSNAP_POSITION",
            required_unless_present = "position_file",
            conflicts_with = "position_file"
        )]
        position: Option<String>,
        /// A file holding the position (at most 256 KiB, an annotation's limit).
        #[arg(long, env = "VTSNAP_POSITION_FILE")]
        position_file: Option<PathBuf>,
        #[arg(long, env = "VTSNAP_POSITION_KIND", value_enum)]
        position_kind: PositionKind,
        /// The user to connect as (the drill's mysqld skips grant tables).
        #[arg(long, env = "VTSNAP_USER", default_value = "vt_dba")]
        user: String,
        /// How long mysqld may take to answer (crash recovery included).
        #[arg(long, env = "VTSNAP_READY_TIMEOUT", default_value = defaults::READY_TIMEOUT)]
        ready_timeout: GoDuration,
        /// How long the table checks may take; beyond it the rest is sampled out.
        #[arg(long, env = "VTSNAP_TABLE_BUDGET", default_value = defaults::TABLE_BUDGET)]
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
        Command::Run(d) => drill(d, false),
        Command::Plan {
            args,
            objects: Some(objects),
            shard_state,
        } => plan_offline(&args, &objects, shard_state.as_deref()),
        Command::Plan { args, .. } => drill(args, true),
        Command::Check {
            socket,
            position,
            position_file,
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
            let position = match (position, position_file) {
                (Some(p), _) => p,
                (None, Some(path)) => match check::read_position_file(&path) {
                    Ok(p) => p,
                    Err(e) => {
                        eprintln!("{e}");
                        return Exit::Usage.into();
                    }
                },
                (None, None) => {
                    eprintln!("--position or --position-file is required");
                    return Exit::Usage.into();
                }
            };
            // The position may be 256 KiB: the message names its length, not its text.
            let flavor = match parse_position(&position) {
                Ok(f) => f,
                Err(e) => {
                    eprintln!("the position ({} bytes): {e}", position.len());
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

/// `plan --objects`: the decision from a dump, printed as `plan` prints it.
fn plan_offline(d: &DrillArgs, objects: &Path, shard_state: Option<&Path>) -> Exit {
    let usage = |e: String| {
        eprintln!("{e}");
        Exit::Usage
    };
    let settings = match settings(d) {
        Ok(s) => s,
        Err(e) => return usage(e),
    };
    let config = match cli::load_config(&d.shard.config) {
        Ok(c) => c,
        Err(exit) => return exit,
    };
    let name = d.shard.name();
    let configured = match observe::shard_of(&config, &name) {
        Ok(c) => c,
        Err(e) => return usage(e.to_string()),
    };
    let items = match vtsnap_core::dump::read(objects) {
        Ok(v) => v,
        // A read error names the path already; a parse error does not.
        Err(e @ vtsnap_core::dump::DumpError::Read(_)) => return usage(format!("--objects: {e}")),
        Err(e) => return usage(format!("--objects {}: {e}", objects.display())),
    };
    let state = match shard_state.map(|p| {
        dump::read_json(p, "a shard state").and_then(|v| {
            serde_json::from_value(v)
                .map_err(|e| format!("{}: not a shard state: {e}", p.display()))
        })
    }) {
        None => None,
        Some(Ok(s)) => Some(s),
        Some(Err(e)) => return usage(format!("--shard-state: {e}")),
    };
    let observed = match dump::from_dump(&configured, &items, state, d.snapshot.clone()) {
        Ok(o) => o,
        Err(e) => return usage(format!("--objects {}: {e}", objects.display())),
    };
    let owner = d.owner.owner();
    let plan = decide::plan(&observed, &settings, owner.as_ref(), Timestamp::now());
    run::planned(
        Summary::new(format!("{}/{}/{}", name.cluster, name.keyspace, name.shard)),
        plan,
    )
    .print()
}

/// Checks the flags that build the Pod, then runs or plans the shard's drill.
fn drill(d: DrillArgs, plan_only: bool) -> Exit {
    let settings = match settings(&d) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return Exit::Usage;
        }
    };
    let options = RunOptions {
        settings,
        owner: d.owner.owner(),
        snapshot: d.snapshot.clone(),
        plan_only,
    };
    let name = d.shard.name();
    let metrics_file = d.metrics_file.clone();
    cli::with_cluster(&d.shard.config, |config, kube| async move {
        let summary = run::run(&kube, &config, &name, &options).await;
        if let Some(path) = metrics_file {
            let reg = metrics::registry(
                &summary,
                &name.cluster,
                &name.keyspace,
                &name.shard,
                vtsnap_core::metrics::unix_now_seconds(),
            );
            vtsnap_core::metrics::write_textfile(&path, &reg);
        }
        summary.print()
    })
}

fn settings(d: &DrillArgs) -> Result<Settings, String> {
    let (resources, image_pull_secrets) = d.pod.checked()?;
    if d.ready_timeout.get() + d.table_budget.get() >= d.deadline.get() {
        return Err(format!(
            "--ready-timeout {} and --table-budget {} must together be shorter than --deadline {}",
            d.ready_timeout, d.table_budget, d.deadline
        ));
    }
    if d.mysqld_command.is_empty() {
        return Err("--mysqld-command is empty".into());
    }
    Ok(Settings {
        restore_image: d.restore_image.clone(),
        checker_image: d.checker_image.clone(),
        drill_uid: TabletUid::new(d.drill_uid),
        mysqld_command: d.mysqld_command.clone(),
        mysqld_resources: resources,
        deadline_seconds: d.deadline.get().as_secs(),
        table_budget: d.table_budget.to_string(),
        ready_timeout: d.ready_timeout.to_string(),
        image_pull_secrets,
    })
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
        && let Err(e) = runtime.block_on(server::shutdown(opts))
    {
        tracing::warn!(error = %e, "mysqld was not shut down; the Pod's deadline ends it");
    }
    if report.verdict.passed {
        Exit::Ok
    } else {
        Exit::Failed
    }
}
