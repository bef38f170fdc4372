//! Reads one of vtsnap's VolumeSnapshots into a typed value: the one reader of the schema
//! that [`super::build`] writes.
//!
//! An absent optional field is `None`; a field that is present but does not parse is a
//! [`ReadError`] naming the snapshot and the field, never a default: a caller that acts on
//! snapshots (the GC) must tell "unreadable" from "absent".

use k8s_openapi::jiff::{self, Timestamp};
use serde_json::Value;

use super::drill::{
    ANN_DRILL, CLOCK_SKEW, Discounted, DrillOf, DrillRecord, DrillRecordError, DrillSeen, standing,
};
use super::gtid::{self, GtidError};
use super::{
    ANN_CUT_TIME, ANN_GTID_EXECUTED, ANN_GTID_LOWER_BOUND, ANN_LAYOUT, ANN_MYSQL_FLAVOR,
    ANN_MYSQL_VERSION, ANN_READY_TIME, ANN_SOURCE_NODE, ANN_SOURCE_PVC, ANN_SOURCE_TABLET,
    ANN_UNUSABLE, LABEL_MODE, LABEL_PHASE, LABEL_TABLET_UID, LAYOUT_VERSION, Phase, SnapshotStatus,
    mode_label,
};
use crate::config::Mode;
use crate::k8s_names::escape_controls;
use crate::labels::{MANAGED_BY, MANAGED_BY_VTSNAP};
use crate::mysql_version::Flavor;
use crate::naming::{KeyRange, SafeNameError, TabletAlias, TabletUid, TabletUidError};
use crate::pitr::record::{
    ANN_PITR_WINDOW, WindowDiscounted, WindowRecord, WindowRecordError, standing as pitr_standing,
};
use crate::shard::{LABEL_CLUSTER, LABEL_KEYSPACE, LABEL_SHARD};

const NAME: &str = "metadata.name";
const NAMESPACE: &str = "metadata.namespace";
const CREATED: &str = "metadata.creationTimestamp";
const UID: &str = "metadata.uid";
const LABELS: &str = "metadata.labels";
const ANNOTATIONS: &str = "metadata.annotations";
const OWNERS: &str = "metadata.ownerReferences";
const STATUS: &str = "status";
const READY_TO_USE: &str = "status.readyToUse";
const BOUND_CONTENT: &str = "status.boundVolumeSnapshotContentName";
const STATUS_CREATION_TIME: &str = "status.creationTime";
const STATUS_ERROR: &str = "status.error";
const SOURCE_CLAIM: &str = "spec.source.persistentVolumeClaimName";

/// The volume layout a snapshot holds (`vtsnap.io/layout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// [`LAYOUT_VERSION`] `1`: the tablet directory as vitess-operator's pods leave it.
    V1,
}

impl Layout {
    pub fn parse(s: &str) -> Option<Self> {
        (s == LAYOUT_VERSION).then_some(Self::V1)
    }
}

/// A snapshot as read from its object: unreadable ones are kept, with their reason.
pub type SnapshotRead = Result<VolumeSnapshot, ReadError>;

/// One of vtsnap's VolumeSnapshots, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeSnapshot {
    pub namespace: String,
    pub name: String,
    /// `metadata.uid` (set by the API server; a dump may lack it).
    pub uid: Option<String>,
    /// `metadata.creationTimestamp` (set by the API server).
    pub created: Option<Timestamp>,
    pub cluster: String,
    pub keyspace: String,
    /// Parsed from the SafeName label (`x-80` → `-80`).
    pub shard: KeyRange,
    pub tablet_uid: Option<TabletUid>,
    pub mode: Option<Mode>,
    /// Absent until the snapshot is cut.
    pub phase: Option<Phase>,
    /// Exact position (cold).
    pub gtid_executed: Option<String>,
    /// Lower bound of the position (online).
    pub gtid_lower_bound: Option<String>,
    pub mysql_version: Option<String>,
    pub mysql_flavor: Option<String>,
    pub source_tablet: Option<TabletAlias>,
    pub source_pvc: Option<String>,
    /// `spec.source.persistentVolumeClaimName`: the claim the snapshot was taken of (equal
    /// to `source_pvc` when both are set).
    pub source_claim: Option<String>,
    pub source_node: Option<String>,
    pub layout: Option<Layout>,
    pub cut_time: Option<Timestamp>,
    pub ready_time: Option<Timestamp>,
    pub status: SnapshotStatus,
    /// UIDs of the VitessClusters in `ownerReferences`.
    pub cluster_owners: Vec<String>,
    /// Why restores must not use it ([`super::ANN_UNUSABLE`]).
    pub unusable: Option<String>,
    /// Tablets re-provisioned after a restore from it could not catch up
    /// ([`super::ANN_REPROVISIONED_PREFIX`]; a key that names no tablet UID is ignored),
    /// each with the UID of the PVC that was to be deleted (`None`: the value does not
    /// say, taken as done).
    pub reprovisioned: std::collections::BTreeMap<TabletUid, Option<String>>,
    /// Its last drill ([`ANN_DRILL`]) as read: an unreadable record never makes the
    /// snapshot unreadable, it counts as none ([`VolumeSnapshot::drill`]).
    pub drill_record: Option<Result<DrillRecord, DrillRecordError>>,
    /// The recoverable window the archive job last found ([`ANN_PITR_WINDOW`]), as read:
    /// like a drill record, an unreadable one counts as none.
    pub pitr_window: Option<Result<WindowRecord, WindowRecordError>>,
}

/// Why a VolumeSnapshot cannot be read; every variant names the snapshot
/// (`namespace/name`) and the field.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ReadError {
    #[error("a VolumeSnapshot has no {NAME}")]
    NoName,
    #[error("VolumeSnapshot {snapshot}: {field} is missing")]
    Missing {
        snapshot: String,
        field: &'static str,
    },
    #[error("VolumeSnapshot {snapshot}: {field} is not {expected}")]
    Malformed {
        snapshot: String,
        field: &'static str,
        expected: &'static str,
    },
    #[error("VolumeSnapshot {snapshot}: {field}: {source}")]
    Shard {
        snapshot: String,
        field: &'static str,
        source: SafeNameError,
    },
    #[error("VolumeSnapshot {snapshot}: {field}: {source}")]
    TabletUid {
        snapshot: String,
        field: &'static str,
        source: TabletUidError,
    },
    #[error("VolumeSnapshot {snapshot}: {field} {value:?} is not cold or online")]
    Mode {
        snapshot: String,
        field: &'static str,
        value: String,
    },
    #[error("VolumeSnapshot {snapshot}: {field} {value:?} is not cut, ready or failed")]
    Phase {
        snapshot: String,
        field: &'static str,
        value: String,
    },
    #[error("VolumeSnapshot {snapshot}: {field} {value:?} is not an RFC 3339 time: {source}")]
    Time {
        snapshot: String,
        field: &'static str,
        value: String,
        source: jiff::Error,
    },
    #[error(
        "VolumeSnapshot {snapshot}: {field} {value:?} is not a layout vtsnap writes (only {LAYOUT_VERSION})"
    )]
    Layout {
        snapshot: String,
        field: &'static str,
        value: String,
    },
    #[error("VolumeSnapshot {snapshot}: {field} {value:?} is not a GTID position: {source}")]
    Gtid {
        snapshot: String,
        field: &'static str,
        value: String,
        source: GtidError,
    },
    #[error(
        "VolumeSnapshot {snapshot}: {field} {value:?} is a {gtid_flavor} position, but {ANN_MYSQL_FLAVOR} is {flavor}"
    )]
    GtidFlavor {
        snapshot: String,
        field: &'static str,
        value: String,
        gtid_flavor: &'static str,
        flavor: &'static str,
    },
    #[error("VolumeSnapshot {snapshot}: {field} {value:?} differs from {other} {other_value:?}")]
    Contradiction {
        snapshot: String,
        field: &'static str,
        value: String,
        other: &'static str,
        other_value: String,
    },
    /// `reason` is the alias parser's own message.
    #[error("VolumeSnapshot {snapshot}: {field}: {reason}")]
    TabletAlias {
        snapshot: String,
        field: &'static str,
        reason: String,
    },
}

impl ReadError {
    /// The field that could not be read (`metadata.…`, or a label or annotation key).
    pub fn field(&self) -> &'static str {
        match self {
            Self::NoName => NAME,
            Self::Missing { field, .. }
            | Self::Malformed { field, .. }
            | Self::Shard { field, .. }
            | Self::TabletUid { field, .. }
            | Self::Mode { field, .. }
            | Self::Phase { field, .. }
            | Self::Time { field, .. }
            | Self::Layout { field, .. }
            | Self::Gtid { field, .. }
            | Self::GtidFlavor { field, .. }
            | Self::Contradiction { field, .. }
            | Self::TabletAlias { field, .. } => field,
        }
    }
}

impl VolumeSnapshot {
    /// Labelled `app.kubernetes.io/managed-by=vtsnap`: one of vtsnap's, to be [`read`](Self::read).
    pub fn is_vtsnaps(obj: &Value) -> bool {
        obj.pointer("/metadata/labels")
            .and_then(|l| l.get(MANAGED_BY))
            .and_then(Value::as_str)
            == Some(MANAGED_BY_VTSNAP)
    }

    /// Whether a snapshot object (one of vtsnap's or not) carries the labels of `shard`, in
    /// its namespace.
    pub fn is_of_shard(obj: &Value, shard: &crate::shard::ShardRef) -> bool {
        let label = |k: &str| {
            obj.pointer("/metadata/labels")
                .and_then(|l| l.get(k))
                .and_then(Value::as_str)
        };
        obj.pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("")
            == shard.namespace
            && label(LABEL_CLUSTER) == Some(&shard.cluster)
            && label(LABEL_KEYSPACE) == Some(&shard.keyspace)
            && label(LABEL_SHARD) == Some(&shard.shard.safe_name())
    }

    /// The shard it is of.
    pub fn shard_ref(&self) -> crate::shard::ShardRef {
        crate::shard::ShardRef {
            namespace: self.namespace.clone(),
            cluster: self.cluster.clone(),
            keyspace: self.keyspace.clone(),
            shard: self.shard.clone(),
        }
    }

    /// Reads a VolumeSnapshot object (as the API or `kubectl get -o json` gives it).
    pub fn read(obj: &Value) -> Result<Self, ReadError> {
        let meta = obj.get("metadata").unwrap_or(&Value::Null);
        let name = meta
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or(ReadError::NoName)?;
        let Some(namespace) = meta.get("namespace").and_then(Value::as_str) else {
            return Err(ReadError::Missing {
                snapshot: name.to_owned(),
                field: NAMESPACE,
            });
        };
        let r = Reader {
            meta,
            snapshot: escape_controls(&format!("{namespace}/{name}")).into_owned(),
        };
        let label = |key| r.entry(LABELS, key);
        let ann = |key| r.entry(ANNOTATIONS, key);
        let time = |key, v: Option<&str>| v.map(|v| r.time(key, v)).transpose();
        Ok(Self {
            created: time(CREATED, r.created()?)?,
            cluster: r.required(LABEL_CLUSTER)?.to_owned(),
            keyspace: r.required(LABEL_KEYSPACE)?.to_owned(),
            shard: KeyRange::from_safe_name(r.required(LABEL_SHARD)?).map_err(|source| {
                ReadError::Shard {
                    snapshot: r.snapshot.clone(),
                    field: LABEL_SHARD,
                    source,
                }
            })?,
            tablet_uid: label(LABEL_TABLET_UID)?
                .map(|v| {
                    v.parse().map_err(|source| ReadError::TabletUid {
                        snapshot: r.snapshot.clone(),
                        field: LABEL_TABLET_UID,
                        source,
                    })
                })
                .transpose()?,
            mode: label(LABEL_MODE)?.map(|v| r.mode(v)).transpose()?,
            phase: label(LABEL_PHASE)?
                .map(|v| {
                    Phase::parse(v).ok_or_else(|| ReadError::Phase {
                        snapshot: r.snapshot.clone(),
                        field: LABEL_PHASE,
                        value: v.to_owned(),
                    })
                })
                .transpose()?,
            gtid_executed: r.position(ANN_GTID_EXECUTED)?,
            gtid_lower_bound: r.position(ANN_GTID_LOWER_BOUND)?,
            mysql_version: ann(ANN_MYSQL_VERSION)?.map(str::to_owned),
            mysql_flavor: ann(ANN_MYSQL_FLAVOR)?.map(str::to_owned),
            source_tablet: ann(ANN_SOURCE_TABLET)?
                .map(|v| {
                    v.parse().map_err(|reason| ReadError::TabletAlias {
                        snapshot: r.snapshot.clone(),
                        field: ANN_SOURCE_TABLET,
                        reason,
                    })
                })
                .transpose()?,
            source_pvc: ann(ANN_SOURCE_PVC)?.map(str::to_owned),
            source_claim: r.source_claim(obj)?,
            source_node: ann(ANN_SOURCE_NODE)?.map(str::to_owned),
            layout: ann(ANN_LAYOUT)?
                .map(|v| {
                    Layout::parse(v).ok_or_else(|| ReadError::Layout {
                        snapshot: r.snapshot.clone(),
                        field: ANN_LAYOUT,
                        value: v.to_owned(),
                    })
                })
                .transpose()?,
            cut_time: time(ANN_CUT_TIME, ann(ANN_CUT_TIME)?)?,
            ready_time: time(ANN_READY_TIME, ann(ANN_READY_TIME)?)?,
            status: r.status(obj)?,
            cluster_owners: r.cluster_owners()?,
            unusable: ann(ANN_UNUSABLE)?.map(str::to_owned),
            drill_record: ann(ANN_DRILL)?.map(DrillRecord::parse),
            pitr_window: ann(ANN_PITR_WINDOW)?.map(WindowRecord::parse),
            reprovisioned: r.reprovisioned(),
            uid: r.uid()?,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        })
    }
}

impl VolumeSnapshot {
    /// The snapshot a drill record must name: its UID and its cut.
    pub fn drill_of(&self) -> Option<DrillOf> {
        Some(DrillOf {
            uid: self.uid.clone()?,
            cut: self.status.creation_time.as_deref()?.parse().ok()?,
        })
    }

    /// Its last drill, if it counts at `now` (docs/design.md §5.9): `None` without a
    /// record, else the record or why it counts for nothing.
    pub fn drill(&self, now: Timestamp) -> Option<Result<&DrillRecord, Discounted>> {
        let record = self.drill_record.as_ref()?;
        Some(standing(record.as_ref(), self.drill_of().as_ref(), now))
    }

    /// Its record with what it must name, for a decider that judges it later.
    pub fn drill_seen(&self) -> Option<DrillSeen> {
        Some(DrillSeen {
            record: self.drill_record.clone()?,
            of: self.drill_of(),
        })
    }

    /// Its last drill, only if it counts at `now`.
    pub fn counted_drill(&self, now: Timestamp) -> Option<&DrillRecord> {
        self.drill(now).and_then(Result::ok)
    }

    /// The recoverable window recorded on it, if any: the record, or why it counts for
    /// nothing at `now` (docs/pitr.md §3).
    pub fn pitr_window(&self, now: Timestamp) -> Option<Result<&WindowRecord, WindowDiscounted>> {
        let record = self.pitr_window.as_ref()?;
        Some(pitr_standing(
            record.as_ref(),
            self.drill_of().as_ref(),
            now,
        ))
    }
}

/// A time read from a snapshot that cannot be true, beyond [`CLOCK_SKEW`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeProblem {
    #[error("{field} {at} is in the future (now is {now})")]
    InTheFuture {
        field: &'static str,
        at: Timestamp,
        now: Timestamp,
    },
    #[error("{field} {at} is before {earlier} {earlier_at}")]
    OutOfOrder {
        field: &'static str,
        at: Timestamp,
        earlier: &'static str,
        earlier_at: Timestamp,
    },
}

impl VolumeSnapshot {
    /// The times the snapshot records, in the order they happen: the object is created,
    /// the snapshotter takes the point in time, the job marks it cut, then ready.
    pub fn times(&self) -> Vec<(&'static str, Timestamp)> {
        let taken = self
            .status
            .creation_time
            .as_deref()
            .and_then(|t| t.parse().ok());
        [
            (CREATED, self.created),
            (STATUS_CREATION_TIME, taken),
            (ANN_CUT_TIME, self.cut_time),
            (ANN_READY_TIME, self.ready_time),
        ]
        .into_iter()
        .filter_map(|(field, t)| t.map(|t| (field, t)))
        .collect()
    }

    /// The first recorded time that is later than `now`, or earlier than one that must
    /// precede it, by more than [`CLOCK_SKEW`]: such a snapshot would be taken for the
    /// newest and never age out.
    pub fn impossible_time(&self, now: Timestamp) -> Option<TimeProblem> {
        let latest = now.checked_add(CLOCK_SKEW).unwrap_or(Timestamp::MAX);
        let times = self.times();
        for (i, &(field, at)) in times.iter().enumerate() {
            if at > latest {
                return Some(TimeProblem::InTheFuture { field, at, now });
            }
            for &(earlier, earlier_at) in &times[..i] {
                if at < earlier_at.checked_sub(CLOCK_SKEW).unwrap_or(Timestamp::MIN) {
                    return Some(TimeProblem::OutOfOrder {
                        field,
                        at,
                        earlier,
                        earlier_at,
                    });
                }
            }
        }
        None
    }
}

/// The metadata of one snapshot, and its name for errors.
struct Reader<'a> {
    meta: &'a Value,
    snapshot: String,
}

impl<'a> Reader<'a> {
    fn malformed(&self, field: &'static str, expected: &'static str) -> ReadError {
        ReadError::Malformed {
            snapshot: self.snapshot.clone(),
            field,
            expected,
        }
    }

    /// `metadata.<labels|annotations>[key]`: absent is `None`, a value that is not a string
    /// (or a map that is not a map) is an error.
    fn entry(&self, map: &'static str, key: &'static str) -> Result<Option<&'a str>, ReadError> {
        let section = if map == LABELS {
            "labels"
        } else {
            "annotations"
        };
        match self.meta.get(section) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(m)) => match m.get(key) {
                None => Ok(None),
                Some(Value::String(v)) => Ok(Some(v)),
                Some(_) => Err(self.malformed(key, "a string")),
            },
            Some(_) => Err(self.malformed(map, "a map of strings")),
        }
    }

    /// A label every vtsnap snapshot has from its creation on.
    fn required(&self, key: &'static str) -> Result<&'a str, ReadError> {
        match self.entry(LABELS, key)? {
            Some("") => Err(self.malformed(key, "a non-empty string")),
            Some(v) => Ok(v),
            None => Err(ReadError::Missing {
                snapshot: self.snapshot.clone(),
                field: key,
            }),
        }
    }

    fn reprovisioned(&self) -> std::collections::BTreeMap<TabletUid, Option<String>> {
        self.meta
            .get("annotations")
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|m| m.iter())
            .filter_map(|(k, v)| {
                let uid = k
                    .strip_prefix(super::ANN_REPROVISIONED_PREFIX)?
                    .parse()
                    .ok()?;
                Some((uid, v.as_str().and_then(super::Reprovisioned::pvc_uid)))
            })
            .collect()
    }

    fn uid(&self) -> Result<Option<String>, ReadError> {
        match self.meta.get("uid") {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(v)) if !v.is_empty() => Ok(Some(v.clone())),
            Some(_) => Err(self.malformed(UID, "a non-empty string")),
        }
    }

    fn created(&self) -> Result<Option<&'a str>, ReadError> {
        match self.meta.get("creationTimestamp") {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(v)) => Ok(Some(v)),
            Some(_) => Err(self.malformed(CREATED, "a string")),
        }
    }

    fn time(&self, field: &'static str, v: &str) -> Result<Timestamp, ReadError> {
        v.parse().map_err(|source| ReadError::Time {
            snapshot: self.snapshot.clone(),
            field,
            value: v.to_owned(),
            source,
        })
    }

    /// A position annotation: a GTID set of the flavor `vtsnap.io/mysql-flavor` records
    /// (when it records one vtsnap knows).
    fn position(&self, key: &'static str) -> Result<Option<String>, ReadError> {
        let Some(v) = self.entry(ANNOTATIONS, key)? else {
            return Ok(None);
        };
        let gtid_flavor = gtid::parse_position(v).map_err(|source| ReadError::Gtid {
            snapshot: self.snapshot.clone(),
            field: key,
            value: v.to_owned(),
            source,
        })?;
        if let Some(flavor) = self
            .entry(ANNOTATIONS, ANN_MYSQL_FLAVOR)?
            .and_then(Flavor::parse)
            && flavor != gtid_flavor.server()
        {
            return Err(ReadError::GtidFlavor {
                snapshot: self.snapshot.clone(),
                field: key,
                value: v.to_owned(),
                gtid_flavor: gtid_flavor.prefix(),
                flavor: flavor.as_str(),
            });
        }
        Ok(Some(v.to_owned()))
    }

    /// `spec.source.persistentVolumeClaimName`, which must agree with `vtsnap.io/source-pvc`.
    fn source_claim(&self, obj: &Value) -> Result<Option<String>, ReadError> {
        let claim = match obj.pointer("/spec/source/persistentVolumeClaimName") {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::String(c)) if !c.is_empty() => c,
            Some(_) => return Err(self.malformed(SOURCE_CLAIM, "a non-empty string")),
        };
        if let Some(ann) = self.entry(ANNOTATIONS, ANN_SOURCE_PVC)?
            && ann != claim
        {
            return Err(ReadError::Contradiction {
                snapshot: self.snapshot.clone(),
                field: SOURCE_CLAIM,
                value: claim.clone(),
                other: ANN_SOURCE_PVC,
                other_value: ann.to_owned(),
            });
        }
        Ok(Some(claim.clone()))
    }

    /// `status`, strictly: "ready" is decided from it, so a field of the wrong type (say
    /// `readyToUse: "true"`) is an error rather than "not ready" (which the GC may delete).
    fn status(&self, obj: &Value) -> Result<SnapshotStatus, ReadError> {
        let st = match obj.get(STATUS) {
            None | Some(Value::Null) => return Ok(SnapshotStatus::default()),
            Some(Value::Object(st)) => st,
            Some(_) => return Err(self.malformed(STATUS, "an object")),
        };
        match st.get("readyToUse") {
            None | Some(Value::Null | Value::Bool(_)) => {}
            Some(_) => return Err(self.malformed(READY_TO_USE, "a boolean")),
        }
        match st.get("boundVolumeSnapshotContentName") {
            None | Some(Value::Null) => {}
            Some(Value::String(v)) if !v.is_empty() => {}
            Some(_) => return Err(self.malformed(BOUND_CONTENT, "a non-empty string")),
        }
        match st.get("creationTime") {
            None | Some(Value::Null) => {}
            Some(Value::String(v)) => {
                self.time(STATUS_CREATION_TIME, v)?;
            }
            Some(_) => return Err(self.malformed(STATUS_CREATION_TIME, "a string")),
        }
        match st.get("error") {
            None | Some(Value::Null | Value::Object(_)) => {}
            Some(_) => return Err(self.malformed(STATUS_ERROR, "an object")),
        }
        Ok(SnapshotStatus::of(obj))
    }

    fn mode(&self, v: &str) -> Result<Mode, ReadError> {
        [Mode::Cold, Mode::Online]
            .into_iter()
            .find(|m| mode_label(*m) == v)
            .ok_or_else(|| ReadError::Mode {
                snapshot: self.snapshot.clone(),
                field: LABEL_MODE,
                value: v.to_owned(),
            })
    }

    /// UIDs of the `VitessCluster` owner references; other owners are not vtsnap's concern.
    fn cluster_owners(&self) -> Result<Vec<String>, ReadError> {
        let refs = match self.meta.get("ownerReferences") {
            None | Some(Value::Null) => return Ok(vec![]),
            Some(Value::Array(refs)) => refs,
            Some(_) => return Err(self.malformed(OWNERS, "a list")),
        };
        let mut uids = Vec::new();
        for o in refs {
            if o.get("kind").and_then(Value::as_str) != Some("VitessCluster") {
                continue;
            }
            match o.get("uid").and_then(Value::as_str) {
                Some(uid) if !uid.is_empty() => uids.push(uid.to_owned()),
                _ => return Err(self.malformed(OWNERS, "a list of references with a uid")),
            }
        }
        Ok(uids)
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_strict;
