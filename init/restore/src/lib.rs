//! `vtsnap-restore`: makes a tablet volume cloned from another tablet's snapshot belong
//! to the tablet it is now attached to (docs/design.md §5.5).
//!
//! The spine is observe → decide → act → report: [`observe`] reads the volume,
//! [`decide`] decides (pure: a refusal, nothing to do, or the plan checked step by step
//! before the first change), [`act`] carries the plan out under a journal, and [`report`]
//! makes the outcome, the JSON line and the exit code.

pub mod act;
pub mod beneath;
pub mod binlog;
pub mod decide;
pub mod durable;
pub mod journal;
pub mod observe;
pub mod refusal;
pub mod report;
pub use vtsnap_core::mycnf;

use std::path::PathBuf;

use vtsnap_core::naming::TabletUid;

pub use crate::report::{Action, Outcome, RestoreError};

/// What to do, as parsed from flags or the environment.
#[derive(Debug, Clone)]
pub struct Options {
    pub vtdataroot: PathBuf,
    pub tablet_uid: TabletUid,
    /// A fixed new server-id instead of a random one.
    pub server_id: Option<u32>,
    pub dry_run: bool,
}

/// Runs the restore on one volume.
pub fn run(opts: &Options) -> Result<Outcome, RestoreError> {
    let mode = act::Mode::from_dry_run(opts.dry_run);
    // observe: the volume, my.cnf, binlogs, a journal an earlier run left; changes nothing.
    let observed = observe::observe(&opts.vtdataroot, opts.tablet_uid, opts.server_id)?;
    // decide: nothing to do, a refusal, or the plan, checked against the volume (pure).
    let decision = decide::decide(&observed)?;
    // act: the plan's steps under a journal (a dry run lists them).
    let steps = act::act(observed.volume.root(), &decision, mode)?;
    // report
    Ok(report::outcome(&decision, steps, mode))
}
