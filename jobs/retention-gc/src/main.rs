use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use k8s_openapi::jiff::Timestamp;
use vtsnap_core::config::Config;
use vtsnap_core::logging::{self, LogFormat};
use vtsnap_gc::inventory::Inventory;
use vtsnap_gc::run::{GcOptions, plan_json, run, table};

/// Retention, deletion policy and fence recovery for vtsnap's VolumeSnapshots.
#[derive(Debug, Parser)]
#[command(name = "vtsnap-gc", version)]
struct Cli {
    #[arg(long, global = true, env = "VTSNAP_LOG_FORMAT", value_enum, default_value_t = LogFormat::Auto)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Output {
    Table,
    Json,
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
        #[arg(long, env = "VTSNAP_DRY_RUN")]
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
    let cli = Cli::parse();
    logging::init(cli.log_format);
    ExitCode::from(match cli.command {
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
    })
}

fn offline(
    config: &std::path::Path,
    objects: &std::path::Path,
    now: Option<&str>,
    cluster: Option<&str>,
    output: Output,
) -> u8 {
    let config = match Config::load(config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return 2;
        }
    };
    let now = match now.map(str::parse::<Timestamp>) {
        None => Timestamp::now(),
        Some(Ok(t)) => t,
        Some(Err(e)) => {
            eprintln!("--now: {e}");
            return 2;
        }
    };
    let text = match std::fs::read(objects) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("--objects {}: {e}", objects.display());
            return 2;
        }
    };
    let inv = match Inventory::from_dump_text(&text, now) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("--objects {}: {e}", objects.display());
            return 2;
        }
    };
    let p = vtsnap_gc::plan::plan(&config, &inv, now, cluster);
    match output {
        Output::Json => println!("{}", plan_json(&p)),
        Output::Table => print!("{}", table(&p)),
    }
    0
}

fn online(
    config: &std::path::Path,
    cluster: Option<String>,
    dry_run: bool,
    output: Output,
    metrics_file: Option<&std::path::Path>,
) -> u8 {
    let config = match Config::load(config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return 2;
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return 1;
        }
    };
    rt.block_on(async {
        let kube = match kube::Client::try_default().await {
            Ok(k) => k,
            Err(e) => {
                eprintln!("cannot reach the Kubernetes API: {e}");
                return 1;
            }
        };
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
            if let Err(e) = vtsnap_gc::metrics::write(p, &vtsnap_gc::metrics::render(&report, now))
            {
                tracing::warn!(error = %e, path = %p.display(), "cannot write the metrics file");
            }
        }
        println!("{}", serde_json::to_string(&report).unwrap_or_default());
        report.exit_code
    })
}
