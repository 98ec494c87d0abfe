//! Serving a router over TCP with every connection bounded: how many there
//! are, how long a request head and a request body may take to arrive, and
//! how large a body may say it is. Modules and the orchestrator serve through
//! [`serve_router`], so both bound slow and hostile clients the same way.
//!
//! - **Connections**: at most [`ServerLimits::max_connections`] at once. At
//!   the cap the server stops accepting (backpressure): new connections wait
//!   in the kernel's accept queue and are served when a slot frees, which the
//!   timeouts below guarantee happens.
//! - **Request heads**: a header read timeout, kept by one sweep per server
//!   rather than a timer per request (see [`crate::connection_watch`]). The
//!   clock starts when the server waits for a request (a new connection, or
//!   the end of the previous answer on a kept-alive one) and stops when the
//!   head is complete, so it bounds idle keep-alive connections too. Past it
//!   (by up to an eighth of it) the connection is closed without an answer
//!   (as hyper's own timeout does; nothing of the request was parsed).
//! - **Request head size**: a request line and headers larger than
//!   [`ServerLimits::max_header_bytes`] (or more than hyper's fixed 100
//!   header fields) get hyper's `431 Request Header Fields Too Large`,
//!   without a body, and the connection is closed; no more of the head than
//!   that is held.
//! - **Answers nobody reads**: the same time bounds how long writing an
//!   answer may make no progress (a client that sends requests and never
//!   reads, e.g. thousands pipelined); past it the connection is closed, so
//!   such a client cannot hold a slot.
//! - **Request bodies**: a deadline for the whole body, counted from the end of
//!   the head. Past it the caller gets `408` with `Connection: close`.
//! - **Declared length**: a `Content-Length` over
//!   [`ServerLimits::max_body_bytes`] gets `413` without reaching the router.
//!   Up to four times the limit, the body is read and dropped first (under
//!   the body deadline), so the answer is not lost to a connection reset;
//!   past that, or when the client waits for `100 Continue` before sending
//!   it, it is refused at once, before any of the body is read (and so
//!   without `100 Continue`), and the connection closed.
//! - **Bodies of any framing**: a body without a declared length (chunked)
//!   fails as soon as more than `max_body_bytes` have arrived, whatever the
//!   router does with it, and the caller gets `413` naming `MAX_BODY_BYTES`
//!   with `Connection: close`.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, Request, StatusCode, header};
use axum::response::Response;
use http_body_util::BodyExt;
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tower::{Service, ServiceExt};

use crate::config::DEFAULT_MAX_BODY_BYTES;
use crate::connection_watch::{Activity, ConnectionWatch, Watcher};
use crate::deadline::deadline_after;
use crate::server::error_response;
use crate::serving_threads::ServingThreads;

/// The default [`ServerLimits::header_read_timeout`], 10 s.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The default [`ServerLimits::body_read_timeout`], 30 s.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// The default [`ServerLimits::max_connections`], 1024.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// The default [`ServerLimits::max_header_bytes`], 64 KiB: a browser's head
/// with its cookies and a large bearer token is a few KiB.
pub const DEFAULT_MAX_HEADER_BYTES: usize = 64 * 1024;
/// The values `MAX_HEADER_BYTES` may take: from 4 KiB (a head with a JWT
/// bearer token needs a few) to 256 KiB (each connection may hold that
/// much, below hyper's own read buffer limit of about 400 KiB).
pub const HEADER_BYTES_RANGE: std::ops::RangeInclusive<usize> = 4 * 1024..=256 * 1024;

/// The budgets of an HTTP server's connections and requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// `MAX_BODY_BYTES`: the largest request body; larger ones get `413`.
    pub max_body_bytes: usize,
    /// `HEADER_READ_TIMEOUT_SECONDS`: how long a connection may wait for a
    /// complete request head (idle keep-alive time included), and how long
    /// writing an answer may make no progress; past it the connection is
    /// closed.
    pub header_read_timeout: Duration,
    /// `BODY_READ_TIMEOUT_SECONDS`: how long a request body may take to
    /// arrive after its head; past it the caller gets `408`.
    pub body_read_timeout: Duration,
    /// `MAX_CONNECTIONS`: connections served at once; more wait to be accepted.
    pub max_connections: usize,
    /// `MAX_HEADER_BYTES`: the largest request head (request line and
    /// headers); a larger one gets `431` and its connection is closed.
    pub max_header_bytes: usize,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_header_bytes: DEFAULT_MAX_HEADER_BYTES,
        }
    }
}

/// Serves `router` on `listener` within `limits` until `shutdown` resolves;
/// then stops accepting and returns once the requests in flight are answered
/// (idle connections are closed at once). Connections are served by tasks
/// of the runtime this runs on.
///
/// `router` is an axum `Router` or any service of requests, such as a
/// router inside layers that every request passes (one stack around the
/// router costs less than `Router::layer`, which boxes and clones every
/// route per request). It should read bodies without a declared length up
/// to the same limit (a module's routes do; other routers can carry
/// `DefaultBodyLimit::max(limits.max_body_bytes)`).
pub async fn serve_router<S>(listener: TcpListener, router: S, limits: ServerLimits, shutdown: impl Future<Output = ()>)
where
    S: Service<Request<Body>, Response = Response, Error = Infallible> + Clone + Send + Sync + 'static,
    S::Future: Send,
{
    serve_connections(listener, router, limits, shutdown, None).await;
}

/// [`serve_router`], with each connection served on one of `threads`
/// (the one serving the fewest) for its whole life, while this task only
/// accepts: what a proxy of many small requests wants (see
/// [`ServingThreads`]).
pub async fn serve_router_on<S>(
    listener: TcpListener,
    router: S,
    limits: ServerLimits,
    shutdown: impl Future<Output = ()>,
    threads: &ServingThreads,
) where
    S: Service<Request<Body>, Response = Response, Error = Infallible> + Clone + Send + Sync + 'static,
    S::Future: Send,
{
    serve_connections(listener, router, limits, shutdown, Some(threads)).await;
}

/// The accept loop of [`serve_router`] and [`serve_router_on`].
async fn serve_connections<S>(
    listener: TcpListener,
    router: S,
    limits: ServerLimits,
    shutdown: impl Future<Output = ()>,
    threads: Option<&ServingThreads>,
) where
    S: Service<Request<Body>, Response = Response, Error = Infallible> + Clone + Send + Sync + 'static,
    S::Future: Send,
{
    // No timer and no header read timeout of hyper's: the watch's sweep keeps it.
    let mut http = http1::Builder::new();
    http.header_read_timeout(None).max_header_size(limits.max_header_bytes);
    let slots = Arc::new(Semaphore::new(limits.max_connections.clamp(1, Semaphore::MAX_PERMITS)));
    let watch = ConnectionWatch::default();
    tokio::spawn(watch.sweep_idle(limits.header_read_timeout));
    let guard = RequestGuard { router, limits };
    let mut shutdown = pin!(shutdown);
    loop {
        let slot = tokio::select! {
            slot = Arc::clone(&slots).acquire_owned() => slot.expect("the connection semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => stream,
                Err(error) => {
                    wait_after_accept_error(&error).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Without TCP_NODELAY small answers can stall ~40 ms (Nagle + delayed ACK).
        let _ = stream.set_nodelay(true);
        let (http, guard, watcher) = (http.clone(), guard.clone(), watch.watcher());
        let serve = move |stream| serve_connection(stream, http, guard, watcher, limits.header_read_timeout, slot);
        match threads {
            Some(threads) => threads.serve(stream, serve),
            None => drop(tokio::spawn(serve(stream))),
        }
    }
    drop(listener);
    watch.stop().await;
}

/// Serves the requests of one connection until it closes, holding `slot`
/// of `MAX_CONNECTIONS` until then.
async fn serve_connection<S>(
    stream: TcpStream,
    http: http1::Builder,
    guard: RequestGuard<S>,
    watcher: Watcher,
    stall_timeout: Duration,
    slot: OwnedSemaphorePermit,
) where
    S: Service<Request<Body>, Response = Response, Error = Infallible> + Clone + Send + Sync + 'static,
    S::Future: Send,
{
    let activity = watcher.activity();
    let stream = StallBoundedIo::new(stream, stall_timeout, activity.clone());
    let service = hyper::service::service_fn(move |request| {
        let busy = activity.arrived();
        let answer = guard.clone().handle(request);
        async move { answer.await.map(|answer| busy.until_sent(answer)) }
    });
    if let Err(error) = watcher.watch(http.serve_connection(TokioIo::new(stream), service)).await {
        // Stalled writes, resets and malformed requests: the client's doing, not ours.
        tracing::debug!(error = %error, "connection closed with an error");
    }
    drop(slot);
}

/// After a failed `accept`: go on at once if only that connection failed;
/// otherwise (out of descriptors, memory) pause so the loop does not spin.
async fn wait_after_accept_error(error: &std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(error.kind(), ConnectionAborted | ConnectionRefused | ConnectionReset) {
        return;
    }
    tracing::warn!(error = %error, "cannot accept a connection; retrying in 100 ms");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// What each request passes before the router: the declared-length check
/// and the body deadline.
#[derive(Clone)]
struct RequestGuard<S> {
    router: S,
    limits: ServerLimits,
}

impl<S> RequestGuard<S>
where
    S: Service<Request<Body>, Response = Response, Error = Infallible>,
{
    async fn handle(self, request: Request<Incoming>) -> Result<Response, Infallible> {
        let body = request.body();
        if body.is_end_stream() {
            return self.router.oneshot(request.map(Body::new)).await;
        }
        let declared = body.size_hint().exact();
        if let Some(length) = declared.filter(|length| *length > self.limits.max_body_bytes as u64) {
            let message = format!(
                "the request body is larger than this server accepts: Content-Length {length} is over MAX_BODY_BYTES ({})",
                self.limits.max_body_bytes
            );
            let answer = error_response(StatusCode::PAYLOAD_TOO_LARGE, message);
            // Closing a socket with unread data makes the kernel reset the
            // connection, and a client still sending may lose the 413 with it.
            // A body at most DRAIN_FACTOR times the limit is read and dropped
            // (under the body deadline) so the answer arrives; a larger one is
            // refused at once and the connection closed.
            // A client that waits for `100 Continue` has sent none of it.
            let drainable = length <= (self.limits.max_body_bytes as u64).saturating_mul(DRAIN_FACTOR)
                && !expects_continue(request.headers());
            if drainable && drain(request.into_body(), self.limits.body_read_timeout).await {
                return Ok(answer);
            }
            return Ok(closing(answer));
        }
        let outcome = Arc::new(BodyOutcome::default());
        let request = request.map(|inner| {
            Body::new(BoundedBody {
                inner,
                deadline: deadline_after(Instant::now(), self.limits.body_read_timeout),
                timer: None,
                allowed: self.limits.max_body_bytes,
                outcome: Arc::clone(&outcome),
            })
        });
        let response = self.router.oneshot(request).await?;
        if outcome.over_limit.load(Ordering::Relaxed) {
            let message = format!(
                "the request body is larger than this server accepts: more than MAX_BODY_BYTES ({}) arrived",
                self.limits.max_body_bytes
            );
            return Ok(closing(error_response(StatusCode::PAYLOAD_TOO_LARGE, message)));
        }
        if outcome.timed_out.load(Ordering::Relaxed) {
            let message = format!(
                "the request body did not arrive within BODY_READ_TIMEOUT_SECONDS ({} s)",
                self.limits.body_read_timeout.as_secs_f64()
            );
            return Ok(closing(error_response(StatusCode::REQUEST_TIMEOUT, message)));
        }
        Ok(response)
    }
}

/// How many times `MAX_BODY_BYTES` a declared-too-large body may be and
/// still be read (and dropped) before its `413`, so the answer is not lost
/// to a connection reset.
const DRAIN_FACTOR: u64 = 4;

/// Reads `body` to its end within `deadline`, keeping none of it; whether
/// it ended in time without an error.
async fn drain(mut body: Incoming, deadline: Duration) -> bool {
    let read_all = async {
        while let Some(frame) = body.frame().await {
            if frame.is_err() {
                return false;
            }
        }
        true
    };
    tokio::time::timeout(deadline, read_all).await.unwrap_or(false)
}

/// Whether the client asked for `100 Continue` before sending its body.
fn expects_continue(headers: &axum::http::HeaderMap) -> bool {
    headers.get(header::EXPECT).is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"100-continue"))
}

/// `response` with `Connection: close`: the rest of the request is not read.
fn closing(mut response: Response) -> Response {
    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// The body read timed out (`BODY_READ_TIMEOUT_SECONDS`).
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive in time")]
struct BodyReadTimeout;

/// More of the body arrived than `MAX_BODY_BYTES`.
#[derive(Debug, thiserror::Error)]
#[error("the request body is larger than MAX_BODY_BYTES")]
struct BodyTooLarge;

/// How a request body ended, read once the router has answered.
#[derive(Debug, Default)]
struct BodyOutcome {
    timed_out: AtomicBool,
    over_limit: AtomicBool,
}

pin_project_lite::pin_project! {
    /// A request body that fails once its deadline passes or once more than
    /// `allowed` bytes have arrived, and says which in `outcome` so that the
    /// answer becomes a `408` or a `413`.
    struct BoundedBody {
        inner: Incoming,
        deadline: Instant,
        // Armed only when the body has to be waited for: most bodies have
        // arrived with their head, and need no timer.
        timer: Option<Pin<Box<Sleep>>>,
        allowed: usize,
        outcome: Arc<BodyOutcome>,
    }
}

impl HttpBody for BoundedBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.project();
        if let Poll::Ready(frame) = Pin::new(this.inner).poll_frame(cx) {
            if let Some(Ok(data)) = frame.as_ref().map(|f| f.as_ref().map(Frame::data_ref)) {
                let size = data.map_or(0, Bytes::len);
                if size > *this.allowed {
                    this.outcome.over_limit.store(true, Ordering::Relaxed);
                    return Poll::Ready(Some(Err(BodyTooLarge.into())));
                }
                *this.allowed -= size;
            }
            return Poll::Ready(frame.map(|result| result.map_err(Into::into)));
        }
        let deadline = *this.deadline;
        let timer = this.timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if timer.as_mut().poll(cx).is_ready() {
            this.outcome.timed_out.store(true, Ordering::Relaxed);
            return Poll::Ready(Some(Err(BodyReadTimeout.into())));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

pin_project_lite::pin_project! {
    /// A connection whose writes fail once they have made no progress for
    /// `stall_timeout`: an answer to a client that stopped reading cannot
    /// hold the connection, and its slot, for ever. Its writes' progress
    /// goes to `activity`: an answer still going out is not idle time.
    struct StallBoundedIo<T> {
        #[pin]
        inner: T,
        stall_timeout: Duration,
        activity: Activity,
        // Armed when a write first waits, disarmed by any progress; boxed
        // once per connection, on its first wait.
        stall: Option<Pin<Box<Sleep>>>,
        stalling: bool,
    }
}

impl<T> StallBoundedIo<T> {
    fn new(inner: T, stall_timeout: Duration, activity: Activity) -> Self {
        Self { inner, stall_timeout, activity, stall: None, stalling: false }
    }
}

/// What a write that waited returns: still `Pending`, or the stall's error
/// once `timeout` has passed since it began.
fn stalled<R>(
    stall: &mut Option<Pin<Box<Sleep>>>,
    stalling: &mut bool,
    timeout: Duration,
    cx: &mut Context<'_>,
) -> Poll<io::Result<R>> {
    let deadline = deadline_after(Instant::now(), timeout);
    let sleep = stall.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
    if !*stalling {
        sleep.as_mut().reset(deadline);
        *stalling = true;
    }
    match sleep.as_mut().poll(cx) {
        Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the client read nothing of the answer within HEADER_READ_TIMEOUT_SECONDS",
        ))),
        Poll::Pending => Poll::Pending,
    }
}

impl<T: AsyncRead> AsyncRead for StallBoundedIo<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        self.project().inner.poll_read(cx, buf)
    }
}

impl<T: AsyncWrite> AsyncWrite for StallBoundedIo<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.project();
        match this.inner.poll_write(cx, buf) {
            Poll::Pending => stalled(this.stall, this.stalling, *this.stall_timeout, cx),
            ready => {
                *this.stalling = false;
                this.activity.wrote();
                ready
            }
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.project();
        match this.inner.poll_write_vectored(cx, bufs) {
            Poll::Pending => stalled(this.stall, this.stalling, *this.stall_timeout, cx),
            ready => {
                *this.stalling = false;
                this.activity.wrote();
                ready
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.project();
        match this.inner.poll_flush(cx) {
            Poll::Pending => stalled(this.stall, this.stalling, *this.stall_timeout, cx),
            ready => {
                *this.stalling = false;
                ready
            }
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().inner.poll_shutdown(cx)
    }
}
