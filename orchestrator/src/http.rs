//! The orchestrator's HTTP API: `/health`, `/modules`, `/tools`,
//! `/refresh-tools`, `/execute`, `/v1/tool-calls`, `/approvals`, `/api-keys/{id}/revoke`
//! and the console at `/`.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{DefaultBodyLimit, Query, Request, State};
use axum::handler::Handler;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use module_sdk::contract::{ErrorBody, ToolResult};
use module_sdk::service::{error_response, json_bytes, request_body};
use serde::Deserialize;
use serde_json::json;
use tower::Service;

use crate::app::Orchestrator;
use crate::auth::Authorized;
use crate::caller::{Caller, CallerFields};
use crate::execute::ExecuteRequest;
use crate::identity::Identity;
use crate::json_body::{BodyLimit, JsonBody, refusal};
use crate::listing_cache::ListingVariant;
use crate::providers::{CallFormat, ToolFormat};
use crate::registry::{ModuleState, ModuleStatus};
use crate::request_checks;
use crate::same_origin::{AllowedHosts, HostCheck, SameOriginLayer};
use crate::tool_calls::{ToolCallsError, ToolCallsRequest, run_tool_calls};

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    /// The orchestrator behind the API.
    pub orchestrator: Arc<Orchestrator>,
}

impl BodyLimit for AppState {
    fn max_body_bytes(&self) -> usize {
        self.orchestrator.config.limits.max_body_bytes
    }
}

/// The API over `orchestrator`: its routes inside the checks every request
/// passes first (a `Host` it answers, no state-changing request from
/// another site, a body sent as JSON, the request's trace, and bodies
/// without a declared length stopped at `MAX_BODY_BYTES`). The checks wrap
/// the router once: `Router::layer` would wrap every route in a boxed
/// service cloned for each request.
pub fn router(
    orchestrator: Arc<Orchestrator>,
) -> impl Service<Request, Response = Response, Error = Infallible, Future: Send> + Clone + Send + Sync + 'static {
    let body_limit = orchestrator.config.limits.max_body_bytes;
    let allowed_hosts = allowed_hosts(&orchestrator);
    let host_check =
        if orchestrator.identities.required() { HostCheck::BrowsersChanges } else { HostCheck::EveryRequest };
    let execute = execute.with_state(AppState { orchestrator: Arc::clone(&orchestrator) });
    // `/execute` reads its body within the limit itself (`JsonBody`); the
    // other routes' extractors take it from the request's extensions.
    let others = tower::ServiceBuilder::new().layer(DefaultBodyLimit::max(body_limit)).service(routes(orchestrator));
    tower::ServiceBuilder::new()
        .layer(SameOriginLayer(allowed_hosts, host_check))
        .layer(module_sdk::service::RequireJsonLayer)
        .layer(crate::trace::KeepRequestTraceLayer)
        .service(ExecuteFirst { execute, others })
}

/// The hosts requests must name (see [`crate::same_origin`]):
/// `MCP_ALLOWED_HOSTS` when set; else, in development mode, the loopback
/// names and the `HOST` address; else any.
fn allowed_hosts(orchestrator: &Orchestrator) -> AllowedHosts {
    let listed = &orchestrator.config.mcp.transport.allowed_hosts;
    if !listed.is_empty() {
        AllowedHosts::new(listed.iter().map(String::as_str))
    } else if orchestrator.identities.required() {
        AllowedHosts::default()
    } else {
        AllowedHosts::development(orchestrator.config.host)
    }
}

/// `POST /execute`, the request an agent makes for every tool call, handed
/// straight to its handler; every other request goes to `others`, the
/// router. axum's router would match the path, record the matched path and
/// the (empty) URL parameters in the request's extensions, and clone the
/// route's boxed service for the request, all per call (callgrind: ~4 500
/// instructions of a routed call). `/execute` is also routed by the router,
/// which answers its other methods (`405`) and documents it.
#[derive(Clone)]
struct ExecuteFirst<E, R> {
    execute: E,
    others: R,
}

impl<E, R> Service<Request> for ExecuteFirst<E, R>
where
    E: Service<Request, Response = Response, Error = Infallible>,
    R: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = futures::future::Either<E::Future, R::Future>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Infallible>> {
        // Both are always ready (an axum handler and router); asked anyway.
        std::task::ready!(self.execute.poll_ready(cx))?;
        self.others.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        if request.method() == Method::POST && request.uri().path() == "/execute" {
            futures::future::Either::Left(self.execute.call(request))
        } else {
            futures::future::Either::Right(self.others.call(request))
        }
    }
}

/// The API's routes over `orchestrator`.
fn routes(orchestrator: Arc<Orchestrator>) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/modules", get(modules))
        .route("/tools", get(tools))
        .route("/refresh-tools", post(refresh_tools))
        .route("/execute", post(execute))
        .route("/v1/tool-calls", post(tool_calls))
        .route("/metrics", get(crate::metrics::serve_metrics))
        .route("/openapi.json", get(crate::openapi::serve_openapi))
        .merge(crate::approvals::routes::routes())
        .merge(crate::identity::routes::routes())
        .merge(crate::mcp::routes(&orchestrator))
        .merge(crate::console::routes())
        .fallback(request_checks::not_found)
        .method_not_allowed_fallback(request_checks::method_not_allowed)
        .with_state(AppState { orchestrator })
}

/// A query string that does not parse, as a `{"error": ...}` answer.
fn bad_query(rejection: QueryRejection) -> Response {
    error_response(rejection.status(), rejection.body_text())
}

/// Liveness, with a one-line summary; never needs a token.
#[utoipa::path(get, path = "/health", responses(
    (status = 200, body = Object, description = "`{\"status\": \"ok\", \"cache\", \"modules_up\", \"modules\"}`")
))]
pub(crate) async fn health(State(state): State<AppState>) -> Response {
    let statuses = state.orchestrator.registry.statuses();
    let up = statuses.iter().filter(|s| s.state == ModuleState::Up).count();
    Json(json!({
        "status": "ok",
        "cache": state.orchestrator.registry.cache_kind(),
        "modules_up": up,
        "modules": statuses.len(),
    }))
    .into_response()
}

/// The state, tool count and last success of every module the caller may
/// use (the others are not shown, as `/execute` answers them as unknown),
/// with their URL and last error for admins, owners and services.
#[utoipa::path(get, path = "/modules", security((), ("bearer" = [])), responses(
    (status = 200, body = Object, description = "`{\"cache\": \"memory\" or \"redis\", \"modules\": [ModuleStatus]}`"),
    (status = 401, body = ErrorBody, description = "No valid identity (bearer token, API key or JWT)")
))]
pub(crate) async fn modules(Authorized(identity): Authorized, State(state): State<AppState>) -> Response {
    Json(json!({
        "cache": state.orchestrator.registry.cache_kind(),
        "modules": statuses_for(&state.orchestrator, &identity),
    }))
    .into_response()
}

/// The statuses of the modules `identity` may use; their URLs and errors
/// only for admins, owners and services.
fn statuses_for(orchestrator: &Orchestrator, identity: &Identity) -> Vec<ModuleStatus> {
    let ceiling = identity.ceiling();
    let statuses = orchestrator.registry.statuses().into_iter().filter(|status| ceiling.allows_module(&status.name));
    if identity.is_operator() { statuses.collect() } else { statuses.map(ModuleStatus::without_internals).collect() }
}

/// The query of `GET /tools`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ToolsQuery {
    /// The caller's level; unknown or absent is `guest`.
    permission: Option<String>,
    /// Comma-separated allowed modules; absent allows all, empty allows none.
    modules: Option<String>,
    /// `raw` (default) or a provider format.
    #[param(pattern = "^(raw|openai|openai-responses|anthropic|gemini|gemini-json-schema|prompt)$")]
    format: Option<String>,
    /// Search: only the tools matching these words, best first (at most MAX_SEARCH_QUERY_CHARS characters).
    query: Option<String>,
    /// With `query`: how many tools at most (default 10, at most MAX_SEARCH_RESULTS).
    /// Read as text, so that one that is no whole number gets the budget's error.
    #[param(value_type = Option<usize>)]
    limit: Option<String>,
    /// `true`: the answer also lists the `tools__search` meta-tool, last.
    #[serde(default)]
    search_tool: bool,
}

/// The caller's tools in the asked format.
#[utoipa::path(get, path = "/tools", params(ToolsQuery), security((), ("bearer" = [])), responses(
    (status = 200, body = Value, description = "The tools: an array of ToolDefinition (raw), or the provider format's list"),
    (status = 400, body = ErrorBody, description = "Unknown format, or a search over its budgets (MAX_SEARCH_QUERY_CHARS, MAX_SEARCH_RESULTS)"),
    (status = 401, body = ErrorBody, description = "No valid identity (bearer token, API key or JWT)"),
    (status = 403, body = ErrorBody, description = "The identity may not ask for this permission or these modules")
))]
pub(crate) async fn tools(
    Authorized(identity): Authorized,
    State(state): State<AppState>,
    query: Result<Query<ToolsQuery>, QueryRejection>,
) -> Response {
    let Query(query) = match query {
        Ok(query) => query,
        Err(rejection) => return bad_query(rejection),
    };
    let format = match query.format.as_deref().unwrap_or("raw").parse::<ToolFormat>() {
        Ok(format) => format,
        Err(error) => {
            let message =
                format!("{error}; use raw, openai, openai-responses, anthropic, gemini, gemini-json-schema or prompt");
            return error_response(StatusCode::BAD_REQUEST, message);
        }
    };
    let fields = CallerFields {
        user_id: None,
        user_permission: query.permission,
        modules: query.modules.as_deref().map(Caller::parse_modules),
    };
    let caller = match identity.caller(fields) {
        Ok(caller) => caller,
        Err(error) => return error_response(error.status(), error.to_string()),
    };
    let body = match (query.query, query.limit) {
        (None, None) => {
            let variant = ListingVariant { with_search_tool: query.search_tool };
            state.orchestrator.render_listing(&caller, format, variant)
        }
        (text, limit) => {
            let orchestrator = &state.orchestrator;
            let limit = match limit.as_deref().map(|limit| orchestrator.tool_search.limit_from_query(limit)) {
                Some(Err(error)) => return error_response(StatusCode::BAD_REQUEST, error.to_string()),
                parsed => parsed.and_then(Result::ok),
            };
            let snapshot = orchestrator.registry.snapshot();
            match orchestrator.tool_search.search(&snapshot, &caller, text.as_deref().unwrap_or(""), limit) {
                Ok(found) => found.render(format, query.search_tool).to_string().into(),
                Err(error) => return error_response(StatusCode::BAD_REQUEST, error.to_string()),
            }
        }
    };
    json_bytes(body)
}

/// Discovers every module now (a refresh asked while one runs waits for
/// it instead) and answers with the states of the modules the caller may
/// use; for admins, owners and services only.
#[utoipa::path(post, path = "/refresh-tools", security((), ("bearer" = [])), responses(
    (status = 200, body = Object, description = "`{\"modules\": [ModuleStatus]}`"),
    (status = 401, body = ErrorBody, description = "No valid identity (bearer token, API key or JWT)"),
    (status = 403, body = ErrorBody, description = "Not an admin, owner or service identity")
))]
pub(crate) async fn refresh_tools(Authorized(identity): Authorized, State(state): State<AppState>) -> Response {
    if !identity.is_operator() {
        return error_response(
            StatusCode::FORBIDDEN,
            "only admin, owner and service identities may make the orchestrator discover its modules now; \
             it discovers them by itself every REFRESH_INTERVAL",
        );
    }
    state.orchestrator.registry.discover_all().await;
    Json(json!({ "modules": statuses_for(&state.orchestrator, &identity) })).into_response()
}

/// Runs one tool call; every well-formed request gets a `200` ToolResult.
#[utoipa::path(post, path = "/execute", request_body = ExecuteRequest, security((), ("bearer" = [])), responses(
    (status = 200, body = ToolResult, description = "The call's result, failures included"),
    (status = 400, body = ErrorBody, description = "The body is not JSON"),
    (status = 401, body = ErrorBody, description = "No valid identity (bearer token, API key or JWT)"),
    (status = 403, body = ErrorBody, description = "The identity may not act as the body asks"),
    (status = 413, body = ErrorBody, description = "The body is over MAX_BODY_BYTES"),
    (status = 415, body = ErrorBody, description = "The body is not sent as `Content-Type: application/json`"),
    (status = 422, body = ErrorBody, description = "The body is JSON but not an ExecuteRequest")
))]
pub(crate) async fn execute(
    Authorized(identity): Authorized,
    State(state): State<AppState>,
    request: Request,
) -> Response {
    // Read as `JsonBody` reads, but borrowing the body: the arguments are
    // checked and forwarded as the caller's own text (`ExecuteRequest::read`).
    let body = match request_body(request.into_body(), state.max_body_bytes()).await {
        Ok(body) => body,
        Err(too_large) => return too_large,
    };
    let request = match ExecuteRequest::read(&body) {
        Ok(request) => request,
        // Read again for axum's refusal, as `JsonBody` does.
        Err(_) => match Json::<ExecuteRequest<'static>>::from_bytes(&body) {
            Ok(Json(request)) => request,
            Err(rejection) => return refusal(rejection),
        },
    };
    // Boxed: the call's future is large, and every layer of the router
    // would otherwise move a copy of it (callgrind: ~10 000 instructions of memcpy a call).
    match Box::pin(state.orchestrator.execute_answer(&identity, request)).await {
        Ok(answer) => json_bytes(answer.into_body()),
        Err(error) => error_response(error.status(), error.to_string()),
    }
}

/// The query of `POST /v1/tool-calls`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ToolCallsQuery {
    /// The provider format of the message: openai, openai-responses, anthropic, gemini or text.
    #[param(required = true, pattern = "^(openai|openai-responses|anthropic|gemini|text)$")]
    format: Option<String>,
    /// `true`: answer `{"messages": ..., "pending_approvals": [...]}` instead of the bare messages.
    #[serde(default)]
    envelope: bool,
}

/// Runs every tool call of a model's message; answers in the provider's format.
#[utoipa::path(post, path = "/v1/tool-calls", params(ToolCallsQuery), request_body = ToolCallsRequest,
    security((), ("bearer" = [])), responses(
    (status = 200, body = Value, description = "The provider's result messages (with `envelope=true`: `{\"messages\", \"pending_approvals\"}`)"),
    (status = 400, body = ErrorBody, description = "Missing or unknown format, or a body that is not JSON"),
    (status = 401, body = ErrorBody, description = "No valid identity (bearer token, API key or JWT)"),
    (status = 403, body = ErrorBody, description = "The identity may not act as the body asks"),
    (status = 413, body = ErrorBody, description = "The body is over MAX_BODY_BYTES"),
    (status = 415, body = ErrorBody, description = "The body is not sent as `Content-Type: application/json`"),
    (status = 422, body = ErrorBody, description = "The message is not in the provider's shape, or has too many calls")
))]
pub(crate) async fn tool_calls(
    Authorized(identity): Authorized,
    State(state): State<AppState>,
    query: Result<Query<ToolCallsQuery>, QueryRejection>,
    body: Result<JsonBody<ToolCallsRequest>, Response>,
) -> Response {
    let Query(query) = match query {
        Ok(query) => query,
        Err(rejection) => return bad_query(rejection),
    };
    const FORMATS: &str = "use ?format=openai, openai-responses, anthropic, gemini or text";
    let format = match query.format.as_deref().map(str::parse::<CallFormat>) {
        Some(Ok(format)) => format,
        Some(Err(error)) => return error_response(StatusCode::BAD_REQUEST, format!("{error}; {FORMATS}")),
        None => return error_response(StatusCode::BAD_REQUEST, format!("missing the message format: {FORMATS}")),
    };
    let request = match body {
        Ok(JsonBody(request)) => request,
        Err(refusal) => return refusal,
    };
    match run_tool_calls(&state.orchestrator, &identity, format, request).await {
        Ok(answer) => crate::approvals::routes::tool_calls_answer(answer, query.envelope),
        Err(ToolCallsError::Access(error)) => error_response(error.status(), error.to_string()),
        Err(error) => error_response(StatusCode::UNPROCESSABLE_ENTITY, error.to_string()),
    }
}
