//! The contract between vtsnap and vtctld, held against both vtctlds vtsnap's tests meet:
//! the fake (`vtsnap_testkit::fake_vtctld`, which tests script for faults) and a real one
//! (Vitess 24 with MySQL 9.7 tablets, `vtsnap_testkit::vitess`). One set of clauses runs
//! against each, through vtsnap's own client: every field vtsnap reads, every error it
//! tells apart (by gRPC code and by the stable words of the message, never by ports or
//! UUIDs), and what a tablet whose mysqld is down does to each RPC.
//!
//! The shard is `commerce/-` with a primary and two replicas. Clauses run in sequence on
//! one shard and leave it as they found it: both replicas REPLICA and replicating. The
//! real subject needs what `vtsnap_testkit::vitess` needs (root, Podman, the Vitess image,
//! etcd) and takes about half a minute; "mysqld down" is mysqlctld's Shutdown through
//! vtsnap-node's own client there, and `FakeVtctld::set_mysqld_down` in the fake.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::future::Future;
use std::time::{Duration, Instant};

use vtsnap_core::naming::TabletAlias;
use vtsnap_core::vtctld::client::CallLimits;
use vtsnap_core::vtctld::messages::replicationdata::{
    FullStatus, STATE_RUNNING, STATE_STOPPED, Status,
};
use vtsnap_core::vtctld::messages::topodata::{Tablet, TabletType};
use vtsnap_core::vtctld::{VtctldClient, VtctldError};
use vtsnap_node::mysqlctl::MysqlCtl;
use vtsnap_testkit::fake_vtctld::FakeVtctld;
use vtsnap_testkit::grpc::Running;
use vtsnap_testkit::vitess::{CloneSupport, Durability, Orchestrator, VitessOptions, VitessShard};

const KEYSPACE: &str = "commerce";
const SHARD: &str = "-";
/// How long a real tablet may take to answer again, or to replicate again.
const LIMIT: Duration = Duration::from_secs(120);

/// A vtctld serving `commerce/-`: a primary and two replicas, all replicating.
trait Subject {
    fn client(&self) -> &VtctldClient;
    fn primary(&self) -> TabletAlias;
    fn replicas(&self) -> [TabletAlias; 2];
    /// Stops (`down`) or starts the tablet's mysqld, as mysqlctld's Shutdown and Start do.
    fn set_mysqld(&self, alias: &TabletAlias, down: bool) -> impl Future<Output = ()>;
}

struct Fake {
    fake: FakeVtctld,
    client: VtctldClient,
    primary: TabletAlias,
    replicas: [TabletAlias; 2],
    _server: Running,
}

impl Fake {
    async fn start() -> Self {
        let fixture = vtsnap_testkit::fixtures::shard().replicas(3).primary(1);
        assert_eq!(
            (fixture.keyspace.as_str(), fixture.shard.to_string()),
            (KEYSPACE, SHARD.into())
        );
        let fake = FakeVtctld::new();
        fixture.install(&vtsnap_testkit::fake_kube::FakeKube::new(), &fake);
        let server = fake.serve().await;
        let client = VtctldClient::new(&server.endpoint(), CallLimits::default()).unwrap();
        Self {
            fake,
            client,
            primary: fixture.alias(1),
            replicas: [fixture.alias(2), fixture.alias(3)],
            _server: server,
        }
    }
}

impl Subject for Fake {
    fn client(&self) -> &VtctldClient {
        &self.client
    }
    fn primary(&self) -> TabletAlias {
        self.primary.clone()
    }
    fn replicas(&self) -> [TabletAlias; 2] {
        self.replicas.clone()
    }
    async fn set_mysqld(&self, alias: &TabletAlias, down: bool) {
        self.fake.set_mysqld_down(alias, down);
    }
}

/// Fields drop in order: the shard's containers go before their volumes.
struct Real {
    shard: VitessShard,
    client: VtctldClient,
    _volumes: tempfile::TempDir,
}

impl Real {
    async fn start() -> Self {
        let volumes = tempfile::Builder::new()
            .prefix("vtsnap-contract-")
            .tempdir_in("/var/tmp")
            .unwrap();
        let shard = VitessShard::start(VitessOptions {
            uids: vec![101, 102, 103],
            durability: Durability::None,
            vtorc: Orchestrator::Off,
            volumes: volumes.path().to_path_buf(),
            clone: CloneSupport::Off,
            extra_cnf: String::new(),
            vtorc_refresh: vtsnap_testkit::vitess::VTORC_REFRESH,
            backups: vtsnap_testkit::vitess::BackupStorage::File,
        })
        .await;
        let client = shard.client();
        Self {
            shard,
            client,
            _volumes: volumes,
        }
    }
}

impl Subject for Real {
    fn client(&self) -> &VtctldClient {
        &self.client
    }
    fn primary(&self) -> TabletAlias {
        self.shard.primary().alias.clone()
    }
    fn replicas(&self) -> [TabletAlias; 2] {
        [
            self.shard.tablets[1].alias.clone(),
            self.shard.tablets[2].alias.clone(),
        ]
    }
    async fn set_mysqld(&self, alias: &TabletAlias, down: bool) {
        let t = self.shard.tablet(alias);
        let ctl = MysqlCtl::new(&t.mysqlctl_socket()).unwrap();
        let done = if down {
            ctl.shutdown(LIMIT).await
        } else {
            ctl.start(LIMIT).await
        };
        done.unwrap_or_else(|e| panic!("mysqld of {alias} (down: {down}): {e}\n{}", t.logs(30)));
    }
}

#[tokio::test]
async fn the_fake_vtctld_keeps_the_contract() {
    keeps_the_contract(&Fake::start().await).await;
}

#[tokio::test]
async fn the_real_vtctld_keeps_the_contract() {
    keeps_the_contract(&Real::start().await).await;
}

async fn keeps_the_contract(s: &impl Subject) {
    the_shard_names_its_primary(s).await;
    what_does_not_exist_is_unknown_and_said_so(s).await;
    tablets_carry_what_vtsnap_reads(s).await;
    full_status_carries_what_vtsnap_reads(s).await;
    positions_give_the_primary_its_position_only(s).await;
    a_drained_tablet_leaves_the_positions(s).await;
    nothing_changes_to_or_from_primary(s).await;
    replication_stops_and_starts(s).await;
    dba_fetches_answer_variables_and_refuse_unknown_ones(s).await;
    a_replica_whose_mysqld_is_down_fails_what_reaches_it(s).await;
    a_drained_tablet_whose_mysqld_is_down_is_left_out(s).await;
}

// ---- helpers ----

/// The gRPC code and message of a failed call.
fn rpc_error<T: std::fmt::Debug>(what: &str, r: Result<T, VtctldError>) -> (tonic::Code, String) {
    match r {
        Err(VtctldError::Rpc { code, message, .. }) => (code, message),
        other => panic!("{what}: expected an RPC error, got {other:?}"),
    }
}

/// The call failed with code Unknown and a message holding every one of `words`.
fn assert_unknown<T: std::fmt::Debug>(what: &str, r: Result<T, VtctldError>, words: &[&str]) {
    let (code, message) = rpc_error(what, r);
    assert_eq!(code, tonic::Code::Unknown, "{what}: {message}");
    for w in words {
        assert!(message.contains(w), "{what}: {w:?} not in {message:?}");
    }
}

/// A GTID position as vtctld prints it: `<flavor>/<set>`.
fn assert_position(what: &str, p: &str) {
    let (flavor, set) = p
        .split_once('/')
        .unwrap_or_else(|| panic!("{what}: position {p:?} has no flavor"));
    assert!(["MySQL56", "MariaDB"].contains(&flavor), "{what}: {p:?}");
    assert!(!set.is_empty(), "{what}: empty GTID set in {p:?}");
}

fn assert_replicating(what: &str, s: &Status) {
    assert_eq!(
        (s.io_state, s.sql_state),
        (STATE_RUNNING, STATE_RUNNING),
        "{what}: {s:?}"
    );
    assert!(!s.replication_lag_unknown, "{what}: {s:?}");
    assert!(
        s.last_io_error.is_empty() && s.last_sql_error.is_empty(),
        "{what}: {s:?}"
    );
    assert_position(what, &s.position);
}

fn assert_stopped(what: &str, s: &Status) {
    assert_eq!(
        (s.io_state, s.sql_state),
        (STATE_STOPPED, STATE_STOPPED),
        "{what}: {s:?}"
    );
    assert!(
        s.replication_lag_unknown,
        "{what}: a stopped replica's lag is unknown: {s:?}"
    );
}

fn tablet_type(t: &Tablet) -> TabletType {
    TabletType::try_from(t.r#type).unwrap_or(TabletType::Unknown)
}

async fn type_of(s: &impl Subject, alias: &TabletAlias) -> TabletType {
    tablet_type(&s.client().get_tablet(alias).await.unwrap())
}

/// Polls `check` until it answers `Some`, for at most [`LIMIT`].
async fn wait_for<T, F: Future<Output = Option<T>>>(what: &str, mut check: impl FnMut() -> F) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(start.elapsed() < LIMIT, "{what}: not within {LIMIT:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The tablet's full status once its tablet manager reaches mysqld again.
async fn full_status_once_up(s: &impl Subject, alias: &TabletAlias) -> FullStatus {
    wait_for(&format!("{alias} answers GetFullStatus"), || async {
        s.client().get_full_status(alias).await.ok()
    })
    .await
}

async fn wait_replicating(s: &impl Subject, alias: &TabletAlias) {
    wait_for(&format!("{alias} replicates"), || async {
        let st = s
            .client()
            .get_full_status(alias)
            .await
            .ok()?
            .replication_status?;
        (st.io_state == STATE_RUNNING && st.sql_state == STATE_RUNNING).then_some(())
    })
    .await;
}

fn keys<V>(m: &std::collections::HashMap<String, V>) -> BTreeSet<String> {
    m.keys().cloned().collect()
}

fn names(aliases: &[&TabletAlias]) -> BTreeSet<String> {
    aliases.iter().map(|a| a.to_string()).collect()
}

// ---- clauses ----

async fn the_shard_names_its_primary(s: &impl Subject) {
    let sh = s.client().get_shard(KEYSPACE, SHARD).await.unwrap();
    assert_eq!(
        sh.primary_alias.as_ref().map(TabletAlias::from),
        Some(s.primary())
    );
    assert!(sh.is_primary_serving);
}

async fn what_does_not_exist_is_unknown_and_said_so(s: &impl Subject) {
    let c = s.client();
    let missing = ["node doesn't exist", "/keyspaces/commerce/shards/80-/Shard"];
    assert_unknown(
        "GetShard of a missing shard",
        c.get_shard(KEYSPACE, "80-").await,
        &missing,
    );
    assert_unknown(
        "GetShard of a missing keyspace",
        c.get_shard("nope", SHARD).await,
        &["node doesn't exist", "/keyspaces/nope/shards/-/Shard"],
    );
    assert_unknown(
        "GetTablets of a missing shard",
        c.get_tablets(KEYSPACE, "80-").await,
        &missing,
    );
    assert_unknown(
        "ShardReplicationPositions of a missing shard",
        c.shard_replication_positions(KEYSPACE, "80-").await,
        &missing,
    );
    let nobody: TabletAlias = "zone1-0000000199".parse().unwrap();
    let no_tablet = ["node doesn't exist", "/tablets/zone1-0000000199/Tablet"];
    assert_unknown(
        "GetTablet of a missing tablet",
        c.get_tablet(&nobody).await,
        &no_tablet,
    );
    assert_unknown(
        "GetFullStatus of a missing tablet",
        c.get_full_status(&nobody).await,
        &no_tablet,
    );
    assert_unknown(
        "ChangeTabletType of a missing tablet",
        c.change_tablet_type(&nobody, TabletType::Drained).await,
        &no_tablet,
    );
}

async fn tablets_carry_what_vtsnap_reads(s: &impl Subject) {
    let tablets = s.client().get_tablets(KEYSPACE, SHARD).await.unwrap();
    let [r1, r2] = s.replicas();
    let primary = s.primary();
    let listed: BTreeSet<String> = tablets
        .iter()
        .map(|t| TabletAlias::from(t.alias.as_ref().unwrap()).to_string())
        .collect();
    assert_eq!(listed, names(&[&primary, &r1, &r2]));
    for t in &tablets {
        let alias = TabletAlias::from(t.alias.as_ref().unwrap());
        let want = if alias == primary {
            TabletType::Primary
        } else {
            TabletType::Replica
        };
        assert_eq!(tablet_type(t), want, "{t:?}");
        assert!(!t.hostname.is_empty(), "{t:?}");
        for port in ["grpc", "vt"] {
            assert!(
                t.port_map.get(port).is_some_and(|p| *p > 0),
                "{port}: {t:?}"
            );
        }
        assert!(t.mysql_port > 0, "{t:?}");
        assert_eq!(
            (t.keyspace.as_str(), t.shard.as_str()),
            (KEYSPACE, SHARD),
            "{t:?}"
        );
    }
}

/// Shape of what both roles report: a real server's values are checked by form only.
fn assert_server(what: &str, f: &FullStatus) {
    assert!(
        f.version.starts_with(|c: char| c.is_ascii_digit()),
        "{what}: {f:?}"
    );
    assert!(
        !f.server_uuid.is_empty() && f.server_id > 0,
        "{what}: {f:?}"
    );
    assert_eq!(f.gtid_mode, "ON", "{what}");
    assert_eq!(f.binlog_format, "ROW", "{what}");
    assert!(f.log_bin_enabled && f.log_replica_updates, "{what}: {f:?}");
    // Every tablet writes binlogs: a replica has a primary status too.
    let ps = f
        .primary_status
        .as_ref()
        .unwrap_or_else(|| panic!("{what}: {f:?}"));
    assert_position(what, &ps.position);
}

async fn full_status_carries_what_vtsnap_reads(s: &impl Subject) {
    let c = s.client();
    let p = c.get_full_status(&s.primary()).await.unwrap();
    assert_server("the primary", &p);
    assert!(
        p.replication_status.is_none(),
        "the primary does not replicate: {p:?}"
    );
    assert!(!p.read_only && !p.super_read_only, "{p:?}");
    for r in s.replicas() {
        let f = c.get_full_status(&r).await.unwrap();
        let what = format!("replica {r}");
        assert_server(&what, &f);
        assert_replicating(&what, f.replication_status.as_ref().unwrap());
        assert!(f.read_only && f.super_read_only, "{what}: {f:?}");
    }
}

async fn positions_give_the_primary_its_position_only(s: &impl Subject) {
    let c = s.client();
    let [r1, r2] = s.replicas();
    let primary = s.primary();
    let pos = c
        .shard_replication_positions(KEYSPACE, SHARD)
        .await
        .unwrap();
    let all = names(&[&primary, &r1, &r2]);
    assert_eq!(keys(&pos.replication_statuses), all);
    assert_eq!(keys(&pos.tablet_map), all);
    let p = &pos.replication_statuses[&primary.to_string()];
    assert_eq!(
        (
            p.io_state,
            p.sql_state,
            p.source_host.as_str(),
            p.source_port
        ),
        (0, 0, "", 0),
        "the primary's entry is its position only: {p:?}"
    );
    let binlogs = c
        .get_full_status(&primary)
        .await
        .unwrap()
        .primary_status
        .unwrap();
    assert_eq!(
        p.position, binlogs.position,
        "the primary's position is its binlogs'"
    );
    for r in [&r1, &r2] {
        assert_replicating(
            &format!("positions of {r}"),
            &pos.replication_statuses[&r.to_string()],
        );
        assert_eq!(
            tablet_type(&pos.tablet_map[&r.to_string()]),
            TabletType::Replica
        );
    }
}

async fn a_drained_tablet_leaves_the_positions(s: &impl Subject) {
    let c = s.client();
    let [r1, r2] = s.replicas();
    let changed = c
        .change_tablet_type(&r1, TabletType::Drained)
        .await
        .unwrap();
    assert_eq!(
        changed.before_tablet.as_ref().map(tablet_type),
        Some(TabletType::Replica)
    );
    assert_eq!(
        changed.after_tablet.as_ref().map(tablet_type),
        Some(TabletType::Drained)
    );
    assert_eq!(type_of(s, &r1).await, TabletType::Drained);
    let pos = c
        .shard_replication_positions(KEYSPACE, SHARD)
        .await
        .unwrap();
    let rest = names(&[&s.primary(), &r2]);
    assert_eq!(keys(&pos.replication_statuses), rest, "DRAINED is left out");
    assert_eq!(
        keys(&pos.tablet_map),
        rest,
        "DRAINED is left out of the map too"
    );
    // Draining does not touch replication, and the tablet is still listed.
    let full = c.get_full_status(&r1).await.unwrap();
    assert_replicating(
        "a drained replica",
        full.replication_status.as_ref().unwrap(),
    );
    assert_eq!(c.get_tablets(KEYSPACE, SHARD).await.unwrap().len(), 3);

    c.change_tablet_type(&r1, TabletType::Replica)
        .await
        .unwrap();
    let pos = c
        .shard_replication_positions(KEYSPACE, SHARD)
        .await
        .unwrap();
    assert_eq!(keys(&pos.replication_statuses).len(), 3, "back as REPLICA");
}

async fn nothing_changes_to_or_from_primary(s: &impl Subject) {
    let c = s.client();
    let [r1, _] = s.replicas();
    let primary = s.primary();
    let refused = |from: &str, to: &str, uid: u32| {
        format!(
            "uid:{uid} type change {from} -> {to} is not an allowed transition for ChangeTabletType"
        )
    };
    assert_unknown(
        "PRIMARY -> DRAINED",
        c.change_tablet_type(&primary, TabletType::Drained).await,
        &[&refused("PRIMARY", "DRAINED", primary.uid.get())],
    );
    assert_unknown(
        "REPLICA -> PRIMARY",
        c.change_tablet_type(&r1, TabletType::Primary).await,
        &[&refused("REPLICA", "PRIMARY", r1.uid.get())],
    );
    assert_unknown(
        "REPLICA -> RESTORE",
        c.change_tablet_type(&r1, TabletType::Restore).await,
        &[&refused("REPLICA", "RESTORE", r1.uid.get())],
    );
    assert_eq!(type_of(s, &primary).await, TabletType::Primary);
    assert_eq!(type_of(s, &r1).await, TabletType::Replica);
    // A change to the type it has is no change, and allowed.
    let same = c
        .change_tablet_type(&r1, TabletType::Replica)
        .await
        .unwrap();
    assert_eq!(
        same.after_tablet.as_ref().map(tablet_type),
        Some(TabletType::Replica)
    );
}

async fn replication_stops_and_starts(s: &impl Subject) {
    let c = s.client();
    let [r1, _] = s.replicas();
    let primary = s.primary();
    c.stop_replication(&primary).await.unwrap();
    let p = c.get_full_status(&primary).await.unwrap();
    assert!(
        p.replication_status.is_none(),
        "stopping the primary does nothing: {p:?}"
    );
    assert_eq!(type_of(s, &primary).await, TabletType::Primary);
    assert_unknown(
        "StartReplication on the primary",
        c.start_replication(&primary).await,
        &[
            &format!("TabletManager.StartReplication on {primary}"),
            "not configured as replica",
            "(errno 1200)",
        ],
    );

    c.stop_replication(&r1).await.unwrap();
    let st = c
        .get_full_status(&r1)
        .await
        .unwrap()
        .replication_status
        .unwrap();
    assert_stopped("a stopped replica", &st);
    c.stop_replication(&r1).await.unwrap();
    let pos = c
        .shard_replication_positions(KEYSPACE, SHARD)
        .await
        .unwrap();
    assert_stopped(
        "positions of a stopped replica",
        &pos.replication_statuses[&r1.to_string()],
    );
    assert_position(
        "a stopped replica",
        &pos.replication_statuses[&r1.to_string()].position,
    );

    c.start_replication(&r1).await.unwrap();
    wait_replicating(s, &r1).await;
    c.start_replication(&r1).await.unwrap();
    let st = c
        .get_full_status(&r1)
        .await
        .unwrap()
        .replication_status
        .unwrap();
    assert_replicating("a started replica", &st);
}

async fn dba_fetches_answer_variables_and_refuse_unknown_ones(s: &impl Subject) {
    let c = s.client();
    let [r1, _] = s.replicas();
    for alias in [s.primary(), r1.clone()] {
        let r = c
            .execute_fetch_as_dba(
                &alias,
                "SELECT @@sync_binlog, @@global.innodb_flush_log_at_trx_commit",
                1,
            )
            .await
            .unwrap();
        assert_eq!(r.rows.len(), 1, "{r:?}");
        assert_eq!(
            r.rows[0].cells(),
            vec![Some("1".to_owned()), Some("1".to_owned())]
        );
    }
    assert_unknown(
        "an unknown variable",
        c.execute_fetch_as_dba(&r1, "SELECT @@nope", 1).await,
        &[
            &format!("TabletManager.ExecuteFetchAsDba on {r1}"),
            "Unknown system variable 'nope'",
            "(errno 1193)",
        ],
    );
}

async fn a_replica_whose_mysqld_is_down_fails_what_reaches_it(s: &impl Subject) {
    let c = s.client();
    let [_, r2] = s.replicas();
    s.set_mysqld(&r2, true).await;

    let tablets = c.get_tablets(KEYSPACE, SHARD).await.unwrap();
    assert_eq!(tablets.len(), 3, "vtctld still lists it");
    let down = |rpc: &str| format!("TabletManager.{rpc} on {r2}");
    let dial = "(errno 2002)";
    assert_unknown(
        "GetFullStatus",
        c.get_full_status(&r2).await,
        &[&down("FullStatus"), dial],
    );
    assert_unknown(
        "StopReplication",
        c.stop_replication(&r2).await,
        &[&down("StopReplication"), dial],
    );
    assert_unknown(
        "StartReplication",
        c.start_replication(&r2).await,
        &[&down("StartReplication"), dial],
    );
    assert_unknown(
        "ChangeTabletType",
        c.change_tablet_type(&r2, TabletType::Drained).await,
        &[&down("ChangeType"), dial],
    );
    assert_eq!(
        type_of(s, &r2).await,
        TabletType::Replica,
        "a failed change changes nothing"
    );
    assert_unknown(
        "ExecuteFetchAsDBA",
        c.execute_fetch_as_dba(&r2, "SELECT @@sync_binlog", 1).await,
        &[&down("ExecuteFetchAsDba"), dial],
    );
    assert_unknown(
        "ShardReplicationPositions",
        c.shard_replication_positions(KEYSPACE, SHARD).await,
        &[
            &format!("ReplicationStatus({r2}) failed"),
            &down("ReplicationStatus"),
            dial,
        ],
    );

    s.set_mysqld(&r2, false).await;
    let full = full_status_once_up(s, &r2).await;
    assert_stopped(
        "a replica whose mysqld is back",
        full.replication_status.as_ref().unwrap(),
    );
    assert_eq!(type_of(s, &r2).await, TabletType::Replica);
    c.start_replication(&r2).await.unwrap();
    wait_replicating(s, &r2).await;
    let pos = c
        .shard_replication_positions(KEYSPACE, SHARD)
        .await
        .unwrap();
    assert_eq!(pos.replication_statuses.len(), 3);
}

async fn a_drained_tablet_whose_mysqld_is_down_is_left_out(s: &impl Subject) {
    let c = s.client();
    let [r1, r2] = s.replicas();
    c.change_tablet_type(&r1, TabletType::Drained)
        .await
        .unwrap();
    s.set_mysqld(&r1, true).await;
    let pos = c
        .shard_replication_positions(KEYSPACE, SHARD)
        .await
        .unwrap();
    assert_eq!(
        keys(&pos.replication_statuses),
        names(&[&s.primary(), &r2]),
        "a DRAINED tablet is not asked, so its mysqld does not fail the call"
    );

    s.set_mysqld(&r1, false).await;
    full_status_once_up(s, &r1).await;
    assert_eq!(type_of(s, &r1).await, TabletType::Drained);
    c.change_tablet_type(&r1, TabletType::Replica)
        .await
        .unwrap();
    c.start_replication(&r1).await.unwrap();
    wait_replicating(s, &r1).await;
}
