//! Spans over OTLP from a real orchestrator and a real SDK module: a
//! caller's trace gets the orchestrator's span and, as its child, the
//! module's, both sent (flushed at a graceful shutdown) to an OTLP/HTTP
//! receiver; and a collector that never answers holds no call.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{BINARY, HungServer, module_services};
use module_sdk::service::TraceParent;
use serde_json::{Value, json};
use test_support::{OtlpReceiver, Process, ReceivedSpan, built_binary};

const CALLER_TRACE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// The OTLP span kinds.
const SERVER: i32 = 2;
const CLIENT: i32 = 3;

/// The demo module exporting to `endpoint` with `env` besides.
fn demo_module(endpoint: &str, env: &[(&str, &str)]) -> Process {
    let mut command = Command::new(built_binary("examples/demo"));
    command.env_clear().env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint).envs(env.iter().copied());
    Process::start(command)
}

/// `orchestrator serve` routing to `module`, exporting to `endpoint` with `env` besides.
async fn orchestrator(module: &Process, endpoint: &str, env: &[(&str, &str)]) -> Process {
    let mut command = Command::new(BINARY);
    command
        .arg("serve")
        .env_clear()
        .env("MODULE_SERVICES", module_services(&[("demo", module.url())]))
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .envs(env.iter().copied());
    let orchestrator = Process::start(command);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, modules) = orchestrator.client().get("/modules").await;
        if modules["modules"]
            .as_array()
            .is_some_and(|all| all.iter().any(|m| m["name"] == "demo" && m["state"] == "up"))
        {
            return orchestrator;
        }
        assert!(tokio::time::Instant::now() < deadline, "the demo module never came up: {modules}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `POST /execute` of `tool` with `arguments` and `traceparent` (none:
/// the orchestrator starts the trace): the ToolResult.
async fn call(orchestrator: &Process, tool: &str, arguments: Value, traceparent: Option<&str>) -> Value {
    let mut request = orchestrator.client().request(reqwest::Method::POST, "/execute");
    if let Some(traceparent) = traceparent {
        request = request.header("traceparent", traceparent);
    }
    let response = request.json(&json!({"tool_name": tool, "arguments": arguments})).send().await.unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

fn only<'a>(spans: &'a [ReceivedSpan], service: &str) -> &'a ReceivedSpan {
    let matching: Vec<_> = spans.iter().filter(|span| span.service == service).collect();
    assert_eq!(matching.len(), 1, "one span of {service}: {spans:?}");
    matching[0]
}

#[tokio::test]
async fn both_sides_of_a_call_are_spans_of_the_callers_trace() {
    let receiver = OtlpReceiver::start();
    // Batches wait 10 minutes: the spans can only arrive through the flush at shutdown.
    let slow_batches = ("OTEL_BSP_SCHEDULE_DELAY", "600000");
    let mut module = demo_module(&receiver.endpoint(), &[slow_batches, ("OTEL_SERVICE_NAME", "greeter")]);
    let mut orchestrator = orchestrator(&module, &receiver.endpoint(), &[slow_batches]).await;

    let result = call(&orchestrator, "demo.greet", json!({"name": "Ann"}), Some(CALLER_TRACE)).await;
    assert_eq!(result["success"], true, "{result}");
    let unsampled = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00";
    call(&orchestrator, "demo.greet", json!({"name": "Bo"}), Some(unsampled)).await;
    let refused = "00-11111111111111111111111111111111-2222222222222222-01";
    let result = call(&orchestrator, "demo.nothing", json!({}), Some(refused)).await;
    assert_eq!(result["error_kind"], "unknown_tool", "{result}");

    assert!(receiver.spans().is_empty(), "nothing is sent before a batch is due");
    orchestrator.terminate();
    module.terminate();

    let caller = TraceParent::parse(CALLER_TRACE).unwrap();
    let spans = receiver.wait_for_trace(&caller.trace_id(), 2, Duration::from_secs(10)).await;
    let routed = only(&spans, "orchestrator");
    let served = only(&spans, "greeter");
    assert_eq!(routed.parent_span_id, caller.parent_id(), "the orchestrator's span is the caller's child");
    assert_eq!(served.parent_span_id, routed.span_id, "the module's span is the orchestrator's child");
    assert_eq!((routed.kind, served.kind), (CLIENT, SERVER));
    for span in [routed, served] {
        assert_eq!(span.name, "execute_tool demo.greet");
        assert_eq!(span.attributes["gen_ai.tool.name"], "demo.greet");
        assert_eq!(span.attributes["tool.module"], "demo");
        assert_eq!(span.attributes["tool.outcome"], "success");
    }

    let refused = receiver.wait_for_trace(&TraceParent::parse(refused).unwrap().trace_id(), 1, Duration::ZERO).await;
    let refused = only(&refused, "orchestrator");
    assert_eq!(refused.attributes["error.type"], "unknown_tool");
    assert_eq!(refused.attributes["tool.outcome"], "unknown_tool");
    let unsampled_id = TraceParent::parse(unsampled).unwrap().trace_id();
    assert!(receiver.spans().iter().all(|span| span.trace_id != unsampled_id), "an unsampled trace is not exported");
}

#[tokio::test]
async fn the_sampler_settings_choose_which_traces_are_exported() {
    let receiver = OtlpReceiver::start();
    let slow_batches = ("OTEL_BSP_SCHEDULE_DELAY", "600000");
    // The module exports no trace at all; the orchestrator a trace its caller sampled, none it starts itself.
    let module_env = [slow_batches, ("OTEL_SERVICE_NAME", "greeter"), ("OTEL_TRACES_SAMPLER", "always_off")];
    let mut module = demo_module(&receiver.endpoint(), &module_env);
    let orchestrator_env = [slow_batches, ("OTEL_TRACES_SAMPLER", "parentbased_always_off")];
    let mut orchestrator = orchestrator(&module, &receiver.endpoint(), &orchestrator_env).await;
    for traceparent in [Some(CALLER_TRACE), None] {
        let result = call(&orchestrator, "demo.greet", json!({"name": "Ann"}), traceparent).await;
        assert_eq!(result["success"], true, "{result}");
    }
    orchestrator.terminate();
    module.terminate();

    let caller = TraceParent::parse(CALLER_TRACE).unwrap();
    let spans = receiver.wait_for_trace(&caller.trace_id(), 1, Duration::from_secs(10)).await;
    assert_eq!(only(&spans, "orchestrator").parent_span_id, caller.parent_id());
    let all = receiver.spans();
    assert_eq!(all.len(), 1, "neither the module's spans nor a trace the orchestrator started: {all:?}");
}

#[tokio::test]
async fn a_collector_that_never_answers_holds_no_call() {
    let hung = HungServer::start();
    // Exports start at once and hang; a queue of 4 spans fills and drops the rest.
    let env = [("OTEL_BSP_SCHEDULE_DELAY", "10"), ("OTEL_BSP_MAX_QUEUE_SIZE", "4")];
    let module = demo_module(&hung.url(), &env);
    let orchestrator = orchestrator(&module, &hung.url(), &env).await;
    for process in [&module, &orchestrator] {
        let logs = process.logs();
        assert!(logs.iter().any(|line| line.contains("exporting call spans over OTLP")), "{logs:?}");
    }
    for n in 0..40 {
        let traceparent = format!("00-4bf92f3577b34da6a3ce929d0e0e{n:04x}-00f067aa0ba902b7-01");
        let result =
            call(&orchestrator, "demo.greet", json!({"name": format!("caller {n}")}), Some(&traceparent)).await;
        assert_eq!(result["success"], true, "{result}");
    }
}
