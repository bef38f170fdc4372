//! `vtsnap-admission review`: the response the server would send for one AdmissionReview,
//! decided from a dump instead of the caches — for previews, debugging and support.

use std::path::Path;

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;
use vtsnap_core::config::Config;

use crate::admission;
use crate::decide::{Decision, Settings};
use crate::inventory::{Dump, ShardState};
use crate::review::review;

/// The largest input file read (a dump of a large cluster is big; a review is small).
pub const MAX_INPUT: u64 = 512 << 20;

/// Why an offline review cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum OfflineError {
    #[error("{path}: {reason}")]
    Input { path: String, reason: String },
    #[error("{path}: the server would answer 400: {source}")]
    Review {
        path: String,
        source: admission::ReviewError,
    },
}

fn read_json(path: &Path, max: u64) -> Result<Value, OfflineError> {
    let input = |reason: String| OfflineError::Input {
        path: path.display().to_string(),
        reason,
    };
    let meta = std::fs::metadata(path).map_err(|e| input(e.to_string()))?;
    if !meta.is_file() {
        return Err(input("not a regular file".into()));
    }
    if meta.len() > max {
        return Err(input(format!("larger than {max} bytes")));
    }
    let bytes = std::fs::read(path).map_err(|e| input(e.to_string()))?;
    serde_json::from_slice(&bytes).map_err(|e| input(format!("not JSON: {e}")))
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
) -> Result<(Value, Decision), OfflineError> {
    let list = read_json(objects, MAX_INPUT)?;
    let mut dump = Dump::from_list(&list).map_err(|reason| OfflineError::Input {
        path: objects.display().to_string(),
        reason,
    })?;
    if let Some(path) = shards {
        let states: Vec<ShardState> =
            serde_json::from_value(read_json(path, MAX_INPUT)?).map_err(|e| {
                OfflineError::Input {
                    path: path.display().to_string(),
                    reason: format!("not a list of shard states: {e}"),
                }
            })?;
        for s in states {
            dump.set_shard_state(s);
        }
    }
    let raw = read_json(
        request,
        u64::try_from(admission::MAX_BODY).unwrap_or(u64::MAX),
    )?;
    let body = serde_json::to_vec(&raw).unwrap_or_default();
    let req = admission::parse(&body).map_err(|source| OfflineError::Review {
        path: request.display().to_string(),
        source,
    })?;
    Ok(review(&req, config, settings, &dump, now))
}
