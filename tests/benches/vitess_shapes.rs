//! `make bench-check`'s part of `make bench-vitess`: the benchmark itself, on the real
//! Vitess lab, at 64 MiB and 1 GiB, once each, VTOrc refreshing its topology every second, and the shapes its figures must have —
//! never a wall-clock time:
//! - the cold snapshot keeps the replica out of service for less time than the builtin
//!   engine's `Backup` does, and the online snapshot for none;
//! - a replica from a snapshot is provisioned faster than by `--restore-from-backup` and
//!   by `--restore-with-clone` (each ratio above 1), and neither ratio falls as the data
//!   grows from the first size to the second;
//! - the page renders from the record and reads it back.
//!
//! `cargo test -p vtsnap-lab --bench vitess_shapes` (root, Podman, the Vitess image and
//! binaries: `make vitess-images`). `VTSNAP_BENCH_SHAPE_SIZES=a,b` changes the sizes (GiB).

// A measurement program: a failed unwrap ends it with a message, which is what we want.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use vtsnap_lab::timeline::Timeline;
use vtsnap_lab::vitess_bench::record::{SizeRecord, VitessRun};
use vtsnap_lab::vitess_bench::{BenchOptions, bench_vitess, page};

fn sizes() -> Vec<f64> {
    std::env::var("VTSNAP_BENCH_SHAPE_SIZES").map_or_else(
        |_| vec![0.0625, 1.0],
        |s| s.split(',').map(|x| x.trim().parse().unwrap()).collect(),
    )
}

fn describe(z: &SizeRecord) -> String {
    let r = &z.runs[0];
    format!(
        "{} GiB: cold out of service {} ms, builtin {} ms, online {} ms; provisioning vtsnap {} ms, restore {} ms, clone {} ms",
        z.requested_gib,
        r.cold.out_of_service_ms,
        r.builtin.out_of_service_ms,
        r.online.out_of_service_ms,
        r.vtsnap.total_ms(),
        r.restore.total_ms(),
        r.clone.total_ms()
    )
}

fn main() {
    // `cargo bench` passes `--bench`, `cargo test` nothing; both run the same check.
    let sizes = sizes();
    assert_eq!(sizes.len(), 2, "two sizes, the smaller first: {sizes:?}");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let timeline = Timeline::new(true);
    let rec = rt.block_on(bench_vitess(
        &BenchOptions {
            sizes_gib: sizes.clone(),
            runs: 1,
            // Found within a second: the snapshot path's time is then its own, not
            // where it fell in VTOrc's refresh, and the ratios hold at one run each.
            vtorc_refresh: std::time::Duration::from_secs(1),
        },
        &timeline,
        |_| {},
    ));
    assert!(
        rec.skipped.is_empty(),
        "sizes skipped for want of disk: {:?}",
        rec.skipped
    );
    let [small, large] = [&rec.sizes[0], &rec.sizes[1]];
    for z in [small, large] {
        let r: &VitessRun = &z.runs[0];
        println!("{}", describe(z));
        assert!(
            r.cold.out_of_service_ms < r.builtin.out_of_service_ms,
            "the cold snapshot was out of service longer than the builtin backup: {}",
            describe(z)
        );
        assert_eq!(
            r.online.out_of_service_ms,
            0,
            "the online snapshot took the replica out of service: {}",
            describe(z)
        );
        assert!(
            r.restore_ratio() > 1.0 && r.clone_ratio() > 1.0,
            "a peer provisioned a replica as fast as vtsnap: {}",
            describe(z)
        );
    }
    for (name, f) in [
        (
            "--restore-from-backup",
            VitessRun::restore_ratio as fn(&VitessRun) -> f64,
        ),
        ("--restore-with-clone", VitessRun::clone_ratio),
    ] {
        let (a, b) = (f(&small.runs[0]), f(&large.runs[0]));
        assert!(
            b >= a,
            "{name} ÷ vtsnap fell from {a:.2} to {b:.2} as the data grew:\n{}\n{}",
            describe(small),
            describe(large)
        );
    }
    let rendered = page::render(&rec);
    assert_eq!(page::read_record(&rendered).unwrap(), rec);
    println!("vitess_shapes: every shape held");
}
