//! `/execute` throughput of an echo tool served by the SDK, next to a bare
//! axum handler doing the same JSON work (parse a ToolCall, answer a
//! ToolResult echoing the arguments), measured in alternating rounds in one
//! run so machine noise hits both alike.
//!
//! Run: `cargo bench -p module-sdk --bench execute_throughput`
//! Options (environment): BENCH_SECONDS per round (default 2), BENCH_ROUNDS
//! (default 3), BENCH_CONNECTIONS (default 32).
//!
//! Logging is off (no tracing subscriber), as with `RUST_LOG=warn` in production.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::routing::post;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use module_sdk::{Context, Module, ServeConfig, ToolCall, ToolError, ToolResult, tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::net::{TcpListener, TcpStream};

/// Arguments of the echo tool.
#[derive(Deserialize, Serialize, JsonSchema)]
struct Echo {
    /// Text to send back.
    text: String,
    /// A number to send back.
    count: u32,
}

/// Send the arguments back.
#[tool(read_only)]
async fn echo(_ctx: Context, args: Echo) -> Result<Echo, ToolError> {
    Ok(args)
}

/// The baseline: the same JSON work in a bare axum handler.
async fn bare_execute(body: Bytes) -> axum::Json<ToolResult> {
    let call: ToolCall = serde_json::from_slice(&body).expect("the benchmark sends valid calls");
    axum::Json(ToolResult::success(call.tool_name, serde_json::Value::Object(call.arguments)))
}

async fn serve(router: Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    address
}

/// Requests completed per second by `connections` keep-alive clients in `seconds`.
async fn measure(address: SocketAddr, connections: usize, seconds: f64) -> f64 {
    let body = Bytes::from_static(
        br#"{"tool_name":"bench.echo","arguments":{"text":"hello, world","count":7},"user_id":"u1"}"#,
    );
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for _ in 0..connections {
        let (done, stop, body) = (done.clone(), stop.clone(), body.clone());
        workers.push(tokio::spawn(async move {
            let stream = TcpStream::connect(address).await.unwrap();
            stream.set_nodelay(true).unwrap();
            let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
            tokio::spawn(connection);
            while !stop.load(Ordering::Relaxed) {
                let request = hyper::Request::post("/execute")
                    .header("host", "bench")
                    .header("content-type", "application/json")
                    .body(Full::new(body.clone()))
                    .unwrap();
                let response = sender.send_request(request).await.unwrap();
                assert!(response.status().is_success());
                let answer = response.into_body().collect().await.unwrap().to_bytes();
                assert!(answer.starts_with(br#"{"tool_name":"bench.echo","success":true"#));
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    let count = done.load(Ordering::Relaxed);
    let elapsed = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.await.unwrap();
    }
    count as f64 / elapsed
}

fn setting<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[tokio::main]
async fn main() {
    let seconds: f64 = setting("BENCH_SECONDS", 2.0);
    let rounds: usize = setting("BENCH_ROUNDS", 3);
    let connections: usize = setting("BENCH_CONNECTIONS", 32);

    let sdk_router = Module::new("bench", "Benchmark module.")
        .tool(echo)
        .router(&ServeConfig::default())
        .expect("the benchmark module is valid");
    let sdk = serve(sdk_router).await;
    let bare = serve(Router::new().route("/execute", post(bare_execute))).await;

    // Warm both up before measuring.
    measure(sdk, connections, 0.3).await;
    measure(bare, connections, 0.3).await;

    println!("/execute throughput, {connections} connections, {rounds} alternating rounds of {seconds} s");
    println!("{:>6} {:>14} {:>14} {:>8}", "round", "bare req/s", "sdk req/s", "ratio");
    let (mut bare_total, mut sdk_total) = (0.0, 0.0);
    for round in 1..=rounds {
        let bare_rate = measure(bare, connections, seconds).await;
        let sdk_rate = measure(sdk, connections, seconds).await;
        bare_total += bare_rate;
        sdk_total += sdk_rate;
        println!("{round:>6} {bare_rate:>14.0} {sdk_rate:>14.0} {:>8.3}", sdk_rate / bare_rate);
    }
    println!(
        "{:>6} {:>14.0} {:>14.0} {:>8.3}",
        "all",
        bare_total / rounds as f64,
        sdk_total / rounds as f64,
        sdk_total / bare_total
    );
}
