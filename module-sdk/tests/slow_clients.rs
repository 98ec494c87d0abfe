//! Whole-process tests of the connection budgets (`HEADER_READ_TIMEOUT_SECONDS`,
//! `BODY_READ_TIMEOUT_SECONDS`, `MAX_CONNECTIONS`, `MAX_BODY_BYTES`): the demo
//! module runs as a real process and raw TCP clients send their requests
//! slowly, or not at all, or announce bodies that are too large.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::json;
use test_support::Process;
use test_support::raw_tcp::{read_answer, read_until_closed, send_and_stall};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::timeout;

/// How long past a timeout a slow connection may take to be closed.
const MARGIN: Duration = Duration::from_secs(5);

/// The demo binary, which `cargo test` builds with the package's examples.
fn demo_binary() -> PathBuf {
    let deps = std::env::current_exe().unwrap().parent().unwrap().to_path_buf();
    let path = deps.parent().unwrap().join("examples").join("demo");
    assert!(path.exists(), "{} is missing: run `cargo test -p module-sdk`, which builds examples", path.display());
    path
}

/// The demo module with `env` set (and no token, and the default body limit unless `env` sets one).
fn start_demo(env: &[(&str, &str)]) -> Process {
    let mut command = Command::new(demo_binary());
    command
        .env_remove("SERVICE_AUTH_TOKEN")
        .env_remove("MAX_BODY_BYTES")
        .env("RUST_LOG", "warn")
        .envs(env.iter().copied());
    Process::start(command)
}

const HALF_A_HEAD: &[u8] = b"POST /execute HTTP/1.1\r\nHost: demo\r\nContent-Ty";
const HEAD_AND_HALF_A_BODY: &[u8] =
    b"POST /execute HTTP/1.1\r\nHost: demo\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"tool_name\"";

#[tokio::test]
async fn hundreds_of_slow_clients_are_closed_while_normal_calls_are_served() {
    let demo = start_demo(&[("HEADER_READ_TIMEOUT_SECONDS", "2"), ("BODY_READ_TIMEOUT_SECONDS", "2")]);
    let address = demo.address();
    let mut slow_heads = Vec::new();
    let mut slow_bodies = Vec::new();
    for _ in 0..200 {
        slow_heads.push(send_and_stall(address, HALF_A_HEAD).await);
        slow_bodies.push(send_and_stall(address, HEAD_AND_HALF_A_BODY).await);
    }

    let result = demo.client().call("demo.greet", json!({"name": "Ann"}), None).await;
    assert_eq!(result["success"], true, "{result}");
    assert_eq!(demo.client().health().await["status"], "ok");

    let within = Duration::from_secs(2) + MARGIN;
    for stream in &mut slow_heads {
        let answer = read_until_closed(stream, within).await.expect("a half-sent head is closed after its timeout");
        assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 408"), "{answer}");
    }
    for stream in &mut slow_bodies {
        let answer = read_until_closed(stream, within).await.expect("a half-sent body is closed after its timeout");
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(answer.to_ascii_lowercase().contains("connection: close"), "{answer}");
        assert!(answer.contains("BODY_READ_TIMEOUT_SECONDS"), "{answer}");
    }
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
async fn at_the_connection_cap_new_connections_wait_for_a_free_slot() {
    let demo = start_demo(&[("MAX_CONNECTIONS", "4"), ("HEADER_READ_TIMEOUT_SECONDS", "3")]);
    let address = demo.address();
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(send_and_stall(address, HALF_A_HEAD).await);
    }
    let mut waiting = send_and_stall(address, b"GET /health HTTP/1.1\r\nHost: demo\r\nConnection: close\r\n\r\n").await;
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
async fn a_declared_body_over_the_limit_gets_413_before_it_is_sent() {
    let demo = start_demo(&[]);
    for expect in ["", "Expect: 100-continue\r\n"] {
        let head = format!(
            "POST /execute HTTP/1.1\r\nHost: demo\r\nContent-Type: application/json\r\nContent-Length: 1073741824\r\n{expect}\r\n"
        );
        let mut stream = send_and_stall(demo.address(), head.as_bytes()).await;
        let answer = read_answer(&mut stream, MARGIN).await.expect("an answer without the body");
        assert!(answer.starts_with("HTTP/1.1 413"), "{expect:?}: {answer}");
        assert!(!answer.contains("100 Continue"), "{answer}");
        assert!(answer.contains("MAX_BODY_BYTES") && answer.contains("1073741824"), "{answer}");
    }
    assert_eq!(demo.client().health().await["status"], "ok");
}

#[tokio::test]
async fn a_chunked_body_over_the_limit_is_stopped_at_the_limit() {
    let demo = start_demo(&[("MAX_BODY_BYTES", "1000")]);
    let head =
        "POST /execute HTTP/1.1\r\nHost: demo\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    let mut stream = send_and_stall(demo.address(), head.as_bytes()).await;
    // 1,800 bytes in three chunks, and never the last chunk: only a server
    // that stops at the limit answers.
    let chunk = format!("258\r\n{}\r\n", "x".repeat(600));
    for _ in 0..3 {
        stream.write_all(chunk.as_bytes()).await.unwrap();
    }
    let answer = read_answer(&mut stream, MARGIN).await.expect("an answer before the body ends");
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("MAX_BODY_BYTES"), "{answer}");
}
