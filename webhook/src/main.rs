use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use k8s_openapi::jiff::Timestamp;
use vtsnap_admission::cache::Caches;
use vtsnap_admission::decide::Settings;
use vtsnap_admission::offline::offline_review;
use vtsnap_admission::server::budget::{self, BodyBudget, BudgetError};
use vtsnap_admission::server::{App, Limits, serve_budgeted};
use vtsnap_admission::tls::{Reloading, server_config};
use vtsnap_core::cli::{self, CommonArgs, positive_duration};
use vtsnap_core::config::GoDuration;
use vtsnap_core::exit::Exit;

/// The mutating admission webhook: restore injection into new tablet PVCs and Pods, and
/// vtbackup scratch storage at creation.
#[derive(Debug, Parser)]
#[command(name = "vtsnap-admission", version = vtsnap_core::cli::VERSION)]
struct Cli {
    #[command(flatten)]
    common: CommonArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Args)]
struct DecisionArgs {
    #[arg(long, env = "VTSNAP_CONFIG")]
    config: PathBuf,
    /// Image of the `vtsnap-restore` init container injected into tablet Pods of opted-in
    /// pools (unset: none is injected; put it in the pool's `initContainers`).
    #[arg(long, env = "VTSNAP_RESTORE_IMAGE", value_parser = image_reference)]
    restore_image: Option<String>,
    /// vtctld's word on a shard (primary, versions) older than this is not used.
    #[arg(long, env = "VTSNAP_SHARD_STATE_MAX_AGE", default_value = "5m", value_parser = positive_duration)]
    shard_state_max_age: GoDuration,
}

/// The bounds on each connection (see [`Limits`]).
#[derive(Debug, clap::Args)]
struct LimitArgs {
    /// A client's TLS handshake must finish within this.
    #[arg(long, env = "VTSNAP_HANDSHAKE_TIMEOUT", default_value_t = GoDuration(Limits::default().handshake), value_parser = positive_duration)]
    handshake_timeout: GoDuration,
    /// A whole request (head, body, decision, answer) must finish within this of its first
    /// byte; the API server waits at most 30 s (10 s by default) for a webhook.
    #[arg(long, env = "VTSNAP_REQUEST_TIMEOUT", default_value_t = GoDuration(Limits::default().request), value_parser = positive_duration)]
    request_timeout: GoDuration,
    /// A kept-alive connection without a request is closed after this (longer than the API
    /// server's own 90 s, so that the client closes first).
    #[arg(long, env = "VTSNAP_IDLE_TIMEOUT", default_value_t = GoDuration(Limits::default().idle), value_parser = positive_duration)]
    idle_timeout: GoDuration,
    /// Connections served at once; past it, the one waiting longest on its client is closed.
    #[arg(long, env = "VTSNAP_MAX_CONNECTIONS", default_value_t = Limits::default().max_connections,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=65_535))]
    max_connections: usize,
    /// MiB of review bodies held at once, over every connection (each body is held until its
    /// answer is made). At least 8 (one review of the largest size).
    #[arg(long, env = "VTSNAP_BODY_BUDGET_MIB", default_value_t = (budget::DEFAULT_BUDGET >> 20) as u64,
          value_parser = clap::value_parser!(u64).range(8..=4095))]
    body_budget_mib: u64,
    /// How long a review waits for the body budget before it is answered 503 (a refused
    /// review skips its restore under `failurePolicy: Ignore`: keep it inside the API
    /// server's call timeout).
    #[arg(long, env = "VTSNAP_BODY_BUDGET_WAIT", default_value_t = GoDuration(budget::DEFAULT_WAIT), value_parser = positive_duration)]
    body_budget_wait: GoDuration,
}

impl LimitArgs {
    fn budget(&self) -> Result<BodyBudget, BudgetError> {
        let bytes = usize::try_from(self.body_budget_mib << 20).unwrap_or(usize::MAX);
        BodyBudget::new(bytes, self.body_budget_wait.get())
    }

    fn limits(&self) -> Limits {
        Limits {
            handshake: self.handshake_timeout.get(),
            request: self.request_timeout.get(),
            idle: self.idle_timeout.get(),
            max_connections: self.max_connections,
        }
    }
}

/// Why an image reference is refused: the API server would refuse every Pod it is put in
/// (empty, surrounding spaces) or the runtime could never pull it.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
enum ImageError {
    #[error("an image reference must not be empty")]
    Empty,
    #[error("an image reference must not contain whitespace or control characters")]
    Space,
    #[error("an image reference is at most {MAX_IMAGE} bytes")]
    TooLong,
    #[error("the repository part of an image reference must be lowercase ({0:?})")]
    Uppercase(String),
}

/// Longer than any real reference (a 255-byte name, a 128-byte tag and a digest).
const MAX_IMAGE: usize = 1024;

/// A container image reference, checked only where a wrong one is certain.
fn image_reference(s: &str) -> Result<String, ImageError> {
    if s.is_empty() {
        return Err(ImageError::Empty);
    }
    if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(ImageError::Space);
    }
    if s.len() > MAX_IMAGE {
        return Err(ImageError::TooLong);
    }
    let name = s.split_once('@').map_or(s, |(n, _)| n);
    let name = match name.rfind(':') {
        Some(i) if !name[i..].contains('/') => &name[..i],
        _ => name,
    };
    // The first component is a registry when it has `.` or `:`, is `localhost`, or has
    // an uppercase letter (the docker reference grammar); the rest must be lowercase.
    let path = match name.split_once('/') {
        Some((first, rest))
            if first.contains(['.', ':'])
                || first == "localhost"
                || first.chars().any(|c| c.is_ascii_uppercase()) =>
        {
            rest
        }
        _ => name,
    };
    if path.chars().any(|c| c.is_ascii_uppercase()) {
        return Err(ImageError::Uppercase(path.to_owned()));
    }
    Ok(s.to_owned())
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve AdmissionReviews over HTTPS.
    #[command(
        after_help = "Example:\n  vtsnap-admission serve --config /etc/vtsnap/config.yaml \\\n    \
        --tls-cert /etc/vtsnap/tls/tls.crt --tls-key /etc/vtsnap/tls/tls.key \\\n    \
        --restore-image vtsnap/vtsnap-restore:0.1.0\n\n\
        Endpoints: POST /mutate, GET /healthz, /readyz (caches filled), /metrics, /debug/shards.\n\
        Exit codes: 0 stopped by SIGTERM/Ctrl-C; 1 failed (cannot listen, no API); 2 bad\n  config, flags or certificate."
    )]
    Serve {
        #[command(flatten)]
        decision: DecisionArgs,
        #[arg(long, env = "VTSNAP_LISTEN", default_value = "0.0.0.0:8443")]
        listen: SocketAddr,
        /// PEM certificate chain (the mounted Secret's `tls.crt`); re-read when it changes.
        #[arg(long, env = "VTSNAP_TLS_CERT")]
        tls_cert: PathBuf,
        /// PEM private key (`tls.key`).
        #[arg(long, env = "VTSNAP_TLS_KEY")]
        tls_key: PathBuf,
        /// How often the certificate files are checked for a change.
        #[arg(long, env = "VTSNAP_CERT_RELOAD", default_value = "10s", value_parser = positive_duration)]
        cert_reload: GoDuration,
        /// How often vtctld is read for each shard with snapshots and restore enabled.
        #[arg(long, env = "VTSNAP_REFRESH", default_value = "30s", value_parser = positive_duration)]
        refresh: GoDuration,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Print the AdmissionReview response the server would send, decided from a dump.
    #[command(
        after_help = "Example:\n  kubectl get volumesnapshots,persistentvolumeclaims,vitessclusters -n vitess -o json > dump.json\n  \
        kubectl get --raw /api/v1/namespaces/vtsnap/services/https:vtsnap-admission:443/proxy/debug/shards > shards.json\n  \
        vtsnap-admission review --config cfg.yaml --objects dump.json --shards shards.json --request review.json\n\n\
        The response goes to stdout, each decision note to stderr.\n\
        Exit codes: 0 answered; 2 bad config, flags or input (an unreadable review: the server\n  would answer 400)."
    )]
    Review {
        #[command(flatten)]
        decision: DecisionArgs,
        #[arg(long)]
        objects: PathBuf,
        /// An AdmissionReview request (JSON).
        #[arg(long)]
        request: PathBuf,
        /// Shard states (the server's /debug/shards); without it no shard's version is known.
        #[arg(long)]
        shards: Option<PathBuf>,
        /// The time to decide at (RFC 3339), for reproducible answers.
        #[arg(long)]
        now: Option<String>,
    },
}

fn settings(d: &DecisionArgs) -> Settings {
    Settings {
        restore_image: d.restore_image.clone(),
        shard_state_max_age: d.shard_state_max_age.get(),
    }
}

fn main() -> ExitCode {
    let args = Cli::parse();
    args.common.init();
    match args.command {
        Command::Review {
            decision,
            objects,
            request,
            shards,
            now,
        } => {
            let Ok(config) = cli::load_config(&decision.config) else {
                return Exit::Usage.into();
            };
            let now = match now.as_deref().map(str::parse::<Timestamp>) {
                None => Timestamp::now(),
                Some(Ok(t)) => t,
                Some(Err(e)) => {
                    eprintln!("--now: {e}");
                    return Exit::Usage.into();
                }
            };
            match offline_review(
                &config,
                &settings(&decision),
                &objects,
                &request,
                shards.as_deref(),
                now,
            ) {
                Ok((answer, d)) => {
                    for n in &d.notes {
                        eprintln!("decision: {}: {}", n.code.as_str(), n.message);
                    }
                    match answer.to_json() {
                        Ok(json) => {
                            println!("{json}");
                            Exit::Ok
                        }
                        Err(e) => {
                            eprintln!("vtsnap-admission review: {e}");
                            Exit::Failed
                        }
                    }
                }
                Err(e) => {
                    eprintln!("vtsnap-admission review: {e}");
                    Exit::Usage
                }
            }
        }
        Command::Serve {
            decision,
            listen,
            tls_cert,
            tls_key,
            cert_reload,
            refresh,
            limits,
        } => cli::block_on(async move {
            let Ok(config) = cli::load_config(&decision.config) else {
                return Exit::Usage;
            };
            let budget = match limits.budget() {
                Ok(b) => Arc::new(b),
                Err(e) => {
                    eprintln!("vtsnap-admission: --body-budget-mib: {e}");
                    return Exit::Usage;
                }
            };
            let cert = match Reloading::load(&tls_cert, &tls_key) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("vtsnap-admission: {e}");
                    return Exit::Usage;
                }
            };
            let tls = match server_config(cert.clone()) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("vtsnap-admission: TLS: {e}");
                    return Exit::Usage;
                }
            };
            let client = match cli::kube_client().await {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("vtsnap-admission: {e}");
                    return e.exit();
                }
            };
            let listener = match tokio::net::TcpListener::bind(listen).await {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("vtsnap-admission: cannot listen on {listen}: {e}");
                    return Exit::Failed;
                }
            };
            let config = Arc::new(config);
            let namespaces: BTreeSet<String> = config
                .clusters
                .iter()
                .map(|c| c.namespace.clone())
                .collect();
            let (caches, _watches) = Caches::start(&client, &namespaces);
            tokio::spawn(vtsnap_admission::tablets::refresh_loop(
                client.clone(),
                config.clone(),
                caches.clone(),
                refresh.get(),
            ));
            tokio::spawn(cert.watch(cert_reload.get()));
            let (app, _events) = App::new(config, settings(&decision), caches, client);
            tracing::info!(%listen, namespaces = ?namespaces, "serving AdmissionReviews");
            serve_budgeted(
                listener,
                tls,
                app,
                limits.limits(),
                budget,
                shutdown_signal(),
            )
            .await;
            Exit::Ok
        }),
    }
    .into()
}

/// SIGTERM (what kubelet sends) or Ctrl-C.
async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        () = term => {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_references_the_runtime_could_pull_are_kept() {
        for ok in [
            "vtsnap/vtsnap-restore:0.1.0",
            "vtsnap-restore",
            "registry.example.com:5000/team/vtsnap-restore:v1.2_rc-3",
            "Registry.Example.com/vtsnap/restore",
            "localhost/restore:TAG",
            "MyRegistry/restore",
            "vtsnap/restore@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ] {
            assert_eq!(image_reference(ok).as_deref(), Ok(ok), "{ok}");
        }
    }

    #[test]
    fn image_references_that_can_never_work_are_refused() {
        assert_eq!(image_reference(""), Err(ImageError::Empty));
        for bad in [
            " vtsnap/restore",
            "vtsnap/restore ",
            "vtsnap /restore",
            "a\tb",
            "a\u{7}b",
        ] {
            assert_eq!(image_reference(bad), Err(ImageError::Space), "{bad:?}");
        }
        assert_eq!(
            image_reference(&"a".repeat(MAX_IMAGE + 1)),
            Err(ImageError::TooLong)
        );
        assert!(image_reference(&"a".repeat(MAX_IMAGE)).is_ok());
        for bad in [
            "vtsnap/Restore:1",
            "Restore",
            "registry.example.com/Team/restore",
        ] {
            assert!(
                matches!(image_reference(bad), Err(ImageError::Uppercase(_))),
                "{bad}"
            );
        }
    }
}
