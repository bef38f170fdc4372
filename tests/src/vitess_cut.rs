//! A real Vitess shard on btrfs, cut cold in vtsnap's order and cloned as vtsnap-restore
//! makes a new tablet's volume: what the real-Vitess tests (catch-up, recovery) start from.

use std::time::Duration;

use vtsnap_core::fence::put_back::{TabletChanges, describe, put_tablet_back};
use vtsnap_core::naming::TabletUid;
use vtsnap_core::vtctld::TabletType;
use vtsnap_node::mysqlctl::MysqlCtl;
use vtsnap_testkit::btrfs::BtrfsVolume;
use vtsnap_testkit::vitess::{
    CloneSupport, DATABASE, Durability, Orchestrator, VitessOptions, VitessShard, VitessTablet,
};

/// The shard's tablets: the primary, the replica that is cut, another replica.
pub const UIDS: [u32; 3] = [101, 102, 103];

/// Tablets 101 (primary), 102 and 103 on btrfs subvolumes of one loop device, with the
/// table `t` on the primary.
pub async fn shard_on_btrfs(vtorc: Orchestrator) -> (VitessShard, BtrfsVolume) {
    shard_on_btrfs_with(vtorc, vtsnap_testkit::vitess::BackupStorage::File).await
}

/// [`shard_on_btrfs`] with its backups kept in `backups`.
pub async fn shard_on_btrfs_with(
    vtorc: Orchestrator,
    backups: vtsnap_testkit::vitess::BackupStorage,
) -> (VitessShard, BtrfsVolume) {
    let vol = BtrfsVolume::create(4 << 30);
    let uids = UIDS.to_vec();
    for uid in &uids {
        vol.subvolume(&uid.to_string());
    }
    let shard = VitessShard::start(VitessOptions {
        uids,
        durability: Durability::None,
        vtorc,
        volumes: vol.path().to_path_buf(),
        clone: CloneSupport::Off,
        extra_cnf: String::new(),
        vtorc_refresh: vtsnap_testkit::vitess::VTORC_REFRESH,
        backups,
    })
    .await;
    let p = shard.primary();
    p.must_sql(&format!(
        "CREATE DATABASE IF NOT EXISTS {DATABASE}; \
         CREATE TABLE IF NOT EXISTS {DATABASE}.t (id BIGINT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(64))"
    ))
    .await;
    (shard, vol)
}

/// A cold cut of tablet `uid` in vtsnap's order; returns the position recorded (without the
/// flavor prefix) and the read-only snapshot's name.
pub async fn cold_cut(shard: &VitessShard, vol: &BtrfsVolume, uid: u32, name: &str) -> String {
    let client = shard.client();
    let t = shard.tablet_by_uid(uid);
    // the node helper's layout probe passes the MySQL 9.7 tablet directory Vitess made
    let layout = vtsnap_node::probe::probe(&t.volume.join("vtdataroot"), TabletUid::new(uid))
        .unwrap_or_else(|e| panic!("layout probe of a real tablet: {e}"));
    assert_eq!(
        layout.server_id.map(|id| id.to_string()),
        Some(server_id(t)),
        "{layout:?}"
    );
    assert!(!layout.restore_in_progress);
    client
        .change_tablet_type(&t.alias, TabletType::Drained)
        .await
        .unwrap();
    client.stop_replication(&t.alias).await.unwrap();
    let position = client
        .get_full_status(&t.alias)
        .await
        .unwrap()
        .replication_status
        .unwrap()
        .position;
    let ctl = MysqlCtl::new(&t.mysqlctl_socket()).unwrap();
    ctl.shutdown(Duration::from_secs(120)).await.unwrap();
    vol.snapshot(&uid.to_string(), name, true);
    ctl.start(Duration::from_secs(120)).await.unwrap();
    let problems = put_tablet_back(
        &client,
        &t.alias,
        TabletType::Replica,
        TabletChanges {
            replication_stopped: true,
            type_changed: true,
        },
    )
    .await;
    assert!(problems.is_empty(), "put back: {}", describe(&problems));
    position
        .strip_prefix("MySQL56/")
        .unwrap_or_else(|| panic!("a MySQL position: {position}"))
        .to_owned()
}

/// A writable clone of snapshot `name` as tablet `uid`'s volume, moved to its UID by
/// vtsnap-restore.
pub fn restore_clone_as(vol: &BtrfsVolume, name: &str, uid: u32) {
    let clone = vol.snapshot(name, &uid.to_string(), false);
    let out = vtsnap_restore::run(&vtsnap_restore::Options {
        vtdataroot: clone.join("vtdataroot"),
        tablet_uid: TabletUid::new(uid),
        server_id: None,
        dry_run: false,
    })
    .unwrap();
    assert_eq!(out.action.as_str(), "moved", "{out:?}");
}

/// The server-id in the tablet's my.cnf.
pub fn server_id(t: &VitessTablet) -> String {
    let cnf = std::fs::read_to_string(t.tablet_dir().join("my.cnf")).unwrap();
    cnf.lines()
        .find_map(|l| l.strip_prefix("server-id"))
        .map(|v| v.trim_start_matches([' ', '=']).trim().to_owned())
        .unwrap()
}
