//! The plumbing every program's observe and act share, in one place:
//! - [`ObjectKey`]: a namespaced object's identity (`namespace/name`);
//! - [`Read`]: what a tolerant read gave (absent, present, or unreadable with a reason);
//! - [`list`]: one paged LIST (every page, 500 objects a page), folded or collected;
//! - [`apis`]: the VitessCluster and VolumeSnapshot APIs (dynamic, one definition each);
//! - [`replace_with_retry`]: the one GET → change → replace loop, read again on 409;
//! - [`Report`] and [`ActError`]: what a run did and what failed, typed;
//! - [`wait_until`]: a wait on one object's watch that outlives broken watches.
//!
//! The shard key is [`crate::shard::ShardRef`].

pub mod apis;
mod key;
pub mod list;
mod read;
mod replace;
mod report;
mod wait;

pub use key::ObjectKey;
pub use read::Read;
pub use replace::{Change, Outcome, ReplaceError, replace_with_retry};
pub use report::{ActError, Completeness, Report};
pub use wait::{Refusal, Waited, wait_until};
