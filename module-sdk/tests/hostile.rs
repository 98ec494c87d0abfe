//! Hostile requests against a real module process (the SDK's demo module):
//! each gets the budget's error, the process stays up, and its peak
//! resident memory stays within budget. Cross-site form posts get `415`
//! (in development mode: with a token `/execute` reads them),
//! bodies past `MAX_BODY_BYTES` get `413` whatever their framing or
//! `Expect`, idle connections past `MAX_CONNECTIONS` wait and are served,
//! clients that pipeline requests and never read their answers are closed,
//! a lower-case `bearer` scheme is accepted, bodies nesting past the JSON
//! depth limit get a `400` naming it, and `info` logging does not grow
//! with the number of calls.
//!
//! Run with `--nocapture` to see the peak RSS figures.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use test_support::raw_tcp::{read_until_closed, send_and_stall};
use test_support::{Process, connection_budgets};
use tokio::io::AsyncWriteExt;

/// Peak resident memory the demo module may reach under these inputs.
const RSS_BUDGET_BYTES: u64 = 64 * 1024 * 1024;
/// How long a test waits for an answer the server owes at once.
const PROMPT: Duration = Duration::from_secs(5);

/// The demo binary, which `cargo test -p module-sdk` builds with the
/// package's examples (`--test hostile` alone does not: add `--example demo`).
fn demo_binary() -> PathBuf {
    let deps = std::env::current_exe().unwrap().parent().unwrap().to_path_buf();
    let path = deps.parent().unwrap().join("examples").join("demo");
    assert!(path.exists(), "{} is missing: run `cargo test -p module-sdk`, which builds examples", path.display());
    path
}

fn start_demo(env: &[(&str, &str)]) -> Process {
    let mut command = Command::new(demo_binary());
    command.env_remove("SERVICE_AUTH_TOKEN").env_remove("MAX_BODY_BYTES").envs(env.iter().copied());
    Process::start(command)
}

/// The process is up, still answers, and stayed within its memory budget.
async fn assert_alive_within_budget(demo: &mut Process, what: &str) {
    assert!(demo.is_running(), "{what}: the module is still running");
    assert_eq!(demo.client().health().await["status"], "ok", "{what}");
    let peak = demo.peak_rss_bytes();
    println!("{what}: peak RSS {} KiB", peak / 1024);
    assert!(peak < RSS_BUDGET_BYTES, "{what}: peak RSS {peak} bytes is over {RSS_BUDGET_BYTES}");
}

fn greet_call() -> String {
    json!({"tool_name": "demo.greet", "arguments": {"name": "Ann"}, "user_id": null}).to_string()
}

#[tokio::test]
async fn bodies_that_are_not_json_are_refused_with_415() {
    let mut demo = start_demo(&[("RUST_LOG", "warn")]);
    let client = reqwest::Client::new();
    let refused =
        [Some("application/x-www-form-urlencoded"), Some("multipart/form-data; boundary=x"), Some("text/plain"), None];
    // Both routes that take a body check it themselves.
    for (path, content_type) in ["/execute", "/mcp"].into_iter().flat_map(|path| refused.map(|c| (path, c))) {
        let mut request = client.post(format!("{}{path}", demo.url())).body(greet_call());
        if let Some(content_type) = content_type {
            request = request.header(reqwest::header::CONTENT_TYPE, content_type);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE, "{path} {content_type:?}");
        let body: Value = response.json().await.unwrap();
        assert!(body["error"].as_str().unwrap().contains("application/json"), "{path} {content_type:?}: {body}");
    }
    for content_type in ["application/json", "application/json; charset=utf-8", "Application/JSON"] {
        let response = client
            .post(format!("{}/execute", demo.url()))
            .header(reqwest::header::CONTENT_TYPE, content_type)
            .body(greet_call())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{content_type}");
    }
    assert_alive_within_budget(&mut demo, "content types").await;
}

#[tokio::test]
async fn bodies_nesting_past_the_depth_limit_get_400_naming_it() {
    let mut demo = start_demo(&[("RUST_LOG", "warn")]);
    let client = reqwest::Client::new();
    // Valid JSON, 200 levels deep: as a ToolCall's arguments and as an MCP call's.
    let deep = format!("{}1{}", "[".repeat(198), "]".repeat(198));
    let execute = format!(r#"{{"tool_name": "demo.greet", "arguments": {{"name": {deep}}}, "user_id": null}}"#);
    let mcp = format!(
        r#"{{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {{"name": "greet", "arguments": {{"name": {deep}}}}}}}"#
    );
    for (path, body) in [("/execute", execute), ("/mcp", mcp)] {
        let response = client
            .post(format!("{}{path}", demo.url()))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{path}");
        let body: Value = response.json().await.unwrap();
        let message = body["error"].as_str().unwrap();
        assert!(message.contains("deeper than 127 levels"), "{path}: {message}");
    }
    assert_alive_within_budget(&mut demo, "deep bodies").await;
}

/// A chunked body the server cannot read (a chunk extension over hyper's
/// limit) is the client's fault on `/mcp` as on `/execute`: `400` with a
/// JSON error saying why, not a `500`.
#[tokio::test]
async fn unreadable_chunked_bodies_get_400_on_every_route() {
    let mut demo = start_demo(&[("RUST_LOG", "warn")]);
    for path in ["/execute", "/mcp"] {
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n2;{}\r\n{{}}\r\n0\r\n\r\n",
            "x".repeat(100_000)
        );
        let mut stream = send_and_stall(demo.address(), request.as_bytes()).await;
        let answer = read_until_closed(&mut stream, PROMPT).await.expect("answered and closed");
        assert!(answer.starts_with("HTTP/1.1 400"), "{path}: {answer}");
        assert!(answer.contains(r#"{"error":"the request body could not be read"#), "{path}: {answer}");
    }
    assert_alive_within_budget(&mut demo, "unreadable bodies").await;
}

#[tokio::test]
async fn the_bearer_scheme_is_matched_in_any_case() {
    let mut demo = start_demo(&[("SERVICE_AUTH_TOKEN", "s3cret"), ("RUST_LOG", "warn")]);
    let client = reqwest::Client::new();
    for (authorization, expected) in [
        ("bearer s3cret", StatusCode::OK),
        ("BEARER s3cret", StatusCode::OK),
        ("Bearer s3cret", StatusCode::OK),
        ("bearer wrong", StatusCode::UNAUTHORIZED),
        ("Basic s3cret", StatusCode::UNAUTHORIZED),
    ] {
        let response = client
            .get(format!("{}/manifest", demo.url()))
            .header(reqwest::header::AUTHORIZATION, authorization)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), expected, "{authorization}");
    }
    assert_alive_within_budget(&mut demo, "bearer").await;
}

#[tokio::test]
async fn bodies_over_the_limit_get_413_whatever_their_framing() {
    let mut demo = start_demo(&[("MAX_BODY_BYTES", "1000"), ("RUST_LOG", "warn")]);
    // Chunked, without a declared length: stopped once 1,000 bytes arrived,
    // although the body never ends (the check every server gets).
    connection_budgets::assert_chunked_body_stopped_at_the_limit(demo.address(), "/execute").await;

    // Declared a little over the limit and waiting for `100 Continue`:
    // refused at once, without asking for the body.
    let head = "POST /execute HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 1500\r\nExpect: 100-continue\r\n\r\n";
    let mut stream = send_and_stall(demo.address(), head.as_bytes()).await;
    let answer = read_until_closed(&mut stream, PROMPT).await.expect("refused and closed at once");
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(!answer.contains("100 Continue") && answer.contains("MAX_BODY_BYTES"), "{answer}");

    // Declared 1 GiB: refused before any of it is sent.
    let head =
        "POST /execute HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n";
    let mut stream = send_and_stall(demo.address(), head.as_bytes()).await;
    let answer = read_until_closed(&mut stream, PROMPT).await.expect("refused and closed at once");
    assert!(answer.starts_with("HTTP/1.1 413") && answer.contains("1073741824"), "{answer}");
    assert_alive_within_budget(&mut demo, "large bodies").await;
}

#[tokio::test]
async fn idle_connections_past_the_cap_wait_and_are_then_served() {
    let mut demo = start_demo(&[("MAX_CONNECTIONS", "50"), ("HEADER_READ_TIMEOUT_SECONDS", "1"), ("RUST_LOG", "warn")]);
    let mut idle = Vec::new();
    for _ in 0..500 {
        idle.push(tokio::net::TcpStream::connect(demo.address()).await.unwrap());
    }
    // Served once the idle connections ahead of it are closed by the header timeout.
    let health = tokio::time::timeout(Duration::from_secs(60), demo.client().health()).await;
    assert_eq!(health.expect("served once idle connections are closed")["status"], "ok");
    drop(idle);
    assert_alive_within_budget(&mut demo, "idle connections").await;
}

#[tokio::test]
async fn clients_that_never_read_their_answers_do_not_hold_the_slots() {
    let mut demo = start_demo(&[("MAX_CONNECTIONS", "2"), ("HEADER_READ_TIMEOUT_SECONDS", "1"), ("RUST_LOG", "warn")]);
    // 100,000 pipelined requests (3.5 MB) whose answers (about 15 MB) fill
    // every socket buffer between the module and a client that reads none.
    let requests = "GET /health HTTP/1.1\r\nHost: t\r\n\r\n".repeat(100_000);
    let mut writers = Vec::new();
    for _ in 0..2 {
        let mut stream = tokio::net::TcpStream::connect(demo.address()).await.unwrap();
        let requests = requests.clone();
        writers.push(tokio::spawn(async move {
            let _ = stream.write_all(requests.as_bytes()).await;
            // Held open, unread, until the test ends.
            std::future::pending::<()>().await;
        }));
    }
    // Served once the stalled answers are given up on and their slots free
    // (within seconds; the wait is long because filling the buffers first
    // takes tens of thousands of answers, slow on a loaded machine).
    let health = tokio::time::timeout(Duration::from_secs(60), demo.client().health()).await;
    if health.is_err() {
        eprintln!("LOGS {:#?}", demo.logs());
    }
    assert_eq!(health.expect("served once the non-reading clients are closed")["status"], "ok");
    writers.iter().for_each(tokio::task::JoinHandle::abort);
    assert_alive_within_budget(&mut demo, "non-reading clients").await;
}

#[tokio::test]
async fn info_logging_does_not_grow_with_the_number_of_calls() {
    let mut demo = start_demo(&[("RUST_LOG", "info")]);
    let before = demo.logs().len();
    for _ in 0..300 {
        demo.client().call_ok("demo.greet", json!({"name": "Ann"}), None).await;
    }
    let written = demo.logs().len() - before;
    assert!(written < 10, "300 calls wrote {written} lines at info: {:#?}", &demo.logs()[before..]);
    assert_alive_within_budget(&mut demo, "logging").await;
}
