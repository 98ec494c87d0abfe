//! `/mcp`: the fleet's MCP server on rmcp's streamable HTTP transport.
//!
//! Stateless for 2026-07-28 clients (each request carries what it needs;
//! `subscriptions/listen` keeps a stream open for list changes). A
//! 2025-11-25 client's `initialize` opens a session (rmcp's, counted by
//! [`FleetSessions`], at most `MCP_MAX_SESSIONS`, `MCP_MAX_SESSIONS_PER_IDENTITY`
//! of one identity's), so it can keep
//! `GET /mcp` open and be told when the tool list changes; sessions are
//! kept in this process only, and end after `MCP_SESSION_IDLE_SECONDS`
//! (5 minutes) without a message or a call running.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, Request};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Router};
use futures::StreamExt;
use module_sdk::mcp::{has_long_id, long_id_message};
use module_sdk::service::{error_response, request_body};
use rmcp::transport::StreamableHttpService;
use serde::Deserialize;

use crate::app::Orchestrator;
use crate::auth::Authorized;
use crate::caller::{Caller, CallerFields};
use crate::http::AppState;
use crate::identity::Identity;
use crate::mcp::handler::{FleetMcp, McpCaller};
use crate::mcp::sessions::{FleetSessions, SessionSlot, may_open_session};
use crate::mcp::streams::{StreamBudget, StreamPermit};
use crate::trace::RequestTrace;

/// The header naming a 2025-11-25 session.
const SESSION_HEADER: &str = "mcp-session-id";

/// The fleet's MCP endpoint, its sessions and its open event streams.
pub struct McpEndpoint {
    service: StreamableHttpService<FleetMcp, FleetSessions>,
    sessions: Arc<FleetSessions>,
    streams: Arc<StreamBudget>,
    /// `MAX_BODY_BYTES`: what a message read before rmcp reads it may take.
    max_body_bytes: usize,
}

impl McpEndpoint {
    /// The endpoint of `orchestrator`, under its MCP settings and body limit.
    pub fn new(orchestrator: &Arc<Orchestrator>) -> Self {
        let config = &orchestrator.config;
        let settings = &config.mcp;
        let transport = module_sdk::mcp::transport_config(&settings.transport, config.limits.max_body_bytes)
            .with_legacy_session_mode(true);
        let streams = StreamBudget::new(settings.max_streams, settings.max_streams_per_identity);
        let server = FleetMcp::new(Arc::clone(orchestrator), Arc::clone(&streams));
        let sessions = Arc::new(FleetSessions::new(
            settings.max_sessions,
            settings.max_sessions_per_identity,
            settings.session_idle,
        ));
        let service = StreamableHttpService::new(move || Ok(server.clone()), Arc::clone(&sessions), transport);
        Self { service, sessions, streams, max_body_bytes: config.limits.max_body_bytes }
    }
}

/// The event stream `response` holding `permit` until its body ends or is
/// dropped (its client went away), ended when the server stops (SIGTERM),
/// which otherwise waits for its client to close it.
fn holding(response: Response, permit: StreamPermit) -> Response {
    let stopped = module_sdk::service::stopping().cancelled_owned();
    response.map(|body| {
        Body::from_stream(body.into_data_stream().take_until(stopped).map(move |chunk| {
            let _held = &permit;
            chunk
        }))
    })
}

/// The `/mcp` route, to merge into the API's router.
pub fn routes(orchestrator: &Arc<Orchestrator>) -> Router<AppState> {
    Router::new()
        .route("/mcp", post(serve_mcp).get(open_stream).delete(close_session))
        .layer(Extension(Arc::new(McpEndpoint::new(orchestrator))))
}

/// The query of `/mcp`: the caller, as `GET /tools` and `POST /execute` read it.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct McpQuery {
    /// The caller's level; absent is the identity's own for API keys and JWTs, `guest` otherwise.
    permission: Option<String>,
    /// Comma-separated allowed modules; absent allows all, empty allows none.
    modules: Option<String>,
    /// The user calls are made for (only service identities may name one).
    user_id: Option<String>,
}

/// `POST /mcp`: the identity proven as for `/execute`, the caller read from
/// the query, then the message handed to the MCP transport (`403` to a
/// foreign `Origin`, `400` to an unknown `MCP-Protocol-Version`).
#[utoipa::path(
    post, path = "/mcp", params(McpQuery),
    security((), ("bearer" = [])),
    request_body(
        content = Object, content_type = "application/json",
        description = "A JSON-RPC message of the Model Context Protocol (streamable HTTP transport)"
    ),
    responses(
        (status = 200, description = "The JSON-RPC answer: `application/json`, or `text/event-stream` when notifications come before it"),
        (status = 202, description = "A notification, accepted"),
        (status = 400, description = "An unknown `MCP-Protocol-Version`, headers that contradict the body, or a query that does not parse"),
        (status = 404, body = module_sdk::contract::ErrorBody, description = "No session of this identity's grant by that `Mcp-Session-Id`: it has ended, never was, or another identity (or the same user with other JWT claims) opened it"),
        (status = 401, body = module_sdk::contract::ErrorBody, description = "No valid identity (bearer token, API key or JWT)"),
        (status = 403, description = "An `Origin` not in `MCP_ALLOWED_ORIGINS`, a `Host` not in `MCP_ALLOWED_HOSTS`, or a caller the identity may not act as"),
        (status = 406, description = "The client does not accept both `application/json` and `text/event-stream`"),
        (status = 413, description = "The body is over MAX_BODY_BYTES"),
        (status = 415, body = module_sdk::contract::ErrorBody, description = "The body is not sent as `Content-Type: application/json`"),
        (status = 429, body = module_sdk::contract::ErrorBody, description = "MCP_MAX_SESSIONS sessions are open, or MCP_MAX_SESSIONS_PER_IDENTITY of this identity's")
    )
)]
pub(crate) async fn serve_mcp(
    identity: Authorized,
    endpoint: Extension<Arc<McpEndpoint>>,
    query: Result<Query<McpQuery>, QueryRejection>,
    request: Request,
) -> Response {
    handle(identity, endpoint, query, request).await
}

/// `GET /mcp`: the stream of a 2025-11-25 session (named by `Mcp-Session-Id`),
/// on which the server tells of tool list changes.
#[utoipa::path(
    get, path = "/mcp", params(McpQuery, ("mcp-session-id" = String, Header, description = "The session")),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "`text/event-stream`: the session's notifications"),
        (status = 400, description = "No `Mcp-Session-Id`, or a query that does not parse"),
        (status = 401, body = module_sdk::contract::ErrorBody, description = "No valid identity (bearer token, API key or JWT)"),
        (status = 403, description = "A foreign `Origin` or `Host`, or a caller the identity may not act as"),
        (status = 404, body = module_sdk::contract::ErrorBody, description = "No session of this identity's grant by that `Mcp-Session-Id`: it has ended, never was, or another identity (or the same user with other JWT claims) opened it"),
        (status = 406, description = "The client does not accept `text/event-stream`"),
        (status = 429, body = module_sdk::contract::ErrorBody, description = "MCP_MAX_STREAMS event streams are open, or MCP_MAX_STREAMS_PER_IDENTITY of this identity's")
    )
)]
pub(crate) async fn open_stream(
    identity: Authorized,
    endpoint: Extension<Arc<McpEndpoint>>,
    query: Result<Query<McpQuery>, QueryRejection>,
    request: Request,
) -> Response {
    handle(identity, endpoint, query, request).await
}

/// `DELETE /mcp`: ends the 2025-11-25 session named by `Mcp-Session-Id`.
#[utoipa::path(
    delete, path = "/mcp", params(McpQuery, ("mcp-session-id" = String, Header, description = "The session")),
    security((), ("bearer" = [])),
    responses(
        (status = 202, description = "The session has ended"),
        (status = 400, description = "No `Mcp-Session-Id`, or a query that does not parse"),
        (status = 401, body = module_sdk::contract::ErrorBody, description = "No valid identity (bearer token, API key or JWT)"),
        (status = 403, description = "A foreign `Origin` or `Host`, or a caller the identity may not act as"),
        (status = 404, body = module_sdk::contract::ErrorBody, description = "No session of this identity's grant by that `Mcp-Session-Id`: it has ended, never was, or another identity (or the same user with other JWT claims) opened it")
    )
)]
pub(crate) async fn close_session(
    identity: Authorized,
    endpoint: Extension<Arc<McpEndpoint>>,
    query: Result<Query<McpQuery>, QueryRejection>,
    request: Request,
) -> Response {
    handle(identity, endpoint, query, request).await
}

/// Any `/mcp` request: a session it names must be of the identity's grant, a `GET`
/// (an event stream) is counted, a message that may open a session
/// reserves one, and the caller (with the request's trace) put into its extensions, then the request
/// handed to the MCP transport.
async fn handle(
    Authorized(identity): Authorized,
    Extension(endpoint): Extension<Arc<McpEndpoint>>,
    query: Result<Query<McpQuery>, QueryRejection>,
    request: Request,
) -> Response {
    let Query(query) = match query {
        Ok(query) => query,
        Err(rejection) => return error_response(rejection.status(), rejection.body_text()),
    };
    let fields = CallerFields {
        user_id: query.user_id,
        user_permission: query.permission,
        modules: query.modules.as_deref().map(Caller::parse_modules),
    };
    let caller = match identity.caller(fields) {
        Ok(caller) => caller,
        Err(error) => return error_response(error.status(), error.to_string()),
    };
    // A session is its opener's grant's: to any other it does not exist.
    if let Some(session) = request.headers().get(SESSION_HEADER) {
        let id = session.to_str().unwrap_or_default();
        if !endpoint.sessions.owned_by(id, &identity.grant()) {
            return error_response(StatusCode::NOT_FOUND, "no such MCP session: it has ended, or never was");
        }
    }
    // A `GET` is an event stream, held open as long as its client keeps it.
    let stream = match *request.method() == Method::GET {
        true => match endpoint.streams.open(&identity) {
            Ok(permit) => Some(permit),
            Err(refused) => return error_response(StatusCode::TOO_MANY_REQUESTS, refused.to_string()),
        },
        false => None,
    };
    let (mut request, slot) = match session_slot(&endpoint, &identity, request).await {
        Ok(reserved) => reserved,
        Err(refused) => return refused,
    };
    request.extensions_mut().insert(McpCaller { identity, caller, trace: RequestTrace::current() });
    let response = endpoint.sessions.opening(slot, endpoint.service.handle(request)).await.into_response();
    match stream {
        Some(permit) => holding(response, permit),
        None => response,
    }
}

/// `request` and, when it is a message that may open a session (a `POST`
/// naming none, whose body may be an `initialize`), a slot in the session
/// budgets for it; past them its refusal, given before rmcp sees the
/// request (see [`sessions`](crate::mcp::sessions)). A `POST`'s body is read
/// within `MAX_BODY_BYTES`, as rmcp would, and refused with `400` when its
/// JSON-RPC `id` is over `MAX_ID_BYTES` (rmcp logs the id of every request
/// it answers with an error).
async fn session_slot(
    endpoint: &McpEndpoint,
    identity: &Identity,
    request: Request,
) -> Result<(Request, Option<SessionSlot>), Response> {
    if *request.method() != Method::POST {
        return Ok((request, None));
    }
    let (parts, body) = request.into_parts();
    let body = request_body(body, endpoint.max_body_bytes).await?;
    if has_long_id(&body) {
        return Err(error_response(StatusCode::BAD_REQUEST, long_id_message()));
    }
    let slot = match !parts.headers.contains_key(SESSION_HEADER) && may_open_session(&body) {
        true => Some(
            endpoint
                .sessions
                .reserve(identity)
                .map_err(|refused| error_response(StatusCode::TOO_MANY_REQUESTS, refused.to_string()))?,
        ),
        false => None,
    };
    Ok((Request::from_parts(parts, Body::from(body)), slot))
}
