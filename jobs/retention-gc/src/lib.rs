//! `vtsnap-gc`: retention, deletion policy and fence recovery for vtsnap's VolumeSnapshots
//! (docs/design.md §4.2, §5.4, §5.6), and the watch over injected restores ([`restores`]).
//! observe ([`inventory`]) → decide ([`plan`], pure) → act → report.

pub mod inventory;
pub mod metrics;
pub mod plan;
pub mod restores;
pub mod run;
