//! Routed execution: one call from a caller to the module that serves the
//! tool, with the permission checked again, the user injected, the tool's
//! timeout, a retry only where it is safe, and every outcome a ToolResult.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderValue, StatusCode};
use module_sdk::ErrorKind;
use module_sdk::contract::{ToolCall, ToolResult};
use module_sdk::service::{BodyError, InPlaceObject, TraceParent, UNKNOWN_TOOL_LABEL, read_body};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use tokio::time::Instant;

use crate::call_answer::{CallAnswer, RelayError};
use crate::call_slots::CallSlots;
use crate::caller::{Caller, CallerFields};
use crate::config::Config;
use crate::gateway_validation::{ArgumentsRefused, GatewayValidators};
use crate::json_body::read_json;
use crate::metrics::Metrics;
use crate::module_client::{AnswerBody, ModuleClient, SendError};
use crate::registry::{Registry, RouteError, ToolRoute};
use module_sdk::error_chain;

/// Added to a tool's own `timeout_seconds`, so the module's timeout answer
/// arrives before the orchestrator gives up.
pub const TIMEOUT_GRACE: Duration = Duration::from_secs(1);
/// How many times a call is sent at most, when a retry is safe.
const MAX_ATTEMPTS: u32 = 3;
/// The wait before the first retry; doubled for each further one.
const FIRST_RETRY_DELAY: Duration = Duration::from_millis(100);
/// The most characters of a module's error answer quoted in a call's error.
const MAX_DETAIL_CHARS: usize = 300;

/// The body of the orchestrator's `POST /execute`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(from = "ExecuteRequestFields<Map<String, Value>>")]
pub struct ExecuteRequest<'a> {
    /// Full tool name, `module.tool`.
    pub tool_name: String,
    /// The tool's arguments (absent reads as `{}`).
    #[serde(default)]
    #[schema(value_type = Object)]
    pub arguments: CallArguments<'a>,
    /// Who is calling.
    #[serde(flatten)]
    pub caller: CallerFields,
    /// The user explicitly approved this call (needed for `requires_approval` tools).
    #[serde(default)]
    pub approved: bool,
}

/// [`ExecuteRequest`] as it is read: every field at the top level, read in
/// one pass (serde reads a `flatten`ed struct by first buffering every other
/// field, the arguments included, in a tree of its own); the arguments as a
/// tree (`A` a `Map`) or as the text the caller sent ([`ArgumentsText`]).
#[derive(Deserialize)]
struct ExecuteRequestFields<A> {
    tool_name: String,
    #[serde(default)]
    arguments: A,
    #[serde(default)]
    user_id: Option<String>,
    #[serde(default)]
    user_permission: Option<String>,
    #[serde(default)]
    modules: Option<Vec<String>>,
    #[serde(default)]
    approved: bool,
}

impl<A> ExecuteRequestFields<A> {
    /// The request of these fields, with `arguments` for theirs.
    fn into_request(self, arguments: CallArguments<'_>) -> ExecuteRequest<'_> {
        let Self { tool_name, arguments: _, user_id, user_permission, modules, approved } = self;
        ExecuteRequest { tool_name, arguments, caller: CallerFields { user_id, user_permission, modules }, approved }
    }
}

impl From<ExecuteRequestFields<Map<String, Value>>> for ExecuteRequest<'_> {
    fn from(mut fields: ExecuteRequestFields<Map<String, Value>>) -> Self {
        let tree = std::mem::take(&mut fields.arguments);
        fields.into_request(CallArguments::Tree(tree))
    }
}

impl<'a> ExecuteRequest<'a> {
    /// The request in `body`, its arguments read in place when they can be
    /// (see [`CallArguments::InPlace`]), to be checked without a tree and
    /// forwarded as the caller wrote them; any other body is read with its
    /// arguments as a tree, as it always was, or refused with serde's error.
    pub fn read(body: &'a [u8]) -> serde_json::Result<Self> {
        if let Ok(fields) = read_json::<ExecuteRequestFields<ArgumentsText<'a>>>(body) {
            let arguments = match fields.arguments.0 {
                None => Some(CallArguments::Tree(Map::new())),
                Some(text) => CallArguments::read(text),
            };
            if let Some(arguments) = arguments {
                return Ok(fields.into_request(arguments));
            }
        }
        read_json(body)
    }
}

/// The arguments' JSON text as the caller sent it, `None` when absent
/// (`null` is text too: a tree reading refuses it).
#[derive(Default)]
struct ArgumentsText<'a>(Option<&'a RawValue>);

impl<'de: 'a, 'a> Deserialize<'de> for ArgumentsText<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        <&'a RawValue>::deserialize(deserializer).map(|text| Self(Some(text)))
    }
}

/// How deeply arguments may nest when read in place (the arguments object
/// itself is depth 1): what serde_json's recursion limit (128) leaves them
/// inside a request read as a tree, which refuses anything deeper.
const MAX_ARGUMENTS_DEPTH: usize = 126;

/// A call's arguments, a JSON object.
#[derive(Debug)]
pub enum CallArguments<'a> {
    /// A tree: a model's message, an MCP client's call, an approved call.
    Tree(Map<String, Value>),
    /// Read in place from the body of `POST /execute`: the text the caller
    /// sent, forwarded as it is, and its reading, which validation checks.
    /// Only for text that says exactly what was read (see
    /// [`InPlaceObject::exactness_within`]): arguments holding a fraction or
    /// an integer past 64 bits are checked and forwarded as a tree, so a
    /// module that reads numbers exactly sees the number that was checked.
    InPlace {
        /// The object's JSON text.
        text: &'a RawValue,
        /// The same object read in place.
        value: InPlaceObject<'a>,
    },
}

impl<'a> CallArguments<'a> {
    /// `text` read in place, or as the tree its in-place reading gives
    /// when a number in it is not an exact integer; `None` when it is not
    /// an object that an in-place reading takes, or is nested deeper than
    /// the request's tree reading allows.
    fn read(text: &'a RawValue) -> Option<Self> {
        let value = InPlaceObject::read(text.get())?;
        Some(match value.exactness_within(MAX_ARGUMENTS_DEPTH)? {
            true => Self::InPlace { text, value },
            // The tree serde_json reads from the same text, without reading it again.
            false => Self::Tree(value.to_tree()),
        })
    }

    /// The arguments as a tree.
    pub fn into_tree(self) -> Map<String, Value> {
        match self {
            Self::Tree(tree) => tree,
            Self::InPlace { value, .. } => value.to_tree(),
        }
    }
}

/// A call on its way to its module.
struct OutgoingCall<'a> {
    tool_name: String,
    arguments: CallArguments<'a>,
    user_id: Option<String>,
}

impl OutgoingCall<'_> {
    /// The body of the module's `POST /execute`, the [`ToolCall`] it reads,
    /// written field by field: arguments read in place as the caller's own
    /// text, a tree serialized.
    fn body(&self) -> Bytes {
        const WRITES: &str = "JSON text always writes to a Vec";
        let text_len = match &self.arguments {
            CallArguments::InPlace { text, .. } => text.get().len(),
            CallArguments::Tree(_) => 0,
        };
        let mut body = Vec::with_capacity(self.tool_name.len() + text_len + 64);
        body.extend_from_slice(br#"{"tool_name":"#);
        serde_json::to_writer(&mut body, &self.tool_name).expect(WRITES);
        body.extend_from_slice(br#","arguments":"#);
        match &self.arguments {
            CallArguments::InPlace { text, .. } => body.extend_from_slice(text.get().as_bytes()),
            CallArguments::Tree(tree) => serde_json::to_writer(&mut body, tree).expect(WRITES),
        }
        body.extend_from_slice(br#","user_id":"#);
        serde_json::to_writer(&mut body, &self.user_id).expect(WRITES);
        body.push(b'}');
        Bytes::from(body)
    }

    /// The call as a [`ToolCall`] (an MCP server's tool takes a tree).
    fn to_tool_call(&self) -> ToolCall {
        let arguments = match &self.arguments {
            CallArguments::Tree(tree) => tree.clone(),
            CallArguments::InPlace { value, .. } => value.to_tree(),
        };
        ToolCall { tool_name: self.tool_name.clone(), arguments, user_id: self.user_id.clone() }
    }
}

/// Runs calls against modules through one pooled HTTP client.
pub struct Executor {
    registry: Arc<Registry>,
    client: ModuleClient,
    config: Arc<Config>,
    slots: CallSlots,
    metrics: Arc<Metrics>,
    validators: GatewayValidators,
}

impl Executor {
    /// An executor routing through `registry` with `client`, with the
    /// timeouts, service token and budgets of `config`, counting calls in `metrics`.
    pub fn new(registry: Arc<Registry>, client: ModuleClient, config: Arc<Config>, metrics: Arc<Metrics>) -> Self {
        let slots = CallSlots::new(config.module_services.keys(), config.budgets.max_concurrent_calls_per_module);
        let validators = GatewayValidators::new(config.gateway_validation.clone());
        Self { registry, client, config, slots, metrics, validators }
    }

    /// Whether a call of `tool_name` by `caller` would wait for a person's
    /// approval: the tool exists, the caller may use it, and the approval
    /// policy (`requires_approval`, `APPROVAL_RISK_LEVEL`, ...) asks for one.
    pub fn awaits_approval(&self, caller: &Caller, tool_name: &str) -> bool {
        self.route(tool_name).is_ok_and(|route| self.route_awaits_approval(caller, &route))
    }

    /// [`Self::awaits_approval`] for a call already routed.
    pub fn route_awaits_approval(&self, caller: &Caller, route: &ToolRoute) -> bool {
        caller.may_use(&route.module, route.tool()) && self.config.approvals.needs_approval(route.tool())
    }

    /// Where a call of `tool_name` goes, or why it goes nowhere.
    pub fn route(&self, tool_name: &str) -> Result<ToolRoute, RouteError> {
        self.registry.route(tool_name)
    }

    /// The longest a call of `route`'s tool may take, from checking its
    /// arguments to reading its answer (a first call's wait for the tool's
    /// validator, waiting for a slot and retries included): its own
    /// `timeout_seconds` (capped by `MAX_TOOL_TIMEOUT`) with [`TIMEOUT_GRACE`],
    /// or its module's default.
    pub fn call_timeout(&self, route: &ToolRoute) -> Duration {
        match route.tool().timeout_seconds {
            Some(seconds) => {
                let budgets = &self.config.budgets;
                Duration::try_from_secs_f64(budgets.capped_timeout(seconds)).unwrap_or(budgets.max_tool_timeout)
                    + TIMEOUT_GRACE
            }
            None => self.config.fallback_timeout(&route.module),
        }
    }

    /// The refusal of `arguments` of `tool_name` by gateway validation
    /// (`GATEWAY_VALIDATION`), if the tool exists and they are refused:
    /// `invalid_arguments`, or `timeout` when the tool's first validator
    /// compile outlasts its [`Self::call_timeout`].
    pub async fn argument_refusal(&self, tool_name: &str, arguments: &mut Map<String, Value>) -> Option<ToolResult> {
        let route = self.route(tool_name).ok()?;
        let timeout = self.call_timeout(&route);
        let mut checked = CallArguments::Tree(std::mem::take(arguments));
        let refusal = self.refuse_arguments(&route, tool_name, &mut checked, timeout, Instant::now() + timeout).await;
        *arguments = checked.into_tree();
        refusal
    }

    /// The ToolResult refusing `arguments` of a call of `tool_name` routed by
    /// `route`, with `timeout` ending at `deadline`, if gateway validation
    /// refuses them.
    async fn refuse_arguments(
        &self,
        route: &ToolRoute,
        tool_name: &str,
        arguments: &mut CallArguments<'_>,
        timeout: Duration,
        deadline: Instant,
    ) -> Option<ToolResult> {
        let (kind, message) = match self.validators.check(route, arguments, deadline).await.err()? {
            ArgumentsRefused::Invalid(problems) => (ErrorKind::InvalidArguments, problems),
            still_compiling @ ArgumentsRefused::StillCompiling => {
                let message =
                    format!("`{tool_name}` did not start within {} s: {still_compiling}", timeout.as_secs_f64());
                (ErrorKind::Timeout, message)
            }
        };
        Some(ToolResult::failure(tool_name, kind, message))
    }

    /// Runs `tool_name` with `arguments` for `caller`, routed by `route`
    /// ([`Self::route`] of `tool_name`, looked up once for the approval
    /// check and the call); `approved` says the user approved it. The
    /// call's `user_id` is the caller's, set here and nowhere else. Every
    /// outcome, including refusals and unreachable modules, is an answer:
    /// the module's kept as the bytes it sent when it is a valid ToolResult
    /// (to be passed on without rebuilding it).
    pub async fn execute_answer(
        &self,
        caller: &Caller,
        route: Result<ToolRoute, RouteError>,
        tool_name: String,
        arguments: CallArguments<'_>,
        approved: bool,
    ) -> CallAnswer {
        let call = OutgoingCall { tool_name, arguments, user_id: caller.user_id.clone() };
        let tool_name = call.tool_name.clone();
        let trace = crate::trace::call_trace();
        let in_flight = self.metrics.start_call(route.as_ref().ok().map(|route| route.tool().name.as_str()));
        // A name that routes nowhere is the caller's text, up to MAX_BODY_BYTES:
        // the log line and the span call it `unknown`, as the metrics do.
        let logged_name = if route.is_ok() { tool_name.as_str() } else { UNKNOWN_TOOL_LABEL };
        let (module, answer) = match route {
            Ok(route) => (route.module.clone(), self.run(caller, &route, call, approved, &trace).await),
            Err(error) => (Arc::from(""), self.refusal(caller, &tool_name, &error).into()),
        };
        let error_kind = answer.error_kind();
        // The metrics' clock times the log line and the span too.
        let duration = in_flight.finish(error_kind);
        tracing::debug!(
            tool = %logged_name,
            module = %module,
            permission = %caller.permission,
            duration_ms = duration.as_secs_f64() * 1000.0,
            outcome = error_kind.map_or("success", ErrorKind::as_str),
            trace_id = %trace.trace_id(),
            span_id = %trace.parent_id(),
            "routed call"
        );
        crate::trace::record_routed_call(trace, duration, &module, logged_name, error_kind);
        answer
    }

    /// The ToolResult of a call that never reached a tool. The names it
    /// offers instead are only those `caller` may see, and a module it may
    /// not use is answered as unknown (keeping its tools and its discovery
    /// error, which may name internal addresses, to itself): a refusal
    /// lists no more than a listing would.
    pub(crate) fn refusal(&self, caller: &Caller, tool_name: &str, error: &RouteError) -> ToolResult {
        let snapshot = self.registry.snapshot();
        let visible = || snapshot.tools_for(caller);
        // A module the caller may not use is answered as one that does not exist.
        let hidden = match error {
            RouteError::NotDiscovered { module, .. }
            | RouteError::Unavailable { module }
            | RouteError::UnknownTool { module, .. }
                if !caller.allows_module(module) =>
            {
                Some(RouteError::UnknownModule { module: module.clone(), tool: tool_name.to_owned() })
            }
            _ => None,
        };
        let error = hidden.as_ref().unwrap_or(error);
        let (kind, message) = match error {
            RouteError::NotDiscovered { .. } | RouteError::Unavailable { .. } => {
                (ErrorKind::Unavailable, error.to_string())
            }
            RouteError::BadName(_) => (ErrorKind::UnknownTool, error.to_string()),
            RouteError::UnknownModule { .. } => {
                let modules: BTreeSet<&str> = visible().map(|found| found.module).collect();
                (ErrorKind::UnknownTool, format!("{error}; this caller's modules: {}", listed(modules)))
            }
            RouteError::UnknownTool { module, .. } => {
                let tools = visible().filter(|found| found.module == module).map(|found| found.tool.name.as_str());
                (ErrorKind::UnknownTool, format!("{error}; its tools this caller may use: {}", listed(tools)))
            }
        };
        ToolResult::failure(tool_name, kind, message)
    }

    async fn run(
        &self,
        caller: &Caller,
        route: &ToolRoute,
        mut call: OutgoingCall<'_>,
        approved: bool,
        trace: &TraceParent,
    ) -> CallAnswer {
        let tool = route.tool();
        if !caller.allows_module(&route.module) {
            // As if it did not exist, whether the tool does or not.
            let hidden = RouteError::UnknownModule { module: route.module.to_string(), tool: call.tool_name.clone() };
            return self.refusal(caller, &call.tool_name, &hidden).into();
        }
        if !caller.may_use(&route.module, tool) {
            let message = format!(
                "`{}` requires `{}` permission; this caller has `{}`",
                tool.name, tool.required_permission, caller.permission
            );
            return ToolResult::failure(call.tool_name, ErrorKind::PermissionDenied, message).into();
        }
        if !approved && self.config.approvals.needs_approval(tool) {
            let message = format!(
                "`{}` needs the user's explicit approval; ask the user, then call it again with approval",
                tool.name
            );
            return ToolResult::failure(call.tool_name, ErrorKind::PermissionDenied, message).into();
        }
        // The call's time starts here: a first call's wait for its tool's validator counts too.
        let timeout = self.call_timeout(route);
        let deadline = Instant::now() + timeout;
        if let Some(refusal) =
            self.refuse_arguments(route, &call.tool_name, &mut call.arguments, timeout, deadline).await
        {
            return refusal.into();
        }
        let idempotent = tool.annotations.is_some_and(|a| a.idempotent || a.read_only);
        self.send(route, &call, timeout, deadline, idempotent, trace).await
    }

    /// Posts `call` to the module, retrying a connection that was refused
    /// (nothing was sent) and, for idempotent tools, a connection that broke;
    /// `trace` goes with it as its `traceparent` (an MCP server's in the call's `_meta`),
    /// by `deadline`, where the call's `timeout` ends.
    async fn send(
        &self,
        route: &ToolRoute,
        call: &OutgoingCall<'_>,
        timeout: Duration,
        deadline: Instant,
        idempotent: bool,
        trace: &TraceParent,
    ) -> CallAnswer {
        let traceparent =
            HeaderValue::from_bytes(&trace.header_bytes()).expect("a traceparent is hex digits and dashes");
        // Wait for one of the module's call slots (MAX_CONCURRENT_CALLS_PER_MODULE) within the call's time.
        let Ok(_slot) = tokio::time::timeout_at(deadline, self.slots.acquire(&route.module)).await else {
            let message = format!(
                "`{}` did not start within {} s: module `{}` was busy with MAX_CONCURRENT_CALLS_PER_MODULE ({}) calls",
                call.tool_name,
                timeout.as_secs_f64(),
                route.module,
                self.config.budgets.max_concurrent_calls_per_module
            );
            return ToolResult::failure(call.tool_name.clone(), ErrorKind::Timeout, message).into();
        };
        if let Some(server) = self.registry.mcp_servers().get(&route.module) {
            // Boxed: an MCP call's future is large, and every routed call's future would carry its size.
            return Box::pin(server.call(&call.to_tool_call(), trace, deadline)).await.into();
        }
        let body = call.body();
        let mut delay = FIRST_RETRY_DELAY;
        let mut attempt = 1;
        loop {
            let sent = self.client.post(&route.execute_url, traceparent.clone(), body.clone(), deadline).await;
            let error = match sent {
                Ok(response) => return self.read_answer(route, call, response, timeout, deadline).await,
                Err(error) => error,
            };
            let retry_is_safe = !error.is_timeout() && (error.is_connect() || idempotent);
            if !retry_is_safe || attempt == MAX_ATTEMPTS || Instant::now() + delay >= deadline {
                return transport_failure(route, call, &error, timeout).into();
            }
            tracing::debug!(tool = %call.tool_name, attempt, error = %error_chain(&error), "retrying call");
            tokio::time::sleep(delay).await;
            delay *= 2;
            attempt += 1;
        }
    }

    /// Turns the module's HTTP answer into the call's ToolResult, its body
    /// read by `deadline`.
    async fn read_answer(
        &self,
        route: &ToolRoute,
        call: &OutgoingCall<'_>,
        response: axum::http::Response<AnswerBody>,
        timeout: Duration,
        deadline: Instant,
    ) -> CallAnswer {
        let status = response.status();
        let name = call.tool_name.clone();
        let read = read_body(response.into_body(), self.config.budgets.max_answer_bytes, "MAX_ANSWER_BYTES");
        let body = match tokio::time::timeout_at(deadline, read).await {
            Ok(Ok(body)) => body,
            Ok(Err(BodyError::Transport(error))) => {
                return transport_failure(route, call, &SendError::Body(error), timeout).into();
            }
            Err(_) => return transport_failure(route, call, &SendError::Timeout, timeout).into(),
            Ok(Err(too_large)) => {
                let message = format!("module `{}` sent an answer that was cut off: {too_large}", route.module);
                return ToolResult::failure(name, ErrorKind::ExecutionFailed, message).into();
            }
        };
        if status == StatusCode::OK {
            // A valid ToolResult goes on as the module sent it: checked, not rebuilt.
            return CallAnswer::relay(body, &call.tool_name).unwrap_or_else(|error| {
                let message = match error {
                    RelayError::OtherTool(other) => {
                        format!("module `{}` answered for tool `{other}` instead", route.module)
                    }
                    RelayError::NotAToolResult(error) => {
                        format!("module `{}` answered with something that is not a ToolResult: {error}", route.module)
                    }
                };
                ToolResult::failure(name, ErrorKind::ExecutionFailed, message).into()
            });
        }
        let detail = error_detail(&body);
        let (kind, message) = match status {
            StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY => {
                (ErrorKind::InvalidArguments, format!("the module refused the call: {detail}"))
            }
            StatusCode::PAYLOAD_TOO_LARGE => {
                (ErrorKind::InvalidArguments, "the arguments are larger than the module accepts; send less".to_owned())
            }
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => (
                ErrorKind::Unavailable,
                format!(
                    "module `{}` refused the orchestrator's service token (SERVICE_AUTH_TOKEN): {detail}",
                    route.module
                ),
            ),
            _ => (ErrorKind::Unavailable, format!("module `{}` answered HTTP {status}: {detail}", route.module)),
        };
        ToolResult::failure(name, kind, message).into()
    }
}

/// `names` joined by commas, or `none`.
fn listed<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let joined = names.into_iter().collect::<Vec<_>>().join(", ");
    if joined.is_empty() { "none".to_owned() } else { joined }
}

/// The ToolResult of a call whose HTTP exchange failed.
fn transport_failure(route: &ToolRoute, call: &OutgoingCall<'_>, error: &SendError, timeout: Duration) -> ToolResult {
    let (kind, message) = if error.is_timeout() {
        (
            ErrorKind::Timeout,
            format!("`{}` did not finish within {} s; it may still be running", call.tool_name, timeout.as_secs_f64()),
        )
    } else if error.is_connect() {
        (ErrorKind::Unavailable, format!("module `{}` cannot be reached: {}", route.module, error_chain(error)))
    } else {
        (
            ErrorKind::Unavailable,
            format!(
                "the connection to module `{}` broke during the call, so it may or may not have taken effect: {}",
                route.module,
                error_chain(error)
            ),
        )
    };
    ToolResult::failure(call.tool_name.clone(), kind, message)
}

/// What a module's non-`200` answer says: its `{"error": ...}` message, or
/// else its text, either cut to [`MAX_DETAIL_CHARS`].
fn error_detail(body: &[u8]) -> String {
    let text = match serde_json::from_slice::<module_sdk::contract::ErrorBody>(body) {
        Ok(answer) => std::borrow::Cow::Owned(answer.error),
        Err(_) => String::from_utf8_lossy(body),
    };
    text.chars().take(MAX_DETAIL_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_module_error_is_quoted_cut_whether_json_or_not() {
        let long = "e".repeat(100_000);
        let json = serde_json::to_vec(&json!({"error": long})).unwrap();
        for body in [json, long.clone().into_bytes()] {
            assert_eq!(error_detail(&body), long[..MAX_DETAIL_CHARS]);
        }
        assert_eq!(error_detail(br#"{"error":"no such file"}"#), "no such file");
    }

    fn outgoing(body: &[u8]) -> Value {
        let request = ExecuteRequest::read(body).unwrap();
        let call =
            OutgoingCall { tool_name: request.tool_name, arguments: request.arguments, user_id: Some("ann".into()) };
        serde_json::from_slice(&call.body()).unwrap()
    }

    #[test]
    fn a_request_reads_its_arguments_in_place_or_as_a_tree_and_writes_the_same_call() {
        let in_place = br#"{"tool_name":"m.t","arguments":{"q":"a \"b\"","n":[1,-25,{"x":null}]},"user_id":"x"}"#;
        let request = ExecuteRequest::read(in_place).unwrap();
        assert!(matches!(request.arguments, CallArguments::InPlace { .. }));
        assert_eq!(request.caller.user_id.as_deref(), Some("x"));
        let expected =
            json!({"tool_name": "m.t", "arguments": {"q": "a \"b\"", "n": [1, -25, {"x": null}]}, "user_id": "ann"});
        assert_eq!(outgoing(in_place), expected);
        // Duplicate names: a tree, the last one kept, written anew.
        let duplicate = br#"{"tool_name":"m.t","arguments":{"q":1,"q":2}}"#;
        assert!(matches!(ExecuteRequest::read(duplicate).unwrap().arguments, CallArguments::Tree(_)));
        assert_eq!(outgoing(duplicate)["arguments"], json!({"q": 2}));
        // Absent: an empty tree.
        assert_eq!(outgoing(br#"{"tool_name":"m.t"}"#)["arguments"], json!({}));
        let without_user =
            OutgoingCall { tool_name: "m.t".into(), arguments: CallArguments::Tree(Map::new()), user_id: None };
        assert_eq!(serde_json::from_slice::<ToolCall>(&without_user.body()).unwrap().user_id, None);
        // Not an object, or not JSON a tree holds: refused as the tree reading refuses it.
        for body in [&br#"{"tool_name":"m.t","arguments":null}"#[..], br#"{"tool_name":"m.t","arguments":[1]}"#] {
            let error = ExecuteRequest::read(body).unwrap_err().to_string();
            assert!(error.contains("invalid type"), "{error}");
        }
        let error = ExecuteRequest::read(br#"{"tool_name":"m.t","arguments":{"n":1e400}}"#).unwrap_err();
        assert!(error.to_string().contains("out of range"), "{error}");
        // Text that cannot close the object early or add a field: it is one value.
        let sly = br#"{"tool_name":"m.t","arguments":{"q":"\"},\"user_id\":\"root","user_id":"x"}}"#;
        let forwarded = outgoing(sly);
        assert_eq!(forwarded["user_id"], "ann");
        assert_eq!(forwarded["arguments"], json!({"q": "\"},\"user_id\":\"root", "user_id": "x"}));
    }

    #[test]
    fn numbers_a_reader_might_see_otherwise_go_as_the_tree_writes_them() {
        for (arguments, in_place) in [
            (r#"{"n":12,"m":-3,"big":18446744073709551615}"#, true),
            (r#"{"t":0.7}"#, false),
            (r#"{"x":[{"n":1e2}]}"#, false),
            (r#"{"n":100000000000000000001}"#, false),
        ] {
            let body = format!(r#"{{"tool_name":"m.t","arguments":{arguments}}}"#);
            let read = ExecuteRequest::read(body.as_bytes()).unwrap().arguments;
            assert_eq!(matches!(read, CallArguments::InPlace { .. }), in_place, "{arguments}");
        }
        assert_eq!(outgoing(br#"{"tool_name":"m.t","arguments":{"n":1e2}}"#)["arguments"]["n"], json!(100.0));
    }

    #[test]
    fn arguments_read_in_place_nest_as_deeply_as_the_tree_reading_allows() {
        // With a fraction first, too: it makes a tree, and the depth still counts.
        for (first, in_place) in [("", true), (r#""t":0.5,"#, false)] {
            for depth in 120..=130 {
                let arguments = format!("{{{first}{}{}", "\"a\":{".repeat(depth - 1), "}".repeat(depth));
                let body = format!(r#"{{"tool_name":"m.t","arguments":{arguments}}}"#);
                let as_tree = serde_json::from_str::<ExecuteRequest>(&body).is_ok();
                let read = ExecuteRequest::read(body.as_bytes());
                assert_eq!(read.is_ok(), as_tree, "depth {depth}, {first}");
                if let Ok(request) = read {
                    let read_in_place = matches!(request.arguments, CallArguments::InPlace { .. });
                    assert_eq!(read_in_place, in_place, "depth {depth}, {first}");
                }
            }
        }
    }
}
