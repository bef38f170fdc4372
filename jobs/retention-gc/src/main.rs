use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use k8s_openapi::jiff::Timestamp;
use vtsnap_core::cli::{self, CommonArgs, Output};
use vtsnap_core::exit::Exit;
use vtsnap_gc::act::{GcOptions, plan_json, run, table};
use vtsnap_gc::observe::Inventory;

/// Retention, deletion policy and fence recovery for vtsnap's VolumeSnapshots.
#[derive(Debug, Parser)]
#[command(name = "vtsnap-gc", version = vtsnap_core::cli::VERSION)]
struct Cli {
    #[command(flatten)]
    common: CommonArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Apply retention and deletion policy and recover expired fences in the cluster.
    #[command(
        after_help = "Examples:\n  vtsnap-gc run --config /etc/vtsnap/config.yaml\n  vtsnap-gc run --config cfg.yaml --cluster example --dry-run\n\n\
        Exit codes: 0 done; 1 something could not be read or done (nothing is deleted in a\n  namespace that could not be read completely); 2 bad config or usage."
    )]
    Run {
        #[arg(long, env = "VTSNAP_CONFIG")]
        config: PathBuf,
        #[arg(long, env = "VTSNAP_CLUSTER")]
        cluster: Option<String>,
        /// Print the plan; change nothing.
        #[arg(long, env = "VTSNAP_DRY_RUN", action = clap::ArgAction::SetTrue, value_parser = clap::builder::BoolishValueParser::new())]
        dry_run: bool,
        #[arg(long, env = "VTSNAP_OUTPUT", value_enum, default_value_t = Output::Json)]
        output: Output,
        /// Write the run's Prometheus metrics to this textfile (atomically).
        #[arg(long, env = "VTSNAP_METRICS_FILE")]
        metrics_file: Option<PathBuf>,
    },
    /// Plan offline from a dump, without touching any cluster.
    #[command(
        after_help = "Example:\n  kubectl get volumesnapshots,persistentvolumeclaims,leases,vitessclusters -A -o json > dump.json\n  \
        vtsnap-gc plan --config cfg.yaml --objects dump.json --now 2026-11-29T12:00:00Z --output json"
    )]
    Plan {
        #[arg(long, env = "VTSNAP_CONFIG")]
        config: PathBuf,
        #[arg(long)]
        objects: PathBuf,
        /// The time to plan at (RFC 3339), for reproducible plans.
        #[arg(long)]
        now: Option<String>,
        #[arg(long)]
        cluster: Option<String>,
        #[arg(long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

fn main() -> ExitCode {
    let args = Cli::parse();
    args.common.init();
    match args.command {
        Command::Plan {
            config,
            objects,
            now,
            cluster,
            output,
        } => offline(
            &config,
            &objects,
            now.as_deref(),
            cluster.as_deref(),
            output,
        ),
        Command::Run {
            config,
            cluster,
            dry_run,
            output,
            metrics_file,
        } => online(&config, cluster, dry_run, output, metrics_file.as_deref()),
    }
    .into()
}

fn offline(
    config: &std::path::Path,
    objects: &std::path::Path,
    now: Option<&str>,
    cluster: Option<&str>,
    output: Output,
) -> Exit {
    let config = match cli::load_config(config) {
        Ok(c) => c,
        Err(exit) => return exit,
    };
    let now = match now.map(str::parse::<Timestamp>) {
        None => Timestamp::now(),
        Some(Ok(t)) => t,
        Some(Err(e)) => {
            eprintln!("--now: {e}");
            return Exit::Usage;
        }
    };
    let inv = match Inventory::read_dump(objects, now) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("--objects {}: {e}", objects.display());
            return Exit::Usage;
        }
    };
    let p = vtsnap_gc::decide::plan(&config, &inv, now, cluster);
    match output {
        Output::Json => println!("{}", plan_json(&p)),
        Output::Table => print!("{}", table(&p)),
    }
    Exit::Ok
}

fn online(
    config: &std::path::Path,
    cluster: Option<String>,
    dry_run: bool,
    output: Output,
    metrics_file: Option<&std::path::Path>,
) -> Exit {
    cli::with_cluster(config, |config, kube| async move {
        let opts = GcOptions {
            dry_run,
            only_cluster: cluster,
            node_timeout: Duration::from_secs(120),
        };
        let report = run(&config, &opts, kube).await;
        if output == Output::Table {
            eprint!("{}", table(&report.plan));
        }
        if let Some(p) = metrics_file {
            let now = Timestamp::now().as_second();
            vtsnap_core::metrics::write_textfile(p, &vtsnap_gc::metrics::registry(&report, now));
        }
        println!("{}", serde_json::to_string(&report).unwrap_or_default());
        Exit::from_code(report.exit_code).unwrap_or(Exit::Failed)
    })
}
