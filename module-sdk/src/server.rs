//! The HTTP face of a module: `/health`, `/manifest`, `/execute`,
//! `/openapi.json`, with the contract's status codes and error bodies.

use std::future::{Ready, ready};
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::task::Poll;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use futures::future::Either;
use serde::Deserialize;
use serde_json::error::Category;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower::{Layer, Service};

use crate::arguments::InPlaceValue;
use crate::auth::Authorized;
use crate::body::{BodyError, read_body};
use crate::config::ServeConfig;
use crate::contract::{ErrorBody, ModuleManifest, ToolCall, ToolResult};
use crate::error::{ModuleError, ServeError};
use crate::json_depth::{is_too_deep, too_deep_message};
use crate::listener::serve_router;
use crate::logging::{LogOutput, init_logging};
use crate::mcp::http::{McpEndpoint, mcp_endpoint, serve_mcp};
use crate::mcp::serve_stdio;
use crate::metrics::METRICS_CONTENT_TYPE;
use crate::module::{Arguments, Call, Module, ModuleService};
use crate::openapi::openapi_document;
use crate::trace_context::{TRACEPARENT, TraceParent};

/// What every route handler shares, behind one `Arc`: axum clones the state
/// for every request, and a clone is then one reference count.
pub(crate) type AppState = Arc<ServerState>;

/// The shared state of a module's routes.
pub(crate) struct ServerState {
    pub(crate) service: Arc<ModuleService>,
    pub(crate) auth_token: Option<Arc<str>>,
    /// The MCP server at `/mcp`.
    pub(crate) mcp: McpEndpoint,
    /// `MAX_BODY_BYTES`: the most [`JsonBody`] reads.
    max_body_bytes: usize,
    /// `/manifest` and `/openapi.json`, serialized once.
    manifest_json: Bytes,
    openapi_json: Bytes,
}

impl Module {
    /// The module's axum router, for embedding it or serving it yourself.
    pub fn router(self, config: &ServeConfig) -> Result<Router, ModuleError> {
        Ok(router(Arc::new(self.build_limited(config.max_blocking_calls)?), config))
    }

    /// Serves the module with settings from the environment (`HOST`, `PORT`,
    /// `SERVICE_AUTH_TOKEN`, `LOG_FORMAT` and the [`ServerLimits`](crate::ServerLimits):
    /// `MAX_BODY_BYTES`, `HEADER_READ_TIMEOUT_SECONDS`, `BODY_READ_TIMEOUT_SECONDS`,
    /// `MAX_CONNECTIONS`; and `MAX_BLOCKING_CALLS`) until SIGINT or SIGTERM; calls in flight then finish
    /// before it returns. With `--stdio` (in the flags given to
    /// [`Module::sdk_flags`], else on the command line), it serves MCP on
    /// standard input and output instead.
    pub async fn serve(self) -> Result<(), ServeError> {
        if self.serve_flags().stdio {
            return serve_stdio(self).await;
        }
        let config = ServeConfig::from_env()?;
        init_logging(config.log_format, LogOutput::Stdout);
        let service = Arc::new(self.build_limited(config.max_blocking_calls)?);
        let address = SocketAddr::new(config.host, config.port);
        let io_error = |source| ServeError::Io { address: address.to_string(), source };
        let listener = TcpListener::bind(address).await.map_err(io_error)?;
        let bound = listener.local_addr().map_err(io_error)?;
        let shutdown = shutdown_signal();
        tracing::info!(
            module = %service.manifest().module_name,
            tools = service.manifest().tools.len(),
            address = %bound,
            auth = config.auth_token.is_some(),
            "module listening"
        );
        serve_router(listener, router(service, &config), config.limits, shutdown).await;
        crate::otlp::shutdown().await;
        tracing::info!("module stopped");
        Ok(())
    }
}

/// The routes of a built module.
pub(crate) fn router(service: Arc<ModuleService>, config: &ServeConfig) -> Router {
    let manifest_json = Bytes::from(serde_json::to_vec(service.manifest()).expect("a manifest always serializes"));
    let openapi_json = Bytes::from(
        serde_json::to_vec(&openapi_document(service.manifest(), config.auth_token.is_none()))
            .expect("an OpenAPI document always serializes"),
    );
    let mcp = mcp_endpoint(service.clone(), config);
    let auth_token = config.auth_token.as_deref().map(Arc::from);
    let max_body_bytes = config.limits.max_body_bytes;
    let state = Arc::new(ServerState { service, auth_token, mcp, max_body_bytes, manifest_json, openapi_json });
    Router::new()
        .route("/health", get(health))
        .route("/manifest", get(manifest))
        .route("/execute", post(execute))
        .route("/openapi.json", get(openapi))
        .route("/metrics", get(metrics))
        .route("/mcp", any(serve_mcp))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        // No `layer`: the routes that take a body check it themselves
        // ([`JsonBody`], [`json_content_type_refusal`]). A layer wraps every
        // route in a boxed service that is cloned for each request.
        .with_state(state)
}

/// The `415` for `request` when it carries a body that is not sent as JSON;
/// `None` when it may go on.
pub(crate) fn json_content_type_refusal<B: axum::body::HttpBody>(request: &axum::http::Request<B>) -> Option<Response> {
    let carries_body = matches!(*request.method(), Method::POST | Method::PUT | Method::PATCH)
        && request.body().size_hint().exact() != Some(0);
    let content_type = request.headers().get(header::CONTENT_TYPE);
    if !carries_body || content_type.is_some_and(|value| is_json_media_type(value.as_bytes())) {
        return None;
    }
    let content_type = content_type.map(|value| value.to_str().unwrap_or("(not text)"));
    let message = format!(
        "the request body must be sent as `Content-Type: application/json`, not {}",
        content_type.map_or_else(|| "without a Content-Type".to_owned(), |t| format!("`{t}`"))
    );
    Some(error_response(StatusCode::UNSUPPORTED_MEDIA_TYPE, message))
}

/// Refuses a `POST`, `PUT` or `PATCH` that carries a body unless its
/// `Content-Type` is `application/json` (parameters such as `charset`
/// allowed), with `415` and a JSON error. A web page can make a browser
/// post a form or `text/plain` to any address without asking, never JSON:
/// so a server reachable from a browser cannot be driven from another site.
/// Add it with `router.layer(RequireJsonLayer)`; the request goes on to the
/// inner service's own future, or the `415` is ready at once, so the check
/// neither boxes a future nor clones the route per request (as
/// `axum::middleware::from_fn` would).
#[derive(Debug, Clone, Copy)]
pub struct RequireJsonLayer;

impl<S> Layer<S> for RequireJsonLayer {
    type Service = RequireJson<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequireJson(inner)
    }
}

/// The service of [`RequireJsonLayer`].
#[derive(Debug, Clone)]
pub struct RequireJson<S>(S);

impl<S, B> Service<axum::http::Request<B>> for RequireJson<S>
where
    S: Service<axum::http::Request<B>, Response = Response>,
    B: axum::body::HttpBody,
{
    type Response = Response;
    type Error = S::Error;
    type Future = Either<S::Future, Ready<Result<Response, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: axum::http::Request<B>) -> Self::Future {
        match json_content_type_refusal(&request) {
            Some(refusal) => Either::Right(ready(Ok(refusal))),
            None => Either::Left(self.0.call(request)),
        }
    }
}

/// Whether a `Content-Type` value is `application/json`, in any case, with
/// or without parameters.
fn is_json_media_type(value: &[u8]) -> bool {
    // Bytes, ASCII trimming and no iterator: this runs on every call, and
    // the value needs no check as text first (other bytes do not match).
    let essence = value.iter().position(|&byte| byte == b';').map_or(value, |end| &value[..end]).trim_ascii();
    essence.eq_ignore_ascii_case(b"application/json")
}

/// A JSON `{"error": message}` answer with `status`, the body of every
/// non-200 answer of the contract.
pub fn error_response(status: StatusCode, message: impl Into<String>) -> Response {
    (status, axum::Json(ErrorBody { error: message.into() })).into_response()
}

/// The answer to a request body that axum refused to read (`status` and its
/// `detail`); one over the limit names the setting, `MAX_BODY_BYTES`.
pub fn body_refused(status: StatusCode, detail: String) -> Response {
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        return error_response(status, "the request body is larger than this server accepts (MAX_BODY_BYTES)");
    }
    error_response(status, detail)
}

/// A request body read whole as JSON: one over `MAX_BODY_BYTES` is refused
/// with `413`, one that cannot be read with `400`. In development mode (no
/// `SERVICE_AUTH_TOKEN`) a `POST` with another `Content-Type` is refused
/// with `415` (see [`RequireJsonLayer`] for why); with a token it is read
/// all the same, as the contract wants a `200` for every well-formed call
/// (`curl -d` sends a form's type), and a page on another site cannot send
/// the `Authorization` header without the preflight a browser asks first.
/// The module's routes that take a body use it instead of a router layer.
pub(crate) struct JsonBody(pub(crate) Bytes);

impl FromRequest<AppState> for JsonBody {
    type Rejection = Response;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        if state.auth_token.is_none()
            && let Some(refusal) = json_content_type_refusal(&request)
        {
            return Err(refusal);
        }
        request_body(request.into_body(), state.max_body_bytes).await.map(Self)
    }
}

/// A request's `body` read whole within `max_body_bytes` (`MAX_BODY_BYTES`),
/// or the answer to give instead: `413` past the limit, `400` when it cannot
/// be read. A body that comes in one piece, as a call usually does, is kept
/// as it came: nothing to gather pieces in (axum's `Bytes` extractor
/// allocates a queue, and reads its limit from the request's extensions).
pub async fn request_body(body: axum::body::Body, max_body_bytes: usize) -> Result<Bytes, Response> {
    match read_body(body, max_body_bytes, "MAX_BODY_BYTES").await {
        Ok(body) => Ok(body),
        Err(BodyError::TooLarge { .. }) => Err(body_refused(StatusCode::PAYLOAD_TOO_LARGE, String::new())),
        Err(BodyError::Transport(error)) => Err(error_response(
            StatusCode::BAD_REQUEST,
            format!("the request body could not be read: {}", crate::error::error_chain(&error)),
        )),
    }
}

/// `body`, already JSON, as a `200`: built directly (axum's `Bytes`
/// answer would set `application/octet-stream` first, for the tuple's
/// header to replace), the header value static.
pub fn json_bytes(body: Bytes) -> Response {
    let mut response = Response::new(axum::body::Body::from(body));
    response.headers_mut().insert(header::CONTENT_TYPE, const { HeaderValue::from_static("application/json") });
    response
}

/// Liveness: the module answers.
#[utoipa::path(get, path = "/health", responses((status = 200, body = crate::contract::Health)))]
pub(crate) async fn health() -> Response {
    json_bytes(Bytes::from_static(br#"{"status":"ok"}"#))
}

/// The module's manifest: its tools and their schemas.
#[utoipa::path(
    get, path = "/manifest",
    security((), ("bearer" = [])),
    responses((status = 200, body = ModuleManifest), (status = 401, body = ErrorBody))
)]
pub(crate) async fn manifest(_: Authorized, State(state): State<AppState>) -> Response {
    json_bytes(state.manifest_json.clone())
}

/// Prometheus metrics of the module's tool calls (OpenMetrics text); open
/// without the token, as the contract's endpoint table says.
#[utoipa::path(
    get, path = "/metrics",
    responses((status = 200, content_type = "application/openmetrics-text", body = String))
)]
pub(crate) async fn metrics(State(state): State<AppState>) -> Response {
    ([(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)], state.service.metrics().encode()).into_response()
}

/// Runs one tool call; every well-formed call gets a `200` ToolResult.
#[utoipa::path(
    post, path = "/execute",
    security((), ("bearer" = [])),
    request_body = ToolCall,
    responses(
        (status = 200, body = ToolResult, description = "The tool's result, failures included"),
        (status = 400, body = ErrorBody, description = "The body is not JSON or not a ToolCall"),
        (status = 401, body = ErrorBody),
        (status = 413, body = ErrorBody, description = "The body is over the module's limit"),
        (status = 415, body = ErrorBody, description = "Development mode only (no `SERVICE_AUTH_TOKEN`): the body is not sent as `Content-Type: application/json`")
    )
)]
pub(crate) async fn execute(
    _: Authorized,
    State(state): State<AppState>,
    CallerTrace(trace): CallerTrace,
    JsonBody(body): JsonBody,
) -> Response {
    let call = match ReceivedCall::read(&body) {
        Some(call) => call,
        None => match serde_json::from_slice::<ToolCall>(&body) {
            Ok(call) => call.into(),
            Err(error) => return error_response(StatusCode::BAD_REQUEST, bad_call_message(&body, &error)),
        },
    };
    // The call's future in a box of its own: axum boxes this handler's
    // future, and with the call inside it that box was over 1 KiB, past what
    // glibc's per-thread cache serves (1032 bytes), so every call took
    // malloc's slow path. Two small boxes cost less than one large one.
    match Box::pin(state.service.answer(call, trace)).await.to_json() {
        Ok(body) => json_bytes(Bytes::from(body)),
        // Strings, pre-serialized JSON and an enum: never reached.
        Err(error) => {
            error_response(StatusCode::INTERNAL_SERVER_ERROR, format!("the answer could not be written: {error}"))
        }
    }
}

/// A [`ToolCall`] whose arguments are read in place, borrowing the body.
#[derive(Deserialize)]
struct ReceivedCall<'a> {
    tool_name: String,
    /// `None` when absent or `null`: the [`ToolCall`] reading settles which.
    #[serde(borrow, default)]
    arguments: Option<InPlaceValue<'a>>,
    #[serde(default)]
    user_id: Option<String>,
}

impl<'a> ReceivedCall<'a> {
    /// The call in `body` with its arguments read in place, when it is a
    /// [`ToolCall`] whose arguments can be (see [`InPlaceValue`]); `None`
    /// sends the body to the [`ToolCall`] reading, which gives the tree or
    /// the `400` it always gave.
    fn read(body: &'a [u8]) -> Option<Call<'a>> {
        let call: ReceivedCall<'a> = serde_json::from_slice(body).ok()?;
        let arguments @ InPlaceValue::Object(_) = call.arguments? else { return None };
        Some(Call { tool_name: call.tool_name, arguments: Arguments::InPlace(arguments), user_id: call.user_id })
    }
}

/// The caller's `traceparent`, when it sent a valid one; read in place
/// (extracting a whole `HeaderMap` would copy every header of the request).
pub(crate) struct CallerTrace(Option<TraceParent>);

impl<S: Sync> FromRequestParts<S> for CallerTrace {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let header = parts.headers.get(&TRACEPARENT);
        Ok(Self(header.and_then(|v| v.to_str().ok()).and_then(TraceParent::parse)))
    }
}

/// Says whether a body failed as JSON or as a ToolCall, and where.
fn bad_call_message(body: &[u8], error: &serde_json::Error) -> String {
    if is_too_deep(body, error) {
        return too_deep_message();
    }
    match error.classify() {
        Category::Data => format!(
            "the body is JSON but not a ToolCall ({{\"tool_name\": string, \"arguments\": object, \"user_id\": string or null}}): {error}"
        ),
        Category::Syntax | Category::Eof | Category::Io => format!("the body is not valid JSON: {error}"),
    }
}

/// The OpenAPI 3.1 document of this module's HTTP API.
#[utoipa::path(get, path = "/openapi.json", responses((status = 200, description = "OpenAPI 3.1 document")))]
pub(crate) async fn openapi(State(state): State<AppState>) -> Response {
    json_bytes(state.openapi_json.clone())
}

/// Any other path: a JSON 404 that lists the routes there are.
async fn not_found() -> Response {
    error_response(
        StatusCode::NOT_FOUND,
        "no such route; a module serves GET /health, GET /manifest, POST /execute, GET /openapi.json, GET /metrics and POST /mcp",
    )
}

/// A known path with the wrong method: a JSON 405.
async fn method_not_allowed() -> Response {
    error_response(
        StatusCode::METHOD_NOT_ALLOWED,
        "wrong method for this route; a module serves GET /health, GET /manifest, POST /execute, GET /openapi.json, GET /metrics and POST /mcp",
    )
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM: the graceful-shutdown signal of
/// module servers, and of any other service that wants the same behaviour.
/// On Unix the handlers are in place from the call on (call it, within a
/// tokio runtime, before saying the server listens), not from the first
/// poll, so a signal sent as soon as a server says it listens stops it
/// gracefully.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    let [interrupt, terminate] = {
        use tokio::signal::unix::{SignalKind, signal};
        [signal(SignalKind::interrupt()).ok(), signal(SignalKind::terminate()).ok()]
    };
    async move {
        #[cfg(unix)]
        tokio::select! {
            () = received(interrupt) => {},
            () = received(terminate) => {},
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("shutdown signal received; finishing calls in flight");
        stopping().cancel();
    }
}

/// Cancelled once a [`shutdown_signal`] has resolved: what would hold its
/// response open for as long as the client keeps it (an MCP event stream:
/// `GET /mcp`, `subscriptions/listen`) ends then, as calls in flight do
/// when they finish, so the server's wait for its connections to close
/// ends too. A signal is the process's, so this token is too.
pub fn stopping() -> CancellationToken {
    static STOPPING: OnceLock<CancellationToken> = OnceLock::new();
    STOPPING.get_or_init(CancellationToken::new).clone()
}

/// Resolves when `signal` arrives; never, when its handler could not be set.
#[cfg(unix)]
async fn received(signal: Option<tokio::signal::unix::Signal>) {
    match signal {
        Some(mut signal) => drop(signal.recv().await),
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use tower::ServiceExt;

    use super::*;
    use crate::{Context, ToolError, tool};

    /// Says hello.
    #[tool]
    async fn hello(_ctx: Context, _args: serde_json::Map<String, serde_json::Value>) -> Result<String, ToolError> {
        Ok("hello".into())
    }

    /// The status and body of `router`'s answer to a `POST` of `body` to `path`.
    async fn post(router: &Router, path: &str, content_type: Option<&str>, body: Body) -> (StatusCode, String) {
        let mut request = axum::http::Request::post(path);
        if let Some(content_type) = content_type {
            request = request.header(header::CONTENT_TYPE, content_type);
        }
        let response = router.clone().oneshot(request.body(body).unwrap()).await.unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn an_embedded_router_checks_bodies_itself() {
        let mut config = ServeConfig::default();
        config.limits.max_body_bytes = 100;
        let router = Module::new("m", "A module.").tool(hello).router(&config).unwrap();
        let call = r#"{"tool_name":"m.hello","arguments":{}}"#;
        let (status, answer) = post(&router, "/execute", Some("application/json"), Body::from(call)).await;
        assert_eq!((status, answer.contains(r#""result":"hello""#)), (StatusCode::OK, true), "{answer}");
        for path in ["/execute", "/mcp"] {
            let (status, answer) = post(&router, path, Some("text/plain"), Body::from(call)).await;
            assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{path}: {answer}");
            assert!(answer.contains("application/json"), "{path}: {answer}");
        }
        // Without a declared length (a stream), stopped at the limit all the same.
        let padding = " ".repeat(200);
        let chunks = [Ok::<_, std::io::Error>(format!("{{{padding}")), Ok(format!("{padding}}}"))];
        let stream = Body::from_stream(futures::stream::iter(chunks));
        let (status, answer) = post(&router, "/execute", Some("application/json"), stream).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{answer}");
        assert!(answer.contains("MAX_BODY_BYTES"), "{answer}");
        let failing = Body::from_stream(futures::stream::iter([Err::<String, _>(std::io::Error::other("reset"))]));
        let (status, answer) = post(&router, "/execute", Some("application/json"), failing).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
        assert!(answer.contains("could not be read: reset"), "{answer}");
    }

    #[tokio::test]
    async fn with_a_token_execute_reads_a_call_of_any_content_type_and_mcp_still_wants_json() {
        let config = ServeConfig { auth_token: Some("t0ken".into()), ..ServeConfig::default() };
        let router = Module::new("m", "A module.").tool(hello).router(&config).unwrap();
        let call = r#"{"tool_name":"m.hello","arguments":{}}"#;
        for content_type in [Some("text/plain"), Some("application/x-www-form-urlencoded"), None] {
            let request = axum::http::Request::post("/execute").header(header::AUTHORIZATION, "Bearer t0ken");
            let request = match content_type {
                Some(content_type) => request.header(header::CONTENT_TYPE, content_type),
                None => request,
            };
            let response = router.clone().oneshot(request.body(Body::from(call)).unwrap()).await.unwrap();
            let status = response.status();
            let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
            let answer = String::from_utf8_lossy(&body);
            assert_eq!(status, StatusCode::OK, "{content_type:?}: {answer}");
            assert!(answer.contains(r#""result":"hello""#), "{content_type:?}: {answer}");
        }
        let request = axum::http::Request::post("/mcp")
            .header(header::AUTHORIZATION, "Bearer t0ken")
            .header(header::CONTENT_TYPE, "text/plain")
            .body(Body::from(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#))
            .unwrap();
        let response = router.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    }

    #[tokio::test]
    async fn the_open_document_has_the_tools_schemas_only_without_a_token() {
        for (token, listed) in [(None, true), (Some("t0ken".to_owned()), false)] {
            let config = ServeConfig { auth_token: token, ..ServeConfig::default() };
            let router = Module::new("m", "A module.").tool(hello).router(&config).unwrap();
            let request = axum::http::Request::get("/openapi.json").body(Body::empty()).unwrap();
            let response = router.oneshot(request).await.unwrap();
            assert_eq!(response.status(), StatusCode::OK);
            let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
            let document: serde_json::Value = serde_json::from_slice(&body).unwrap();
            let schemas = &document["components"]["schemas"];
            assert!(schemas["ToolCall"].is_object(), "{schemas}");
            assert_eq!(schemas["m.hello.arguments"].is_object(), listed, "{schemas}");
        }
    }

    #[test]
    fn json_media_types_are_recognized_with_parameters_and_in_any_case() {
        for json in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON;charset=UTF-8",
            " application/json ",
        ] {
            assert!(is_json_media_type(json.as_bytes()), "{json}");
        }
        for other in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/jsonx",
            "application/json-seq",
            "",
            "application/jsön",
        ] {
            assert!(!is_json_media_type(other.as_bytes()), "{other}");
        }
    }
}

#[cfg(test)]
mod received_call_tests {
    use proptest::prelude::*;
    use schemars::JsonSchema;
    use serde::Serialize;
    use serde_json::{Value, json};

    use super::*;
    use crate::arguments::tests::any_object;
    use crate::{Context, ToolError, tool};

    /// Arguments with rules the schema states and serde does not check.
    #[derive(Debug, Serialize, Deserialize, JsonSchema)]
    struct Constrained {
        #[schemars(length(min = 1, max = 3))]
        a: Option<String>,
        #[schemars(range(max = 100))]
        b: Option<u8>,
        #[serde(default)]
        c: Vec<Value>,
    }

    /// Gives the arguments back, with the caller.
    #[tool]
    async fn constrained(ctx: Context, args: Constrained) -> Result<(Constrained, Option<String>), ToolError> {
        Ok((args, ctx.user_id().map(str::to_owned)))
    }

    /// The answers to `body` read in place and read as a [`ToolCall`] (the
    /// text of its `400` when it is not one).
    fn both_answers(service: &ModuleService, body: &str) -> (Option<String>, String) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let text = |json: Vec<u8>| String::from_utf8(json).unwrap();
        runtime.block_on(async {
            let fast = match ReceivedCall::read(body.as_bytes()) {
                Some(call) => Some(text(service.answer(call, None).await.to_json().unwrap())),
                None => None,
            };
            let slow = match serde_json::from_str::<ToolCall>(body) {
                Ok(call) => text(service.answer(call.into(), None).await.to_json().unwrap()),
                Err(error) => bad_call_message(body.as_bytes(), &error),
            };
            (fast, slow)
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        #[test]
        fn a_call_read_in_place_is_answered_as_the_tool_call(
            arguments in any_object(),
            user_id in prop::option::of("[a-z]{1,3}"),
            tool in prop::sample::select(vec!["m.constrained", "m.other"]),
        ) {
            let service = Module::new("m", "A module.").tool(constrained).build().unwrap();
            let body = json!({"tool_name": tool, "arguments": arguments, "user_id": user_id}).to_string();
            let (fast, slow) = both_answers(&service, &body);
            // Only a serde_json private name (`$serde_json::private::...`) sends an object to the tree.
            let Some(fast) = fast else {
                prop_assert!(body.contains("$serde_json::private::"), "{}", body);
                return Ok(());
            };
            prop_assert_eq!(fast, slow);
        }
    }

    #[test]
    fn calls_the_tree_settles_are_not_read_in_place() {
        let service = Module::new("m", "A module.").tool(constrained).build().unwrap();
        for body in [
            r#"{"tool_name": "m.constrained"}"#,
            r#"{"tool_name": "m.constrained", "arguments": {"a": "x", "a": "yy"}}"#,
            r#"{"tool_name": "m.constrained", "arguments": {"c": [{"k": 1, "k": 2}]}}"#,
            r#"{"tool_name": "m.constrained", "arguments": {"c": [{"$serde_json::private::RawValue": "[1]"}]}}"#,
        ] {
            let (fast, slow) = both_answers(&service, body);
            assert!(fast.is_none(), "{body}");
            assert!(slow.contains(r#""success":true"#), "{body}");
        }
        for refused in
            [r#"{"tool_name": "m.constrained", "arguments": null}"#, r#"{"tool_name": "m.c", "arguments": [1]}"#]
        {
            assert!(ReceivedCall::read(refused.as_bytes()).is_none(), "{refused}");
            assert!(serde_json::from_str::<ToolCall>(refused).is_err(), "{refused}");
        }
    }
}
