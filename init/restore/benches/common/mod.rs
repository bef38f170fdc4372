//! Shared by the restore benches: the move of one volume back and forth between two
//! tablet UIDs (the move is symmetric, so one layout serves every repetition), timed.

use std::path::Path;
use std::time::{Duration, Instant};

use vtsnap_core::naming::TabletUid;
use vtsnap_restore::{Options, run};

/// The tablet the layout is written for, and the one it is moved to and back from.
pub const FROM: TabletUid = TabletUid::new(101);
pub const TO: TabletUid = TabletUid::new(2_548_885_007);

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// The median of `reps` restores of the volume under `root`, alternately to [`TO`] and
/// back to [`FROM`]; each must move it.
pub fn median_move(root: &Path, reps: usize) -> Duration {
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
    median(times)
}
