//! The recovery's objects (docs/pitr.md §8): a PVC restored from the base snapshot and a
//! Pod that restores it, fetches the archive's binlogs, starts mysqld on it and replays
//! them up to the target. Pure builders: `run` makes them, `run --dry-run` prints them.
//!
//! Like a drill's Pod it never touches a tablet: its PVC is its own clone of the base,
//! mysqld has no network listener, no replication and no grant tables (only the Pod's own
//! containers share its socket), and it carries vtsnap's labels, never the operator's, so
//! no Service selects it. Unlike a drill's it mounts the shard's backup storage
//! (read-only), and what it leaves is the user's: the Pod serving the recovered data, or
//! a VolumeSnapshot cut of it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodSecurityContext;
use serde_json::{Value, json};
use vtsnap_core::labels::{MANAGED_BY, MYSQLD_CONTAINER};
use vtsnap_core::naming::{TabletUid, join_with_limit};
use vtsnap_core::pitr::chain::Target;
use vtsnap_core::restore_pod::JobOwner;
use vtsnap_core::restore_pod::throwaway::{self, SOCKET};
use vtsnap_core::shard::{LABEL_CLUSTER, LABEL_KEYSPACE, LABEL_SHARD, ShardRef};

/// The `app.kubernetes.io/managed-by` value of a recovery's objects.
pub const MANAGED_BY_PITR: &str = "vtsnap-pitr";
pub const LABEL_COMPONENT: &str = "app.kubernetes.io/component";
pub const COMPONENT_RECOVERY: &str = "recovery";
/// The base snapshot a recovery object restores.
pub const ANN_RECOVERY_OF: &str = "vtsnap.io/recovery-of";
/// The point it recovers to: `before <RFC 3339>` or `through <GTID set>`.
pub const ANN_RECOVERY_TARGET: &str = "vtsnap.io/recovery-target";
/// The base VolumeSnapshot as read, which the fetch container plans from (a downward API
/// file: the object may exceed an argument's 128 KiB, never an annotation's bound).
pub const ANN_RECOVERY_BASE: &str = "vtsnap.io/recovery-base";

pub const FETCH_CONTAINER: &str = "fetch";
pub const REPLAY_CONTAINER: &str = "replay";
const WORK_VOLUME: &str = "work";
const BASE_VOLUME: &str = "base";
const ARCHIVE_VOLUME: &str = "archive";
/// Where the binlogs, `replay.sh` and the result go (an `emptyDir`).
pub const WORK_DIR: &str = "/pitr";
/// The replay's result (docs/pitr.md §8), copied into the termination message.
pub const RESULT_FILE: &str = "/pitr/result.json";
const BASE_DIR: &str = "/vtsnap/recovery";
const BASE_FILE: &str = "/vtsnap/recovery/base.json";
/// The MySQL user the replay runs as over the socket (no grant tables: any name works).
const REPLAY_USER: &str = "vt_dba";

use vtsnap_core::pitr::run::After;

/// The install's settings for recoveries (the command line's flags).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// `vtsnap-restore`'s image (the first init container).
    pub restore_image: String,
    /// This program's image (the fetch init container).
    pub pitr_image: String,
    /// The tablet UID the restored directory is moved to (never a serving tablet's).
    pub recovery_uid: TabletUid,
    /// The server binary in the tablet's image.
    pub mysqld_command: String,
    pub mysqld_resources: Value,
    /// How long the Pod may run in all (a served one too: then it is gone).
    pub deadline_seconds: u64,
    /// How long the replay waits for mysqld to answer.
    pub ready_seconds: u64,
    /// Where the fetch container reads the shard's backup storage.
    pub archive: ArchiveSource,
    pub image_pull_secrets: Vec<String>,
}

/// The shard's backup storage as the recovery Pod reaches it.
#[derive(Debug, Clone, PartialEq)]
pub enum ArchiveSource {
    /// Vitess's `file` storage: a Pod volume source (`{"nfs": …}`,
    /// `{"persistentVolumeClaim": …}`), mounted read-only at `root`.
    Volume { root: String, source: Value },
    /// An object store's URL (`s3://bucket/root`), and the Secret whose keys become the
    /// fetch container's environment: the store's credentials and endpoint, as its SDK
    /// names them (`AWS_ACCESS_KEY_ID`, `AWS_ENDPOINT`, …).
    Store { url: String, secret: Option<String> },
}

/// `run`'s defaults, written once for the command line and for every caller.
pub mod defaults {
    /// One below the drill's, so that a drill and a recovery of one snapshot differ.
    pub const RECOVERY_UID: u32 = 999_999_998;
    pub const MYSQLD_RESOURCES: &str = vtsnap_core::cli::MYSQLD_RESOURCES;
    pub const READY_SECONDS: u64 = 600;
}

/// What a recovery carries of its base beyond its name, read at the edge
/// (`observe::base_facts`): the MySQL facts its cut repeats, and the object as the fetch
/// container reads it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BaseFacts {
    /// The base's MySQL flavor and version annotations, by key.
    pub mysql: Vec<(&'static str, String)>,
    /// The base as a one-item List (what `--objects` reads), without what only the API
    /// server needs: the managed fields may be most of an object's size.
    pub fetch_list: String,
}

/// One recovery: which base, to which point, into what.
#[derive(Debug, Clone, PartialEq)]
pub struct Recovery {
    pub shard: ShardRef,
    /// The base snapshot's name, and what the recovery carries of it.
    pub base: String,
    pub base_facts: BaseFacts,
    pub target: Target,
    /// Bytes the PVC asks for (the tablets' request, at least the snapshot's size).
    pub storage_bytes: u128,
    pub storage_class: Option<String>,
    /// The tablet's mysqld image: it has `mysqld`, `mysqlbinlog`, `mysql` and `bash`.
    pub mysqld_image: String,
    pub pod_security: Option<PodSecurityContext>,
    pub after: After,
    /// The Job `run` runs in: it owns the PVC and the Pod (a served recovery lives until
    /// the Job is deleted, or the Pod's deadline), never the cut snapshot.
    pub owner: Option<JobOwner>,
}

/// `vtsnap-pitr-<cluster>-<keyspace>-<shard>-<stamp>`, a valid name of at most 63
/// characters (a Pod's name is its hostname).
pub fn recovery_name(shard: &ShardRef, stamp: &str) -> String {
    join_with_limit(
        &[
            "vtsnap-pitr",
            &shard.cluster,
            &shard.keyspace,
            &shard.shard.safe_name(),
            stamp,
        ],
        63,
    )
}

/// `before <time>` or `through <set>`: the target as the annotation and report name it.
pub fn target_text(t: &Target) -> String {
    match t {
        Target::Before(at) => format!("before {at}"),
        Target::Through(g) => format!("through {g}"),
    }
}

/// The recovery's labels: vtsnap's, with the shard's (never the operator's).
pub fn labels(shard: &ShardRef) -> BTreeMap<&'static str, String> {
    BTreeMap::from([
        (MANAGED_BY, MANAGED_BY_PITR.to_owned()),
        (LABEL_COMPONENT, COMPONENT_RECOVERY.to_owned()),
        (LABEL_CLUSTER, shard.cluster.clone()),
        (LABEL_KEYSPACE, shard.keyspace.clone()),
        (LABEL_SHARD, shard.shard.safe_name()),
    ])
}

fn metadata(name: &str, r: &Recovery) -> Value {
    json!({
        "name": name,
        "namespace": r.shard.namespace,
        "labels": labels(&r.shard),
        "annotations": {ANN_RECOVERY_OF: r.base, ANN_RECOVERY_TARGET: target_text(&r.target)},
    })
}

/// [`metadata`] of what the run's Job owns (the PVC, the Pod).
fn owned_metadata(name: &str, r: &Recovery) -> Value {
    let mut m = metadata(name, r);
    if let Some(o) = &r.owner {
        o.mark(&r.shard.namespace, &mut m);
    }
    m
}

/// The PVC: a clone of the base, as a new tablet's would be.
pub fn pvc(name: &str, r: &Recovery) -> Value {
    let source =
        json!({"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": r.base});
    let mut spec = json!({
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": r.storage_bytes.to_string()}},
        "dataSource": source,
        "dataSourceRef": source,
    });
    if let Some(class) = &r.storage_class {
        spec["storageClassName"] = json!(class);
    }
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": owned_metadata(name, r), "spec": spec})
}

/// The fetch container's target flags.
fn target_args(t: &Target) -> [String; 2] {
    match t {
        Target::Before(at) => ["--to-time".into(), at.to_string()],
        Target::Through(g) => ["--to-gtid".into(), g.to_string()],
    }
}

/// What the replay container runs: wait for mysqld, replay (the script fetch wrote),
/// hand the result to the kubelet, and shut mysqld down cleanly for a cut.
fn replay_command(after: After, ready_seconds: u64) -> String {
    let ping = format!("mysqladmin --no-defaults -S {SOCKET} -u {REPLAY_USER}");
    let shutdown = match after {
        After::Serve => String::new(),
        After::Cut => format!("{ping} shutdown\n"),
    };
    format!(
        "set -euo pipefail\n\
         for _ in $(seq {ready_seconds}); do {ping} ping >/dev/null 2>&1 && break; sleep 1; done\n\
         {ping} ping >/dev/null\n\
         bash {WORK_DIR}/replay.sh\n\
         cat {RESULT_FILE} > /dev/termination-log\n\
         {shutdown}"
    )
}

/// The Pod: restore, fetch, then mysqld and the replay side by side.
pub fn pod(name: &str, r: &Recovery, s: &Settings) -> Value {
    let uid = s.recovery_uid;
    let work = json!({"name": WORK_VOLUME, "mountPath": WORK_DIR});
    let small =
        json!({"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "256Mi"}});
    // MySQL only: the archive is refused for MariaDB.
    let mysqld = throwaway::mysqld_container(
        MYSQLD_CONTAINER,
        (&r.mysqld_image, &s.mysqld_command),
        uid,
        "--skip-replica-start",
        &s.mysqld_resources,
    );
    let mut fetch = vec![
        "fetch".to_owned(),
        "--shard".into(),
        r.shard.to_string(),
        "--objects".into(),
        BASE_FILE.into(),
        "--snapshot".into(),
        r.base.clone(),
        "--dest".into(),
        WORK_DIR.into(),
        "--socket".into(),
        SOCKET.into(),
        "--user".into(),
        REPLAY_USER.into(),
        "--result-file".into(),
        RESULT_FILE.into(),
    ];
    fetch.extend(target_args(&r.target));
    let mut fetch_mounts = vec![
        work.clone(),
        json!({"name": BASE_VOLUME, "mountPath": BASE_DIR, "readOnly": true}),
    ];
    let mut fetch_env_from = Vec::new();
    let mut volumes = vec![
        json!({"name": throwaway::DATA_VOLUME, "persistentVolumeClaim": {"claimName": name}}),
        json!({"name": throwaway::SOCKET_VOLUME, "emptyDir": {}}),
        json!({"name": WORK_VOLUME, "emptyDir": {}}),
        json!({"name": BASE_VOLUME, "downwardAPI": {"items": [{
            "path": "base.json",
            "fieldRef": {"fieldPath": format!("metadata.annotations['{ANN_RECOVERY_BASE}']")},
        }]}}),
    ];
    match &s.archive {
        ArchiveSource::Volume { root, source } => {
            fetch.extend(["--archive-root".to_owned(), root.clone()]);
            fetch_mounts.push(json!({"name": ARCHIVE_VOLUME, "mountPath": root, "readOnly": true}));
            volumes.push(volume(ARCHIVE_VOLUME, source));
        }
        ArchiveSource::Store { url, secret } => {
            fetch.extend(["--archive-url".to_owned(), url.clone()]);
            if let Some(secret) = secret {
                fetch_env_from.push(json!({"secretRef": {"name": secret}}));
            }
        }
    }
    let mut spec = json!({
        "restartPolicy": "Never",
        "activeDeadlineSeconds": s.deadline_seconds,
        "automountServiceAccountToken": false,
        "enableServiceLinks": false,
        "securityContext": throwaway::pod_security(r.pod_security.as_ref()),
        "initContainers": [
            throwaway::restore_container(&s.restore_image, uid),
            {
                "name": FETCH_CONTAINER,
                "image": s.pitr_image,
                "args": fetch,
                "env": [{"name": "VTSNAP_LOG_FORMAT", "value": "json"}],
                "envFrom": fetch_env_from,
                "volumeMounts": fetch_mounts,
                "securityContext": throwaway::unprivileged(),
                "resources": small,
                "terminationMessagePolicy": "FallbackToLogsOnError",
            },
        ],
        "containers": [
            mysqld,
            {
                "name": REPLAY_CONTAINER,
                "image": r.mysqld_image,
                "command": ["bash", "-c", replay_command(r.after, s.ready_seconds)],
                "volumeMounts": [throwaway::socket_mount(), work],
                "securityContext": throwaway::unprivileged(),
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "512Mi"}},
                "terminationMessagePolicy": "FallbackToLogsOnError",
            },
        ],
        "volumes": volumes,
    });
    if let Some(secrets) = throwaway::pull_secrets(&s.image_pull_secrets) {
        spec["imagePullSecrets"] = secrets;
    }
    let mut meta = owned_metadata(name, r);
    meta["annotations"][ANN_RECOVERY_BASE] = json!(r.base_facts.fetch_list);
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
}

/// A Pod volume named `name` from a volume source (`{"nfs": …}`).
fn volume(name: &str, source: &Value) -> Value {
    let mut v = source.clone();
    if let Some(o) = v.as_object_mut() {
        o.insert("name".into(), json!(name));
    }
    v
}

/// The recovered volume's VolumeSnapshot: labelled as the recovery's (never as a
/// snapshot vtsnap took of a tablet, so no retention, choice or coverage counts it), with
/// the recovered server's set and the base's MySQL facts.
pub fn cut(name: &str, r: &Recovery, class: Option<&str>, gtid_executed: &str) -> Value {
    let mut meta = metadata(name, r);
    meta["annotations"][vtsnap_core::snapshot::ANN_GTID_EXECUTED] = json!(gtid_executed);
    for (key, value) in &r.base_facts.mysql {
        meta["annotations"][*key] = json!(value);
    }
    let mut spec = json!({"source": {"persistentVolumeClaimName": name}});
    if let Some(c) = class {
        spec["volumeSnapshotClassName"] = json!(c);
    }
    json!({
        "apiVersion": "snapshot.storage.k8s.io/v1",
        "kind": "VolumeSnapshot",
        "metadata": meta,
        "spec": spec,
    })
}

#[cfg(test)]
#[path = "recovery_tests.rs"]
mod tests;
