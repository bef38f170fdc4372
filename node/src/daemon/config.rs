//! The daemon's options, and the checks it runs on them before it starts.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::cgroup::Roots;

#[derive(Debug, Clone)]
pub struct DaemonConfig {
    pub node: String,
    pub kubelet_dir: PathBuf,
    pub roots: Roots,
    /// The path whose file system is the node's root ([`crate::fsfreeze::NODE_ROOT`]): never frozen.
    pub host_root: PathBuf,
    pub state_dir: PathBuf,
    /// The longest time between two passes with no watch event: a pass re-reads what the
    /// store cannot be trusted to show (a lease gone while the watch was down).
    pub resync: Duration,
    pub listen: Option<SocketAddr>,
    /// How long a `Start` may take until mysqld answers.
    pub start_timeout: Duration,
    pub shutdown_timeout: Duration,
}

/// Switches for tests only, behind the `test-hooks` feature so that no production
/// configuration can carry them.
#[cfg(feature = "test-hooks")]
#[derive(Debug, Clone, Copy, Default)]
pub struct TestHooks {
    /// Stop mysqld but do not freeze its container, so that whatever restarts mysqld (a
    /// supervisor's `Start`) can — to show what the hold prevents.
    pub skip_hold: bool,
}

/// A [`DaemonConfig`] the daemon refuses to run with.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// A zero resync period is a busy loop.
    #[error("the resync period must be greater than 0")]
    ResyncZero,
    /// The node name selects this node's leases (`vtsnap.io/node=<node>`): anything but a
    /// valid label value would select others, or nothing.
    #[error(
        "node name {node:?} is not a valid label value (at most 63 characters: letters, digits, '-', '_', '.', beginning and ending with a letter or digit)"
    )]
    NodeName { node: String },
}

impl DaemonConfig {
    /// Refuses a resync period of 0 and a node name that is not a valid label value.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.resync.is_zero() {
            return Err(ConfigError::ResyncZero);
        }
        if !is_label_value(&self.node) || self.node.is_empty() {
            return Err(ConfigError::NodeName {
                node: self.node.clone(),
            });
        }
        Ok(())
    }
}

/// A Kubernetes label value: empty, or at most 63 of `[A-Za-z0-9._-]`, alphanumeric at both ends.
fn is_label_value(v: &str) -> bool {
    let b = v.as_bytes();
    let edge = |c: Option<&u8>| c.is_none_or(u8::is_ascii_alphanumeric);
    b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && edge(b.first())
        && edge(b.last())
}
