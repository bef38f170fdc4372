//! The gRPC service and its RPCs on the scripted state, with real vtctld's rules
//! (server.go of Vitess 24's `grpcvtctldserver`, and what its tablets' managers do); the
//! backend (real servers) acts where one is set. Each dispatch arm or the method it calls
//! names its request and response types (the wire-conformance test reads them here).

use std::convert::Infallible;
use std::task::{Context, Poll};

use tonic::body::Body;
use vtsnap_core::naming::TabletAlias;
use vtsnap_core::vtctld::messages::query::{Field, QueryResult, Row};
use vtsnap_core::vtctld::messages::replicationdata::{
    PrimaryStatus, STATE_RUNNING, STATE_STOPPED, Status,
};
use vtsnap_core::vtctld::messages::topodata::{self, TabletType};
use vtsnap_core::vtctld::messages::vtctldata::*;

use super::errors::{self, PositionFailure, ShardLookup};
use super::{FakeTablet, FakeVtctld, alias_str};
use crate::grpc::{self, HttpFuture};

#[derive(Debug, Clone)]
pub(super) struct Service {
    pub(super) fake: FakeVtctld,
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
                "ShardReplicationPositions" => {
                    grpc::unary_async(req, move |r| {
                        let f = f.clone();
                        async move { f.positions_served(r).await }
                    })
                    .await
                }
                "GetFullStatus" => {
                    grpc::unary_async(req, move |r| {
                        let f = f.clone();
                        async move { f.full_status_served(r).await }
                    })
                    .await
                }
                "GetTablet" => grpc::unary(req, move |r| f.get_tablet(r)).await,
                "ChangeTabletType" => grpc::unary(req, move |r| f.change_type(r)).await,
                "StopReplication" => {
                    grpc::unary_async(req, move |r: StopReplicationRequest| {
                        let f = f.clone();
                        async move {
                            f.replication_served("StopReplication", r.tablet_alias, false)
                                .await?;
                            Ok(StopReplicationResponse {})
                        }
                    })
                    .await
                }
                "StartReplication" => {
                    grpc::unary_async(req, move |r: StartReplicationRequest| {
                        let f = f.clone();
                        async move {
                            f.replication_served("StartReplication", r.tablet_alias, true)
                                .await?;
                            Ok(StartReplicationResponse {})
                        }
                    })
                    .await
                }
                "ExecuteFetchAsDBA" => {
                    grpc::unary_async(req, move |r| {
                        let f = f.clone();
                        async move { f.execute_fetch_served(r).await }
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

/// Vitess's `topo.IsTrivialTypeChange`: the only changes ChangeTabletType makes.
fn trivial_change(from: TabletType, to: TabletType) -> bool {
    use TabletType::*;
    let plain = |t| {
        matches!(
            t,
            Replica | Rdonly | Spare | Backup | Experimental | Drained
        )
    };
    (plain(from) && plain(to)) || (from == Restore && to == Spare)
}

/// Vitess's `topo.IsReplicaType`: the tablets ShardReplicationPositions asks for a status.
fn replica_type(t: TabletType) -> bool {
    !matches!(
        t,
        TabletType::Primary | TabletType::Backup | TabletType::Restore | TabletType::Drained
    )
}

fn tablet_type(t: &FakeTablet) -> TabletType {
    TabletType::try_from(t.tablet.r#type).unwrap_or(TabletType::Unknown)
}

/// What the tablet's binlogs say: its own primary status, or (for a fixture that
/// scripted none) its replication position.
fn primary_position(t: &FakeTablet) -> String {
    t.full
        .primary_status
        .as_ref()
        .map(|p| p.position.clone())
        .or_else(|| t.status.as_ref().map(|s| s.position.clone()))
        .unwrap_or_default()
}

impl FakeVtctld {
    fn get_shard(&self, r: GetShardRequest) -> Result<GetShardResponse, tonic::Status> {
        self.begin("GetShard", format!("{}/{}", r.keyspace, r.shard_name))?;
        self.shard(&r.keyspace, &r.shard_name, ShardLookup::Record, |sh| {
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
        self.shard(&r.keyspace, &r.shard, ShardLookup::TabletMap, |sh| {
            Ok(GetTabletsResponse {
                tablets: sh.tablets.values().map(|t| t.tablet.clone()).collect(),
            })
        })
    }

    /// The primary's position only; each other tablet of a replica type its full status;
    /// DRAINED, BACKUP and RESTORE tablets left out of both maps. Fails whole when a
    /// tablet's read fails (a timeout aside, which the fake cannot have).
    fn positions(
        &self,
        r: ShardReplicationPositionsRequest,
    ) -> Result<ShardReplicationPositionsResponse, tonic::Status> {
        self.begin(
            "ShardReplicationPositions",
            format!("{}/{}", r.keyspace, r.shard),
        )?;
        self.shard(&r.keyspace, &r.shard, ShardLookup::TabletMap, |sh| {
            let mut out = ShardReplicationPositionsResponse::default();
            let mut failures = Vec::new();
            for (a, t) in &sh.tablets {
                let ty = tablet_type(t);
                let status = if ty == TabletType::Primary {
                    if t.mysqld_down {
                        failures.push(PositionFailure::PrimaryDown(a.clone()));
                        continue;
                    }
                    Status {
                        position: primary_position(t),
                        ..Default::default()
                    }
                } else if replica_type(ty) {
                    match (&t.status, t.mysqld_down) {
                        (_, true) => {
                            failures.push(PositionFailure::ReplicaDown(a.clone()));
                            continue;
                        }
                        (None, false) => {
                            failures.push(PositionFailure::NotReplicating(a.clone()));
                            continue;
                        }
                        (Some(s), false) => s.clone(),
                    }
                } else {
                    continue;
                };
                out.replication_statuses.insert(a.clone(), status);
                out.tablet_map.insert(a.clone(), t.tablet.clone());
            }
            if failures.is_empty() {
                Ok(out)
            } else {
                Err(errors::positions_failed(&failures))
            }
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
            if t.mysqld_down {
                return Err(errors::mysqld_down("FullStatus", a));
            }
            let mut full = t.full.clone();
            full.replication_status = t.status.clone();
            if full.primary_status.is_none() && tablet_type(t) == TabletType::Primary {
                full.primary_status = Some(PrimaryStatus {
                    position: primary_position(t),
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
            let from = tablet_type(&sh.tablets[a]);
            if !trivial_change(from, to) {
                return Err(errors::not_allowed(&r.tablet_alias, from, to));
            }
            let t = &sh.tablets[a];
            if sh.primary.is_none() {
                return Err(errors::no_primary(&t.tablet.keyspace, &t.tablet.shard));
            }
            if t.mysqld_down {
                return Err(errors::mysqld_down("ChangeType", a));
            }
            let Some(t) = sh.tablets.get_mut(a) else {
                return Err(errors::no_tablet(&r.tablet_alias));
            };
            let before = t.tablet.clone();
            t.tablet.r#type = to as i32;
            Ok(ChangeTabletTypeResponse {
                before_tablet: Some(before),
                after_tablet: Some(t.tablet.clone()),
                was_dry_run: false,
            })
        })
    }

    /// Stop or StartReplication. Stopping a tablet that does not replicate (the primary)
    /// does nothing, as `STOP REPLICA` does; starting it is refused, as `START REPLICA`
    /// is. Returns whether the tablet replicates (whether a backend should act).
    fn set_replication(
        &self,
        method: &str,
        alias: &Option<topodata::TabletAlias>,
        running: bool,
    ) -> Result<bool, tonic::Status> {
        self.begin(method, alias_str(alias))?;
        self.on_tablet(alias, |sh, a| {
            if running && sh.primary.is_none() {
                let t = &sh.tablets[a];
                return Err(errors::no_primary(&t.tablet.keyspace, &t.tablet.shard));
            }
            let Some(t) = sh.tablets.get_mut(a) else {
                return Err(errors::no_tablet(alias));
            };
            if t.mysqld_down {
                return Err(errors::mysqld_down(method, a));
            }
            let Some(s) = t.status.as_mut() else {
                return if running {
                    Err(errors::not_a_replica(a))
                } else {
                    Ok(false)
                };
            };
            let state = if running {
                STATE_RUNNING
            } else {
                STATE_STOPPED
            };
            s.io_state = state;
            s.sql_state = state;
            // A stopped replica cannot tell its lag.
            s.replication_lag_unknown = !running;
            Ok(true)
        })
    }

    /// Fails as ExecuteFetchAsDBA does when the tablet does not exist or its mysqld is
    /// down (before a backend runs the query).
    fn fetch_reaches_mysqld(
        &self,
        alias: &Option<topodata::TabletAlias>,
    ) -> Result<(), tonic::Status> {
        self.on_tablet(alias, |sh, a| {
            if sh.tablets[a].mysqld_down {
                Err(errors::fetch_mysqld_down(a))
            } else {
                Ok(())
            }
        })
    }

    /// ExecuteFetchAsDBA answered from the fixture's variables (`SELECT @@var, …` only).
    fn fetch_variables(
        &self,
        r: ExecuteFetchAsDbaRequest,
    ) -> Result<ExecuteFetchAsDbaResponse, tonic::Status> {
        self.on_tablet(&r.tablet_alias, |sh, a| {
            let t = &sh.tablets[a];
            if t.mysqld_down {
                return Err(errors::fetch_mysqld_down(a));
            }
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
                cells.push(
                    t.variables.get(var).cloned().ok_or_else(|| {
                        errors::fetch_failed(a, &errors::unknown_variable(var, q))
                    })?,
                );
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

    /// The scripted positions; with a backend, the primary's position is its server's.
    async fn positions_served(
        &self,
        r: ShardReplicationPositionsRequest,
    ) -> Result<ShardReplicationPositionsResponse, tonic::Status> {
        let mut resp = self.positions(r)?;
        if let Some(b) = self.backend() {
            for (a, t) in &resp.tablet_map {
                if t.r#type == TabletType::Primary as i32
                    && let Some(alias) = t.alias.as_ref().map(TabletAlias::from)
                    && let Some(pos) = b.position(alias).await
                    && let Some(s) = resp.replication_statuses.get_mut(a)
                {
                    s.position = pos;
                }
            }
        }
        Ok(resp)
    }

    /// The scripted status; with a backend, positions and the IO error are its server's.
    async fn full_status_served(
        &self,
        r: GetFullStatusRequest,
    ) -> Result<GetFullStatusResponse, tonic::Status> {
        let alias = r.tablet_alias.as_ref().map(TabletAlias::from);
        let mut resp = self.full_status(r)?;
        let (Some(b), Some(a), Some(st)) = (self.backend(), alias, resp.status.as_mut()) else {
            return Ok(resp);
        };
        if let Some(rs) = st.replication_status.as_mut() {
            if let Some(pos) = b.position(a.clone()).await {
                rs.position = pos;
            }
            if let Some(io) = b.replication_io_error(a).await {
                rs.last_io_error = io;
            }
        } else if let Some(ps) = st.primary_status.as_mut()
            && let Some(pos) = b.position(a).await
        {
            ps.position = pos;
        }
        Ok(resp)
    }

    /// Stop or StartReplication on the scripted state, then on the backend's server when
    /// the tablet replicates.
    async fn replication_served(
        &self,
        method: &str,
        alias: Option<topodata::TabletAlias>,
        running: bool,
    ) -> Result<(), tonic::Status> {
        let replicates = self.set_replication(method, &alias, running)?;
        if let (true, Some(b), Some(a)) = (replicates, self.backend(), alias.as_ref()) {
            let a = TabletAlias::from(a);
            let done = if running {
                b.start_replication(a).await
            } else {
                b.stop_replication(a).await
            };
            done.map_err(tonic::Status::internal)?;
        }
        Ok(())
    }

    /// ExecuteFetchAsDBA on the backend's server, or from the fixture's variables.
    async fn execute_fetch_served(
        &self,
        r: ExecuteFetchAsDbaRequest,
    ) -> Result<ExecuteFetchAsDbaResponse, tonic::Status> {
        self.begin(
            "ExecuteFetchAsDBA",
            format!("{} {}", alias_str(&r.tablet_alias), r.query),
        )?;
        self.fetch_reaches_mysqld(&r.tablet_alias)?;
        let alias = r.tablet_alias.as_ref().map(TabletAlias::from);
        if let (Some(b), Some(a)) = (self.backend(), alias)
            && let Some(rows) = b.execute_fetch(a, r.query.clone()).await
        {
            return fetched(rows.map_err(tonic::Status::unknown)?);
        }
        self.fetch_variables(r)
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
