//! The checker: the second container of a drill Pod (docs/design.md §5.9). It waits for
//! the restored mysqld on the socket the two share ([`crate::observe::server`]), judges it
//! ([`crate::decide::verdict`]), and leaves one JSON report on stdout and in its
//! termination message, where the drill Job reads it.

use std::path::Path;

use serde::Serialize;

use crate::decide::verdict::{Expectation, Verdict, judge};
use crate::observe::server::{ProbeOptions, probe};

/// The largest position file read: the file is one of the drill Pod's annotations, and all of
/// an object's annotations together are at most 256 KiB (apimachinery
/// `TotalAnnotationSizeLimitB`).
pub const MAX_POSITION_BYTES: usize = 256 * 1024;

/// Why `--position-file` gives no position.
#[derive(Debug, thiserror::Error)]
pub enum PositionFileError {
    #[error("--position-file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("--position-file {path} is over {MAX_POSITION_BYTES} bytes, an annotation's limit")]
    TooLarge { path: String },
    #[error("--position-file {path} is not UTF-8")]
    NotUtf8 { path: String },
}

/// Reads the recorded position from a file (the drill Pod's downward API file), at most
/// [`MAX_POSITION_BYTES`]; one trailing newline is not part of it.
pub fn read_position_file(path: &Path) -> Result<String, PositionFileError> {
    use std::io::Read as _;
    let shown = || path.display().to_string();
    let read = |source| PositionFileError::Read {
        path: shown(),
        source,
    };
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .map_err(read)?
        .take(MAX_POSITION_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(read)?;
    if bytes.len() > MAX_POSITION_BYTES {
        return Err(PositionFileError::TooLarge { path: shown() });
    }
    let mut text =
        String::from_utf8(bytes).map_err(|_| PositionFileError::NotUtf8 { path: shown() })?;
    if text.ends_with('\n') {
        text.pop();
    }
    Ok(text)
}

/// What the checker reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckReport {
    pub verdict: Verdict,
    /// From the checker's start until mysqld answered (`None`: it never did).
    pub mysqld_ready_ms: Option<u64>,
}

impl CheckReport {
    /// The JSON of the report, within [`crate::decide::objects::MAX_RESULT_BYTES`] (the reason is already bounded).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Probes and judges.
pub async fn check(opts: &ProbeOptions, expect: &Expectation) -> CheckReport {
    match probe(opts).await {
        Ok(p) => CheckReport {
            verdict: judge(expect, &p.observed),
            mysqld_ready_ms: Some(p.mysqld_ready_ms),
        },
        Err(why) => CheckReport {
            verdict: Verdict::not_ready(&why),
            mysqld_ready_ms: None,
        },
    }
}

/// Writes the report where the kubelet reads the termination message (its reason is
/// bounded so that the JSON fits).
pub fn write_result(path: &Path, report: &CheckReport) -> std::io::Result<()> {
    std::fs::write(path, report.to_json())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_position_file_is_read_whole_up_to_an_annotation_s_limit() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("position");
        let big = format!(
            "MySQL56/{}",
            "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-9,".repeat(3600)
        );
        std::fs::write(&file, &big).unwrap();
        assert_eq!(read_position_file(&file).unwrap(), big);
        std::fs::write(&file, "MariaDB/0-1-100\n").unwrap();
        assert_eq!(read_position_file(&file).unwrap(), "MariaDB/0-1-100");
        std::fs::write(&file, vec![b'x'; MAX_POSITION_BYTES]).unwrap();
        assert_eq!(read_position_file(&file).unwrap().len(), MAX_POSITION_BYTES);
        std::fs::write(&file, vec![b'x'; MAX_POSITION_BYTES + 1]).unwrap();
        let e = read_position_file(&file).unwrap_err();
        assert!(matches!(e, PositionFileError::TooLarge { .. }), "{e}");
        assert!(e.to_string().contains("over 262144 bytes"), "{e}");
        std::fs::write(&file, [0xff, 0xfe]).unwrap();
        assert!(matches!(
            read_position_file(&file),
            Err(PositionFileError::NotUtf8 { .. })
        ));
        let gone = dir.path().join("gone");
        let e = read_position_file(&gone).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("--position-file {}: ", gone.display())),
            "{e}"
        );
    }
}
