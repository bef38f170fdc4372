//! Hand-written messages of mysqlctld's gRPC service `mysqlctl.MysqlCtl`, served on the
//! unix socket `/vt/socket/mysqlctl.sock` in vitess-operator pods. Field numbers are wire
//! facts from vitessio/vitess `proto/mysqlctl.proto` and `proto/vttime.proto`.

/// Call path prefix: `/mysqlctl.MysqlCtl/<Method>`.
pub const SERVICE: &str = "mysqlctl.MysqlCtl";

/// vttime.Duration.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Duration {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct StartRequest {
    #[prost(string, repeated, tag = "1")]
    pub mysqld_args: Vec<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct StartResponse {}

/// `wait_for_mysqld`: return only once mysqld is down. mysqlctld then keeps running with
/// mysqld down until a `Start`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ShutdownRequest {
    #[prost(bool, tag = "1")]
    pub wait_for_mysqld: bool,
    #[prost(message, optional, tag = "2")]
    pub mysql_shutdown_timeout: Option<Duration>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ShutdownResponse {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct VersionStringRequest {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct VersionStringResponse {
    #[prost(string, tag = "1")]
    pub version: String,
}

/// Whether mysqld accepts a connection on its unix socket and greets with protocol
/// version 10 (the first byte of its handshake payload, after the 4-byte packet header).
pub async fn mysqld_answers(socket: &std::path::Path) -> bool {
    use tokio::io::AsyncReadExt;
    let limit = std::time::Duration::from_secs(2);
    let Ok(Ok(mut s)) = tokio::time::timeout(limit, crate::unixsock::connect(socket)).await else {
        return false;
    };
    let mut head = [0u8; 5];
    matches!(
        tokio::time::timeout(limit, s.read_exact(&mut head)).await,
        Ok(Ok(_))
    ) && head[4] == 10
}
