//! Whether a request's outcome is tried again, and after how long (docs/design.md §3.8).
//! Pure: the request's shape, the outcome, the tries so far and a jitter draw in, the
//! next step out.

use std::time::Duration;

/// The API verb of a request, as the metric's `verb` label names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
    DeleteCollection,
    /// A method the API does not use for resources (CONNECT, …).
    Other,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What sending the request again could do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// Nothing a first attempt did not: a read, or a write whose precondition (a
    /// resourceVersion or UID) makes a repeat fail with 409/404 once the first one landed.
    Harmless,
    /// It could act twice (a create, a write without a precondition): sent again only
    /// when the server said it did not handle it (429).
    OnlyUnhandled,
}

/// A request as the decider sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub verb: Verb,
    pub replay: Replay,
}

/// How one attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The server answered with this status (and `Retry-After`, if it sent one).
    Answered {
        code: u16,
        retry_after: Option<Duration>,
    },
    /// The connection broke before an answer (reset, closed mid-request).
    Transport,
    /// No connection was made (refused, no route, name not resolved): the server is not
    /// there to be busy; the program's next run or its own wait tries again.
    Unreached,
    /// The client's own connect or read timeout ended it: the caller's bound, never
    /// multiplied by retries (docs/design.md §6).
    TimedOut,
}

/// Why a request is tried again: the metric's `code` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// 429: API Priority and Fairness rejected it before handling it.
    Throttled,
    /// 500, 502, 503 or 504.
    ServerError(u16),
    /// The connection failed before an answer.
    Transport,
}

impl Cause {
    pub fn code(self) -> &'static str {
        match self {
            Cause::Throttled => "429",
            Cause::ServerError(500) => "500",
            Cause::ServerError(502) => "502",
            Cause::ServerError(503) => "503",
            Cause::ServerError(504) => "504",
            Cause::ServerError(_) => "5xx",
            Cause::Transport => "transport",
        }
    }
}

/// Why retrying stopped while the cause persisted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
pub enum Exhausted {
    Tries,
    Budget,
}

/// What to do after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Hand the outcome to the caller: a success, or an error no retry may change.
    Return,
    /// Wait, then send it again.
    Retry { wait: Duration, cause: Cause },
    /// Hand the last outcome to the caller: the bound is spent.
    GiveUp { cause: Cause, why: Exhausted },
}

/// The bounds of retrying one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub tries: u32,
    /// The backoff before the second attempt; it doubles each time.
    pub first_wait: Duration,
    /// No single wait is longer, whatever `Retry-After` asks.
    pub max_wait: Duration,
    /// The waits of one request add up to no more than this.
    pub budget: Duration,
}

impl RetryPolicy {
    /// Every program's client: at most 6 attempts and 30 s of waiting, 10 s per wait.
    pub const DEFAULT: Self = Self {
        tries: 6,
        first_wait: Duration::from_millis(250),
        max_wait: Duration::from_secs(10),
        budget: Duration::from_secs(30),
    };
}

/// The tries made and the time waited so far for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Progress {
    pub tries: u32,
    pub waited: Duration,
}

/// The next step after `outcome`, the `progress.tries`-th attempt of `shape`. `jitter`
/// is a draw from [0, 1): the backoff is spread over its upper half so that clients
/// throttled together do not come back together.
pub fn judge(
    shape: Shape,
    outcome: Outcome,
    progress: Progress,
    policy: &RetryPolicy,
    jitter: f64,
) -> Next {
    let harmless = shape.replay == Replay::Harmless;
    let (cause, retry_after) = match outcome {
        Outcome::Answered {
            code: 429,
            retry_after,
        } => (Cause::Throttled, retry_after),
        Outcome::Answered {
            code: code @ (500 | 502 | 503 | 504),
            retry_after,
        } if harmless => (Cause::ServerError(code), retry_after),
        Outcome::Transport if harmless => (Cause::Transport, None),
        _ => return Next::Return,
    };
    if progress.tries >= policy.tries {
        return Next::GiveUp {
            cause,
            why: Exhausted::Tries,
        };
    }
    let wait = backoff(policy, progress.tries, jitter)
        .max(retry_after.unwrap_or(Duration::ZERO))
        .min(policy.max_wait);
    if progress.waited.saturating_add(wait) > policy.budget {
        return Next::GiveUp {
            cause,
            why: Exhausted::Budget,
        };
    }
    Next::Retry { wait, cause }
}

/// `first_wait · 2^(tries-1)`, capped, then placed in its upper half by `jitter`.
fn backoff(policy: &RetryPolicy, tries: u32, jitter: f64) -> Duration {
    let doubled = 2u32.saturating_pow(tries.saturating_sub(1));
    let full = policy
        .first_wait
        .saturating_mul(doubled)
        .min(policy.max_wait);
    let half = full / 2;
    half + half.mul_f64(jitter.clamp(0.0, 1.0))
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
