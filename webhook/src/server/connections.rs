//! What each connection is doing and for how long it may: every phase has a deadline (the
//! TLS handshake, an idle keep-alive, one whole request from its first byte to its
//! answer's flush), and when every slot is taken the connection that has waited longest
//! on its client gives way to the new one. So no client can hold a slot for longer than a
//! deadline, and a flood of stalled or idle connections cannot keep a probe or a review
//! out: only a connection whose review is being decided is never closed early.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::Instant;

/// The bounds on every connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// From accept to a finished TLS handshake.
    pub handshake: Duration,
    /// One request: from its first byte through its body and the decision to its answer
    /// written. The API server's own call timeout is at most 30 s (10 s by default).
    pub request: Duration,
    /// A kept-alive connection with no request. Longer than the API server's own idle
    /// close (90 s), so that it is the client that closes: a POST sent on a connection the
    /// server closed at that moment is not retried.
    pub idle: Duration,
    /// Connections served at once; at the cap the longest-waiting one is closed.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            handshake: Duration::from_secs(5),
            request: Duration::from_secs(10),
            idle: Duration::from_secs(120),
            max_connections: 512,
        }
    }
}

/// What a connection is waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// The client's TLS handshake.
    Handshake,
    /// The next request (kept alive).
    Idle,
    /// The rest of a request: its head and body.
    Receiving,
    /// Nothing from the client: the review is being decided. Never closed for a newcomer.
    Deciding,
    /// The client to take the answer.
    Answering,
}

impl Phase {
    fn waits_on_client(self) -> bool {
        !matches!(self, Phase::Deciding)
    }
}

/// Why the server closed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, strum::IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
pub enum CloseReason {
    /// No finished TLS handshake within [`Limits::handshake`].
    HandshakeDeadline,
    /// Idle for [`Limits::idle`].
    IdleDeadline,
    /// A request not answered within [`Limits::request`] of its first byte.
    RequestDeadline,
    /// Every slot was taken and this one had waited longest on its client.
    Evicted,
    /// Every slot was taken by a review being decided: the newcomer was closed at once.
    Full,
}

impl CloseReason {
    pub const ALL: [CloseReason; 5] = [
        CloseReason::HandshakeDeadline,
        CloseReason::IdleDeadline,
        CloseReason::RequestDeadline,
        CloseReason::Evicted,
        CloseReason::Full,
    ];

    /// The `reason` label of the metric.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    fn of_deadline(phase: Phase) -> Self {
        match phase {
            Phase::Handshake => CloseReason::HandshakeDeadline,
            Phase::Idle => CloseReason::IdleDeadline,
            Phase::Receiving | Phase::Deciding | Phase::Answering => CloseReason::RequestDeadline,
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One connection's phase, the time its deadline counts from, and the signals to its task.
#[derive(Debug)]
pub(crate) struct Slot {
    state: Mutex<(Phase, Instant)>,
    /// The phase changed: the deadline is computed again.
    changed: Notify,
    /// Closed to make room for a newcomer.
    evicted: Notify,
}

impl Slot {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new((Phase::Handshake, Instant::now())),
            changed: Notify::new(),
            evicted: Notify::new(),
        })
    }

    fn get(&self) -> (Phase, Instant) {
        *lock(&self.state)
    }

    /// Moves from one of `from` to `to`; `restart`: the deadline counts from now.
    fn shift(&self, from: &[Phase], to: Phase, restart: Restart) {
        let mut s = lock(&self.state);
        if from.contains(&s.0) {
            s.0 = to;
            if restart == Restart::Now {
                s.1 = Instant::now();
            }
            drop(s);
            self.changed.notify_one();
        }
    }

    /// The TLS handshake is done: waiting for the first request.
    pub(crate) fn handshake_done(&self) {
        self.shift(&[Phase::Handshake], Phase::Idle, Restart::Now);
    }

    /// A request's bytes arrived (or one read ahead is handed to the service).
    pub(crate) fn request_began(&self) {
        self.shift(&[Phase::Idle], Phase::Receiving, Restart::Now);
    }

    /// The whole request is read: the server's turn.
    pub(crate) fn deciding(&self) {
        self.shift(
            &[Phase::Idle, Phase::Receiving],
            Phase::Deciding,
            Restart::Keep,
        );
    }

    /// The answer is made: the client's turn to take it.
    pub(crate) fn answered(&self) {
        self.shift(
            &[Phase::Receiving, Phase::Deciding],
            Phase::Answering,
            Restart::Keep,
        );
    }

    /// The answer is flushed: kept alive for the next request.
    fn flushed(&self) {
        self.shift(&[Phase::Answering], Phase::Idle, Restart::Now);
    }

    /// Resolves when the connection must be closed: a deadline passed or it was evicted.
    pub(crate) async fn ended(&self, limits: &Limits) -> CloseReason {
        loop {
            let (phase, since) = self.get();
            let limit = match phase {
                Phase::Handshake => limits.handshake,
                Phase::Idle => limits.idle,
                Phase::Receiving | Phase::Deciding | Phase::Answering => limits.request,
            };
            tokio::select! {
                () = tokio::time::sleep_until(since + limit) => {
                    if self.get() == (phase, since) {
                        return CloseReason::of_deadline(phase);
                    }
                }
                () = self.changed.notified() => {}
                () = self.evicted.notified() => return CloseReason::Evicted,
            }
        }
    }
}

/// Whether a phase change restarts the deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Restart {
    Now,
    Keep,
}

/// The connections being served, for the cap.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    slots: Mutex<HashMap<u64, Arc<Slot>>>,
    next: AtomicU64,
}

/// A registered connection; leaving the registry when dropped.
#[derive(Debug)]
pub(crate) struct Registered {
    registry: Arc<Registry>,
    metrics: Arc<ConnectionMetrics>,
    id: u64,
    pub(crate) slot: Arc<Slot>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        if lock(&self.registry.slots).remove(&self.id).is_some() {
            self.metrics.left();
        }
    }
}

impl Registry {
    /// Takes a slot for a new connection. At the cap, the connection that has waited
    /// longest on its client is evicted; `None` when every one is being decided.
    pub(crate) fn admit(
        self: &Arc<Self>,
        max: usize,
        metrics: &Arc<ConnectionMetrics>,
    ) -> Option<Registered> {
        let mut slots = lock(&self.slots);
        if slots.len() >= max.max(1) {
            let victim = slots
                .iter()
                .map(|(id, s)| (*id, s.get()))
                .filter(|(_, (phase, _))| phase.waits_on_client())
                .min_by_key(|(id, (_, since))| (*since, *id))
                .map(|(id, _)| id);
            let Some(victim) = victim else {
                metrics.count_close(CloseReason::Full);
                return None;
            };
            if let Some(v) = slots.remove(&victim) {
                metrics.left();
                metrics.count_close(CloseReason::Evicted);
                v.evicted.notify_one();
            }
        }
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        let slot = Slot::new();
        slots.insert(id, slot.clone());
        metrics.opened();
        Some(Registered {
            registry: self.clone(),
            metrics: metrics.clone(),
            id,
            slot,
        })
    }
}

/// A stream that tells its [`Slot`] when a request's first byte arrives and when an
/// answer has been flushed.
#[derive(Debug)]
pub(crate) struct Watched<S> {
    inner: S,
    slot: Arc<Slot>,
}

impl<S> Watched<S> {
    pub(crate) fn new(inner: S, slot: Arc<Slot>) -> Self {
        Self { inner, slot }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.slot.request_began();
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        if matches!(r, Poll::Ready(Ok(()))) {
            self.slot.flushed();
        }
        r
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl EncodeLabelValue for CloseReason {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> std::fmt::Result {
        encoder.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ReasonLabel {
    reason: CloseReason,
}

/// Connection counters for `/metrics`.
#[derive(Debug)]
pub struct ConnectionMetrics {
    open: Gauge<u64, AtomicU64>,
    closed: Family<ReasonLabel, Counter>,
}

impl Default for ConnectionMetrics {
    fn default() -> Self {
        let m = Self {
            open: Gauge::default(),
            closed: Family::default(),
        };
        // Every reason is exported from the start, at 0.
        for reason in CloseReason::ALL {
            let _ = m.closed.get_or_create(&ReasonLabel { reason });
        }
        m
    }
}

impl ConnectionMetrics {
    /// Connections served now.
    pub fn open(&self) -> u64 {
        self.open.get()
    }

    /// Connections the server closed for `reason` so far.
    pub fn closed(&self, reason: CloseReason) -> u64 {
        self.closed.get_or_create(&ReasonLabel { reason }).get()
    }

    pub(crate) fn count_close(&self, reason: CloseReason) {
        self.closed.get_or_create(&ReasonLabel { reason }).inc();
    }

    /// Registers both families under the names `/metrics` has always shown.
    pub(crate) fn register(&self, r: &mut prometheus_client::registry::Registry) {
        r.register(
            "vtsnap_admission_connections_open",
            "Connections served now",
            self.open.clone(),
        );
        r.register(
            "vtsnap_admission_connections_closed",
            "Connections the server closed, by why",
            self.closed.clone(),
        );
    }

    pub(crate) fn opened(&self) {
        self.open.inc();
    }

    pub(crate) fn left(&self) {
        self.open.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max: usize) -> Limits {
        Limits {
            max_connections: max,
            ..Limits::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn each_phase_ends_at_its_own_deadline() {
        let l = Limits {
            handshake: Duration::from_secs(1),
            request: Duration::from_secs(3),
            idle: Duration::from_secs(7),
            max_connections: 1,
        };
        let start = Instant::now();
        let s = Slot::new();
        assert_eq!(s.ended(&l).await, CloseReason::HandshakeDeadline);
        assert_eq!(start.elapsed(), l.handshake);

        let start = Instant::now();
        let s = Slot::new();
        s.handshake_done();
        assert_eq!(s.ended(&l).await, CloseReason::IdleDeadline);
        assert_eq!(start.elapsed(), l.idle);

        // A request's phases share one deadline, counted from its first byte.
        let start = Instant::now();
        let s = Slot::new();
        s.handshake_done();
        s.request_began();
        let ended = tokio::spawn({
            let s = s.clone();
            async move { s.ended(&l).await }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        s.deciding();
        tokio::time::sleep(Duration::from_secs(1)).await;
        s.answered();
        assert_eq!(ended.await.unwrap(), CloseReason::RequestDeadline);
        assert_eq!(start.elapsed(), l.request);
    }

    #[tokio::test(start_paused = true)]
    async fn a_flushed_answer_makes_the_connection_idle_from_then() {
        let l = Limits {
            request: Duration::from_secs(3),
            idle: Duration::from_secs(7),
            ..limits(1)
        };
        let s = Slot::new();
        s.handshake_done();
        s.request_began();
        s.deciding();
        s.answered();
        tokio::time::sleep(Duration::from_secs(2)).await;
        s.flushed();
        let start = Instant::now();
        assert_eq!(s.ended(&l).await, CloseReason::IdleDeadline);
        assert_eq!(start.elapsed(), l.idle);
        // A flush while a request is being received does not end it.
        let s = Slot::new();
        s.handshake_done();
        s.request_began();
        s.flushed();
        assert_eq!(s.get().0, Phase::Receiving);
    }

    #[test]
    fn at_the_cap_the_longest_waiting_gives_way_and_a_deciding_one_never_does() {
        let registry = Arc::new(Registry::default());
        let metrics = Arc::new(ConnectionMetrics::default());
        let first = registry.admit(2, &metrics).unwrap();
        let second = registry.admit(2, &metrics).unwrap();
        assert_eq!(metrics.open(), 2);
        // The first is deciding: the second (waiting on its client) is evicted.
        first.slot.handshake_done();
        first.slot.deciding();
        let third = registry.admit(2, &metrics).unwrap();
        assert_eq!(metrics.open(), 2);
        assert_eq!(metrics.closed(CloseReason::Evicted), 1);
        drop(second);
        assert_eq!(metrics.open(), 2, "an evicted slot is not counted twice");
        // Both deciding: a newcomer is refused.
        third.slot.handshake_done();
        third.slot.deciding();
        assert!(registry.admit(2, &metrics).is_none());
        assert_eq!(metrics.closed(CloseReason::Full), 1);
        drop(first);
        assert_eq!(metrics.open(), 1);
        assert!(registry.admit(2, &metrics).is_some());
    }

    #[tokio::test]
    async fn an_evicted_connection_is_told() {
        let registry = Arc::new(Registry::default());
        let metrics = Arc::new(ConnectionMetrics::default());
        let old = registry.admit(1, &metrics).unwrap();
        let _new = registry.admit(1, &metrics).unwrap();
        assert_eq!(old.slot.ended(&limits(1)).await, CloseReason::Evicted);
    }
}
