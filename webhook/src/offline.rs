//! `vtsnap-admission review`: the response the server would send for one AdmissionReview,
//! decided from a dump instead of the caches — for previews, debugging and support.

use std::path::Path;

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;
use vtsnap_core::config::Config;
use vtsnap_core::dump::{self, DumpError};
use vtsnap_core::input::{Accept, ReadError, read_bounded};
use vtsnap_core::snapshot::choice::ShardState;

use crate::admission::{self, Answer, AnswerError};
use crate::decide::{Decision, Settings};
use crate::inventory::Dump;
use crate::observe::Review;
use crate::review::review;

/// The largest shard-state file read (as large as a dump may be; a review is bounded by
/// the server's body limit, the dump by [`vtsnap_core::dump`]).
pub const MAX_INPUT: u64 = vtsnap_core::input::MAX_DUMP;

/// Why an offline review cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum OfflineError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("{path}: {reason}")]
    Input { path: String, reason: String },
    /// The `objects` dump is not a List (a read error is [`Self::Read`]: it names the path).
    #[error("{path}: {source}")]
    Dump { path: String, source: DumpError },
    #[error("{path}: the server would answer 400: {source}")]
    Review {
        path: String,
        source: admission::ReviewError,
    },
    #[error("{path}: the server would answer 500: {source}")]
    Answer { path: String, source: AnswerError },
}

/// The `objects` dump, with the reader every offline command uses: only the objects the
/// webhook reads are kept, never the whole parsed dump.
fn read_dump(path: &Path) -> Result<Dump, OfflineError> {
    let named = |e| match e {
        DumpError::Read(e) => OfflineError::Read(e),
        source => OfflineError::Dump {
            path: path.display().to_string(),
            source,
        },
    };
    let text = dump::read_text(path).map_err(named)?;
    let mut objects = Dump::default();
    dump::each_item(&text, |_, it| objects.add(it)).map_err(named)?;
    Ok(objects)
}

/// A JSON input file that is not a dump (the review, the shard states), read bounded; a
/// pipe is accepted.
fn read_json(path: &Path, what: &'static str, max: u64) -> Result<Value, OfflineError> {
    let bytes = read_bounded(path, what, max, Accept::FileOrPipe)?;
    serde_json::from_slice(&bytes).map_err(|e| OfflineError::Input {
        path: path.display().to_string(),
        reason: format!("not JSON: {e}"),
    })
}

/// The response and the decision for `request`, from `objects` (a `kubectl get
/// volumesnapshots,persistentvolumeclaims,vitessclusters -o json` List) and `shards` (what
/// the server's `/debug/shards` returned; without it no shard state is known).
pub fn offline_review(
    config: &Config,
    settings: &Settings,
    objects: &Path,
    request: &Path,
    shards: Option<&Path>,
    now: Timestamp,
) -> Result<(Answer, Decision), OfflineError> {
    let mut dump = read_dump(objects)?;
    if let Some(path) = shards {
        let states: Vec<ShardState> =
            serde_json::from_value(read_json(path, "a shard state list", MAX_INPUT)?).map_err(
                |e| OfflineError::Input {
                    path: path.display().to_string(),
                    reason: format!("not a list of shard states: {e}"),
                },
            )?;
        for s in states {
            dump.set_shard_state(s);
        }
    }
    let raw = read_json(
        request,
        "an AdmissionReview",
        u64::try_from(admission::MAX_BODY).unwrap_or(u64::MAX),
    )?;
    let body = serde_json::to_vec(&raw).map_err(|e| OfflineError::Input {
        path: request.display().to_string(),
        reason: format!("not re-encodable: {e}"),
    })?;
    let req = admission::parse(&body).map_err(|source| OfflineError::Review {
        path: request.display().to_string(),
        source,
    })?;
    review(&req, &Review::observe(&req), config, settings, &dump, now).map_err(|source| {
        OfflineError::Answer {
            path: request.display().to_string(),
            source,
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn inputs_are_read_bounded_and_typed() {
        let e = read_json(Path::new("/dev/zero"), "a dump", MAX_INPUT).unwrap_err();
        assert_eq!(
            e.to_string(),
            "/dev/zero is not a regular file (a character device)"
        );
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.json");
        std::fs::write(&big, "[1, 2, 3]").unwrap();
        let e = read_json(&big, "an AdmissionReview", 8).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("big.json is larger than 8 bytes, the most an AdmissionReview may have"),
            "{e}"
        );
        assert_eq!(
            read_json(&big, "a dump", 9).unwrap(),
            serde_json::json!([1, 2, 3])
        );
        std::fs::write(&big, "[1,").unwrap();
        assert!(
            read_json(&big, "a dump", 9)
                .unwrap_err()
                .to_string()
                .contains("not JSON")
        );
    }

    #[test]
    fn the_objects_dump_is_read_as_every_dump_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("objects.json");
        std::fs::write(&path, r#"{"kind": "Pod"}"#).unwrap();
        let e = read_dump(&path).unwrap_err();
        assert!(
            matches!(
                e,
                OfflineError::Dump {
                    source: DumpError::NotAList,
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            format!("{}: not a List of objects (no items)", path.display())
        );
        let e = read_dump(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "/dev/zero is not a regular file (a character device)"
        );
        std::fs::write(&path, r#"{"items": [{"kind": "Pod"}, 1e400]}"#).unwrap();
        let e = read_dump(&path).unwrap_err().to_string();
        assert!(e.contains("objects.json: item 1 of the List: "), "{e}");
        let pvc = serde_json::json!({"kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "vitess"}});
        std::fs::write(&path, serde_json::json!({"items": [pvc]}).to_string()).unwrap();
        let objects = read_dump(&path).unwrap();
        assert!(crate::inventory::Inventory::pvc(&objects, "vitess", "data").is_some());
        assert!(crate::inventory::Inventory::pvc(&objects, "vitess", "other").is_none());
    }
}
