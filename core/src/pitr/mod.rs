//! Point-in-time recovery on snapshot bases (docs/pitr.md): the binlog archive is Vitess's
//! own incremental backups; a recovery restores a vtsnap snapshot and replays the
//! increments that follow it up to a time or a GTID set.
//!
//! - [`archive_url`]: where an object store keeps the archive, read as hostile input;
//! - [`manifest`]: an increment's record, read as hostile input;
//! - [`chain`]: which increments carry a snapshot forward, to which target, and the
//!   window a shard can be recovered to (pure);
//! - [`record`]: that window as the archive job last found it, on the newest snapshot;
//! - [`run`]: the recovery run's words its readers share.

pub mod archive_url;
pub mod binlog;
pub mod chain;
pub mod manifest;
pub mod record;
pub mod run;
