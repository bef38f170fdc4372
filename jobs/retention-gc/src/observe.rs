//! What the GC reads, as plain values: vtsnap's VolumeSnapshots, the snapshots Pending PVCs
//! are being provisioned from, fence leases, and the VitessClusters (their UIDs and the
//! shards their specs define). Built from API lists or from a `kubectl get … -o json` dump.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use serde_json::Value;
use vtsnap_core::input;
use vtsnap_core::labels::{MANAGED_BY, MANAGED_BY_VTSNAP};
use vtsnap_core::naming::KeyRange;
use vtsnap_core::snapshot::{
    LABEL_CLUSTER, LABEL_KEYSPACE, LABEL_SHARD, Phase, ReadError, VolumeSnapshot,
};

use vtsnap_core::vitesscluster::cluster_shards;

/// One of vtsnap's snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snap {
    pub namespace: String,
    pub name: String,
    pub cluster: String,
    pub keyspace: String,
    pub shard: KeyRange,
    pub created: Timestamp,
    /// Labelled `failed` (known bad).
    pub failed: bool,
    /// `readyToUse` (and cut).
    pub ready: bool,
    /// UIDs of VitessCluster owners.
    pub cluster_owners: Vec<String>,
    /// Marked not to be restored from (`vtsnap.io/unusable`).
    pub unusable: bool,
}

/// A tablet PVC the admission webhook restored from a snapshot
/// (`vtsnap.io/restored-from`), with what the GC watches of the restore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoredPvc {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub resource_version: String,
    pub snapshot: String,
    /// `vtsnap.io/restore-node` (node-local restores).
    pub node: Option<String>,
    /// `status.phase` is Bound.
    pub bound: bool,
    /// `spec.volumeName` is set (a volume was provisioned or prebound).
    pub has_volume: bool,
    pub cluster: String,
    pub keyspace: String,
    /// The shard's SafeName label.
    pub shard: String,
    /// The tablet, from the `cell` and `tablet-uid` labels.
    pub tablet: Option<vtsnap_core::naming::TabletAlias>,
}

/// A tablet Pod, as far as un-sticking a restore needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodInfo {
    pub uid: String,
    /// As read: the delete is refused if the Pod changed since (it started, say).
    pub resource_version: String,
    pub phase: String,
    pub created: Option<Timestamp>,
}

/// The kinds of object the GC acts on, or on whose reading it acts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Kind {
    VolumeSnapshot,
    Lease,
    /// A Pending PVC whose data source cannot be read: it may name any snapshot.
    PersistentVolumeClaim,
    /// A VitessCluster whose identity or spec cannot be read: its shards are unknown.
    VitessCluster,
}

/// Why one of vtsnap's objects is left out of the plan (so never deleted, counted or
/// recovered): the GC acts only on what it read completely.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Unreadable {
    #[error(transparent)]
    Read(#[from] ReadError),
    /// Its age is unknown, so no retention rule can place it.
    #[error("VolumeSnapshot {namespace}/{name} has no metadata.creationTimestamp")]
    NoCreationTime { namespace: String, name: String },
    #[error("Lease {lease}: {field} is missing")]
    LeaseMissing { lease: String, field: &'static str },
    #[error("Lease {lease}: {field} is not {expected}")]
    LeaseMalformed {
        lease: String,
        field: &'static str,
        expected: &'static str,
    },
    /// Which snapshot it is provisioned from is unknown, so none of its namespace may go.
    #[error("PersistentVolumeClaim {pvc}: {field} is not {expected}")]
    PvcMalformed {
        pvc: String,
        field: &'static str,
        expected: &'static str,
    },
    /// Another VitessCluster has the same namespace and name (only in a dump): which
    /// one is real is unknown, so neither is used.
    #[error("VitessCluster {cluster} appears more than once")]
    ClusterDuplicate { cluster: String },
    /// Its shards (for `whenScaled`) or its UID (for ownerReferences) are unknown.
    #[error("VitessCluster {cluster}: {path} is not {expected}")]
    ClusterMalformed {
        cluster: String,
        field: &'static str,
        path: String,
        expected: &'static str,
    },
}

impl Unreadable {
    /// The field that could not be read.
    pub fn field(&self) -> &'static str {
        match self {
            Self::Read(e) => e.field(),
            Self::NoCreationTime { .. } => "metadata.creationTimestamp",
            Self::LeaseMissing { field, .. }
            | Self::LeaseMalformed { field, .. }
            | Self::PvcMalformed { field, .. }
            | Self::ClusterMalformed { field, .. } => field,
            Self::ClusterDuplicate { .. } => "metadata.name",
        }
    }
}

/// An object the GC could not read, with what could be told of it: where it is, and (for
/// a snapshot) the identity labels that are strings, to know which shards it may be of.
#[derive(Debug, Clone)]
pub struct UnreadableObject {
    pub kind: Kind,
    /// `""` when not a string.
    pub namespace: String,
    /// `""` when not a string.
    pub name: String,
    pub cluster: Option<String>,
    pub keyspace: Option<String>,
    /// The shard's SafeName label.
    pub shard: Option<String>,
    pub error: Unreadable,
}

/// The namespaces something may concern: one, or any (its own could not be read).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    Namespace(String),
    Any,
}

impl UnreadableObject {
    /// Its namespace, or [`Scope::Any`] when that could not be read.
    pub fn scope(&self) -> Scope {
        if self.namespace.is_empty() {
            Scope::Any
        } else {
            Scope::Namespace(self.namespace.clone())
        }
    }

    fn of(kind: Kind, v: &Value, error: Unreadable) -> Self {
        let text = |p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_owned);
        let label = |k: &str| text(&format!("/metadata/labels/{}", k.replace('/', "~1")));
        let identity = kind == Kind::VolumeSnapshot;
        Self {
            kind,
            namespace: text("/metadata/namespace").unwrap_or_default(),
            name: text("/metadata/name").unwrap_or_default(),
            cluster: label(LABEL_CLUSTER).filter(|_| identity),
            keyspace: label(LABEL_KEYSPACE).filter(|_| identity),
            shard: label(LABEL_SHARD).filter(|_| identity),
            error,
        }
    }
}

/// The largest `--objects` dump read (a dump of 100,000 snapshots is about 150 MiB).
pub const MAX_DUMP_BYTES: u64 = vtsnap_core::input::MAX_DUMP;

/// Why a dump cannot be read. The messages name no path: the caller says which option
/// named it.
#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    #[error("cannot read the dump: {0}")]
    Io(std::io::Error),
    /// A device, directory or socket (`/dev/zero` would be read for ever).
    #[error("the dump is not a regular file or a pipe but a {0}")]
    NotAFile(&'static str),
    #[error("the dump is larger than {} MiB", MAX_DUMP_BYTES >> 20)]
    TooLarge,
    #[error("not a List of objects: {0}")]
    NotAList(serde_json::Error),
    #[error("item {index} of the List: {source}")]
    Item {
        index: usize,
        source: serde_json::Error,
    },
}

impl From<input::ReadError> for DumpError {
    fn from(e: input::ReadError) -> Self {
        match e {
            input::ReadError::Io { source, .. } => Self::Io(source),
            input::ReadError::NotAFile { kind, .. } => Self::NotAFile(kind),
            input::ReadError::TooLarge { .. } => Self::TooLarge,
        }
    }
}

/// A VitessCluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    pub uid: String,
    /// `(keyspace, shard name)` from the spec.
    pub shards: BTreeSet<(String, String)>,
}

/// A fence lease (namespace, name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRef {
    pub namespace: String,
    pub name: String,
    pub expired: bool,
}

#[derive(Debug, Clone, Default)]
pub struct Inventory {
    pub snapshots: Vec<Snap>,
    /// `(namespace, snapshot name)` that a Pending PVC names as its data source.
    pub in_use: BTreeSet<(String, String)>,
    /// Namespaces with a Pending PVC whose data source cannot be read ([`Scope::Any`]: a
    /// PVC whose own namespace is unknown): no snapshot there is deleted.
    pub in_use_unknown: BTreeSet<Scope>,
    pub leases: Vec<LeaseRef>,
    /// Keyed by `(namespace, name)`.
    pub clusters: BTreeMap<(String, String), Cluster>,
    /// VitessClusters that could not be read, or were seen twice: never used, even if
    /// a readable copy comes along.
    pub unusable_clusters: BTreeSet<(String, String)>,
    /// vtsnap's snapshots and leases that could not be read.
    pub unreadable: Vec<UnreadableObject>,
    /// Tablet PVCs restored from a snapshot (readable ones; others are not watched).
    pub restored: Vec<RestoredPvc>,
    /// Tablet Pods by `(namespace, name)`.
    pub pods: BTreeMap<(String, String), PodInfo>,
    /// The last replication IO error vtctld reported for restored tablets, by their PVC's
    /// `(namespace, name)` (observed by `run`; none from a dump).
    pub catch_up: BTreeMap<(String, String), String>,
}

fn s(v: &Value, p: &str) -> String {
    v.pointer(p)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn label(v: &Value, k: &str) -> String {
    s(
        v,
        &format!(
            "/metadata/labels/{}",
            k.replace('~', "~0").replace('/', "~1")
        ),
    )
}

impl Inventory {
    /// One of vtsnap's snapshots (others are ignored); one that cannot be read is kept
    /// apart in `unreadable`.
    pub fn add_snapshot(&mut self, v: &Value) {
        if !VolumeSnapshot::is_vtsnaps(v) {
            return;
        }
        match Snap::read(v) {
            Ok(s) => self.snapshots.push(s),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read a VolumeSnapshot; it is left out of the plan");
                self.unreadable
                    .push(UnreadableObject::of(Kind::VolumeSnapshot, v, e));
            }
        }
    }

    /// A PVC that is still Pending and names a VolumeSnapshot as its source. One whose
    /// phase or data source cannot be read is kept apart in `unreadable` and holds every
    /// snapshot of its namespace: the one it names must not go.
    pub fn add_pvc(&mut self, v: &Value) {
        if let Some(r) = RestoredPvc::read(v) {
            self.restored.push(r);
        }
        match pvc_sources(v) {
            Ok(sources) => self.in_use.extend(sources),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read a Pending PVC's data source; no snapshot of its namespace is deleted");
                let u = UnreadableObject::of(Kind::PersistentVolumeClaim, v, e);
                self.in_use_unknown.insert(u.scope());
                self.unreadable.push(u);
            }
        }
    }

    /// A tablet Pod (`planetscale.com/component=vttablet`); others, and ones without a
    /// name, namespace or UID, are ignored.
    pub fn add_pod(&mut self, v: &Value) {
        if label(v, vtsnap_core::labels::COMPONENT) != vtsnap_core::labels::COMPONENT_VTTABLET {
            return;
        }
        let (ns, name, uid) = (
            s(v, "/metadata/namespace"),
            s(v, "/metadata/name"),
            s(v, "/metadata/uid"),
        );
        if ns.is_empty() || name.is_empty() || uid.is_empty() {
            return;
        }
        let created = v
            .pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str)
            .and_then(|t| t.parse().ok());
        self.pods.insert(
            (ns, name),
            PodInfo {
                uid,
                resource_version: s(v, "/metadata/resourceVersion"),
                phase: s(v, "/status/phase"),
                created,
            },
        );
    }

    /// One of vtsnap's fence leases; one that cannot be read (name, renewTime,
    /// leaseDurationSeconds) is kept apart in `unreadable`: never recovered on a guess.
    pub fn add_lease(&mut self, v: &Value, now: Timestamp) {
        if label(v, MANAGED_BY) != MANAGED_BY_VTSNAP {
            return;
        }
        match LeaseRef::read(v, now) {
            Ok(l) => self.leases.push(l),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read a fence Lease; it is not recovered");
                self.unreadable
                    .push(UnreadableObject::of(Kind::Lease, v, e));
            }
        }
    }

    /// A VitessCluster; one whose name, UID or spec cannot be read is kept apart in
    /// `unreadable` and left out: its shards count as existing and its snapshots' owners
    /// are left as they are.
    pub fn add_cluster(&mut self, v: &Value) {
        let key = (s(v, "/metadata/namespace"), s(v, "/metadata/name"));
        let read = Cluster::read(v).and_then(|(key, c)| {
            if self.clusters.remove(&key).is_some() || self.unusable_clusters.contains(&key) {
                return Err(Unreadable::ClusterDuplicate {
                    cluster: format!("{}/{}", key.0, key.1),
                });
            }
            Ok((key, c))
        });
        match read {
            Ok((key, c)) => {
                self.clusters.insert(key, c);
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot use a VitessCluster; its shards and owners are left alone");
                let mut u = UnreadableObject::of(Kind::VitessCluster, v, e);
                u.cluster = Some(u.name.clone());
                self.unreadable.push(u);
                // An unreadable copy makes a readable one of the same name unusable too.
                self.clusters.remove(&key);
                self.unusable_clusters.insert(key);
            }
        }
    }

    /// Whether a Pending PVC whose data source cannot be read may take its snapshot from
    /// `namespace`.
    pub fn source_unknown_in(&self, namespace: &str) -> bool {
        self.in_use_unknown.contains(&Scope::Any)
            || self
                .in_use_unknown
                .contains(&Scope::Namespace(namespace.to_owned()))
    }

    /// Reads a dump file or pipe of at most [`MAX_DUMP_BYTES`] (with the reader every
    /// program's offline command uses), then [`from_dump_text`](Self::from_dump_text).
    pub fn read_dump(path: &std::path::Path, now: Timestamp) -> Result<Self, DumpError> {
        let text = input::read_bounded(path, "a dump", MAX_DUMP_BYTES, input::Accept::FileOrPipe)?;
        Self::from_dump_text(&text, now)
    }

    /// From a `kubectl get volumesnapshots,persistentvolumeclaims,leases,vitessclusters -A -o json`
    /// dump (a `List` of objects with their `kind`), one item at a time: only the inventory
    /// is kept in memory, never the whole parsed dump. Nesting deeper than serde_json's
    /// recursion limit (128) is an error, not a deep recursion.
    pub fn from_dump_text(text: &[u8], now: Timestamp) -> Result<Self, DumpError> {
        #[derive(serde::Deserialize)]
        struct List<'a> {
            #[serde(borrow)]
            items: Vec<&'a serde_json::value::RawValue>,
        }
        let list: List<'_> = serde_json::from_slice(text).map_err(DumpError::NotAList)?;
        let mut inv = Self::default();
        for (index, raw) in list.items.into_iter().enumerate() {
            let it: Value = serde_json::from_str(raw.get())
                .map_err(|source| DumpError::Item { index, source })?;
            inv.add_any(&it, now);
        }
        Ok(inv)
    }

    /// Adds one object of any of the four kinds; others are ignored.
    pub fn add_any(&mut self, it: &Value, now: Timestamp) {
        match it.get("kind").and_then(Value::as_str) {
            Some("VolumeSnapshot") => self.add_snapshot(it),
            Some("PersistentVolumeClaim") => self.add_pvc(it),
            Some("Lease") => self.add_lease(it, now),
            Some("VitessCluster") => self.add_cluster(it),
            Some("Pod") => self.add_pod(it),
            _ => {}
        }
    }
}

/// The `(namespace, snapshot)` pairs a PVC is provisioned from: none unless it is Pending
/// (a missing phase is Pending) and a data source of kind VolumeSnapshot names one.
fn pvc_sources(v: &Value) -> Result<Vec<(String, String)>, Unreadable> {
    let pvc = format!("{}/{}", s(v, "/metadata/namespace"), s(v, "/metadata/name"));
    let bad = |field, expected| Unreadable::PvcMalformed {
        pvc: pvc.clone(),
        field,
        expected,
    };
    match v.pointer("/status/phase") {
        None | Some(Value::Null) => {}
        Some(Value::String(p)) if p == "Pending" => {}
        Some(Value::String(_)) => return Ok(Vec::new()),
        Some(_) => return Err(bad("status.phase", "a string")),
    }
    let mut out = Vec::new();
    for (src, field) in [
        ("/spec/dataSource", "spec.dataSource"),
        ("/spec/dataSourceRef", "spec.dataSourceRef"),
    ] {
        let d = match v.pointer(src) {
            None | Some(Value::Null) => continue,
            Some(d @ Value::Object(_)) => d,
            Some(_) => return Err(bad(field, "an object")),
        };
        match d.get("kind") {
            Some(Value::String(k)) if k == "VolumeSnapshot" => {}
            Some(Value::String(_)) => continue,
            _ => return Err(bad(field, "an object with a string kind")),
        }
        let name = d
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| bad(field, "an object with a non-empty name"))?;
        let ns = match d.get("namespace") {
            None | Some(Value::Null) => v
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .ok_or_else(|| bad("metadata.namespace", "a non-empty string"))?,
            Some(Value::String(n)) if !n.is_empty() => n.as_str(),
            Some(_) => {
                return Err(bad(
                    field,
                    "an object whose namespace is a non-empty string",
                ));
            }
        };
        out.push((ns.to_owned(), name.to_owned()));
    }
    Ok(out)
}

impl Cluster {
    /// Its `(namespace, name)` and what the GC needs of it, or what could not be read.
    fn read(v: &Value) -> Result<((String, String), Self), Unreadable> {
        let cluster = format!("{}/{}", s(v, "/metadata/namespace"), s(v, "/metadata/name"));
        let text = |p: &str, field: &'static str| {
            v.pointer(p)
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .ok_or_else(|| Unreadable::ClusterMalformed {
                    cluster: cluster.clone(),
                    field,
                    path: field.to_owned(),
                    expected: "a non-empty string",
                })
        };
        let namespace = text("/metadata/namespace", "metadata.namespace")?;
        let name = text("/metadata/name", "metadata.name")?;
        let uid = text("/metadata/uid", "metadata.uid")?;
        let shards = cluster_shards(v).map_err(|e| Unreadable::ClusterMalformed {
            cluster: cluster.clone(),
            field: "spec.keyspaces",
            path: e.path,
            expected: e.expected,
        })?;
        Ok(((namespace, name), Self { uid, shards }))
    }
}

impl LeaseRef {
    fn read(v: &Value, now: Timestamp) -> Result<Self, Unreadable> {
        let text = |p: &str| v.pointer(p).and_then(Value::as_str);
        let lease = format!(
            "{}/{}",
            text("/metadata/namespace").unwrap_or(""),
            text("/metadata/name").unwrap_or("")
        );
        let missing = |field| Unreadable::LeaseMissing {
            lease: lease.clone(),
            field,
        };
        let malformed = |field, expected| Unreadable::LeaseMalformed {
            lease: lease.clone(),
            field,
            expected,
        };
        let ident = |p: &str, field| match v.pointer(p) {
            None | Some(Value::Null) => Err(missing(field)),
            Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            Some(_) => Err(malformed(field, "a non-empty string")),
        };
        let namespace = ident("/metadata/namespace", "metadata.namespace")?;
        let name = ident("/metadata/name", "metadata.name")?;
        let renew: Timestamp = match v.pointer("/spec/renewTime") {
            None | Some(Value::Null) => return Err(missing("spec.renewTime")),
            Some(t) => t
                .as_str()
                .and_then(|t| t.parse().ok())
                .ok_or_else(|| malformed("spec.renewTime", "an RFC 3339 time"))?,
        };
        // The API's type is int32 and it requires > 0; anything else is not a duration.
        let secs = match v.pointer("/spec/leaseDurationSeconds") {
            None | Some(Value::Null) => return Err(missing("spec.leaseDurationSeconds")),
            Some(d) => d
                .as_i64()
                .and_then(|d| i32::try_from(d).ok())
                .filter(|d| *d > 0)
                .ok_or_else(|| {
                    malformed(
                        "spec.leaseDurationSeconds",
                        "a whole number of seconds from 1 to 2147483647",
                    )
                })?,
        };
        Ok(Self {
            expired: now.as_second() > renew.as_second().saturating_add(i64::from(secs)),
            namespace,
            name,
        })
    }
}

impl Snap {
    fn read(v: &Value) -> Result<Self, Unreadable> {
        let s = VolumeSnapshot::read(v)?;
        if s.namespace.is_empty() {
            return Err(ReadError::Malformed {
                snapshot: format!("/{}", s.name),
                field: "metadata.namespace",
                expected: "a non-empty string",
            }
            .into());
        }
        let Some(created) = s.created else {
            return Err(Unreadable::NoCreationTime {
                namespace: s.namespace,
                name: s.name,
            });
        };
        Ok(Self {
            failed: s.phase == Some(Phase::Failed),
            ready: s.status.is_ready(),
            namespace: s.namespace,
            name: s.name,
            cluster: s.cluster,
            keyspace: s.keyspace,
            shard: s.shard,
            created,
            cluster_owners: s.cluster_owners,
            unusable: s.unusable.is_some(),
        })
    }
}

impl RestoredPvc {
    /// A PVC carrying `vtsnap.io/restored-from` with the identity it is watched by;
    /// anything less is not watched (`None`).
    fn read(v: &Value) -> Option<Self> {
        use vtsnap_core::labels as l;
        use vtsnap_core::restored::{ANN_RESTORE_NODE, ANN_RESTORED_FROM};
        let ann = |k: &str| {
            v.pointer("/metadata/annotations")
                .and_then(|a| a.get(k))
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
        };
        let snapshot = ann(ANN_RESTORED_FROM)?;
        let need = |t: String| (!t.is_empty()).then_some(t);
        let tablet = match (
            need(label(v, l::CELL)),
            label(v, l::TABLET_UID).parse::<vtsnap_core::naming::TabletUid>(),
        ) {
            (Some(cell), Ok(uid)) => Some(vtsnap_core::naming::TabletAlias { cell, uid }),
            _ => None,
        };
        Some(Self {
            namespace: need(s(v, "/metadata/namespace"))?,
            name: need(s(v, "/metadata/name"))?,
            uid: need(s(v, "/metadata/uid"))?,
            resource_version: s(v, "/metadata/resourceVersion"),
            snapshot,
            node: ann(ANN_RESTORE_NODE),
            bound: s(v, "/status/phase") == "Bound",
            has_volume: !s(v, "/spec/volumeName").is_empty(),
            cluster: need(label(v, l::CLUSTER))?,
            keyspace: need(label(v, l::KEYSPACE))?,
            shard: need(label(v, l::SHARD))?,
            tablet,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn snapshot(name: &str, phase: &str) -> Value {
        json!({"kind": "VolumeSnapshot", "metadata": {"name": name, "namespace": "vitess",
            "creationTimestamp": "2026-11-29T00:00:00Z", "labels": {
            "app.kubernetes.io/managed-by": "vtsnap", "vtsnap.io/cluster": "example",
            "vtsnap.io/keyspace": "commerce", "vtsnap.io/shard": "x-80", "vtsnap.io/phase": phase}}})
    }

    fn now() -> Timestamp {
        "2026-11-29T12:00:00Z".parse().unwrap()
    }

    #[test]
    fn a_dump_is_read_from_a_file_and_a_device_or_directory_is_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dump.json");
        let list = json!({"kind": "List", "items": [snapshot("good", "ready")]});
        std::fs::write(&path, list.to_string()).unwrap();
        let inv = Inventory::read_dump(&path, now()).unwrap();
        assert_eq!(inv.snapshots.len(), 1);
        // `/dev/zero` never ends: refused by its type, not read up to the cap.
        let e = Inventory::read_dump(std::path::Path::new("/dev/zero"), now()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the dump is not a regular file or a pipe but a character device"
        );
        let e = Inventory::read_dump(dir.path(), now()).unwrap_err();
        assert!(matches!(e, DumpError::NotAFile("directory")), "{e}");
        let e = Inventory::read_dump(&dir.path().join("missing"), now()).unwrap_err();
        assert!(e.to_string().starts_with("cannot read the dump: "), "{e}");
    }

    #[test]
    fn unreadable_snapshots_are_kept_apart_and_others_ignored() {
        let now: Timestamp = "2026-11-29T12:00:00Z".parse().unwrap();
        let mut inv = Inventory::default();
        inv.add_any(&snapshot("good", "failed"), now);
        inv.add_any(&snapshot("bad-phase", "Failed"), now);
        let mut undated = snapshot("undated", "ready");
        undated["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("creationTimestamp");
        inv.add_any(&undated, now);
        // Not vtsnap's: neither read nor unreadable.
        inv.add_any(
            &json!({"kind": "VolumeSnapshot", "metadata": {"name": "manual", "namespace": "vitess"}}),
            now,
        );
        assert_eq!(
            inv.snapshots
                .iter()
                .map(|s| (s.name.as_str(), s.shard.to_string(), s.failed))
                .collect::<Vec<_>>(),
            [("good", "-80".to_owned(), true)]
        );
        let why: Vec<String> = inv.unreadable.iter().map(|u| u.error.to_string()).collect();
        assert_eq!(why.len(), 2, "{why:?}");
        assert!(
            why[0].contains("vitess/bad-phase") && why[0].contains("vtsnap.io/phase"),
            "{why:?}"
        );
        assert!(
            matches!(&inv.unreadable[1].error, Unreadable::NoCreationTime { name, .. } if name == "undated")
        );
    }
}
