//! What two or more vtsnap programs share, and nothing else.
//!
//! - [`config`]: the config file: model, field-level merge, validation, resolved policy.
//! - [`naming`]: vitess-operator and Vitess naming facts (tablet UIDs, names, key ranges).
//! - [`labels`]: label keys of vitess-operator and vtsnap.
//! - [`k8s_names`]: what the Kubernetes API accepts as a name, label or annotation.
//! - [`input`]: the one bounded, type-checked reader of every input file.
//! - [`fault`]: named fault points that tests use to stop a process after a given step.
//! - [`logging`]: tracing setup (JSON in containers, human-readable on a terminal).
//! - [`metrics`]: Prometheus exposition (OpenMetrics for `/metrics`, textfiles for jobs).
//! - [`retry`]: the Kubernetes client's bounded retries of a busy API server.
//! - [`reconcile`]: the one GET → change → replace loop, read again on 409 Conflict.

pub mod api_error;
pub mod cli;
pub mod config;
pub mod coverage;
pub mod cron;
pub mod discover;
pub mod dump;
pub mod duration;
pub mod events;
pub mod exit;
pub mod fault;
pub mod fence;
pub mod input;
pub mod k8s_names;
pub mod labels;
pub mod logging;
pub mod metrics;
pub mod mycnf;
pub mod mysql_version;
pub mod mysqlctl;
pub mod naming;
pub mod pitr;
pub mod quantity;
pub mod reconcile;
pub mod restore_pod;
pub mod restored;
pub mod retry;
pub mod schedule;
pub mod shard;
pub mod snapshot;
pub mod tablet_volume;
pub mod textfile;
pub mod unixsock;
pub mod vitesscluster;
pub mod volume;
pub mod vtbackup;
pub mod vtctld;
