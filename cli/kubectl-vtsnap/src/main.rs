use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use k8s_openapi::jiff::Timestamp;
use kubectl_vtsnap::act::{self, ShardArg};
use kubectl_vtsnap::client::{self, LastRequest};
use kubectl_vtsnap::decide::{doctor, status};
use kubectl_vtsnap::kubeconfig::Source;
use kubectl_vtsnap::report::{self, Colour, Format};
use kubectl_vtsnap::{explain, observe, recover};
use vtsnap_core::cli::{CommonArgs, positive_duration};
use vtsnap_core::config::{GoDuration, Mode};
use vtsnap_core::exit::Exit;
use vtsnap_core::k8s_names::escape_controls;
use vtsnap_core::pitr::run::RecoverOutcome;

/// kubectl vtsnap: is each shard protected, is the install healthy, a snapshot now, a
/// shard at a point in time, and why a snapshot or a PVC is what it is.
#[derive(Debug, Parser)]
#[command(name = "kubectl-vtsnap", bin_name = "kubectl vtsnap", version = vtsnap_core::cli::VERSION,
    after_help = "Install: copy kubectl-vtsnap onto your PATH; kubectl finds it as `kubectl vtsnap`.\n\n\
    Examples:\n  kubectl vtsnap status\n  kubectl vtsnap doctor -o json\n  \
    kubectl vtsnap backup example/commerce/-80 --online --wait\n  \
    kubectl vtsnap recover example/commerce/- --to-time 2026-12-07T14:02:00Z --shell\n  \
    kubectl vtsnap explain snapshot example-commerce-x-80-20261201060000 -n vitess\n  \
    kubectl vtsnap explain pvc example-vttablet-zone1-0000000104-5f0d1a2b -n vitess")]
struct Cli {
    #[command(flatten)]
    common: CommonArgs,
    /// Path to the kubeconfig file (else the files of KUBECONFIG merged, ~/.kube/config,
    /// or in-cluster).
    #[arg(long, global = true)]
    kubeconfig: Option<PathBuf>,
    /// The longest the whole command may take [default: 2m; backup --wait: 30m; recover
    /// --wait or --shell: 1h].
    #[arg(long, global = true, env = "VTSNAP_TIMEOUT", value_parser = positive_duration)]
    timeout: Option<GoDuration>,
    /// The kubeconfig context to use.
    #[arg(long, global = true, env = "VTSNAP_CONTEXT")]
    context: Option<String>,
    /// The namespace of the object named (explain), or of the cluster `backup` names when
    /// the config has that name in more than one namespace; else the context's.
    #[arg(short = 'n', long, global = true, env = "VTSNAP_NAMESPACE")]
    namespace: Option<String>,
    /// Where vtsnap is installed (its chart's ConfigMap); found by its label when unset.
    #[arg(long, global = true, env = "VTSNAP_INSTALL_NAMESPACE")]
    install_namespace: Option<String>,
    #[arg(short = 'o', long, global = true, env = "VTSNAP_OUTPUT", value_enum, default_value_t = Format::Table)]
    output: Format,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Per shard: newest snapshot, schedule, last run, fence, restores; per node the node
    /// helper. Shards with a problem first.
    #[command(
        after_help = "Examples:\n  kubectl vtsnap status\n  kubectl vtsnap status example -o yaml\n\n\
        Exit codes: 0 every shard protected; 1 a shard has a problem, or the API could not be read; 2 usage."
    )]
    Status {
        /// Only this cluster (its name in the config).
        cluster: Option<String>,
    },
    /// Preflight and health checks, each pass / warn / fail with its fix.
    #[command(
        after_help = "Examples:\n  kubectl vtsnap doctor\n  kubectl vtsnap doctor --install-namespace vtsnap -o json\n\n\
        Exit codes: 0 no check failed (warnings are listed); 1 a check failed; 2 usage."
    )]
    Doctor,
    /// A snapshot of one shard now: a Job from its CronJob (like `kubectl create job --from`).
    #[command(
        after_help = "Examples:\n  kubectl vtsnap backup example/commerce/-\n  \
        kubectl vtsnap backup example/commerce/-80 --online --wait\n\n\
        Exit codes: without --wait 0 once the Job is created; with --wait the snapshot's own\n  \
        (0 done, 1 failed and unfenced, 3 refused, 4 unfence incomplete), 1 if it cannot be told."
    )]
    Backup {
        /// CLUSTER/KEYSPACE/SHARD, e.g. example/commerce/-80.
        shard: ShardArg,
        /// An online snapshot (no fence), whatever the CronJob's mode.
        #[arg(long)]
        online: bool,
        /// Follow the Job to its end and print its steps (within --timeout, 30m unless given).
        #[arg(long)]
        wait: bool,
    },
    /// Point-in-time recovery of one shard into a new Pod (or a snapshot): a Job of the
    /// chart's recovery template running `vtsnap-pitr run` (docs/pitr.md §8).
    #[command(
        after_help = "Examples:\n  kubectl vtsnap recover example/commerce/- --to-time 2026-12-07T14:02:00Z --shell\n  \
        kubectl vtsnap recover example/commerce/-80 --to-gtid 'c6f3…:1-4200' --after cut --wait\n\n\
        Exit codes: without --wait 0 once the Job is created; with --wait (or --shell) 0 recovered,\n  \
        1 failed (or cannot be told), 2 usage, 3 refused (no base reaches the target: the window is named)."
    )]
    Recover {
        /// CLUSTER/KEYSPACE/SHARD, e.g. example/commerce/-80.
        shard: ShardArg,
        #[command(flatten)]
        to: vtsnap_core::cli::PitrTargetArgs,
        /// Once replayed: serve it in the Pod, or cut a VolumeSnapshot and remove the Pod.
        #[arg(long, value_enum, default_value_t = vtsnap_core::pitr::run::After::Serve)]
        after: vtsnap_core::pitr::run::After,
        /// Follow the Job to its end and print the run's line (within --timeout, 1h unless given).
        #[arg(long)]
        wait: bool,
        /// --wait, then open a `mysql` prompt on the served recovery (kubectl exec).
        #[arg(long, conflicts_with = "after")]
        shell: bool,
    },
    /// Why a snapshot is kept, deleted or unusable; why a PVC was or was not restored.
    #[command(subcommand)]
    Explain(Explain),
}

#[derive(Debug, Subcommand)]
enum Explain {
    /// The GC's decision on a VolumeSnapshot, from its own decider on live data (read-only).
    #[command(
        after_help = "Example:\n  kubectl vtsnap explain snapshot example-commerce-x-x-20261201060000 -n vitess"
    )]
    Snapshot { name: String },
    /// The webhook's recorded decision on a tablet PVC, and its Events.
    #[command(
        after_help = "Example:\n  kubectl vtsnap explain pvc example-vttablet-zone1-0000000104-5f0d1a2b -n vitess"
    )]
    Pvc { name: String },
}

/// The names given on the command line, checked as the API server would (DNS-1123)
/// before any goes into a URL or a field selector. Checked here rather than by clap,
/// whose message would echo a control character raw.
fn names_checked(cli: &Cli) -> Result<(), String> {
    use vtsnap_core::k8s_names::{dns_label, dns_subdomain};
    let namespaces = [&cli.namespace, &cli.install_namespace];
    for ns in namespaces.into_iter().flatten() {
        dns_label(ns)
            .map_err(|e| format!("\"{}\" is not a namespace name: {e}", escape_controls(ns)))?;
    }
    if let Command::Explain(Explain::Snapshot { name } | Explain::Pvc { name }) = &cli.command {
        dns_subdomain(name)
            .map_err(|e| format!("\"{}\" is not an object name: {e}", escape_controls(name)))?;
    }
    Ok(())
}

/// The whole command's time limit (`--timeout`), and its defaults: a `backup --wait`
/// follows a Job that may take many minutes; everything else reads a few pages.
fn limit(cli: &Cli) -> Duration {
    const DEFAULT: Duration = Duration::from_secs(2 * 60);
    const WAIT: Duration = Duration::from_secs(30 * 60);
    const RECOVER: Duration = Duration::from_secs(60 * 60);
    cli.timeout.map_or(
        match cli.command {
            Command::Backup { wait: true, .. } => WAIT,
            Command::Recover { wait, shell, .. } if wait || shell => RECOVER,
            _ => DEFAULT,
        },
        |t| t.get(),
    )
}

fn command_name(c: &Command) -> &'static str {
    match c {
        Command::Status { .. } => "status",
        Command::Doctor => "doctor",
        Command::Backup { .. } => "backup",
        Command::Recover { .. } => "recover",
        Command::Explain(Explain::Snapshot { .. }) => "explain snapshot",
        Command::Explain(Explain::Pvc { .. }) => "explain pvc",
    }
}

/// The whole command ran out of time: the limit, and the request it was waiting on.
#[derive(Debug, thiserror::Error)]
#[error("{command} did not finish within {} (--timeout, VTSNAP_TIMEOUT); {}", secs(*limit), doing(last.as_deref()))]
struct OutOfTime {
    command: &'static str,
    limit: Duration,
    last: Option<String>,
}

fn secs(d: Duration) -> String {
    GoDuration(d).to_string()
}

fn doing(last: Option<&str>) -> String {
    last.map_or_else(
        || "it had sent no API request yet".to_owned(),
        |r| format!("its last API request: {r}"),
    )
}

fn fail(message: &str) -> Exit {
    eprintln!("kubectl vtsnap: {message}");
    Exit::Failed
}

async fn install_and_config(
    kube: &kube::Client,
    cli: &Cli,
) -> Result<
    (
        kubectl_vtsnap::decide::doctor::Install,
        vtsnap_core::config::Config,
    ),
    Exit,
> {
    match observe::find_install(kube, cli.install_namespace.as_deref()).await {
        Ok(Some((install, text))) => match observe::parse_config(&text) {
            Ok(c) => Ok((install, c)),
            Err(e) => Err(fail(&format!(
                "the config of {}/{} is not valid: {e} (kubectl vtsnap doctor)",
                install.namespace, install.fullname
            ))),
        },
        Ok(None) => Err(fail(
            "no vtsnap install found (a ConfigMap labelled app.kubernetes.io/name=vtsnap): see kubectl vtsnap doctor",
        )),
        Err(e) => Err(fail(&e)),
    }
}

async fn run(cli: Cli) -> Exit {
    if let Err(e) = names_checked(&cli) {
        eprintln!("kubectl vtsnap: {e}");
        return Exit::Usage;
    }
    let limit = limit(&cli);
    let last = LastRequest::default();
    // One bound on the whole command: the client's read timeout only bounds a silence,
    // and a server trickling a byte at a time never falls silent (docs/kubectl-vtsnap.md).
    match tokio::time::timeout(limit, command(&cli, limit, last.clone())).await {
        Ok(exit) => exit,
        Err(_) => fail(
            &OutOfTime {
                command: command_name(&cli.command),
                limit,
                last: last.get(),
            }
            .to_string(),
        ),
    }
}

async fn command(cli: &Cli, limit: Duration, last: LastRequest) -> Exit {
    let started = tokio::time::Instant::now();
    let source = Source::find(
        cli.kubeconfig.as_deref(),
        std::env::var_os("KUBECONFIG").as_deref(),
        std::env::home_dir().as_deref(),
    );
    let connected = match client::connect(&source, cli.context.clone(), last).await {
        Ok(c) => c,
        Err(e) => return fail(&e.to_string()),
    };
    let kube = connected.client;
    let namespace = cli.namespace.clone().unwrap_or(connected.namespace);
    let colour = Colour::detect();
    match &cli.command {
        Command::Doctor => {
            let world =
                observe::doctor_world(&kube, cli.install_namespace.as_deref(), Timestamp::now())
                    .await;
            let checks = doctor::checks(&world);
            print!("{}", report::doctor(&checks, cli.output, colour));
            if doctor::any_failed(&checks) {
                Exit::Failed
            } else {
                Exit::Ok
            }
        }
        Command::Status { cluster } => {
            let (install, mut config) = match install_and_config(&kube, cli).await {
                Ok(x) => x,
                Err(e) => return e,
            };
            if let Some(only) = cluster {
                if !config.clusters.iter().any(|c| &c.name == only) {
                    eprintln!("kubectl vtsnap: no cluster {only:?} in the install's config");
                    return Exit::Usage;
                }
                config.clusters.retain(|c| &c.name == only);
            }
            let seen = match observe::status_seen(&kube, &install, &config).await {
                Ok(s) => s,
                Err(e) => return fail(&e),
            };
            let st = status::status(&config, &seen, Timestamp::now());
            print!("{}", report::status(&st, cli.output, colour));
            if st.shards.iter().any(|s| !s.problems.is_empty()) {
                Exit::Failed
            } else {
                Exit::Ok
            }
        }
        Command::Backup {
            shard,
            online,
            wait,
        } => {
            let (install, config) = match install_and_config(&kube, cli).await {
                Ok(x) => x,
                Err(e) => return e,
            };
            let mode = online.then_some(Mode::Online);
            let wait = wait.then(|| act::wait_budget(limit, started.elapsed()));
            // `-n` places a cluster whose name the config has in more than one namespace.
            let only = cli.namespace.as_deref().map(|namespace| act::InNamespace {
                namespace,
                config: &config,
            });
            match act::backup(&kube, &install, shard, mode, wait, only.as_ref()).await {
                Ok(out) => {
                    if cli.output == Format::Table {
                        println!("job {}: {}", out.job, out.result);
                        if !out.steps.is_empty() {
                            println!("steps: {}", out.steps.join(" → "));
                        }
                        if let Some(s) = &out.snapshot {
                            println!("snapshot: {s}");
                        }
                        if let Some(why) = &out.log_unavailable {
                            println!("no step timeline: {why}");
                        }
                    } else {
                        print!("{}", report::structured(&out, cli.output));
                    }
                    match (out.result, out.exit_code) {
                        ("created" | "succeeded", _) => Exit::Ok,
                        (_, Some(code)) => ExitFrom(code).into_exit(),
                        _ => Exit::Failed,
                    }
                }
                Err(e) => fail(&e.to_string()),
            }
        }
        Command::Recover {
            shard,
            to,
            after,
            wait,
            shell,
        } => {
            let (install, config) = match install_and_config(&kube, cli).await {
                Ok(x) => x,
                Err(e) => return e,
            };
            let request =
                match recover_request(&config, cli.namespace.as_deref(), shard, to, *after) {
                    Ok(r) => r,
                    Err(e) => {
                        eprintln!("kubectl vtsnap: {e}");
                        return Exit::Usage;
                    }
                };
            let wait = (*wait || *shell).then(|| act::wait_budget(limit, started.elapsed()));
            match recover::recover(&kube, &install, &request, wait).await {
                Ok(out) => recovered(cli, &out, &request, *shell),
                Err(e) => fail(&e.to_string()),
            }
        }
        Command::Explain(what) => {
            let value = match what {
                Explain::Snapshot { name } => {
                    let (_, config) = match install_and_config(&kube, cli).await {
                        Ok(x) => x,
                        Err(e) => return e,
                    };
                    explain::snapshot(&kube, &config, &namespace, name)
                        .await
                        .map(|e| serde_json::to_value(e).unwrap_or_default())
                }
                Explain::Pvc { name } => explain::pvc(&kube, &namespace, name)
                    .await
                    .map(|e| serde_json::to_value(e).unwrap_or_default()),
            };
            match value {
                Ok(v) if cli.output == Format::Table => {
                    print!("{}", explain::lines(&v));
                    Exit::Ok
                }
                Ok(v) => {
                    print!("{}", report::structured(&v, cli.output));
                    Exit::Ok
                }
                Err(e) => fail(&e),
            }
        }
    }
}

/// The recovery asked for, checked before anything is read or made.
fn recover_request(
    config: &vtsnap_core::config::Config,
    namespace: Option<&str>,
    shard: &ShardArg,
    to: &vtsnap_core::cli::PitrTargetArgs,
    after: vtsnap_core::pitr::run::After,
) -> Result<recover::Request, recover::RecoverError> {
    Ok(recover::Request {
        shard: shard.clone(),
        namespace: recover::shard_namespace(config, &shard.cluster, namespace)?,
        target: recover::target(to, Timestamp::now())?,
        snapshot: to
            .snapshot
            .as_deref()
            .map(recover::snapshot_name)
            .transpose()?,
        after,
    })
}

/// Prints the recovery Job's outcome; with `shell`, opens `mysql` on the served Pod.
fn recovered(cli: &Cli, out: &recover::Outcome, r: &recover::Request, shell: bool) -> Exit {
    if cli.output == Format::Table {
        println!("job {}: {}", out.job, out.result);
        if let Some(line) = &out.run {
            println!("{line}");
        }
        if let Some(why) = &out.log_unavailable {
            println!("no run line: {why}");
        }
        if let Some(cleanup) = &out.cleanup {
            println!("when done: {cleanup}");
        }
    } else {
        print!("{}", report::structured(out, cli.output));
    }
    let outcome = out.verdict.as_ref().map(|v| v.outcome);
    let exit = match (out.result, outcome) {
        ("created", _) | (_, Some(RecoverOutcome::Recovered)) => Exit::Ok,
        (_, Some(RecoverOutcome::Refused)) => Exit::Refused,
        (_, Some(RecoverOutcome::Usage)) => Exit::Usage,
        _ => Exit::Failed,
    };
    if !shell || exit != Exit::Ok {
        return exit;
    }
    let Some(args) = out
        .verdict
        .as_ref()
        .and_then(|v| recover::shell_args(v, &r.namespace))
    else {
        return fail("the run's line names no served Pod to open a prompt on");
    };
    let mut kubectl = std::process::Command::new("kubectl");
    if let Some(k) = &cli.kubeconfig {
        kubectl.arg("--kubeconfig").arg(k);
    }
    if let Some(c) = &cli.context {
        kubectl.args(["--context", c]);
    }
    match kubectl.args(&args).status() {
        Ok(s) if s.success() => Exit::Ok,
        Ok(s) => fail(&format!("kubectl {}: {s}", args.join(" "))),
        Err(e) => fail(&format!("kubectl (on PATH): {e}")),
    }
}

/// A snapshot container's exit code, as this process's.
struct ExitFrom(i32);

impl ExitFrom {
    fn into_exit(self) -> Exit {
        match self.0 {
            0 => Exit::Ok,
            2 => Exit::Usage,
            3 => Exit::Refused,
            4 => Exit::UnfenceIncomplete,
            _ => Exit::Failed,
        }
    }
}

/// Parses the command line. clap echoes a refused argument as it was given: its message
/// is printed with control characters escaped, line by line (the usage text kept), and
/// ends as clap's usage errors do, exit 2. Help and version are clap's own.
fn parse() -> Result<Cli, Exit> {
    match Cli::try_parse() {
        Ok(c) => Ok(c),
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            eprint!("{}", escaped_lines(&e.render().to_string()));
            Err(Exit::Usage)
        }
    }
}

fn escaped_lines(text: &str) -> String {
    text.split_inclusive('\n')
        .map(|line| {
            let (body, end) = line
                .strip_suffix('\n')
                .map_or((line, ""), |body| (body, "\n"));
            format!("{}{end}", escape_controls(body))
        })
        .collect()
}

fn main() -> ExitCode {
    let cli = match parse() {
        Ok(c) => c,
        Err(exit) => return exit.into(),
    };
    // Logs only when asked (VTSNAP_LOG=info): the plugin's own lines say what matters.
    vtsnap_core::logging::init_with_default(cli.common.log_format, "off");
    vtsnap_core::cli::block_on(run(cli)).into()
}
