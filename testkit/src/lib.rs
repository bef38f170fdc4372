//! vtsnap's test kit (dev-only).
//!
//! - [`layout`]: Vitess tablet directories as vitess-operator pods leave them on a volume.
//! - [`binlog`]: tiny, valid binlog files for tests that need no server.
//! - [`tree`]: byte-exact snapshots of a directory tree, to prove "nothing changed".
//! - [`btrfs`]: a btrfs file system on a loop device with atomic snapshots and clones
//!   (block-level, point-in-time, like LVM thin or a CSI snapshot). Needs root.
//! - [`fake_shard`]: a fake shard (API, vtctld, node helper, snapshotter) for job tests.
//! - [`mariadb`]: a real MariaDB (or, where Docker and the internet exist, MySQL 8)
//!   server in a container, running on a tablet directory of a host volume.
//!
//! - [`vitess`]: a real Vitess shard (etcd, vtctld, VTOrc, mysqlctld and vttablet on
//!   MySQL 9.7) in containers of the Vitess image.
//! - [`prom_parse`]: a strict parser of OpenMetrics and Prometheus text, for metrics tests.
//! - [`helm`]: the real helm installing the repo's chart.
//! - [`real_kube`]: a client of a real API server (the local control plane of
//!   `make cluster-up`) with per-test namespaces and watch-based waits.
//!
//! Test code: `unwrap`/`expect` are fine here.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod binlog;
pub mod btrfs;
pub mod fake_kube;
pub mod fake_mysqlctld;
pub mod fake_node;
pub mod fake_shard;
pub mod fake_snapshotter;
pub mod fake_vtctld;
pub mod fixtures;
pub mod grpc;
pub mod helm;
pub mod https;
pub mod layout;
pub mod leftovers;
pub mod mariadb;
pub mod operator_objects;
pub mod pod_backend;
pub mod prom_parse;
pub mod rbac;
pub mod real_kube;
pub mod s3;
pub mod tree;
pub mod vitess;
