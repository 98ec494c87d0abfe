//! A real module logs the trace id of a call's `traceparent` (as the
//! orchestrator sends it: a header on `/execute`, `params._meta.traceparent`
//! on an MCP `tools/call`, SEP-414) in the call's `tool call` event, and
//! names a tool it does not have `unknown` in that event and in the call's
//! span.

use std::io::{BufRead, Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use test_support::{OtlpReceiver, Process, built_binary};

#[tokio::test]
async fn the_tool_call_event_carries_the_callers_trace_id() {
    let mut command = Command::new(built_binary("examples/demo"));
    command.env("RUST_LOG", "module_sdk=debug");
    let demo = Process::start(command);
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let response = demo
        .client()
        .request(reqwest::Method::POST, "/execute")
        .header("traceparent", format!("00-{trace_id}-00f067aa0ba902b7-01"))
        .json(&json!({"tool_name": "demo.greet", "arguments": {"name": "Ann"}, "user_id": null}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    // A call without one logs no trace id.
    demo.client().call_ok("demo.greet", json!({"name": "Bo"}), None).await;
    // The log reader may be behind the answers: wait (at most 10 s) for both events.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let calls = loop {
        let calls: Vec<_> = demo.events().into_iter().filter(|event| event["message"] == "tool call").collect();
        if calls.len() >= 2 || tokio::time::Instant::now() >= deadline {
            break calls;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0]["trace_id"], trace_id, "{:?}", calls[0]);
    assert!(calls[1].get("trace_id").is_none(), "{:?}", calls[1]);
}

#[tokio::test]
async fn a_made_up_tool_name_is_unknown_in_the_span_and_the_log_event() {
    let receiver = OtlpReceiver::start();
    let mut command = Command::new(built_binary("examples/demo"));
    command
        .env("RUST_LOG", "module_sdk=debug")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint())
        .env("OTEL_BSP_SCHEDULE_DELAY", "50");
    let demo = Process::start(command);
    let made_up = format!("demo.{}", "z".repeat(100_000));
    let answer = demo.client().call(&made_up, json!({}), None).await;
    assert_eq!(answer["error_kind"], "unknown_tool", "{answer}");
    demo.client().call_ok("demo.greet", json!({"name": "Ann"}), None).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while receiver.spans().len() < 2 {
        assert!(tokio::time::Instant::now() < deadline, "the calls' spans never arrived: {:?}", receiver.spans());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let spans = receiver.spans();
    let names: Vec<&str> = spans.iter().map(|span| span.name.as_str()).collect();
    assert_eq!(names, ["execute_tool unknown", "execute_tool demo.greet"]);
    assert_eq!(spans[0].attributes["gen_ai.tool.name"], "unknown");
    let logged = |line: &str| line.contains("tool call") && line.contains("demo.greet");
    assert!(demo.wait_for_log_line(logged, Duration::from_secs(10)), "no event for the second call");
    let events = demo.events();
    let tools: Vec<&serde_json::Value> =
        events.iter().filter(|event| event["message"] == "tool call").map(|event| &event["tool"]).collect();
    assert_eq!(tools, [&json!("unknown"), &json!("demo.greet")]);
}

/// A `tools/call` of `demo.greet` with `traceparent` in its `_meta`.
fn traced_call(id: u32, traceparent: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "greet", "arguments": {"name": "Ann"}, "_meta": {"traceparent": traceparent}}})
}

/// The `tool call` events among `events`, once there are `count` of them
/// (or after 10 s: the log reader may be behind the answers).
async fn tool_call_events(demo: &Process, count: usize) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let calls: Vec<_> = demo.events().into_iter().filter(|event| event["message"] == "tool call").collect();
        if calls.len() >= count || tokio::time::Instant::now() >= deadline {
            return calls;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn an_mcp_tools_call_logs_the_trace_id_of_its_meta_traceparent() {
    let mut command = Command::new(built_binary("examples/demo"));
    command.env("RUST_LOG", "module_sdk=debug");
    let demo = Process::start(command);
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    for (id, traceparent) in [(1, format!("00-{trace_id}-00f067aa0ba902b7-01")), (2, "00-not-a-trace".to_owned())] {
        let response = reqwest::Client::new()
            .post(format!("{}/mcp", demo.url()))
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .json(&traced_call(id, &traceparent))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let answer: Value = response.json().await.unwrap();
        assert_eq!(answer["result"]["isError"], false, "{answer}");
    }
    let calls = tool_call_events(&demo, 2).await;
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0]["trace_id"], trace_id, "{:?}", calls[0]);
    assert!(calls[1].get("trace_id").is_none(), "an invalid traceparent is ignored: {:?}", calls[1]);
}

#[test]
fn an_mcp_tools_call_over_stdio_logs_the_trace_id_of_its_meta_traceparent() {
    let mut child = Command::new(built_binary("examples/demo"))
        .arg("--stdio")
        .env_remove("SERVICE_AUTH_TOKEN")
        .env("RUST_LOG", "module_sdk=debug")
        .env("LOG_FORMAT", "json")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let trace_id = "0af7651916cd43dd8448eb211c80319c";
    let messages = [
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        traced_call(1, &format!("00-{trace_id}-b7ad6b7169203331-01")),
    ];
    let mut input = child.stdin.take().unwrap();
    for message in messages {
        writeln!(input, "{message}").unwrap();
    }
    input.flush().unwrap();
    let mut output = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    // The initialize answer, then the call's.
    for _ in 0..2 {
        output.next().expect("an answer").unwrap();
    }
    drop(input);
    let mut logs = String::new();
    child.stderr.take().unwrap().read_to_string(&mut logs).unwrap();
    assert!(child.wait().unwrap().success());
    let calls: Vec<Value> = logs
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event["message"] == "tool call")
        .collect();
    assert_eq!(calls.len(), 1, "{logs}");
    assert_eq!(calls[0]["trace_id"], trace_id, "{:?}", calls[0]);
}
