//! Shared by the restore benches: the move of one volume back and forth between two
//! tablet UIDs (the move is symmetric, so one layout serves every repetition), timed.

use std::path::Path;
use std::time::{Duration, Instant};

use vtsnap_core::naming::TabletUid;
use vtsnap_restore::{Options, run};

/// The tablet the layout is written for, and the one it is moved to and back from.
pub const FROM: TabletUid = TabletUid::new(101);
pub const TO: TabletUid = TabletUid::new(2_548_885_007);

/// `reps` restores of one volume.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub median: Duration,
    /// The run least disturbed by other work on the machine (which only adds time): what
    /// shape checks compare, as a few-millisecond median moves with fsync latency alone.
    pub fastest: Duration,
}

/// `reps` restores of the volume under `root`, alternately to [`TO`] and back to
/// [`FROM`]; each must move it.
pub fn time_moves(root: &Path, reps: usize) -> Timing {
    let mut times = Vec::with_capacity(reps);
    for i in 0..reps {
        let to = if i % 2 == 0 { TO } else { FROM };
        let opts = Options {
            vtdataroot: root.to_path_buf(),
            tablet_uid: to,
            server_id: None,
            dry_run: false,
        };
        let start = Instant::now();
        let out = run(&opts).unwrap();
        times.push(start.elapsed());
        assert_eq!(out.action, vtsnap_restore::Action::Moved);
    }
    times.sort();
    Timing {
        median: times[times.len() / 2],
        fastest: times[0],
    }
}
