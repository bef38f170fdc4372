//! Recovery on the real Vitess lab (docs/pitr.md): the archive's increments taken with
//! `vtctldclient Backup`, read with `vtsnap-pitr`'s reader, and a snapshot restored as a
//! new mysqld and replayed to a point with the script `vtsnap-pitr fetch` writes, run in
//! the mysqld's own container. Shared by the recovery tests and the replay benchmark.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use vtsnap_core::coverage::{Exactness, GtidSet, Text};
use vtsnap_core::pitr::chain::{self, Base, Target};
use vtsnap_core::pitr::manifest::Increment;
use vtsnap_pitr::act::fetch::{fetch_all, last_transaction};
use vtsnap_pitr::archive::{Archive, FileArchive, ObjectArchive};
use vtsnap_pitr::decide::replay::{self, Client};
use vtsnap_pitr::observe::{Observed, read_archive};
use vtsnap_testkit::btrfs::BtrfsVolume;
use vtsnap_testkit::vitess::BackupStorage;
use vtsnap_testkit::vitess::{DATABASE, KEYSPACE, SHARD, TabletRole, VitessShard};

use crate::vitess_cut::restore_clone_as;

/// The replica the archive's increments are taken on.
pub const ARCHIVER: u32 = 103;
pub const LIMIT: Duration = Duration::from_secs(120);

/// A recovery done: the server's set after, and how long each part took.
#[derive(Debug, Clone)]
pub struct Recovered {
    pub after: GtidSet,
    /// The snapshot restored as a new tablet's volume and its mysqld up.
    pub restore: Duration,
    /// The binlogs fetched and checked.
    pub fetch: Duration,
    /// The script run: the replay and its checks.
    pub replay: Duration,
    /// What the replay read (decompressed binlogs).
    pub bytes: u64,
}

/// A GTID set as the server prints it.
pub fn gtid(text: &str) -> GtidSet {
    GtidSet::parse(
        vtsnap_core::snapshot::GtidFlavor::Mysql56,
        text.trim(),
        Text::Server,
    )
    .unwrap()
}

pub async fn insert(shard: &VitessShard, from: u32, to: u32) {
    insert_on(shard, shard.primary().uid, from, to).await;
}

pub async fn insert_on(shard: &VitessShard, primary: u32, from: u32, to: u32) {
    let values: Vec<String> = (from..to).map(|i| format!("({i}, 'row {i}')")).collect();
    shard
        .tablet_by_uid(primary)
        .must_sql(&format!(
            "INSERT INTO {DATABASE}.t (id, v) VALUES {}",
            values.join(",")
        ))
        .await;
}

/// Waits for the clock to pass the next whole second and returns it: binlog events carry
/// whole seconds, so what follows is stamped at or after it and what came before, not.
pub async fn next_second() -> Timestamp {
    let next = Timestamp::from_second(Timestamp::now().as_second() + 1).unwrap();
    while Timestamp::now() < next {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    next
}

pub async fn caught_up(shard: &VitessShard, uid: u32) {
    caught_up_with(shard, uid, shard.primary().uid).await;
}

pub async fn caught_up_with(shard: &VitessShard, uid: u32, primary: u32) {
    let want = shard.tablet_by_uid(primary).gtid_executed().await;
    let start = Instant::now();
    while shard.tablet_by_uid(uid).gtid_executed().await != want {
        assert!(
            start.elapsed() < LIMIT,
            "tablet {uid} never caught up to {want}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A Vitess incremental backup on the archiver, from `from` (a position or `auto`); a new
/// second first, as Vitess names backups by the second.
pub async fn incremental_backup(shard: &VitessShard, from: &str) {
    caught_up(shard, ARCHIVER).await;
    next_second().await;
    let alias = shard.tablet_by_uid(ARCHIVER).alias.to_string();
    shard
        .ctl(&["Backup", "--incremental-from-pos", from, &alias])
        .await;
}

/// The shard's archive where its Vitess keeps backups: its file storage, or its S3
/// bucket read through the object-store client.
pub fn archive_of(shard: &VitessShard) -> Archive {
    match &shard.opts.backups {
        BackupStorage::File => Archive::File(
            FileArchive::new(&shard.shared_dir().join("backups"), KEYSPACE, SHARD).unwrap(),
        ),
        BackupStorage::S3 {
            endpoint,
            bucket,
            root,
        } => Archive::Object(
            ObjectArchive::with_settings(
                &format!("s3://{bucket}/{root}"),
                KEYSPACE,
                SHARD,
                &vtsnap_testkit::s3::client_settings(endpoint),
            )
            .unwrap(),
        ),
    }
}

pub async fn observe(shard: &VitessShard) -> Observed {
    let o = read_archive(&archive_of(shard), KEYSPACE, SHARD, Timestamp::now())
        .await
        .unwrap();
    assert!(o.unusable.is_empty(), "{:?}", o.unusable);
    assert!(o.incomplete.is_empty(), "{:?}", o.incomplete);
    o
}

pub fn socket_client() -> Client {
    Client {
        socket: "/vt/socket/mysql.sock".into(),
        user: "vt_dba".into(),
    }
}

/// Restores `base` as tablet `uid`, replays what the plan to `target` names, checks it;
/// returns the tablet's `gtid_executed` after.
pub async fn recover(
    shard: &mut VitessShard,
    vol: &BtrfsVolume,
    uid: u32,
    base: &Base,
    increments: &[Increment],
    target: &Target,
) -> Recovered {
    let plan = chain::plan(base, increments, target).unwrap();
    assert!(!plan.increments.is_empty(), "{plan:?}");
    recover_plan(shard, vol, uid, base, increments, &plan, target).await
}

/// [`recover`] of a plan already made.
pub async fn recover_plan(
    shard: &mut VitessShard,
    vol: &BtrfsVolume,
    uid: u32,
    base: &Base,
    increments: &[Increment],
    plan: &chain::Plan,
    target: &Target,
) -> Recovered {
    let chosen: Vec<&Increment> = plan
        .increments
        .iter()
        .map(|n| increments.iter().find(|i| &i.name == n).unwrap())
        .collect();
    let start = Instant::now();
    restore_clone_as(vol, &base.name, uid);
    let archive = archive_of(shard);
    let t = shard.add_mysqld(uid).await;
    let restored = start.elapsed();
    let before = gtid(&t.gtid_executed().await);
    match base.exactness {
        Exactness::Exact => assert_eq!(before, base.gtid, "a cold base holds its recorded set"),
        Exactness::LowerBound => assert!(
            base.gtid.is_subset_of(&before),
            "an online base holds at least its lower bound: {before}"
        ),
    }
    crate::pitr_oracle::check_base(&before, target).unwrap();
    let vtdataroot = t.volume.join("vtdataroot");
    let fetch_start = Instant::now();
    let fetched = fetch_all(&archive, chosen.iter().copied(), &vtdataroot.join("pitr"))
        .await
        .unwrap();
    let fetch = fetch_start.elapsed();
    // The script writes its report there as the server's user, as in the recovery Pod.
    vtsnap_testkit::vitess::give_to_vitess(&vtdataroot.join("pitr"));
    let in_container: Vec<PathBuf> = fetched
        .iter()
        .map(|f| Path::new("/vt/vtdataroot").join(f.path.strip_prefix(&vtdataroot).unwrap()))
        .collect();
    let client = socket_client();
    let guard = replay::guard(base, &chosen, target);
    let bytes: u64 = fetched.iter().map(|f| f.bytes).sum();
    let last = last_transaction(&fetched, target).unwrap();
    let report = replay::Report {
        path: "/vt/vtdataroot/pitr/result.json".into(),
        bytes,
        last_transaction: last,
    };
    let script = replay::script(&in_container, target, &client, &guard, Some(&report)).unwrap();
    let replay_start = Instant::now();
    let out = t
        .container(TabletRole::Mysqld)
        .unwrap()
        .exec(&["bash", "-c", &script])
        .await;
    let replayed = replay_start.elapsed();
    assert!(
        out.status.success(),
        "{script}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = gtid(&t.gtid_executed().await);
    let reached = &chosen.last().unwrap().to;
    crate::pitr_oracle::verify(&before, &after, reached, target).unwrap();
    // The script's own report, as the recovery Pod reads it: the server's set, and for a
    // time the last transaction applied before it.
    let result: serde_json::Value =
        serde_json::from_slice(&std::fs::read(vtdataroot.join("pitr/result.json")).unwrap())
            .unwrap();
    assert_eq!(
        gtid(result["gtidExecuted"].as_str().unwrap()),
        after,
        "{result}"
    );
    assert_eq!(result["bytes"], bytes, "{result}");
    match target {
        Target::Before(t) => {
            let last = result["lastTransaction"].as_i64().unwrap();
            assert!(last < t.as_second(), "{result}: {t}");
        }
        Target::Through(_) => assert!(result["lastTransaction"].is_null(), "{result}"),
    }
    Recovered {
        after,
        restore: restored,
        fetch,
        replay: replayed,
        bytes,
    }
}
