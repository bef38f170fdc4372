//! One budget for the review bodies held at once, whatever the number of connections: each
//! per-connection limit alone ([`crate::admission::MAX_BODY`] × `max_connections`) would
//! allow gigabytes. A body's bytes are taken before they are kept (all of a declared
//! `Content-Length` before any is read; a chunked body's as each chunk arrives) and given
//! back once its review is answered, so its parse is covered too.
//!
//! When the budget is exhausted a review waits, at most [`BodyBudget::wait`], then is
//! answered 503. Waiting comes first: with `failurePolicy: Ignore` a refused review is a
//! restore silently skipped, and a wait well inside the API server's call timeout (the
//! chart's `admission.timeoutSeconds`, 5 s) usually outlasts a burst.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Semaphore, SemaphorePermit};
use tokio::time::Instant;

use crate::admission::MAX_BODY;

/// The default budget: four reviews of the largest size at once, or thousands of usual
/// ones (a few KiB). With their parses it fits the chart's memory limit (the test
/// `the_default_body_budget_fits_the_charts_memory_limit` checks it).
pub const DEFAULT_BUDGET: usize = 32 << 20;
/// How long a review waits for the budget by default: inside the API server's 5 s.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(3);
/// The memory a held body costs at most, in multiples of its size: the bytes, and the JSON
/// tree and answer made from them.
pub const COST_PER_BYTE: usize = 4;

/// A budget that cannot serve: refused at startup.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    #[error(
        "the body budget of {bytes} bytes is smaller than one review may be ({MAX_BODY} bytes): such a review could never be read"
    )]
    BelowOneReview { bytes: usize },
    #[error(
        "the body budget of {bytes} bytes is above the largest one ({} bytes)",
        u32::MAX
    )]
    TooLarge { bytes: usize },
}

/// Why a body was not read: the budget stayed exhausted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the webhook's budget for review bodies ({budget} bytes, shared by every connection) stayed exhausted for {waited:?}; {wanted} more bytes were wanted"
)]
pub struct Exhausted {
    pub budget: usize,
    pub wanted: usize,
    pub waited: Duration,
}

/// The bytes of review bodies held at once, bounded.
#[derive(Debug)]
pub struct BodyBudget {
    semaphore: Semaphore,
    bytes: usize,
    wait: Duration,
    peak: AtomicUsize,
}

impl Default for BodyBudget {
    fn default() -> Self {
        Self {
            semaphore: Semaphore::new(DEFAULT_BUDGET),
            bytes: DEFAULT_BUDGET,
            wait: DEFAULT_WAIT,
            peak: AtomicUsize::new(0),
        }
    }
}

impl BodyBudget {
    /// A budget of `bytes`, each review waiting at most `wait` for its share.
    pub fn new(bytes: usize, wait: Duration) -> Result<Self, BudgetError> {
        if bytes < MAX_BODY {
            return Err(BudgetError::BelowOneReview { bytes });
        }
        if u32::try_from(bytes).is_err() {
            return Err(BudgetError::TooLarge { bytes });
        }
        Ok(Self {
            semaphore: Semaphore::new(bytes),
            bytes,
            wait,
            peak: AtomicUsize::new(0),
        })
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn wait(&self) -> Duration {
        self.wait
    }

    /// The bytes held now.
    pub fn held(&self) -> usize {
        self.bytes
            .saturating_sub(self.semaphore.available_permits())
    }

    /// The most bytes ever held at once.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }

    /// Starts one body's reservation: its wait for the budget counts from now.
    pub fn reserve(&self) -> Reservation<'_> {
        Reservation {
            budget: self,
            permit: None,
            held: 0,
            deadline: Instant::now() + self.wait,
        }
    }
}

/// One body's share of the budget; given back when dropped.
#[derive(Debug)]
pub struct Reservation<'a> {
    budget: &'a BodyBudget,
    permit: Option<SemaphorePermit<'a>>,
    held: usize,
    deadline: Instant,
}

impl Reservation<'_> {
    /// Holds at least `total` bytes (at most [`MAX_BODY`]: the caller refuses larger
    /// bodies first), waiting until the reservation's deadline for the rest.
    pub async fn cover(&mut self, total: usize) -> Result<(), Exhausted> {
        let want = total.min(MAX_BODY).saturating_sub(self.held);
        if want == 0 {
            return Ok(());
        }
        let n = u32::try_from(want).unwrap_or(u32::MAX);
        let started = Instant::now();
        let got = tokio::time::timeout_at(self.deadline, self.budget.semaphore.acquire_many(n))
            .await
            .ok()
            .and_then(Result::ok);
        let Some(p) = got else {
            return Err(Exhausted {
                budget: self.budget.bytes,
                wanted: want,
                waited: started.elapsed(),
            });
        };
        match &mut self.permit {
            Some(held) => held.merge(p),
            None => self.permit = Some(p),
        }
        self.held += want;
        self.budget
            .peak
            .fetch_max(self.budget.held(), Ordering::SeqCst);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `"256Mi"`, `"1Gi"` or plain bytes, as the chart writes memory.
    fn quantity(q: &str) -> usize {
        let (n, unit) = q
            .find(|c: char| !c.is_ascii_digit())
            .map_or((q, ""), |i| q.split_at(i));
        let n: usize = n.parse().expect("a memory quantity");
        n * match unit {
            "" => 1,
            "Ki" => 1 << 10,
            "Mi" => 1 << 20,
            "Gi" => 1 << 30,
            u => panic!("unexpected memory unit {u:?} in {q:?}"),
        }
    }

    /// `admission.resources.<which>: {..., memory: X}` in the chart's values.
    fn admission_memory(values: &str, which: &str) -> usize {
        let section = values
            .split("\nadmission:\n")
            .nth(1)
            .expect("an admission: block in values.yaml");
        let line = section
            .lines()
            .take_while(|l| l.is_empty() || l.starts_with(' ') || l.starts_with('#'))
            .find(|l| l.trim_start().starts_with(&format!("{which}:")))
            .unwrap_or_else(|| panic!("admission.resources.{which} in values.yaml"));
        let memory = line
            .split("memory:")
            .nth(1)
            .unwrap_or_else(|| panic!("a memory in {line:?}"));
        quantity(memory.trim().trim_end_matches('}').trim())
    }

    #[test]
    fn the_default_body_budget_fits_the_charts_memory_limit() {
        let values = include_str!("../../../charts/vtsnap/values.yaml");
        let limit = admission_memory(values, "limits");
        // What the webhook needs besides bodies: its caches and code, taken as its request.
        let base = admission_memory(values, "requests");
        let bodies = DEFAULT_BUDGET * COST_PER_BYTE;
        // A quarter of the limit stays free, for allocator slack and growth of the caches.
        assert!(
            base + bodies <= limit - limit / 4,
            "the body budget ({DEFAULT_BUDGET} bytes, costing {bodies}) and the base ({base}) leave too little of the limit ({limit})"
        );
        assert!(
            BodyBudget::new(DEFAULT_BUDGET, DEFAULT_WAIT).is_ok(),
            "a largest review must fit"
        );
    }

    #[test]
    fn a_budget_below_one_review_is_refused() {
        assert_eq!(
            BodyBudget::new(MAX_BODY - 1, DEFAULT_WAIT).unwrap_err(),
            BudgetError::BelowOneReview {
                bytes: MAX_BODY - 1
            }
        );
        assert!(BodyBudget::new(MAX_BODY, DEFAULT_WAIT).is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn an_exhausted_budget_waits_its_bound_then_refuses_and_frees_on_drop() {
        let b = BodyBudget::new(MAX_BODY, Duration::from_secs(3)).unwrap();
        let mut first = b.reserve();
        first.cover(MAX_BODY - 10).await.unwrap();
        first.cover(100).await.unwrap();
        assert_eq!(b.held(), MAX_BODY - 10, "covering less takes nothing");
        let mut second = b.reserve();
        second.cover(10).await.unwrap();
        assert_eq!(b.held(), MAX_BODY);
        let start = Instant::now();
        let mut third = b.reserve();
        let e = third.cover(1).await.unwrap_err();
        assert_eq!((e.wanted, start.elapsed()), (1, Duration::from_secs(3)));
        drop(first);
        assert_eq!(b.held(), 10);
        // What a finished one gives back is taken again.
        drop(second);
        let mut fourth = b.reserve();
        fourth.cover(MAX_BODY - 10).await.unwrap();
        assert_eq!((b.held(), b.peak()), (MAX_BODY - 10, MAX_BODY));
    }
}
