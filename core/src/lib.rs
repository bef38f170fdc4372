//! What two or more vtsnap programs share, and nothing else.
//!
//! - [`naming`]: vitess-operator and Vitess naming facts (tablet UIDs, tablet directories).
//! - [`fault`]: named fault points that tests use to stop a process after a given step.
//! - [`logging`]: tracing setup (JSON in containers, human-readable on a terminal).

pub mod fault;
pub mod logging;
pub mod naming;
