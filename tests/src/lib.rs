//! The local lab: a whole Vitess shard on one machine.
//!
//! Real: MariaDB servers in containers laid out as vitess-operator lays out tablets, GTID
//! replication, btrfs subvolumes on a loop device as the tablets' PVCs (atomic block-level
//! snapshots and writable clones), the cgroup freezer, and the real `vtsnap-snapshot`,
//! `vtsnap-node`, `vtsnap-restore` and `vtsnap-gc` logic.
//! Fake, because it cannot run here: vtctld (its calls act on the real servers) and
//! mysqlctld (its work is done by a supervisor inside each mysqld container). The
//! Kubernetes API and the CSI driver are the in-memory fakes by default and the real
//! control plane with `--kubeconfig` ([`control_plane`]).
//!
//! The lab is a harness built on the test kit, like a test: a failed step panics with the
//! reason, and unwinding removes the containers and the loop device.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod backend;
pub mod bench;
pub mod control_plane;
pub mod csi;
pub mod demo;
pub mod drill;
pub mod pitr_oracle;
pub mod provision;
pub mod reprovision;
pub mod resources;
pub mod shard;
pub mod soak;
pub mod timeline;
pub mod vitess_bench;
pub mod vitess_cut;
pub mod vitess_demo;
pub mod vitess_lab;
pub mod vitess_pitr;
