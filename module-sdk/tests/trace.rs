//! A real module logs the trace id of a call's `traceparent` (as the
//! orchestrator sends it) in the call's `tool call` event, and names a
//! tool it does not have `unknown` in that event and in the call's span.

use std::process::Command;
use std::time::Duration;

use serde_json::json;
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
