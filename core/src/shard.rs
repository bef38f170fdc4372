//! The value a shard discovery produces: what Kubernetes and vtctld say about each tablet,
//! joined by tablet alias, plus everything that did not line up (reported, never fatal).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::k8s_names::{NameError, dns_label, escape_controls};
use crate::labels;
use crate::naming::{KeyRange, SafeNameError, TabletAlias};
use crate::reconcile::ObjectKey;
use crate::vtctld::TabletType;

/// The labels every object vtsnap makes for a shard carries (VolumeSnapshots, CronJobs,
/// Jobs, drill objects): its cluster, keyspace and label-safe key range.
pub const LABEL_CLUSTER: &str = "vtsnap.io/cluster";
pub const LABEL_KEYSPACE: &str = "vtsnap.io/keyspace";
/// The shard's SafeName (`-80` → `x-80`).
pub const LABEL_SHARD: &str = "vtsnap.io/shard";

/// The longest `namespace/cluster/keyspace/shard` read from a record.
const MAX_PATH_BYTES: usize = 512;

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

impl ShardRef {
    /// The shard `keyspace`/`shard` of the VitessCluster `cluster`.
    pub fn new(cluster: &ObjectKey, in_cluster: KeyspaceShard) -> Self {
        Self {
            namespace: cluster.namespace.clone(),
            cluster: cluster.name.clone(),
            keyspace: in_cluster.keyspace,
            shard: in_cluster.shard,
        }
    }

    /// The VitessCluster it belongs to.
    pub fn cluster_key(&self) -> ObjectKey {
        ObjectKey::new(&self.namespace, &self.cluster)
    }

    /// The shard within its cluster.
    pub fn keyspace_shard(&self) -> KeyspaceShard {
        KeyspaceShard {
            keyspace: self.keyspace.clone(),
            shard: self.shard.clone(),
        }
    }

    /// The key range's label-safe name (`-80` → `x-80`).
    pub fn safe_name(&self) -> String {
        self.shard.safe_name()
    }

    /// [`LABEL_CLUSTER`], [`LABEL_KEYSPACE`] and [`LABEL_SHARD`] with their values.
    pub fn labels(&self) -> [(&'static str, String); 3] {
        [
            (LABEL_CLUSTER, self.cluster.clone()),
            (LABEL_KEYSPACE, self.keyspace.clone()),
            (LABEL_SHARD, self.safe_name()),
        ]
    }

    /// Whether `labels` name this shard.
    pub fn labelled_on(&self, labels: &BTreeMap<String, String>) -> bool {
        self.labels()
            .iter()
            .all(|(k, v)| labels.get(*k).is_some_and(|l| l == v))
    }

    /// The shard an object in `namespace` names by vtsnap's labels.
    pub fn from_labels(
        namespace: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<Self, ShardLabelError> {
        Self::from_label_set(LabelSet::Vtsnap, namespace, labels)
    }

    /// The shard an object in `namespace` names by the labels of `set`.
    pub fn from_label_set(
        set: LabelSet,
        namespace: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<Self, ShardLabelError> {
        let [cluster_key, keyspace_key, shard_key] = set.keys();
        let get = |label: &'static str| {
            labels
                .get(label)
                .filter(|v| !v.is_empty())
                .ok_or(ShardLabelError::Missing { label })
        };
        let (cluster, keyspace, safe) = (get(cluster_key)?, get(keyspace_key)?, get(shard_key)?);
        let shard = KeyRange::from_safe_name(safe).map_err(|source| ShardLabelError::Shard {
            label: shard_key,
            value: escape_controls(safe).into_owned(),
            source,
        })?;
        Ok(Self {
            namespace: namespace.to_owned(),
            cluster: cluster.clone(),
            keyspace: keyspace.clone(),
            shard,
        })
    }

    /// Reads `namespace/cluster/keyspace/shard` (as [`Display`](std::fmt::Display) prints
    /// it) strictly: four parts, a DNS-label namespace, a key range as Vitess prints it.
    pub fn parse_path(text: &str) -> Result<Self, ShardPathError> {
        let bad = |why: ShardPathProblem| ShardPathError {
            text: escape_controls(text).into_owned(),
            why,
        };
        let parts: Vec<&str> = text.split('/').collect();
        let [namespace, cluster, keyspace, shard] = parts.as_slice() else {
            return Err(bad(ShardPathProblem::Shape));
        };
        dns_label(namespace).map_err(|e| bad(ShardPathProblem::Namespace(e)))?;
        if cluster.is_empty()
            || keyspace.is_empty()
            || !text.is_ascii()
            || text.len() > MAX_PATH_BYTES
        {
            return Err(bad(ShardPathProblem::EmptyOrNotAscii));
        }
        let shard = shard
            .parse::<KeyRange>()
            .map_err(|e| bad(ShardPathProblem::Shard(e.to_string())))?;
        Ok(Self {
            namespace: (*namespace).to_owned(),
            cluster: (*cluster).to_owned(),
            keyspace: (*keyspace).to_owned(),
            shard,
        })
    }
}

/// Whose labels name a shard: vtsnap's on what it makes, vitess-operator's on tablet Pods
/// and PVCs (`planetscale.com/{cluster,keyspace,shard}`, the shard by its safe name too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelSet {
    Vtsnap,
    Operator,
}

impl LabelSet {
    /// The cluster, keyspace and shard label keys.
    pub fn keys(self) -> [&'static str; 3] {
        match self {
            LabelSet::Vtsnap => [LABEL_CLUSTER, LABEL_KEYSPACE, LABEL_SHARD],
            LabelSet::Operator => [labels::CLUSTER, labels::KEYSPACE, labels::SHARD],
        }
    }
}

/// A shard within its VitessCluster (the spec's keyspace and key range).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct KeyspaceShard {
    pub keyspace: String,
    pub shard: KeyRange,
}

impl std::fmt::Display for KeyspaceShard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.keyspace, self.shard)
    }
}

/// Why an object's labels name no shard.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardLabelError {
    #[error("no {label} label")]
    Missing { label: &'static str },
    #[error("{label} \"{value}\" is not a shard's safe name: {source}")]
    Shard {
        label: &'static str,
        value: String,
        source: SafeNameError,
    },
}

/// Why a `namespace/cluster/keyspace/shard` record was refused (control characters escaped).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?}: {why}")]
pub struct ShardPathError {
    pub text: String,
    pub why: ShardPathProblem,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardPathProblem {
    #[error("not namespace/cluster/keyspace/shard")]
    Shape,
    #[error("namespace: {0}")]
    Namespace(NameError),
    #[error("empty or not ASCII")]
    EmptyOrNotAscii,
    #[error("shard: {0}")]
    Shard(String),
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
    #[test]
    fn a_shard_record_is_read_strictly() {
        assert_eq!(
            ShardRef::parse_path("vitess/main/commerce/-80").unwrap(),
            shard("vitess", "main", "-80")
        );
        for bad in [
            "vitess/main/commerce",
            "vitess/main/commerce/-80/x",
            "Vitess/main/commerce/-80",
            "vitess//commerce/-80",
            "vitess/main//-80",
            "vitess/mäin/commerce/-80",
            "vitess/main/commerce/zz",
        ] {
            assert!(ShardRef::parse_path(bad).is_err(), "{bad}");
        }
        // At most 512 bytes.
        let long = |n: usize| format!("vitess/{}/commerce/-80", "c".repeat(n));
        let fits = 512 - long(0).len();
        assert!(ShardRef::parse_path(&long(fits)).is_ok());
        assert!(ShardRef::parse_path(&long(fits + 1)).is_err());
    }

    #[test]
    fn labels_name_the_shard_and_read_back() {
        let s = shard("vitess", "example", "-80");
        let labels: BTreeMap<String, String> = s
            .labels()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        assert_eq!(labels[LABEL_SHARD], "x-80");
        assert_eq!(ShardRef::from_labels("vitess", &labels).unwrap(), s);
        assert!(s.labelled_on(&labels));
        let mut other = labels.clone();
        other.insert(LABEL_SHARD.into(), "80-x".into());
        assert!(!s.labelled_on(&other));
        let mut bad = labels.clone();
        bad.insert(LABEL_SHARD.into(), "-80".into());
        assert!(matches!(
            ShardRef::from_labels("vitess", &bad),
            Err(ShardLabelError::Shard {
                label: LABEL_SHARD,
                ..
            })
        ));
        let operator: BTreeMap<String, String> = LabelSet::Operator
            .keys()
            .into_iter()
            .zip(["example", "commerce", "x-80"])
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        assert_eq!(
            ShardRef::from_label_set(LabelSet::Operator, "vitess", &operator).unwrap(),
            s
        );
        assert!(ShardRef::from_labels("vitess", &operator).is_err());
        let mut missing = labels;
        missing.remove(LABEL_KEYSPACE);
        assert_eq!(
            ShardRef::from_labels("vitess", &missing),
            Err(ShardLabelError::Missing {
                label: LABEL_KEYSPACE
            })
        );
        assert_eq!(s.cluster_key(), ObjectKey::new("vitess", "example"));
        assert_eq!(ShardRef::new(&s.cluster_key(), s.keyspace_shard()), s);
    }
}
