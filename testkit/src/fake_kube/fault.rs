//! Fault rules: fail, delay or drop the n-th request matching a predicate, or change the
//! world just before it is handled.

use std::sync::Arc;
use std::time::Duration;

use super::FakeKube;
use super::request::{RequestInfo, Verb};

/// What an armed fault does.
#[derive(Debug, Clone, Copy)]
pub enum FaultAction {
    /// Answer with this HTTP status and a Status body.
    Status(u16),
    /// Wait, then handle the request normally.
    Delay(Duration),
    /// Wait, then answer with this status.
    DelayThenStatus(Duration, u16),
    /// Fail as a broken connection would.
    Drop,
    /// 429 Too Many Requests with `Retry-After: seconds`, as API Priority and Fairness
    /// rejects a request before handling it.
    Throttle { retry_after_seconds: u32 },
}

pub(super) type Predicate = Arc<dyn Fn(&RequestInfo) -> bool + Send + Sync>;
pub(super) type Change = Arc<dyn Fn(&FakeKube) + Send + Sync>;
pub(super) type Observer = Arc<dyn Fn(&RequestInfo, &FakeKube) + Send + Sync>;

/// A fault rule: fires on matches number `nth` (1-based) through `nth + times - 1`.
#[derive(Clone)]
pub struct Fault {
    when: Predicate,
    nth: u32,
    times: u32,
    action: FaultAction,
    seen: u32,
    /// Changes the world when the rule fires, before the request is handled (a write
    /// from someone else that lands between two of the program's calls: a stale read).
    change: Option<Change>,
}

impl std::fmt::Debug for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fault")
            .field("nth", &self.nth)
            .field("times", &self.times)
            .field("action", &self.action)
            .finish()
    }
}

impl Fault {
    /// A rule for requests matching `when`; by default it fires once, on the first match.
    pub fn on(when: impl Fn(&RequestInfo) -> bool + Send + Sync + 'static) -> Self {
        Self {
            when: Arc::new(when),
            nth: 1,
            times: 1,
            action: FaultAction::Status(500),
            seen: 0,
            change: None,
        }
    }

    /// When the rule fires, first runs `change` on the fake's objects, then handles the
    /// request normally (unless another action is set after this).
    pub fn then_change(mut self, change: impl Fn(&FakeKube) + Send + Sync + 'static) -> Self {
        self.change = Some(Arc::new(change));
        self.action = FaultAction::Delay(Duration::ZERO);
        self
    }

    pub fn nth(mut self, n: u32) -> Self {
        self.nth = n.max(1);
        self
    }

    pub fn times(mut self, n: u32) -> Self {
        self.times = n;
        self
    }

    pub fn always(mut self) -> Self {
        self.times = u32::MAX;
        self
    }

    pub fn status(mut self, code: u16) -> Self {
        self.action = FaultAction::Status(code);
        self
    }

    pub fn delay(mut self, d: Duration) -> Self {
        self.action = FaultAction::Delay(d);
        self
    }

    pub fn action(mut self, a: FaultAction) -> Self {
        self.action = a;
        self
    }

    /// Answers 429 with `Retry-After: seconds` (a storm: combine with
    /// [`Self::times`] or [`Self::always`]).
    pub fn throttle(mut self, retry_after_seconds: u32) -> Self {
        self.action = FaultAction::Throttle {
            retry_after_seconds,
        };
        self
    }

    pub fn drop_connection(mut self) -> Self {
        self.action = FaultAction::Drop;
        self
    }
}

/// Matches any request of this verb on this plural.
pub fn is(
    verb: Verb,
    plural: &'static str,
) -> impl Fn(&RequestInfo) -> bool + Send + Sync + 'static {
    move |r| r.verb == verb && r.plural == plural
}

/// A 429 storm that clears for each request: every other request (of any verb) is
/// throttled with `Retry-After: retry_after_seconds`, so each call of a client that retries
/// goes through on its next try, and one that does not fails on every other call.
pub fn storm_every_other(retry_after_seconds: u32) -> Fault {
    let n = std::sync::atomic::AtomicU64::new(0);
    Fault::on(move |_| {
        n.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            .is_multiple_of(2)
    })
    .throttle(retry_after_seconds)
    .always()
}

/// A 429 storm that does not clear: every request is throttled.
pub fn storm_without_end(retry_after_seconds: u32) -> Fault {
    Fault::on(|_| true).throttle(retry_after_seconds).always()
}

/// Counts `info` against every rule it matches, and returns the first rule that fires now.
/// Every matching rule counts the request, even after one has fired.
pub(super) fn fire(
    faults: &mut [Fault],
    info: &RequestInfo,
) -> Option<(FaultAction, Option<Change>)> {
    let mut fire = None;
    for f in faults {
        if (f.when)(info) {
            f.seen += 1;
            if fire.is_none()
                && f.seen >= f.nth
                && u64::from(f.seen) < u64::from(f.nth) + u64::from(f.times)
            {
                fire = Some((f.action, f.change.clone()));
            }
        }
    }
    fire
}
