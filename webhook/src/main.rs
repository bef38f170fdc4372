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
use vtsnap_admission::server::{App, serve};
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
    #[arg(long, env = "VTSNAP_RESTORE_IMAGE")]
    restore_image: Option<String>,
    /// vtctld's word on a shard (primary, versions) older than this is not used.
    #[arg(long, env = "VTSNAP_SHARD_STATE_MAX_AGE", default_value = "5m", value_parser = positive_duration)]
    shard_state_max_age: GoDuration,
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
                Ok((response, d)) => {
                    for n in &d.notes {
                        eprintln!("decision: {}: {}", n.code.as_str(), n.message);
                    }
                    println!("{response}");
                    Exit::Ok
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
        } => cli::block_on(async move {
            let Ok(config) = cli::load_config(&decision.config) else {
                return Exit::Usage;
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
            serve(listener, tls, app, shutdown_signal()).await;
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
