//! A byte-exact picture of a directory tree: every entry's type, mode, owner, and its
//! contents (files) or target (symlinks). Two pictures are equal only if nothing changed.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Dir {
        mode: u32,
        uid: u32,
        gid: u32,
    },
    File {
        mode: u32,
        uid: u32,
        gid: u32,
        contents: Vec<u8>,
    },
    Symlink {
        target: PathBuf,
    },
    Other {
        mode: u32,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Tree(pub BTreeMap<PathBuf, Entry>);

impl Tree {
    /// Reads everything under `root` (not following symlinks).
    pub fn capture(root: &Path) -> Self {
        let mut map = BTreeMap::new();
        let mut stack = vec![PathBuf::new()];
        while let Some(rel) = stack.pop() {
            for e in fs::read_dir(root.join(&rel)).unwrap() {
                let e = e.unwrap();
                let child = rel.join(e.file_name());
                let m = fs::symlink_metadata(root.join(&child)).unwrap();
                let (mode, uid, gid) = (m.mode() & 0o7777, m.uid(), m.gid());
                let entry = if m.file_type().is_symlink() {
                    Entry::Symlink {
                        target: fs::read_link(root.join(&child)).unwrap(),
                    }
                } else if m.is_dir() {
                    stack.push(child.clone());
                    Entry::Dir { mode, uid, gid }
                } else if m.is_file() {
                    Entry::File {
                        mode,
                        uid,
                        gid,
                        contents: fs::read(root.join(&child)).unwrap(),
                    }
                } else {
                    Entry::Other { mode }
                };
                map.insert(child, entry);
            }
        }
        Self(map)
    }

    /// A readable list of differences, empty when the trees are equal.
    pub fn diff(&self, other: &Self) -> String {
        let mut out = String::new();
        for (p, e) in &self.0 {
            match other.0.get(p) {
                None => writeln!(out, "- {}", p.display()).unwrap(),
                Some(o) if o != e => writeln!(out, "~ {}", p.display()).unwrap(),
                Some(_) => {}
            }
        }
        for p in other.0.keys().filter(|p| !self.0.contains_key(*p)) {
            writeln!(out, "+ {}", p.display()).unwrap();
        }
        out
    }

    /// The same picture with `f` applied to every file's contents (e.g. to mask a value).
    pub fn map_contents(mut self, f: impl Fn(&Path, Vec<u8>) -> Vec<u8>) -> Self {
        for (p, e) in &mut self.0 {
            if let Entry::File { contents, .. } = e {
                *contents = f(p, std::mem::take(contents));
            }
        }
        self
    }
}

/// Asserts two trees are equal, printing what differs.
#[track_caller]
pub fn assert_same(before: &Tree, after: &Tree, what: &str) {
    let d = before.diff(after);
    assert!(d.is_empty(), "{what}: the tree changed:\n{d}");
}
