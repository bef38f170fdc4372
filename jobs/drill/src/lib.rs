//! `vtsnap-drill`: restore drills (docs/design.md §5.9). Per shard, the snapshot a new
//! tablet would get is restored into a throwaway Pod, checked through mysqld's socket and
//! measured; the result is recorded on the snapshot (`vtsnap.io/drill`).

pub mod act;
pub mod check;
pub mod decide;
pub mod error;
pub mod metrics;
pub mod objects;
pub mod observe;
pub mod offline;
pub mod outcome;
pub mod report;
pub mod run;

#[cfg(test)]
mod decide_tests;
