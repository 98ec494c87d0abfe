//! W3C trace context through a real orchestrator: a caller's `traceparent`
//! reaches the module with the same trace id and the orchestrator's own span
//! id, which its `routed call` event records; without one (or with an
//! invalid one) a trace is started. The same holds for a call through
//! `/mcp` and for a call run when its approval is decided; a module that is
//! an MCP server gets the trace in the call's `_meta`.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use common::{ModuleServer, OrchestratorProcess, module_services};
use module_sdk::contract::{ToolCall, ToolResult};
use module_sdk::service::TraceParent;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion,
    RequestParamsMeta,
};
use rmcp::service::{ClientLifecycleMode, RunningService, serve_client_with_lifecycle};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient};
use serde_json::{Value, json};

const CALLER_TRACE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
/// Another caller's trace, given in an MCP message's `_meta`.
const META_TRACE: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

/// A hand-written module with `traced.ping` that keeps every `traceparent` it is sent.
fn recording_module() -> (Router, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let manifest = json!({
        "module_name": "traced",
        "description": "Remembers trace headers.",
        "tools": [
            {"name": "traced.ping", "description": "Ping.", "parameters": [], "required_permission": "guest"},
            {"name": "traced.wipe", "description": "Wipe.", "parameters": [], "required_permission": "guest",
             "requires_approval": true}
        ]
    });
    let kept = Arc::clone(&seen);
    let router = Router::new().route("/manifest", get(move || std::future::ready(Json(manifest.clone())))).route(
        "/execute",
        post(move |headers: HeaderMap, Json(call): Json<ToolCall>| {
            let header = headers.get("traceparent").and_then(|v| v.to_str().ok()).unwrap_or("none").to_owned();
            kept.lock().unwrap().push(header);
            std::future::ready(Json(ToolResult::success(call.tool_name, json!("pong"))))
        }),
    );
    (router, seen)
}

/// `POST /execute` of `traced.ping` with `traceparent` (if any): the trace the module got.
async fn ping(orchestrator: &OrchestratorProcess, seen: &Mutex<Vec<String>>, traceparent: Option<&str>) -> TraceParent {
    let mut request = reqwest::Client::new()
        .post(format!("{}/execute", orchestrator.url))
        .json(&json!({"tool_name": "traced.ping", "arguments": {}}));
    if let Some(traceparent) = traceparent {
        request = request.header("traceparent", traceparent);
    }
    let result: Value = request.send().await.unwrap().json().await.unwrap();
    assert_eq!(result["success"], true, "{result}");
    let header = seen.lock().unwrap().pop().expect("the module was called");
    TraceParent::parse(&header).unwrap_or_else(|| panic!("the module got a valid traceparent, not {header:?}"))
}

#[tokio::test]
async fn the_callers_trace_reaches_the_module_and_the_log_or_one_is_started() {
    let (module, seen) = recording_module();
    let module = ModuleServer::start(module);
    let orchestrator = OrchestratorProcess::start(&[
        ("MODULE_SERVICES", &module_services(&[("traced", module.url())])),
        ("RUST_LOG", "orchestrator=debug"),
    ]);
    orchestrator.wait_for_module("traced", "up", Duration::from_secs(10)).await;

    let caller = TraceParent::parse(CALLER_TRACE).unwrap();
    let sent = ping(&orchestrator, &seen, Some(CALLER_TRACE)).await;
    assert_eq!(sent.trace_id(), caller.trace_id(), "the caller's trace goes on");
    assert_ne!(sent.parent_id(), caller.parent_id(), "the orchestrator's hop has a span of its own");
    assert!(sent.to_string().ends_with("-01"), "the caller's flags go on: {sent}");
    let logged = routed_call_event(&orchestrator, &caller.trace_id()).await;
    assert!(logged.contains(&sent.parent_id()), "and the span sent to the module: {logged}");

    let started = ping(&orchestrator, &seen, None).await;
    let invalid = ping(&orchestrator, &seen, Some("00-not-a-trace-01")).await;
    for trace in [started, invalid] {
        assert_ne!(trace.trace_id(), caller.trace_id());
        routed_call_event(&orchestrator, &trace.trace_id()).await;
    }
    assert_ne!(started.trace_id(), invalid.trace_id(), "each request without a trace starts its own");
}

/// The `routed call` log event naming `trace_id`, once the log reader has it
/// (panics after 10 s without it).
async fn routed_call_event(orchestrator: &OrchestratorProcess, trace_id: &str) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let found =
            orchestrator.logs().into_iter().find(|line| line.contains("routed call") && line.contains(trace_id));
        match found {
            Some(line) => return line,
            None if tokio::time::Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(20)).await,
            None => panic!("no routed call event names trace {trace_id}: {:?}", orchestrator.logs()),
        }
    }
}

/// The trace the module got for its last call.
fn last_trace(seen: &Mutex<Vec<String>>) -> TraceParent {
    let header = seen.lock().unwrap().pop().expect("the module was called");
    TraceParent::parse(&header).unwrap_or_else(|| panic!("the module got a valid traceparent, not {header:?}"))
}

/// The recording module, what it saw and an orchestrator routing to it.
async fn traced_fleet() -> (ModuleServer, Arc<Mutex<Vec<String>>>, OrchestratorProcess) {
    let (module, seen) = recording_module();
    let module = ModuleServer::start(module);
    let orchestrator =
        OrchestratorProcess::start(&[("MODULE_SERVICES", &module_services(&[("traced", module.url())]))]);
    orchestrator.wait_for_module("traced", "up", Duration::from_secs(10)).await;
    (module, seen, orchestrator)
}

#[tokio::test]
async fn the_callers_trace_reaches_the_module_through_mcp() {
    let (_module, seen, orchestrator) = traced_fleet().await;
    let caller = TraceParent::parse(CALLER_TRACE).unwrap();
    // A 2026-07-28 client's `tools/call`, its HTTP request carrying the
    // caller's `traceparent`: run directly, and as an MCP task for a client
    // that declares the tasks extension.
    let plain = mcp_client(&orchestrator, ()).await;
    let answer = plain.call_tool(CallToolRequestParams::new("traced__ping")).await.expect("a tool result");
    assert_ne!(answer.is_error, Some(true), "{answer:?}");
    let sent = last_trace(&seen);
    assert_eq!(sent.trace_id(), caller.trace_id(), "the caller's trace goes on through /mcp");
    assert_ne!(sent.parent_id(), caller.parent_id());
    // A `traceparent` in the message's `_meta` (SEP-414) is the caller's too, and wins.
    let mut params = CallToolRequestParams::new("traced__ping");
    params.set_traceparent(META_TRACE);
    plain.call_tool(params).await.expect("a tool result");
    let meta = TraceParent::parse(META_TRACE).unwrap();
    assert_eq!(last_trace(&seen).trace_id(), meta.trace_id(), "the message's own trace goes on");
    plain.cancel().await.unwrap();

    let tasks = ClientConfig::new(ClientCapabilities::builder().enable_tasks().build(), Implementation::new("t", "1"));
    let tasks = mcp_client(&orchestrator, tasks).await;
    let answer = tasks.call_tool_once(CallToolRequestParams::new("traced__ping")).await.expect("an answer");
    assert!(
        matches!(answer, CallToolResponse::Complete(_)),
        "a ping answers before it would become a task: {answer:?}"
    );
    assert_eq!(last_trace(&seen).trace_id(), caller.trace_id(), "and through a call run as a task");
    tasks.cancel().await.unwrap();
}

/// A 2026-07-28 MCP client of `orchestrator`'s `/mcp` (with `handler`)
/// whose requests carry [`CALLER_TRACE`].
async fn mcp_client<H: ClientHandler>(orchestrator: &OrchestratorProcess, handler: H) -> RunningService<RoleClient, H> {
    let headers = HashMap::from([(HeaderName::from_static("traceparent"), HeaderValue::from_static(CALLER_TRACE))]);
    let config =
        StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", orchestrator.url)).custom_headers(headers);
    let discover = ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
    serve_client_with_lifecycle(handler, test_support::mcp_client::transport(config), discover)
        .await
        .expect("connected")
}

#[tokio::test]
async fn an_approved_call_goes_on_in_the_trace_of_the_request_approving_it() {
    let (_module, seen, orchestrator) = traced_fleet().await;
    let wipe = json!({"tool_name": "traced.wipe", "arguments": {}});
    let (status, pending) = orchestrator.post_with("/execute", None, &wipe).await;
    assert_eq!(status, 200, "{pending}");
    let (_, approvals) = orchestrator.get_with("/approvals", None).await;
    let id = approvals["approvals"][0]["id"].as_str().unwrap_or_else(|| panic!("the call waits: {approvals}"));
    let decided = reqwest::Client::new()
        .post(format!("{}/approvals/{id}", orchestrator.url))
        .header("traceparent", CALLER_TRACE)
        .json(&json!({"decision": "approve"}))
        .send()
        .await
        .unwrap();
    assert_eq!(decided.status(), 200, "{}", decided.text().await.unwrap());
    let (caller, sent) = (TraceParent::parse(CALLER_TRACE).unwrap(), last_trace(&seen));
    assert_eq!(sent.trace_id(), caller.trace_id(), "the approving request's trace goes on to the call");
    assert_ne!(sent.parent_id(), caller.parent_id());
}

/// A hand-written MCP server (2025-11-25, with a session) with the tool
/// `ping`, keeping the `_meta` `traceparent` of every `tools/call`.
fn recording_mcp_server() -> (ModuleServer, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&seen);
    let answer = move |Json(request): Json<Value>| {
        let result = match request["method"].as_str() {
            Some("initialize") => json!({
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "traced", "version": "1.0.0"}
            }),
            Some("tools/list") => {
                json!({"tools": [{"name": "ping", "description": "Ping.", "inputSchema": {"type": "object"}}]})
            }
            Some("tools/call") => {
                let traceparent = request["params"]["_meta"]["traceparent"].as_str().unwrap_or("none");
                kept.lock().unwrap().push(traceparent.to_owned());
                json!({"content": [{"type": "text", "text": "pong"}]})
            }
            _ => return std::future::ready(StatusCode::ACCEPTED.into_response()),
        };
        let answer = json!({"jsonrpc": "2.0", "id": request["id"], "result": result});
        std::future::ready(([("mcp-session-id", "session-1")], Json(answer)).into_response())
    };
    let router = Router::new().route(
        "/mcp",
        post(answer)
            .get(|| std::future::ready(StatusCode::METHOD_NOT_ALLOWED))
            .delete(|| std::future::ready(StatusCode::OK)),
    );
    (ModuleServer::start(router), seen)
}

#[tokio::test]
async fn a_call_to_an_mcp_server_carries_the_trace_in_its_meta() {
    let (server, seen) = recording_mcp_server();
    let services = json!({"traced": format!("mcp+{}/mcp", server.url())}).to_string();
    let orchestrator = OrchestratorProcess::start(&[("MODULE_SERVICES", &services)]);
    orchestrator.wait_for_module("traced", "up", Duration::from_secs(20)).await;
    // An MCP server's tools need `user` by default.
    let call = json!({"tool_name": "traced.ping", "arguments": {}, "user_id": "u1", "user_permission": "user"});
    let request =
        reqwest::Client::new().post(format!("{}/execute", orchestrator.url)).header("traceparent", CALLER_TRACE);
    let result: Value = request.json(&call).send().await.unwrap().json().await.unwrap();
    assert_eq!(result["success"], true, "{result}");
    let (caller, sent) = (TraceParent::parse(CALLER_TRACE).unwrap(), last_trace(&seen));
    assert_eq!(sent.trace_id(), caller.trace_id(), "the caller's trace goes on in the call's `_meta`");
    assert_ne!(sent.parent_id(), caller.parent_id());
}
