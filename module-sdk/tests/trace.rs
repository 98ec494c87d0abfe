//! A real module logs the trace id of a call's `traceparent` (as the
//! orchestrator sends it) in the call's `tool call` event.

use std::process::Command;
use std::time::Duration;

use serde_json::json;
use test_support::{Process, built_binary};

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
