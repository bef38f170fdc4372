use std::process::ExitCode;

use clap::Subcommand;
use vtsnap_core::cli::{self, Cli, ClusterRunArgs, DumpArgs, Output};
use vtsnap_core::exit::Exit;
use vtsnap_vtbackup_storage::act::{Options, POD_GONE_TIMEOUT, run};
use vtsnap_vtbackup_storage::decide::plan;
use vtsnap_vtbackup_storage::observe::World;
use vtsnap_vtbackup_storage::report::table;

/// `--help`'s first line.
const ABOUT: &str =
    "Converges vtbackup initial-backup Pods and PVCs to the configured scratch storage.";

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
    match Cli::<Command>::parse_as("vtsnap-vtbackup-storage", ABOUT) {
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
    args.run(|config, kube, args| async move {
        let opts = Options {
            dry_run: args.dry_run,
            only_cluster: args.cluster,
            pod_gone_timeout: POD_GONE_TIMEOUT,
        };
        run(&config, &opts, kube).await.print_line()
    })
}
