//! Act: what touches the world — the archive's files fetched and checked ([`fetch`]).

pub mod fetch;
