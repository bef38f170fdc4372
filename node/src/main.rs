use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use vtsnap_core::cli::{self, Cli};
use vtsnap_core::config::GoDuration;
use vtsnap_core::exit::Exit;
use vtsnap_core::naming::TabletUid;
use vtsnap_node::cgroup::{Cgroup, Roots};
use vtsnap_node::{fsfreeze, holdloop, mysqlctl, probe};

/// `--help`'s first line.
const ABOUT: &str = "Node-local actions for vtsnap: probe a tablet's volume layout, stop/start mysqld through the pod's mysqlctld, hold mysqld down by freezing its container's cgroup, FIFREEZE a volume; and (`run`) the daemon that serves fence leases and releases everything when a lease expires.";

#[derive(Debug, Subcommand)]
enum Command {
    /// The daemon: serve this node's fence leases; release everything a lease no longer covers.
    #[command(after_help = "Example (a DaemonSet container):\n  \
        vtsnap-node run --node-name $NODE_NAME --kubelet-dir /var/lib/kubelet --state-dir /var/lib/vtsnap-node --listen 0.0.0.0:9464\n\n\
        Endpoints: /healthz, /readyz, /metrics (Prometheus).")]
    Run {
        /// This node's name (`spec.nodeName`): it selects this node's leases by label.
        #[arg(long, env = "VTSNAP_NODE_NAME", value_parser = node_name)]
        node_name: String,
        #[arg(long, env = "VTSNAP_KUBELET_DIR", default_value = "/var/lib/kubelet")]
        kubelet_dir: PathBuf,
        #[arg(long, env = "VTSNAP_CGROUP_ROOT", default_value = "/sys/fs/cgroup")]
        cgroup_root: PathBuf,
        #[arg(long, env = "VTSNAP_STATE_DIR", default_value = "/var/lib/vtsnap-node")]
        state_dir: PathBuf,
        /// A path on the node's root file system, which is never frozen (PID 1's root: the
        /// node's `/` with hostPID).
        #[arg(long, env = "VTSNAP_HOST_ROOT", default_value = vtsnap_node::fsfreeze::NODE_ROOT)]
        host_root: PathBuf,
        #[arg(long, env = "VTSNAP_LISTEN", default_value = "0.0.0.0:9464")]
        listen: std::net::SocketAddr,
        /// The leases are followed with a watch; this is the longest time between two passes
        /// with no change seen (greater than 0). Expiries and retries set their own times.
        #[arg(long, env = "VTSNAP_RESYNC", default_value = "30s", value_parser = cli::positive_duration)]
        resync: GoDuration,
    },
    /// Check that a tablet's data, InnoDB, binlog and relay-log directories are on its volume.
    #[command(
        after_help = "Example:\n  vtsnap-node probe --vtdataroot /var/lib/kubelet/pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount/vtdataroot --tablet-uid 101\n\n\
        Exit codes: 0 single-volume layout, 3 refused (multi-volume or unreadable), 2 usage."
    )]
    Probe {
        #[arg(long, env = "VTSNAP_VTDATAROOT")]
        vtdataroot: PathBuf,
        #[arg(long, env = "VTSNAP_TABLET_UID")]
        tablet_uid: TabletUid,
    },
    /// Stop mysqld cleanly through mysqlctld (`Shutdown{wait_for_mysqld}`); it stays down until `start`.
    #[command(
        after_help = "Example:\n  vtsnap-node stop --socket /var/lib/kubelet/pods/<uid>/volumes/kubernetes.io~empty-dir/vt-root/socket/mysqlctl.sock"
    )]
    Stop {
        #[arg(long)]
        socket: PathBuf,
        #[arg(long, default_value = "5m")]
        timeout: GoDuration,
    },
    /// Start mysqld through mysqlctld and wait until it answers on its socket.
    #[command(
        after_help = "Example:\n  vtsnap-node start --socket .../socket/mysqlctl.sock --mysqld-socket .../socket/mysql.sock"
    )]
    Start {
        #[arg(long)]
        socket: PathBuf,
        #[arg(long)]
        mysqld_socket: PathBuf,
        #[arg(long, default_value = "5m")]
        timeout: GoDuration,
    },
    /// Freeze the cgroup holding PID until stdin closes, SIGTERM arrives or --max-hold passes.
    #[command(
        after_help = "Example:\n  vtsnap-node hold --pid 4242 --max-hold 2m\n\n\
        The root cgroup and this helper's own cgroup are refused (exit 3)."
    )]
    Hold {
        #[arg(long)]
        pid: u32,
        #[arg(long)]
        max_hold: GoDuration,
        #[arg(long, env = "VTSNAP_CGROUP_ROOT", default_value = "/sys/fs/cgroup")]
        cgroup_root: PathBuf,
    },
    /// FIFREEZE the file system mounted at PATH until stdin closes, SIGTERM arrives or --max-hold passes.
    #[command(
        after_help = "Example:\n  vtsnap-node fsfreeze --mount /var/lib/kubelet/pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount --max-hold 30s\n\n\
        The node's root file system is refused (exit 3)."
    )]
    Fsfreeze {
        #[arg(long)]
        mount: PathBuf,
        /// A path on the node's root file system, which is refused.
        #[arg(long, env = "VTSNAP_HOST_ROOT", default_value = vtsnap_node::fsfreeze::NODE_ROOT)]
        host_root: PathBuf,
        #[arg(long)]
        max_hold: GoDuration,
    },
}

/// A node name that is also a label value: leases are selected by
/// `vtsnap.io/node=<name>`, and a name like `a,b=c` would change the selector itself.
#[derive(Debug, thiserror::Error)]
enum NodeNameError {
    #[error("not a node name: {0}")]
    NotNodeName(vtsnap_core::k8s_names::NameError),
    #[error("cannot be a label value, which the lease selector needs: {0}")]
    NotLabelValue(vtsnap_core::k8s_names::NameError),
}

fn node_name(s: &str) -> Result<String, NodeNameError> {
    vtsnap_core::k8s_names::dns_subdomain(s).map_err(NodeNameError::NotNodeName)?;
    vtsnap_core::k8s_names::label_value(s).map_err(NodeNameError::NotLabelValue)?;
    Ok(s.to_owned())
}

fn main() -> ExitCode {
    let command = Cli::<Command>::parse_as("vtsnap-node", ABOUT);
    // The harness does not wait for a pending stdin read (the hold loop's) at exit.
    cli::block_on(run(command)).into()
}

fn fail(exit: Exit, e: &dyn std::fmt::Display) -> Exit {
    eprintln!("{e}");
    println!("{}", serde_json::json!({"error": e.to_string()}));
    exit
}

async fn run(cmd: Command) -> Exit {
    match cmd {
        Command::Run {
            node_name,
            kubelet_dir,
            cgroup_root,
            state_dir,
            host_root,
            listen,
            resync,
        } => {
            let kube = match cli::kube_client().await {
                Ok(k) => k,
                Err(e) => return fail(e.exit(), &e),
            };
            let cfg = vtsnap_node::daemon::DaemonConfig {
                node: node_name,
                kubelet_dir,
                roots: Roots {
                    cgroup: cgroup_root,
                    ..Roots::default()
                },
                host_root,
                state_dir,
                resync: resync.get(),
                listen: Some(listen),
                start_timeout: std::time::Duration::from_secs(300),
                shutdown_timeout: std::time::Duration::from_secs(300),
            };
            match vtsnap_node::daemon::start(cfg, kube).await {
                Ok(h) => {
                    tracing::info!(addr = ?h.addr, "serving fence leases");
                    // SIGTERM stops serving; holds stay recorded and the next start (or the
                    // lease expiring) releases them.
                    if let Ok(mut term) =
                        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    {
                        tokio::select! {
                            _ = term.recv() => {}
                            _ = tokio::signal::ctrl_c() => {}
                        }
                    } else {
                        let _ = tokio::signal::ctrl_c().await;
                    }
                    h.stop().await;
                    Exit::Ok
                }
                Err(e) => fail(Exit::Failed, &e),
            }
        }
        Command::Probe {
            vtdataroot,
            tablet_uid,
        } => match probe::probe(&vtdataroot, tablet_uid) {
            Ok(l) => {
                println!("{}", serde_json::to_string(&l).unwrap_or_default());
                Exit::Ok
            }
            Err(e) => fail(Exit::Refused, &e),
        },
        Command::Stop { socket, timeout } => match mysqlctl::MysqlCtl::new(&socket) {
            Ok(c) => match c.shutdown(timeout.get()).await {
                Ok(()) => {
                    println!("{}", serde_json::json!({"stopped": true}));
                    Exit::Ok
                }
                Err(e) => fail(Exit::Failed, &e),
            },
            Err(e) => fail(Exit::Failed, &e),
        },
        Command::Start {
            socket,
            mysqld_socket,
            timeout,
        } => match mysqlctl::start_unless_running(&socket, &mysqld_socket, timeout.get()).await {
            Ok(started) => {
                let already = started == mysqlctl::Started::AlreadyRunning;
                println!(
                    "{}",
                    serde_json::json!({"started": true, "alreadyRunning": already})
                );
                Exit::Ok
            }
            Err(e) => fail(Exit::Failed, &e),
        },
        Command::Hold {
            pid,
            max_hold,
            cgroup_root,
        } => {
            let roots = Roots {
                cgroup: cgroup_root,
                ..Roots::default()
            };
            let cg = match Cgroup::of_pid(&roots, pid) {
                Ok(c) => c,
                Err(e) => return fail(Exit::Refused, &e),
            };
            let releaser = holdloop::Releaser::arm();
            if let Err(e) = cg.freeze() {
                return fail(Exit::Failed, &e);
            }
            println!(
                "{}",
                serde_json::json!({"held": cg.dir, "version": cg.version})
            );
            let cause = releaser.wait(max_hold.get()).await;
            match cg.thaw() {
                Ok(()) => {
                    println!("{}", serde_json::json!({"released": cause}));
                    Exit::Ok
                }
                Err(e) => fail(Exit::Failed, &e),
            }
        }
        Command::Fsfreeze {
            mount,
            host_root,
            max_hold,
        } => {
            let releaser = holdloop::Releaser::arm();
            if let Err(e) = fsfreeze::freeze(&mount, &host_root) {
                let exit = if matches!(e, fsfreeze::FsFreezeError::Ioctl { .. }) {
                    Exit::Failed
                } else {
                    Exit::Refused
                };
                return fail(exit, &e);
            }
            println!("{}", serde_json::json!({"frozen": mount}));
            let cause = releaser.wait(max_hold.get()).await;
            match fsfreeze::thaw(&mount) {
                Ok(()) => {
                    println!("{}", serde_json::json!({"released": cause}));
                    Exit::Ok
                }
                Err(e) => fail(Exit::Failed, &e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn run_args(extra: &[&str]) -> Result<Cli<Command>, clap::Error> {
        let mut args = vec!["vtsnap-node", "run", "--node-name", "node-1"];
        args.extend_from_slice(extra);
        Cli::<Command>::try_parse_from(args)
    }

    #[test]
    fn the_resync_period_must_be_greater_than_zero() {
        for zero in ["0", "0s", "0ms"] {
            let e = run_args(&["--resync", zero]).unwrap_err();
            assert!(e.to_string().contains("must be greater than 0"), "{e}");
        }
        assert!(run_args(&["--resync", "1s"]).is_ok());
        assert!(run_args(&[]).is_ok(), "the default");
    }

    #[test]
    fn the_node_name_must_be_a_node_name_and_a_label_value() {
        let named = |n: &str| {
            Cli::<Command>::try_parse_from(["vtsnap-node", "run", "--node-name", n]).map(
                |c| match c.command {
                    Command::Run { node_name, .. } => node_name,
                    _ => unreachable!(),
                },
            )
        };
        for ok in ["node-1", "ip-10-0-0-1.ec2.internal", "k3d-lab-agent-0"] {
            assert_eq!(named(ok).unwrap(), ok);
        }
        // `a,b=c` would turn `vtsnap.io/node=a,b=c` into two selector terms.
        for bad in ["a,b=c", "", "Node_1", "a b", "-a", &"n".repeat(64)] {
            assert!(named(bad).is_err(), "{bad:?}");
        }
        let e = named("a,b=c").unwrap_err().to_string();
        assert!(e.contains("not a node name"), "{e}");
    }
}
