//! `vtsnap-snapshot`: volume-snapshot backups of one shard (DESIGN §5.1, §5.2).
//!
//! This release has the read-only commands: `plan` (observe the shard, resolve the policy,
//! choose the target, change nothing), `list` (the snapshot inventory) and `validate`
//! (check a config file alone).

pub mod list;
pub mod metrics;
pub mod plan;
pub mod render;
pub mod run;

use std::path::Path;

use vtsnap_core::config::{Config, ConfigErrors};

/// Exit codes shared by every subcommand (DESIGN §5.1).
pub mod exit {
    /// Done (for `plan`: a target was chosen).
    pub const OK: u8 = 0;
    /// Failed (vtctld or the API server could not be read).
    pub const FAILED: u8 = 1;
    /// Bad config or usage; nothing was touched.
    pub const USAGE: u8 = 2;
    /// Refused by a precondition; nothing was touched.
    pub const REFUSED: u8 = 3;
}

/// `validate`: every error, one per line, each prefixed by its path.
pub fn validate(path: &Path) -> Result<Config, ConfigErrors> {
    Config::load(path)
}
