//! Whole-process tests of the orchestrator's connection budgets
//! (`HEADER_READ_TIMEOUT_SECONDS`, `BODY_READ_TIMEOUT_SECONDS`,
//! `MAX_CONNECTIONS`, `MAX_BODY_BYTES`, served by `module_sdk::service::serve_router`):
//! raw TCP clients send their requests slowly, or not at all, or announce
//! bodies that are too large, to the real binary. The checks are
//! test-support's, shared with the SDK's tests.

use std::process::Command;
use std::time::Duration;

use test_support::Process;
use test_support::connection_budgets::{
    SlowClients, assert_chunked_body_stopped_at_the_limit, assert_connection_cap, assert_declared_body_refused_early,
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
