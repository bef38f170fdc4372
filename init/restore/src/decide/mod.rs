//! Decide: every decision of a run, as pure functions of what observe found
//! ([`Observed`]) — nothing to do, a refusal, or a [`Plan`] checked step by step against
//! the volume before the first change ([`preflight`]). Nothing here reads or writes the
//! volume itself: the pre-flight asks the view observe hands on.

pub mod plan;
pub mod preflight;

use vtsnap_core::naming::TabletUid;

pub use self::plan::{
    LogDir, MoveSource, Plan, RemoveWhy, SERVER_ID_END, SERVER_ID_MIN, Start, Step, TopDirLink,
};
use self::preflight::VolumeView;
use crate::refusal::Refusal;

/// Where vitess-operator mounts the volume; my.cnf's datadir tells the mount actually
/// used, so this only classifies a symlink met before that is known (a symlinked my.cnf,
/// or anything a resumed run finds: the journal does not record the mount).
pub const POD_MOUNT: &str = vtsnap_core::restore_pod::VTDATAROOT;

/// What observe hands to decide: the tablet this pod runs, what its volume holds, and the
/// volume to look at (read-only) for the pre-flight.
#[derive(Debug)]
pub struct Observed<V> {
    pub mine: TabletUid,
    pub found: Found,
    pub volume: V,
}

/// What the volume holds, as far as the restore is concerned.
#[derive(Debug, Clone)]
pub enum Found {
    /// No tablet directory: a fresh volume, normal provisioning.
    Empty,
    /// Only this tablet's own directory: a same-UID replacement.
    Own { restore_in_progress: bool },
    /// An interrupted earlier run left its journal with this plan: finish it.
    Resume(Plan),
    /// Exactly one other tablet's directory, and the server-id to give the copy.
    Move {
        source: Box<MoveSource>,
        server_id: NewServerId,
    },
}

/// Where the new server-id comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewServerId {
    /// `--server-id`: checked here against the range and the source's own.
    Given(u32),
    /// Drawn at random in the range, never the source's own.
    Drawn(u32),
}

/// What the run does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nothing to change on `tablet`'s volume.
    Leave {
        volume: Leave,
        tablet: TabletUid,
        /// `restore_in_progress` is left as it was (see `Outcome`).
        restore_in_progress: bool,
    },
    /// Carry out `plan`, from its `start`.
    Move { plan: Plan, start: Start },
}

/// Why a volume is left as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leave {
    /// No tablet directory: a fresh volume.
    Empty,
    /// Already this tablet's.
    Own,
}

/// Why nothing was decided.
#[derive(Debug, thiserror::Error)]
pub enum DecideError {
    #[error("bad usage: --server-id {id} is outside [{SERVER_ID_MIN}, {SERVER_ID_END})")]
    ServerIdOutOfRange { id: u32 },
    #[error("bad usage: --server-id {id} is the source tablet's own server-id")]
    ServerIdOfSource { id: u32 },
    #[error("refusing to change the volume: {0}")]
    Refused(#[from] Refusal),
}

impl NewServerId {
    /// The server-id to use for a copy of the tablet whose server-id was `old`.
    pub fn check(self, old: Option<u32>) -> Result<u32, DecideError> {
        match self {
            Self::Drawn(id) => Ok(id),
            Self::Given(id) if !(SERVER_ID_MIN..SERVER_ID_END).contains(&id) => {
                Err(DecideError::ServerIdOutOfRange { id })
            }
            Self::Given(id) if Some(id) == old => Err(DecideError::ServerIdOfSource { id }),
            Self::Given(id) => Ok(id),
        }
    }
}

/// Decides what to do with the volume observed.
pub fn decide(o: &Observed<impl VolumeView>) -> Result<Decision, DecideError> {
    let leave = |volume, restore_in_progress| Decision::Leave {
        volume,
        tablet: o.mine,
        restore_in_progress,
    };
    match &o.found {
        Found::Empty => Ok(leave(Leave::Empty, false)),
        Found::Own {
            restore_in_progress,
        } => Ok(leave(Leave::Own, *restore_in_progress)),
        Found::Resume(plan) => {
            if plan.to != o.mine {
                return Err(Refusal::JournalForOtherTablet {
                    journal_to: plan.to,
                    mine: o.mine,
                }
                .into());
            }
            // What an earlier run left, and anything planted since, checked before the
            // first change of this run.
            preflight::check(&o.volume, POD_MOUNT, plan, Start::Resume)?;
            Ok(Decision::Move {
                plan: plan.clone(),
                start: Start::Resume,
            })
        }
        Found::Move { source, server_id } => {
            let server_id = server_id.check(source.old_server_id)?;
            let plan = plan::plan(source, o.mine, server_id);
            // Everything the move will touch, checked before the first change.
            preflight::check(&o.volume, &source.mount, &plan, Start::Fresh)?;
            Ok(Decision::Move {
                plan,
                start: Start::Fresh,
            })
        }
    }
}

#[cfg(test)]
mod fake;

#[cfg(test)]
mod tests {
    use super::fake::{CNF, FakeVolume, NEW, source, uid};
    use super::*;
    use crate::beneath::Kind;

    fn volume() -> FakeVolume {
        FakeVolume::tablet_101()
    }

    fn moving(server_id: NewServerId) -> Found {
        Found::Move {
            source: Box::new(source()),
            server_id,
        }
    }

    fn decide_on(found: Found, volume: FakeVolume) -> Result<Decision, DecideError> {
        decide(&Observed {
            mine: uid(NEW),
            found,
            volume,
        })
    }

    #[test]
    fn a_fresh_or_own_volume_is_left_for_this_tablet() {
        assert_eq!(
            decide_on(Found::Empty, FakeVolume::new()).unwrap(),
            Decision::Leave {
                volume: Leave::Empty,
                tablet: uid(NEW),
                restore_in_progress: false
            }
        );
        let own = Found::Own {
            restore_in_progress: true,
        };
        assert_eq!(
            decide_on(own, FakeVolume::new()).unwrap(),
            Decision::Leave {
                volume: Leave::Own,
                tablet: uid(NEW),
                restore_in_progress: true
            }
        );
    }

    #[test]
    fn a_move_is_planned_fresh_with_the_server_id_given_or_drawn() {
        for (asked, want) in [
            (NewServerId::Given(SERVER_ID_MIN), SERVER_ID_MIN),
            (NewServerId::Given(SERVER_ID_END - 1), SERVER_ID_END - 1),
            (NewServerId::Drawn(777), 777),
        ] {
            let Decision::Move { plan, start } = decide_on(moving(asked), volume()).unwrap() else {
                panic!("{asked:?} was not planned");
            };
            assert_eq!(start, Start::Fresh);
            assert_eq!(plan, plan::plan(&source(), uid(NEW), want));
        }
    }

    #[test]
    fn a_server_id_flag_outside_the_range_or_the_sources_own_is_bad_usage() {
        for (id, want) in [
            (SERVER_ID_MIN - 1, "outside"),
            (SERVER_ID_END, "outside"),
            (1234, "own"),
        ] {
            let e = decide_on(moving(NewServerId::Given(id)), volume()).unwrap_err();
            let ok = match e {
                DecideError::ServerIdOutOfRange { id: got } => got == id && want == "outside",
                DecideError::ServerIdOfSource { id: got } => got == id && want == "own",
                DecideError::Refused(_) => false,
            };
            assert!(ok, "{id}: {e}");
        }
    }

    #[test]
    fn a_journal_for_another_tablet_is_refused_and_one_for_this_tablet_resumed() {
        let plan = plan::plan(&source(), uid(NEW), 777);
        let mut other = plan.clone();
        other.to = uid(103);
        let e = decide_on(Found::Resume(other), volume()).unwrap_err();
        assert!(
            matches!(
                e,
                DecideError::Refused(Refusal::JournalForOtherTablet { journal_to, mine })
                    if journal_to == uid(103) && mine == uid(NEW)
            ),
            "{e}"
        );
        // Half-way: the directory already renamed, my.cnf not yet rewritten.
        let half = FakeVolume::new()
            .dir("vt_0000000102")
            .file("vt_0000000102/my.cnf", CNF);
        assert_eq!(
            decide_on(Found::Resume(plan.clone()), half).unwrap(),
            Decision::Move {
                plan,
                start: Start::Resume
            }
        );
    }

    #[test]
    fn a_move_the_volume_cannot_take_is_refused_before_any_change() {
        let planted = volume().dir("vt_0000000102");
        let e = decide_on(moving(NewServerId::Drawn(777)), planted).unwrap_err();
        assert!(
            matches!(e, DecideError::Refused(Refusal::TargetExists { .. })),
            "{e}"
        );
        let fifo = FakeVolume::new()
            .dir("vt_0000000101")
            .entry("vt_0000000101/my.cnf", Kind::Fifo);
        let e = decide_on(moving(NewServerId::Drawn(777)), fifo).unwrap_err();
        assert!(
            matches!(e, DecideError::Refused(Refusal::WrongFileType { .. })),
            "{e}"
        );
    }
}
