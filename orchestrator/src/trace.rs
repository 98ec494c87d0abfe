//! W3C trace context through the orchestrator: a request's `traceparent`
//! is accepted (or a trace is started when it has none, or an invalid one),
//! kept for the calls the request routes, and each call is sent to its
//! module with the same trace id and a span id of its own, which the
//! `routed call` log event records beside the module's `tool call` event,
//! and which is the id of the call's span when spans are exported over OTLP
//! (`module_sdk::otlp`).

use std::task::{Context, Poll};
use std::time::Duration;

use axum::http::{HeaderMap, Request};
use module_sdk::ErrorKind;
use module_sdk::otlp::{CallSide, CallSpan};
use module_sdk::service::{TRACEPARENT, TraceParent};
use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};
use tokio::task::futures::TaskLocalFuture;
use tower::{Layer, Service};

tokio::task_local! {
    /// The trace of the request being handled.
    static REQUEST_TRACE: RequestTrace;
}

/// A request's trace, and whether its caller sent it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestTrace {
    trace: TraceParent,
    from_caller: bool,
}

impl RequestTrace {
    /// The trace of the request being handled (a new one outside a
    /// request), to carry into a task the request hands its calls to: a
    /// task-local does not cross `tokio::spawn`, nor rmcp's handler tasks.
    pub(crate) fn current() -> Self {
        REQUEST_TRACE.try_with(|request| *request).unwrap_or_else(|_| Self { trace: start_trace(), from_caller: false })
    }

    /// The trace `traceparent` names when it is a valid one (the caller's,
    /// as an MCP message's `_meta` gives it), else this one.
    pub(crate) fn or_callers(self, traceparent: Option<&str>) -> Self {
        match traceparent.and_then(TraceParent::parse) {
            Some(trace) => Self { trace, from_caller: true },
            None => self,
        }
    }

    /// `future`, whose routed calls go on in this trace wherever it runs.
    pub(crate) fn scope<F: Future>(self, future: F) -> TaskLocalFuture<Self, F> {
        REQUEST_TRACE.scope(self, future)
    }
}

/// A layer keeping each request's trace (its valid `traceparent`, or a new
/// trace) for the calls it routes: the inner service's own future runs in
/// the trace's scope, so it costs neither a boxed future nor a route clone
/// per request (as `axum::middleware::from_fn` would).
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeepRequestTraceLayer;

impl<S> Layer<S> for KeepRequestTraceLayer {
    type Service = KeepRequestTrace<S>;

    fn layer(&self, inner: S) -> Self::Service {
        KeepRequestTrace(inner)
    }
}

/// The service of [`KeepRequestTraceLayer`].
#[derive(Debug, Clone)]
pub(crate) struct KeepRequestTrace<S>(S);

impl<S, B> Service<Request<B>> for KeepRequestTrace<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = TaskLocalFuture<RequestTrace, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let trace = request_trace(request.headers());
        REQUEST_TRACE.scope(trace, self.0.call(request))
    }
}

/// The trace of a request with `headers`: its caller's valid `traceparent`, or a new one.
fn request_trace(headers: &HeaderMap) -> RequestTrace {
    let caller = headers.get(&TRACEPARENT).and_then(|value| value.to_str().ok()).and_then(TraceParent::parse);
    RequestTrace { trace: caller.unwrap_or_else(start_trace), from_caller: caller.is_some() }
}

/// The trace context of one routed call, as sent to the module: the
/// request's trace (a new one outside a request) with a new span id.
pub fn call_trace() -> TraceParent {
    let trace = REQUEST_TRACE.try_with(|request| request.trace).unwrap_or_else(|_| start_trace());
    loop {
        // An all-zero span id (probability 2^-64) is invalid: draw again.
        if let Some(child) = trace.with_parent(random_id()) {
            return child;
        }
    }
}

/// Records a routed call as a span (when spans are exported): `trace` is
/// the [`call_trace`] sent to the module, its parent the caller's span.
pub fn record_routed_call(
    trace: TraceParent,
    duration: Duration,
    module: &str,
    tool: &str,
    error_kind: Option<ErrorKind>,
) {
    if !module_sdk::otlp::enabled() {
        return;
    }
    let parent = REQUEST_TRACE.try_with(|request| request.from_caller.then_some(request.trace)).ok().flatten();
    let side = CallSide::Routing;
    let cancelled = false;
    module_sdk::otlp::record(&CallSpan { context: trace, parent, side, module, tool, error_kind, cancelled, duration });
}

/// A new trace, sampled when spans are exported and the sampler takes it
/// (otherwise only the logs record it).
fn start_trace() -> TraceParent {
    loop {
        let trace_id: [u8; 16] = random_id();
        if let Some(trace) = TraceParent::new(trace_id, random_id(), module_sdk::otlp::new_trace_flags(&trace_id)) {
            return trace;
        }
    }
}

/// A random trace or span id. Ids must be unique and uniformly random (the
/// sampler reads its share off the trace id), not secret, so they come from
/// a small fast generator per thread (xoshiro), seeded from the system's
/// generator, rather than from `rand::random`'s ChaCha.
fn random_id<const N: usize>() -> [u8; N] {
    thread_local! {
        static IDS: std::cell::RefCell<SmallRng> = std::cell::RefCell::new(SmallRng::from_rng(&mut rand::rng()));
    }
    let mut id = [0; N];
    // Eight bytes per draw (`random()` of an array draws each byte alone).
    IDS.with_borrow_mut(|ids| ids.fill_bytes(&mut id));
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn calls_keep_the_request_trace_with_a_span_of_their_own() {
        let request = TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        let scope = RequestTrace { trace: request, from_caller: true };
        let (first, second) = REQUEST_TRACE.scope(scope, async { (call_trace(), call_trace()) }).await;
        assert_eq!(first.trace_id(), request.trace_id());
        assert_eq!(second.trace_id(), request.trace_id());
        assert_ne!(first.parent_id(), second.parent_id());
        assert!(first.to_string().ends_with("-01"), "the caller's flags are kept");
        assert_ne!(call_trace().trace_id(), request.trace_id(), "outside a request, a new trace");
    }

    #[tokio::test]
    async fn a_spawned_task_goes_on_in_the_trace_it_is_handed() {
        let request = TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        let scope = RequestTrace { trace: request, from_caller: true };
        let carried = REQUEST_TRACE.scope(scope, async { RequestTrace::current() }).await;
        let lost = tokio::spawn(REQUEST_TRACE.scope(scope, async { tokio::spawn(async { call_trace() }).await }));
        assert_ne!(lost.await.unwrap().unwrap().trace_id(), request.trace_id(), "a task-local does not cross a spawn");
        let kept = tokio::spawn(carried.scope(async { call_trace() })).await.unwrap();
        assert_eq!(kept.trace_id(), request.trace_id());
        assert!(!RequestTrace::current().from_caller, "outside a request, a new trace");
    }

    #[test]
    fn each_thread_draws_ids_of_its_own() {
        let draw = || (0..4).map(|_| random_id::<16>()).collect::<Vec<_>>();
        let (here, there) = (draw(), std::thread::spawn(draw).join().unwrap());
        let mut all: Vec<_> = here.iter().chain(&there).collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 8, "every id differs, across threads too (each generator has its own seed)");
    }
}
