//! Decide: pure. Which increments carry a snapshot to the target is core's
//! (`vtsnap_core::pitr::chain`, shared with the CLI's status and the GC); what the replay
//! runs and whether what it did is right is [`replay`]'s; which window record the
//! archive step writes is [`window`]'s; the recovery's PVC, Pod and cut are
//! [`recovery`]'s.

pub mod archive;
pub mod recovery;
pub mod replay;
pub mod window;
