//! One keep-alive HTTP/1.1 connection to a module (hyper's
//! `client::conn::http1`), driven by the call that holds it rather than by
//! a task of its own, and the idle ones kept per module URL.
//!
//! hyper's pooled client runs each connection in a task of its own: a call
//! hands its request to that task through a channel and is woken through
//! another when the answer's head and each piece of its body arrive, so one
//! routed call meant several task wake-ups, often across threads. Here the
//! call that takes a connection from the pool polls it itself while it
//! waits for the answer and reads the body, and puts it back when the body
//! is read whole.
//!
//! Idle connections are kept per serving thread
//! ([`module_sdk::service::ServingThreads`]; the other threads share one
//! more pool): a connection is registered with the event loop of the thread
//! that made it and goes back to that thread's pool, so a call served on
//! that thread finds it there, and the threads' calls do not share a lock.
//! A call whose thread has no idle connection to its module takes another
//! thread's before it connects (it works from any thread, its readiness
//! then reported across threads), so calls spread over many threads reuse
//! connections as before and a module never has more connections than
//! calls in flight at once, whatever the number of threads.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Waker};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderValue, Uri};
use http_body_util::Full;
use hyper::client::conn::http1::{Connection, SendRequest};
use hyper_rustls::MaybeHttpsStream;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::time::Instant;

/// What a connection to a module runs over: TCP, or TLS over TCP.
pub(super) type ModuleStream = MaybeHttpsStream<TokioIo<TcpStream>>;

/// A connection to a module: its request half and the connection itself,
/// which whoever holds it polls.
pub(super) struct ModuleConnection {
    /// Sends a request on the connection.
    pub sender: SendRequest<Full<Bytes>>,
    /// Boxed: hyper's connection state is nearly 2 KiB, and a call moves
    /// its connection in and out of the pool and the answer's body.
    connection: Box<Connection<ModuleStream, Full<Bytes>>>,
    /// The connection ended (closed by either side, or failed); it is not
    /// polled again.
    over: bool,
    /// Where it leads, the key it is pooled under, and what requests to it need.
    url: Arc<str>,
    target: Arc<Target>,
    /// The pool it goes back to: that of the thread whose event loop it is
    /// registered with (see [`own_pool`]).
    home: usize,
}

impl ModuleConnection {
    /// A fresh connection to the module at `url`, whose request target is `target`.
    pub fn new(
        url: Arc<str>,
        target: Arc<Target>,
        sender: SendRequest<Full<Bytes>>,
        connection: Connection<ModuleStream, Full<Bytes>>,
    ) -> Self {
        Self { sender, connection: Box::new(connection), over: false, url, target, home: own_pool() }
    }

    /// Reads and writes what the connection can now, registering `cx` to
    /// be woken when it can do more; `true` once the connection is over.
    pub fn drive(&mut self, cx: &mut Context<'_>) -> bool {
        if !self.over {
            // Its error, if any, reaches the request or the body it concerns.
            self.over = self.connection.poll_without_shutdown(cx).is_ready();
        }
        self.over
    }

    /// Whether the connection is open and idle, ready for a request. It is
    /// polled without a waker of anyone's, so that the last call that used
    /// it is not woken by what happens to it while it lies in the pool.
    fn is_ready(&mut self) -> bool {
        !self.drive(&mut Context::from_waker(Waker::noop())) && self.sender.is_ready()
    }

    /// [`Self::is_ready`], without polling the connection again when it
    /// already says so: an answer read whole has just polled it, and
    /// usually left it waiting for the next request. (Then the waker of the
    /// call that read it stays registered until the next poll: the module
    /// closing the connection meanwhile wakes that call's task, which has
    /// ended or moved on, for nothing.)
    fn is_ready_now(&mut self) -> bool {
        (!self.over && self.sender.is_ready()) || self.is_ready()
    }
}

/// A module URL's request target and its idle connections.
struct ModulePool {
    target: Arc<Target>,
    /// Each with the instant it expires, the most recently used last.
    idle: Vec<(ModuleConnection, Instant)>,
}

/// What a request to a module's URL needs: the URL itself (to connect),
/// its path (the request's target) and its `Host` header.
pub(super) struct Target {
    /// The whole URL.
    pub uri: Uri,
    /// Its path, in origin form, as an HTTP/1.1 request line carries it.
    pub path: Uri,
    /// Its host and port, as the `Host` header says them.
    pub host: HeaderValue,
}

/// The idle keep-alive connections to modules, per serving thread (see the
/// module's doc): at most `max_idle` per module URL and thread, each
/// dropped once idle for the idle timeout
/// ([`MODULE_IDLE_TIMEOUT`](super::MODULE_IDLE_TIMEOUT)): when its URL is
/// next used, or by the sweep of every URL of every thread's pool that a
/// call returning a connection makes at most once per idle timeout (so
/// URLs no longer called, such as a replaced replica's, and threads no
/// longer calling hold nothing for long while calls go on).
pub(super) struct ConnectionPool {
    /// The pool of the threads that are not serving threads, then one per
    /// serving thread.
    shards: Box<[Mutex<Modules>]>,
    max_idle: usize,
    /// [`MODULE_IDLE_TIMEOUT`](super::MODULE_IDLE_TIMEOUT), but for tests.
    idle_timeout: Duration,
}

/// Each module URL's pool, and when all are next swept.
struct Modules {
    /// foldhash rather than SipHash: the URLs are the configuration's, not
    /// an attacker's, and a call looks its URL up twice.
    by_url: HashMap<Arc<str>, ModulePool, foldhash::fast::RandomState>,
    next_sweep: Instant,
}

impl ConnectionPool {
    /// A pool keeping at most `max_idle` idle connections per module URL
    /// and thread, for `serving_threads` serving threads and the others,
    /// each for at most `idle_timeout`.
    pub fn new(max_idle: usize, idle_timeout: Duration, serving_threads: usize) -> Self {
        let next_sweep = Instant::now() + idle_timeout;
        let shards =
            (0..=serving_threads).map(|_| Mutex::new(Modules { by_url: HashMap::default(), next_sweep })).collect();
        Self { shards, max_idle, idle_timeout }
    }

    /// Pool `index`'s idle connections, locked.
    fn modules(&self, index: usize) -> MutexGuard<'_, Modules> {
        debug_assert!(index < self.shards.len(), "a pool for each serving thread");
        self.shards[index % self.shards.len()].lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `url`'s request target, if this thread has [remembered](Self::remember)
    /// it, and a ready idle connection to it (closed and expired ones are
    /// dropped on the way): this thread's own, else another thread's.
    pub fn take(&self, url: &str) -> (Option<Arc<Target>>, Option<ModuleConnection>) {
        let own = own_pool() % self.shards.len();
        let (target, connection) = self.take_ready(own, url);
        if connection.is_some() {
            return (target, connection);
        }
        let mut others = (0..self.shards.len()).filter(|index| *index != own);
        (target, others.find_map(|index| self.take_ready(index, url).1))
    }

    /// `url`'s request target in pool `index`, and a ready idle connection
    /// to it from that pool.
    fn take_ready(&self, index: usize, url: &str) -> (Option<Arc<Target>>, Option<ModuleConnection>) {
        let mut target = None;
        loop {
            let candidate = {
                let mut modules = self.modules(index);
                let Some(module) = modules.by_url.get_mut(url) else { return (target, None) };
                target.get_or_insert_with(|| Arc::clone(&module.target));
                module.idle.pop()
            };
            let Some((mut connection, expires)) = candidate else { return (target, None) };
            // Checked outside the lock: checking a connection may read from it.
            if Instant::now() < expires && connection.is_ready() {
                return (target, Some(connection));
            }
        }
    }

    /// Keeps `url`'s request target, so later calls of this thread find it
    /// here; the one kept.
    pub fn remember(&self, url: &Arc<str>, target: Target) -> Arc<Target> {
        let mut modules = self.modules(own_pool());
        let module = modules
            .by_url
            .entry(Arc::clone(url))
            .or_insert_with(|| ModulePool { target: Arc::new(target), idle: Vec::new() });
        Arc::clone(&module.target)
    }

    /// Keeps `connection`, whose last answer was read whole, for another
    /// call, if it is ready for one and there is room.
    pub fn put(&self, mut connection: ModuleConnection) {
        if !connection.is_ready_now() {
            return;
        }
        let now = Instant::now();
        let home = connection.home;
        let mut modules = self.modules(home);
        if now >= modules.next_sweep {
            modules.sweep(now, self.idle_timeout);
            // The other threads' pools too, unless busy: a thread that no
            // longer calls modules does not put anything back to sweep its own.
            for (index, other) in self.shards.iter().enumerate() {
                if index != home
                    && let Ok(mut other) = other.try_lock()
                {
                    other.sweep(now, self.idle_timeout);
                }
            }
        }
        let target = &connection.target;
        let module = modules
            .by_url
            .entry(Arc::clone(&connection.url))
            .or_insert_with(|| ModulePool { target: Arc::clone(target), idle: Vec::new() });
        drop_expired(&mut module.idle, now);
        if module.idle.len() < self.max_idle {
            module.idle.push((connection, now + self.idle_timeout));
        }
    }
}

impl Modules {
    /// Drops every URL's expired connections, and the URLs left without
    /// any, if not done in the last `every`.
    fn sweep(&mut self, now: Instant, every: Duration) {
        if now < self.next_sweep {
            return;
        }
        self.next_sweep = now + every;
        self.by_url.retain(|_, module| {
            drop_expired(&mut module.idle, now);
            !module.idle.is_empty()
        });
    }
}

/// The index of the calling thread's pool: 0 on threads that are not
/// serving threads, `i + 1` on serving thread `i`.
fn own_pool() -> usize {
    module_sdk::service::serving_thread().map_or(0, |index| index + 1)
}

/// Drops the connections of `idle` (oldest first) expired at `now`.
fn drop_expired(idle: &mut Vec<(ModuleConnection, Instant)>, now: Instant) {
    let expired = idle.partition_point(|(_, expires)| *expires <= now);
    idle.drain(..expired);
}
