//! The journal: the whole plan, written (durably) before the first change and removed
//! after the last. A run that finds it finishes that plan instead of observing afresh,
//! because a half-moved volume is deliberately not a layout `observe` accepts.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::durable;
use crate::plan::Plan;
use crate::refusal::Refusal;

pub const JOURNAL_NAME: &str = ".vtsnap-restore.journal";
const VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Journal {
    pub version: u32,
    pub plan: Plan,
}

impl Journal {
    pub fn new(plan: Plan) -> Self {
        Self {
            version: VERSION,
            plan,
        }
    }
}

pub fn path(vtdataroot: &Path) -> PathBuf {
    vtdataroot.join(JOURNAL_NAME)
}

pub fn read(vtdataroot: &Path) -> Result<Option<Journal>, Refusal> {
    let p = path(vtdataroot);
    let bad = |reason: String| Refusal::BadJournal {
        path: p.display().to_string(),
        reason,
    };
    let text = match fs::read_to_string(&p) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(bad(e.to_string())),
    };
    let j: Journal = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    if j.version != VERSION {
        return Err(bad(format!("version {} is not {VERSION}", j.version)));
    }
    Ok(Some(j))
}

pub fn write(vtdataroot: &Path, j: &Journal) -> io::Result<()> {
    let text = serde_json::to_vec_pretty(j).map_err(io::Error::other)?;
    durable::write_new(&path(vtdataroot), &text, None)
}

pub fn remove(vtdataroot: &Path) -> io::Result<bool> {
    durable::remove_if_present(&path(vtdataroot))
}
