//! Decide what to do about the restores the admission webhook injected (PVCs annotated
//! `vtsnap.io/restored-from`) that failed, so that the next injection knows:
//!
//! - **A node-local restore that never provisions** (TopoLVM restores a snapshot only on
//!   its source node; a Pod scheduled elsewhere, or a node out of space, leaves the PVC
//!   Pending): its Pod Pending for longer than `restore.pendingTimeout`, its PVC never
//!   bound and without a volume → the snapshot is marked unusable, then the Pod and the
//!   PVC are deleted once (the operator recreates both; the webhook then picks another
//!   snapshot, or none). Nothing is lost: a PVC that never bound holds no data, a Pod
//!   that never left Pending never ran.
//! - **A restored tablet that cannot catch up**: its replication's last IO error is MySQL
//!   error 1236 (the primary no longer has the binlogs after the snapshot's position) →
//!   the snapshot is marked unusable; then, under `restore.onCatchUpFailure: reprovision`
//!   (the default), the tablet is re-provisioned once: its Pod and PVC deleted with UID
//!   and resourceVersion preconditions, so that the operator recreates them without the
//!   snapshot and vttablet restores from the regular backup. Never more than one tablet
//!   per shard a run, never a serving (Ready) tablet, never on an unknown readiness or an
//!   unbound PVC; a replicating tablet is never the primary.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use vtsnap_core::config::{CatchUpFailure, Config, resolve_in};
use vtsnap_core::naming::{KeyRange, TabletAlias};
use vtsnap_core::reconcile::ObjectKey;

use crate::observe::{Inventory, Readiness};

/// Why a snapshot is marked unusable (the JSON `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnusableReason {
    NodeLocalRestoreStuck,
    BinlogsPurged,
    /// The shard's primary purged binlogs a restore from it needs (before any restore).
    NotCovered,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MarkUnusable {
    pub namespace: String,
    pub snapshot: String,
    pub reason: UnusableReason,
    /// What happened, in words (the annotation's value), at most [`MAX_MARK_BYTES`].
    pub message: String,
}

/// The longest mark written: a GTID set of 40,000 intervals is 1.7 MB, and the API server
/// refuses annotations over 256 KiB in all; the start of the set says enough.
pub const MAX_MARK_BYTES: usize = 2048;

impl MarkUnusable {
    /// A mark whose message is cut to [`MAX_MARK_BYTES`] (on a character boundary,
    /// saying how long it was).
    pub fn new(namespace: &str, snapshot: &str, reason: UnusableReason, message: &str) -> Self {
        let message = if message.len() <= MAX_MARK_BYTES {
            message.to_owned()
        } else {
            let tail = format!("… (cut from {} bytes)", message.len());
            let head = vtsnap_core::k8s_names::cut_to_bytes(message, MAX_MARK_BYTES - tail.len());
            format!("{head}{tail}")
        };
        Self {
            namespace: namespace.to_owned(),
            snapshot: snapshot.to_owned(),
            reason,
            message,
        }
    }
}

/// A stuck restore to delete: the Pod, then the PVC (each only if its UID is still this).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unstick {
    pub namespace: String,
    pub pod: String,
    pub pod_uid: String,
    /// Deleted only if unchanged since it was read (not started since).
    pub pod_resource_version: String,
    pub pvc: String,
    pub pvc_uid: String,
    pub pvc_resource_version: String,
    pub snapshot: String,
    pub node: String,
    pub pending_seconds: i64,
}

/// A restored tablet that cannot catch up, to re-provision: the Pod, then the PVC (each
/// only if unchanged since it was read), after its snapshot is marked unusable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reprovision {
    pub namespace: String,
    pub pod: String,
    pub pod_uid: String,
    pub pod_resource_version: String,
    pub pvc: String,
    pub pvc_uid: String,
    pub pvc_resource_version: String,
    pub snapshot: String,
    /// The tablet: recorded on `snapshot` before anything is deleted, so that it is
    /// re-provisioned at most once and its recreated PVC gets no restore.
    pub tablet: TabletAlias,
    /// The replication error that shows it cannot catch up.
    pub io_error: String,
}

/// A restored tablet that cannot catch up and is left as it is: it was re-provisioned
/// once already (docs/design.md §5.7), or it carries no tablet identity to record.
/// Reported, with a Warning Event; never a loop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotReprovisioned {
    pub namespace: String,
    pub pvc: String,
    pub snapshot: String,
    pub why: String,
}

/// A restored tablet whose replication was never started: vttablet serves it but leaves
/// replication to VTOrc (docs/design.md §2), so without VTOrc it stays stopped and
/// NotReady. Reported, with a Warning Event; vtsnap does not start it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotReplicating {
    pub namespace: String,
    pub pvc: String,
    pub snapshot: String,
    /// The tablet alias, or the PVC's name when its labels name none.
    pub tablet: String,
}

impl NotReplicating {
    /// What the Warning Event and the report say.
    pub fn message(&self) -> String {
        format!(
            "tablet {} (PVC {}) restored from {} does not replicate and reports no error: \
             nothing started its replication. VTOrc starts it; without VTOrc run \
             `vtctldclient ReparentTablet {}` then `vtctldclient StartReplication {}`",
            self.tablet, self.pvc, self.snapshot, self.tablet, self.tablet
        )
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RestorePlan {
    pub mark_unusable: Vec<MarkUnusable>,
    pub unstick: Vec<Unstick>,
    pub reprovision: Vec<Reprovision>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_reprovisioned: Vec<NotReprovisioned>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_replicating: Vec<NotReplicating>,
}

/// Whether a replication IO error is MySQL's (and MariaDB's) error 1236,
/// `ER_MASTER_FATAL_ERROR_READING_BINLOG`: "Got fatal error 1236 from master when reading
/// data from binary log: …purged binary logs…" / "…Could not find GTID state…".
pub fn is_binlog_purged(io_error: &str) -> bool {
    io_error.to_ascii_lowercase().contains("error 1236")
}

/// Plans for the clusters of `config` (all, or only `only_cluster`).
pub fn plan_restores(
    config: &Config,
    inv: &Inventory,
    now: Timestamp,
    only_cluster: Option<&str>,
) -> RestorePlan {
    let mut out = RestorePlan::default();
    let mut marked: BTreeSet<ObjectKey> = BTreeSet::new();
    // Whether each snapshot is marked unusable already.
    let snapshots: BTreeMap<ObjectKey, bool> = inv
        .snapshots
        .iter()
        .map(|s| (ObjectKey::new(&s.namespace, &s.name), s.unusable))
        .collect();
    let mut mark = |out: &mut RestorePlan, ns: &str, snapshot: &str, reason, message: String| {
        let key = ObjectKey::new(ns, snapshot);
        let usable = snapshots.get(&key) == Some(&false);
        if usable && marked.insert(key) {
            out.mark_unusable
                .push(MarkUnusable::new(ns, snapshot, reason, &message));
        }
    };
    // One re-provisioning per shard a run: the first by PVC name.
    let mut reprovisioned: BTreeSet<(String, String, String, String)> = BTreeSet::new();
    for r in &inv.restored {
        if only_cluster.is_some_and(|o| o != r.cluster) {
            continue;
        }
        let Some(cl) = config.cluster_in(&r.namespace, &r.cluster) else {
            continue;
        };
        let Ok(shard) = KeyRange::from_safe_name(&r.shard) else {
            continue;
        };
        let policy = resolve_in(cl, &r.keyspace, &shard.to_string()).restore;
        // The tablet's PVC and its Pod share this name.
        let key = ObjectKey::new(&r.namespace, &r.name);
        if inv.not_replicating.contains(&key) {
            out.not_replicating.push(NotReplicating {
                namespace: r.namespace.clone(),
                pvc: r.name.clone(),
                snapshot: r.snapshot.clone(),
                tablet: r
                    .tablet
                    .as_ref()
                    .map_or_else(|| r.name.clone(), ToString::to_string),
            });
        }
        if let Some(io) = inv.catch_up.get(&key)
            && is_binlog_purged(io)
        {
            let tablet = r
                .tablet
                .as_ref()
                .map_or_else(|| r.name.clone(), ToString::to_string);
            mark(
                &mut out,
                &r.namespace,
                &r.snapshot,
                UnusableReason::BinlogsPurged,
                format!("tablet {tablet} restored from it cannot catch up: {io}"),
            );
            let shard_key = (
                r.namespace.clone(),
                r.cluster.clone(),
                r.keyspace.clone(),
                r.shard.clone(),
            );
            // Its snapshot still exists (usable or not): a tablet restored from one the
            // retention has deleted since is an ordinary replica by now.
            let snapshot_present =
                snapshots.contains_key(&ObjectKey::new(&r.namespace, &r.snapshot));
            // Once per tablet, across the operator's recreation of its PVC: a record on
            // any snapshot of the shard names it.
            let once = match &r.tablet {
                None => Err(
                    "its PVC has no tablet identity (cell and tablet-uid labels) to record"
                        .to_owned(),
                ),
                // A record naming this very PVC was not carried out (its delete failed):
                // the tablet may be re-provisioned still.
                Some(t) => match inv.snapshots.iter().find(|s| {
                    s.namespace == r.namespace
                        && s.cluster == r.cluster
                        && s.keyspace == r.keyspace
                        && s.shard == shard
                        && s.reprovisioned
                            .get(&t.uid)
                            .is_some_and(|pvc| pvc.as_deref() != Some(r.uid.as_str()))
                }) {
                    Some(s) => Err(format!(
                        "tablet {t} was re-provisioned once already (recorded on snapshot {}): it is left for a person",
                        s.name
                    )),
                    None => Ok(t.clone()),
                },
            };
            if policy.on_catch_up_failure == CatchUpFailure::Reprovision
                && snapshot_present
                && let Err(why) = &once
            {
                out.not_reprovisioned.push(NotReprovisioned {
                    namespace: r.namespace.clone(),
                    pvc: r.name.clone(),
                    snapshot: r.snapshot.clone(),
                    why: why.clone(),
                });
            }
            if policy.on_catch_up_failure == CatchUpFailure::Reprovision
                && snapshot_present
                && let Ok(tablet) = once
                && !reprovisioned.contains(&shard_key)
                && let Some(pod) = inv.pods.get(&key)
                && pod.ready == Readiness::NotReady
                && r.bound
                && !r.uid.is_empty()
                && !r.resource_version.is_empty()
                && !pod.resource_version.is_empty()
            {
                reprovisioned.insert(shard_key);
                out.reprovision.push(Reprovision {
                    namespace: r.namespace.clone(),
                    pod: r.name.clone(),
                    pod_uid: pod.uid.clone(),
                    pod_resource_version: pod.resource_version.clone(),
                    pvc: r.name.clone(),
                    pvc_uid: r.uid.clone(),
                    pvc_resource_version: r.resource_version.clone(),
                    snapshot: r.snapshot.clone(),
                    tablet,
                    io_error: io.clone(),
                });
            }
        }
        let (Some(node), true) = (&r.node, policy.node_local) else {
            continue;
        };
        if r.bound || r.has_volume {
            continue;
        }
        let Some(pod) = inv.pods.get(&key) else {
            continue;
        };
        let Some(created) = pod.created.filter(|_| pod.phase == "Pending") else {
            continue;
        };
        let pending = now.as_second() - created.as_second();
        let limit = i64::try_from(policy.pending_timeout.get().as_secs()).unwrap_or(i64::MAX);
        if pending <= limit {
            continue;
        }
        mark(
            &mut out,
            &r.namespace,
            &r.snapshot,
            UnusableReason::NodeLocalRestoreStuck,
            format!(
                "a restore on node {node} did not provision: Pod {} Pending for {pending}s with PVC {} unbound",
                r.name, r.name
            ),
        );
        out.unstick.push(Unstick {
            namespace: r.namespace.clone(),
            pod: r.name.clone(),
            pod_uid: pod.uid.clone(),
            pod_resource_version: pod.resource_version.clone(),
            pvc: r.name.clone(),
            pvc_uid: r.uid.clone(),
            pvc_resource_version: r.resource_version.clone(),
            snapshot: r.snapshot.clone(),
            node: node.clone(),
            pending_seconds: pending,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    const NOW: &str = "2026-12-01T12:00:00Z";
    const BASE: &str = "clusters:\n- name: example\n  namespace: vitess\n";

    fn config(extra: &str) -> Config {
        Config::from_yaml(&format!("{BASE}{extra}")).unwrap()
    }

    fn node_local() -> Config {
        config("  restore: {enabled: true, nodeLocal: true, pendingTimeout: 10m}\n")
    }

    fn now() -> Timestamp {
        NOW.parse().unwrap()
    }

    fn snapshot(name: &str, unusable: bool) -> Value {
        let mut v = json!({"kind": "VolumeSnapshot", "metadata": {"name": name, "namespace": "vitess",
            "creationTimestamp": "2026-12-01T10:00:00Z", "labels": {
            "app.kubernetes.io/managed-by": "vtsnap", "vtsnap.io/cluster": "example",
            "vtsnap.io/keyspace": "commerce", "vtsnap.io/shard": "x-x", "vtsnap.io/phase": "ready"},
            "annotations": {}}});
        if unusable {
            v["metadata"]["annotations"]["vtsnap.io/unusable"] = json!("earlier");
        }
        v
    }

    fn pvc(name: &str, phase: &str) -> Value {
        json!({"kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "vitess", "uid": format!("pvc-uid-{name}"), "resourceVersion": "5",
            "labels": {"planetscale.com/component": "vttablet", "planetscale.com/cluster": "example",
                "planetscale.com/keyspace": "commerce", "planetscale.com/shard": "x-x",
                "planetscale.com/cell": "zone1", "planetscale.com/tablet-uid": "0000000104"},
            "annotations": {"vtsnap.io/restored-from": "s-1", "vtsnap.io/restore-node": "node-2"}},
            "spec": {"dataSourceRef": {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "s-1"}},
            "status": {"phase": phase}})
    }

    fn pod(name: &str, phase: &str, created: &str) -> Value {
        json!({"kind": "Pod", "metadata": {"name": name, "namespace": "vitess", "uid": format!("pod-uid-{name}"), "resourceVersion": "7",
            "creationTimestamp": created, "labels": {"planetscale.com/component": "vttablet"}},
            "status": {"phase": phase}})
    }

    fn inventory(objs: &[Value]) -> Inventory {
        let mut inv = Inventory::default();
        for o in objs {
            inv.add_any(o, now());
        }
        inv
    }

    #[test]
    fn a_node_local_restore_pending_past_its_timeout_is_unstuck_once_and_its_snapshot_marked() {
        let inv = inventory(&[
            snapshot("s-1", false),
            pvc("t4", "Pending"),
            pod("t4", "Pending", "2026-12-01T11:49:59Z"),
        ]);
        let p = plan_restores(&node_local(), &inv, now(), None);
        assert_eq!(
            p.unstick,
            [Unstick {
                namespace: "vitess".into(),
                pod: "t4".into(),
                pod_uid: "pod-uid-t4".into(),
                pod_resource_version: "7".into(),
                pvc: "t4".into(),
                pvc_uid: "pvc-uid-t4".into(),
                pvc_resource_version: "5".into(),
                snapshot: "s-1".into(),
                node: "node-2".into(),
                pending_seconds: 601,
            }]
        );
        assert_eq!(p.mark_unusable.len(), 1);
        let m = &p.mark_unusable[0];
        assert_eq!(
            (m.snapshot.as_str(), m.reason),
            ("s-1", UnusableReason::NodeLocalRestoreStuck)
        );
        assert!(
            m.message.contains("node node-2") && m.message.contains("601s"),
            "{}",
            m.message
        );
        // Exactly the timeout is not past it.
        let inv = inventory(&[
            snapshot("s-1", false),
            pvc("t4", "Pending"),
            pod("t4", "Pending", "2026-12-01T11:50:00Z"),
        ]);
        assert_eq!(
            plan_restores(&node_local(), &inv, now(), None),
            RestorePlan::default()
        );
        // Already marked: deleted again only if still stuck, not marked twice.
        let inv = inventory(&[
            snapshot("s-1", true),
            pvc("t4", "Pending"),
            pod("t4", "Pending", "2026-12-01T11:00:00Z"),
        ]);
        let p = plan_restores(&node_local(), &inv, now(), None);
        assert_eq!((p.unstick.len(), p.mark_unusable.len()), (1, 0));
    }

    #[test]
    fn nothing_that_may_hold_data_or_be_running_is_unstuck() {
        let old = "2026-12-01T10:00:00Z";
        let cases: Vec<(&str, Vec<Value>, Config)> = vec![
            (
                "bound",
                vec![
                    snapshot("s-1", false),
                    pvc("t4", "Bound"),
                    pod("t4", "Pending", old),
                ],
                node_local(),
            ),
            (
                "has a volume",
                vec![
                    snapshot("s-1", false),
                    {
                        let mut p = pvc("t4", "Pending");
                        p["spec"]["volumeName"] = json!("pv-1");
                        p
                    },
                    pod("t4", "Pending", old),
                ],
                node_local(),
            ),
            (
                "pod running",
                vec![
                    snapshot("s-1", false),
                    pvc("t4", "Pending"),
                    pod("t4", "Running", old),
                ],
                node_local(),
            ),
            (
                "no pod",
                vec![snapshot("s-1", false), pvc("t4", "Pending")],
                node_local(),
            ),
            (
                "pod without a creation time",
                vec![snapshot("s-1", false), pvc("t4", "Pending"), {
                    let mut p = pod("t4", "Pending", old);
                    p["metadata"]
                        .as_object_mut()
                        .unwrap()
                        .remove("creationTimestamp");
                    p
                }],
                node_local(),
            ),
            (
                "not node-local",
                vec![
                    snapshot("s-1", false),
                    pvc("t4", "Pending"),
                    pod("t4", "Pending", old),
                ],
                config("  restore: {enabled: true}\n"),
            ),
            (
                "no restore node",
                vec![
                    snapshot("s-1", false),
                    {
                        let mut p = pvc("t4", "Pending");
                        p["metadata"]["annotations"]
                            .as_object_mut()
                            .unwrap()
                            .remove("vtsnap.io/restore-node");
                        p
                    },
                    pod("t4", "Pending", old),
                ],
                node_local(),
            ),
            (
                "not restored",
                vec![
                    snapshot("s-1", false),
                    {
                        let mut p = pvc("t4", "Pending");
                        p["metadata"]["annotations"] = json!({});
                        p
                    },
                    pod("t4", "Pending", old),
                ],
                node_local(),
            ),
            (
                "cluster not configured",
                vec![
                    snapshot("s-1", false),
                    {
                        let mut p = pvc("t4", "Pending");
                        p["metadata"]["labels"]["planetscale.com/cluster"] = json!("other");
                        p
                    },
                    pod("t4", "Pending", old),
                ],
                node_local(),
            ),
        ];
        for (what, objs, cfg) in cases {
            let p = plan_restores(&cfg, &inventory(&objs), now(), None);
            assert_eq!(p, RestorePlan::default(), "{what}");
        }
        // Another cluster only (`--cluster`).
        let inv = inventory(&[
            snapshot("s-1", false),
            pvc("t4", "Pending"),
            pod("t4", "Pending", old),
        ]);
        assert_eq!(
            plan_restores(&node_local(), &inv, now(), Some("other")),
            RestorePlan::default()
        );
        assert_eq!(
            plan_restores(&node_local(), &inv, now(), Some("example"))
                .unstick
                .len(),
            1
        );
    }

    #[test]
    fn a_tablet_that_cannot_catch_up_marks_its_snapshot_once() {
        let mut inv = inventory(&[
            snapshot("s-1", false),
            pvc("t4", "Bound"),
            pvc("t5", "Bound"),
        ]);
        let purged = "error reconnecting to source: Got fatal error 1236 from master when reading data from binary log: 'Cannot replicate because the master purged required binary logs.'";
        inv.catch_up
            .insert(ObjectKey::new("vitess", "t4"), purged.into());
        inv.catch_up
            .insert(ObjectKey::new("vitess", "t5"), purged.into());
        let p = plan_restores(&config("  restore: {enabled: true}\n"), &inv, now(), None);
        assert!(p.unstick.is_empty());
        assert_eq!(p.mark_unusable.len(), 1, "{p:?}");
        let m = &p.mark_unusable[0];
        assert_eq!(m.reason, UnusableReason::BinlogsPurged);
        assert!(
            m.message
                .starts_with("tablet zone1-0000000104 restored from it cannot catch up"),
            "{}",
            m.message
        );
        // Another error, or a snapshot already marked or gone: nothing.
        for (io, snap) in [
            ("error 2003: can't connect", snapshot("s-1", false)),
            (purged, snapshot("s-1", true)),
            (purged, snapshot("s-9", false)),
        ] {
            let mut inv = inventory(&[snap, pvc("t4", "Bound")]);
            inv.catch_up
                .insert(ObjectKey::new("vitess", "t4"), io.into());
            assert_eq!(
                plan_restores(&config(""), &inv, now(), None).mark_unusable,
                [],
                "{io}"
            );
        }
        assert!(is_binlog_purged("Got fatal ERROR 1236 from master"));
        assert!(!is_binlog_purged("error 1062: Duplicate entry"));
    }

    #[test]
    fn a_restored_tablet_nothing_started_is_named_with_what_to_do() {
        let mut inv = inventory(&[snapshot("s-1", false), pvc("t4", "Bound")]);
        assert!(
            plan_restores(&config(""), &inv, now(), None)
                .not_replicating
                .is_empty()
        );
        inv.not_replicating.insert(ObjectKey::new("vitess", "t4"));
        let p = plan_restores(&config(""), &inv, now(), None);
        assert_eq!(
            p.not_replicating,
            [NotReplicating {
                namespace: "vitess".into(),
                pvc: "t4".into(),
                snapshot: "s-1".into(),
                tablet: "zone1-0000000104".into(),
            }]
        );
        let m = p.not_replicating[0].message();
        assert!(
            m.contains("ReparentTablet zone1-0000000104")
                && m.contains("StartReplication zone1-0000000104"),
            "{m}"
        );
        // another cluster's, or one the run was not asked about: not named
        assert!(
            plan_restores(&config(""), &inv, now(), Some("other"))
                .not_replicating
                .is_empty()
        );
        assert!(p.mark_unusable.is_empty() && p.reprovision.is_empty());
    }

    #[test]
    fn one_tablet_per_shard_is_reprovisioned_a_run_and_only_a_not_ready_one() {
        let not_ready = |name: &str| {
            let mut p = pod(name, "Running", "2026-12-01T11:00:00Z");
            p["status"]["conditions"] = json!([{"type": "Ready", "status": "False"}]);
            p
        };
        let mut inv = inventory(&[
            snapshot("s-1", false),
            pvc("t4", "Bound"),
            pvc("t5", "Bound"),
            not_ready("t4"),
            not_ready("t5"),
        ]);
        for t in ["t4", "t5"] {
            inv.catch_up.insert(
                ObjectKey::new("vitess", t),
                "Got fatal error 1236 from master".into(),
            );
        }
        let p = plan_restores(&config(""), &inv, now(), None);
        let names: Vec<&str> = p.reprovision.iter().map(|r| r.pvc.as_str()).collect();
        assert_eq!(names, ["t4"], "{p:?}");
        assert_eq!(p.reprovision[0].pod_resource_version, "7");
        assert_eq!(p.reprovision[0].pvc_uid, "pvc-uid-t4");
        assert_eq!(p.mark_unusable.len(), 1, "the snapshot is marked once");
        // a Ready (serving) tablet, or an unbound PVC, is not re-provisioned
        let mut ready = not_ready("t4");
        ready["status"]["conditions"][0]["status"] = json!("True");
        let mut inv = inventory(&[snapshot("s-1", false), pvc("t4", "Bound"), ready]);
        inv.catch_up.insert(
            ObjectKey::new("vitess", "t4"),
            "Got fatal error 1236".into(),
        );
        assert!(
            plan_restores(&config(""), &inv, now(), None)
                .reprovision
                .is_empty()
        );
        let mut inv = inventory(&[snapshot("s-1", false), pvc("t4", "Lost"), not_ready("t4")]);
        inv.catch_up.insert(
            ObjectKey::new("vitess", "t4"),
            "Got fatal error 1236".into(),
        );
        assert!(
            plan_restores(&config(""), &inv, now(), None)
                .reprovision
                .is_empty()
        );
        // A snapshot already unusable (a PVC forced onto it by hand): re-provisioned, not
        // marked again. A snapshot the retention deleted since: neither.
        for (snap, reprovisioned) in [(snapshot("s-1", true), 1), (snapshot("s-9", false), 0)] {
            let mut inv = inventory(&[snap, pvc("t4", "Bound"), not_ready("t4")]);
            inv.catch_up.insert(
                ObjectKey::new("vitess", "t4"),
                "Got fatal error 1236".into(),
            );
            let p = plan_restores(&config(""), &inv, now(), None);
            assert_eq!(
                (p.reprovision.len(), p.mark_unusable.len()),
                (reprovisioned, 0),
                "{p:?}"
            );
        }
    }
}
