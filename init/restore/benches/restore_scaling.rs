//! How long `vtsnap-restore` takes as the volume grows in bytes and in files.
//!
//! Volumes of 100 MiB and 10 GiB (sparse data files), holding 1,000 and 50,000 files, each
//! with three binlogs and two relay logs. Each volume is moved back and forth between two
//! tablet UIDs (the move is symmetric), so one layout serves every repetition. Prints a
//! Markdown table of medians and fastest runs and checks the shape, not the clock: the
//! time must stay flat as bytes grow (ratio 10 GiB / 100 MiB of the fastest runs at the
//! same file count ≤ 3; a median of a few milliseconds moves with fsync latency alone).
//!
//! `cargo bench -p vtsnap-restore --bench restore_scaling [-- --quick]`

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

fn measure(dir: &Path, bytes: u64, files: usize, reps: usize) -> Timing {
    let root = dir.join("vtdataroot");
    std::fs::create_dir_all(&root).unwrap();
    TabletLayout::mariadb(FROM.get())
        .data_files(files, bytes / files as u64)
        .write(&root)
        .unwrap();
    time_moves(&root, reps)
}

fn main() -> ExitCode {
    let quick = std::env::args().any(|a| a == "--quick");
    let reps = if quick { 9 } else { 15 };
    let sizes = [(100 * MIB, "100 MiB"), (10 * 1024 * MIB, "10 GiB")];
    let counts = [1_000usize, 50_000];
    println!("| volume | files | median restore | fastest | within 200 ms |");
    println!("|---|---|---|---|---|");
    let mut results = Vec::new();
    for &(bytes, label) in &sizes {
        for &files in &counts {
            let dir = tempfile::Builder::new()
                .prefix("vtsnap-bench-")
                .tempdir_in("/var/tmp")
                .unwrap();
            let t = measure(dir.path(), bytes, files, reps);
            println!(
                "| {label} | {files} | {:.1} ms | {:.1} ms | {} |",
                t.median.as_secs_f64() * 1e3,
                t.fastest.as_secs_f64() * 1e3,
                if t.median <= TARGET { "yes" } else { "NO" }
            );
            results.push((bytes, files, t));
        }
    }
    let mut ok = true;
    for &files in &counts {
        let at = |b: u64| {
            results
                .iter()
                .find(|r| r.0 == b && r.1 == files)
                .map(|r| r.2.fastest.as_secs_f64())
        };
        if let (Some(small), Some(big)) = (at(sizes[0].0), at(sizes[1].0)) {
            let ratio = big / small.max(1e-6);
            println!(
                "flatness at {files} files (fastest runs): 10 GiB / 100 MiB = {ratio:.2} (limit {FLATNESS_LIMIT})"
            );
            ok &= ratio <= FLATNESS_LIMIT;
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
