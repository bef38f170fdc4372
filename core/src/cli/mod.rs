//! The command-line harness every vtsnap binary starts from: the common flags, the
//! `--output` choice, the runtime, the Kubernetes client, config loading and the metrics
//! textfile. Each piece maps its failure to an [`Exit`] here, so a `main.rs` only parses
//! its own flags and calls its library.

mod textfile;

use std::future::Future;
use std::path::Path;

pub use textfile::{write_atomic, write_metrics_file};

use crate::config::Config;
use crate::exit::Exit;
use crate::logging::{self, LogFormat};

/// The flags every binary has. `#[command(flatten)]` it into the top-level parser.
#[derive(Debug, Clone, clap::Args)]
pub struct CommonArgs {
    /// Log format on stderr.
    #[arg(long, global = true, env = "VTSNAP_LOG_FORMAT", value_enum, default_value_t = LogFormat::Auto)]
    pub log_format: LogFormat,
}

impl CommonArgs {
    /// Installs logging as the flags say; call it first in `main`.
    pub fn init(&self) {
        logging::init(self.log_format);
    }
}

/// How a read-only command prints its result: `--output table|json`. Each subcommand
/// chooses its own default and env name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    // No doc comments on the variants: clap would print them in `--help`.
    Table,
    Json,
}

/// Builds the runtime, runs `main` on it to completion and returns its exit.
///
/// The runtime is shut down without waiting: `main` has reported by the time it returns,
/// and a pending blocking read (a hold loop's stdin) must not keep the process alive.
pub fn block_on<F>(main: F) -> Exit
where
    F: Future<Output = Exit>,
{
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return Exit::Failed;
        }
    };
    let exit = rt.block_on(main);
    rt.shutdown_background();
    exit
}

/// The Kubernetes API could not be reached (no kubeconfig, no in-cluster account, …).
#[derive(Debug, thiserror::Error)]
#[error("cannot reach the Kubernetes API: {0}")]
pub struct KubeUnreachable(#[source] pub kube::Error);

impl KubeUnreachable {
    /// Nothing was read or changed, but the program could not do its job.
    pub const fn exit(&self) -> Exit {
        Exit::Failed
    }
}

/// The Kubernetes client of every binary: the kubeconfig if there is one, else the pod's
/// service account (kube's inference order).
pub async fn kube_client() -> Result<kube::Client, KubeUnreachable> {
    kube::Client::try_default().await.map_err(KubeUnreachable)
}

/// Loads and validates the config file. On an error every problem is written to stderr,
/// one per line, and the exit is [`Exit::Usage`]: nothing has been touched yet.
pub fn load_config(path: &Path) -> Result<Config, Exit> {
    Config::load(path).map_err(|e| {
        eprintln!("{e}");
        Exit::Usage
    })
}

/// Loads the config, starts the runtime, connects to Kubernetes and runs `main` with
/// both: the spine of every command that reads the cluster.
pub fn with_cluster<F, Fut>(config: &Path, main: F) -> Exit
where
    F: FnOnce(Config, kube::Client) -> Fut,
    Fut: Future<Output = Exit>,
{
    let config = match load_config(config) {
        Ok(c) => c,
        Err(exit) => return exit,
    };
    block_on(async {
        match kube_client().await {
            Ok(kube) => main(config, kube).await,
            Err(e) => {
                eprintln!("{e}");
                e.exit()
            }
        }
    })
}

#[cfg(test)]
mod tests;
