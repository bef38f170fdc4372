//! Hand-written protobuf messages for the vtctld RPCs vtsnap uses. Field numbers and
//! enum values are wire facts from vitessio/vitess `proto/{topodata,vtctldata,
//! replicationdata,query}.proto`; fields vtsnap does not read are left out (protobuf
//! skips unknown fields).

use std::collections::HashMap;

pub mod topodata {
    use super::HashMap;

    #[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
    pub struct TabletAlias {
        #[prost(string, tag = "1")]
        pub cell: String,
        #[prost(uint32, tag = "2")]
        pub uid: u32,
    }

    #[derive(
        Clone,
        Copy,
        Debug,
        PartialEq,
        Eq,
        Hash,
        PartialOrd,
        Ord,
        prost::Enumeration,
        strum::IntoStaticStr,
        strum::EnumString,
    )]
    #[strum(serialize_all = "lowercase", ascii_case_insensitive)]
    #[repr(i32)]
    pub enum TabletType {
        Unknown = 0,
        Primary = 1,
        Replica = 2,
        Rdonly = 3,
        Spare = 4,
        Experimental = 5,
        Backup = 6,
        Restore = 7,
        Drained = 8,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct KeyRange {
        #[prost(bytes = "vec", tag = "1")]
        pub start: Vec<u8>,
        #[prost(bytes = "vec", tag = "2")]
        pub end: Vec<u8>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Time {
        #[prost(int64, tag = "1")]
        pub seconds: i64,
        #[prost(int32, tag = "2")]
        pub nanoseconds: i32,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Tablet {
        #[prost(message, optional, tag = "1")]
        pub alias: Option<TabletAlias>,
        #[prost(string, tag = "2")]
        pub hostname: String,
        #[prost(map = "string, int32", tag = "4")]
        pub port_map: HashMap<String, i32>,
        #[prost(string, tag = "5")]
        pub keyspace: String,
        #[prost(string, tag = "6")]
        pub shard: String,
        #[prost(message, optional, tag = "7")]
        pub key_range: Option<KeyRange>,
        #[prost(enumeration = "TabletType", tag = "8")]
        pub r#type: i32,
        #[prost(string, tag = "9")]
        pub db_name_override: String,
        #[prost(map = "string, string", tag = "10")]
        pub tags: HashMap<String, String>,
        #[prost(string, tag = "12")]
        pub mysql_hostname: String,
        #[prost(int32, tag = "13")]
        pub mysql_port: i32,
        #[prost(message, optional, tag = "14")]
        pub primary_term_start_time: Option<Time>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Shard {
        #[prost(message, optional, tag = "1")]
        pub primary_alias: Option<TabletAlias>,
        #[prost(message, optional, tag = "2")]
        pub key_range: Option<KeyRange>,
        #[prost(bool, tag = "7")]
        pub is_primary_serving: bool,
        #[prost(message, optional, tag = "8")]
        pub primary_term_start_time: Option<Time>,
    }
}

pub mod replicationdata {
    /// `io_state` / `sql_state` values.
    pub const STATE_UNKNOWN: i32 = 0;
    pub const STATE_STOPPED: i32 = 1;
    pub const STATE_CONNECTING: i32 = 2;
    pub const STATE_RUNNING: i32 = 3;

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Status {
        #[prost(string, tag = "1")]
        pub position: String,
        #[prost(uint32, tag = "4")]
        pub replication_lag_seconds: u32,
        #[prost(string, tag = "5")]
        pub source_host: String,
        #[prost(int32, tag = "6")]
        pub source_port: i32,
        #[prost(string, tag = "8")]
        pub relay_log_position: String,
        #[prost(string, tag = "9")]
        pub file_position: String,
        #[prost(uint32, tag = "11")]
        pub source_server_id: u32,
        #[prost(string, tag = "12")]
        pub source_uuid: String,
        #[prost(int32, tag = "13")]
        pub io_state: i32,
        #[prost(string, tag = "14")]
        pub last_io_error: String,
        #[prost(int32, tag = "15")]
        pub sql_state: i32,
        #[prost(string, tag = "16")]
        pub last_sql_error: String,
        #[prost(uint32, tag = "19")]
        pub sql_delay: u32,
        #[prost(bool, tag = "20")]
        pub auto_position: bool,
        #[prost(bool, tag = "21")]
        pub using_gtid: bool,
        #[prost(bool, tag = "24")]
        pub replication_lag_unknown: bool,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct PrimaryStatus {
        #[prost(string, tag = "1")]
        pub position: String,
        #[prost(string, tag = "2")]
        pub file_position: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct FullStatus {
        #[prost(uint32, tag = "1")]
        pub server_id: u32,
        #[prost(string, tag = "2")]
        pub server_uuid: String,
        #[prost(message, optional, tag = "3")]
        pub replication_status: Option<Status>,
        #[prost(message, optional, tag = "4")]
        pub primary_status: Option<PrimaryStatus>,
        #[prost(string, tag = "5")]
        pub gtid_purged: String,
        #[prost(string, tag = "6")]
        pub version: String,
        #[prost(string, tag = "7")]
        pub version_comment: String,
        #[prost(bool, tag = "8")]
        pub read_only: bool,
        #[prost(string, tag = "9")]
        pub gtid_mode: String,
        #[prost(string, tag = "10")]
        pub binlog_format: String,
        #[prost(bool, tag = "12")]
        pub log_bin_enabled: bool,
        #[prost(bool, tag = "13")]
        pub log_replica_updates: bool,
        #[prost(bool, tag = "21")]
        pub super_read_only: bool,
    }
}

pub mod query {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Field {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(int32, tag = "2")]
        pub r#type: i32,
    }

    /// A row: `lengths` of each value (−1 = NULL), `values` all concatenated.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Row {
        #[prost(sint64, repeated, tag = "1")]
        pub lengths: Vec<i64>,
        #[prost(bytes = "vec", tag = "2")]
        pub values: Vec<u8>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct QueryResult {
        #[prost(message, repeated, tag = "1")]
        pub fields: Vec<Field>,
        #[prost(uint64, tag = "2")]
        pub rows_affected: u64,
        #[prost(uint64, tag = "3")]
        pub insert_id: u64,
        #[prost(message, repeated, tag = "4")]
        pub rows: Vec<Row>,
        #[prost(string, tag = "6")]
        pub info: String,
    }

    impl Row {
        /// Splits the concatenated values; `None` for NULL.
        pub fn cells(&self) -> Vec<Option<String>> {
            let mut at = 0usize;
            self.lengths
                .iter()
                .map(|&n| {
                    if n < 0 {
                        return None;
                    }
                    let n = usize::try_from(n).unwrap_or(0);
                    let end = (at + n).min(self.values.len());
                    let v = String::from_utf8_lossy(&self.values[at..end]).into_owned();
                    at = end;
                    Some(v)
                })
                .collect()
        }

        /// Builds a row from cells.
        pub fn from_cells(cells: &[Option<&str>]) -> Self {
            let mut row = Self::default();
            for c in cells {
                match c {
                    Some(v) => {
                        row.lengths.push(i64::try_from(v.len()).unwrap_or(i64::MAX));
                        row.values.extend_from_slice(v.as_bytes());
                    }
                    None => row.lengths.push(-1),
                }
            }
            row
        }
    }
}

/// `proto/logutil.proto`: the log lines streaming calls return.
pub mod logutil {
    /// `Level`: how loud a log line is.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
    #[repr(i32)]
    pub enum Level {
        Info = 0,
        Warning = 1,
        Error = 2,
        Console = 3,
    }

    /// `Event` (its `time`, field 1, is not read).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Event {
        #[prost(enumeration = "Level", tag = "2")]
        pub level: i32,
        #[prost(string, tag = "3")]
        pub file: String,
        #[prost(int64, tag = "4")]
        pub line: i64,
        #[prost(string, tag = "5")]
        pub value: String,
    }
}

pub mod vtctldata {
    use super::HashMap;
    use super::query::QueryResult;
    use super::replicationdata::{FullStatus, Status};
    use super::topodata::{self, Tablet, TabletAlias};

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Shard {
        #[prost(string, tag = "1")]
        pub keyspace: String,
        #[prost(string, tag = "2")]
        pub name: String,
        #[prost(message, optional, tag = "3")]
        pub shard: Option<topodata::Shard>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetShardRequest {
        #[prost(string, tag = "1")]
        pub keyspace: String,
        #[prost(string, tag = "2")]
        pub shard_name: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetShardResponse {
        #[prost(message, optional, tag = "1")]
        pub shard: Option<Shard>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetTabletsRequest {
        #[prost(string, tag = "1")]
        pub keyspace: String,
        #[prost(string, tag = "2")]
        pub shard: String,
        #[prost(string, repeated, tag = "3")]
        pub cells: Vec<String>,
        #[prost(bool, tag = "4")]
        pub strict: bool,
        #[prost(message, repeated, tag = "5")]
        pub tablet_aliases: Vec<TabletAlias>,
        #[prost(enumeration = "topodata::TabletType", tag = "6")]
        pub tablet_type: i32,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetTabletsResponse {
        #[prost(message, repeated, tag = "1")]
        pub tablets: Vec<Tablet>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetTabletRequest {
        #[prost(message, optional, tag = "1")]
        pub tablet_alias: Option<TabletAlias>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetTabletResponse {
        #[prost(message, optional, tag = "1")]
        pub tablet: Option<Tablet>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetFullStatusRequest {
        #[prost(message, optional, tag = "1")]
        pub tablet_alias: Option<TabletAlias>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetFullStatusResponse {
        #[prost(message, optional, tag = "1")]
        pub status: Option<FullStatus>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ShardReplicationPositionsRequest {
        #[prost(string, tag = "1")]
        pub keyspace: String,
        #[prost(string, tag = "2")]
        pub shard: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ShardReplicationPositionsResponse {
        #[prost(map = "string, message", tag = "1")]
        pub replication_statuses: HashMap<String, Status>,
        #[prost(map = "string, message", tag = "2")]
        pub tablet_map: HashMap<String, Tablet>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ChangeTabletTypeRequest {
        #[prost(message, optional, tag = "1")]
        pub tablet_alias: Option<TabletAlias>,
        #[prost(enumeration = "topodata::TabletType", tag = "2")]
        pub db_type: i32,
        #[prost(bool, tag = "3")]
        pub dry_run: bool,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ChangeTabletTypeResponse {
        #[prost(message, optional, tag = "1")]
        pub before_tablet: Option<Tablet>,
        #[prost(message, optional, tag = "2")]
        pub after_tablet: Option<Tablet>,
        #[prost(bool, tag = "3")]
        pub was_dry_run: bool,
    }

    /// `Backup` (vitess `proto/vtctldata.proto`): an incremental one when
    /// `incremental_from_pos` is set. `concurrency` must be at least 1 (the tablet's
    /// errgroup waits for ever at 0).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct BackupRequest {
        #[prost(message, optional, tag = "1")]
        pub tablet_alias: Option<TabletAlias>,
        #[prost(bool, tag = "2")]
        pub allow_primary: bool,
        #[prost(int32, tag = "3")]
        pub concurrency: i32,
        #[prost(string, tag = "4")]
        pub incremental_from_pos: String,
        #[prost(bool, tag = "5")]
        pub upgrade_safe: bool,
    }

    /// One message of `Backup`'s stream: a log line of the tablet's backup.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct BackupResponse {
        #[prost(message, optional, tag = "1")]
        pub tablet_alias: Option<TabletAlias>,
        #[prost(string, tag = "2")]
        pub keyspace: String,
        #[prost(string, tag = "3")]
        pub shard: String,
        #[prost(message, optional, tag = "4")]
        pub event: Option<super::logutil::Event>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct StopReplicationRequest {
        #[prost(message, optional, tag = "1")]
        pub tablet_alias: Option<TabletAlias>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct StopReplicationResponse {}

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct StartReplicationRequest {
        #[prost(message, optional, tag = "1")]
        pub tablet_alias: Option<TabletAlias>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct StartReplicationResponse {}

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ExecuteFetchAsDbaRequest {
        #[prost(message, optional, tag = "1")]
        pub tablet_alias: Option<TabletAlias>,
        #[prost(string, tag = "2")]
        pub query: String,
        #[prost(int64, tag = "3")]
        pub max_rows: i64,
        #[prost(bool, tag = "4")]
        pub disable_binlogs: bool,
        #[prost(bool, tag = "5")]
        pub reload_schema: bool,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ExecuteFetchAsDbaResponse {
        #[prost(message, optional, tag = "1")]
        pub result: Option<QueryResult>,
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    #[test]
    fn wire_bytes_use_the_vitess_field_numbers() {
        // TabletAlias{cell:"z", uid:5}: field 1 (len) "z", field 2 (varint) 5.
        let a = topodata::TabletAlias {
            cell: "z".into(),
            uid: 5,
        };
        assert_eq!(a.encode_to_vec(), vec![0x0a, 0x01, b'z', 0x10, 0x05]);
        // ChangeTabletTypeRequest.db_type is field 2: DRAINED = 8.
        let r = vtctldata::ChangeTabletTypeRequest {
            tablet_alias: None,
            db_type: topodata::TabletType::Drained as i32,
            dry_run: false,
        };
        assert_eq!(r.encode_to_vec(), vec![0x10, 0x08]);
        // Status.replication_lag_seconds is field 4, io_state field 13.
        let s = replicationdata::Status {
            replication_lag_seconds: 7,
            io_state: 3,
            ..Default::default()
        };
        assert_eq!(s.encode_to_vec(), vec![0x20, 0x07, 0x68, 0x03]);
    }

    #[test]
    fn rows_split_into_cells_with_nulls() {
        let row = query::Row::from_cells(&[Some("sync_binlog"), None, Some("1")]);
        assert_eq!(row.lengths, vec![11, -1, 1]);
        assert_eq!(
            row.cells(),
            vec![Some("sync_binlog".into()), None, Some("1".into())]
        );
    }
}
