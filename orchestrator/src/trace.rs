//! W3C trace context through the orchestrator: a request's `traceparent`
//! is accepted (or a trace is started when it has none, or an invalid one),
//! kept for the calls the request routes, and each call is sent to its
//! module with the same trace id and a span id of its own, which the
//! `routed call` log event records beside the module's `tool call` event,
//! and which is the id of the call's span when spans are exported over OTLP
//! (`module_sdk::otlp`).

use std::time::Duration;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use module_sdk::ErrorKind;
use module_sdk::otlp::{CallSide, CallSpan};
use module_sdk::service::{TRACEPARENT_HEADER, TraceParent};

tokio::task_local! {
    /// The trace of the request being handled.
    static REQUEST_TRACE: RequestTrace;
}

/// A request's trace, and whether its caller sent it.
#[derive(Debug, Clone, Copy)]
struct RequestTrace {
    trace: TraceParent,
    from_caller: bool,
}

/// Middleware keeping the request's trace (its valid `traceparent`, or a
/// new trace) for the calls it routes.
pub async fn keep_request_trace(request: Request, next: Next) -> Response {
    let caller =
        request.headers().get(TRACEPARENT_HEADER).and_then(|value| value.to_str().ok()).and_then(TraceParent::parse);
    let trace = RequestTrace { trace: caller.unwrap_or_else(start_trace), from_caller: caller.is_some() };
    REQUEST_TRACE.scope(trace, next.run(request)).await
}

/// The trace context of one routed call, as sent to the module: the
/// request's trace (a new one outside a request) with a new span id.
pub fn call_trace() -> TraceParent {
    let trace = REQUEST_TRACE.try_with(|request| request.trace).unwrap_or_else(|_| start_trace());
    loop {
        // An all-zero span id (probability 2^-64) is invalid: draw again.
        if let Some(child) = trace.with_parent(rand::random()) {
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
    module_sdk::otlp::record(&CallSpan { context: trace, parent, side, module, tool, error_kind, duration });
}

/// A new trace, sampled when spans are exported (otherwise only the logs
/// record it).
fn start_trace() -> TraceParent {
    loop {
        if let Some(trace) = TraceParent::new(rand::random(), rand::random(), module_sdk::otlp::new_trace_flags()) {
            return trace;
        }
    }
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
}
