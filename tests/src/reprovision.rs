//! Catch-up failure and its fallback in the lab (docs/design.md §5.7): a replica forced by
//! hand onto a snapshot its primary can no longer catch up from, and what happens once
//! `vtsnap-gc` has deleted that tablet's Pod and PVC.
//!
//! FAKES, because neither runs here: vitess-operator (it makes the Pod and the PVC again
//! under their names) and vttablet's restore from the regular backup (a logical dump of
//! the primary, taken with its GTID position, stands in for the backup). Restore
//! injection's rule is the real one (`vtsnap_core::snapshot::choice::choose`).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use vtsnap_core::config::{Config, resolve_in};
use vtsnap_core::mysql_version::Series;
use vtsnap_core::restored::ANN_RESTORED_FROM;
use vtsnap_core::snapshot::choice::{Rejection, choose};
use vtsnap_core::snapshot::{GROUP, VolumeSnapshot};
use vtsnap_core::vtctld::messages::replicationdata::Status;
use vtsnap_core::vtctld::messages::topodata::TabletType;
use vtsnap_testkit::layout::{MOUNT, SOCKET, TabletLayout};
use vtsnap_testkit::mariadb::MariaDb;
use vtsnap_testkit::operator_objects::{OperatorTablet, operator_shard, pvc_template};

use crate::provision::{start_server, wait_for_gtid};
use crate::shard::{DATABASE, Lab, free_port, until};

/// MySQL's and MariaDB's `ER_MASTER_FATAL_ERROR_READING_BINLOG`.
const BINLOG_PURGED: &str = "1236";

/// A tablet whose replica cannot catch up, and its server.
#[derive(Debug)]
pub struct ForcedTablet {
    pub tablet: OperatorTablet,
    pub db: Arc<MariaDb>,
    /// The replica's `Last_IO_Error`, as mysqld reported it.
    pub io_error: String,
}

/// What restore injection's rule would give a new tablet of the lab's shard now: the snapshot's
/// name, or every snapshot with the reason it was passed over.
pub async fn offered(lab: &Lab) -> Result<String, Vec<(String, Rejection)>> {
    let cfg = Config::from_yaml(&lab.config("")).unwrap();
    let cluster = cfg.cluster_in(lab.cp.namespace(), "example").unwrap();
    let policy = resolve_in(cluster, "commerce", "-").restore;
    let version = lab.primary().value("SELECT VERSION()").await;
    let series = Series::parse(&version).unwrap_or_else(|| panic!("version {version:?}"));
    let list = vtsnap_core::reconcile::apis::volume_snapshots(&lab.cp.client(), lab.cp.namespace())
        .list(&ListParams::default())
        .await
        .unwrap();
    let reads: Vec<_> = list
        .items
        .iter()
        .map(|o| VolumeSnapshot::read(&serde_json::to_value(o).unwrap()))
        .collect();
    choose(&reads, series, &policy, u128::MAX, Timestamp::now()).map(|c| c.name)
}

/// The new tablet of the test: replica pool, index 4.
pub fn new_tablet() -> OperatorTablet {
    operator_shard().tablet("replica", 4)
}

fn tablet_pvc(lab: &Lab, tablet: &OperatorTablet) -> Value {
    let mut pvc = tablet.pvc(&pvc_template("10Gi"));
    pvc["spec"]["storageClassName"] = json!(lab.cp.storage_class());
    pvc
}

/// The tablet's Pod, Running, `Ready` or not, as kubelet would report it.
pub async fn create_pod(lab: &Lab, tablet: &OperatorTablet, ready: bool) {
    let api: Api<Pod> = Api::namespaced(lab.cp.client(), lab.cp.namespace());
    let mut pod = tablet.pod();
    pod["metadata"]["namespace"] = json!(lab.cp.namespace());
    let pod: Pod = serde_json::from_value(pod).unwrap();
    api.create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("create pod {}: {e}", tablet.name));
    let status = if ready { "True" } else { "False" };
    let patch = json!({"status": {"phase": "Running",
        "conditions": [{"type": "Ready", "status": status}]}});
    api.patch_status(&tablet.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("status of pod {}: {e}", tablet.name));
}

/// Registers the tablet with the fake vtctld (a replica, its replication read from `db`).
fn register(lab: &Lab, tablet: &OperatorTablet, db: &Arc<MariaDb>) {
    lab.vtctld.with(|s| {
        let shard = s
            .shards
            .get_mut(&("commerce".to_owned(), "-".to_owned()))
            .unwrap();
        let mut t = shard
            .tablets
            .values()
            .find(|t| t.tablet.r#type == TabletType::Replica as i32)
            .unwrap()
            .clone();
        t.tablet.alias = Some((&tablet.alias).into());
        t.tablet.hostname = format!("{}.vttablet", tablet.name);
        t.status = Some(Status {
            using_gtid: true,
            auto_position: true,
            ..t.status.unwrap_or_default()
        });
        shard.tablets.insert(tablet.alias.to_string(), t);
    });
    lab.backend.insert(tablet.alias.clone(), db);
}

/// A person forces a new tablet's PVC onto `snapshot` (the webhook would not), and
/// starts its replica from the restored position: it stops with error 1236.
pub async fn force_onto(lab: &Lab, snapshot: &str) -> ForcedTablet {
    let tablet = new_tablet();
    let source = json!({"apiGroup": GROUP, "kind": "VolumeSnapshot", "name": snapshot});
    let mut pvc = tablet_pvc(lab, &tablet);
    pvc["metadata"]["annotations"] = json!({ANN_RESTORED_FROM: snapshot});
    pvc["spec"]["dataSource"] = source.clone();
    pvc["spec"]["dataSourceRef"] = source;
    let volume = lab.cp.create_pvc(pvc).await;
    vtsnap_restore::run(&vtsnap_restore::Options {
        vtdataroot: volume.join("vtdataroot"),
        tablet_uid: tablet.alias.uid,
        server_id: None,
        dry_run: false,
    })
    .unwrap_or_else(|e| panic!("vtsnap-restore {} from {snapshot}: {e}", tablet.alias));
    let (db, _) = start_server(lab, &volume, tablet.alias.uid).await;
    let from = db.value("SELECT @@gtid_binlog_pos").await;
    lab.replicate(&db, lab.primary_port(), &from).await;
    until(
        "the forced replica's IO thread stops with error 1236",
        Duration::from_secs(120),
        || {
            let db = db.clone();
            async move {
                db.replica_status().await.is_ok_and(|s| {
                    s.get("Last_IO_Errno").map(String::as_str) == Some(BINLOG_PURGED)
                })
            }
        },
    )
    .await;
    let io_error = db.replica_status().await.unwrap()["Last_IO_Error"].clone();
    lab.timeline.mark(format!(
        "reprovision: tablet {} forced onto {snapshot} cannot catch up: {io_error}",
        tablet.alias
    ));
    register(lab, &tablet, &db);
    create_pod(lab, &tablet, false).await;
    ForcedTablet {
        tablet,
        db,
        io_error,
    }
}

/// FAKE operator and vttablet: the deleted tablet's server goes with its Pod; the PVC is
/// made again under its name (the webhook offers nothing: normal provisioning, an empty
/// volume); vttablet restores the regular backup (FAKE: a dump of the primary with its
/// GTID position) and replicates from there. Returns the new server once it has what
/// the primary had when it started.
pub async fn operator_recreates(lab: &Lab, forced: ForcedTablet) -> Arc<MariaDb> {
    let ForcedTablet { tablet, db, .. } = forced;
    Arc::try_unwrap(db)
        .unwrap_or_else(|_| panic!("the forced tablet's server is still shared"))
        .remove()
        .await;
    let volume = lab.cp.create_pvc(tablet_pvc(lab, &tablet)).await;
    // FAKE mysqlctld's init: the tablet's directory and my.cnf on the empty volume.
    let root = volume.join("vtdataroot");
    std::fs::create_dir(&root).unwrap();
    TabletLayout {
        uid: tablet.alias.uid,
        server_id: 4_000_004,
        port: free_port(),
        bind_loopback: true,
        ..TabletLayout::mariadb(0)
    }
    .write_skeleton(&root)
    .unwrap();
    let (db, _) = start_server(lab, &volume, tablet.alias.uid).await;

    let (code, dump, err) = lab
        .primary()
        .sh(&format!(
            "mariadb-dump --socket={SOCKET} -uroot --single-transaction --gtid --master-data=2 --databases {DATABASE}"
        ))
        .await;
    assert_eq!(code, 0, "the backup (a dump of the primary): {err}");
    let gtid = backup_position(&dump).unwrap_or_else(|| panic!("no GTID position in the dump"));
    std::fs::write(volume.join("vtdataroot").join("backup.sql"), dump).unwrap();
    let (code, _, err) = db
        .sh(&format!(
            "mariadb --socket={SOCKET} -uroot --init-command='SET sql_log_bin=0' < {MOUNT}/backup.sql"
        ))
        .await;
    assert_eq!(code, 0, "restoring the backup: {err}");
    let want = lab.primary().value("SELECT @@gtid_binlog_pos").await;
    lab.replicate(&db, lab.primary_port(), &gtid).await;
    wait_for_gtid(&db, &want, Duration::from_secs(300)).await;
    lab.timeline.mark(format!(
        "reprovision: tablet {} restored from the backup at {gtid} and caught up",
        tablet.alias
    ));
    lab.backend.insert(tablet.alias.clone(), &db);
    create_pod(lab, &tablet, true).await;
    db
}

/// The GTID position a `mariadb-dump --gtid --master-data=2` was taken at (its
/// `-- SET GLOBAL gtid_slave_pos='…';` line).
fn backup_position(dump: &str) -> Option<String> {
    let line = dump.lines().find(|l| l.contains("gtid_slave_pos='"))?;
    let (_, rest) = line.split_once("gtid_slave_pos='")?;
    let (pos, _) = rest.split_once('\'')?;
    Some(pos.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backup_position_is_read_from_the_dump_comment() {
        let dump = "-- MariaDB dump\n--\n-- Preferably use GTID to start replication from GTID position:\n\n-- SET GLOBAL gtid_slave_pos='0-1-42';\n";
        assert_eq!(backup_position(dump).as_deref(), Some("0-1-42"));
        assert_eq!(backup_position("-- nothing here\n"), None);
    }
}
