use std::process::ExitCode;

use clap::{Parser, Subcommand};
use vtsnap_core::cli::{self, ClusterRunArgs, CommonArgs, DumpArgs, Output};
use vtsnap_core::exit::Exit;
use vtsnap_vtbackup_storage::act::{Options, POD_GONE_TIMEOUT, run};
use vtsnap_vtbackup_storage::decide::plan;
use vtsnap_vtbackup_storage::observe::World;
use vtsnap_vtbackup_storage::report::table;

/// Converges vtbackup initial-backup Pods and PVCs to the configured scratch storage.
#[derive(Debug, Parser)]
#[command(name = "vtsnap-vtbackup-storage", version = vtsnap_core::cli::VERSION)]
struct Cli {
    #[command(flatten)]
    common: CommonArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Converge the cluster's initial-backup Pods and PVCs.
    #[command(
        after_help = "Examples:\n  vtsnap-vtbackup-storage run --config /etc/vtsnap/config.yaml\n  \
        vtsnap-vtbackup-storage run --config cfg.yaml --cluster example --dry-run\n\n\
        Exit codes: 0 done (or nothing to do); 1 something could not be read or done (nothing\n  \
        destructive was done on it; the next run tries again); 2 bad config or usage."
    )]
    Run {
        #[command(flatten)]
        run: ClusterRunArgs,
    },
    /// Plan offline from a dump, without touching any cluster.
    #[command(
        after_help = "Example:\n  kubectl get pods,persistentvolumeclaims,vitessclusters,storageclasses -A -o json > dump.json\n  \
        vtsnap-vtbackup-storage plan --config cfg.yaml --objects dump.json --output json"
    )]
    Plan {
        #[command(flatten)]
        dump: DumpArgs,
        #[arg(long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

fn main() -> ExitCode {
    let args = Cli::parse();
    args.common.init();
    match args.command {
        Command::Plan { dump, output } => offline(&dump, output),
        Command::Run { run } => online(run),
    }
    .into()
}

fn offline(dump: &DumpArgs, output: Output) -> Exit {
    let (objects, cluster) = (&dump.objects, dump.cluster.as_deref());
    let config = match cli::load_config_for(&dump.config, cluster) {
        Ok(c) => c,
        Err(exit) => return exit,
    };
    let world = match World::read_dump(objects, &config) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("--objects {}: {e}", objects.display());
            return Exit::Usage;
        }
    };
    let p = plan(&config, &world, cluster);
    match output {
        Output::Json => println!("{}", serde_json::json!(p)),
        Output::Table => print!("{}", table(&p)),
    }
    Exit::Ok
}

fn online(args: ClusterRunArgs) -> Exit {
    let ClusterRunArgs {
        config,
        cluster,
        dry_run,
    } = args;
    let only = cluster.clone();
    cli::with_cluster_named(&config, only.as_deref(), |config, kube| async move {
        let opts = Options {
            dry_run,
            only_cluster: cluster,
            pod_gone_timeout: POD_GONE_TIMEOUT,
        };
        run(&config, &opts, kube).await.print_line()
    })
}
