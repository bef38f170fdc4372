//! `vtsnap-gc`: retention, deletion policy and fence recovery for vtsnap's VolumeSnapshots
//! (docs/design.md §4.2, §5.4, §5.6), and what to do about failed restores
//! ([`decide::failed_restores`]).
//! observe ([`observe`]) → decide ([`decide`], pure) → act ([`act`]) → report ([`report`]).

pub mod act;
pub mod decide;
pub mod metrics;
pub mod observe;
pub mod report;
