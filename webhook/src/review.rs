//! One review, end to end without I/O: the observed review decided, the answer (the patch)
//! made. The server and the offline `review` both call [`review`]; what they read before
//! (the request, a PVC the caches lack) and report after is theirs.

use k8s_openapi::jiff::Timestamp;
use vtsnap_core::config::Config;

use crate::admission::{self, Answer, AnswerError, Request};
use crate::decide::{self, Decision, Settings};
use crate::inventory::Inventory;
use crate::observe::Review;

/// The answer to `req` (observed as `observed`) and the decision behind it.
pub fn review(
    req: &Request,
    observed: &Review,
    config: &Config,
    settings: &Settings,
    inventory: &dyn Inventory,
    now: Timestamp,
) -> Result<(Answer, Decision), AnswerError> {
    let d = decide::decide(observed, config, settings, inventory, now);
    Ok((admission::respond(req, &d)?, d))
}
