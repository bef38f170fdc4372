//! What the lab creates outside its own process (containers, loop-device mounts), appended
//! to the file named by `VTSNAP_LAB_RESOURCES` as it goes, so that `scripts/lab-cleanup.sh`
//! can remove them even if the lab is killed before its own cleanup runs.

use std::io::Write;
use std::path::Path;

pub const ENV: &str = "VTSNAP_LAB_RESOURCES";

fn append(line: &str) {
    let Ok(path) = std::env::var(ENV) else {
        return;
    };
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(f, "{line}");
        let _ = f.sync_data();
    }
}

pub fn container(id: &str) {
    append(&format!("container {id}"));
}

pub fn mount(path: &Path) {
    append(&format!("mount {}", path.display()));
}

/// A bind mount of a volume at a kubelet path (unmounted, never removed recursively).
pub fn bind(path: &Path) {
    append(&format!("bind {}", path.display()));
}

/// A directory of the lab's own (removed without crossing into mounts).
pub fn tree(path: &Path) {
    append(&format!("tree {}", path.display()));
}
