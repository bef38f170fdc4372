//! A new replica from a VolumeSnapshot, the vtsnap way: a PVC whose `dataSourceRef` names
//! the snapshot (what the webhook injects), bound by the CSI driver as a writable clone;
//! `vtsnap-restore` moves the cloned tablet directory to the new UID; mysqld starts (crash
//! recovery for an online snapshot); GTID auto-positioning catches it up.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use vtsnap_core::naming::TabletUid;
use vtsnap_testkit::mariadb::MariaDb;

use crate::resources;
use crate::shard::{Lab, free_port};

/// Time of each provisioning phase, in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct ProvisionTimes {
    /// PVC created → Bound (the clone).
    pub clone_ms: u64,
    pub restore_ms: u64,
    /// Container start → mysqld answers (includes InnoDB crash recovery).
    pub start_ms: u64,
    /// Replication started → the replica has everything the primary had then.
    pub catch_up_ms: u64,
}

impl ProvisionTimes {
    /// Clone, restore and start: the replica exists and serves its (old) data.
    pub fn provisioning_ms(&self) -> u64 {
        self.clone_ms + self.restore_ms + self.start_ms
    }

    pub fn total_ms(&self) -> u64 {
        self.provisioning_ms() + self.catch_up_ms
    }
}

/// A provisioned replica.
#[derive(Debug)]
pub struct NewReplica {
    pub uid: TabletUid,
    pub db: Arc<MariaDb>,
    pub times: ProvisionTimes,
    /// `gtid_binlog_pos` the restored server found before replicating (from its own binlog).
    pub restored_gtid: String,
}

pub fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Waits on `db` until it has applied `pos` (MASTER_GTID_WAIT); panics after `limit`.
pub async fn wait_for_gtid(db: &MariaDb, pos: &str, limit: Duration) {
    let r = db
        .value(&format!(
            "SELECT MASTER_GTID_WAIT(\"{pos}\", {})",
            limit.as_secs()
        ))
        .await;
    assert_eq!(
        r,
        "0",
        "replica did not reach {pos} within {limit:?}: {:?}",
        db.query("SHOW SLAVE STATUS").await
    );
}

/// Provisions tablet `uid` from `snapshot` and catches it up with the primary.
pub async fn from_snapshot(lab: &Lab, snapshot: &str, uid: TabletUid) -> NewReplica {
    let mut r = clone_and_start(lab, snapshot, uid).await;
    catch_up(lab, &mut r).await;
    r
}

/// A clone of a snapshot that `vtsnap-restore` made tablet `uid`'s, and how long each took.
#[derive(Debug)]
pub struct Restored {
    /// The clone's volume directory (its `vtdataroot/` holds the tablet directory).
    pub volume: PathBuf,
    /// PVC created → Bound.
    pub clone_ms: u64,
    pub restore_ms: u64,
    pub outcome: vtsnap_restore::Outcome,
}

/// Clones `snapshot` into PVC `pvc` and runs `vtsnap-restore` on it for tablet `uid`.
pub async fn clone_and_restore(lab: &Lab, pvc: &str, snapshot: &str, uid: TabletUid) -> Restored {
    let t0 = Instant::now();
    let volume = lab.cp.restore_pvc(pvc, snapshot).await;
    let clone_ms = ms(t0.elapsed());
    let t1 = Instant::now();
    let outcome = vtsnap_restore::run(&vtsnap_restore::Options {
        vtdataroot: volume.join("vtdataroot"),
        tablet_uid: uid,
        server_id: None,
        dry_run: false,
    })
    .unwrap_or_else(|e| panic!("vtsnap-restore {uid} from {snapshot}: {e}"));
    Restored {
        volume,
        clone_ms,
        restore_ms: ms(t1.elapsed()),
        outcome,
    }
}

/// Provisions tablet `uid` from `snapshot` and starts it, without replication: what it
/// serves is exactly what crash recovery (online) or a clean start (cold) found.
pub async fn clone_and_start(lab: &Lab, snapshot: &str, uid: TabletUid) -> NewReplica {
    let pvc_name = format!("example-vttablet-zone1-{}-restored", uid.get());
    let Restored {
        volume,
        clone_ms,
        restore_ms,
        outcome: out,
    } = clone_and_restore(lab, &pvc_name, snapshot, uid).await;
    lab.timeline.mark(format!(
        "provision: vtsnap-restore moved {} to {} in {restore_ms} ms ({})",
        out.from_uid
            .map_or_else(|| "?".to_owned(), |u| u.tablet_dir_name()),
        uid.tablet_dir_name(),
        out.action.as_str()
    ));

    let (db, start) = start_server(lab, &volume, uid).await;
    let start_ms = ms(start);
    let restored_gtid = db.value("SELECT @@gtid_binlog_pos").await;
    lab.timeline.mark(format!(
        "provision: tablet {} started in {start_ms} ms at GTID {restored_gtid:?}",
        uid.get()
    ));

    NewReplica {
        uid,
        db,
        times: ProvisionTimes {
            clone_ms,
            restore_ms,
            start_ms,
            catch_up_ms: 0,
        },
        restored_gtid,
    }
}

/// Points the new replica at the primary from the position it restored and waits until it
/// has what the primary has now (the load goes on).
pub async fn catch_up(lab: &Lab, r: &mut NewReplica) {
    r.times.catch_up_ms = ms(catch_up_from(lab, &r.db, &r.restored_gtid).await);
    lab.timeline.mark(format!(
        "provision: tablet {} caught up in {} ms",
        r.uid.get(),
        r.times.catch_up_ms
    ));
}

/// Starts tablet `uid`'s mysqld on `<volume>/vtdataroot` (initializing an empty data
/// directory), with its socket in `<volume>/socket`; returns it and how long it took.
pub async fn start_server(lab: &Lab, volume: &Path, uid: TabletUid) -> (Arc<MariaDb>, Duration) {
    let socket_dir = volume.join("socket");
    std::fs::create_dir_all(&socket_dir).unwrap();
    let t = Instant::now();
    let db = Arc::new(
        MariaDb::start_supervised_with(
            &volume.join("vtdataroot"),
            &socket_dir,
            uid,
            true,
            &format!("--port={} {}", free_port(), lab.opts.server_args),
        )
        .await,
    );
    resources::container(db.id());
    (db, t.elapsed())
}

/// Replicates from `gtid` and waits until the primary's position at the start is applied.
pub async fn catch_up_from(lab: &Lab, db: &MariaDb, gtid: &str) -> Duration {
    let want = lab.primary().value("SELECT @@gtid_binlog_pos").await;
    let t = Instant::now();
    lab.replicate(db, lab.primary_port(), gtid).await;
    wait_for_gtid(db, &want, Duration::from_secs(3600)).await;
    t.elapsed()
}
