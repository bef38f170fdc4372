//! The plugin's decisions, pure and tested without a client: the doctor's checks and the
//! status table, from the typed objects `observe` read.

pub mod doctor;
pub mod objects;
pub mod recover;
pub mod schedules;
pub mod status;
pub mod storage;
pub mod world;
