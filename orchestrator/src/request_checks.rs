//! Answers for requests the API does not serve: a route that does not
//! exist (`404`) and a method a route does not take (`405`), each with a
//! JSON `{"error": ...}` body like every other error. (Bodies that are not
//! JSON get `415` from the SDK's `RequireJsonLayer`.)

use axum::http::StatusCode;
use axum::response::Response;
use module_sdk::service::error_response;

/// What the API serves, for the `404` and `405` messages.
const ROUTES: &str = "GET /health, GET /modules, GET /tools, POST /refresh-tools, POST /execute, POST /v1/tool-calls, \
                      the /approvals routes, GET /metrics, GET /openapi.json and the console at GET /";

/// A path the API does not serve: a JSON `404`.
pub async fn not_found() -> Response {
    error_response(StatusCode::NOT_FOUND, format!("no such route; the orchestrator serves {ROUTES}"))
}

/// A known path with the wrong method: a JSON `405`.
pub async fn method_not_allowed() -> Response {
    error_response(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("wrong method for this route; the orchestrator serves {ROUTES}"),
    )
}
