//! The plumbing every program's observe and act share, in one place:
//! - [`ObjectKey`]: a namespaced object's identity (`namespace/name`);
//! - [`Read`]: what a tolerant read gave (absent, present, or unreadable with a reason);
//! - [`list`]: one paged LIST (every page, 500 objects a page), folded or collected;
//! - [`apis`]: the VitessCluster and VolumeSnapshot APIs (dynamic, one definition each);
//! - [`replace_with_retry`]: the one GET → change → replace loop, read again on 409;
//! - [`Report`] and [`ActError`]: what a run did and what failed, typed;
//! - [`watch`]: one watch of one object (GET, then watch by name; never a list), shared by
//!   [`wait_until`] (a wait until a condition holds, outliving broken watches) and
//!   [`Wake`] (a poll's nap that ends at the object's next change).
//!
//! The shard key is [`crate::shard::ShardRef`].

pub mod apis;
mod delete;
mod key;
pub mod list;
mod read;
mod replace;
mod report;
mod wait;
mod wake;
pub mod watch;

pub use delete::remove_made;
pub use key::ObjectKey;
pub use read::Read;
pub use replace::{Change, Outcome, ReplaceError, replace_with_retry};
pub use report::{ActError, Completeness, ErrorLine, Report};
pub use wait::{Waited, wait_until};
pub use wake::Wake;
pub use watch::Refusal;
