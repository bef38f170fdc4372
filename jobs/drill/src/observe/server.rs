//! Observe, for the checker: waits for the restored mysqld on its unix socket, reads its
//! GTID position and runs `CHECK TABLE … QUICK` on the user tables within a time budget
//! (docs/design.md §5.9). Everything the server says is data to judge, never trusted:
//! names and messages are escaped where they are printed, counts are bounded.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder};
use vtsnap_core::snapshot::GtidFlavor;

use crate::decide::verdict::{Observed, TableCheck, table_problem};

/// More user tables than this are not listed (the rest are not checked).
pub const MAX_TABLES: usize = 100_000;

/// Schemas of the server itself, never checked.
const SYSTEM_SCHEMAS: &str = "'mysql','information_schema','performance_schema','sys'";

/// How the probe reaches the server and how long it may take.
#[derive(Debug, Clone)]
pub struct ProbeOptions {
    pub socket: PathBuf,
    /// Any user: the drill's mysqld runs with `--skip-grant-tables` (socket only).
    pub user: String,
    /// How long mysqld may take to answer (crash recovery included).
    pub ready_timeout: Duration,
    /// How long the table checks may take in all; beyond it, the rest is not checked.
    pub table_budget: Duration,
    /// Where in the table list the checks start (rotates the sample between drills).
    pub sample_seed: u64,
    pub flavor: GtidFlavor,
}

/// What the probe saw, and how long mysqld took to answer.
#[derive(Debug, Clone)]
pub struct Probed {
    pub observed: Observed,
    pub mysqld_ready_ms: u64,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// One connection attempt. A socket path longer than `sun_path` holds (a volume mounted
/// deep under the node's kubelet or CSI directory) is reached through its directory's
/// descriptor, held open until the connection is made.
async fn connect_once(o: &ProbeOptions) -> Result<Conn, mysql_async::Error> {
    // The connection keeps the short path as its address, but never dials it again: a
    // connection with a socket is not reconnected, and the checker neither resets nor
    // changes user on it.
    let (_dir, socket) = vtsnap_core::unixsock::short_path(&o.socket)?;
    let opts = OptsBuilder::default()
        .socket(Some(socket.to_string_lossy().into_owned()))
        .user(Some(o.user.clone()))
        .prefer_socket(true);
    Conn::new(opts).await
}

/// Connects, retrying until `ready_timeout`; `Err` with the last error when it never
/// answered.
async fn connect(o: &ProbeOptions) -> Result<(Conn, Duration), String> {
    let start = Instant::now();
    loop {
        let attempt = tokio::time::timeout(Duration::from_secs(10), connect_once(o));
        let last = match attempt.await {
            Ok(Ok(conn)) => return Ok((conn, start.elapsed())),
            Ok(Err(e)) if never_reachable(&e) => {
                return Err(format!("{e} (socket {})", o.socket.display()));
            }
            Ok(Err(e)) => e.to_string(),
            Err(_) => "no answer within 10s".to_owned(),
        };
        if start.elapsed() >= o.ready_timeout {
            return Err(format!(
                "{last} (waited {}s on {})",
                o.ready_timeout.as_secs(),
                o.socket.display()
            ));
        }
        // mysqld creates the socket only once recovery is done: nothing to wait on but
        // the socket itself.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A socket path the system refuses as such (not a directory, no file name): no wait
/// can change it, so the drill says so at once instead of at `ready_timeout`.
fn never_reachable(e: &mysql_async::Error) -> bool {
    matches!(e, mysql_async::Error::Io(mysql_async::IoError::Io(io))
        if matches!(io.kind(), std::io::ErrorKind::InvalidInput | std::io::ErrorKind::NotADirectory))
}

/// The server's executed GTID set, as it prints it.
async fn position(conn: &mut Conn, flavor: GtidFlavor) -> Option<String> {
    let q = match flavor {
        GtidFlavor::Mariadb => "SELECT @@global.gtid_binlog_pos",
        GtidFlavor::Mysql56 => "SELECT @@global.gtid_executed",
    };
    conn.query_first::<String, _>(q).await.ok().flatten()
}

/// `schema.table` of every base table of the user schemas, up to [`MAX_TABLES`], sorted.
async fn tables(conn: &mut Conn) -> Result<Vec<(String, String)>, String> {
    let q = format!(
        "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES \
         WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN ({SYSTEM_SCHEMAS}) \
         ORDER BY TABLE_SCHEMA, TABLE_NAME LIMIT {MAX_TABLES}"
    );
    conn.query::<(String, String), _>(q)
        .await
        .map_err(|e| format!("listing the tables: {e}"))
}

/// A quoted identifier (a backtick in a name is doubled).
fn quoted(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// Waits for the server, then observes it. `Err`: it never answered.
pub async fn probe(o: &ProbeOptions) -> Result<Probed, String> {
    let (mut conn, ready) = connect(o).await?;
    let mut observed = Observed {
        position: position(&mut conn, o.flavor).await,
        ..Observed::default()
    };
    let list = match tables(&mut conn).await {
        Ok(list) => list,
        Err(e) => {
            observed.checks.push(TableCheck {
                table: "information_schema.TABLES".into(),
                problem: Some(e),
            });
            return Ok(Probed {
                observed,
                mysqld_ready_ms: ms(ready),
            });
        }
    };
    observed.tables_total = list.len();
    let deadline = Instant::now() + o.table_budget;
    let first = usize::try_from(o.sample_seed % (list.len().max(1) as u64)).unwrap_or(0);
    for i in 0..list.len() {
        let (schema, table) = &list[(first + i) % list.len()];
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let q = format!("CHECK TABLE {}.{} QUICK", quoted(schema), quoted(table));
        let rows = tokio::time::timeout(
            left,
            conn.query::<(Option<String>, Option<String>, String, String), _>(q),
        )
        .await;
        let problem = match rows {
            // The budget ran out inside this check: it is not counted.
            Err(_) => break,
            Ok(Ok(rows)) => {
                let rows: Vec<(String, String)> = rows
                    .into_iter()
                    .map(|(_, _, kind, text)| (kind, text))
                    .collect();
                table_problem(&rows)
            }
            Ok(Err(e)) => Some(e.to_string()),
        };
        let gone = problem.is_some() && conn.ping().await.is_err();
        observed.checks.push(TableCheck {
            table: format!("{schema}.{table}"),
            problem: problem.map(|p| {
                if gone {
                    format!("{p} (mysqld went away while checking it)")
                } else {
                    p
                }
            }),
        });
        if gone {
            break;
        }
    }
    let _ = conn.disconnect().await;
    Ok(Probed {
        observed,
        mysqld_ready_ms: ms(ready),
    })
}

/// Asks the server to stop (`SHUTDOWN`), so that the drill Pod completes once checked.
/// A server that already went away is what was asked for.
pub async fn shutdown(o: &ProbeOptions) -> Result<(), String> {
    let mut conn = match tokio::time::timeout(Duration::from_secs(10), connect_once(o)).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return Err(format!("cannot connect to shut mysqld down: {e}")),
        Err(_) => return Err("cannot connect to shut mysqld down within 10s".into()),
    };
    match conn.query_drop("SHUTDOWN").await {
        Ok(()) => Ok(()),
        Err(e) => Err(format!("SHUTDOWN: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_quoted_with_backticks_doubled() {
        assert_eq!(quoted("orders"), "`orders`");
        assert_eq!(quoted("a`b"), "`a``b`");
        assert_eq!(quoted("x`; DROP TABLE y; --"), "`x``; DROP TABLE y; --`");
    }

    /// The volume of a drill run from the node side sits deep under a kubelet or CSI
    /// directory; its socket path is longer than `sun_path` and must still be reached.
    #[tokio::test]
    async fn a_socket_path_longer_than_sun_path_is_reached() {
        let d = tempfile::tempdir().unwrap();
        let deep = d.path().join("v".repeat(100)).join("socket");
        std::fs::create_dir_all(&deep).unwrap();
        let socket = deep.join("mysql.sock");
        assert!(socket.as_os_str().len() > 108);
        let listener = vtsnap_core::unixsock::bind(&socket).unwrap();
        let o = ProbeOptions {
            socket,
            user: "root".into(),
            ready_timeout: Duration::from_secs(1),
            table_budget: Duration::from_secs(1),
            sample_seed: 0,
            flavor: GtidFlavor::Mariadb,
        };
        // The listener never greets, so the client waits in its handshake: what matters
        // is that its connection arrived at all.
        let reached = tokio::time::timeout(Duration::from_secs(60), async {
            tokio::select! {
                accepted = listener.accept() => assert!(accepted.is_ok()),
                failed = connect_once(&o) => panic!("the client gave up before connecting: {failed:?}"),
            }
        });
        reached.await.expect("neither connected nor failed");
    }

    /// A path that can never be a socket (a regular file where its directory should be)
    /// fails at once, not after the wait for mysqld.
    #[tokio::test]
    async fn a_socket_path_that_can_never_work_fails_at_once() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("file"), b"").unwrap();
        let o = ProbeOptions {
            socket: d.path().join("file").join("mysql.sock"),
            user: "root".into(),
            ready_timeout: Duration::from_secs(3600),
            table_budget: Duration::from_secs(1),
            sample_seed: 0,
            flavor: GtidFlavor::Mariadb,
        };
        let e = tokio::time::timeout(Duration::from_secs(60), connect(&o))
            .await
            .expect("still waiting for a socket that cannot exist")
            .unwrap_err();
        assert!(e.contains("mysql.sock"), "{e}");
    }
}
