//! The fake vtctld's link to the real tablets: replication control, GTID positions and
//! ExecuteFetchAsDBA run on the lab's MariaDB servers. Each call is timed: it runs a
//! client through `podman exec`, which a real vttablet does not, so the benchmark can
//! tell that cost apart from vtsnap's own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::BoxFuture;
use vtsnap_core::naming::TabletAlias;
use vtsnap_testkit::fake_vtctld::{Backend, FetchResult};
use vtsnap_testkit::mariadb::MariaDb;

/// Tablet alias → its server. Shared, so tablets can be added while vtctld serves. Weak:
/// the lab owns the servers, and vtctld's tasks must not keep a container alive after it.
#[derive(Debug, Clone, Default)]
pub struct LabBackend {
    servers: Arc<RwLock<HashMap<String, Weak<MariaDb>>>>,
    /// How long each finished call took, oldest first.
    took: Arc<Mutex<Vec<Duration>>>,
}

impl LabBackend {
    /// The time of each finished call so far, oldest first.
    pub fn timings(&self) -> Vec<Duration> {
        self.took.lock().map(|t| t.clone()).unwrap_or_default()
    }

    fn timed<T: Send + 'static>(&self, work: BoxFuture<'static, T>) -> BoxFuture<'static, T> {
        let took = self.took.clone();
        async move {
            let start = Instant::now();
            let out = work.await;
            if let Ok(mut t) = took.lock() {
                t.push(start.elapsed());
            }
            out
        }
        .boxed()
    }

    pub fn insert(&self, alias: TabletAlias, db: &Arc<MariaDb>) {
        if let Ok(mut m) = self.servers.write() {
            m.insert(alias.to_string(), Arc::downgrade(db));
        }
    }

    fn get(&self, alias: &TabletAlias) -> Option<Arc<MariaDb>> {
        self.servers.read().ok()?.get(&alias.to_string())?.upgrade()
    }

    fn sql(&self, alias: TabletAlias, sql: &'static str) -> BoxFuture<'static, Result<(), String>> {
        let db = self.get(&alias);
        self.timed(
            async move {
                db.ok_or_else(|| format!("unknown tablet {alias}"))?
                    .try_query(sql)
                    .await
                    .map(drop)
            }
            .boxed(),
        )
    }
}

impl Backend for LabBackend {
    fn stop_replication(&self, alias: TabletAlias) -> BoxFuture<'static, Result<(), String>> {
        self.sql(alias, "STOP SLAVE")
    }

    fn start_replication(&self, alias: TabletAlias) -> BoxFuture<'static, Result<(), String>> {
        self.sql(alias, "START SLAVE")
    }

    fn position(&self, alias: TabletAlias) -> BoxFuture<'static, Option<String>> {
        let db = self.get(&alias);
        self.timed(
            async move {
                let pos = db?.try_query("SELECT @@gtid_current_pos").await.ok()?;
                let gtid = pos.first()?.first()?.clone();
                Some(format!("MariaDB/{gtid}"))
            }
            .boxed(),
        )
    }

    fn replication_io_error(&self, alias: TabletAlias) -> BoxFuture<'static, Option<String>> {
        let db = self.get(&alias);
        self.timed(
            async move {
                let status = db?.replica_status().await.ok()?;
                // An empty error leaves what the test scripted (e.g. a fault) in place.
                status
                    .get("Last_IO_Error")
                    .filter(|e| !e.is_empty())
                    .cloned()
            }
            .boxed(),
        )
    }

    fn execute_fetch(
        &self,
        alias: TabletAlias,
        query: String,
    ) -> BoxFuture<'static, Option<FetchResult>> {
        let db = self.get(&alias);
        self.timed(
            async move {
                let rows = db?.try_query(&query).await;
                Some(rows.map(|rows| {
                    rows.into_iter()
                        .map(|r| r.into_iter().map(|c| (c != "NULL").then_some(c)).collect())
                        .collect()
                }))
            }
            .boxed(),
        )
    }
}
