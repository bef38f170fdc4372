//! The VolumeSnapshot schema vtsnap writes and reads (docs/design.md §4.3): names, labels,
//! annotations, phases, and what "cut" and "ready" mean (external-snapshotter v1).
//!
//! A snapshot is **cut** when `status.boundVolumeSnapshotContentName` and
//! `status.creationTime` are set and there is no `status.error`: the point in time is
//! taken, even if the upload (`readyToUse`) comes much later. It is usable only when
//! `readyToUse` is true (phase label `ready`).

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use serde_json::{Value, json};

use crate::config::Mode;
use crate::k8s_names::is_dns_subdomain;
use crate::labels::{MANAGED_BY, MANAGED_BY_VTSNAP};
use crate::naming::join_with_limit;
use crate::shard::ShardRef;

pub mod choice;
mod drill;
mod gtid;
mod read;
mod source;
pub use drill::{
    ANN_DRILL, CLOCK_SKEW, Discounted, DrillOf, DrillRecord, DrillRecordError, DrillResult,
    DrillSeen, MAX_REASON_BYTES, MAX_RECORD_BYTES, MAX_UID_BYTES, Rto, standing,
};
pub use gtid::{GtidError, GtidFlavor, parse_position};
pub use read::{Layout, ReadError, SnapshotRead, TimeProblem, VolumeSnapshot};
pub use source::{MAX_POOL_INDEX, SourceMismatch};

pub const GROUP: &str = "snapshot.storage.k8s.io";
pub const VERSION: &str = "v1";
pub const PLURAL: &str = "volumesnapshots";

// The shard labels (cluster, keyspace, shard) are every shard object's: `crate::shard`.
pub const LABEL_TABLET_UID: &str = "vtsnap.io/tablet-uid";
pub const LABEL_MODE: &str = "vtsnap.io/mode";
pub const LABEL_PHASE: &str = "vtsnap.io/phase";

pub const ANN_GTID_EXECUTED: &str = "vtsnap.io/gtid-executed";
pub const ANN_GTID_LOWER_BOUND: &str = "vtsnap.io/gtid-lower-bound";
pub const ANN_MYSQL_VERSION: &str = "vtsnap.io/mysql-version";
pub const ANN_MYSQL_FLAVOR: &str = "vtsnap.io/mysql-flavor";
pub const ANN_SOURCE_TABLET: &str = "vtsnap.io/source-tablet";
pub const ANN_SOURCE_PVC: &str = "vtsnap.io/source-pvc";
pub const ANN_SOURCE_NODE: &str = "vtsnap.io/source-node";
pub const ANN_CUT_TIME: &str = "vtsnap.io/cut-time";
pub const ANN_READY_TIME: &str = "vtsnap.io/ready-time";
pub const ANN_LAYOUT: &str = "vtsnap.io/layout";
/// Set by the GC when a tablet restored from the snapshot could not use it (its position
/// was purged from the primary's binlogs; a node-local volume that never provisioned):
/// why, in words. Restore injection never picks a snapshot that has it.
pub const ANN_UNUSABLE: &str = "vtsnap.io/unusable";
/// Set by the GC before it re-provisions a tablet restored from the snapshot that could
/// not catch up: `vtsnap.io/reprovisioned-<tablet UID %010d>`, the value in words. A
/// tablet named so is re-provisioned at most once and its recreated PVC gets no restore
/// (docs/design.md §5.7).
pub const ANN_REPROVISIONED_PREFIX: &str = "vtsnap.io/reprovisioned-";

/// The annotation that records the re-provisioning of tablet `uid`.
pub fn reprovisioned_key(uid: crate::naming::TabletUid) -> String {
    format!("{ANN_REPROVISIONED_PREFIX}{}", uid.padded())
}

/// The value of a [`reprovisioned_key`] annotation: the tablet's PVC that was to be
/// deleted (by UID: a record whose PVC still exists was not carried out), when, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reprovisioned {
    pub pvc_uid: String,
    pub at: Timestamp,
    pub why: String,
}

impl Reprovisioned {
    /// The longest value read: a record is a few hundred bytes.
    const MAX_BYTES: usize = 4096;

    pub fn render(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The recorded PVC UID, if `value` reads as a record.
    pub fn pvc_uid(value: &str) -> Option<String> {
        if value.len() > Self::MAX_BYTES {
            return None;
        }
        serde_json::from_str::<Self>(value)
            .ok()
            .map(|r| r.pvc_uid)
            .filter(|u| !u.is_empty())
    }
}
/// The volume layout version these snapshots have (the tablet directory of §2).
pub const LAYOUT_VERSION: &str = "1";

/// The phase label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "lowercase")]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Point in time taken; not yet usable.
    Cut,
    /// `readyToUse`: usable for provisioning.
    Ready,
    /// Known bad (never became ready, or failed).
    Failed,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn parse(s: &str) -> Option<Self> {
        s.parse().ok()
    }
}

/// The mode label's value.
pub fn mode_label(mode: Mode) -> &'static str {
    match mode {
        Mode::Cold => "cold",
        Mode::Online => "online",
    }
}

/// How many names one job tries when the one it wanted is taken (two snapshots of a
/// shard within one second: the stamp has second resolution).
pub const NAME_ATTEMPTS: u32 = 5;

/// `<cluster>-<keyspace>-<shardSafe>-<UTC yyyymmddhhmmss>`, with `-<attempt>` after the
/// stamp when `attempt > 0` (the plain name was already taken); a name that would be
/// invalid or too long is made valid and unique with the operator's hashed-join rule.
pub fn snapshot_name(r: &ShardRef, at: Timestamp, attempt: u32) -> String {
    let mut stamp = at.strftime("%Y%m%d%H%M%S").to_string();
    if attempt > 0 {
        stamp = format!("{stamp}-{attempt}");
    }
    let safe = r.shard.safe_name();
    let plain = format!("{}-{}-{safe}-{stamp}", r.cluster, r.keyspace);
    if is_dns_subdomain(&plain) {
        plain
    } else {
        join_with_limit(&[&r.cluster, &r.keyspace, &safe, &stamp], 253)
    }
}

/// What the snapshotter reports.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SnapshotStatus {
    pub bound_content: Option<String>,
    pub creation_time: Option<String>,
    pub ready_to_use: bool,
    pub restore_size: Option<String>,
    /// `status.error.message` (retried by the snapshot controller: never classified by text).
    pub error: Option<String>,
}

impl SnapshotStatus {
    /// Reads `status` of a VolumeSnapshot object.
    pub fn of(obj: &Value) -> Self {
        let s = &obj["status"];
        let text = |k: &str| {
            s.get(k)
                .and_then(Value::as_str)
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        Self {
            bound_content: text("boundVolumeSnapshotContentName"),
            creation_time: text("creationTime"),
            ready_to_use: s
                .get("readyToUse")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            restore_size: s
                .get("restoreSize")
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned)),
            error: s.get("error").filter(|e| !e.is_null()).map(|e| {
                e.get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("error")
                    .to_owned()
            }),
        }
    }

    /// The point in time is taken.
    pub fn is_cut(&self) -> bool {
        self.bound_content.is_some() && self.creation_time.is_some() && self.error.is_none()
    }

    /// Usable for provisioning.
    pub fn is_ready(&self) -> bool {
        self.is_cut() && self.ready_to_use
    }
}

/// Everything a new snapshot object records about its source.
#[derive(Debug, Clone)]
pub struct NewSnapshot<'a> {
    pub shard: &'a ShardRef,
    pub name: String,
    pub class: Option<&'a str>,
    pub source_pvc: &'a str,
    pub source_tablet: &'a str,
    pub source_uid: u32,
    pub source_node: &'a str,
    pub mode: &'a str,
    /// `(annotation, value)` of the position: exact (cold) or lower bound (online).
    pub gtid: (&'static str, &'a str),
    pub mysql_version: &'a str,
    pub mysql_flavor: &'a str,
    pub extra_labels: &'a BTreeMap<String, String>,
    pub extra_annotations: &'a BTreeMap<String, String>,
    /// `(name, uid)` of the VitessCluster, for `whenDeleted: Delete`.
    pub owner: Option<(&'a str, &'a str)>,
}

/// The VolumeSnapshot object to create (phase `cut` is set only once it is cut).
pub fn build(n: &NewSnapshot<'_>) -> Value {
    let mut labels: BTreeMap<String, String> = n.extra_labels.clone();
    labels.extend(n.shard.labels().map(|(k, v)| (k.to_owned(), v)));
    labels.extend([
        (MANAGED_BY.to_owned(), MANAGED_BY_VTSNAP.to_owned()),
        (LABEL_TABLET_UID.to_owned(), n.source_uid.to_string()),
        (LABEL_MODE.to_owned(), n.mode.to_owned()),
    ]);
    let mut ann: BTreeMap<String, String> = n.extra_annotations.clone();
    ann.extend([
        (n.gtid.0.to_owned(), n.gtid.1.to_owned()),
        (ANN_MYSQL_VERSION.to_owned(), n.mysql_version.to_owned()),
        (ANN_MYSQL_FLAVOR.to_owned(), n.mysql_flavor.to_owned()),
        (ANN_SOURCE_TABLET.to_owned(), n.source_tablet.to_owned()),
        (ANN_SOURCE_PVC.to_owned(), n.source_pvc.to_owned()),
        (ANN_SOURCE_NODE.to_owned(), n.source_node.to_owned()),
        (ANN_LAYOUT.to_owned(), LAYOUT_VERSION.to_owned()),
    ]);
    let mut obj = json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": "VolumeSnapshot",
        "metadata": {"name": n.name, "namespace": n.shard.namespace, "labels": labels, "annotations": ann},
        "spec": {"source": {"persistentVolumeClaimName": n.source_pvc}},
    });
    if let Some(class) = n.class {
        obj["spec"]["volumeSnapshotClassName"] = json!(class);
    }
    if let Some((name, uid)) = n.owner {
        obj["metadata"]["ownerReferences"] = json!([{
            "apiVersion": "planetscale.com/v2", "kind": "VitessCluster", "name": name, "uid": uid,
            "blockOwnerDeletion": false, "controller": false
        }]);
    }
    obj
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::LABEL_SHARD;

    fn shard(cluster: &str, keyspace: &str, shard: &str) -> ShardRef {
        ShardRef {
            cluster: cluster.into(),
            namespace: "vitess".into(),
            keyspace: keyspace.into(),
            shard: shard.parse().unwrap(),
        }
    }

    #[test]
    fn names_follow_the_documented_form() {
        let at: Timestamp = "2026-11-29T13:05:09Z".parse().unwrap();
        assert_eq!(
            snapshot_name(&shard("example", "commerce", "-80"), at, 0),
            "example-commerce-x-80-20261129130509"
        );
        assert_eq!(
            snapshot_name(&shard("example", "commerce", "-"), at, 0),
            "example-commerce-x-x-20261129130509"
        );
        // Keyspaces may hold characters a name cannot: made valid, and kept unique by a hash.
        let odd = snapshot_name(&shard("example", "Commerce_V2", "-"), at, 0);
        assert!(is_dns_subdomain(&odd), "{odd}");
        assert!(
            odd.starts_with("example-commerce-v2-x-x-20261129130509-"),
            "{odd}"
        );
        let long = snapshot_name(&shard("example", &"k".repeat(300), "-"), at, 0);
        assert!(long.len() <= 253 && long.contains("---"), "{long}");
    }

    #[test]
    fn a_later_attempt_gets_its_own_valid_name() {
        let at: Timestamp = "2026-11-29T13:05:09Z".parse().unwrap();
        let r = shard("example", "commerce", "-80");
        assert_eq!(
            snapshot_name(&r, at, 2),
            "example-commerce-x-80-20261129130509-2"
        );
        // Hashed names differ per attempt too (the hash covers the suffixed stamp).
        let long = shard("example", &"k".repeat(300), "-");
        let names: std::collections::BTreeSet<String> = (0..NAME_ATTEMPTS)
            .map(|a| snapshot_name(&long, at, a))
            .collect();
        assert_eq!(names.len(), NAME_ATTEMPTS as usize);
        assert!(names.iter().all(|n| is_dns_subdomain(n) && n.len() <= 253));
    }

    #[test]
    fn cut_and_ready_follow_the_snapshot_status() {
        let st = |v: Value| SnapshotStatus::of(&json!({"status": v}));
        assert!(!st(json!({})).is_cut());
        assert!(!st(json!({"boundVolumeSnapshotContentName": "c"})).is_cut());
        let cut = st(
            json!({"boundVolumeSnapshotContentName": "c", "creationTime": "2026-01-01T00:00:00Z", "readyToUse": false}),
        );
        assert!(cut.is_cut() && !cut.is_ready());
        let erred = st(
            json!({"boundVolumeSnapshotContentName": "c", "creationTime": "2026-01-01T00:00:00Z", "error": {"message": "retrying"}}),
        );
        assert!(!erred.is_cut());
        assert_eq!(erred.error.as_deref(), Some("retrying"));
        let ready = st(
            json!({"boundVolumeSnapshotContentName": "c", "creationTime": "t", "readyToUse": true, "restoreSize": "10Gi"}),
        );
        assert!(ready.is_ready());
        assert_eq!(ready.restore_size.as_deref(), Some("10Gi"));
    }

    #[test]
    fn the_object_carries_the_schema_and_the_owner_only_when_asked() {
        let r = shard("example", "commerce", "-80");
        let extra_l = BTreeMap::from([("team".to_owned(), "db".to_owned())]);
        let extra_a = BTreeMap::new();
        let mut n = NewSnapshot {
            shard: &r,
            name: "example-commerce-x-80-20261129130509".into(),
            class: Some("topolvm"),
            source_pvc: "pvc-1",
            source_tablet: "zone1-0000000101",
            source_uid: 101,
            source_node: "node-2",
            mode: "cold",
            gtid: (ANN_GTID_EXECUTED, "MariaDB/0-1-100"),
            mysql_version: "10.11.18",
            mysql_flavor: "mariadb",
            extra_labels: &extra_l,
            extra_annotations: &extra_a,
            owner: None,
        };
        let o = build(&n);
        assert_eq!(o["metadata"]["labels"][LABEL_SHARD], "x-80");
        assert_eq!(o["metadata"]["labels"][MANAGED_BY], "vtsnap");
        assert_eq!(o["metadata"]["labels"]["team"], "db");
        assert_eq!(
            o["metadata"]["annotations"][ANN_GTID_EXECUTED],
            "MariaDB/0-1-100"
        );
        assert_eq!(o["metadata"]["annotations"][ANN_LAYOUT], LAYOUT_VERSION);
        assert_eq!(o["spec"]["volumeSnapshotClassName"], "topolvm");
        assert_eq!(o["spec"]["source"]["persistentVolumeClaimName"], "pvc-1");
        assert!(o["metadata"].get("ownerReferences").is_none());
        n.owner = Some(("example", "uid-1"));
        assert_eq!(
            build(&n)["metadata"]["ownerReferences"][0]["kind"],
            "VitessCluster"
        );
    }
}
