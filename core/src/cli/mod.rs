//! The command-line harness every vtsnap binary starts from: the common flags, the
//! `--output` choice, the runtime, the Kubernetes client, config loading and the metrics
//! textfile. Each piece maps its failure to an [`Exit`] here, so a `main.rs` only parses
//! its own flags and calls its library.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use crate::textfile::{write_atomic, write_metrics_file};

use crate::config::{Config, ConfigErrors, GoDuration};
use crate::exit::Exit;
use crate::logging::{self, LogFormat};
use crate::retry::{RetryLayer, RetryPolicy};

/// `--version` of every binary: the release, and the commit it was built from when the
/// build was given one (`VTSNAP_GIT_COMMIT`, set by `make images`).
pub const VERSION: &str = env!("VTSNAP_VERSION");

pub use crate::logging::ENV_LOG_FORMAT;

/// The flags every binary has. `#[command(flatten)]` it into the top-level parser.
#[derive(Debug, Clone, clap::Args)]
pub struct CommonArgs {
    /// Log format on stderr.
    #[arg(long, global = true, env = ENV_LOG_FORMAT, value_enum, default_value_t = LogFormat::Auto)]
    pub log_format: LogFormat,
}

impl CommonArgs {
    /// Installs logging as the flags say; call it first in `main`.
    pub fn init(&self) {
        logging::init(self.log_format);
    }
}

/// A binary's whole command line: the common flags and its subcommands `C`. The name and
/// the one-line description are the binary's, given to [`Cli::parse_as`].
#[derive(Debug, clap::Parser)]
#[command(version = VERSION)]
pub struct Cli<C: clap::Subcommand> {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(subcommand)]
    pub command: C,
}

impl<C: clap::Subcommand> Cli<C> {
    /// Parses the process's arguments as the binary `name` (help, version and usage errors
    /// end the process as clap does) and installs logging as the flags say.
    pub fn parse_as(name: &'static str, about: &'static str) -> C {
        use clap::{CommandFactory, FromArgMatches};
        let mut command = Self::command().name(name).bin_name(name).about(about);
        let matches = command.get_matches_mut();
        match Self::from_arg_matches(&matches) {
            Ok(cli) => {
                cli.common.init();
                cli.command
            }
            Err(e) => e.format(&mut command).exit(),
        }
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

/// Parses the command line. Help and version are printed and end the process as clap
/// does; a usage error is printed to stderr, handed to `on_usage` with the subcommand it
/// was for (a command that promises a JSON line prints it there), and ends as
/// [`Exit::Usage`].
pub fn parse<P: clap::Parser>(on_usage: impl FnOnce(Option<&str>, &str)) -> Result<P, Exit> {
    parse_from(std::env::args_os(), on_usage)
}

/// [`parse`] from given arguments (the first is the program name).
pub fn parse_from<P, I, T>(args: I, on_usage: impl FnOnce(Option<&str>, &str)) -> Result<P, Exit>
where
    P: clap::Parser,
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    match P::try_parse_from(&args) {
        Ok(p) => Ok(p),
        // --help and --version: not errors.
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            let _ = e.print();
            // Read again, leniently, only to learn which subcommand was meant.
            let sub = P::command()
                .ignore_errors(true)
                .try_get_matches_from(&args)
                .ok()
                .and_then(|m| m.subcommand_name().map(str::to_owned));
            let text = e.to_string();
            let first = text.lines().next().unwrap_or_default();
            let message = first.strip_prefix("error: ").unwrap_or(first);
            on_usage(sub.as_deref(), message);
            Err(Exit::Usage)
        }
    }
}

/// A duration flag that must be greater than zero (`--interval 0` would spin).
#[derive(Debug, thiserror::Error)]
pub enum PositiveDurationError {
    #[error("{0}")]
    Parse(String),
    #[error("must be greater than 0")]
    Zero,
}

/// A clap value parser: a [`GoDuration`] greater than zero.
pub fn positive_duration(s: &str) -> Result<GoDuration, PositiveDurationError> {
    let d: GoDuration = s.parse().map_err(PositiveDurationError::Parse)?;
    if d.get().is_zero() {
        return Err(PositiveDurationError::Zero);
    }
    Ok(d)
}

/// The Kubernetes API could not be reached (no kubeconfig, no in-cluster account, …).
#[derive(Debug, thiserror::Error)]
pub enum KubeUnreachable {
    #[error("cannot reach the Kubernetes API: no usable kubeconfig or in-cluster account: {0}")]
    Config(#[source] kube::config::InferConfigError),
    #[error("cannot reach the Kubernetes API: {0}")]
    Client(#[source] kube::Error),
}

impl KubeUnreachable {
    /// Nothing was read or changed, but the program could not do its job.
    pub const fn exit(&self) -> Exit {
        Exit::Failed
    }
}

/// Bounds on every Kubernetes API call of the harness's client: without them a server
/// that accepts a connection and never answers holds a call (and a fence) forever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiTimeouts {
    /// Establishing the TCP (and TLS) connection.
    pub connect: Duration,
    /// The longest silence while waiting for response bytes; counted from when the
    /// request was written, so an idle pooled connection does not eat into it.
    pub read: Duration,
    /// Sending the request.
    pub write: Duration,
}

impl ApiTimeouts {
    pub const DEFAULT: Self = Self {
        connect: Duration::from_secs(10),
        read: Duration::from_secs(60),
        write: Duration::from_secs(30),
    };
}

/// The most a watch or long poll through the harness's client may ask the server to
/// wait (`timeoutSeconds`): the server must end it before the read timeout does.
pub const MAX_WATCH_SECONDS: u32 = 50;

/// A client for `config`, with `timeouts` on every call and the retry layer of
/// docs/design.md §3.8 ([`RetryPolicy::DEFAULT`]). Call it inside the runtime (kube's
/// client spawns its buffer there).
pub fn client_with(
    mut config: kube::Config,
    timeouts: ApiTimeouts,
) -> Result<kube::Client, KubeUnreachable> {
    config.connect_timeout = Some(timeouts.connect);
    config.read_timeout = Some(timeouts.read);
    config.write_timeout = Some(timeouts.write);
    config.reset_reader_on_write = true;
    // kube's own retry would repeat a write without a precondition on a 503 and wait
    // whatever Retry-After asks: ours replaces it.
    config.default_retry = false;
    let builder = kube::client::ClientBuilder::try_from(config).map_err(KubeUnreachable::Client)?;
    // The layer sends a request again, so the service below must be cloneable: a buffer.
    let stack = tower::ServiceBuilder::new()
        .layer(RetryLayer::new(RetryPolicy::DEFAULT))
        .layer(tower::buffer::BufferLayer::new(1024));
    Ok(builder.with_layer(&stack).build())
}

/// The Kubernetes client of every binary: the kubeconfig if there is one, else the pod's
/// service account (kube's inference order), with [`ApiTimeouts::DEFAULT`].
pub async fn kube_client() -> Result<kube::Client, KubeUnreachable> {
    let config = kube::Config::infer()
        .await
        .map_err(KubeUnreachable::Config)?;
    client_with(config, ApiTimeouts::DEFAULT)
}

/// Loads and validates the config file. On an error every problem is written to stderr,
/// one per line, and the exit is [`Exit::Usage`]: nothing has been touched yet.
pub fn load_config(path: &Path) -> Result<Config, Exit> {
    Config::load(path).map_err(|e| {
        eprintln!("{e}");
        Exit::Usage
    })
}

/// The flags of a run over the configured clusters (the GC's and vtbackup-storage's
/// `run`): `#[command(flatten)]` them.
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterRunArgs {
    #[arg(long, env = "VTSNAP_CONFIG")]
    pub config: PathBuf,
    /// Only this cluster of the config.
    #[arg(long, env = "VTSNAP_CLUSTER")]
    pub cluster: Option<String>,
    /// Print the plan; change nothing.
    #[arg(long, env = "VTSNAP_DRY_RUN", action = clap::ArgAction::SetTrue, value_parser = clap::builder::BoolishValueParser::new())]
    pub dry_run: bool,
}

impl ClusterRunArgs {
    /// Loads the config, checks `--cluster` against it, connects to Kubernetes and runs
    /// `main` with both and these flags.
    pub fn run<F, Fut>(self, main: F) -> Exit
    where
        F: FnOnce(Config, kube::Client, Self) -> Fut,
        Fut: Future<Output = Exit>,
    {
        let (path, only) = (self.config.clone(), self.cluster.clone());
        with_cluster_named(&path, only.as_deref(), |config, kube| {
            main(config, kube, self)
        })
    }
}

/// One configured shard on the command line: the config, and the shard's cluster,
/// keyspace and key range — every per-shard command's flags (snapshot, drill, archive).
#[derive(Debug, Clone, clap::Args)]
pub struct ShardArgs {
    #[arg(long, env = "VTSNAP_CONFIG")]
    pub config: PathBuf,
    #[arg(long, env = "VTSNAP_CLUSTER")]
    pub cluster: String,
    /// The cluster's namespace: needed when the config names the cluster in more than one
    /// (the schedule reconciler's CronJobs pass it then).
    #[arg(long, env = "VTSNAP_CLUSTER_NAMESPACE")]
    pub cluster_namespace: Option<String>,
    #[arg(long, env = "VTSNAP_KEYSPACE")]
    pub keyspace: String,
    /// The shard's key range, e.g. `-`, `-80`, `80-`.
    #[arg(long, env = "VTSNAP_SHARD", allow_hyphen_values = true)]
    pub shard: String,
}

impl ShardArgs {
    /// The shard as named, placed in its cluster's namespace when one was given.
    pub fn name(&self) -> crate::shard::ShardName {
        crate::shard::ShardName::new(&self.cluster, &self.keyspace, &self.shard)
            .in_namespace(self.cluster_namespace.as_deref())
    }
}

/// The Job a throwaway restore runs in (a drill's, a recovery's): the owner of what it
/// makes. The chart sets all three from the Pod's own labels and namespace.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct OwnerArgs {
    /// The Job's name.
    #[arg(long, env = "VTSNAP_OWNER_NAME", requires = "owner_uid")]
    pub owner_name: Option<String>,
    /// The Job's UID.
    #[arg(long, env = "VTSNAP_OWNER_UID", requires = "owner_name")]
    pub owner_uid: Option<String>,
    /// The Job's namespace, when it is not the shard's: its objects then name it in
    /// annotations, as an owner must share its dependents' namespace.
    #[arg(long, env = "VTSNAP_OWNER_NAMESPACE", requires = "owner_name")]
    pub owner_namespace: Option<String>,
}

impl OwnerArgs {
    pub fn owner(&self) -> Option<crate::restore_pod::JobOwner> {
        let (name, uid) = self.owner_name.clone().zip(self.owner_uid.clone())?;
        Some(crate::restore_pod::JobOwner {
            name,
            uid,
            namespace: self.owner_namespace.clone(),
        })
    }
}

/// A point-in-time recovery's target, as `vtsnap-pitr plan|fetch|run` and `kubectl vtsnap
/// recover` take it (docs/pitr.md §1): `#[command(flatten)]` it.
#[derive(Debug, Clone, clap::Args)]
pub struct PitrTargetArgs {
    /// Recover every transaction committed before this time (RFC 3339).
    #[arg(long, conflicts_with = "to_gtid", required_unless_present = "to_gtid")]
    pub to_time: Option<String>,
    /// Recover every transaction of this GTID set (as `@@gtid_executed` prints it).
    #[arg(long)]
    pub to_gtid: Option<String>,
    /// Start from this snapshot only.
    #[arg(long)]
    pub snapshot: Option<String>,
}

impl PitrTargetArgs {
    /// The target, checked: an RFC 3339 time not after `now`, or a MySQL GTID set as the
    /// server prints it. A usage error names the flag.
    pub fn target(
        &self,
        now: k8s_openapi::jiff::Timestamp,
    ) -> Result<crate::pitr::chain::Target, String> {
        use crate::pitr::chain::Target;
        match (self.to_time.as_deref(), self.to_gtid.as_deref()) {
            (Some(t), None) => {
                let at: k8s_openapi::jiff::Timestamp = t
                    .parse()
                    .map_err(|e| format!("--to-time {t:?}: not an RFC 3339 time: {e}"))?;
                if at > now {
                    return Err(format!("--to-time {at}: after now ({now})"));
                }
                Ok(Target::Before(at))
            }
            (None, Some(g)) => crate::coverage::GtidSet::parse(
                crate::snapshot::GtidFlavor::Mysql56,
                g,
                crate::coverage::Text::Server,
            )
            .map(Target::Through)
            .map_err(|e| format!("--to-gtid {g:?}: {e}")),
            _ => Err("give one of --to-time and --to-gtid".into()),
        }
    }
}

/// The default resources of a throwaway restore's mysqld (a drill's, a recovery's).
pub const MYSQLD_RESOURCES: &str =
    r#"{"requests":{"cpu":"500m","memory":"1Gi"},"limits":{"memory":"2Gi"}}"#;

/// The flags of a throwaway restore's Pod (a drill's, a recovery's) that a cluster's
/// nodes and registry decide: `#[command(flatten)]` them.
#[derive(Debug, Clone, clap::Args)]
pub struct ThrowawayPodArgs {
    /// The throwaway mysqld's `resources`, as JSON.
    #[arg(long, env = "VTSNAP_MYSQLD_RESOURCES", default_value = MYSQLD_RESOURCES)]
    pub mysqld_resources: String,
    /// A Secret the Pod's images are pulled with (repeat it, or comma-separate).
    #[arg(
        long = "image-pull-secret",
        env = "VTSNAP_IMAGE_PULL_SECRETS",
        value_delimiter = ','
    )]
    pub image_pull_secrets: Vec<String>,
}

impl ThrowawayPodArgs {
    /// The resources and the Secrets, each checked (a usage error names the flag).
    pub fn checked(&self) -> Result<(serde_json::Value, Vec<String>), String> {
        let resources = crate::restore_pod::throwaway::parse_resources(&self.mysqld_resources)?;
        crate::restore_pod::throwaway::check_pull_secrets(&self.image_pull_secrets)?;
        Ok((resources, self.image_pull_secrets.clone()))
    }
}

/// The flags of an offline plan from a dump (`plan --objects dump.json`).
#[derive(Debug, Clone, clap::Args)]
pub struct DumpArgs {
    #[arg(long, env = "VTSNAP_CONFIG")]
    pub config: PathBuf,
    /// The objects, as `kubectl get … -A -o json` prints them.
    #[arg(long)]
    pub objects: PathBuf,
    /// Only this cluster of the config.
    #[arg(long)]
    pub cluster: Option<String>,
}

/// `Err` naming `cluster` when no cluster of the config has that name: a filter that
/// matches nothing would report "nothing to do" for a cluster never looked at.
pub fn check_cluster(config: &Config, cluster: Option<&str>) -> Result<(), Exit> {
    match cluster {
        Some(c) if !config.clusters.iter().any(|k| k.name == c) => {
            eprintln!("--cluster {c:?}: cluster {c:?} is not in the config");
            Err(Exit::Usage)
        }
        _ => Ok(()),
    }
}

/// [`load_config`], with `--cluster` checked against it (before any cluster is reached).
pub fn load_config_for(path: &Path, cluster: Option<&str>) -> Result<Config, Exit> {
    let config = load_config(path)?;
    check_cluster(&config, cluster)?;
    Ok(config)
}

/// [`with_cluster`] for a run limited to `cluster`: the name is checked against the
/// config before the API server is reached.
pub fn with_cluster_named<F, Fut>(config: &Path, cluster: Option<&str>, main: F) -> Exit
where
    F: FnOnce(Config, kube::Client) -> Fut,
    Fut: Future<Output = Exit>,
{
    let config = match load_config_for(config, cluster) {
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

/// Why a command that reads the cluster could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error("{0}")]
    Config(ConfigErrors),
    #[error(transparent)]
    Kube(KubeUnreachable),
}

impl StartupError {
    /// A bad config is a usage error; an unreachable API a failure. Nothing was touched.
    pub const fn exit(&self) -> Exit {
        match self {
            StartupError::Config(_) => Exit::Usage,
            StartupError::Kube(e) => e.exit(),
        }
    }

    /// The stable code a JSON line gives it.
    pub const fn code(&self) -> &'static str {
        match self {
            StartupError::Config(_) => "bad-config",
            StartupError::Kube(_) => "kubernetes-unavailable",
        }
    }
}

/// Loads the config, starts the runtime, connects to Kubernetes and runs `main` with
/// both: the spine of every command that reads the cluster.
pub fn with_cluster<F, Fut>(config: &Path, main: F) -> Exit
where
    F: FnOnce(Config, kube::Client) -> Fut,
    Fut: Future<Output = Exit>,
{
    with_cluster_or(config, |_| {}, main)
}

/// [`with_cluster`], and `on_error` is told why it could not start (after the reason
/// was written to stderr): a command that promises a JSON line prints it there.
pub fn with_cluster_or<F, Fut>(config: &Path, on_error: impl FnOnce(&StartupError), main: F) -> Exit
where
    F: FnOnce(Config, kube::Client) -> Fut,
    Fut: Future<Output = Exit>,
{
    let fail = |e: StartupError| {
        eprintln!("{e}");
        on_error(&e);
        e.exit()
    };
    let config = match Config::load(config) {
        Ok(c) => c,
        Err(e) => return fail(StartupError::Config(e)),
    };
    block_on(async {
        match kube_client().await {
            Ok(kube) => main(config, kube).await,
            Err(e) => fail(StartupError::Kube(e)),
        }
    })
}

#[cfg(test)]
mod tests;
