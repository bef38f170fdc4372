//! Helpers shared by the restore's integration tests.

use std::path::Path;

use vtsnap_core::naming::TabletUid;
use vtsnap_restore::mycnf::mentions_uid;

/// Every name below `root` (not following symlinks) that still names tablet `uid`:
/// verifies that a finished move left nothing of the old tablet behind.
pub fn names_left(root: &Path, uid: TabletUid) -> Vec<String> {
    let mut left = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let child = dir.join(e.file_name());
            if mentions_uid(&e.file_name().to_string_lossy(), uid) {
                left.push(
                    child
                        .strip_prefix(root)
                        .unwrap_or(&child)
                        .display()
                        .to_string(),
                );
            }
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(child);
            }
        }
    }
    left.sort();
    left
}
