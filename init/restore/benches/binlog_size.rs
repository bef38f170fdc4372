//! How long `vtsnap-restore` takes as the last binlog grows (docs/design.md §8).
//!
//! A restore reads the last binlog only when it is in use (an online snapshot's crash
//! image: its Binlog_checkpoint events name files that are renamed). A cleanly closed one
//! (a cold snapshot) is left after its Format_description event, so a cold restore must
//! stay flat from a 1 MiB to a 1 GiB last binlog: ratio ≤ 3 of the fastest runs, and a
//! median within 200 ms at either size. The online restore walks every event header: it is measured and reported, and
//! must still finish (it grows with the binlog by design).
//!
//! `cargo bench -p vtsnap-restore --bench binlog_size [-- --quick]`

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use common::{FROM, Timing, time_moves};
use vtsnap_testkit::layout::TabletLayout;

const MIB: u64 = 1 << 20;
const FLATNESS_LIMIT: f64 = 3.0;
const TARGET: Duration = Duration::from_millis(200);

/// Restores of a tablet whose last binlog holds `bytes`, moved back and forth between two
/// UIDs (`reps` times).
fn measure(dir: &Path, bytes: u64, crash_image: bool, reps: usize) -> Timing {
    let root = dir.join("vtdataroot");
    std::fs::create_dir_all(&root).unwrap();
    let mut layout = TabletLayout::mariadb(FROM.get()).last_binlog_bytes(bytes);
    if crash_image {
        layout = layout.crash_image();
    }
    layout.write(&root).unwrap();
    let last = root
        .join(FROM.tablet_dir_name())
        .join(format!("bin-logs/{}.000003", layout.binlog_base()));
    let size = std::fs::metadata(&last).unwrap().len();
    assert!(size >= bytes, "{} is {size} bytes", last.display());
    time_moves(&root, reps)
}

fn main() -> ExitCode {
    let quick = std::env::args().any(|a| a == "--quick");
    let reps = if quick { 9 } else { 15 };
    let sizes = [(MIB, "1 MiB"), (1024 * MIB, "1 GiB")];
    println!("| last binlog | snapshot | median restore | fastest | within 200 ms |");
    println!("|---|---|---|---|---|");
    let mut cold = Vec::new();
    for &(bytes, label) in &sizes {
        for (crash_image, kind) in [(false, "cold (closed)"), (true, "online (in use)")] {
            let dir = tempfile::Builder::new()
                .prefix("vtsnap-bench-")
                .tempdir_in("/var/tmp")
                .unwrap();
            let t = measure(dir.path(), bytes, crash_image, reps);
            println!(
                "| {label} | {kind} | {:.1} ms | {:.1} ms | {} |",
                t.median.as_secs_f64() * 1e3,
                t.fastest.as_secs_f64() * 1e3,
                if t.median <= TARGET { "yes" } else { "no" }
            );
            if !crash_image {
                cold.push(t);
            }
        }
    }
    let ratio = cold[1].fastest.as_secs_f64() / cold[0].fastest.as_secs_f64().max(1e-6);
    println!("cold flatness (fastest runs): 1 GiB / 1 MiB = {ratio:.2} (limit {FLATNESS_LIMIT})");
    if ratio <= FLATNESS_LIMIT && cold.iter().all(|t| t.median <= TARGET) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
