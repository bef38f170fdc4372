//! The config file every vtsnap program reads (docs/design.md §4.1): load, validate, resolve.
//!
//! Parsing is strict (unknown fields are errors) and every error names the path of the
//! field it is about, e.g. `clusters[0].keyspaces.commerce.shards.-80.retention.maxCount`.
//! A file with several bad values gets all of them reported, not only the first.

mod input;
mod model;
mod partial;
mod probe;
pub mod pvc_spec;
mod resolve;
mod shape;
mod validate;

use crate::shard::ShardName;
use std::fmt;
use std::path::Path;

pub use crate::duration::GoDuration;
pub use input::{InputError, MAX_BYTES, MAX_DEPTH};
pub use model::*;
pub use resolve::{
    ResolvedDeletion, ResolvedPitr, ResolvedPolicy, ResolvedRestore, ResolvedRetention,
    ResolvedSnapshot, ResolvedTarget, VtbackupStorage, defaults, merge, with_defaults,
};

/// One problem in a config file, at a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub path: String,
    pub message: String,
}

/// The most of a path, or of a message, that is printed: both echo what the file says (a
/// key, a value), and a hostile config (a ConfigMap read by `kubectl vtsnap`) must not
/// become a 20 MB line of stderr.
pub const MAX_SHOWN_BYTES: usize = 400;
/// The most errors printed; the rest are counted.
pub const MAX_SHOWN_ERRORS: usize = 100;

/// `s` with control characters escaped, cut to [`MAX_SHOWN_BYTES`] with a note of its length.
fn shown(s: &str) -> std::borrow::Cow<'_, str> {
    use crate::k8s_names::{cut_to_bytes, escape_controls};
    let escaped = escape_controls(s);
    if escaped.len() <= MAX_SHOWN_BYTES {
        return escaped;
    }
    std::borrow::Cow::Owned(format!(
        "{}… (cut, {} bytes in all)",
        cut_to_bytes(&escaped, MAX_SHOWN_BYTES),
        s.len()
    ))
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", shown(&self.message))
        } else {
            write!(f, "{}: {}", shown(&self.path), shown(&self.message))
        }
    }
}

/// Every problem found, one per line (at most [`MAX_SHOWN_ERRORS`] of them).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut lines: Vec<String> = self
            .0
            .iter()
            .take(MAX_SHOWN_ERRORS)
            .map(ToString::to_string)
            .collect();
        if let Some(more) = self.0.len().checked_sub(MAX_SHOWN_ERRORS)
            && more > 0
        {
            lines.push(format!("… and {more} more errors"));
        }
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

/// A serde error as a path and a message.
fn parse_error(e: probe::ProbeError) -> ConfigError {
    let path = e.path().to_string();
    let path = if path == "." { String::new() } else { path };
    let message = e.into_inner().to_string();
    // The YAML library starts some messages with its own copy of the path.
    let message = match message.split_once(": ") {
        Some((head, rest)) if !head.contains(' ') => rest.to_owned(),
        _ => message,
    };
    ConfigError { path, message }
}

/// A config that does not parse: every parse error, then every rule broken by what did
/// parse. Strict parsing stops at the first error, so the file is read again piece by piece.
fn every_error(text: &str, values: usize, first: probe::ProbeError) -> ConfigErrors {
    // Not YAML at all: nothing can be read piece by piece.
    if serde_yaml_ng::from_str::<serde::de::IgnoredAny>(text).is_err() {
        return ConfigErrors(vec![parse_error(first)]);
    }
    let Some(p) = partial::partial(text, values) else {
        return ConfigErrors(vec![
            parse_error(first),
            ConfigError {
                path: String::new(),
                message: "(further errors were not searched for: the file is too large to be read piece by piece)".to_owned(),
            },
        ]);
    };
    if p.errors.is_empty() {
        // The piecewise read missed what the strict one saw: never report a bad file as fine.
        return ConfigErrors(vec![parse_error(first)]);
    }
    let mut errors = p.errors;
    errors.extend(validate::validate_partial(&p.config, &p.unparsed));
    ConfigErrors(errors)
}

/// Why a (cluster, keyspace, shard) cannot be resolved.
/// A shard named on the command line, as the config sees it.
#[derive(Debug, Clone)]
pub struct ConfiguredShard {
    pub shard: crate::shard::ShardRef,
    pub policy: ResolvedPolicy,
    /// `auto` (find the vtctld Service) or host:port.
    pub vtctld: String,
}

/// Why a shard named on the command line cannot be worked on.
#[derive(Debug, thiserror::Error)]
pub enum ShardLookupError {
    #[error(transparent)]
    Cluster(#[from] LookupError),
    #[error("--shard {shard:?}: {reason}")]
    BadShard { shard: String, reason: String },
}

/// The flag (env `VTSNAP_CLUSTER_NAMESPACE`) that names a cluster's namespace to the
/// programs that work on one shard: the schedule reconciler passes it, errors name it.
pub const CLUSTER_NAMESPACE_FLAG: &str = "--cluster-namespace";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    #[error("cluster {0:?} is not in the config")]
    UnknownCluster(String),
    #[error(
        "cluster {name:?} is in more than one namespace of the config ({}): name one with {CLUSTER_NAMESPACE_FLAG}",
        namespaces.join(", ")
    )]
    AmbiguousCluster {
        name: String,
        namespaces: Vec<String>,
    },
    #[error(
        "cluster {name:?} is not in the config in namespace {namespace:?} (it is in {})",
        configured.join(", ")
    )]
    NotInNamespace {
        name: String,
        namespace: String,
        configured: Vec<String>,
    },
}

impl Config {
    /// Parses and validates YAML text.
    pub fn from_yaml(text: &str) -> Result<Self, ConfigErrors> {
        // YAML allows a byte order mark before the document; the parser takes it for a
        // second document.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        // The bound of a file, for text that comes from elsewhere (a ConfigMap).
        if u64::try_from(text.len()).unwrap_or(u64::MAX) > MAX_BYTES {
            return Err(ConfigErrors::one(
                "",
                format!(
                    "the config is {} bytes, more than {MAX_BYTES}, the most a config may have",
                    text.len()
                ),
            ));
        }
        input::check_depth(text).map_err(|e| ConfigErrors::one("", e.to_string()))?;
        let shape = shape::check(text);
        let mut errors = shape.duplicates;
        if let Some(too_large) = shape.too_large {
            errors.push(too_large);
            return Err(ConfigErrors(errors));
        }
        let de = serde_yaml_ng::Deserializer::from_str(text);
        let config: Config = match serde_path_to_error::deserialize(de) {
            Ok(config) => config,
            Err(first) => {
                errors.extend(every_error(text, shape.values, first).0);
                return Err(ConfigErrors(errors));
            }
        };
        errors.extend(validate::validate(&config));
        if errors.is_empty() {
            Ok(config)
        } else {
            Err(ConfigErrors(errors))
        }
    }

    /// Reads, parses and validates a file: a regular file of at most [`MAX_BYTES`],
    /// nested at most [`MAX_DEPTH`] deep.
    pub fn load(path: &Path) -> Result<Self, ConfigErrors> {
        let text = input::read(path).map_err(|e| ConfigErrors::one("", e.to_string()))?;
        Self::from_yaml(&text)
    }

    /// The one cluster named `name`: refused when the name is in more than one namespace.
    pub fn cluster(&self, name: &str) -> Result<&ClusterConfig, LookupError> {
        self.cluster_named(name, None)
    }

    /// The cluster named `name`, in `namespace` when given. Without a namespace the name
    /// must be in one namespace of the config: a Job must not pick one of two clusters
    /// (docs/design.md §5.8).
    pub fn cluster_named(
        &self,
        name: &str,
        namespace: Option<&str>,
    ) -> Result<&ClusterConfig, LookupError> {
        let found: Vec<&ClusterConfig> = self.clusters.iter().filter(|c| c.name == name).collect();
        let namespaces = || found.iter().map(|c| c.namespace.clone()).collect();
        match (namespace, found.as_slice()) {
            (_, []) => Err(LookupError::UnknownCluster(name.to_owned())),
            (None, [one]) => Ok(one),
            (None, _) => Err(LookupError::AmbiguousCluster {
                name: name.to_owned(),
                namespaces: namespaces(),
            }),
            (Some(ns), _) => found
                .iter()
                .copied()
                .find(|c| c.namespace == ns)
                .ok_or_else(|| LookupError::NotInNamespace {
                    name: name.to_owned(),
                    namespace: ns.to_owned(),
                    configured: namespaces(),
                }),
        }
    }

    /// The cluster named `name` in `namespace` (what an object's namespace and
    /// `planetscale.com/cluster` label say).
    pub fn cluster_in(&self, namespace: &str, name: &str) -> Option<&ClusterConfig> {
        self.clusters
            .iter()
            .find(|c| c.namespace == namespace && c.name == name)
    }

    /// The fully resolved policy of one shard. Keyspaces and shards that the config does
    /// not list get the levels above them.
    /// The shard a run works on: its reference (cluster, namespace, keyspace, key range),
    /// its resolved policy and the cluster's `vtctld` setting (`auto` or host:port).
    pub fn shard(&self, name: &ShardName) -> Result<ConfiguredShard, ShardLookupError> {
        let ShardName {
            cluster,
            namespace,
            keyspace,
            shard,
        } = name;
        let cl = self.cluster_named(cluster, namespace.as_deref())?;
        let key_range: crate::naming::KeyRange =
            shard.parse().map_err(|reason| ShardLookupError::BadShard {
                shard: shard.clone(),
                reason,
            })?;
        Ok(ConfiguredShard {
            shard: crate::shard::ShardRef {
                cluster: cluster.clone(),
                namespace: cl.namespace.clone(),
                keyspace: keyspace.clone(),
                shard: key_range,
            },
            policy: resolve_in(cl, keyspace, shard),
            vtctld: cl.vtctld.clone(),
        })
    }

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
#[cfg(test)]
mod tests_hostile;
