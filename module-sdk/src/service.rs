//! The plumbing of a module server, for servers that stand in front of
//! modules (the orchestrator) or embed one: the bearer check and its `401`,
//! JSON error bodies, the `415` for bodies that are not JSON, bodies read
//! within a byte budget, the shutdown signal, the bounded connection loop,
//! the health probe, logging set-up, call metrics, the argument validator
//! (for trees and for arguments read in place) and the OpenAPI document. A
//! tool author needs none of it: `Module::serve` uses it all.

pub use crate::arguments::InPlaceObject;
pub use crate::auth::{BearerRefusal, bearer_token, check_bearer, unauthorized};
pub use crate::body::{BodyError, read_body};
pub use crate::config::DEFAULT_MAX_BODY_BYTES;
pub use crate::healthcheck::{local_address, probe_health};
pub use crate::listener::{
    DEFAULT_BODY_READ_TIMEOUT, DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_HEADER_BYTES,
    HEADER_BYTES_RANGE, serve_router, serve_router_on,
};
pub use crate::logging::{LogOutput, init_logging};
pub use crate::metrics::{
    CANCELLED_OUTCOME, CallInFlight, CallMetrics, METRICS_CONTENT_TYPE, ToolMetrics, UNKNOWN_TOOL_LABEL,
};
pub use crate::openapi::openapi_document;
pub use crate::server::{
    RequireJson, RequireJsonLayer, body_refused, error_response, json_bytes, request_body, shutdown_signal, stopping,
};
pub use crate::serving_threads::{ServingThreads, serving_thread};
pub use crate::trace_context::{TRACEPARENT, TraceParent};
pub use crate::validate::{ArgumentValidator, MAX_PATTERN_COMPILED_BYTES, check_pattern, linear_time_options};
