use std::path::PathBuf;
use std::process::ExitCode;
use vtsnap_core::shard::ShardName;

use clap::{Parser, Subcommand, ValueEnum};
use vtsnap_core::cli::{self, CommonArgs, Output};
use vtsnap_core::exit::Exit;
use vtsnap_snapshot::{plan, render};

/// Volume-snapshot backups of one Vitess shard.
#[derive(Debug, Parser)]
#[command(name = "vtsnap-snapshot", version = vtsnap_core::cli::VERSION)]
struct Cli {
    #[command(flatten)]
    common: CommonArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ModeArg {
    Cold,
    Online,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Take one volume snapshot of one shard (cold by default; online when configured).
    #[command(after_help = "Examples:\n  \
        vtsnap-snapshot run --config /etc/vtsnap/config.yaml --cluster example --keyspace commerce --shard -80\n  \
        vtsnap-snapshot run --config cfg.yaml --cluster example --keyspace commerce --shard - --mode online --dry-run\n  \
        vtsnap-snapshot run --config cfg.yaml --cluster example --cluster-namespace ns-b --keyspace commerce --shard -\n  \
        kubectl create job --from=cronjob/vtsnap-example-commerce-x-80 snapshot-now\n\n\
        The last stdout line is one JSON summary. Exit codes: 0 done; 1 failed and fully unfenced;\n  \
        2 bad config or usage (nothing touched); 3 refused by a precondition (nothing touched);\n  \
        4 failed and the unfence is incomplete (the fence lease is left for recovery).")]
    Run {
        #[command(flatten)]
        shard: cli::ShardArgs,
        /// Override the configured mode.
        #[arg(long, env = "VTSNAP_MODE", value_enum)]
        mode: Option<ModeArg>,
        /// Observe and decide, change nothing: print the plan (target, steps, undo steps).
        #[arg(long, env = "VTSNAP_DRY_RUN", action = clap::ArgAction::SetTrue, value_parser = clap::builder::BoolishValueParser::new())]
        dry_run: bool,
        /// With --dry-run: the plan as text before the JSON line (table), or only in the
        /// JSON line's "plan" (json).
        #[arg(long, env = "VTSNAP_OUTPUT", value_enum, default_value_t = Output::Table)]
        output: Output,
        /// The fence lease's duration; renewed every third of it.
        #[arg(long, env = "VTSNAP_LEASE_DURATION", default_value = "30s")]
        lease_duration: vtsnap_core::config::GoDuration,
        /// How long to wait for the node helper to answer a request.
        #[arg(long, env = "VTSNAP_NODE_TIMEOUT", default_value = "10m")]
        node_timeout: vtsnap_core::config::GoDuration,
        /// Write the run's Prometheus metrics to this textfile (atomically).
        #[arg(long, env = "VTSNAP_METRICS_FILE")]
        metrics_file: Option<PathBuf>,
    },
    /// Show what a snapshot run would do: resolved policy, tablets, chosen target. Changes nothing.
    #[command(after_help = "Examples:\n  \
        vtsnap-snapshot plan --config /etc/vtsnap/config.yaml --cluster example --keyspace commerce --shard -80\n  \
        vtsnap-snapshot plan --config cfg.yaml --cluster example --keyspace commerce --shard - --output json\n\n\
        Exit codes: 0 a target was chosen, 3 refused (the JSON says why), 2 bad config or usage,\n  \
        1 vtctld or the Kubernetes API could not be read.")]
    Plan {
        #[command(flatten)]
        shard: cli::ShardArgs,
        #[arg(long, env = "VTSNAP_OUTPUT", value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// The snapshot inventory: phase, age, mode, GTID, size and source tablet, per shard.
    #[command(after_help = "Examples:\n  \
        vtsnap-snapshot list --config /etc/vtsnap/config.yaml\n  \
        vtsnap-snapshot list --config cfg.yaml --cluster example --keyspace commerce --shard -80 --output json")]
    List {
        #[arg(long, env = "VTSNAP_CONFIG")]
        config: PathBuf,
        #[arg(long, env = "VTSNAP_CLUSTER")]
        cluster: Option<String>,
        #[arg(long, env = "VTSNAP_KEYSPACE")]
        keyspace: Option<String>,
        #[arg(long, env = "VTSNAP_SHARD", allow_hyphen_values = true)]
        shard: Option<String>,
        #[arg(long, env = "VTSNAP_OUTPUT", value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// One snapshot CronJob per shard of every configured cluster, from the chart's
    /// template, kept in step with the shards (the chart runs `schedule run` on its own
    /// CronJob).
    #[command(subcommand)]
    Schedule(ScheduleCommand),
    /// Check a config file alone: exit 0 if valid, else 2 with every error, one per line.
    #[command(after_help = "Example:\n  vtsnap-snapshot validate --config /etc/vtsnap/config.yaml")]
    Validate {
        #[arg(long, env = "VTSNAP_CONFIG")]
        config: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
enum ScheduleCommand {
    /// Observe the shards and the CronJobs, decide, create / update / delete, report.
    #[command(after_help = "Example:\n  \
        vtsnap-snapshot schedule run --config /etc/vtsnap/config.yaml --namespace vtsnap --template vtsnap-snapshot-schedule\n\n\
        Only CronJobs it made (label app.kubernetes.io/managed-by=vtsnap-schedule and an ownerReference to\n  \
        the template) are changed. Exit codes: 0 every read and write went through; 1 one did not; 2 usage or config.")]
    Run {
        #[arg(long, env = "VTSNAP_CONFIG")]
        config: PathBuf,
        /// The namespace of the template and of the CronJobs (the install's).
        #[arg(long, env = "VTSNAP_NAMESPACE")]
        namespace: String,
        /// The ConfigMap the chart renders the snapshot CronJob template into.
        #[arg(long, env = "VTSNAP_SCHEDULE_TEMPLATE")]
        template: String,
        #[arg(long, env = "VTSNAP_OUTPUT", value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// The decision only: from the cluster, or offline from a dump (vtctld is not asked
    /// offline, so a shard gone from the spec is never planned for deletion; a drill
    /// CronJob whose drills are off can be).
    #[command(after_help = "Examples:\n  \
        vtsnap-snapshot schedule plan --config cfg.yaml --namespace vtsnap --template vtsnap-snapshot-schedule\n  \
        kubectl get configmaps,cronjobs,jobs,vitessclusters -A -o json > dump.json\n  \
        vtsnap-snapshot schedule plan --config cfg.yaml --template vtsnap-snapshot-schedule --objects dump.json")]
    Plan {
        #[arg(long, env = "VTSNAP_CONFIG")]
        config: PathBuf,
        #[arg(long, env = "VTSNAP_NAMESPACE")]
        namespace: Option<String>,
        #[arg(long, env = "VTSNAP_SCHEDULE_TEMPLATE")]
        template: String,
        /// A `kubectl get … -o json` List instead of the cluster.
        #[arg(long)]
        objects: Option<PathBuf>,
        #[arg(long, env = "VTSNAP_OUTPUT", value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

fn main() -> ExitCode {
    // `run` promises a JSON line as its last stdout line, usage errors included.
    let args: Cli = match cli::parse(|sub, message| {
        if sub == Some("run") {
            print_early_summary(Exit::Usage, "usage", message, false);
        }
    }) {
        Ok(a) => a,
        Err(exit) => return exit.into(),
    };
    args.common.init();
    match args.command {
        Command::Schedule(ScheduleCommand::Run {
            config,
            namespace,
            template,
            output,
        }) => vtsnap_snapshot::schedule::run(&config, &namespace, &template, output),
        Command::Schedule(ScheduleCommand::Plan {
            config,
            namespace,
            template,
            objects,
            output,
        }) => vtsnap_snapshot::schedule::plan(
            &config,
            namespace.as_deref(),
            &template,
            objects.as_deref(),
            output,
        ),
        Command::Validate { config } => match cli::load_config(&config) {
            Ok(_) => {
                println!("{}: valid", config.display());
                Exit::Ok
            }
            Err(exit) => exit,
        },
        Command::Plan { shard, output } => run_plan(&shard.config, &shard.name(), output),
        Command::Run {
            shard,
            mode,
            dry_run,
            output,
            lease_duration,
            node_timeout,
            metrics_file,
        } => {
            let opts = vtsnap_snapshot::run::RunOptions {
                mode: mode.map(|m| match m {
                    ModeArg::Cold => vtsnap_core::config::Mode::Cold,
                    ModeArg::Online => vtsnap_core::config::Mode::Online,
                }),
                dry_run,
                lease_duration: lease_duration.get(),
                node_timeout: node_timeout.get(),
                ..vtsnap_snapshot::run::RunOptions::default()
            };
            run_run(
                &shard.config,
                &shard.name(),
                &opts,
                output,
                metrics_file.as_deref(),
            )
        }
        Command::List {
            config,
            cluster,
            keyspace,
            shard,
            output,
        } => run_list(
            &config,
            vtsnap_snapshot::list::Filter {
                cluster,
                keyspace,
                shard,
            },
            output,
        ),
    }
    .into()
}

fn run_plan(config: &std::path::Path, shard: &ShardName, output: Output) -> Exit {
    cli::with_cluster(config, |config, kube| async move {
        match plan::plan(&config, shard, kube).await {
            Ok(report) => {
                match output {
                    Output::Json => {
                        println!("{}", serde_json::to_string(&report).unwrap_or_default())
                    }
                    Output::Table => print!("{}", render::table(&report)),
                }
                report.exit()
            }
            Err(e) => {
                tracing::error!(error = %e, "plan failed");
                if output == Output::Json {
                    println!(
                        "{}",
                        serde_json::json!({"error": {"code": e.code(), "message": e.to_string()}})
                    );
                } else {
                    eprintln!("{e}");
                }
                e.exit()
            }
        }
    })
}

fn run_list(
    config: &std::path::Path,
    filter: vtsnap_snapshot::list::Filter,
    output: Output,
) -> Exit {
    cli::with_cluster(config, |config, kube| async move {
        match vtsnap_snapshot::list::list(&config, &filter, kube).await {
            Ok(rows) => {
                match output {
                    Output::Json => {
                        println!("{}", serde_json::to_string(&rows).unwrap_or_default())
                    }
                    Output::Table => print!("{}", vtsnap_snapshot::list::table(&rows)),
                }
                Exit::Ok
            }
            Err(e) => {
                eprintln!("{e}");
                e.exit()
            }
        }
    })
}

fn run_run(
    config: &std::path::Path,
    shard: &ShardName,
    opts: &vtsnap_snapshot::run::RunOptions,
    output: Output,
    metrics_file: Option<&std::path::Path>,
) -> Exit {
    let dry_run = opts.dry_run;
    let on_error = |e: &cli::StartupError| {
        print_early_summary(e.exit(), e.code(), &e.to_string(), dry_run);
    };
    cli::with_cluster_or(config, on_error, |config, kube| async move {
        let summary = vtsnap_snapshot::run::run(&config, shard, opts, kube).await;
        if let Some(p) = metrics_file {
            let metrics = vtsnap_snapshot::metrics::registry(
                &summary,
                &shard.cluster,
                &shard.keyspace,
                &shard.shard,
                vtsnap_core::metrics::unix_now_seconds(),
            );
            vtsnap_core::metrics::write_textfile(p, &metrics);
        }
        if let (Some(plan), Output::Table) = (&summary.plan, output) {
            print!("{}", vtsnap_snapshot::run::decide::render(plan));
        }
        println!("{}", serde_json::to_string(&summary).unwrap_or_default());
        Exit::from_code(summary.exit_code).unwrap_or(Exit::Failed)
    })
}

/// The JSON line of a run that stopped before it started (usage, config, API client).
fn print_early_summary(exit: Exit, code: &'static str, message: &str, dry_run: bool) {
    use vtsnap_core::reconcile::ErrorLine;
    use vtsnap_snapshot::run::{Outcome, Summary};
    let outcome = match exit {
        Exit::Usage => Outcome::Usage,
        Exit::Refused => Outcome::Refused,
        Exit::UnfenceIncomplete => Outcome::FailedUnfenceIncomplete,
        Exit::Failed | Exit::Ok => Outcome::Failed,
    };
    let summary = Summary {
        outcome,
        exit_code: exit.code(),
        dry_run,
        error: Some(ErrorLine {
            code,
            message: message.to_owned(),
        }),
        ..Summary::default()
    };
    println!("{}", serde_json::to_string(&summary).unwrap_or_default());
}
