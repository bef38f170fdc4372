//! The Prometheus textfile a run leaves behind (a CronJob's pod is gone before a scrape;
//! node-exporter's textfile collector or a sidecar picks the file up).

use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Writes `text` to `path` atomically: a temp file in the same directory, synced, then
/// renamed over `path`, so a reader sees the old file or the new one, never half of one.
/// The temp file is removed again if anything fails.
pub fn write_atomic(path: &Path, text: &str) -> io::Result<()> {
    let tmp = temp_path(path)?;
    let written = write_and_rename(&tmp, path, text);
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// [`write_atomic`] for `--metrics-file`: metrics are best effort and never change a
/// run's outcome, so a failure is logged, not returned.
pub fn write_metrics_file(path: &Path, text: &str) {
    if let Err(e) = write_atomic(path, text) {
        tracing::warn!(error = %e, path = %path.display(), "cannot write the metrics file");
    }
}

/// `.<name>.<pid>.tmp` beside `path`: hidden and not `*.prom`, so the textfile collector
/// never reads it; the pid keeps two writers of one path from sharing it.
fn temp_path(path: &Path) -> io::Result<PathBuf> {
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} names no file", path.display()),
        )
    })?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    Ok(path.with_file_name(tmp_name))
}

fn write_and_rename(tmp: &Path, path: &Path, text: &str) -> io::Result<()> {
    let mut f = std::fs::File::create(tmp)?;
    f.write_all(text.as_bytes())?;
    // Without the sync a crash after the rename could leave an empty file in its place.
    f.sync_all()?;
    std::fs::rename(tmp, path)
}
