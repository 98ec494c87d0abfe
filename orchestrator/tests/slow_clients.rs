//! Whole-process tests of the orchestrator's connection budgets
//! (`HEADER_READ_TIMEOUT_SECONDS`, `BODY_READ_TIMEOUT_SECONDS`,
//! `MAX_CONNECTIONS`, `MAX_BODY_BYTES`, `MAX_HEADER_BYTES`, served by `module_sdk::service::serve_router`):
//! raw TCP clients send their requests slowly, or not at all, or announce
//! bodies that are too large, or read a large answer slowly, to the real
//! binary. The checks are test-support's, shared with the SDK's tests.

mod common;

use std::process::Command;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::routing::post;
use common::{ModuleServer, OrchestratorProcess, module_services};
use module_sdk::service::DEFAULT_MAX_HEADER_BYTES;
use serde_json::json;
use test_support::Process;
use test_support::connection_budgets::{
    SlowClients, assert_chunked_body_stopped_at_the_limit, assert_connection_cap, assert_declared_body_refused_early,
    assert_large_heads_refused, assert_slow_reader_gets_the_whole_answer, slow_reader_answer_bytes,
};

/// A `POST` route that reads a JSON body.
const POST_PATH: &str = "/v1/tool-calls?format=openai";

/// `orchestrator serve` with no modules and only `env`.
fn start_orchestrator(env: &[(&str, &str)]) -> Process {
    let mut command = Command::new(env!("CARGO_BIN_EXE_orchestrator"));
    command.arg("serve").env_clear().env("RUST_LOG", "warn").envs(env.iter().copied());
    Process::start(command)
}

/// `GET path` on a fresh connection: the status.
async fn get_status(url: &str, path: &str) -> u16 {
    reqwest::get(format!("{url}{path}")).await.unwrap().status().as_u16()
}

#[tokio::test]
async fn hundreds_of_slow_clients_are_closed_while_normal_calls_are_served() {
    let orchestrator = start_orchestrator(&[("HEADER_READ_TIMEOUT_SECONDS", "2"), ("BODY_READ_TIMEOUT_SECONDS", "2")]);
    let slow = SlowClients::hold(orchestrator.address(), POST_PATH, 200).await;

    assert_eq!(get_status(&orchestrator.url(), "/health").await, 200);
    assert_eq!(get_status(&orchestrator.url(), "/tools").await, 200);

    slow.assert_closed(Duration::from_secs(2)).await;
    assert_eq!(get_status(&orchestrator.url(), "/health").await, 200);
}

#[tokio::test]
async fn at_the_connection_cap_new_connections_wait_for_a_free_slot() {
    let orchestrator = start_orchestrator(&[("MAX_CONNECTIONS", "4"), ("HEADER_READ_TIMEOUT_SECONDS", "3")]);
    assert_connection_cap(orchestrator.address(), POST_PATH, 4, Duration::from_secs(3)).await;
}

#[tokio::test]
async fn bodies_over_the_limit_are_refused_early_whatever_their_framing() {
    let orchestrator = start_orchestrator(&[("MAX_BODY_BYTES", "1000")]);
    assert_declared_body_refused_early(orchestrator.address(), POST_PATH).await;
    assert_chunked_body_stopped_at_the_limit(orchestrator.address(), POST_PATH).await;
    assert_eq!(get_status(&orchestrator.url(), "/health").await, 200);
}

/// Module `large`, whose one tool `large.read` answers a ToolResult of
/// `bytes` bytes of text.
fn large_answer_module(bytes: usize) -> Router {
    let tool =
        json!({"name": "large.read", "description": "Reads a lot.", "parameters": [], "required_permission": "guest"});
    let manifest = json!({"module_name": "large", "description": "Answers at length.", "tools": [tool]});
    let answer = json!({"tool_name": "large.read", "success": true, "result": "x".repeat(bytes)});
    let answer = Bytes::from(answer.to_string());
    common::modules::manifest_module(manifest)
        .route("/execute", post(move || std::future::ready(([("content-type", "application/json")], answer.clone()))))
}

#[tokio::test]
async fn a_large_answer_read_slowly_is_not_cut_off_by_the_header_timeout() {
    // An answer longer than the connection's buffers hold, read slower than they drain.
    let bytes = slow_reader_answer_bytes();
    let module = ModuleServer::start(large_answer_module(bytes));
    let orchestrator = OrchestratorProcess::start(&[
        ("MODULE_SERVICES", &module_services(&[("large", module.url())])),
        ("HEADER_READ_TIMEOUT_SECONDS", "1"),
        ("MAX_ANSWER_BYTES", &(2 * bytes).to_string()),
    ]);
    orchestrator.wait_for_module("large", "up", Duration::from_secs(10)).await;
    let call = json!({"tool_name": "large.read", "arguments": {}});
    assert_slow_reader_gets_the_whole_answer(
        orchestrator.address(),
        "/execute",
        &call.to_string(),
        Duration::from_secs(1),
    )
    .await;
}

#[tokio::test]
async fn request_heads_over_the_limit_get_431() {
    for (setting, limit) in [(None, DEFAULT_MAX_HEADER_BYTES), (Some("8192"), 8192)] {
        let env: Vec<(&str, &str)> = setting.map(|value| ("MAX_HEADER_BYTES", value)).into_iter().collect();
        let orchestrator = start_orchestrator(&env);
        assert_large_heads_refused(orchestrator.address(), "/health", limit).await;
        assert_eq!(get_status(&orchestrator.url(), "/health").await, 200);
    }
}
