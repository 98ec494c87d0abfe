//! Whole-process tests of the connection budgets (`HEADER_READ_TIMEOUT_SECONDS`,
//! `BODY_READ_TIMEOUT_SECONDS`, `MAX_CONNECTIONS`, `MAX_BODY_BYTES`, `MAX_HEADER_BYTES`): the demo
//! module runs as a real process and raw TCP clients send their requests
//! slowly, or not at all, or announce bodies that are too large, or read a
//! large answer slowly. The checks are test-support's, shared with the
//! orchestrator's tests.

use std::process::Command;
use std::time::Duration;

use module_sdk::service::DEFAULT_MAX_HEADER_BYTES;
use serde_json::json;
use test_support::connection_budgets::{
    MARGIN, SlowClients, assert_chunked_body_stopped_at_the_limit, assert_connection_cap,
    assert_declared_body_refused_early, assert_large_heads_refused, assert_slow_reader_gets_the_whole_answer,
    slow_reader_answer_bytes,
};
use test_support::raw_tcp::{read_until_closed, send_and_stall};
use test_support::{Process, built_binary};

/// The demo module with `env` set (and no token, and the default body limit unless `env` sets one).
fn start_demo(env: &[(&str, &str)]) -> Process {
    let mut command = Command::new(built_binary("examples/demo"));
    command
        .env_remove("SERVICE_AUTH_TOKEN")
        .env_remove("MAX_BODY_BYTES")
        .env("RUST_LOG", "warn")
        .envs(env.iter().copied());
    Process::start(command)
}

#[tokio::test]
async fn hundreds_of_slow_clients_are_closed_while_normal_calls_are_served() {
    let demo = start_demo(&[("HEADER_READ_TIMEOUT_SECONDS", "2"), ("BODY_READ_TIMEOUT_SECONDS", "2")]);
    let slow = SlowClients::hold(demo.address(), "/execute", 200).await;

    let result = demo.client().call("demo.greet", json!({"name": "Ann"}), None).await;
    assert_eq!(result["success"], true, "{result}");
    assert_eq!(demo.client().health().await["status"], "ok");

    slow.assert_closed(Duration::from_secs(2)).await;
    let result = demo.client().call("demo.greet", json!({"name": "Bo"}), None).await;
    assert_eq!(result["success"], true, "{result}");
}

#[tokio::test]
async fn an_idle_kept_alive_connection_is_closed_after_the_header_timeout() {
    let demo = start_demo(&[("HEADER_READ_TIMEOUT_SECONDS", "1")]);
    let mut stream = send_and_stall(demo.address(), b"GET /health HTTP/1.1\r\nHost: demo\r\n\r\n").await;
    let answer = read_until_closed(&mut stream, Duration::from_secs(1) + MARGIN).await.expect("closed when idle");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[tokio::test]
async fn a_large_answer_read_slowly_is_not_cut_off_by_the_header_timeout() {
    // A greeting longer than the connection's buffers hold, read slower than they drain.
    let bytes = slow_reader_answer_bytes();
    let limit = (2 * bytes).to_string();
    let demo = start_demo(&[("HEADER_READ_TIMEOUT_SECONDS", "1"), ("MAX_BODY_BYTES", &limit)]);
    let call = json!({"tool_name": "demo.greet", "arguments": {"name": "x".repeat(bytes)}});
    assert_slow_reader_gets_the_whole_answer(demo.address(), "/execute", &call.to_string(), Duration::from_secs(1))
        .await;
}

#[tokio::test]
async fn a_stop_is_not_held_up_by_a_half_sent_request_head() {
    let mut demo = start_demo(&[("HEADER_READ_TIMEOUT_SECONDS", "1")]);
    // Not closed when asked to stop (nothing whole was read): the header timeout closes it.
    let _half = send_and_stall(demo.address(), b"GET /health HT").await;
    // Accepted and read by the server before the stop.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let asked = std::time::Instant::now();
    let status = tokio::task::spawn_blocking(move || demo.terminate()).await.unwrap();
    assert!(status.success(), "the module did not stop on its own: {status}");
    // Not a speed check: a stop that did not wait for the half-sent head would not have tested it.
    assert!(asked.elapsed() >= Duration::from_millis(500), "the stop did not wait for the half-sent head");
}

#[tokio::test]
async fn at_the_connection_cap_new_connections_wait_for_a_free_slot() {
    let demo = start_demo(&[("MAX_CONNECTIONS", "4"), ("HEADER_READ_TIMEOUT_SECONDS", "3")]);
    assert_connection_cap(demo.address(), "/execute", 4, Duration::from_secs(3)).await;
}

#[tokio::test]
async fn bodies_over_the_limit_are_refused_early_whatever_their_framing() {
    let demo = start_demo(&[("MAX_BODY_BYTES", "1000")]);
    assert_declared_body_refused_early(demo.address(), "/execute").await;
    assert_chunked_body_stopped_at_the_limit(demo.address(), "/execute").await;
    assert_eq!(demo.client().health().await["status"], "ok");
}

#[tokio::test]
async fn request_heads_over_the_limit_get_431() {
    for (setting, limit) in [(None, DEFAULT_MAX_HEADER_BYTES), (Some("8192"), 8192)] {
        let env: Vec<(&str, &str)> = setting.map(|value| ("MAX_HEADER_BYTES", value)).into_iter().collect();
        let demo = start_demo(&env);
        assert_large_heads_refused(demo.address(), "/health", limit).await;
        assert_eq!(demo.client().health().await["status"], "ok");
    }
}
