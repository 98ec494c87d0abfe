//! Threads that serve connections, each running a single-threaded tokio
//! runtime of its own: [`serve_router_on`](crate::service::serve_router_on)
//! hands each accepted connection to the thread serving the fewest, and
//! every request on it is then read, answered (and, in a proxy, forwarded
//! and its answer read) on that one thread.
//!
//! Why: tokio's multi-threaded runtime runs a woken task on whichever worker
//! is free and wakes a sleeping worker to look for more, so one small
//! proxied request costs several cross-thread wake-ups. At one connection
//! the orchestrator made ~15 system calls per routed call on it (futex,
//! eventfd writes, `sched_yield`, a third `epoll_wait`) against 6 (two reads,
//! two writes, two waits) with the call kept on one thread, which is how
//! nginx, envoy and actix-web serve: one event loop per core, a connection
//! stays on its loop.
//!
//! The trade: work is not stolen, so a request that computes for long delays
//! the other connections of its thread; such work belongs on
//! `tokio::task::spawn_blocking`.

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// Work handed to a serving thread: it starts a connection's task there.
type Job = Box<dyn FnOnce() + Send>;

/// How long a stopping serving thread waits for its blocking tasks (five
/// seconds, as [`ServingThreads`] says) to end (`spawn_blocking`).
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

thread_local! {
    /// The index of the serving thread this is, on serving threads.
    static SERVING_THREAD: Cell<Option<usize>> = const { Cell::new(None) };
}

/// The index (from 0) of the [`ServingThreads`] thread the caller runs on,
/// or `None` on any other thread. Lets state that belongs to one event loop,
/// such as a pool of outgoing connections, be kept per thread.
pub fn serving_thread() -> Option<usize> {
    SERVING_THREAD.with(Cell::get)
}

/// Threads serving connections, each on a single-threaded tokio runtime of
/// its own. Dropped, they stop: the tasks still on them are cancelled (so
/// drop them once the server has shut down gracefully, and never on one of
/// them), and their blocking tasks get five seconds to end.
pub struct ServingThreads {
    /// One per thread; emptied on drop, which ends each thread's loop.
    queues: Vec<Queue>,
    threads: Vec<JoinHandle<()>>,
    /// Where the next search for the least busy thread starts, so that ties
    /// are shared in turn.
    next: AtomicUsize,
}

/// The way to one serving thread, and how many connections it serves.
struct Queue {
    jobs: mpsc::UnboundedSender<Job>,
    connections: Arc<AtomicUsize>,
}

impl ServingThreads {
    /// Starts `count` serving threads (at least one), named `serve-0`,
    /// `serve-1`, ...; an error when a runtime or a thread cannot be made.
    pub fn start(count: usize) -> io::Result<Self> {
        let count = count.max(1);
        // Built as it goes: if one cannot start, those already started stop on drop.
        let mut started = Self { queues: Vec::with_capacity(count), threads: Vec::new(), next: AtomicUsize::new(0) };
        for index in 0..count {
            let (jobs, received) = mpsc::unbounded_channel::<Job>();
            let (built, ready) = std::sync::mpsc::channel();
            // The runtime is made on its thread, so that none is ever dropped
            // here, in the caller's (perhaps asynchronous) context.
            let thread = std::thread::Builder::new().name(format!("serve-{index}")).spawn(move || {
                match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(runtime) => {
                        let _ = built.send(Ok(()));
                        run(index, &runtime, received);
                        runtime.shutdown_timeout(STOP_TIMEOUT);
                    }
                    Err(error) => drop(built.send(Err(error))),
                }
            })?;
            started.threads.push(thread);
            ready.recv().unwrap_or_else(|_| Err(io::Error::other("a serving thread ended before it started")))?;
            started.queues.push(Queue { jobs, connections: Arc::new(AtomicUsize::new(0)) });
        }
        Ok(started)
    }

    /// How many threads serve.
    pub fn count(&self) -> usize {
        self.queues.len()
    }

    /// Runs `serve` on `stream`, as a task of the thread serving the fewest
    /// connections, with the stream moved to that thread's event loop (for
    /// servers that accept on their own; most use
    /// [`serve_router_on`](crate::service::serve_router_on)).
    pub fn serve<F, S>(&self, stream: TcpStream, serve: S)
    where
        S: FnOnce(TcpStream) -> F + Send + 'static,
        F: Future<Output = ()> + Send + 'static,
    {
        // The stream leaves this runtime's event loop here and joins the
        // serving thread's there.
        let stream = match stream.into_std() {
            Ok(stream) => stream,
            Err(error) => {
                tracing::debug!(error = %error, "cannot hand a connection to a serving thread; closed");
                return;
            }
        };
        let queue = self.least_busy();
        let connections = Arc::clone(&queue.connections);
        connections.fetch_add(1, Ordering::Relaxed);
        let job: Job = Box::new(move || {
            let counted = Counted(connections);
            match TcpStream::from_std(stream) {
                Ok(stream) => {
                    tokio::spawn(async move {
                        serve(stream).await;
                        drop(counted);
                    });
                }
                Err(error) => tracing::debug!(error = %error, "cannot serve a connection on its thread; closed"),
            }
        });
        // A thread that is gone (its loop ended by a panic) leaves its
        // connections to the caller's runtime.
        if let Err(mpsc::error::SendError(job)) = queue.jobs.send(job) {
            job();
        }
    }

    /// The queue of the thread serving the fewest connections now.
    fn least_busy(&self) -> &Queue {
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let count = self.queues.len();
        (0..count)
            .map(|offset| &self.queues[(start + offset) % count])
            .min_by_key(|queue| queue.connections.load(Ordering::Relaxed))
            .expect("there is always at least one serving thread")
    }
}

/// Serving thread `index`'s life: runs each job it is handed on `runtime`
/// until the queue closes.
fn run(index: usize, runtime: &tokio::runtime::Runtime, mut jobs: mpsc::UnboundedReceiver<Job>) {
    SERVING_THREAD.with(|cell| cell.set(Some(index)));
    runtime.block_on(async move {
        while let Some(job) = jobs.recv().await {
            job();
        }
    });
}

impl Drop for ServingThreads {
    fn drop(&mut self) {
        self.queues.clear();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// One connection of a serving thread, counted while it is served.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::time::Duration;

    use axum::Router;
    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::sync::oneshot;

    use super::*;
    use crate::ServerLimits;
    use crate::service::serve_router_on;

    /// A server on `threads` whose `/` answers the serving thread it ran on
    /// (after `/slow`'s 300 ms for `/slow`), until `stop` is sent.
    async fn start(threads: Arc<ServingThreads>) -> (SocketAddr, oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
        let which = || async { format!("{{\"thread\":{:?}}}", serving_thread()) };
        let slow = move || async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            which().await
        };
        let router = Router::new().route("/", get(which)).route("/slow", get(slow));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let shutdown = async move {
                let _ = stopped.await;
            };
            serve_router_on(listener, router, ServerLimits::default(), shutdown, &threads).await;
        });
        (address, stop, server)
    }

    /// Asks `path` on the kept-alive `stream`; the answer's body.
    async fn ask(stream: &mut TcpStream, path: &str) -> String {
        let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut received = Vec::new();
        let mut buffer = [0u8; 1024];
        while !received.ends_with(b"}") {
            let read = stream.read(&mut buffer).await.unwrap();
            assert!(read > 0, "closed before the answer: {}", String::from_utf8_lossy(&received));
            received.extend_from_slice(&buffer[..read]);
        }
        let text = String::from_utf8(received).unwrap();
        text.split_once("\r\n\r\n").unwrap().1.to_owned()
    }

    #[tokio::test]
    async fn connections_are_shared_out_and_each_stays_on_its_thread() {
        let threads = Arc::new(ServingThreads::start(2).unwrap());
        assert_eq!(threads.count(), 2);
        let (address, stop, server) = start(Arc::clone(&threads)).await;
        let mut connections = Vec::new();
        let mut served_by = Vec::new();
        for _ in 0..4 {
            let mut stream = TcpStream::connect(address).await.unwrap();
            let first = ask(&mut stream, "/").await;
            for _ in 0..3 {
                assert_eq!(ask(&mut stream, "/").await, first, "a connection is served on one thread");
            }
            served_by.push(first);
            connections.push(stream);
        }
        served_by.sort();
        assert_eq!(
            served_by,
            ["{\"thread\":Some(0)}", "{\"thread\":Some(0)}", "{\"thread\":Some(1)}", "{\"thread\":Some(1)}"]
        );
        assert_eq!(serving_thread(), None, "other threads are not serving threads");
        drop(connections);
        stop.send(()).unwrap();
        server.await.unwrap();
    }

    #[tokio::test]
    async fn a_request_in_flight_at_shutdown_is_answered_and_the_threads_stop() {
        let threads = Arc::new(ServingThreads::start(2).unwrap());
        let (address, stop, server) = start(Arc::clone(&threads)).await;
        let mut stream = TcpStream::connect(address).await.unwrap();
        let asking = tokio::spawn(async move { ask(&mut stream, "/slow").await });
        tokio::time::sleep(Duration::from_millis(100)).await;
        stop.send(()).unwrap();
        let answer = tokio::time::timeout(Duration::from_secs(5), asking).await.unwrap().unwrap();
        assert!(answer.starts_with("{\"thread\":Some("), "{answer}");
        tokio::time::timeout(Duration::from_secs(5), server).await.unwrap().unwrap();
        assert!(TcpStream::connect(address).await.is_err(), "the listener is closed");
        let threads = Arc::into_inner(threads).expect("the server let go of its threads");
        let stopping = std::thread::spawn(move || drop(threads));
        for _ in 0..50 {
            if stopping.is_finished() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the serving threads did not stop within 5 s of being dropped");
    }
}
