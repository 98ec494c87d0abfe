//! `/mcp`: the module's MCP server on rmcp's streamable HTTP transport,
//! stateless (no session to keep: every request carries what it needs, and
//! a 2025-11-25 client's `initialize` is answered all the same), with JSON
//! answers where a call sends nothing before its result.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use crate::auth::Authorized;
use crate::config::ServeConfig;
use crate::json_depth::{nests_too_deep, too_deep_message};
use crate::mcp::McpSettings;
use crate::mcp::direct::DirectAnswers;
use crate::mcp::handler::ModuleMcp;
use crate::mcp::message_head::{has_long_id, long_id_message};
use crate::module::ModuleService;
use crate::server::{AppState, error_response, json_content_type_refusal, request_body};

/// The MCP endpoint of one module, shared by every request: the common
/// stateless call answered in place, everything else by rmcp's transport.
#[derive(Clone)]
pub(crate) struct McpEndpoint {
    direct: DirectAnswers,
    transport: StreamableHttpService<ModuleMcp, NeverSessionManager>,
    max_body_bytes: usize,
}

impl McpEndpoint {
    /// The answer to one `/mcp` request. A `POST` body is read as `/execute`
    /// reads one (`413` past `MAX_BODY_BYTES`, `400` when it cannot be read);
    /// one that nests deeper than the JSON depth limit gets a `400` naming it
    /// (rmcp, which cannot read it, would answer `415`).
    pub(crate) async fn handle(&self, request: Request) -> Response {
        if request.method() != Method::POST {
            return self.transport.handle(request).await.into_response();
        }
        let (head, body) = request.into_parts();
        let bytes = match request_body(body, self.max_body_bytes).await {
            Ok(bytes) => bytes,
            Err(answer) => return answer,
        };
        if nests_too_deep(&bytes) {
            return error_response(StatusCode::BAD_REQUEST, too_deep_message());
        }
        match self.direct.answer(&head, &bytes).await {
            Some(response) => response,
            // rmcp logs the id of every request it answers with an error; the direct path logs none.
            None if has_long_id(&bytes) => error_response(StatusCode::BAD_REQUEST, long_id_message()),
            None => self.transport.handle(Request::from_parts(head, Body::from(bytes))).await.into_response(),
        }
    }
}

/// The `/mcp` service of `service` under `config`'s MCP settings and body limit.
pub(crate) fn mcp_endpoint(service: Arc<ModuleService>, config: &ServeConfig) -> McpEndpoint {
    let max_body_bytes = config.limits.max_body_bytes;
    let transport = transport_config(&config.mcp, max_body_bytes);
    let server = ModuleMcp::new(service, config.mcp.page_size);
    let direct = DirectAnswers::new(server.clone(), max_body_bytes, !config.mcp.allowed_hosts.is_empty());
    let transport = StreamableHttpService::new(move || Ok(server.clone()), Arc::default(), transport);
    McpEndpoint { direct, transport, max_body_bytes }
}

/// The streamable HTTP settings of an MCP endpoint under `settings`, with
/// bodies up to `max_body_bytes`: stateless, JSON answers when nothing comes
/// before the result, `Origin` and `Host` checked against the lists (also
/// used by the orchestrator's `/mcp`).
pub fn transport_config(settings: &McpSettings, max_body_bytes: usize) -> StreamableHttpServerConfig {
    let transport = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_max_request_body_bytes(max_body_bytes)
        .with_allowed_hosts(settings.allowed_hosts.clone())
        .with_allowed_origins(settings.allowed_origins.clone())
        // An Origin that is not listed is refused with 403, also when none is.
        .enforce_origin_validation();
    if settings.allowed_hosts.is_empty() { transport.disable_allowed_hosts() } else { transport }
}

/// `/mcp`, any method: the bearer token checked as for `/execute`, a body
/// not sent as JSON refused with `415`, then the request handed to the MCP
/// transport (which answers `405` to methods other
/// than `POST`, `403` to a foreign `Origin`, `400` to an unknown
/// `MCP-Protocol-Version`).
#[utoipa::path(
    post, path = "/mcp",
    security((), ("bearer" = [])),
    request_body(
        content = Object, content_type = "application/json",
        description = "A JSON-RPC message of the Model Context Protocol (streamable HTTP transport, stateless)"
    ),
    responses(
        (status = 200, description = "The JSON-RPC answer: `application/json`, or `text/event-stream` when notifications come before it"),
        (status = 202, description = "A notification, accepted"),
        (status = 400, description = "An unknown `MCP-Protocol-Version`, headers that contradict the body, a body that cannot be read (JSON error), or a body nesting deeper than 127 levels"),
        (status = 401, body = crate::contract::ErrorBody),
        (status = 403, description = "An `Origin` not in `MCP_ALLOWED_ORIGINS`, or a `Host` not in `MCP_ALLOWED_HOSTS`"),
        (status = 406, description = "The client does not accept both `application/json` and `text/event-stream`"),
        (status = 413, body = crate::contract::ErrorBody, description = "The body is over the module's limit"),
        (status = 415, body = crate::contract::ErrorBody, description = "The body is not sent as `Content-Type: application/json`")
    )
)]
pub(crate) async fn serve_mcp(_: Authorized, State(state): State<AppState>, request: Request) -> Response {
    if let Some(refusal) = json_content_type_refusal(&request) {
        return refusal;
    }
    state.mcp.handle(request).await
}
