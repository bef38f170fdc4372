//! Observe: what the GC reads, as plain values: vtsnap's VolumeSnapshots, the snapshots
//! Pending PVCs are being provisioned from, fence leases, tablet Pods and the VitessClusters
//! (their UIDs and the shards their specs define). Read from the API ([`observe`], one
//! paged LIST per kind and namespace) or from a `kubectl get … -o json` dump.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use vtsnap_core::config::Config;
use vtsnap_core::coverage::Exactness;
use vtsnap_core::dump::{self, DumpError};
use vtsnap_core::labels::{MANAGED_BY, MANAGED_BY_VTSNAP};
use vtsnap_core::naming::KeyRange;
use vtsnap_core::reconcile::{ObjectKey, Read, apis, list};
use vtsnap_core::shard::ShardRef;
use vtsnap_core::shard::{LABEL_CLUSTER, LABEL_KEYSPACE, LABEL_SHARD};
use vtsnap_core::snapshot::{ReadError, VolumeSnapshot};

mod binlogs;
mod catch_up;
mod objects;

pub use vtsnap_core::coverage::PrimaryBinlogs;

use objects::pvc_sources;

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
    /// The recorded position (`vtsnap.io/gtid-executed`, else `gtid-lower-bound`).
    pub position: Option<String>,
    pub exactness: Exactness,
    /// Tablets re-provisioned after a restore from it could not catch up, each with the
    /// UID of the PVC that was to go (`None`: unknown, taken as done).
    pub reprovisioned: BTreeMap<vtsnap_core::naming::TabletUid, Option<String>>,
    /// Its last drill (`vtsnap.io/drill`) and the snapshot it must name; judged at the
    /// decider's `now` (docs/design.md §5.9).
    pub drill: Option<vtsnap_core::snapshot::DrillSeen>,
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
    /// Its `Ready` condition: a Ready tablet Pod is serving.
    pub ready: Readiness,
}

/// A Pod's `Ready` condition as read; anything but a clear `True` or `False` is unknown,
/// and nothing is done on an unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    NotReady,
    Unknown,
}

impl Readiness {
    fn of(pod: &Value) -> Self {
        let Some(conditions) = pod.pointer("/status/conditions").and_then(Value::as_array) else {
            return Self::Unknown;
        };
        let mut ready = conditions.iter().filter(|c| c["type"] == "Ready");
        match (ready.next().map(|c| &c["status"]), ready.next()) {
            (Some(s), None) if s == "True" => Self::Ready,
            (Some(s), None) if s == "False" => Self::NotReady,
            _ => Self::Unknown,
        }
    }
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
    #[error("VitessCluster {cluster}: {problem}")]
    ClusterMalformed {
        cluster: String,
        field: &'static str,
        /// The path, what it should be and, for a value out of bounds, what it is.
        problem: String,
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
    pub expiry: Expiry,
}

/// Whether a fence lease's holder still renews it, as of the time it was read at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// Renewed within its duration: its holder may still be at work.
    Live,
    /// Not renewed within its duration: its holder is gone.
    Expired,
}

#[derive(Debug, Clone, Default)]
pub struct Inventory {
    pub snapshots: Vec<Snap>,
    /// The snapshots a Pending PVC names as its data source.
    pub in_use: BTreeSet<ObjectKey>,
    /// Namespaces with a Pending PVC whose data source cannot be read ([`Scope::Any`]: a
    /// PVC whose own namespace is unknown): no snapshot there is deleted.
    pub in_use_unknown: BTreeSet<Scope>,
    pub leases: Vec<LeaseRef>,
    pub clusters: BTreeMap<ObjectKey, Cluster>,
    /// VitessClusters that could not be read, or were seen twice: never used, even if
    /// a readable copy comes along.
    pub unusable_clusters: BTreeSet<ObjectKey>,
    /// vtsnap's snapshots and leases that could not be read.
    pub unreadable: Vec<UnreadableObject>,
    /// Tablet PVCs restored from a snapshot (readable ones; others are not watched).
    pub restored: Vec<RestoredPvc>,
    /// Tablet Pods.
    pub pods: BTreeMap<ObjectKey, PodInfo>,
    /// The last replication IO error vtctld reported for restored tablets, by their PVC
    /// (observed by `run`; none from a dump).
    pub catch_up: BTreeMap<ObjectKey, String>,
    /// Restored tablets (by PVC) of type REPLICA or RDONLY whose replication is stopped
    /// without an error: nothing started it (vttablet leaves that to VTOrc).
    pub not_replicating: BTreeSet<ObjectKey>,
    /// What each shard's primary purged from its binlogs, for catch-up coverage
    /// (observed by `run`; none from a dump, so coverage is unknown there).
    pub binlogs: BTreeMap<ShardRef, Read<PrimaryBinlogs>>,
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
            ObjectKey::new(ns, name),
            PodInfo {
                uid,
                resource_version: s(v, "/metadata/resourceVersion"),
                phase: s(v, "/status/phase"),
                created,
                ready: Readiness::of(v),
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
        let key = ObjectKey::new(s(v, "/metadata/namespace"), s(v, "/metadata/name"));
        let read = Cluster::read(v).and_then(|(key, c)| {
            if self.clusters.remove(&key).is_some() || self.unusable_clusters.contains(&key) {
                return Err(Unreadable::ClusterDuplicate {
                    cluster: key.to_string(),
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

    /// Adds what another read (of another namespace) found.
    pub fn merge(&mut self, part: Inventory) {
        // Destructured: a field added to the inventory cannot be forgotten here.
        let Inventory {
            snapshots,
            in_use,
            in_use_unknown,
            leases,
            clusters,
            unusable_clusters,
            unreadable,
            restored,
            pods,
            catch_up,
            not_replicating,
            binlogs,
        } = part;
        self.snapshots.extend(snapshots);
        self.in_use.extend(in_use);
        self.in_use_unknown.extend(in_use_unknown);
        self.leases.extend(leases);
        self.clusters.extend(clusters);
        self.unusable_clusters.extend(unusable_clusters);
        self.unreadable.extend(unreadable);
        self.restored.extend(restored);
        self.pods.extend(pods);
        self.catch_up.extend(catch_up);
        self.not_replicating.extend(not_replicating);
        self.binlogs.extend(binlogs);
    }

    /// Whether a Pending PVC whose data source cannot be read may take its snapshot from
    /// `namespace`.
    pub fn source_unknown_in(&self, namespace: &str) -> bool {
        self.in_use_unknown.contains(&Scope::Any)
            || self
                .in_use_unknown
                .contains(&Scope::Namespace(namespace.to_owned()))
    }

    /// Reads a dump file or pipe of at most [`MAX_DUMP_BYTES`] with the reader every
    /// program's offline command uses, then [`from_dump_text`](Self::from_dump_text).
    pub fn read_dump(path: &std::path::Path, now: Timestamp) -> Result<Self, DumpError> {
        Self::from_dump_text(&dump::read_text(path)?, now)
    }

    /// From a `kubectl get volumesnapshots,persistentvolumeclaims,leases,vitessclusters -A -o json`
    /// dump (a `List` of objects with their `kind`), one item at a time: only the inventory
    /// is kept in memory, never the whole parsed dump. Nesting deeper than serde_json's
    /// recursion limit (128) is an error, not a deep recursion.
    pub fn from_dump_text(text: &[u8], now: Timestamp) -> Result<Self, DumpError> {
        let mut inv = Self::default();
        dump::each_item(text, |_, it| inv.add_any(&it, now))?;
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

/// A LIST that failed (even on a later page): its namespace is left out of the plan.
#[derive(Debug, thiserror::Error)]
#[error("{kind}: {source}")]
pub struct ListError {
    /// What was listed, e.g. `VolumeSnapshots`.
    pub kind: &'static str,
    #[source]
    pub source: kube::Error,
}

/// What [`observe`] read: every namespace read completely, and those left out.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub inventory: Inventory,
    /// `namespace: why` of each namespace whose read failed: nothing there is deleted.
    pub unreadable: Vec<String>,
}

/// Reads the namespaces of the configured clusters (only `only_cluster`'s when given), one
/// paged LIST per kind and namespace, then asks vtctld how restored tablets catch up.
pub async fn observe(
    kube: &kube::Client,
    config: &Config,
    only_cluster: Option<&str>,
    now: Timestamp,
) -> Observed {
    let namespaces: BTreeSet<&str> = config
        .clusters
        .iter()
        .filter(|c| only_cluster.is_none_or(|o| o == c.name))
        .map(|c| c.namespace.as_str())
        .collect();
    let mut seen = Observed::default();
    for ns in namespaces {
        // Read apart and merged only when whole: a half-read namespace must not be planned.
        let mut part = Inventory::default();
        match observe_namespace(kube, ns, &mut part, now).await {
            Ok(()) => seen.inventory.merge(part),
            Err(e) => {
                tracing::error!(namespace = %ns, error = %e, "cannot read the namespace; nothing there is deleted");
                seen.unreadable.push(format!("{ns}: {e}"));
            }
        }
    }
    catch_up::observe_catch_up(kube, config, &mut seen.inventory).await;
    binlogs::observe_binlogs(kube, config, &mut seen.inventory).await;
    seen
}

/// Lists every page of `api`, folding each object into the inventory as it arrives (only
/// the inventory is kept, never all the objects).
async fn fold<K>(
    api: &Api<K>,
    lp: &ListParams,
    kind: &'static str,
    mut f: impl FnMut(&Value),
) -> Result<(), ListError>
where
    K: kube::Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    list::for_each(api, lp, |k| {
        f(&serde_json::to_value(&k).unwrap_or(Value::Null));
    })
    .await
    .map_err(|source| ListError { kind, source })
}

/// Reads one namespace into `part`; any failed LIST fails the whole namespace.
async fn observe_namespace(
    kube: &kube::Client,
    ns: &str,
    part: &mut Inventory,
    now: Timestamp,
) -> Result<(), ListError> {
    let all = ListParams::default();
    let managed = ListParams::default().labels(&format!("{MANAGED_BY}={MANAGED_BY_VTSNAP}"));
    let tablets = ListParams::default().labels(&format!(
        "{}={}",
        vtsnap_core::labels::COMPONENT,
        vtsnap_core::labels::COMPONENT_VTTABLET
    ));
    fold(
        &apis::volume_snapshots(kube, ns),
        &managed,
        "VolumeSnapshots",
        |v| part.add_snapshot(v),
    )
    .await?;
    fold(
        &Api::<PersistentVolumeClaim>::namespaced(kube.clone(), ns),
        &all,
        "PersistentVolumeClaims",
        |v| part.add_pvc(v),
    )
    .await?;
    fold(
        &Api::<Lease>::namespaced(kube.clone(), ns),
        &managed,
        "Leases",
        |v| part.add_lease(v, now),
    )
    .await?;
    fold(
        &apis::vitess_clusters(kube, ns),
        &all,
        "VitessClusters",
        |v| part.add_cluster(v),
    )
    .await?;
    fold(
        &Api::<Pod>::namespaced(kube.clone(), ns),
        &tablets,
        "Pods",
        |v| part.add_pod(v),
    )
    .await
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use vtsnap_core::input;

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
            "/dev/zero is not a regular file (a character device)"
        );
        let e = Inventory::read_dump(dir.path(), now()).unwrap_err();
        assert!(
            matches!(
                e,
                DumpError::Read(input::ReadError::NotAFile {
                    kind: "directory",
                    ..
                })
            ),
            "{e}"
        );
        let missing = dir.path().join("missing");
        let e = Inventory::read_dump(&missing, now()).unwrap_err();
        assert!(
            matches!(e, DumpError::Read(input::ReadError::Io { .. })),
            "{e}"
        );
        assert!(
            e.to_string()
                .starts_with(&format!("cannot read {}: ", missing.display())),
            "{e}"
        );
        // An item that is no value is named by its index.
        std::fs::write(&path, r#"{"items": [{}, 1e400]}"#).unwrap();
        let e = Inventory::read_dump(&path, now()).unwrap_err();
        assert!(matches!(e, DumpError::Item { index: 1, .. }), "{e}");
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
