//! The value a shard discovery produces: what Kubernetes and vtctld say about each tablet,
//! joined by tablet alias, plus everything that did not line up (reported, never fatal).

use serde::{Deserialize, Serialize};

use crate::naming::{KeyRange, TabletAlias};
use crate::vtctld::TabletType;

/// One shard of one VitessCluster: the one shard identity of every program (the snapshot
/// job's target, the GC's retention group, the webhook's and vtbackup-storage's index key).
/// Ordered by namespace, cluster, keyspace, then key range (`-80` before `80-`); printed
/// `<namespace>/<cluster>/<keyspace>/<key range>`; in JSON the key range is a string.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ShardRef {
    pub namespace: String,
    pub cluster: String,
    pub keyspace: String,
    pub shard: KeyRange,
}

impl std::fmt::Display for ShardRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/{}/{}/{}",
            self.namespace, self.cluster, self.keyspace, self.shard
        )
    }
}

/// A shard as a person names it (`--cluster`, `--keyspace`, `--shard`, and
/// `--cluster-namespace` when the config names the cluster in more than one namespace),
/// before the config places it: the key range still unparsed.
/// [`crate::config::Config::shard`] turns it into a [`ShardRef`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardName {
    pub cluster: String,
    /// The cluster's namespace, if given: without it the cluster's name must be in one
    /// namespace of the config.
    pub namespace: Option<String>,
    pub keyspace: String,
    pub shard: String,
}

impl ShardName {
    pub fn new(cluster: &str, keyspace: &str, shard: &str) -> Self {
        Self {
            cluster: cluster.into(),
            namespace: None,
            keyspace: keyspace.into(),
            shard: shard.into(),
        }
    }

    /// The same shard, of the cluster of that name in `namespace` (when given).
    #[must_use]
    pub fn in_namespace(self, namespace: Option<&str>) -> Self {
        Self {
            namespace: namespace.map(str::to_owned),
            ..self
        }
    }
}

/// `<cluster>/<keyspace>/<shard>`, as the snapshot job's JSON line names its shard.
impl std::fmt::Display for ShardName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.cluster, self.keyspace, self.shard)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PodInfo {
    pub name: String,
    pub uid: String,
    pub node: Option<String>,
    pub phase: String,
    pub ready: bool,
    pub terminating: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Replication {
    pub position: String,
    pub lag_seconds: u32,
    pub lag_unknown: bool,
    pub io_running: bool,
    pub sql_running: bool,
    pub last_error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Tablet {
    pub alias: TabletAlias,
    /// The type vtctld reports; `None` when vtctld does not know the tablet.
    #[serde(serialize_with = "ser_type")]
    pub vt_type: Option<TabletType>,
    /// The pool type from the Pod's `planetscale.com/tablet-type` label.
    pub pool_type: Option<String>,
    pub pod: Option<PodInfo>,
    /// The data PVC, if the Pod names one and it exists.
    pub pvc: Option<String>,
    pub replication: Option<Replication>,
}

fn ser_type<S: serde::Serializer>(t: &Option<TabletType>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => s.serialize_str(t.name()),
        None => s.serialize_none(),
    }
}

/// Something about the shard that did not line up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "code", rename_all = "kebab-case")]
pub enum Issue {
    /// vtctld knows the tablet; Kubernetes has no Pod for it.
    PodMissing {
        alias: String,
    },
    /// A tablet Pod vtctld does not know.
    NotInVtctld {
        alias: String,
        pod: String,
    },
    PodPending {
        alias: String,
        pod: String,
    },
    PodTerminating {
        alias: String,
        pod: String,
    },
    /// The Pod names no data PVC, or the PVC it names does not exist.
    PvcMissing {
        alias: String,
        pvc: Option<String>,
    },
    /// A Pod whose tablet labels cannot be read.
    BadTabletLabels {
        pod: String,
        reason: String,
    },
    /// No replication status from vtctld for a non-primary tablet.
    NoReplicationStatus {
        alias: String,
    },
    /// The shard record has no primary.
    NoPrimary,
    /// The shard record's primary and the tablets' types disagree (e.g. mid-reparent).
    PrimaryMismatch {
        shard_primary: Option<String>,
        typed_primaries: Vec<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Shard {
    #[serde(rename = "shard")]
    pub shard_ref: ShardRef,
    /// From the shard record (vtctld GetShard).
    pub primary: Option<TabletAlias>,
    pub tablets: Vec<Tablet>,
    pub issues: Vec<Issue>,
}

impl Shard {
    pub fn tablet(&self, alias: &TabletAlias) -> Option<&Tablet> {
        self.tablets.iter().find(|t| &t.alias == alias)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(namespace: &str, cluster: &str, shard: &str) -> ShardRef {
        ShardRef {
            namespace: namespace.into(),
            cluster: cluster.into(),
            keyspace: "commerce".into(),
            shard: shard.parse().unwrap(),
        }
    }

    #[test]
    fn shards_sort_by_namespace_cluster_keyspace_then_key_range() {
        let mut v = [
            shard("b", "a", "-"),
            shard("a", "b", "-"),
            shard("a", "a", "80-"),
            shard("a", "a", "-80"),
            shard("a", "a", "-"),
        ];
        v.sort();
        let printed: Vec<String> = v.iter().map(ToString::to_string).collect();
        assert_eq!(
            printed,
            [
                "a/a/commerce/-",
                "a/a/commerce/-80",
                "a/a/commerce/80-",
                "a/b/commerce/-",
                "b/a/commerce/-",
            ]
        );
    }

    #[test]
    fn in_json_the_key_range_is_a_string_and_must_be_one() {
        let s = shard("vitess", "example", "-80");
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"namespace": "vitess", "cluster": "example",
                "keyspace": "commerce", "shard": "-80"})
        );
        assert_eq!(serde_json::from_value::<ShardRef>(v).unwrap(), s);
        let bad = serde_json::json!({"namespace": "vitess", "cluster": "example",
            "keyspace": "commerce", "shard": "x-80"});
        assert!(serde_json::from_value::<ShardRef>(bad).is_err());
    }
}
