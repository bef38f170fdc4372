use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use vtsnap_core::cli::{self, CommonArgs, Output};
use vtsnap_core::config::Config;
use vtsnap_core::exit::Exit;
use vtsnap_core::input::{Accept, MAX_DUMP, read_bounded};
use vtsnap_vtbackup_storage::act::{Options, POD_GONE_TIMEOUT, plan_from_dump, run};
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
        #[arg(long, env = "VTSNAP_CONFIG")]
        config: PathBuf,
        #[arg(long, env = "VTSNAP_CLUSTER")]
        cluster: Option<String>,
        /// Print the plan; change nothing.
        #[arg(long, env = "VTSNAP_DRY_RUN", action = clap::ArgAction::SetTrue, value_parser = clap::builder::BoolishValueParser::new())]
        dry_run: bool,
    },
    /// Plan offline from a dump, without touching any cluster.
    #[command(
        after_help = "Example:\n  kubectl get pods,persistentvolumeclaims,vitessclusters,storageclasses -A -o json > dump.json\n  \
        vtsnap-vtbackup-storage plan --config cfg.yaml --objects dump.json --output json"
    )]
    Plan {
        #[arg(long, env = "VTSNAP_CONFIG")]
        config: PathBuf,
        #[arg(long)]
        objects: PathBuf,
        #[arg(long)]
        cluster: Option<String>,
        #[arg(long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

/// `Err` naming `cluster` when no cluster of the config has that name: a filter that
/// matches nothing would report "nothing to do" for a cluster never looked at.
fn check_cluster(config: &Config, cluster: Option<&str>) -> Result<(), Exit> {
    match cluster {
        Some(c) if !config.clusters.iter().any(|k| k.name == c) => {
            eprintln!("--cluster {c:?}: cluster {c:?} is not in the config");
            Err(Exit::Usage)
        }
        _ => Ok(()),
    }
}

fn main() -> ExitCode {
    let args = Cli::parse();
    args.common.init();
    match args.command {
        Command::Plan {
            config,
            objects,
            cluster,
            output,
        } => {
            let Ok(config) = cli::load_config(&config) else {
                return Exit::Usage.into();
            };
            if let Err(e) = check_cluster(&config, cluster.as_deref()) {
                return e.into();
            }
            let read = read_bounded(&objects, "a dump", MAX_DUMP, Accept::FileOrPipe)
                .map_err(|e| e.to_string())
                .and_then(|b| {
                    serde_json::from_slice::<serde_json::Value>(&b)
                        .map_err(|e| format!("not JSON: {e}"))
                })
                .and_then(|v| plan_from_dump(&config, &v, cluster.as_deref()));
            match read {
                Ok(p) => {
                    match output {
                        Output::Json => println!("{}", serde_json::json!(p)),
                        Output::Table => print!("{}", table(&p)),
                    }
                    Exit::Ok
                }
                Err(e) => {
                    eprintln!("--objects {}: {e}", objects.display());
                    Exit::Usage
                }
            }
        }
        Command::Run {
            config,
            cluster,
            dry_run,
        } => cli::block_on(async move {
            let Ok(config) = cli::load_config(&config) else {
                return Exit::Usage;
            };
            if let Err(e) = check_cluster(&config, cluster.as_deref()) {
                return e;
            }
            let kube = match cli::kube_client().await {
                Ok(k) => k,
                Err(e) => {
                    eprintln!("vtsnap-vtbackup-storage: {e}");
                    return e.exit();
                }
            };
            let opts = Options {
                dry_run,
                only_cluster: cluster,
                pod_gone_timeout: POD_GONE_TIMEOUT,
            };
            let r = run(&config, &opts, kube).await;
            println!("{}", serde_json::json!(r));
            Exit::from_code(r.exit_code).unwrap_or(Exit::Failed)
        }),
    }
    .into()
}
