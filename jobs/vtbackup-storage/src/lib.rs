//! `vtsnap-vtbackup-storage`: converges existing vtbackup initial-backup Pods and PVCs to
//! the configured scratch storage (the storage reconciliation of docs/design.md §9, from outside the
//! operator) — objects made before vtsnap, while the admission webhook was down, or before
//! the config changed. observe ([`observe`]) → decide ([`decide::plan`], pure) → act
//! ([`act::run`]) → report ([`report`]).

pub mod act;
pub mod decide;
pub mod observe;
pub mod report;
