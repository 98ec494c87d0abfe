//! Whole-process tests of the orchestrator's connection budgets
//! (`HEADER_READ_TIMEOUT_SECONDS`, `BODY_READ_TIMEOUT_SECONDS`,
//! `MAX_CONNECTIONS`, `MAX_BODY_BYTES`, served by `module_sdk::service::serve_router`):
//! raw TCP clients send their requests slowly, or not at all, or announce
//! bodies that are too large, to the real binary.

use std::process::Command;
use std::time::Duration;

use test_support::Process;
use test_support::raw_tcp::{read_answer, read_until_closed, send_and_stall};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::timeout;

/// How long past a timeout a slow connection may take to be closed.
const MARGIN: Duration = Duration::from_secs(5);

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

const HALF_A_HEAD: &[u8] = b"POST /execute HTTP/1.1\r\nHost: orchestrator\r\nContent-Ty";
const HEAD_AND_HALF_A_BODY: &[u8] = b"POST /execute HTTP/1.1\r\nHost: orchestrator\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"tool_name\"";

#[tokio::test]
async fn hundreds_of_slow_clients_are_closed_while_normal_calls_are_served() {
    let orchestrator = start_orchestrator(&[("HEADER_READ_TIMEOUT_SECONDS", "2"), ("BODY_READ_TIMEOUT_SECONDS", "2")]);
    let address = orchestrator.address();
    let mut slow_heads = Vec::new();
    let mut slow_bodies = Vec::new();
    for _ in 0..200 {
        slow_heads.push(send_and_stall(address, HALF_A_HEAD).await);
        slow_bodies.push(send_and_stall(address, HEAD_AND_HALF_A_BODY).await);
    }

    assert_eq!(get_status(&orchestrator.url(), "/health").await, 200);
    assert_eq!(get_status(&orchestrator.url(), "/tools").await, 200);

    let within = Duration::from_secs(2) + MARGIN;
    for stream in &mut slow_heads {
        let answer = read_until_closed(stream, within).await.expect("a half-sent head is closed after its timeout");
        assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 408"), "{answer}");
    }
    for stream in &mut slow_bodies {
        let answer = read_until_closed(stream, within).await.expect("a half-sent body is closed after its timeout");
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(answer.contains("BODY_READ_TIMEOUT_SECONDS"), "{answer}");
    }
    assert_eq!(get_status(&orchestrator.url(), "/health").await, 200);
}

#[tokio::test]
async fn at_the_connection_cap_new_connections_wait_for_a_free_slot() {
    let orchestrator = start_orchestrator(&[("MAX_CONNECTIONS", "4"), ("HEADER_READ_TIMEOUT_SECONDS", "3")]);
    let address = orchestrator.address();
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(send_and_stall(address, HALF_A_HEAD).await);
    }
    let request = b"GET /health HTTP/1.1\r\nHost: orchestrator\r\nConnection: close\r\n\r\n";
    let mut waiting = send_and_stall(address, request).await;
    let mut first_byte = [0u8; 1];
    let early = timeout(Duration::from_millis(1000), waiting.read(&mut first_byte)).await;
    assert!(early.is_err(), "a fifth connection was served while four held every slot: {early:?}");

    let answer =
        read_until_closed(&mut waiting, Duration::from_secs(3) + MARGIN).await.expect("served once a slot frees");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    for stream in &mut held {
        assert!(read_until_closed(stream, MARGIN).await.is_some(), "a held connection is closed by its timeout");
    }
}

#[tokio::test]
async fn bodies_over_the_limit_are_refused_early_whatever_their_framing() {
    let orchestrator = start_orchestrator(&[("MAX_BODY_BYTES", "1000")]);
    for expect in ["", "Expect: 100-continue\r\n"] {
        let head = format!(
            "POST /v1/tool-calls?format=openai HTTP/1.1\r\nHost: orchestrator\r\nContent-Type: application/json\r\nContent-Length: 1073741824\r\n{expect}\r\n"
        );
        let mut stream = send_and_stall(orchestrator.address(), head.as_bytes()).await;
        let answer = read_answer(&mut stream, MARGIN).await.expect("an answer without the body");
        assert!(answer.starts_with("HTTP/1.1 413"), "{expect:?}: {answer}");
        assert!(!answer.contains("100 Continue"), "{answer}");
        assert!(answer.contains("MAX_BODY_BYTES") && answer.contains("1073741824"), "{answer}");
    }

    let head = "POST /execute HTTP/1.1\r\nHost: orchestrator\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    let mut stream = send_and_stall(orchestrator.address(), head.as_bytes()).await;
    // 1,800 bytes in three chunks, and never the last chunk: only a server
    // that stops at the limit answers.
    let chunk = format!("258\r\n{}\r\n", "x".repeat(600));
    for _ in 0..3 {
        stream.write_all(chunk.as_bytes()).await.unwrap();
    }
    let answer = read_answer(&mut stream, MARGIN).await.expect("an answer before the body ends");
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert_eq!(get_status(&orchestrator.url(), "/health").await, 200);
}
