//! `FakeVtctld`: a fake gRPC `vtctlservice.Vtctld` server whose state tests script, for
//! faults a real vtctld cannot be made to show on demand. Tablets, their types,
//! replication positions, MySQL variables and whether each tablet's mysqld is up are plain
//! data; each RPC can be made to fail; every call is logged.
//!
//! It answers as real vtctld (Vitess 24) does where vtsnap depends on it, and the contract
//! suite (`testkit/tests/vtctld_contract.rs`) runs the same assertions against both:
//! errors carry code Unknown and real vtctld's words ([`errors`]); ChangeTabletType only
//! allows the transitions Vitess calls trivial (never to or from PRIMARY) and needs the
//! shard to have a primary; ShardReplicationPositions gives the primary its position only,
//! leaves DRAINED, BACKUP and RESTORE tablets out and fails whole when one replica's status
//! cannot be read; a tablet whose mysqld is down ([`FakeVtctld::set_mysqld_down`]) fails
//! every RPC that reaches its mysqld, and its replication stays stopped once it is back.
//!
//! What it does not model: time (lag never grows by itself), semi-sync, reparents, and
//! anything vtsnap does not call.

pub mod errors;
mod service;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use vtsnap_core::naming::TabletAlias;
use vtsnap_core::vtctld::messages::replicationdata::{FullStatus, STATE_STOPPED, Status};
use vtsnap_core::vtctld::messages::topodata::{self, Tablet, TabletType};

use crate::grpc::{self, Running};
use service::Service;

/// One tablet as vtctld would describe it.
#[derive(Debug, Clone)]
pub struct FakeTablet {
    pub tablet: Tablet,
    /// Replication status; `None` when it has no replication source (the primary).
    pub status: Option<Status>,
    pub full: FullStatus,
    /// Answers to `SELECT @@name` through ExecuteFetchAsDBA.
    pub variables: BTreeMap<String, String>,
    /// Its mysqld is down (stopped through mysqlctld, crashed): every RPC that reaches
    /// mysqld fails as real vtctld's does (`errno 2002`).
    pub mysqld_down: bool,
}

#[derive(Debug, Clone, Default)]
pub struct FakeShard {
    pub primary: Option<topodata::TabletAlias>,
    pub tablets: BTreeMap<String, FakeTablet>,
}

#[derive(Debug, Default)]
pub struct VtctldState {
    /// Keyed by (keyspace, shard name).
    pub shards: BTreeMap<(String, String), FakeShard>,
    errors: BTreeMap<String, VecDeque<tonic::Status>>,
    calls: Vec<String>,
}

/// Rows of cells (`None` for NULL), or the server's error message.
pub type FetchResult = Result<Vec<Vec<Option<String>>>, String>;

/// Real servers behind the fake: replication control and positions that act on actual
/// MariaDB tablets (the lab), on top of the scripted state.
pub trait Backend: Send + Sync {
    fn stop_replication(
        &self,
        alias: TabletAlias,
    ) -> futures::future::BoxFuture<'static, Result<(), String>>;
    fn start_replication(
        &self,
        alias: TabletAlias,
    ) -> futures::future::BoxFuture<'static, Result<(), String>>;
    /// The tablet's current GTID position (`MariaDB/…`), if it can be read.
    fn position(&self, alias: TabletAlias) -> futures::future::BoxFuture<'static, Option<String>>;
    /// ExecuteFetchAsDBA on the tablet's real mysqld: rows of cells (`None` for NULL).
    /// The default, `None`, answers `SELECT @@var` from the fixture's variables.
    fn execute_fetch(
        &self,
        _alias: TabletAlias,
        _query: String,
    ) -> futures::future::BoxFuture<'static, Option<FetchResult>> {
        Box::pin(async { None })
    }
    /// The tablet's replication IO error as its mysqld reports it (`Last_IO_Error`), when
    /// the backend knows the tablet; `None` keeps the scripted status.
    fn replication_io_error(
        &self,
        _alias: TabletAlias,
    ) -> futures::future::BoxFuture<'static, Option<String>> {
        Box::pin(async { None })
    }
}

/// The fake vtctld. Clones share state.
#[derive(Clone, Default)]
pub struct FakeVtctld {
    state: Arc<Mutex<VtctldState>>,
    backend: Arc<Mutex<Option<Arc<dyn Backend>>>>,
}

impl std::fmt::Debug for FakeVtctld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FakeVtctld")
    }
}

fn alias_str(a: &Option<topodata::TabletAlias>) -> String {
    a.as_ref()
        .map(|a| TabletAlias::from(a).to_string())
        .unwrap_or_default()
}

impl FakeVtctld {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with<R>(&self, f: impl FnOnce(&mut VtctldState) -> R) -> R {
        let mut g = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut g)
    }

    /// Puts real servers behind replication control and positions.
    pub fn set_backend(&self, b: Arc<dyn Backend>) {
        if let Ok(mut g) = self.backend.lock() {
            *g = Some(b);
        }
    }

    fn backend(&self) -> Option<Arc<dyn Backend>> {
        self.backend.lock().ok().and_then(|g| g.clone())
    }

    /// Makes the next `times` calls of `method` fail with `status`.
    pub fn fail(&self, method: &str, times: usize, status: tonic::Status) {
        self.with(|s| {
            let q = s.errors.entry(method.to_owned()).or_default();
            for _ in 0..times {
                q.push_back(status.clone());
            }
        });
    }

    /// Every call so far, like `ChangeTabletType zone1-0000000101 DRAINED`.
    pub fn calls(&self) -> Vec<String> {
        self.with(|s| s.calls.clone())
    }

    /// The tablet's current state.
    pub fn tablet(&self, alias: &TabletAlias) -> Option<FakeTablet> {
        let a = alias.to_string();
        self.with(|s| s.shards.values().find_map(|sh| sh.tablets.get(&a).cloned()))
    }

    pub fn tablet_type(&self, alias: &TabletAlias) -> Option<TabletType> {
        self.tablet(alias)
            .and_then(|t| TabletType::try_from(t.tablet.r#type).ok())
    }

    /// Takes the tablet's mysqld down (`true`) or brings it back (`false`), as mysqlctld's
    /// Shutdown and Start do: vtctld still lists the tablet and its type never changes; a
    /// replica's mysqld comes back with replication stopped (`skip_replica_start`) until
    /// StartReplication. Panics on a tablet the fake does not know.
    pub fn set_mysqld_down(&self, alias: &TabletAlias, down: bool) {
        let a = alias.to_string();
        self.with(|s| {
            let t = s
                .shards
                .values_mut()
                .find_map(|sh| sh.tablets.get_mut(&a))
                .unwrap_or_else(|| panic!("the fake vtctld has no tablet {a}"));
            if t.mysqld_down
                && !down
                && let Some(st) = t.status.as_mut()
            {
                st.io_state = STATE_STOPPED;
                st.sql_state = STATE_STOPPED;
                st.replication_lag_unknown = true;
            }
            t.mysqld_down = down;
        });
    }

    /// Starts serving on 127.0.0.1.
    pub async fn serve(&self) -> Running {
        grpc::serve_tcp(Service { fake: self.clone() }).await
    }

    /// Starts serving on `ip` (the node's address: Pods cannot reach the host's loopback).
    pub async fn serve_on(&self, ip: std::net::IpAddr) -> Running {
        grpc::serve_tcp_on(Service { fake: self.clone() }, ip).await
    }

    /// Logs the call; the scripted failure for `method`, if one is queued.
    fn begin(&self, method: &str, detail: String) -> Result<(), tonic::Status> {
        self.with(|s| {
            s.calls
                .push(format!("{method} {detail}").trim_end().to_owned());
            match s.errors.get_mut(method).and_then(VecDeque::pop_front) {
                Some(e) => Err(e),
                None => Ok(()),
            }
        })
    }

    /// `f` on the shard; real vtctld's error when it does not exist (`what` names the
    /// lookup that fails first: GetShard reads the shard record, GetTablets and
    /// ShardReplicationPositions the tablet map).
    fn shard<R>(
        &self,
        ks: &str,
        shard: &str,
        lookup: errors::ShardLookup,
        f: impl FnOnce(&mut FakeShard) -> Result<R, tonic::Status>,
    ) -> Result<R, tonic::Status> {
        self.with(
            |s| match s.shards.get_mut(&(ks.to_owned(), shard.to_owned())) {
                Some(sh) => f(sh),
                None => Err(errors::no_shard(lookup, ks, shard)),
            },
        )
    }

    /// `f` on the tablet's shard and its alias string; real vtctld's error when the tablet
    /// does not exist.
    fn on_tablet<R>(
        &self,
        alias: &Option<topodata::TabletAlias>,
        f: impl FnOnce(&mut FakeShard, &str) -> Result<R, tonic::Status>,
    ) -> Result<R, tonic::Status> {
        let a = alias_str(alias);
        self.with(|s| {
            for sh in s.shards.values_mut() {
                if sh.tablets.contains_key(&a) {
                    return f(sh, &a);
                }
            }
            Err(errors::no_tablet(alias))
        })
    }
}
