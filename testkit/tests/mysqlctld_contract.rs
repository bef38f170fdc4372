//! The contract between vtsnap and mysqlctld, held against both mysqlctlds vtsnap's tests
//! meet: the fake (`vtsnap_testkit::fake_mysqlctld`, whose work a supervisor in a MariaDB
//! container does) and a real one (Vitess 24's mysqlctld running MySQL 9.7 in a tablet's
//! mysqld container, `vtsnap_testkit::vitess`). One set of clauses runs against each,
//! through vtsnap-node's own client: where the socket is, what VersionString looks like,
//! that Shutdown returns only once mysqld is down and nothing restarts it, that a Shutdown
//! while down succeeds, that Start returns once mysqld answers, and what a Start while
//! mysqld runs does — it is answered, and then mysqlctld exits and takes mysqld with it
//! (killed, not shut down), so vtsnap must never `Start` a mysqld that answers.
//!
//! The clauses run in sequence on one tablet; the last one ends it. The fake needs the
//! MariaDB image and the Podman API (`DOCKER_HOST`); the real subject needs what
//! `vtsnap_testkit::vitess` needs (root, Podman, the Vitess image, etcd) and takes about
//! 40 s (a one-tablet shard, no VTOrc).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use vtsnap_node::mysqlctl::{MysqlCtl, MysqlCtlError, mysqld_answers};
use vtsnap_testkit::fake_mysqlctld::{FakeMysqlctld, Serving};
use vtsnap_testkit::mariadb::SupervisedTablet;
use vtsnap_testkit::vitess::{CloneSupport, Durability, Orchestrator, VitessOptions, VitessShard};

/// How long a Shutdown or Start may take, and how long an awaited event may take to come.
const LIMIT: Duration = Duration::from_secs(120);
/// How long mysqld is watched after a Shutdown for anything bringing it back: longer than
/// the restart the volume-snapshot RFC saw (a `Start` about 8 s after the Shutdown) and
/// several of vttablet's health checks (every 2 s here).
const STAYS_DOWN: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(200);

/// One tablet's mysqld container, whose mysqlctld serves `<socket_dir>/mysqlctl.sock`.
trait Subject {
    /// The Pod's `/vt/socket` on the host.
    fn socket_dir(&self) -> &Path;
    /// `SELECT 1` through a client in the mysqld container.
    fn sql(&self) -> impl Future<Output = Result<(), String>>;
    /// mysqld's error log.
    fn error_log(&self) -> String;
    /// What the containers said, for a failure message.
    fn story(&self) -> String;
}

/// Fields drop in order: the server and the container before their directories.
struct Fake {
    fake: FakeMysqlctld,
    _serving: Serving,
    tablet: SupervisedTablet,
}

impl Fake {
    async fn start() -> Self {
        let tablet = SupervisedTablet::start("vtsnap-contract-", 101).await;
        // No supervisor restart: the real mysqlctld has none.
        let fake = FakeMysqlctld::new(&tablet.socket_dir, &tablet.tablet_dir);
        let serving = fake.serve().await;
        Self {
            fake,
            _serving: serving,
            tablet,
        }
    }
}

impl Subject for Fake {
    fn socket_dir(&self) -> &Path {
        &self.tablet.socket_dir
    }
    async fn sql(&self) -> Result<(), String> {
        self.tablet.db.try_query("SELECT 1").await.map(|_| ())
    }
    fn error_log(&self) -> String {
        std::fs::read_to_string(self.tablet.tablet_dir.join("error.log")).unwrap_or_default()
    }
    fn story(&self) -> String {
        format!(
            "fake mysqlctld's calls: {:?}; mysqld container {}",
            self.fake.calls(),
            self.tablet.db.id()
        )
    }
}

/// Fields drop in order: the shard's containers go before their volumes.
struct Real {
    shard: VitessShard,
    _volumes: tempfile::TempDir,
}

impl Real {
    async fn start() -> Self {
        let volumes = tempfile::Builder::new()
            .prefix("vtsnap-contract-")
            .tempdir_in("/var/tmp")
            .unwrap();
        let shard = VitessShard::start(VitessOptions {
            uids: vec![101],
            durability: Durability::None,
            vtorc: Orchestrator::Off,
            volumes: volumes.path().to_path_buf(),
            clone: CloneSupport::Off,
            extra_cnf: String::new(),
            vtorc_refresh: vtsnap_testkit::vitess::VTORC_REFRESH,
            backups: vtsnap_testkit::vitess::BackupStorage::File,
        })
        .await;
        Self {
            shard,
            _volumes: volumes,
        }
    }
}

impl Subject for Real {
    fn socket_dir(&self) -> &Path {
        &self.shard.primary().socket_dir
    }
    async fn sql(&self) -> Result<(), String> {
        self.shard.primary().sql("SELECT 1").await.map(|_| ())
    }
    fn error_log(&self) -> String {
        let t = self.shard.primary();
        std::fs::read_to_string(t.tablet_dir().join("error.log")).unwrap_or_default()
    }
    fn story(&self) -> String {
        self.shard.primary().logs(30)
    }
}

#[tokio::test]
async fn the_fake_mysqlctld_keeps_the_contract() {
    keeps_the_contract(&Fake::start().await).await;
}

#[tokio::test]
async fn the_real_mysqlctld_keeps_the_contract() {
    keeps_the_contract(&Real::start().await).await;
}

async fn keeps_the_contract(s: &impl Subject) {
    the_socket_is_mysqlctl_sock_and_a_missing_one_is_told_apart(s).await;
    the_version_names_the_server(s).await;
    shutdown_returns_once_mysqld_is_down_and_nothing_restarts_it(s).await;
    start_returns_once_mysqld_answers(s).await;
    a_start_while_mysqld_runs_is_answered_then_mysqlctld_exits_and_kills_it(s).await;
}

// ---- helpers ----

fn socket(s: &impl Subject) -> PathBuf {
    s.socket_dir().join("mysqlctl.sock")
}

fn mysqld_socket(s: &impl Subject) -> PathBuf {
    s.socket_dir().join("mysql.sock")
}

fn client(s: &impl Subject) -> MysqlCtl {
    MysqlCtl::new(&socket(s)).unwrap_or_else(|e| panic!("{e}\n{}", s.story()))
}

/// `Ver ` and a digit: what `Ver 9.7.4-2 (Debian)` (mysqld up: its `@@version`) and
/// `/usr/sbin/mysqld  Ver 9.7.4-2 for Linux …` (down: `mysqld --version`) share.
fn assert_version(what: &str, v: &str) {
    let at = v
        .find("Ver ")
        .unwrap_or_else(|| panic!("{what}: no \"Ver \" in {v:?}"));
    assert!(
        v[at + 4..].starts_with(|c: char| c.is_ascii_digit()),
        "{what}: no version number after \"Ver \" in {v:?}"
    );
}

/// Polls `check` until it answers `Some`, for at most [`LIMIT`].
async fn wait_for<T, F: Future<Output = Option<T>>>(
    s: &impl Subject,
    what: &str,
    mut check: impl FnMut() -> F,
) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            start.elapsed() < LIMIT,
            "{what}: not within {LIMIT:?}\n{}",
            s.story()
        );
        tokio::time::sleep(POLL).await;
    }
}

fn assert_unavailable<T: std::fmt::Debug>(
    s: &impl Subject,
    what: &str,
    r: Result<T, MysqlCtlError>,
) {
    match r {
        Err(MysqlCtlError::Rpc {
            code: tonic::Code::Unavailable,
            ..
        }) => {}
        other => panic!("{what}: expected UNAVAILABLE, got {other:?}\n{}", s.story()),
    }
}

// ---- clauses ----

/// The socket is `<socket_dir>/mysqlctl.sock`; a path with nothing at it is `SocketMissing`
/// before any call is made.
async fn the_socket_is_mysqlctl_sock_and_a_missing_one_is_told_apart(s: &impl Subject) {
    assert!(socket(s).exists(), "{}", s.story());
    client(s).version(LIMIT).await.unwrap();
    let missing = s.socket_dir().join("missing.sock");
    match MysqlCtl::new(&missing) {
        Err(MysqlCtlError::SocketMissing { path }) => {
            assert_eq!(path, missing.display().to_string());
        }
        other => panic!("a missing socket: {other:?}"),
    }
}

async fn the_version_names_the_server(s: &impl Subject) {
    let v = client(s).version(LIMIT).await.unwrap();
    assert_version("VersionString while mysqld runs", &v);
}

async fn shutdown_returns_once_mysqld_is_down_and_nothing_restarts_it(s: &impl Subject) {
    let ctl = client(s);
    let mysqld = mysqld_socket(s);
    assert!(mysqld_answers(&mysqld).await, "{}", s.story());
    ctl.shutdown(LIMIT).await.unwrap();
    assert!(
        !mysqld_answers(&mysqld).await,
        "Shutdown returned while mysqld still answers\n{}",
        s.story()
    );
    assert!(s.sql().await.is_err(), "SQL works after the Shutdown");

    // A second Shutdown while down succeeds and changes nothing.
    ctl.shutdown(LIMIT).await.unwrap();
    assert!(!mysqld_answers(&mysqld).await);
    // mysqlctld itself still answers.
    let v = ctl.version(LIMIT).await.unwrap();
    assert_version("VersionString while mysqld is down", &v);

    // Nothing brings mysqld back but a Start: a non-event, so it is watched for a while.
    let start = Instant::now();
    while start.elapsed() < STAYS_DOWN {
        assert!(
            !mysqld_answers(&mysqld).await,
            "mysqld came back {:?} after the Shutdown with nobody asking\n{}",
            start.elapsed(),
            s.story()
        );
        tokio::time::sleep(POLL).await;
    }
    assert!(s.sql().await.is_err(), "SQL works while mysqld is down");
}

async fn start_returns_once_mysqld_answers(s: &impl Subject) {
    let mysqld = mysqld_socket(s);
    assert!(!mysqld_answers(&mysqld).await);
    client(s).start(LIMIT).await.unwrap();
    assert!(
        mysqld_answers(&mysqld).await,
        "Start returned before mysqld answers\n{}",
        s.story()
    );
    s.sql()
        .await
        .unwrap_or_else(|e| panic!("SQL after the Start: {e}\n{}", s.story()));
}

/// The real mysqlctld answers a Start while mysqld runs (mysqld answers its wait), but the
/// `mysqld_safe` it launched finds mysqld running and exits, which mysqlctld takes for
/// mysqld's death: it exits, and with its container's PID 1 gone mysqld is killed. The
/// socket file stays, so the client is made and every call fails UNAVAILABLE. (An image
/// without `mysqld_safe` takes another path in Vitess's `mysqld.go`: mysqlctld starts
/// mysqld itself and fails the Start, the socket's lock file naming a live process; this
/// suite's image has it, as Debian's MySQL packages do.)
async fn a_start_while_mysqld_runs_is_answered_then_mysqlctld_exits_and_kills_it(s: &impl Subject) {
    let ctl = client(s);
    let mysqld = mysqld_socket(s);
    assert!(mysqld_answers(&mysqld).await, "{}", s.story());
    ctl.start(LIMIT)
        .await
        .unwrap_or_else(|e| panic!("Start while mysqld runs: {e}\n{}", s.story()));

    wait_for(
        s,
        "mysqlctld exits after a Start while mysqld runs",
        || async {
            match ctl.version(Duration::from_secs(5)).await {
                Err(MysqlCtlError::Rpc {
                    code: tonic::Code::Unavailable,
                    ..
                }) => Some(()),
                _ => None,
            }
        },
    )
    .await;
    wait_for(s, "mysqld goes with mysqlctld", || async {
        (!mysqld_answers(&mysqld).await).then_some(())
    })
    .await;

    // Killed, not shut down: since its last start, mysqld logged no clean shutdown.
    let log = s.error_log();
    let last_start = log
        .rfind("ready for connections")
        .unwrap_or_else(|| panic!("no start in mysqld's error log:\n{log}"));
    assert!(
        !log[last_start..].contains("Shutdown complete"),
        "mysqld was shut down cleanly, not killed:\n{}",
        &log[last_start..]
    );

    // A dead mysqlctld is not a missing socket: it refuses every call.
    assert!(socket(s).exists(), "the socket file stays");
    let again = client(s);
    assert_unavailable(s, "Start after mysqlctld exited", again.start(LIMIT).await);
    assert_unavailable(
        s,
        "Shutdown after mysqlctld exited",
        again.shutdown(LIMIT).await,
    );
    assert!(!mysqld_answers(&mysqld).await, "nothing restarts mysqld");
}
