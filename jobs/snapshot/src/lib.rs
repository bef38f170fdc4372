//! `vtsnap-snapshot`: volume-snapshot backups of one shard (docs/design.md §5.1, §5.2).
//!
//! This release has the read-only commands: `plan` (observe the shard, resolve the policy,
//! choose the target, change nothing), `list` (the snapshot inventory) and `validate`
//! (check a config file alone).

pub mod list;
pub mod metrics;
pub mod plan;
pub mod render;
pub mod run;
pub mod schedule;

use std::path::Path;

use vtsnap_core::config::{Config, ConfigErrors};

/// `validate`: every error, one per line, each prefixed by its path.
pub fn validate(path: &Path) -> Result<Config, ConfigErrors> {
    Config::load(path)
}
