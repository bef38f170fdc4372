//! The value a shard discovery produces: what Kubernetes and vtctld say about each tablet,
//! joined by tablet alias, plus everything that did not line up (reported, never fatal).

use serde::Serialize;

use crate::naming::{KeyRange, TabletAlias};
use crate::vtctld::TabletType;

/// One shard of one VitessCluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShardRef {
    pub cluster: String,
    pub namespace: String,
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
