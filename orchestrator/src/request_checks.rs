//! Answers for requests the API does not serve: a route that does not
//! exist (`404`), a method a route does not take (`405`), and a `POST`
//! whose body is not JSON (`415`), each with a JSON `{"error": ...}` body
//! like every other error. Refusing non-JSON posts keeps a web page a user
//! opens from posting a form (which cannot say `application/json`) to an
//! orchestrator that listens without a token.

use axum::extract::Request;
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use module_sdk::service::error_response;

/// What the API serves, for the `404` and `405` messages.
const ROUTES: &str = "GET /health, GET /modules, GET /tools, POST /refresh-tools, POST /execute, POST /v1/tool-calls \
                      and the /approvals routes";

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

/// Lets a `POST` through only when it declares no `Content-Type` (an empty
/// body) or a JSON one (`application/json`, `application/*+json`); any
/// other gets `415` before its body is read.
pub async fn json_posts_only(request: Request, next: Next) -> Response {
    let content_type = request.headers().get(header::CONTENT_TYPE);
    if request.method() == Method::POST && content_type.is_some_and(|value| !is_json(value.to_str().unwrap_or(""))) {
        let sent = content_type.and_then(|v| v.to_str().ok()).unwrap_or("(not text)");
        return error_response(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("a POST body must be JSON with `Content-Type: application/json`; got `{sent}`"),
        );
    }
    next.run(request).await
}

/// Whether a `Content-Type` value names JSON.
fn is_json(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_media_types_and_only_those() {
        for json in ["application/json", "Application/JSON; charset=utf-8", "application/problem+json"] {
            assert!(is_json(json), "{json}");
        }
        for other in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""] {
            assert!(!is_json(other), "{other}");
        }
    }
}
