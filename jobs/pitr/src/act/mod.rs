//! Act: what touches the world — the next increment asked of vtctld ([`archive`]), the
//! archive's files fetched and checked ([`fetch`]).

pub mod archive;
pub mod fetch;
