//! The fake vtctld's link to the real tablets: replication control, GTID positions and
//! ExecuteFetchAsDBA run on the lab's MariaDB servers.

use std::collections::HashMap;
use std::sync::{Arc, RwLock, Weak};

use futures::FutureExt;
use futures::future::BoxFuture;
use vtsnap_core::naming::TabletAlias;
use vtsnap_testkit::fake_vtctld::{Backend, FetchResult};
use vtsnap_testkit::mariadb::MariaDb;

/// Tablet alias → its server. Shared, so tablets can be added while vtctld serves. Weak:
/// the lab owns the servers, and vtctld's tasks must not keep a container alive after it.
#[derive(Debug, Clone, Default)]
pub struct LabBackend(Arc<RwLock<HashMap<String, Weak<MariaDb>>>>);

impl LabBackend {
    pub fn insert(&self, alias: TabletAlias, db: &Arc<MariaDb>) {
        if let Ok(mut m) = self.0.write() {
            m.insert(alias.to_string(), Arc::downgrade(db));
        }
    }

    fn get(&self, alias: &TabletAlias) -> Option<Arc<MariaDb>> {
        self.0.read().ok()?.get(&alias.to_string())?.upgrade()
    }

    fn sql(&self, alias: TabletAlias, sql: &'static str) -> BoxFuture<'static, Result<(), String>> {
        let db = self.get(&alias);
        async move {
            db.ok_or_else(|| format!("unknown tablet {alias}"))?
                .try_query(sql)
                .await
                .map(drop)
        }
        .boxed()
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
        async move {
            let pos = db?.try_query("SELECT @@gtid_current_pos").await.ok()?;
            let gtid = pos.first()?.first()?.clone();
            Some(format!("MariaDB/{gtid}"))
        }
        .boxed()
    }

    fn execute_fetch(
        &self,
        alias: TabletAlias,
        query: String,
    ) -> BoxFuture<'static, Option<FetchResult>> {
        let db = self.get(&alias);
        async move {
            let rows = db?.try_query(&query).await;
            Some(rows.map(|rows| {
                rows.into_iter()
                    .map(|r| r.into_iter().map(|c| (c != "NULL").then_some(c)).collect())
                    .collect()
            }))
        }
        .boxed()
    }
}
