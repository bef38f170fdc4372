//! `vtsnap-pitr`: point-in-time recovery on snapshot bases (docs/pitr.md). A shard's
//! binlog archive is Vitess's incremental backups; a recovery restores a vtsnap snapshot
//! and replays the increments that follow it up to a time or a GTID set.
//!
//! - [`archive`]: the archive in Vitess's `file` backup storage;
//! - [`observe`]: the archive's increments, read and checked;
//! - [`decide`]: the replay script and the check of what it did (pure);
//! - [`act`]: the next increment asked of vtctld; an increment's binlogs out of the
//!   archive, checked;
//! - [`report`]: each command's JSON line; [`run`]: the archive step, whole;
//!   [`recover`]: a recovery, whole (the recovery Pod).
//!
//! Which increments carry a snapshot to a target is `vtsnap_core::pitr::chain` (the CLI's
//! status and the GC ask it too).

pub mod act;
pub mod archive;
pub mod decide;
pub mod observe;
pub mod recover;
pub mod report;
pub mod run;
