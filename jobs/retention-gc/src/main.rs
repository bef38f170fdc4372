use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Subcommand;
use k8s_openapi::jiff::Timestamp;
use vtsnap_core::cli::{self, Cli, ClusterRunArgs, DumpArgs, Output};
use vtsnap_core::exit::Exit;
use vtsnap_gc::act::{GcOptions, run};
use vtsnap_gc::decide::plan;
use vtsnap_gc::observe::Inventory;
use vtsnap_gc::report::{plan_json, table};

/// `--help`'s first line.
const ABOUT: &str = "Retention, deletion policy and fence recovery for vtsnap's VolumeSnapshots.";

#[derive(Debug, Subcommand)]
enum Command {
    /// Apply retention and deletion policy and recover expired fences in the cluster.
    #[command(
        after_help = "Examples:\n  vtsnap-gc run --config /etc/vtsnap/config.yaml\n  vtsnap-gc run --config cfg.yaml --cluster example --dry-run\n\n\
        Exit codes: 0 done; 1 something could not be read or done (nothing is deleted in a\n  namespace that could not be read completely); 2 bad config or usage, or a --cluster the config\n  does not name (checked before the cluster is reached)."
    )]
    Run {
        #[command(flatten)]
        run: ClusterRunArgs,
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
        #[command(flatten)]
        dump: DumpArgs,
        /// The time to plan at (RFC 3339), for reproducible plans.
        #[arg(long)]
        now: Option<String>,
        #[arg(long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

fn main() -> ExitCode {
    match Cli::<Command>::parse_as("vtsnap-gc", ABOUT) {
        Command::Plan { dump, now, output } => offline(&dump, now.as_deref(), output),
        Command::Run {
            run,
            output,
            metrics_file,
        } => online(run, output, metrics_file.as_deref()),
    }
    .into()
}

fn offline(dump: &DumpArgs, now: Option<&str>, output: Output) -> Exit {
    let (objects, cluster) = (&dump.objects, dump.cluster.as_deref());
    let config = match cli::load_config_for(&dump.config, cluster) {
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
    let p = plan(&config, &inv, now, cluster);
    match output {
        Output::Json => println!("{}", plan_json(&p)),
        Output::Table => print!("{}", table(&p)),
    }
    Exit::Ok
}

fn online(args: ClusterRunArgs, output: Output, metrics_file: Option<&Path>) -> Exit {
    args.run(|config, kube, args| async move {
        let opts = GcOptions {
            dry_run: args.dry_run,
            only_cluster: args.cluster,
            node_timeout: Duration::from_secs(120),
        };
        let report = run(&config, &opts, kube).await;
        if output == Output::Table {
            eprint!("{}", table(&report.run.plan));
        }
        if let Some(p) = metrics_file {
            let now = Timestamp::now().as_second();
            vtsnap_core::metrics::write_textfile(p, &vtsnap_gc::metrics::registry(&report, now));
        }
        report.print_line()
    })
}
