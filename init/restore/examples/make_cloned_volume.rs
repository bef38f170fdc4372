//! Lays out a sample volume as a clone of tablet 101's snapshot would look: a MariaDB
//! tablet directory with Vitess's symlinked top-level directories, binlogs (the last one
//! still "in use", as in an online snapshot), relay logs and a restore-ready my.cnf.
//! Used by `make demo-restore`.
//!
//! `cargo run -p vtsnap-restore --example make_cloned_volume -- DIR`

use std::path::PathBuf;
use std::process::ExitCode;

use vtsnap_testkit::layout::TabletLayout;

fn main() -> ExitCode {
    let Some(dir) = std::env::args().nth(1).map(PathBuf::from) else {
        eprintln!("usage: make_cloned_volume DIR   (DIR/vtdataroot is created)");
        return ExitCode::from(2);
    };
    let root = dir.join("vtdataroot");
    if root.exists() {
        eprintln!("{} already exists; pick an empty directory", root.display());
        return ExitCode::from(2);
    }
    if let Err(e) = std::fs::create_dir_all(&root).and_then(|()| {
        TabletLayout::mariadb(101)
            .symlinked_top_dirs()
            .crash_image()
            .write(&root)
    }) {
        eprintln!("cannot lay out {}: {e}", root.display());
        return ExitCode::FAILURE;
    }
    println!("{}", root.display());
    ExitCode::SUCCESS
}
