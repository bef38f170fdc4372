//! The restore journal: any bytes either fail to parse or give a plan whose every path is
//! plain and relative (nothing a journal names can lead out of the volume).
#![no_main]

use std::path::{Component, Path};

use libfuzzer_sys::fuzz_target;
use vtsnap_restore::journal::parse;
use vtsnap_restore::decide::Step;

fn plain(p: &Path) {
    assert!(
        p.components().all(|c| matches!(c, Component::Normal(_))),
        "{} accepted",
        p.display()
    );
}

fuzz_target!(|data: &[u8]| {
    let Ok(j) = parse(data) else {
        return;
    };
    for s in &j.plan.steps {
        match s {
            Step::RenameDir { from, to } | Step::RenameFile { from, to } => {
                plain(from);
                plain(to);
            }
            Step::RetargetSymlink { link, .. } => plain(link),
            Step::PatchBinlogCheckpoints { file, .. } => plain(file),
            Step::RewriteIndex { path }
            | Step::RemoveFile { path, .. }
            | Step::RewriteMyCnf { path } => plain(path),
        }
    }
});
