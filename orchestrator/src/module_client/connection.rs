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

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Waker};

use axum::body::Bytes;
use axum::http::{HeaderValue, Uri};
use http_body_util::Full;
use hyper::client::conn::http1::{Connection, SendRequest};
use hyper_rustls::MaybeHttpsStream;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::MODULE_IDLE_TIMEOUT;

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
    /// Where it leads, the key it is pooled under.
    url: Arc<str>,
}

impl ModuleConnection {
    /// A fresh connection to the module at `url`.
    pub fn new(
        url: Arc<str>,
        sender: SendRequest<Full<Bytes>>,
        connection: Connection<ModuleStream, Full<Bytes>>,
    ) -> Self {
        Self { sender, connection: Box::new(connection), over: false, url }
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
}

/// A module URL's request target and its idle connections.
struct ModulePool {
    target: Arc<Target>,
    /// The most recently used last.
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

/// The idle keep-alive connections to modules, at most `max_idle` per
/// module URL, each dropped once idle for [`MODULE_IDLE_TIMEOUT`].
pub(super) struct ConnectionPool {
    modules: Mutex<HashMap<Arc<str>, ModulePool>>,
    max_idle: usize,
}

impl ConnectionPool {
    /// A pool keeping at most `max_idle` idle connections per module URL.
    pub fn new(max_idle: usize) -> Self {
        Self { modules: Mutex::new(HashMap::new()), max_idle }
    }

    /// `url`'s request target and an idle connection to it, if there is a
    /// ready one (closed and expired ones are dropped on the way); `None`
    /// when `url` has not been [remembered](Self::remember).
    pub fn take(&self, url: &str) -> Option<(Arc<Target>, Option<ModuleConnection>)> {
        loop {
            let (target, candidate) = {
                let mut modules = self.modules.lock().unwrap_or_else(PoisonError::into_inner);
                let module = modules.get_mut(url)?;
                (Arc::clone(&module.target), module.idle.pop())
            };
            let Some((mut connection, since)) = candidate else { return Some((target, None)) };
            // Checked outside the lock: checking a connection may read from it.
            if since.elapsed() < MODULE_IDLE_TIMEOUT && connection.is_ready() {
                return Some((target, Some(connection)));
            }
        }
    }

    /// Keeps `url`'s request target, so later calls find it here; the one
    /// kept.
    pub fn remember(&self, url: &Arc<str>, target: Target) -> Arc<Target> {
        let mut modules = self.modules.lock().unwrap_or_else(PoisonError::into_inner);
        let module =
            modules.entry(Arc::clone(url)).or_insert_with(|| ModulePool { target: Arc::new(target), idle: Vec::new() });
        Arc::clone(&module.target)
    }

    /// Keeps `connection`, whose last answer was read whole, for another
    /// call, if it is ready for one and there is room.
    pub fn put(&self, mut connection: ModuleConnection) {
        if !connection.is_ready() {
            return;
        }
        let now = Instant::now();
        let mut modules = self.modules.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(module) = modules.get_mut(&connection.url) else { return };
        // Oldest first: drop the ones idle too long.
        let expired = module.idle.partition_point(|(_, since)| now.duration_since(*since) >= MODULE_IDLE_TIMEOUT);
        module.idle.drain(..expired);
        if module.idle.len() < self.max_idle {
            module.idle.push((connection, now));
        }
    }
}
