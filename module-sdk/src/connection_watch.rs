//! The server's watch over its open connections: on the stop, each one
//! finishes the request it is serving and closes, and the server waits
//! until every one has; and a connection waiting for a request head longer
//! than `HEADER_READ_TIMEOUT_SECONDS` (a new one, or a kept-alive one after
//! its last answer) is closed.
//!
//! hyper-util's `GracefulShutdown` does the stop over a `watch` channel;
//! each poll of a connection then polled the channel's `changed()`, whose
//! waiter list is behind a lock (callgrind: ~700 instructions of a routed
//! call, four polls of a connection per request). Here a connection
//! registers its waker in a [`Signal`] of its own; the lock is taken once
//! per connection (to list it) and by the stop.
//!
//! hyper's own header read timeout armed a timer per request (a boxed
//! sleep, inserted in and removed from the runtime's timer wheel, whose
//! insertion also woke the event loop through its eventfd when it was the
//! earliest; callgrind: ~1 100 instructions of a routed call). Here a
//! connection counts the requests it serves and notes the server's sweep
//! count when it becomes idle (its last answer's body done) and again
//! whenever it writes while idle (an answer still going out to a slow
//! reader), and one sweep per server, every eighth of the timeout, closes
//! those idle for longer: at the timeout, or up to an eighth of it later
//! (more on a busy machine). So, as with hyper's timer, the clock runs from
//! the end of the last answer's writing (or the connection's start) to the
//! next request's complete head.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::task::AtomicWaker;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::service::HttpService;
use tokio::sync::Notify;

/// A connection that can be asked to finish the request it is serving and
/// close.
pub(crate) trait GracefulConnection: Future {
    /// Asks it to.
    fn graceful_shutdown(self: Pin<&mut Self>);
}

impl<I, B, S> GracefulConnection for hyper::server::conn::http1::Connection<I, S>
where
    S: HttpService<Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin + 'static,
    B: hyper::body::Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fn graceful_shutdown(self: Pin<&mut Self>) {
        hyper::server::conn::http1::Connection::graceful_shutdown(self);
    }
}

/// How many sweeps make one idle timeout.
const SWEEPS_PER_TIMEOUT: u64 = 8;

// A connection's state, one word changed by compare-and-swap, so that the
// sweep never expires a connection a request has just reached: whether the
// sweep has expired it (top bit), how many requests it is serving (the next
// 15 bits; hyper serves one at a time, and may drop an answer's body just
// after the next head arrived), and the sweep count when it last became idle
// or wrote while idle (the low 48 bits).
/// The state's bit set by the sweep.
const EXPIRED: u64 = 1 << 63;
/// One request served, in the state.
const ONE_REQUEST: u64 = 1 << 48;
/// The state's bits counting requests served.
const REQUESTS: u64 = EXPIRED - ONE_REQUEST;
/// The state's bits holding the sweep count.
const SINCE: u64 = ONE_REQUEST - 1;

/// The connections of one server, to be stopped together and closed when
/// idle for too long.
#[derive(Default)]
pub(crate) struct ConnectionWatch {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    stopping: AtomicBool,
    /// Connections not yet closed.
    open: AtomicUsize,
    /// Sweeps since the server started: the clock connections note.
    sweeps: AtomicU64,
    /// Each connection's signal; dead entries are pruned as it grows.
    signals: Mutex<Signals>,
    /// Woken when the last open connection closes during the stop.
    all_closed: Notify,
}

#[derive(Default)]
struct Signals {
    slots: Vec<Weak<Signal>>,
    /// `slots.len()` after the last pruning: the next one is at twice that.
    pruned_len: usize,
}

/// What the server tells one connection, and what it tells the server.
/// Every holder of it lives inside the connection, so the connection counts
/// as open until it is dropped.
struct Signal {
    /// Its task, woken for the stop or the expiry.
    waker: AtomicWaker,
    /// Expired, requests served, idle since (see [`EXPIRED`]).
    state: AtomicU64,
    /// The server's, for its clock.
    shared: Arc<Shared>,
}

impl Shared {
    fn signals(&self) -> MutexGuard<'_, Signals> {
        self.signals.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl ConnectionWatch {
    /// A connection just accepted, open from now on (the stop waits for
    /// it), idle until its first request, and served once
    /// [`Watcher::watch`] has it.
    pub(crate) fn watcher(&self) -> Watcher {
        self.shared.open.fetch_add(1, Ordering::AcqRel);
        let idle_since = self.shared.sweeps.load(Ordering::Relaxed) & SINCE;
        let shared = Arc::clone(&self.shared);
        let signal = Arc::new(Signal { waker: AtomicWaker::new(), state: AtomicU64::new(idle_since), shared });
        let mut signals = self.shared.signals();
        if signals.slots.len() >= 2 * signals.pruned_len.max(32) {
            signals.slots.retain(|slot| slot.strong_count() > 0);
            signals.pruned_len = signals.slots.len();
        }
        signals.slots.push(Arc::downgrade(&signal));
        drop(signals);
        Watcher { signal }
    }

    /// Closes the connections idle for longer than `timeout`, sweeping every
    /// eighth of it, until the server and all its connections are gone.
    pub(crate) fn sweep_idle(&self, timeout: Duration) -> impl Future<Output = ()> + Send + 'static {
        let shared = Arc::downgrade(&self.shared);
        let period = (timeout / SWEEPS_PER_TIMEOUT as u32).max(Duration::from_millis(1));
        async move {
            let mut ticks = tokio::time::interval(period);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let Some(shared) = shared.upgrade() else { return };
                shared.sweep();
            }
        }
    }

    /// Asks every connection to finish the request it is serving and close,
    /// and waits until all of them have.
    pub(crate) async fn stop(self) {
        let shared = &self.shared;
        // SeqCst here and in `Signal::drop`: the last connection to
        // close and the stop each write one flag and read the other, and at
        // least one of them must see the other's write.
        shared.stopping.store(true, Ordering::SeqCst);
        // Kept, not taken: the sweep still closes the idle ones that do not
        // close when asked (such as one that sent half a request head).
        for signal in shared.signals().slots.iter().filter_map(Weak::upgrade) {
            signal.waker.wake();
        }
        loop {
            let mut closed = pin!(shared.all_closed.notified());
            closed.as_mut().enable();
            if shared.open.load(Ordering::SeqCst) == 0 {
                return;
            }
            closed.await;
        }
    }
}

impl Shared {
    /// One sweep: the clock advances, and the connections idle since before
    /// the sweep a whole timeout ago expire (so none expires early, and none
    /// more than one sweep late).
    fn sweep(&self) {
        let now = self.sweeps.fetch_add(1, Ordering::Relaxed) + 1;
        let mut signals = self.signals();
        signals.slots.retain(|slot| {
            let Some(signal) = slot.upgrade() else { return false };
            // A connection that a request reached meanwhile is busy, not expired.
            let expired = signal.state.fetch_update(Ordering::AcqRel, Ordering::Relaxed, |state| {
                let idle = state & (EXPIRED | REQUESTS) == 0;
                (idle && (now & SINCE).saturating_sub(state & SINCE) > SWEEPS_PER_TIMEOUT).then_some(state | EXPIRED)
            });
            if expired.is_ok() {
                signal.waker.wake();
            }
            true
        });
        signals.pruned_len = signals.slots.len();
    }
}

/// A connection accepted and not yet served; see [`ConnectionWatch::watcher`].
pub(crate) struct Watcher {
    signal: Arc<Signal>,
}

impl Watcher {
    /// What the connection's service tells the watch: when a request
    /// arrives and when its answer is done.
    pub(crate) fn activity(&self) -> Activity {
        Activity(Arc::clone(&self.signal))
    }

    /// `connection` served until it closes; asked to finish once the stop
    /// begins (at once, when it began before its first poll), and closed
    /// once idle for too long.
    pub(crate) fn watch<C, E>(self, connection: C) -> Watched<C>
    where
        C: GracefulConnection<Output = Result<(), E>>,
    {
        Watched { connection, activity: Activity(self.signal), asked: false }
    }
}

/// Tells the watch when one connection serves a request and when it is idle.
#[derive(Clone)]
pub(crate) struct Activity(Arc<Signal>);

impl Activity {
    /// A request has arrived (its head is complete): the connection is busy
    /// until the body of the answer given to the returned [`Busy`] is done.
    pub(crate) fn arrived(&self) -> Busy {
        // Also clears an expiry the connection has not acted on yet: it is serving.
        let _ = self
            .0
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |state| Some((state & !EXPIRED) + ONE_REQUEST));
        Busy(Arc::clone(&self.0))
    }

    /// The connection wrote some of an answer: if it is idle (the answer's
    /// body handed to hyper, still going out), it is idle from now. An
    /// expired connection stays expired: writes that stall as long are cut
    /// off anyway (the listener's stall timeout is the same time).
    pub(crate) fn wrote(&self) {
        let now = self.0.shared.sweeps.load(Ordering::Relaxed) & SINCE;
        let state = self.0.state.load(Ordering::Relaxed);
        if state & (EXPIRED | REQUESTS) == 0 && state & SINCE != now {
            // Lost to a request arriving or the sweep: either says what holds.
            let _ = self.0.state.compare_exchange(state, now, Ordering::AcqRel, Ordering::Relaxed);
        }
    }

    /// Whether the sweep has expired the connection and no request has reached it since.
    fn expired(&self) -> bool {
        let state = self.0.state.load(Ordering::Acquire);
        state & EXPIRED != 0 && state & REQUESTS == 0
    }
}

/// A connection serving a request; idle again once dropped.
pub(crate) struct Busy(Arc<Signal>);

impl Busy {
    /// `answer`, whose body keeps the connection busy until it is done
    /// (sent whole, or dropped).
    pub(crate) fn until_sent<B>(self, answer: axum::http::Response<B>) -> axum::http::Response<ActivityBody<B>> {
        answer.map(|inner| ActivityBody { inner, _busy: self })
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let now = self.0.shared.sweeps.load(Ordering::Relaxed) & SINCE;
        let _ = self.0.state.fetch_update(Ordering::AcqRel, Ordering::Relaxed, |state| {
            let left = state.saturating_sub(ONE_REQUEST) & REQUESTS;
            // The last request answered: idle from now.
            Some(if left == 0 { now } else { left | (state & SINCE) })
        });
    }
}

pin_project_lite::pin_project! {
    /// An answer's body; its connection is idle once it is done with.
    pub(crate) struct ActivityBody<B> {
        #[pin]
        inner: B,
        _busy: Busy,
    }
}

impl<B: Body> Body for ActivityBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        self.project().inner.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Signal {
    fn drop(&mut self) {
        if self.shared.open.fetch_sub(1, Ordering::SeqCst) == 1 && self.shared.stopping.load(Ordering::SeqCst) {
            self.shared.all_closed.notify_waiters();
        }
    }
}

pin_project_lite::pin_project! {
    /// A connection that finishes its request and closes once the stop
    /// begins, and that closes when idle for too long.
    pub(crate) struct Watched<C> {
        #[pin]
        connection: C,
        activity: Activity,
        asked: bool,
    }
}

impl<C, E> Future for Watched<C>
where
    C: GracefulConnection<Output = Result<(), E>>,
{
    type Output = Result<(), E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        // Every poll, the stop begun or not: the sweep may still expire it.
        this.activity.0.waker.register(cx.waker());
        if !*this.asked && this.activity.0.shared.stopping.load(Ordering::Acquire) {
            *this.asked = true;
            this.connection.as_mut().graceful_shutdown();
        }
        // Polled once more when expired: a request head that arrived since
        // the sweep is served, not dropped unread.
        let expired = this.activity.expired();
        let polled = this.connection.poll(cx);
        if polled.is_pending() && expired && this.activity.expired() {
            // Dropped, the connection closes: nothing of a request was read
            // whole, so nothing is answered (as with hyper's own timeout).
            tracing::debug!("closed a connection idle past HEADER_READ_TIMEOUT_SECONDS");
            return Poll::Ready(Ok(()));
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A connection that ends only after it was asked to.
    #[derive(Default)]
    struct Idle {
        asked: bool,
    }

    impl Future for Idle {
        type Output = Result<(), std::io::Error>;

        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
            if self.asked { Poll::Ready(Ok(())) } else { Poll::Pending }
        }
    }

    impl GracefulConnection for Idle {
        fn graceful_shutdown(self: Pin<&mut Self>) {
            self.get_mut().asked = true;
        }
    }

    #[tokio::test]
    async fn the_stop_asks_every_connection_and_waits_for_all_of_them() {
        let stop = ConnectionWatch::default();
        let running: Vec<_> = (0..100).map(|_| tokio::spawn(stop.watcher().watch(Idle::default()))).collect();
        // Connections that closed on their own are pruned, not kept.
        for _ in 0..200 {
            drop(stop.watcher().watch(Idle::default()));
        }
        let kept = stop.shared.signals().slots.len();
        assert!(kept < 250, "{kept} signals kept for 100 open connections");
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(running.iter().all(|task| !task.is_finished()), "nobody was asked yet");
        tokio::time::timeout(Duration::from_secs(5), stop.stop()).await.expect("every connection closed");
        for task in running {
            task.await.unwrap().unwrap();
        }
    }

    #[tokio::test]
    async fn a_connection_accepted_before_the_stop_and_served_after_it_is_asked_at_once() {
        let stop = ConnectionWatch::default();
        let accepted = stop.watcher();
        let stopping = tokio::spawn(stop.stop());
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!stopping.is_finished(), "the stop waits for the accepted connection");
        accepted.watch(Idle::default()).await.unwrap();
        tokio::time::timeout(Duration::from_secs(5), stopping).await.expect("the stop ended").unwrap();
    }

    /// Whether `task` has ended once the clock has moved on by `by`.
    async fn finished_after<T>(task: &tokio::task::JoinHandle<T>, by: Duration) -> bool {
        tokio::time::sleep(by).await;
        // Let the woken task run.
        tokio::task::yield_now().await;
        task.is_finished()
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_connection_is_closed_after_the_timeout_and_a_busy_one_is_not() {
        let watch = ConnectionWatch::default();
        tokio::spawn(watch.sweep_idle(Duration::from_secs(8)));
        let idle = tokio::spawn(watch.watcher().watch(Idle::default()));
        let busy_watcher = watch.watcher();
        let activity = busy_watcher.activity();
        let busy = activity.arrived();
        let serving = tokio::spawn(busy_watcher.watch(Idle::default()));

        assert!(!finished_after(&idle, Duration::from_millis(7_900)).await, "not before the timeout");
        assert!(finished_after(&idle, Duration::from_millis(1_200)).await, "closed within an eighth of it after");
        assert!(!finished_after(&serving, Duration::from_secs(100)).await, "a request in progress is not cut off");

        // Its answer sent, the connection is idle from then on.
        let answer = busy.until_sent(axum::http::Response::new(http_body_util::Empty::<axum::body::Bytes>::new()));
        drop(answer);
        assert!(!finished_after(&serving, Duration::from_millis(7_900)).await, "idle from the answer on");
        assert!(finished_after(&serving, Duration::from_millis(1_200)).await);
        idle.await.unwrap().unwrap();
        serving.await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn the_sweep_ends_with_the_server_and_its_connections() {
        let watch = ConnectionWatch::default();
        let sweep = tokio::spawn(watch.sweep_idle(Duration::from_secs(1)));
        let connection = watch.watcher().watch(Idle::default());
        drop(watch);
        assert!(!finished_after(&sweep, Duration::from_secs(1)).await, "a connection is still open");
        drop(connection);
        assert!(finished_after(&sweep, Duration::from_secs(1)).await);
    }

    /// A connection that neither ends nor heeds the stop (as one that sent
    /// half a request head: hyper does not close it when asked).
    struct Stubborn;

    impl Future for Stubborn {
        type Output = Result<(), std::io::Error>;

        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
            Poll::Pending
        }
    }

    impl GracefulConnection for Stubborn {
        fn graceful_shutdown(self: Pin<&mut Self>) {}
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_still_being_written_and_a_second_request_keep_a_connection_open() {
        let watch = ConnectionWatch::default();
        tokio::spawn(watch.sweep_idle(Duration::from_secs(8)));
        let watcher = watch.watcher();
        let activity = watcher.activity();
        let connection = tokio::spawn(watcher.watch(Stubborn));

        // Its body handed over, the answer goes out slowly for 30 s.
        drop(activity.arrived().until_sent(axum::http::Response::new(())));
        for _ in 0..6 {
            tokio::time::sleep(Duration::from_secs(5)).await;
            activity.wrote();
        }
        assert!(!connection.is_finished(), "writing an answer is not idle time");
        // The next request arrives before the first answer's body is dropped.
        let first = activity.arrived();
        let second = activity.arrived();
        drop(first);
        assert!(!finished_after(&connection, Duration::from_secs(30)).await, "the second request is still served");
        drop(second);
        assert!(finished_after(&connection, Duration::from_secs(9)).await);
    }

    #[tokio::test(start_paused = true)]
    async fn the_stop_ends_once_a_connection_that_does_not_heed_it_has_been_idle_too_long() {
        let watch = ConnectionWatch::default();
        tokio::spawn(watch.sweep_idle(Duration::from_secs(8)));
        let connection = tokio::spawn(watch.watcher().watch(Stubborn));
        tokio::task::yield_now().await;
        let stopping = tokio::spawn(watch.stop());
        assert!(!finished_after(&stopping, Duration::from_secs(7)).await, "the stop waits for it");
        assert!(finished_after(&stopping, Duration::from_secs(3)).await, "closed as idle, the stop ends");
        connection.await.unwrap().unwrap();
    }
}
