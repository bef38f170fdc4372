//! vtsnap-admission: a mutating admission webhook (`failurePolicy: Ignore`) that changes
//! what vitess-operator creates, at creation, without fighting it:
//! - a new tablet PVC of an opted-in pool gets `dataSourceRef` to its shard's newest usable
//!   snapshot (restore injection);
//! - a new tablet Pod of such a pool gets the `vtsnap-restore` init container and, for
//!   node-local drivers, a pin to the snapshot's node;
//! - vtbackup Pods and PVCs get the configured scratch storage and the hashes the storage
//!   reconciler reads.
//!
//! observe ([`observe`]: the review's object typed; [`inventory`]: caches, vtctld refresh)
//! → decide ([`decide`], pure, on types) → act (the patch in the answer: [`patch`],
//! [`admission`]) → report ([`report`]: audit annotation, Event, metrics, log line).

pub mod admission;
pub mod cache;
pub mod decide;
pub mod inventory;
pub mod observe;
pub mod offline;
pub mod patch;
pub mod report;
pub mod review;
pub mod server;
pub mod tablets;
pub mod tls;
