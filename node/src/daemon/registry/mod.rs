//! What this helper holds, persisted on the node (`<state-dir>/holds.json`) before every
//! freeze and after every release, so a restarted helper — and the watchdog, which needs
//! no API server — know exactly what to thaw.
//!
//! An entry that cannot be read as an [`Entry`] (a corrupt field in an otherwise valid
//! file) is kept verbatim on every rewrite and never released, overwritten or removed: a
//! guessed tablet type or a forgotten hold is worse than a reported one. Only its hold part
//! ([`HoldPart`]), if that reads, is ended by the watchdog at max-hold.
//!
//! A file that is not valid JSON at all (truncated, say) never stops the helper: it is moved
//! aside to `holds.json.corrupt-<unix-ms>`, every complete entry before the damage is kept,
//! and a marker (`holds.lost`) stays until the daemon has looked, on its leases, for holds
//! the lost part may have recorded ([`Registry::lost_holds`]).
//!
//! The freezer files of every recorded freeze are kept open ([`Kept`]) from the freeze (or
//! from loading the registry) on, so ending a freeze never needs a new file descriptor.
//!
//! Files: `entry` (a record and what is kept of one that cannot be read), `thaw` (ending
//! freezes through kept descriptors), `holds` (the contents and their JSON), `store` (the
//! persisted [`Registry`]) and `error`.

mod entry;
mod error;
mod holds;
mod store;
mod thaw;

pub use entry::{Entry, HoldPart, Unreadable};
pub use error::RegistryError;
pub use holds::Holds;
pub use store::Registry;
pub use thaw::{Freezes, Kept, ThawError, end_freezes};

#[cfg(test)]
mod tests;
