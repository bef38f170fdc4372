//! Questions only a real Vitess answers (Vitess 24, MySQL 9.7; `vtsnap_testkit::vitess`),
//! each an assertion. The cold cut is taken with vtsnap's own calls in vtsnap's order
//! (drain, StopReplication, the position, mysqlctld Shutdown through vtsnap-node's client,
//! the btrfs snapshot, Start, vtsnap's put-back); the new tablet is made by vtsnap-restore.
//!
//! - The node helper's layout probe passes a tablet directory real Vitess made on MySQL.
//! - VTOrc restarts a stopped REPLICA, yet leaves a DRAINED tablet's replication stopped
//!   through the cut: the position recorded is exactly the clone's `gtid_executed`.
//! - A restored tablet: vttablet skips its own restore, serves as a replica, catches up
//!   by GTID to the primary's data, with a new `server_uuid` and its own `server-id`.
//! - Without VTOrc the put-back still leaves the tablet replicating; a restored tablet,
//!   though, stays stopped until something calls StartReplication.
//! - Catch-up coverage reads the real primary's `gtid_purged`: covered, then not once the
//!   binlogs after the cut are purged.
//! - A restored tablet whose binlogs were purged reports the error the GC reads, and its
//!   vttablet's `/healthz` (the operator's readiness probe) fails.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use vtsnap_core::coverage::{Coverage, Exactness, coverage, read_primary_at};
use vtsnap_core::vtctld::TabletType;
use vtsnap_core::vtctld::messages::replicationdata::STATE_RUNNING;
use vtsnap_lab::vitess_cut::{cold_cut, restore_clone_as, server_id, shard_on_btrfs};
use vtsnap_testkit::btrfs::BtrfsVolume;
use vtsnap_testkit::vitess::{
    CloneSupport, DATABASE, Durability, Orchestrator, TabletRole, VitessOptions, VitessShard,
    VitessTablet,
};

const SOURCE: u32 = 102;
const RESTORED: u32 = 201;
/// A clone restored after the primary purged the binlogs it needs.
const PURGED: u32 = 202;
const LIMIT: Duration = Duration::from_secs(120);

/// Inserts into the primary until stopped; counts the rows written.
struct Load {
    stop: Arc<AtomicBool>,
    rows: Arc<AtomicU64>,
    /// The longest time between two writes returning, in milliseconds.
    gap_ms: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Load {
    fn start(shard: &VitessShard) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let rows = Arc::new(AtomicU64::new(0));
        let container = shard
            .primary()
            .container(TabletRole::Mysqld)
            .unwrap()
            .name()
            .to_owned();
        let gap_ms = Arc::new(AtomicU64::new(0));
        let (s, r, g) = (stop.clone(), rows.clone(), gap_ms.clone());
        let task = tokio::spawn(async move {
            let insert = format!("INSERT INTO {DATABASE}.t (v) VALUES ('load')");
            let mut last = Instant::now();
            while !s.load(Ordering::SeqCst) {
                let out = tokio::process::Command::new("podman")
                    .args([
                        "exec",
                        &container,
                        "mysql",
                        "--no-defaults",
                        "-S",
                        "/vt/socket/mysql.sock",
                        "-u",
                        "vt_dba",
                        "-e",
                        &insert,
                    ])
                    .output()
                    .await
                    .unwrap();
                assert!(out.status.success(), "{out:?}");
                r.fetch_add(1, Ordering::SeqCst);
                let gap = u64::try_from(last.elapsed().as_millis()).unwrap_or(u64::MAX);
                g.fetch_max(gap, Ordering::SeqCst);
                last = Instant::now();
            }
        });
        Self {
            stop,
            rows,
            gap_ms,
            task,
        }
    }

    fn longest_gap(&self) -> Duration {
        Duration::from_millis(self.gap_ms.load(Ordering::SeqCst))
    }

    /// Waits until `n` more rows were written than now.
    async fn until_more(&self, n: u64) {
        let from = self.rows.load(Ordering::SeqCst);
        let start = Instant::now();
        while self.rows.load(Ordering::SeqCst) < from + n {
            assert!(start.elapsed() < LIMIT, "the load wrote nothing");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.unwrap();
    }
}

async fn replicating(shard: &VitessShard, uid: u32) -> bool {
    let alias = &shard.tablet_by_uid(uid).alias;
    shard
        .client()
        .get_full_status(alias)
        .await
        .ok()
        .and_then(|f| f.replication_status)
        .is_some_and(|s| s.io_state == STATE_RUNNING && s.sql_state == STATE_RUNNING)
}

async fn until(what: &str, mut cond: impl AsyncFnMut() -> bool) {
    let start = Instant::now();
    while !cond().await {
        assert!(start.elapsed() < LIMIT, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A writable clone of snapshot `name` as tablet `RESTORED`'s volume, moved to its UID
/// by vtsnap-restore.
fn restore_clone(vol: &BtrfsVolume, name: &str) {
    restore_clone_as(vol, name, RESTORED);
}

#[tokio::test]
async fn vtorc_leaves_a_drained_tablet_stopped_so_the_cut_is_exact_and_the_clone_serves() {
    let (mut shard, vol) = shard_on_btrfs(Orchestrator::VtOrc).await;
    let client = shard.client();
    let load = Load::start(&shard);
    load.until_more(5).await;

    // VTOrc is awake: it restarts a REPLICA whose replication was stopped.
    let other = shard.tablet_by_uid(103).alias.clone();
    client.stop_replication(&other).await.unwrap();
    until("VTOrc restarts the stopped replica", async || {
        replicating(&shard, 103).await
    })
    .await;

    let recorded = cold_cut(&shard, &vol, SOURCE, "snap-1").await;
    load.until_more(5).await;
    until("the put-back tablet replicates again", async || {
        replicating(&shard, SOURCE).await
    })
    .await;

    restore_clone(&vol, "snap-1");
    let source_uuid = shard
        .tablet_by_uid(SOURCE)
        .must_sql("SELECT @@server_uuid")
        .await;
    let source_id = server_id(shard.tablet_by_uid(SOURCE));
    // Read before its vttablet starts: nothing can have started its replication yet.
    let executed = shard.add_mysqld(RESTORED).await.gtid_executed().await;
    let gtid_of = |s: &str| s.replace(['\n', ' '], "");
    assert_eq!(
        gtid_of(&executed),
        gtid_of(&recorded),
        "the clone's gtid_executed is the position recorded at the cut"
    );
    shard.serve(RESTORED);
    let restored = shard.tablet_by_uid(RESTORED);
    let restored_uuid = restored.must_sql("SELECT @@server_uuid").await;
    assert_ne!(restored_uuid, source_uuid, "a new server_uuid");
    assert_ne!(server_id(restored), source_id, "its own server-id");

    until(
        "vtctld lists the restored tablet as a REPLICA",
        async || {
            shard
                .client()
                .get_tablet(&shard.tablet_by_uid(RESTORED).alias)
                .await
                .is_ok_and(|t| t.r#type == TabletType::Replica as i32)
        },
    )
    .await;
    until("the restored tablet replicates", async || {
        replicating(&shard, RESTORED).await
    })
    .await;
    load.stop().await;
    let primary_gtid = shard.primary().gtid_executed().await;
    until("the restored tablet caught up by GTID", async || {
        shard.tablet_by_uid(RESTORED).gtid_executed().await == primary_gtid
    })
    .await;
    let checksum = format!("CHECKSUM TABLE {DATABASE}.t");
    assert_eq!(
        shard.tablet_by_uid(RESTORED).must_sql(&checksum).await,
        shard.primary().must_sql(&checksum).await
    );
}

#[tokio::test]
async fn without_vtorc_the_put_back_leaves_the_tablet_replicating() {
    let (mut shard, vol) = shard_on_btrfs(Orchestrator::Off).await;
    let load = Load::start(&shard);
    load.until_more(5).await;
    let recorded = format!("MySQL56/{}", cold_cut(&shard, &vol, SOURCE, "snap-1").await);
    load.until_more(5).await;
    assert!(replicating(&shard, SOURCE).await);
    load.stop().await;

    restore_clone(&vol, "snap-1");
    shard.add_tablet(RESTORED).await;
    until(
        "vtctld lists the restored tablet as a REPLICA",
        async || {
            shard
                .client()
                .get_tablet(&shard.tablet_by_uid(RESTORED).alias)
                .await
                .is_ok_and(|t| t.r#type == TabletType::Replica as i32)
        },
    )
    .await;
    // Nothing starts its replication: vttablet leaves it to VTOrc (mysql90.cnf sets
    // skip_replica_start), so without VTOrc the new replica stays stopped, with no error,
    // and never ready: the replication reporter makes it not serving.
    let alias = shard.tablet_by_uid(RESTORED).alias.clone();
    let status = shard
        .client()
        .get_full_status(&alias)
        .await
        .unwrap()
        .replication_status
        .unwrap();
    assert_ne!(status.io_state, STATE_RUNNING, "{status:?}");
    assert!(status.last_io_error.is_empty(), "{status:?}");
    assert_eq!(healthz(shard.tablet_by_uid(RESTORED)).await, 500);
    shard.client().start_replication(&alias).await.unwrap();
    let primary_gtid = shard.primary().gtid_executed().await;
    until(
        "the restored tablet caught up by GTID once started",
        async || shard.tablet_by_uid(RESTORED).gtid_executed().await == primary_gtid,
    )
    .await;
    until("the caught-up tablet is ready (/healthz)", async || {
        healthz(shard.tablet_by_uid(RESTORED)).await == 200
    })
    .await;

    // The primary purges the binlogs after the snapshot: a second clone cannot catch up,
    // and shows what the GC's re-provisioning reads (MySQL error 1236), NotReady.
    let p = shard.primary();
    p.must_sql(&format!("INSERT INTO {DATABASE}.t (v) VALUES ('after')"))
        .await;
    p.must_sql("FLUSH BINARY LOGS").await;
    let current = p.must_sql("SHOW BINARY LOG STATUS").await;
    let current = current.split('\t').next().unwrap().to_owned();
    let covered = async |shard: &VitessShard| {
        let binlogs = read_primary_at(&shard.client(), &shard.primary().alias)
            .await
            .unwrap();
        coverage(Some(&recorded), Exactness::Exact, Some(&binlogs.purged))
    };
    assert_eq!(covered(&shard).await, Coverage::Covered);
    p.must_sql(&format!("PURGE BINARY LOGS TO '{current}'"))
        .await;
    let after = covered(&shard).await;
    assert!(
        matches!(after, Coverage::NotCovered { .. }),
        "catch-up coverage reads MySQL 9.7's gtid_purged: {after:?}"
    );
    restore_clone_as(&vol, "snap-1", PURGED);
    shard.add_tablet(PURGED).await;
    let alias = shard.tablet_by_uid(PURGED).alias.clone();
    until("vtctld lists the second clone", async || {
        shard.client().get_tablet(&alias).await.is_ok()
    })
    .await;
    shard.client().start_replication(&alias).await.unwrap();
    let mut io_error = String::new();
    until("the second clone's replication fails", async || {
        io_error = shard
            .client()
            .get_full_status(&alias)
            .await
            .ok()
            .and_then(|f| f.replication_status)
            .map(|s| s.last_io_error)
            .unwrap_or_default();
        !io_error.is_empty()
    })
    .await;
    assert!(
        vtsnap_gc::decide::failed_restores::is_binlog_purged(&io_error),
        "the GC reads this as purged binlogs: {io_error}"
    );
    let start = Instant::now();
    until(
        "the operator's readiness probe fails (NotReady)",
        async || healthz(shard.tablet_by_uid(PURGED)).await != 200,
    )
    .await;
    eprintln!("healthz failed {:?} after the IO error", start.elapsed());

    // A release that meets a running mysqld sends no Start: a real mysqlctld would exit
    // on it and take that mysqld down (testkit/tests/mysqlctld_contract.rs).
    let t = shard.tablet_by_uid(SOURCE);
    let started = vtsnap_node::mysqlctl::start_unless_running(
        &t.mysqlctl_socket(),
        &t.socket_dir.join("mysql.sock"),
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    assert_eq!(started, vtsnap_node::mysqlctl::Started::AlreadyRunning);
    assert!(t.container(TabletRole::Mysqld).unwrap().running());
    t.must_sql("SELECT 1").await;
}

/// The status code of vttablet's `/healthz` (the operator's readiness probe).
async fn healthz(t: &VitessTablet) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", t.web_port))
        .await
        .unwrap();
    s.write_all(b"GET /healthz HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.unwrap();
    let head = String::from_utf8_lossy(&buf);
    head.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {head}"))
}

/// Under `semi_sync` durability: a cold cut of one replica of three leaves the primary its
/// other replica's acknowledgements, so writes go on through the whole fence (each write
/// that returns during it is one the primary could commit); the stall is measured. With
/// the other replica stopped too, vtsnap reads the primary's wait and refuses.
#[tokio::test]
async fn under_semi_sync_a_cold_cut_of_one_replica_of_three_never_blocks_the_primary() {
    let vol = BtrfsVolume::create(4 << 30);
    let uids = vec![101, SOURCE, 103];
    for uid in &uids {
        vol.subvolume(&uid.to_string());
    }
    let shard = VitessShard::start(VitessOptions {
        uids,
        durability: Durability::SemiSync,
        vtorc: Orchestrator::Off,
        volumes: vol.path().to_path_buf(),
        clone: CloneSupport::Off,
        extra_cnf: String::new(),
        vtorc_refresh: vtsnap_testkit::vitess::VTORC_REFRESH,
        backups: vtsnap_testkit::vitess::BackupStorage::File,
    })
    .await;
    let client = shard.client();
    let primary = shard.primary().alias.clone();
    let acks = vtsnap_snapshot::run::observe::primary_acks(&client, &primary)
        .await
        .unwrap();
    assert_eq!(
        acks,
        vtsnap_snapshot::run::decide::semi_sync::PrimaryAcks::Required { replicas: 1 },
        "Vitess's semi_sync durability on MySQL 9.7"
    );
    shard
        .primary()
        .must_sql(&format!(
            "CREATE DATABASE IF NOT EXISTS {DATABASE}; \
             CREATE TABLE IF NOT EXISTS {DATABASE}.t (id BIGINT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(64))"
        ))
        .await;
    let load = Load::start(&shard);
    load.until_more(3).await;
    let before = load.rows.load(Ordering::SeqCst);
    let cut_start = Instant::now();
    cold_cut(&shard, &vol, SOURCE, "snap-1").await;
    let cut = cut_start.elapsed();
    let during = load.rows.load(Ordering::SeqCst) - before;
    let stall = load.longest_gap();
    eprintln!(
        "semi-sync: {during} writes returned during a {cut:?} cold cut; longest write stall {stall:?}"
    );
    assert!(during > 0, "no write returned during the cold cut");
    load.stop().await;

    // With no replica acknowledging, a write waits for one (what the refusal prevents):
    // it is seen waiting, and returns once a replica replicates again.
    for uid in [SOURCE, 103] {
        client
            .stop_replication(&shard.tablet_by_uid(uid).alias)
            .await
            .unwrap();
    }
    let container = shard
        .primary()
        .container(TabletRole::Mysqld)
        .unwrap()
        .name()
        .to_owned();
    let write = tokio::spawn(async move {
        tokio::process::Command::new("podman")
            .args([
                "exec",
                &container,
                "mysql",
                "--no-defaults",
                "-S",
                "/vt/socket/mysql.sock",
                "-u",
                "vt_dba",
                "-e",
                &format!("INSERT INTO {DATABASE}.t (v) VALUES ('alone')"),
            ])
            .output()
            .await
            .unwrap()
    });
    until(
        "the primary's write waits for a semi-sync acknowledgement",
        async || {
            shard
                .primary()
                .sql(
                    "SELECT COUNT(*) FROM information_schema.processlist \
                 WHERE state LIKE 'Waiting for semi-sync%'",
                )
                .await
                .is_ok_and(|n| n.trim() != "0")
        },
    )
    .await;
    assert!(
        !write.is_finished(),
        "the write returned without an acknowledgement"
    );
    client
        .start_replication(&shard.tablet_by_uid(103).alias)
        .await
        .unwrap();
    let out = write.await.unwrap();
    assert!(out.status.success(), "{out:?}");
}
