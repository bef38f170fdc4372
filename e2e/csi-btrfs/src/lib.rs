//! `vtsnap-csi-btrfs`: a CSI driver (Identity, Controller and Node services of CSI spec
//! v1) whose volumes are btrfs subvolumes and whose snapshots are read-only btrfs
//! snapshots. It stands behind the real csi-provisioner and csi-snapshotter of the local
//! control plane; its Node service publishes a volume as a bind mount of its subvolume.
//!
//! - [`csi`]: the spec's messages, hand-written with their field numbers.
//! - [`ids`]: what a request's name or id must be before it touches a path.
//! - [`capability`]: what a volume capability asks for, and whether a volume serves it.
//! - [`mounts`]: the kernel's mount table, the record of what is published where.
//! - [`node`]: publish and unpublish: observe, decide (pure), act.
//! - [`btrfs`]: subvolume create, snapshot and delete.
//! - [`meta`]: the per-object record that lets a restarted driver answer the same.
//! - [`store`]: the state under the root: observe, decide (pure), act.
//! - [`service`]: the gRPC services: request parsing and status codes.
//! - [`server`]: serving on a unix socket.

pub mod btrfs;
pub mod capability;
pub mod csi;
pub mod ids;
pub mod meta;
pub mod mounts;
pub mod node;
pub mod server;
pub mod service;
pub mod store;
