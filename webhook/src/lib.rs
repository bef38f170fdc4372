//! vtsnap-admission: a mutating admission webhook (`failurePolicy: Ignore`) that changes
//! what vitess-operator creates, at creation, without fighting it:
//! - a new tablet PVC of an opted-in pool gets `dataSourceRef` to its shard's newest usable
//!   snapshot (restore injection);
//! - a new tablet Pod of such a pool gets the `vtsnap-restore` init container and, for
//!   node-local drivers, a pin to the snapshot's node;
//! - vtbackup Pods and PVCs get the configured scratch storage and the hashes the storage
//!   reconciler reads.
//!
//! observe (caches, vtctld refresh) → decide ([`decide`], pure) → act (the patch in the
//! response) → report (audit annotation, Event, metrics, log line).

pub mod admission;
pub mod cache;
pub mod decide;
pub mod observe;
pub mod offline;
pub mod patch;
pub mod review;
pub mod server;
pub mod tablets;
pub mod tls;
