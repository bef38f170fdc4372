//! Act: what touches the world — the next increment asked of vtctld ([`archive`]), the
//! archive's files fetched and checked ([`fetch`]), the window recorded on the newest
//! snapshot ([`window`]), the recovery's objects made, watched and cut ([`recover`]).

pub mod archive;
pub mod fetch;
pub mod recover;
pub mod window;
