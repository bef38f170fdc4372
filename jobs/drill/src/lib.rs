//! `vtsnap-drill`: restore drills (docs/design.md §5.9). Per shard, the snapshot a new
//! tablet would get is restored into a throwaway Pod, checked through mysqld's socket and
//! measured; the result is recorded on the snapshot (`vtsnap.io/drill`).
//!
//! Two programs in one binary, each observe → decide → act → report:
//! - the drill Job ([`run`]): [`observe`] the shard (the API or a dump) → [`decide`] the
//!   snapshot and the drill's objects → [`act`]: create them, watch the Pod (its status read
//!   by [`observe::pod`], judged by [`decide::outcome`]), record → [`report`];
//! - the checker in the drill Pod ([`check`]): [`observe::server`] probes the restored
//!   mysqld → [`decide::verdict`] judges it → its report in the termination message.

pub mod act;
pub mod check;
pub mod decide;
pub mod error;
pub mod observe;
pub mod report;
pub mod run;
