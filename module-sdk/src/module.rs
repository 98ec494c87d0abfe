//! A module: a named set of tools, checked against the contract once and
//! then executed, over HTTP or in-process, through one path.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use futures::FutureExt;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use tokio::time::Instant;

use crate::arguments::InPlaceValue;
use crate::blocking_limit::{BlockingLimit, DEFAULT_MAX_BLOCKING_CALLS};
use crate::context::{Context, ModuleShared, StateMap};
use crate::contract::{
    CONTRACT_VERSION, ErrorKind, ModuleManifest, ToolCall, ToolDefinition, ToolResult, check_manifest,
};
use crate::deadline::deadline_after;
use crate::error::{ModuleError, ToolError};
use crate::mcp::SdkFlags;
use crate::metrics::{CANCELLED_OUTCOME, CallInFlight, CallMetrics, ToolMetrics, UNKNOWN_TOOL_LABEL};
use crate::schema::parameters_of;
use crate::tool::{ErasedHandler, IntoTool, JsonFuture, MAX_TIMEOUT, Tool};
use crate::trace_context::TraceParent;
use crate::validate::ArgumentValidator;

/// A module under construction: `Module::new(name, description).tool(...)`.
///
/// Mistakes (a bad name, a duplicate tool, a missing description) are
/// collected and reported by [`Module::build`], [`Module::serve`] or
/// [`Module::test_client`], so the builder chains without `?`.
pub struct Module {
    name: String,
    description: String,
    version: Option<String>,
    tools: Vec<Tool>,
    state: StateMap,
    /// `None`: [`Module::serve`] reads the command line.
    sdk_flags: Option<SdkFlags>,
}

impl Module {
    /// A module named `name` (the prefix of its tool names), described for
    /// a person and a model in one or two sentences.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            description: description.into().trim().to_owned(),
            version: None,
            tools: Vec::new(),
            state: StateMap::default(),
            sdk_flags: None,
        }
    }

    /// The module's semver, sent in the manifest; usually `env!("CARGO_PKG_VERSION")`.
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = Some(version.into());
        self
    }

    /// Registers a tool: a `#[tool]` function or a [`Tool`].
    pub fn tool(mut self, tool: impl IntoTool) -> Self {
        self.tools.push(tool.into_tool());
        self
    }

    /// Shares `value` with every handler, read back with `Context::state::<T>()`.
    pub fn state<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.state.insert(value);
        self
    }

    /// The SDK's flags as the module's own settings parsed them (a clap
    /// parser that flattens [`SdkFlags`]); [`Module::serve`] follows them
    /// instead of reading the command line (`--stdio`: MCP on stdio).
    pub fn sdk_flags(mut self, flags: SdkFlags) -> Self {
        self.sdk_flags = Some(flags);
        self
    }

    /// The flags [`Module::serve`] follows: those given to
    /// [`Module::sdk_flags`], else the process's command line.
    pub(crate) fn serve_flags(&self) -> SdkFlags {
        self.sdk_flags.unwrap_or_else(SdkFlags::from_command_line)
    }

    /// Checks the definition against the contract and compiles every
    /// tool's argument validator.
    pub fn build(self) -> Result<ModuleService, ModuleError> {
        self.build_limited(DEFAULT_MAX_BLOCKING_CALLS)
    }

    /// [`Module::build`] with at most `max_blocking_calls` pieces of
    /// [`Context::blocking`] work running at once (`MAX_BLOCKING_CALLS`).
    pub(crate) fn build_limited(self, max_blocking_calls: usize) -> Result<ModuleService, ModuleError> {
        let metrics = CallMetrics::new();
        let mut tools = HashMap::with_capacity(self.tools.len());
        let mut definitions = Vec::with_capacity(self.tools.len());
        for tool in self.tools {
            let full_name = format!("{}.{}", self.name, tool.name);
            let registered = RegisteredTool::new(&full_name, tool, metrics.tool(&full_name))?;
            definitions.push(registered.definition.clone());
            tools.insert(full_name, registered);
        }
        let mut manifest = ModuleManifest {
            module_name: self.name,
            description: self.description,
            tools: definitions,
            version: self.version,
            contract_version: Some(CONTRACT_VERSION.to_owned()),
        };
        // The orchestrator's own check: what passes here, it accepts.
        check_manifest(&mut manifest)?;
        let unknown_tool = metrics.tool(UNKNOWN_TOOL_LABEL);
        let shared = Arc::new(ModuleShared { state: self.state, blocking: BlockingLimit::new(max_blocking_calls) });
        Ok(ModuleService { manifest, tools, shared, metrics, unknown_tool })
    }
}

/// What is recorded of one call (metrics, its log event, its span) when it
/// is answered, or, when its caller goes away first and its future is
/// dropped, as [`CANCELLED_OUTCOME`] when this is dropped.
struct CallRecord<'a> {
    module: &'a str,
    tool: &'a str,
    user_id_present: bool,
    trace: Option<TraceParent>,
    /// `None` once recorded.
    in_flight: Option<CallInFlight>,
}

impl CallRecord<'_> {
    /// Records the call as `answer` says it went.
    fn finish(&mut self, answer: &Answer) {
        let Some(in_flight) = self.in_flight.take() else { return };
        // The call's one other clock read.
        let elapsed = in_flight.finish(answer.error_kind);
        // The module's own failures (`execution_failed`, a database or a
        // bug, not the caller's request) are worth an operator's look.
        if answer.error_kind == Some(ErrorKind::ExecutionFailed) {
            tracing::warn!(
                module = self.module,
                tool = self.tool,
                error = answer.error.as_deref().unwrap_or_default(),
                trace_id = self.trace.map(|trace| trace.trace_id()),
                "tool call failed"
            );
        }
        self.log_and_trace(elapsed, answer.error_kind, false);
    }

    /// One event per call at `debug`, so `info` logging stays flat under
    /// load (its fields are only evaluated when it is enabled), and the
    /// call's span.
    fn log_and_trace(&self, elapsed: Duration, error_kind: Option<ErrorKind>, cancelled: bool) {
        let outcome = match error_kind {
            Some(kind) => kind.as_str(),
            None if cancelled => CANCELLED_OUTCOME,
            None => "success",
        };
        tracing::debug!(
            module = self.module,
            tool = self.tool,
            user_id_present = self.user_id_present,
            trace_id = self.trace.map(|trace| trace.trace_id()),
            duration_ms = elapsed.as_secs_f64() * 1000.0,
            outcome,
            "tool call"
        );
        crate::otlp::record_served_call(self.trace, elapsed, self.module, self.tool, error_kind, cancelled);
    }
}

impl Drop for CallRecord<'_> {
    fn drop(&mut self) {
        if let Some(in_flight) = self.in_flight.take() {
            let elapsed = in_flight.cancel();
            self.log_and_trace(elapsed, None, true);
        }
    }
}

/// A tool as the running module keeps it.
struct RegisteredTool {
    name: Arc<str>,
    definition: ToolDefinition,
    validator: ArgumentValidator,
    handler: Arc<dyn ErasedHandler>,
    timeout: std::time::Duration,
    metrics: ToolMetrics,
}

impl RegisteredTool {
    /// Compiles the tool's validators; the contract's rules are checked on
    /// the whole manifest afterwards.
    fn new(full_name: &str, tool: Tool, metrics: ToolMetrics) -> Result<Self, ModuleError> {
        let seconds = tool.timeout.as_secs_f64();
        if tool.timeout > MAX_TIMEOUT {
            return Err(ModuleError::TimeoutTooLong { tool: full_name.to_owned(), seconds });
        }
        let invalid = |e| ModuleError::InvalidSchema(full_name.to_owned(), e);
        let validator = ArgumentValidator::new(&tool.input_schema).map_err(invalid)?;
        let definition = ToolDefinition {
            name: full_name.to_owned(),
            description: tool.description,
            parameters: parameters_of(&tool.input_schema),
            required_permission: tool.permission,
            input_schema: Some(tool.input_schema),
            output_schema: Some(tool.output_schema),
            annotations: Some(tool.annotations),
            requires_approval: Some(tool.requires_approval),
            timeout_seconds: Some(seconds),
            risk_level: tool.risk_level,
        };
        Ok(Self {
            name: full_name.into(),
            definition,
            validator,
            handler: tool.handler,
            timeout: tool.timeout,
            metrics,
        })
    }

    /// The handler's future for `arguments`, once they fit the schema and
    /// the handler's argument type; `invalid_arguments` otherwise.
    fn start(&self, ctx: Context, arguments: Arguments<'_>) -> Result<JsonFuture, ToolError> {
        let (ctx, tree) = match arguments {
            Arguments::Tree(tree) => (ctx, tree),
            // The common call: checked and deserialized without a tree.
            Arguments::InPlace(in_place) if self.validator.accepts_in_place(&in_place) => {
                match self.handler.call_in_place(ctx, &in_place) {
                    Ok(running) => return Ok(running),
                    Err(ctx) => (ctx, in_place.to_tree()),
                }
            }
            Arguments::InPlace(in_place) => (ctx, in_place.to_tree()),
        };
        // Validated borrowed, then moved into the handler's argument type:
        // the tree is never copied.
        let arguments = Value::Object(tree);
        self.validator.check(&arguments).map_err(ToolError::invalid_arguments)?;
        Ok(self.handler.call(ctx, arguments))
    }
}

/// A call as [`ModuleService`] runs it: a [`ToolCall`], or the call
/// `POST /execute` received with its arguments read in place.
pub(crate) struct Call<'a> {
    pub(crate) tool_name: String,
    pub(crate) arguments: Arguments<'a>,
    pub(crate) user_id: Option<String>,
}

/// A call's arguments, a JSON object.
pub(crate) enum Arguments<'a> {
    /// Already a tree: a [`ToolCall`]'s, or an MCP call's.
    Tree(Map<String, Value>),
    /// An object read in place from the request body.
    InPlace(InPlaceValue<'a>),
}

impl From<ToolCall> for Call<'static> {
    fn from(call: ToolCall) -> Self {
        Self { tool_name: call.tool_name, arguments: Arguments::Tree(call.arguments), user_id: call.user_id }
    }
}

/// A checked module, ready to execute calls; shared by the HTTP server and
/// the in-process test client.
pub struct ModuleService {
    manifest: ModuleManifest,
    tools: HashMap<String, RegisteredTool>,
    /// The state and blocking-work bound every call's [`Context`] shares.
    shared: Arc<ModuleShared>,
    metrics: CallMetrics,
    /// Where calls to tools the module does not have are counted.
    unknown_tool: ToolMetrics,
}

impl ModuleService {
    /// The manifest served at `GET /manifest`.
    pub fn manifest(&self) -> &ModuleManifest {
        &self.manifest
    }

    /// The call metrics served at `GET /metrics`.
    pub fn metrics(&self) -> &CallMetrics {
        &self.metrics
    }

    /// Runs one call: finds the tool, validates the arguments, runs the
    /// handler under its timeout with panics contained, and logs one event.
    /// Every failure becomes a `success: false` result, never a panic.
    pub async fn execute(&self, call: ToolCall) -> ToolResult {
        self.answer(call.into(), None).await.into_tool_result()
    }

    /// [`ModuleService::execute`] with the result left serialized: what
    /// `POST /execute` writes out, in one pass; `trace` is the caller's
    /// `traceparent`, whose trace id the call's log events carry.
    pub(crate) async fn answer(&self, call: Call<'_>, trace: Option<TraceParent>) -> Answer {
        let started = Instant::now();
        let tool = self.tools.get(&call.tool_name);
        let mut record = CallRecord {
            module: &self.manifest.module_name,
            // What logs, metrics and spans call the tool: a name the caller
            // made up (up to a whole body long) is `unknown`, as in the metrics.
            tool: tool.map_or(UNKNOWN_TOOL_LABEL, |tool| &tool.name),
            user_id_present: call.user_id.is_some(),
            trace,
            in_flight: Some(tool.map_or(&self.unknown_tool, |tool| &tool.metrics).start_at(started)),
        };
        let answer = self.run(tool, call, started).await;
        record.finish(&answer);
        answer
    }

    /// Runs `call`, which arrived at `started`, with `tool`, the module's
    /// tool of that name (if any).
    async fn run(&self, tool: Option<&RegisteredTool>, call: Call<'_>, started: Instant) -> Answer {
        let Call { tool_name, arguments, user_id } = call;
        let Some(tool) = tool else {
            let message = self.unknown_tool(&tool_name);
            return Answer::failure(tool_name, ErrorKind::UnknownTool, message);
        };
        // The call's timeout counts from its arrival: no clock read of its own.
        let deadline = deadline_after(started, tool.timeout);
        let ctx = Context::new(tool.name.clone(), user_id, deadline, tool.timeout, self.shared.clone());
        // Cancelled when this call ends for any reason, including the caller
        // going away (the future is then dropped).
        let _cancel_on_exit = ctx.cancel_on_drop();
        let mut running = pin!(AssertUnwindSafe(async { tool.start(ctx, arguments)?.await }).catch_unwind());
        // A handler that finishes on its first poll needs no timer: the
        // deadline is armed (a timer-wheel entry) only when it has to wait,
        // and `timeout_at` polls the handler before its timer, as here.
        let outcome = match futures::poll!(running.as_mut()) {
            Poll::Ready(outcome) => Ok(outcome),
            // Boxed: the timer is large, and a handler that waits is rare
            // enough that the allocation costs less than carrying it here.
            Poll::Pending => Box::pin(tokio::time::timeout_at(deadline, running)).await,
        };
        match outcome {
            Ok(Ok(Ok(result))) => Answer::success(tool_name, result),
            Ok(Ok(Err(error))) => Answer::failure(tool_name, error.kind(), error.message()),
            Ok(Err(panic)) => {
                log_panic(&tool_name, panic.as_ref(), "tool handler panicked");
                Answer::failure(tool_name, ErrorKind::ExecutionFailed, PANIC_ANSWER)
            }
            Err(_elapsed) => {
                let message = format!(
                    "the tool did not finish within its timeout of {} s; try a smaller request",
                    tool.timeout.as_secs_f64()
                );
                Answer::failure(tool_name, ErrorKind::Timeout, message)
            }
        }
    }

    /// A message for an unknown tool that lists what there is.
    fn unknown_tool(&self, name: &str) -> String {
        let known: Vec<&str> = self.manifest.tools.iter().map(|t| t.name.as_str()).collect();
        format!(
            "no tool named `{name}` in module `{}`; available tools: {}",
            self.manifest.module_name,
            known.join(", ")
        )
    }
}

/// A [`ToolResult`] whose `result` is the handler's output already
/// serialized, so that `POST /execute` writes its answer in one pass; it
/// serializes to exactly the JSON of the [`ToolResult`] it converts to.
#[derive(Debug, Serialize)]
pub(crate) struct Answer {
    tool_name: String,
    success: bool,
    /// `None` (written `null`) on failure.
    result: Option<Box<RawValue>>,
    error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error_kind: Option<ErrorKind>,
}

impl Answer {
    fn success(tool_name: String, result: Box<RawValue>) -> Self {
        Self { tool_name, success: true, result: Some(result), error: None, error_kind: None }
    }

    fn failure(tool_name: String, kind: ErrorKind, error: impl Into<String>) -> Self {
        Self { tool_name, success: false, result: None, error: Some(error.into()), error_kind: Some(kind) }
    }

    /// The answer written out as the JSON of its [`ToolResult`], in a buffer
    /// of about its size. A success, the common answer, is written by hand
    /// around the serialized result: its field names need no escaping, which
    /// serde's derived code would check for each of them.
    pub(crate) fn to_json(&self) -> serde_json::Result<Vec<u8>> {
        let result = self.result.as_deref().map(RawValue::get);
        let error = self.error.as_ref().map_or(0, String::len);
        // The field names and escapes: no reallocation while it grows.
        let mut json = Vec::with_capacity(self.tool_name.len() + result.map_or(0, str::len) + error + 96);
        let written = match result {
            Some(result) if self.success => {
                json.extend_from_slice(br#"{"tool_name":"#);
                serde_json::to_writer(&mut json, &self.tool_name).map(|()| {
                    json.extend_from_slice(br#","success":true,"result":"#);
                    json.extend_from_slice(result.as_bytes());
                    json.extend_from_slice(br#","error":null}"#);
                })
            }
            _ => serde_json::to_writer(&mut json, self),
        };
        written.map(|()| json)
    }

    /// The handler's result as it was serialized, or the failure's message:
    /// what an MCP answer carries (it has no `error_kind`).
    pub(crate) fn into_outcome(self) -> Result<Box<RawValue>, String> {
        self.result.ok_or_else(|| self.error.unwrap_or_default())
    }

    /// The answer as a [`ToolResult`], its `result` parsed back into a tree.
    fn into_tool_result(self) -> ToolResult {
        let Some(raw) = self.result else {
            let kind = self.error_kind.unwrap_or(ErrorKind::ExecutionFailed);
            return ToolResult::failure(self.tool_name, kind, self.error.unwrap_or_default());
        };
        match read_back(&raw) {
            Ok(result) => ToolResult::success(self.tool_name, result),
            Err(message) => ToolResult::failure(self.tool_name, ErrorKind::ExecutionFailed, message),
        }
    }
}

/// A handler's serialized result as a tree, or why it cannot be one (only
/// past serde_json's nesting limit, 128 levels).
pub(crate) fn read_back(raw: &RawValue) -> Result<Value, String> {
    serde_json::from_str(raw.get()).map_err(|error| format!("the tool's result could not be read back: {error}"))
}

/// The text of a panic payload, when it has one.
/// What the caller (a model) is told of a panic in a tool's handler or in
/// its [`Context::blocking`] work; the panic's own text goes to the log
/// ([`log_panic`]), as it is written for the module's developers.
pub(crate) const PANIC_ANSWER: &str =
    "the tool failed with an internal error; the module is still running, and the call can be retried or reported";

/// Logs a panic of `tool`'s code at error level, with its payload's text.
pub(crate) fn log_panic(tool: &str, payload: &(dyn std::any::Any + Send), what: &str) {
    tracing::error!(tool = %tool, panic = %panic_message(payload), "{what}");
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-text panic payload".to_owned())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};
    use serde_json::json;

    use super::*;
    use crate::contract::ManifestError;
    use crate::{Context, Permission, ToolError, tool};

    #[derive(Deserialize, JsonSchema)]
    struct Echo {
        /// What to say back.
        text: String,
    }

    #[derive(Serialize, JsonSchema)]
    struct Echoed {
        /// The same text.
        text: String,
    }

    /// Say the text back.
    #[tool(idempotent)]
    async fn echo(_ctx: Context, args: Echo) -> Result<Echoed, ToolError> {
        Ok(Echoed { text: args.text })
    }

    /// A counter shared by the module's handlers.
    struct Prefix(String);

    /// Say the text back with the module's prefix and the caller's id.
    #[tool(permission = "admin", timeout_seconds = 0.2)]
    async fn stateful(ctx: Context, args: Echo) -> Result<Echoed, ToolError> {
        let prefix = ctx.state::<Prefix>()?;
        if args.text == "wait" {
            let cancelled = ctx.cancellation().clone();
            tokio::time::sleep(Duration::from_secs(5)).await;
            assert!(cancelled.is_cancelled());
        }
        let user = ctx.require_user_id()?;
        Ok(Echoed { text: format!("{}{}:{user}", prefix.0, args.text) })
    }

    fn module() -> Module {
        Module::new("unit", "Tools for unit tests.").tool(echo).tool(stateful).state(Prefix("> ".into()))
    }

    #[test]
    fn serve_follows_the_flags_it_was_given_not_the_command_line() {
        // A program embedding a module (this test) parses its own flags: the
        // test binary's command line has no `--stdio`, the flags given do.
        assert!(!SdkFlags::from_command_line().stdio);
        assert!(module().sdk_flags(SdkFlags { stdio: true }).serve_flags().stdio);
        assert!(!module().sdk_flags(SdkFlags { stdio: false }).serve_flags().stdio);
        assert_eq!(module().serve_flags(), SdkFlags::from_command_line(), "none given: the command line's");
    }

    #[test]
    fn duplicate_tools_are_refused_with_a_hint() {
        let error = module().tool(echo).build().err().unwrap();
        assert_eq!(error, ModuleError::Contract(ManifestError::DuplicateTool("unit.echo".into())));
        let message = error.to_string();
        assert!(message.contains("listed twice") && message.contains("different name"), "{message}");
        assert!(module().tool(echo().name("echo_again")).build().is_ok());
    }

    #[test]
    fn definitions_that_break_the_contract_are_refused() {
        let contract_break = |module: Module| match module.build() {
            Err(ModuleError::Contract(error)) => error,
            other => panic!("expected a contract error, got {:?}", other.err()),
        };
        let bad_module = contract_break(Module::new("Bad-Name", "x").tool(echo));
        assert!(matches!(bad_module, ManifestError::BadModuleName(_)));
        let bad_tool = contract_break(Module::new("m", "x").tool(echo().name("Echo")));
        assert!(matches!(bad_tool, ManifestError::BadToolName { .. }));
        let undocumented = Module::new("m", "x").tool(echo().name("e").description("  ")).build().err().unwrap();
        assert_eq!(
            undocumented.to_string(),
            "tool `m.e` has an empty description: add a doc comment (or pass a non-empty description)"
        );
        assert!(matches!(contract_break(Module::new("m", "x")), ManifestError::NoTools(_)));
        async fn takes_a_string(_ctx: Context, _text: String) -> Result<(), ToolError> {
            Ok(())
        }
        let not_object = Module::new("m", "x").tool(Tool::new("s", "x", takes_a_string)).build().err().unwrap();
        assert!(not_object.to_string().contains("must be a struct"), "{not_object}");
        let zero = contract_break(Module::new("m", "x").tool(echo().timeout(Duration::ZERO)));
        assert!(matches!(zero, ManifestError::BadTimeout { .. }));
        for too_long in [Duration::MAX, MAX_TIMEOUT + Duration::from_millis(1)] {
            let refused = Module::new("m", "x").tool(echo().timeout(too_long)).build().err().unwrap();
            assert!(matches!(refused, ModuleError::TimeoutTooLong { .. }), "{refused}");
            assert!(refused.to_string().contains("the longest allowed is 86400 s"), "{refused}");
        }
        assert!(Module::new("m", "x").tool(echo().timeout(MAX_TIMEOUT)).build().is_ok());
    }

    #[test]
    fn the_manifest_carries_every_extension() {
        let service = module().version("1.2.3").build().unwrap();
        let manifest = service.manifest();
        assert_eq!(manifest.contract_version.as_deref(), Some("1"));
        assert_eq!(manifest.version.as_deref(), Some("1.2.3"));
        let stateful = &manifest.tools[1];
        assert_eq!(stateful.name, "unit.stateful");
        assert_eq!(stateful.required_permission, Permission::Admin);
        assert_eq!(stateful.timeout_seconds, Some(0.2));
        assert_eq!(stateful.description, "Say the text back with the module's prefix and the caller's id.");
        assert!(manifest.tools[0].annotations.unwrap().idempotent);
        assert_eq!(stateful.parameters, parameters_of(stateful.input_schema.as_ref().unwrap()));
        assert!(stateful.output_schema.as_ref().unwrap()["properties"]["text"].is_object());
    }

    #[tokio::test]
    async fn calls_go_through_validation_state_and_timeouts() {
        let client = module().test_client().unwrap();
        let ok = client.call_as("u1", "stateful", json!({"text": "hi"})).await;
        assert_eq!(ok.result, json!({"text": "> hi:u1"}), "{ok:?}");
        let anonymous = client.call("stateful", json!({"text": "hi"})).await;
        assert_eq!(anonymous.error_kind, Some(ErrorKind::PermissionDenied));
        assert!(anonymous.error.unwrap().contains("user_id"));
        let invalid = client.call("echo", json!({"text": 5})).await;
        assert_eq!(invalid.error.as_deref(), Some("arguments.text: expected string, got 5"));
        let unknown = client.call("nope", json!({})).await;
        assert_eq!(unknown.error_kind, Some(ErrorKind::UnknownTool));
        assert!(unknown.error.unwrap().contains("unit.echo, unit.stateful"));
        let slow = client.call_as("u1", "stateful", json!({"text": "wait"})).await;
        assert_eq!(slow.error_kind, Some(ErrorKind::Timeout));
        assert!(slow.error.unwrap().contains("0.2 s"));
    }

    #[tokio::test]
    async fn a_schema_given_at_run_time_is_served_and_enforced() {
        async fn count(_ctx: Context, args: serde_json::Map<String, Value>) -> Result<usize, ToolError> {
            Ok(args.len())
        }
        let schema = json!({
            "type": "object",
            "properties": {"word": {"type": "string", "description": "A word.", "maxLength": 3}},
            "required": ["word"],
            "additionalProperties": false
        });
        let client =
            Module::new("m", "x").tool(Tool::new("count", "Count.", count).input_schema(schema)).test_client().unwrap();
        let definition = &client.manifest().tools[0];
        assert_eq!(definition.parameters[0].name, "word");
        assert_eq!(definition.input_schema.as_ref().unwrap()["properties"]["word"]["maxLength"], 3);
        assert_eq!(client.call("count", json!({"word": "abc"})).await.result, json!(1));
        let long = client.call("count", json!({"word": "abcd"})).await;
        assert_eq!(long.error_kind, Some(ErrorKind::InvalidArguments));
        let extra = client.call("count", json!({"word": "a", "other": 1})).await;
        assert_eq!(extra.error_kind, Some(ErrorKind::InvalidArguments));
    }

    #[test]
    fn an_answer_is_written_as_the_tool_result_it_stands_for() {
        let raw = serde_json::value::to_raw_value(&json!({"text": "hi", "n": [1, 2]})).unwrap();
        let answers = [
            Answer::success("m.echo".into(), raw),
            Answer::success("m.\"quoted\"\n".into(), serde_json::value::to_raw_value("text").unwrap()),
            Answer::failure("m.echo".into(), ErrorKind::InvalidArguments, "arguments.text: required field is missing"),
        ];
        for answer in answers {
            let written = String::from_utf8(answer.to_json().unwrap()).unwrap();
            assert_eq!(written, serde_json::to_string(&answer).unwrap());
            assert_eq!(written, serde_json::to_string(&answer.into_tool_result()).unwrap());
        }
    }

    /// Panics in its blocking work.
    #[tool]
    async fn blocking_panic(ctx: Context, _args: serde_json::Map<String, serde_json::Value>) -> Result<u8, ToolError> {
        ctx.blocking(|_: &Prefix| -> Result<u8, ToolError> { panic!("secret detail of the module") }).await
    }

    #[tokio::test]
    async fn a_panic_in_blocking_work_is_answered_as_a_handler_panic_without_its_text() {
        let client = module().tool(blocking_panic).test_client().unwrap();
        let result = client.call("blocking_panic", json!({})).await;
        assert_eq!(result.error_kind, Some(ErrorKind::ExecutionFailed));
        assert_eq!(result.error.as_deref(), Some(PANIC_ANSWER));
    }

    /// Where [`held`]'s blocking work waits: a message for each piece to
    /// end; and how many pieces started.
    struct Gate(std::sync::Mutex<std::sync::mpsc::Receiver<()>>, Arc<std::sync::atomic::AtomicUsize>);

    /// Blocks until the gate lets it through. The timeout is long enough
    /// for a loaded machine to run the work once let through (the third
    /// call of the test below), and the first call waits it out.
    #[tool(timeout_seconds = 2.0)]
    async fn held(ctx: Context, _args: serde_json::Map<String, serde_json::Value>) -> Result<u8, ToolError> {
        ctx.blocking(|gate: &Gate| {
            gate.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let gate = gate.0.lock().map_err(|_| ToolError::execution_failed("poisoned"))?;
            gate.recv_timeout(Duration::from_secs(20)).map_err(|_| ToolError::execution_failed("never let through"))?;
            Ok::<_, ToolError>(1)
        })
        .await
    }

    #[tokio::test]
    async fn blocking_work_past_its_call_keeps_its_permit_and_a_call_left_without_one_is_unavailable() {
        let (open, gate) = std::sync::mpsc::channel();
        let started = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let module = Module::new("m", "x").tool(held).state(Gate(std::sync::Mutex::new(gate), started.clone()));
        let service = module.build_limited(1).unwrap();
        let call = || ToolCall { tool_name: "m.held".into(), arguments: serde_json::Map::new(), user_id: None };
        let first = service.execute(call()).await;
        assert_eq!(first.error_kind, Some(ErrorKind::Timeout), "{first:?}");
        // The first call's work runs on past its timeout, holding the only
        // permit; it ends just before the second call's deadline, too late
        // for the second call's work to be worth starting.
        let release = async {
            tokio::time::sleep(Duration::from_millis(1900)).await;
            open.send(()).unwrap();
        };
        let (second, ()) = tokio::join!(service.execute(call()), release);
        assert_eq!(second.error_kind, Some(ErrorKind::Unavailable), "{second:?}");
        assert!(second.error.unwrap().contains("(1 at once, MAX_BLOCKING_CALLS)"));
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(started.load(std::sync::atomic::Ordering::SeqCst), 1, "the second call's work never ran");
        // Once the work ends, its permit is back.
        open.send(()).unwrap();
        open.send(()).unwrap();
        let third = service.execute(call()).await;
        assert_eq!(third.result, json!(1), "{third:?}");
    }

    #[tokio::test]
    async fn missing_state_is_reported_not_panicked() {
        let client = Module::new("m", "x").tool(stateful).test_client().unwrap();
        let result = client.call_as("u", "stateful", json!({"text": "hi"})).await;
        assert_eq!(result.error_kind, Some(ErrorKind::ExecutionFailed));
        assert!(result.error.unwrap().contains("Prefix"));
    }
}
