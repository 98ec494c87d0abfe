//! Stopping a server's connections gracefully: on the stop, each one
//! finishes the request it is serving and closes, and the server waits
//! until every one has.
//!
//! hyper-util's `GracefulShutdown` does the same over a `watch` channel;
//! each poll of a connection then polled the channel's `changed()`, whose
//! waiter list is behind a lock (callgrind: ~700 instructions of a routed
//! call, four polls of a connection per request). Here a connection
//! registers its waker in an `AtomicWaker` of its own; the lock is taken
//! once per connection (to list its waker) and by the stop.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};

use futures::task::AtomicWaker;
use hyper::body::Incoming;
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

/// The connections of one server, to be stopped together.
#[derive(Default)]
pub(crate) struct GracefulStop {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    stopping: AtomicBool,
    /// Connections not yet closed.
    open: AtomicUsize,
    /// Each connection's waker slot; dead entries are pruned as it grows.
    wakers: Mutex<Wakers>,
    /// Woken when the last open connection closes during the stop.
    all_closed: Notify,
}

#[derive(Default)]
struct Wakers {
    slots: Vec<Weak<AtomicWaker>>,
    /// `slots.len()` after the last pruning: the next one is at twice that.
    pruned_len: usize,
}

impl GracefulStop {
    /// A connection just accepted, open from now on (the stop waits for it)
    /// and served once [`Watcher::watch`] has it.
    pub(crate) fn watcher(&self) -> Watcher {
        self.shared.open.fetch_add(1, Ordering::AcqRel);
        Watcher { open: OpenConnection(Arc::clone(&self.shared)) }
    }

    /// Asks every connection to finish the request it is serving and close,
    /// and waits until all of them have.
    pub(crate) async fn stop(self) {
        let shared = &self.shared;
        // SeqCst here and in `OpenConnection::drop`: the last connection to
        // close and the stop each write one flag and read the other, and at
        // least one of them must see the other's write.
        shared.stopping.store(true, Ordering::SeqCst);
        let slots = std::mem::take(&mut shared.wakers.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).slots);
        for waker in slots.iter().filter_map(Weak::upgrade) {
            waker.wake();
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

/// A connection accepted and not yet served; see [`GracefulStop::watcher`].
pub(crate) struct Watcher {
    open: OpenConnection,
}

impl Watcher {
    /// `connection` served until it closes, or asked to finish once the
    /// stop begins (at once, when it began before its first poll).
    pub(crate) fn watch<C: GracefulConnection>(self, connection: C) -> Stoppable<C> {
        let waker = Arc::new(AtomicWaker::new());
        let mut wakers = self.open.0.wakers.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if wakers.slots.len() >= 2 * wakers.pruned_len.max(32) {
            wakers.slots.retain(|slot| slot.strong_count() > 0);
            wakers.pruned_len = wakers.slots.len();
        }
        wakers.slots.push(Arc::downgrade(&waker));
        drop(wakers);
        Stoppable { connection, waker, asked: false, open: self.open }
    }
}

/// Counts a connection as open until it is dropped.
struct OpenConnection(Arc<Shared>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        if self.0.open.fetch_sub(1, Ordering::SeqCst) == 1 && self.0.stopping.load(Ordering::SeqCst) {
            self.0.all_closed.notify_waiters();
        }
    }
}

pin_project_lite::pin_project! {
    /// A connection that finishes its request and closes once the stop begins.
    pub(crate) struct Stoppable<C> {
        #[pin]
        connection: C,
        waker: Arc<AtomicWaker>,
        asked: bool,
        open: OpenConnection,
    }
}

impl<C: GracefulConnection> Future for Stoppable<C> {
    type Output = C::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if !*this.asked {
            this.waker.register(cx.waker());
            if this.open.0.stopping.load(Ordering::Acquire) {
                *this.asked = true;
                this.connection.as_mut().graceful_shutdown();
            }
        }
        this.connection.poll(cx)
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
        let stop = GracefulStop::default();
        let running: Vec<_> = (0..100).map(|_| tokio::spawn(stop.watcher().watch(Idle::default()))).collect();
        // Connections that closed on their own are pruned, not kept.
        for _ in 0..200 {
            drop(stop.watcher().watch(Idle::default()));
        }
        let kept = stop.shared.wakers.lock().unwrap().slots.len();
        assert!(kept < 250, "{kept} waker slots kept for 100 open connections");
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(running.iter().all(|task| !task.is_finished()), "nobody was asked yet");
        tokio::time::timeout(Duration::from_secs(5), stop.stop()).await.expect("every connection closed");
        for task in running {
            task.await.unwrap().unwrap();
        }
    }

    #[tokio::test]
    async fn a_connection_accepted_before_the_stop_and_served_after_it_is_asked_at_once() {
        let stop = GracefulStop::default();
        let accepted = stop.watcher();
        let stopping = tokio::spawn(stop.stop());
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!stopping.is_finished(), "the stop waits for the accepted connection");
        accepted.watch(Idle::default()).await.unwrap();
        tokio::time::timeout(Duration::from_secs(5), stopping).await.expect("the stop ended").unwrap();
    }
}
