//! The config file every vtsnap program reads (DESIGN §4.1): load, validate, resolve.
//!
//! Parsing is strict (unknown fields are errors) and every error names the path of the
//! field it is about, e.g. `clusters[0].keyspaces.commerce.shards.-80.retention.maxCount`.

mod duration;
mod model;
mod resolve;
mod validate;

use std::fmt;
use std::path::Path;

pub use duration::GoDuration;
pub use model::*;
pub use resolve::{
    ResolvedDeletion, ResolvedPolicy, ResolvedRestore, ResolvedRetention, ResolvedSnapshot,
    ResolvedTarget, VtbackupStorage, defaults, merge, with_defaults,
};

/// One problem in a config file, at a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub path: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Every problem found, one per line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&lines.join("\n"))
    }
}

impl ConfigErrors {
    fn one(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self(vec![ConfigError {
            path: path.into(),
            message: message.into(),
        }])
    }
}

/// Why a (cluster, keyspace, shard) cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    #[error("cluster {0:?} is not in the config")]
    UnknownCluster(String),
    #[error("cluster {0:?} appears in more than one namespace; name the namespace")]
    AmbiguousCluster(String),
}

impl Config {
    /// Parses and validates YAML text.
    pub fn from_yaml(text: &str) -> Result<Self, ConfigErrors> {
        let de = serde_yaml_ng::Deserializer::from_str(text);
        let config: Config = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let path = if path == "." { String::new() } else { path };
            let message = e.into_inner().to_string();
            // The YAML library starts some messages with its own copy of the path.
            let message = match message.split_once(": ") {
                Some((head, rest)) if !head.contains(' ') => rest.to_owned(),
                _ => message,
            };
            ConfigErrors::one(path, message)
        })?;
        let errors = validate::validate(&config);
        if errors.is_empty() {
            Ok(config)
        } else {
            Err(ConfigErrors(errors))
        }
    }

    /// Reads, parses and validates a file.
    pub fn load(path: &Path) -> Result<Self, ConfigErrors> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigErrors::one("", format!("cannot read {}: {e}", path.display())))?;
        Self::from_yaml(&text)
    }

    pub fn cluster(&self, name: &str) -> Result<&ClusterConfig, LookupError> {
        let mut found = self.clusters.iter().filter(|c| c.name == name);
        let first = found
            .next()
            .ok_or_else(|| LookupError::UnknownCluster(name.to_owned()))?;
        if found.next().is_some() {
            return Err(LookupError::AmbiguousCluster(name.to_owned()));
        }
        Ok(first)
    }

    /// The fully resolved policy of one shard. Keyspaces and shards that the config does
    /// not list get the levels above them.
    pub fn resolve(
        &self,
        cluster: &str,
        keyspace: &str,
        shard: &str,
    ) -> Result<ResolvedPolicy, LookupError> {
        Ok(resolve_in(self.cluster(cluster)?, keyspace, shard))
    }
}

/// The resolved policy of a shard of one cluster config.
pub fn resolve_in(c: &ClusterConfig, keyspace: &str, shard: &str) -> ResolvedPolicy {
    let mut blocks = c.policy();
    if let Some(k) = c.keyspaces.get(keyspace) {
        blocks = merge(&k.policy(), &blocks);
        if let Some(s) = k.shards.get(shard) {
            blocks = merge(&s.policy(), &blocks);
        }
    }
    with_defaults(&blocks)
}

#[cfg(test)]
mod tests;
