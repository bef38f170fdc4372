use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use tokio::signal::unix::{SignalKind, signal};
use vtsnap_core::cli::{self, CommonArgs};
use vtsnap_core::exit::Exit;
use vtsnap_csi_btrfs::ids::NodeId;
use vtsnap_csi_btrfs::server::{self, Config, Endpoint};

/// A CSI driver (Identity, Controller and Node) on btrfs: volumes are subvolumes under
/// `<root>/volumes`, published as bind mounts; snapshots read-only snapshots under
/// `<root>/snapshots`.
#[derive(Debug, Parser)]
#[command(
    name = "vtsnap-csi-btrfs",
    version = vtsnap_core::cli::VERSION,
    after_help = "Example:\n  vtsnap-csi-btrfs --endpoint unix:///run/csi/csi.sock --root /mnt/btrfs/csi --node-id node-1\n\n\
    Exit codes: 0 stopped by SIGTERM or Ctrl-C, 1 failed, 2 usage, 3 refused (root not on btrfs, socket path taken)."
)]
struct Cli {
    #[command(flatten)]
    common: CommonArgs,
    /// Where the sidecars connect: unix:///absolute/path.sock.
    #[arg(long, env = "VTSNAP_CSI_ENDPOINT")]
    endpoint: Endpoint,
    /// The driver's directory on a btrfs file system (created if missing).
    #[arg(long, env = "VTSNAP_CSI_ROOT")]
    root: PathBuf,
    /// This node's name, reported by NodeGetInfo and in GetPluginInfo's manifest
    /// (required for NodeGetInfo; at most 256 bytes, no whitespace).
    #[arg(long, env = "VTSNAP_CSI_NODE_ID")]
    node_id: Option<NodeId>,
}

fn main() -> ExitCode {
    let args = match cli::parse::<Cli>(|_, _| {}) {
        Ok(a) => a,
        Err(exit) => return exit.into(),
    };
    args.common.init();
    cli::block_on(run(args)).into()
}

async fn run(args: Cli) -> Exit {
    let cfg = Config {
        endpoint: args.endpoint,
        root: args.root,
        node_id: args.node_id,
    };
    // Listening for SIGTERM before announcing readiness: a supervisor may stop the
    // driver the moment it logs, and the default action would kill it uncleanly.
    let (mut term, mut int) = match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(t), Ok(i)) => (t, i),
        (Err(e), _) | (_, Err(e)) => {
            tracing::error!(error = %e, "cannot handle SIGTERM and SIGINT");
            return Exit::Failed;
        }
    };
    let mut serving = match server::start(&cfg).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot start");
            return e.exit();
        }
    };
    tracing::info!(
        socket = %serving.socket().display(),
        root = %cfg.root.display(),
        "serving CSI"
    );
    let ended = tokio::select! {
        r = serving.wait() => Some(r),
        _ = term.recv() => None,
        _ = int.recv() => None,
    };
    let result = match ended {
        Some(r) => r,
        None => serving.stop().await,
    };
    match result {
        Ok(()) => {
            tracing::info!("stopped");
            Exit::Ok
        }
        Err(e) => {
            tracing::error!(error = %e, "server failed");
            e.exit()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_and_the_endpoint_must_be_a_unix_socket() {
        let c = Cli::try_parse_from([
            "vtsnap-csi-btrfs",
            "--endpoint",
            "unix:///run/csi/csi.sock",
            "--root",
            "/mnt/csi",
            "--node-id",
            "n1",
        ])
        .unwrap();
        assert_eq!(c.endpoint.path(), std::path::Path::new("/run/csi/csi.sock"));
        assert_eq!(c.node_id.as_ref().map(NodeId::as_str), Some("n1"));
        let e = Cli::try_parse_from([
            "vtsnap-csi-btrfs",
            "--endpoint",
            "unix:///run/csi/csi.sock",
            "--root",
            "/mnt/csi",
            "--node-id",
            "node 1",
        ])
        .unwrap_err();
        assert!(e.to_string().contains("no whitespace"), "{e}");
        let e = Cli::try_parse_from([
            "vtsnap-csi-btrfs",
            "--endpoint",
            "tcp://127.0.0.1:9000",
            "--root",
            "/mnt/csi",
        ])
        .unwrap_err();
        assert!(e.to_string().contains("only unix sockets"), "{e}");
    }
}
