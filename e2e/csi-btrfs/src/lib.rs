//! `vtsnap-csi-btrfs`: a CSI driver (Identity and Controller services of CSI spec v1)
//! whose volumes are btrfs subvolumes and whose snapshots are read-only btrfs snapshots.
//! It stands behind the real csi-provisioner and csi-snapshotter of the local control
//! plane; there is no Node service (the lab mounts volumes where kubelet would).
//!
//! - [`csi`]: the spec's messages, hand-written with their field numbers.
//! - [`ids`]: what a request's name or id must be before it touches a path.
//! - [`btrfs`]: subvolume create, snapshot and delete.
//! - [`meta`]: the per-object record that lets a restarted driver answer the same.
//! - [`store`]: the state under the root: observe, decide (pure), act.
//! - [`service`]: the gRPC services: request parsing and status codes.
//! - [`server`]: serving on a unix socket.

pub mod btrfs;
pub mod csi;
pub mod ids;
pub mod meta;
pub mod server;
pub mod service;
pub mod store;
