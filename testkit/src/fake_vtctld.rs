//! `FakeVtctld`: a gRPC `vtctlservice.Vtctld` server whose state tests script, because no
//! real vtctld can run here. Tablets, their types, replication positions and MySQL
//! variables are plain data; each RPC can be made to fail; every call is logged.
//!
//! It keeps the rules that matter for safety: a PRIMARY's type cannot be changed, nothing
//! becomes PRIMARY through ChangeTabletType, and ChangeTabletType needs a primary.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tonic::body::Body;
use vtsnap_core::naming::TabletAlias;
use vtsnap_core::vtctld::messages::query::{Field, QueryResult, Row};
use vtsnap_core::vtctld::messages::replicationdata::{
    FullStatus, PrimaryStatus, STATE_RUNNING, STATE_STOPPED, Status,
};
use vtsnap_core::vtctld::messages::topodata::{self, Tablet, TabletType};
use vtsnap_core::vtctld::messages::vtctldata::*;

use crate::grpc::{self, HttpFuture, Running};

/// One tablet as vtctld would describe it.
#[derive(Debug, Clone)]
pub struct FakeTablet {
    pub tablet: Tablet,
    /// Replication status; `None` for the primary or when unknown.
    pub status: Option<Status>,
    pub full: FullStatus,
    /// Answers to `SELECT @@name` through ExecuteFetchAsDBA.
    pub variables: BTreeMap<String, String>,
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

    /// Starts serving on 127.0.0.1.
    pub async fn serve(&self) -> Running {
        grpc::serve_tcp(Service { fake: self.clone() }).await
    }

    /// Starts serving on `ip` (the node's address: Pods cannot reach the host's loopback).
    pub async fn serve_on(&self, ip: std::net::IpAddr) -> Running {
        grpc::serve_tcp_on(Service { fake: self.clone() }, ip).await
    }

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

    fn shard<R>(
        &self,
        ks: &str,
        shard: &str,
        f: impl FnOnce(&mut FakeShard) -> Result<R, tonic::Status>,
    ) -> Result<R, tonic::Status> {
        self.with(
            |s| match s.shards.get_mut(&(ks.to_owned(), shard.to_owned())) {
                Some(sh) => f(sh),
                None => Err(tonic::Status::not_found(format!(
                    "shard {ks}/{shard} not found"
                ))),
            },
        )
    }

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
            Err(tonic::Status::not_found(format!("tablet {a} not found")))
        })
    }

    fn get_shard(&self, r: GetShardRequest) -> Result<GetShardResponse, tonic::Status> {
        self.begin("GetShard", format!("{}/{}", r.keyspace, r.shard_name))?;
        self.shard(&r.keyspace, &r.shard_name, |sh| {
            Ok(GetShardResponse {
                shard: Some(Shard {
                    keyspace: r.keyspace.clone(),
                    name: r.shard_name.clone(),
                    shard: Some(topodata::Shard {
                        primary_alias: sh.primary.clone(),
                        is_primary_serving: sh.primary.is_some(),
                        ..Default::default()
                    }),
                }),
            })
        })
    }

    fn get_tablets(&self, r: GetTabletsRequest) -> Result<GetTabletsResponse, tonic::Status> {
        self.begin("GetTablets", format!("{}/{}", r.keyspace, r.shard))?;
        self.shard(&r.keyspace, &r.shard, |sh| {
            Ok(GetTabletsResponse {
                tablets: sh.tablets.values().map(|t| t.tablet.clone()).collect(),
            })
        })
    }

    fn positions(
        &self,
        r: ShardReplicationPositionsRequest,
    ) -> Result<ShardReplicationPositionsResponse, tonic::Status> {
        self.begin(
            "ShardReplicationPositions",
            format!("{}/{}", r.keyspace, r.shard),
        )?;
        self.shard(&r.keyspace, &r.shard, |sh| {
            Ok(ShardReplicationPositionsResponse {
                replication_statuses: sh
                    .tablets
                    .iter()
                    .filter_map(|(a, t)| Some((a.clone(), t.status.clone()?)))
                    .collect(),
                tablet_map: sh
                    .tablets
                    .iter()
                    .map(|(a, t)| (a.clone(), t.tablet.clone()))
                    .collect(),
            })
        })
    }

    fn get_tablet(&self, r: GetTabletRequest) -> Result<GetTabletResponse, tonic::Status> {
        self.begin("GetTablet", alias_str(&r.tablet_alias))?;
        self.on_tablet(&r.tablet_alias, |sh, a| {
            Ok(GetTabletResponse {
                tablet: Some(sh.tablets[a].tablet.clone()),
            })
        })
    }

    fn full_status(&self, r: GetFullStatusRequest) -> Result<GetFullStatusResponse, tonic::Status> {
        self.begin("GetFullStatus", alias_str(&r.tablet_alias))?;
        self.on_tablet(&r.tablet_alias, |sh, a| {
            let t = &sh.tablets[a];
            let mut full = t.full.clone();
            full.replication_status = t.status.clone();
            if t.tablet.r#type == TabletType::Primary as i32 {
                full.primary_status = Some(PrimaryStatus {
                    position: full
                        .replication_status
                        .as_ref()
                        .map(|s| s.position.clone())
                        .unwrap_or_default(),
                    ..Default::default()
                });
            }
            Ok(GetFullStatusResponse { status: Some(full) })
        })
    }

    fn change_type(
        &self,
        r: ChangeTabletTypeRequest,
    ) -> Result<ChangeTabletTypeResponse, tonic::Status> {
        let to = TabletType::try_from(r.db_type).unwrap_or(TabletType::Unknown);
        self.begin(
            "ChangeTabletType",
            format!(
                "{} {}",
                alias_str(&r.tablet_alias),
                to.name().to_uppercase()
            ),
        )?;
        self.on_tablet(&r.tablet_alias, |sh, a| {
            if sh.primary.is_none() {
                return Err(tonic::Status::failed_precondition("shard has no primary"));
            }
            let t = sh
                .tablets
                .get_mut(a)
                .ok_or_else(|| tonic::Status::not_found(a.to_owned()))?;
            if t.tablet.r#type == TabletType::Primary as i32 {
                return Err(tonic::Status::failed_precondition(
                    "cannot change the type of a PRIMARY tablet",
                ));
            }
            if to == TabletType::Primary {
                return Err(tonic::Status::invalid_argument(
                    "use a reparent to make a tablet PRIMARY",
                ));
            }
            let before = t.tablet.clone();
            t.tablet.r#type = to as i32;
            Ok(ChangeTabletTypeResponse {
                before_tablet: Some(before),
                after_tablet: Some(t.tablet.clone()),
                was_dry_run: false,
            })
        })
    }

    fn set_replication(
        &self,
        method: &str,
        alias: &Option<topodata::TabletAlias>,
        running: bool,
    ) -> Result<(), tonic::Status> {
        self.begin(method, alias_str(alias))?;
        self.on_tablet(alias, |sh, a| {
            let t = sh
                .tablets
                .get_mut(a)
                .ok_or_else(|| tonic::Status::not_found(a.to_owned()))?;
            let s = t
                .status
                .as_mut()
                .ok_or_else(|| tonic::Status::failed_precondition("tablet is not a replica"))?;
            let state = if running {
                STATE_RUNNING
            } else {
                STATE_STOPPED
            };
            s.io_state = state;
            s.sql_state = state;
            Ok(())
        })
    }

    /// ExecuteFetchAsDBA answered from the fixture's variables (`SELECT @@var, …` only).
    fn fetch_variables(
        &self,
        r: ExecuteFetchAsDbaRequest,
    ) -> Result<ExecuteFetchAsDbaResponse, tonic::Status> {
        self.on_tablet(&r.tablet_alias, |sh, a| {
            let t = &sh.tablets[a];
            let q = r.query.trim();
            let list = q
                .strip_prefix("SELECT ")
                .or_else(|| q.strip_prefix("select "))
                .ok_or_else(|| {
                    tonic::Status::unimplemented(format!(
                        "fake vtctld only answers SELECT @@var: {q}"
                    ))
                })?;
            let names: Vec<&str> = list.split(',').map(str::trim).collect();
            let mut fields = Vec::new();
            let mut cells = Vec::new();
            for n in &names {
                let var = n
                    .strip_prefix("@@")
                    .ok_or_else(|| tonic::Status::unimplemented(format!("not a variable: {n}")))?;
                let var = var.strip_prefix("global.").unwrap_or(var);
                fields.push(Field {
                    name: (*n).to_owned(),
                    r#type: 0,
                });
                cells.push(t.variables.get(var).cloned().ok_or_else(|| {
                    tonic::Status::unknown(format!("Unknown system variable '{var}'"))
                })?);
            }
            let row = Row::from_cells(&cells.iter().map(|c| Some(c.as_str())).collect::<Vec<_>>());
            Ok(ExecuteFetchAsDbaResponse {
                result: Some(QueryResult {
                    fields,
                    rows: vec![row],
                    ..Default::default()
                }),
            })
        })
    }
}

#[derive(Debug, Clone)]
struct Service {
    fake: FakeVtctld,
}

impl tonic::server::NamedService for Service {
    const NAME: &'static str = "vtctlservice.Vtctld";
}

impl tower::Service<http::Request<Body>> for Service {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = HttpFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let f = self.fake.clone();
        Box::pin(async move {
            let resp = match grpc::method(&req).as_str() {
                "GetShard" => grpc::unary(req, move |r| f.get_shard(r)).await,
                "GetTablets" => grpc::unary(req, move |r| f.get_tablets(r)).await,
                "ShardReplicationPositions" => grpc::unary(req, move |r| f.positions(r)).await,
                "GetFullStatus" => {
                    grpc::unary_async(req, move |r: GetFullStatusRequest| {
                        let f = f.clone();
                        async move {
                            let alias = r.tablet_alias.as_ref().map(TabletAlias::from);
                            let mut resp = f.full_status(r)?;
                            if let (Some(b), Some(a)) = (f.backend(), alias)
                                && let Some(rs) = resp
                                    .status
                                    .as_mut()
                                    .and_then(|st| st.replication_status.as_mut())
                            {
                                if let Some(pos) = b.position(a.clone()).await {
                                    rs.position = pos;
                                }
                                if let Some(io) = b.replication_io_error(a).await {
                                    rs.last_io_error = io;
                                }
                            }
                            Ok(resp)
                        }
                    })
                    .await
                }
                "GetTablet" => grpc::unary(req, move |r| f.get_tablet(r)).await,
                "ChangeTabletType" => grpc::unary(req, move |r| f.change_type(r)).await,
                "StopReplication" => {
                    grpc::unary_async(req, move |r: StopReplicationRequest| {
                        let f = f.clone();
                        async move {
                            f.set_replication("StopReplication", &r.tablet_alias, false)?;
                            if let (Some(b), Some(a)) =
                                (f.backend(), r.tablet_alias.as_ref().map(TabletAlias::from))
                            {
                                b.stop_replication(a)
                                    .await
                                    .map_err(tonic::Status::internal)?;
                            }
                            Ok(StopReplicationResponse {})
                        }
                    })
                    .await
                }
                "StartReplication" => {
                    grpc::unary_async(req, move |r: StartReplicationRequest| {
                        let f = f.clone();
                        async move {
                            f.set_replication("StartReplication", &r.tablet_alias, true)?;
                            if let (Some(b), Some(a)) =
                                (f.backend(), r.tablet_alias.as_ref().map(TabletAlias::from))
                            {
                                b.start_replication(a)
                                    .await
                                    .map_err(tonic::Status::internal)?;
                            }
                            Ok(StartReplicationResponse {})
                        }
                    })
                    .await
                }
                "ExecuteFetchAsDBA" => {
                    grpc::unary_async(req, move |r: ExecuteFetchAsDbaRequest| {
                        let f = f.clone();
                        async move {
                            f.begin(
                                "ExecuteFetchAsDBA",
                                format!("{} {}", alias_str(&r.tablet_alias), r.query),
                            )?;
                            let alias = r.tablet_alias.as_ref().map(TabletAlias::from);
                            if let (Some(b), Some(a)) = (f.backend(), alias)
                                && let Some(rows) = b.execute_fetch(a, r.query.clone()).await
                            {
                                return fetched(rows.map_err(tonic::Status::unknown)?);
                            }
                            f.fetch_variables(r)
                        }
                    })
                    .await
                }
                other => {
                    tonic::Status::unimplemented(format!("fake vtctld has no {other}")).into_http()
                }
            };
            Ok(resp)
        })
    }
}

/// A backend's rows as vtctld's QueryResult (fields named by position).
fn fetched(rows: Vec<Vec<Option<String>>>) -> Result<ExecuteFetchAsDbaResponse, tonic::Status> {
    let width = rows.first().map_or(0, Vec::len);
    Ok(ExecuteFetchAsDbaResponse {
        result: Some(QueryResult {
            fields: (0..width)
                .map(|i| Field {
                    name: format!("col{i}"),
                    r#type: 0,
                })
                .collect(),
            rows: rows
                .iter()
                .map(|r| Row::from_cells(&r.iter().map(Option::as_deref).collect::<Vec<_>>()))
                .collect(),
            ..Default::default()
        }),
    })
}

#[cfg(test)]
mod tests {
    use vtsnap_core::vtctld::VtctldClient;
    use vtsnap_core::vtctld::client::CallLimits;

    use super::*;
    use crate::fixtures::shard;

    async fn setup() -> (
        FakeVtctld,
        Running,
        VtctldClient,
        crate::fixtures::ShardFixture,
    ) {
        let f = shard().replicas(3).primary(1);
        let fake = FakeVtctld::new();
        f.install(&crate::fake_kube::FakeKube::new(), &fake);
        let server = fake.serve().await;
        let client = VtctldClient::new(
            &server.endpoint(),
            CallLimits {
                read_attempts: 1,
                ..CallLimits::default()
            },
        )
        .unwrap();
        (fake, server, client, f)
    }

    #[tokio::test]
    async fn serves_the_scripted_shard() {
        let (_fake, _s, c, f) = setup().await;
        let sh = c.get_shard("commerce", "-").await.unwrap();
        assert_eq!(
            sh.primary_alias.as_ref().map(TabletAlias::from),
            Some(f.alias(1))
        );
        assert_eq!(c.get_tablets("commerce", "-").await.unwrap().len(), 3);
        let pos = c
            .shard_replication_positions("commerce", "-")
            .await
            .unwrap();
        assert_eq!(
            pos.replication_statuses.len(),
            2,
            "the primary has no replication status"
        );
        let full = c.get_full_status(&f.alias(2)).await.unwrap();
        assert!(full.replication_status.is_some());
        let e = c.get_shard("commerce", "80-").await.unwrap_err();
        assert!(e.to_string().contains("NotFound"), "{e}");
    }

    #[tokio::test]
    async fn keeps_the_rules_of_tablet_types() {
        let (fake, _s, c, f) = setup().await;
        c.change_tablet_type(&f.alias(2), TabletType::Drained)
            .await
            .unwrap();
        assert_eq!(fake.tablet_type(&f.alias(2)), Some(TabletType::Drained));
        assert!(
            c.change_tablet_type(&f.alias(1), TabletType::Drained)
                .await
                .is_err(),
            "a primary's type cannot change"
        );
        assert!(
            c.change_tablet_type(&f.alias(3), TabletType::Primary)
                .await
                .is_err()
        );
        fake.with(|s| s.shards.values_mut().for_each(|sh| sh.primary = None));
        assert!(
            c.change_tablet_type(&f.alias(2), TabletType::Replica)
                .await
                .is_err(),
            "needs a primary"
        );
    }

    #[tokio::test]
    async fn stops_and_starts_replication() {
        let (fake, _s, c, f) = setup().await;
        c.stop_replication(&f.alias(2)).await.unwrap();
        assert_eq!(
            fake.tablet(&f.alias(2)).unwrap().status.unwrap().io_state,
            STATE_STOPPED
        );
        c.start_replication(&f.alias(2)).await.unwrap();
        assert_eq!(
            fake.tablet(&f.alias(2)).unwrap().status.unwrap().sql_state,
            STATE_RUNNING
        );
        assert!(
            c.stop_replication(&f.alias(1)).await.is_err(),
            "the primary does not replicate"
        );
    }

    #[tokio::test]
    async fn answers_variable_queries() {
        let (_fake, _s, c, f) = setup().await;
        let r = c
            .execute_fetch_as_dba(
                &f.alias(2),
                "SELECT @@sync_binlog, @@global.innodb_flush_log_at_trx_commit",
                1,
            )
            .await
            .unwrap();
        assert_eq!(
            r.rows[0].cells(),
            vec![Some("1".to_owned()), Some("1".to_owned())]
        );
        assert!(
            c.execute_fetch_as_dba(&f.alias(2), "SELECT @@nope", 1)
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn scripted_failures_fire_then_clear_and_calls_are_logged() {
        let (fake, _s, c, f) = setup().await;
        fake.fail("GetTablets", 2, tonic::Status::unavailable("down"));
        assert!(c.get_tablets("commerce", "-").await.is_err());
        assert!(c.get_tablets("commerce", "-").await.is_err());
        assert!(c.get_tablets("commerce", "-").await.is_ok());
        c.change_tablet_type(&f.alias(2), TabletType::Drained)
            .await
            .unwrap();
        let calls = fake.calls();
        assert_eq!(
            calls.last().unwrap(),
            &format!("ChangeTabletType {} DRAINED", f.alias(2))
        );
        assert_eq!(
            calls.iter().filter(|c| c.starts_with("GetTablets")).count(),
            3
        );
    }
}
