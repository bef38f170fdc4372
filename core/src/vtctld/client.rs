//! A vtctld client with timeouts; idempotent reads are retried, writes never are.

use std::time::Duration;

use http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint};
use tonic_prost::ProstCodec;

use super::messages::{
    query::QueryResult,
    replicationdata::FullStatus,
    topodata::{self, Tablet, TabletType},
    vtctldata::*,
};
use crate::naming::TabletAlias;

#[derive(Debug, thiserror::Error)]
pub enum VtctldError {
    #[error("vtctld address {endpoint:?} is not valid: {reason}")]
    BadEndpoint { endpoint: String, reason: String },
    #[error("vtctld {endpoint} {method}: {code:?}: {message}")]
    Rpc {
        endpoint: String,
        method: &'static str,
        code: tonic::Code,
        message: String,
    },
    #[error("vtctld {endpoint} {method}: no answer within {after:?}")]
    Timeout {
        endpoint: String,
        method: &'static str,
        after: Duration,
    },
    #[error("vtctld {endpoint} {method}: answer lacks {what}")]
    Incomplete {
        endpoint: String,
        method: &'static str,
        what: &'static str,
    },
}

impl VtctldError {
    /// Whether a read that failed this way may be tried again.
    fn retryable(&self) -> bool {
        match self {
            Self::Timeout { .. } => true,
            Self::Rpc { code, .. } => matches!(
                code,
                tonic::Code::Unavailable
                    | tonic::Code::DeadlineExceeded
                    | tonic::Code::ResourceExhausted
                    | tonic::Code::Aborted
            ),
            _ => false,
        }
    }
}

#[derive(Debug, Clone)]
pub struct VtctldClient {
    endpoint: String,
    channel: Channel,
    timeout: Duration,
    read_attempts: u32,
}

/// Per-call limits.
#[derive(Debug, Clone, Copy)]
pub struct CallLimits {
    pub timeout: Duration,
    /// Attempts for idempotent reads (≥ 1).
    pub read_attempts: u32,
}

impl Default for CallLimits {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(10),
            read_attempts: 3,
        }
    }
}

/// How many of a backup's log lines are kept (the last ones: the outcome is logged last).
pub const BACKUP_LOG_LINES: usize = 256;
/// The longest log line kept, in bytes.
pub const BACKUP_LOG_LINE_BYTES: usize = 4096;

/// Keeps `line` (cut to [`BACKUP_LOG_LINE_BYTES`] at a character boundary) as the newest
/// of at most [`BACKUP_LOG_LINES`]: a stream of any length holds bounded memory.
fn keep_last(lines: &mut std::collections::VecDeque<String>, mut line: String) {
    if line.len() > BACKUP_LOG_LINE_BYTES {
        let mut cut = BACKUP_LOG_LINE_BYTES;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        line.truncate(cut);
    }
    if lines.len() == BACKUP_LOG_LINES {
        lines.pop_front();
    }
    lines.push_back(line);
}

impl VtctldClient {
    /// A client for `host:port`. Connects lazily: nothing is sent before the first call.
    pub fn new(endpoint: &str, limits: CallLimits) -> Result<Self, VtctldError> {
        let bad = |reason: String| VtctldError::BadEndpoint {
            endpoint: endpoint.to_owned(),
            reason,
        };
        let ep = Endpoint::from_shared(format!("http://{endpoint}"))
            .map_err(|e| bad(e.to_string()))?
            .connect_timeout(limits.timeout)
            .timeout(limits.timeout);
        Ok(Self {
            endpoint: endpoint.to_owned(),
            channel: ep.connect_lazy(),
            timeout: limits.timeout,
            read_attempts: limits.read_attempts.max(1),
        })
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The gRPC path of `method` of the Vtctld service.
    fn path(&self, method: &'static str) -> Result<PathAndQuery, VtctldError> {
        PathAndQuery::from_maybe_shared(format!("/vtctlservice.Vtctld/{method}")).map_err(|e| {
            VtctldError::BadEndpoint {
                endpoint: self.endpoint.clone(),
                reason: e.to_string(),
            }
        })
    }

    fn rpc_error(&self, method: &'static str, s: &tonic::Status) -> VtctldError {
        VtctldError::Rpc {
            endpoint: self.endpoint.clone(),
            method,
            code: s.code(),
            message: s.message().to_owned(),
        }
    }

    fn timed_out(&self, method: &'static str, after: Duration) -> VtctldError {
        VtctldError::Timeout {
            endpoint: self.endpoint.clone(),
            method,
            after,
        }
    }

    async fn once<Req, Resp>(&self, method: &'static str, req: Req) -> Result<Resp, VtctldError>
    where
        Req: prost::Message + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        let mut grpc = tonic::client::Grpc::new(self.channel.clone());
        let path = self.path(method)?;
        let call = async {
            grpc.ready()
                .await
                .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
            grpc.unary(
                tonic::Request::new(req),
                path,
                ProstCodec::<Req, Resp>::default(),
            )
            .await
        };
        match tokio::time::timeout(self.timeout, call).await {
            Err(_) => Err(self.timed_out(method, self.timeout)),
            Ok(Err(s)) => Err(self.rpc_error(method, &s)),
            Ok(Ok(r)) => Ok(r.into_inner()),
        }
    }

    /// An idempotent read, retried with backoff on transient failures.
    async fn read<Req, Resp>(&self, method: &'static str, req: Req) -> Result<Resp, VtctldError>
    where
        Req: prost::Message + Clone + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        let mut delay = Duration::from_millis(200);
        let mut attempt = 1;
        loop {
            match self.once(method, req.clone()).await {
                Err(e) if e.retryable() && attempt < self.read_attempts => {
                    tracing::warn!(method, attempt, error = %e, "vtctld read failed; retrying");
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    fn incomplete(&self, method: &'static str, what: &'static str) -> VtctldError {
        VtctldError::Incomplete {
            endpoint: self.endpoint.clone(),
            method,
            what,
        }
    }

    pub async fn get_shard(
        &self,
        keyspace: &str,
        shard: &str,
    ) -> Result<topodata::Shard, VtctldError> {
        let req = GetShardRequest {
            keyspace: keyspace.into(),
            shard_name: shard.into(),
        };
        let resp: GetShardResponse = self.read("GetShard", req).await?;
        resp.shard
            .and_then(|s| s.shard)
            .ok_or_else(|| self.incomplete("GetShard", "shard"))
    }

    pub async fn get_tablets(
        &self,
        keyspace: &str,
        shard: &str,
    ) -> Result<Vec<Tablet>, VtctldError> {
        let req = GetTabletsRequest {
            keyspace: keyspace.into(),
            shard: shard.into(),
            ..Default::default()
        };
        let resp: GetTabletsResponse = self.read("GetTablets", req).await?;
        Ok(resp.tablets)
    }

    pub async fn shard_replication_positions(
        &self,
        keyspace: &str,
        shard: &str,
    ) -> Result<ShardReplicationPositionsResponse, VtctldError> {
        let req = ShardReplicationPositionsRequest {
            keyspace: keyspace.into(),
            shard: shard.into(),
        };
        self.read("ShardReplicationPositions", req).await
    }

    pub async fn get_tablet(&self, alias: &TabletAlias) -> Result<Tablet, VtctldError> {
        let req = GetTabletRequest {
            tablet_alias: Some(alias.into()),
        };
        let resp: GetTabletResponse = self.read("GetTablet", req).await?;
        resp.tablet
            .ok_or_else(|| self.incomplete("GetTablet", "tablet"))
    }

    pub async fn get_full_status(&self, alias: &TabletAlias) -> Result<FullStatus, VtctldError> {
        let req = GetFullStatusRequest {
            tablet_alias: Some(alias.into()),
        };
        let resp: GetFullStatusResponse = self.read("GetFullStatus", req).await?;
        resp.status
            .ok_or_else(|| self.incomplete("GetFullStatus", "status"))
    }

    pub async fn change_tablet_type(
        &self,
        alias: &TabletAlias,
        to: TabletType,
    ) -> Result<ChangeTabletTypeResponse, VtctldError> {
        let req = ChangeTabletTypeRequest {
            tablet_alias: Some(alias.into()),
            db_type: to as i32,
            dry_run: false,
        };
        self.once("ChangeTabletType", req).await
    }

    pub async fn stop_replication(&self, alias: &TabletAlias) -> Result<(), VtctldError> {
        let _: StopReplicationResponse = self
            .once(
                "StopReplication",
                StopReplicationRequest {
                    tablet_alias: Some(alias.into()),
                },
            )
            .await?;
        Ok(())
    }

    pub async fn start_replication(&self, alias: &TabletAlias) -> Result<(), VtctldError> {
        let _: StartReplicationResponse = self
            .once(
                "StartReplication",
                StartReplicationRequest {
                    tablet_alias: Some(alias.into()),
                },
            )
            .await?;
        Ok(())
    }

    /// `Backup` of one tablet, waited for up to `limit` (a backup outlasts the per-call
    /// timeout); the tablet's last [`BACKUP_LOG_LINES`] log lines, in order, each cut to
    /// [`BACKUP_LOG_LINE_BYTES`]. A write: never retried.
    pub async fn backup(
        &self,
        req: BackupRequest,
        limit: std::time::Duration,
    ) -> Result<Vec<String>, VtctldError> {
        const METHOD: &str = "Backup";
        let rpc = |s: tonic::Status| self.rpc_error(METHOD, &s);
        let mut grpc = tonic::client::Grpc::new(self.channel.clone());
        let path = self.path(METHOD)?;
        let call = async {
            grpc.ready()
                .await
                .map_err(|e| rpc(tonic::Status::unavailable(e.to_string())))?;
            let mut stream = grpc
                .server_streaming(
                    tonic::Request::new(req),
                    path,
                    ProstCodec::<BackupRequest, BackupResponse>::default(),
                )
                .await
                .map_err(rpc)?
                .into_inner();
            let mut lines = std::collections::VecDeque::new();
            while let Some(m) = stream.message().await.map_err(rpc)? {
                if let Some(e) = m.event {
                    keep_last(&mut lines, e.value);
                }
            }
            Ok(lines.into())
        };
        tokio::time::timeout(limit, call)
            .await
            .unwrap_or_else(|_| Err(self.timed_out(METHOD, limit)))
    }

    /// Runs a read-only query as the DBA user (e.g. `SELECT @@sync_binlog`).
    pub async fn execute_fetch_as_dba(
        &self,
        alias: &TabletAlias,
        query: &str,
        max_rows: i64,
    ) -> Result<QueryResult, VtctldError> {
        let req = ExecuteFetchAsDbaRequest {
            tablet_alias: Some(alias.into()),
            query: query.into(),
            max_rows,
            disable_binlogs: false,
            reload_schema: false,
        };
        let resp: ExecuteFetchAsDbaResponse = self.read("ExecuteFetchAsDBA", req).await?;
        resp.result
            .ok_or_else(|| self.incomplete("ExecuteFetchAsDBA", "result"))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;

    #[test]
    fn a_backup_log_of_any_length_keeps_its_last_lines_each_bounded() {
        let mut lines = VecDeque::new();
        for n in 0..BACKUP_LOG_LINES + 10 {
            keep_last(&mut lines, format!("line {n}"));
        }
        assert_eq!(lines.len(), BACKUP_LOG_LINES);
        assert_eq!(lines.front().map(String::as_str), Some("line 10"));
        assert_eq!(
            lines.back().cloned(),
            Some(format!("line {}", BACKUP_LOG_LINES + 9))
        );
        // Cut at a character boundary: 'é' is two bytes.
        keep_last(&mut lines, "é".repeat(BACKUP_LOG_LINE_BYTES));
        let last = lines.back().unwrap();
        assert_eq!(last.len(), BACKUP_LOG_LINE_BYTES);
        assert!(last.chars().all(|c| c == 'é'));
        keep_last(
            &mut lines,
            format!("a{}", "é".repeat(BACKUP_LOG_LINE_BYTES)),
        );
        assert_eq!(lines.back().unwrap().len(), BACKUP_LOG_LINE_BYTES - 1);
    }
}
