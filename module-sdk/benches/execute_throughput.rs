//! `/execute` throughput of an echo tool served by the SDK, next to a bare
//! axum handler doing the same JSON work by hand (deserialize the call and its
//! arguments struct, serialize a ToolResult), each server in a process of its
//! own and all driven by an independent load generator, `wrk`, in
//! alternating rounds so machine noise hits them alike; and the same call as
//! an MCP `tools/call` through the module's `/mcp`, next to its `/execute`.
//!
//! Three servers: `bare`; `sdk`, the module as `Module::serve` runs it (its
//! bounded connection loop included); `sdk-router`, the module's router under
//! plain `axum::serve`, which tells the cost of the connection loop apart
//! from the cost of `/execute` itself. The `mcp` column is the `sdk` server
//! answering [`MCP_CALL`] at `/mcp` (stateless, as a 2025-11-25 client sends
//! it after `initialize`), and `mcp/sdk` its share of `/execute`'s rate.
//!
//! Beside the rates it prints each server's CPU time per call (user and
//! kernel, read from `/proc/<pid>/stat` around each run) and the same ratios
//! as calls per CPU second: with one wrk thread on a two-core machine the
//! load generator, not the server, can set the rate, and then the rates
//! hide a difference in work that the CPU columns show.
//!
//! Run: `cargo bench -p module-sdk --bench execute_throughput`
//! Needs `wrk` (Debian/Ubuntu: `apt-get install wrk`; macOS: `brew install wrk`).
//! Options (environment): BENCH_SECONDS per round (default 5), BENCH_ROUNDS
//! (default 3), BENCH_CONNECTIONS (default 32), BENCH_THREADS (wrk threads,
//! default 1).
//!
//! Both set TCP_NODELAY on their connections. The servers run with `RUST_LOG=warn` (no per-call log line), as in
//! production at that level. The benchmark binary is also the servers: run
//! with `BENCH_SERVE=sdk` or `BENCH_SERVE=bare` it serves instead of measuring.

use std::io::Write;
use std::process::Command;

use axum::Router;
use axum::body::Bytes;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::serve::ListenerExt;
use module_sdk::{Context, Module, ServeConfig, ToolError, tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use test_support::Process;
use test_support::cpu::CpuTime;

/// The one call both servers answer.
const CALL: &str = r#"{"tool_name":"bench.echo","arguments":{"text":"hello, world","count":7},"user_id":"u1"}"#;
/// The answer both servers give to [`CALL`], byte for byte.
const ANSWER: &str =
    r#"{"tool_name":"bench.echo","success":true,"result":{"text":"hello, world","count":7},"error":null}"#;

/// [`CALL`] as an MCP `tools/call`, the user id in `_meta`.
const MCP_CALL: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, world","count":7},"_meta":{"io.github.tool-modules/user_id":"u1"}}}"#;
/// The answer the module gives to [`MCP_CALL`], byte for byte.
const MCP_ANSWER: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{\"text\":\"hello, world\",\"count\":7}"}],"structuredContent":{"text":"hello, world","count":7},"isError":false}}"#;
/// The headers an MCP client sends with [`MCP_CALL`].
const MCP_HEADERS: [(&str, &str); 3] = [
    ("Content-Type", "application/json"),
    ("Accept", "application/json, text/event-stream"),
    ("MCP-Protocol-Version", "2025-11-25"),
];

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

/// The call as a hand-written handler reads it.
#[derive(Deserialize)]
struct BareCall {
    tool_name: String,
    arguments: Echo,
    #[allow(dead_code, reason = "read as the SDK reads it, unused by an echo")]
    user_id: Option<String>,
}

/// The result as a hand-written handler writes it.
#[derive(Serialize)]
struct BareResult {
    tool_name: String,
    success: bool,
    result: Echo,
    error: Option<String>,
}

/// The baseline: the same JSON work in a bare axum handler.
async fn bare_execute(body: Bytes) -> Response {
    let call: BareCall = serde_json::from_slice(&body).expect("the benchmark sends valid calls");
    let result = BareResult { tool_name: call.tool_name, success: true, result: call.arguments, error: None };
    let bytes = serde_json::to_vec(&result).expect("the result serializes");
    ([(header::CONTENT_TYPE, "application/json")], bytes).into_response()
}

/// Serves what `BENCH_SERVE` names, on `HOST`:`PORT`, logging the
/// "listening" line the harness reads the address from.
async fn serve(which: &str) {
    match which {
        "sdk" => bench_module().serve().await.expect("the module serves"),
        "sdk-router" => {
            let router = bench_module().router(&ServeConfig::default()).expect("the module is valid");
            serve_with_axum(router).await;
        }
        "bare" => serve_with_axum(Router::new().route("/execute", post(bare_execute))).await,
        other => panic!("BENCH_SERVE must be `sdk`, `sdk-router` or `bare`, not `{other}`"),
    }
}

/// The module the SDK servers serve.
fn bench_module() -> Module {
    Module::new("bench", "Benchmark module.").tool(echo)
}

/// Serves `router` with `axum::serve` on `HOST`:`PORT`, with TCP_NODELAY as
/// the SDK sets it, logging the address the harness reads back.
async fn serve_with_axum(router: Router) {
    let host = std::env::var("HOST").unwrap_or_else(|_| "127.0.0.1".into());
    let port = std::env::var("PORT").unwrap_or_else(|_| "0".into());
    let listener = tokio::net::TcpListener::bind(format!("{host}:{port}")).await.expect("bind");
    let address = listener.local_addr().expect("a bound address").to_string();
    println!("{}", json!({"message": "bench server listening", "address": address}));
    let listener = listener.tap_io(|stream| {
        let _ = stream.set_nodelay(true);
    });
    axum::serve(listener, router).await.expect("the server serves");
}

/// Starts this binary as the `which` server.
fn start(which: &str) -> Process {
    let mut command = Command::new(std::env::current_exe().expect("the benchmark's own path"));
    command.env("BENCH_SERVE", which).env("RUST_LOG", "warn");
    Process::start(command)
}

/// Panics unless `wrk` runs, saying how to install it.
fn require_wrk() {
    let found = Command::new("wrk").arg("--version").output().is_ok();
    assert!(
        found,
        "this benchmark drives the servers with `wrk`, which is not installed: \
         `apt-get install wrk` (Debian/Ubuntu) or `brew install wrk` (macOS)"
    );
}

/// One kind of request the benchmark sends: where, with which headers and body.
struct Target {
    path: &'static str,
    headers: &'static [(&'static str, &'static str)],
    body: &'static str,
    /// The wrk script that sends it.
    script: tempfile::NamedTempFile,
}

impl Target {
    fn new(path: &'static str, headers: &'static [(&'static str, &'static str)], body: &'static str) -> Self {
        let mut script = tempfile::Builder::new().suffix(".lua").tempfile().expect("a temp file");
        write!(script, "wrk.method = \"POST\"\nwrk.path = \"{path}\"\nwrk.body = '{body}'\n").expect("written");
        for (name, value) in headers {
            writeln!(script, "wrk.headers[\"{name}\"] = \"{value}\"").expect("written");
        }
        Self { path, headers, body, script }
    }

    /// Panics unless `process` answers this request with `200` and `expected`, byte for byte.
    fn check_answer(&self, process: &Process, expected: &str) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        let mut request = reqwest::Client::new().post(format!("{}{}", process.url(), self.path)).body(self.body);
        for (name, value) in self.headers {
            request = request.header(*name, *value);
        }
        let (status, answer) = runtime.block_on(async {
            let response = request.send().await.expect("the server answers");
            (response.status().as_u16(), response.text().await.expect("a body"))
        });
        assert_eq!((status, answer.as_str()), (200, expected), "the servers must do the same work");
    }
}

/// What one `wrk` run measured.
#[derive(Clone, Copy, Default)]
struct Measured {
    /// Requests per second.
    rate: f64,
    /// The server's CPU time per call in µs, in user space and in the
    /// kernel: what the call costs it, a figure the load barely moves.
    cpu_us: (f64, f64),
}

impl Measured {
    /// CPU time per call in µs, user and kernel together.
    fn cpu_total(&self) -> f64 {
        self.cpu_us.0 + self.cpu_us.1
    }
}

/// What `wrk` measured sending `target` to `process` for `seconds`; panics
/// when any answer was not a 2xx or a socket failed.
fn measure(process: &Process, target: &Target, threads: usize, connections: usize, seconds: u64) -> Measured {
    let before = CpuTime::of(process.pid());
    let output = Command::new("wrk")
        .args([format!("-t{threads}"), format!("-c{connections}"), format!("-d{seconds}s")])
        .arg("-s")
        .arg(target.script.path())
        .arg(format!("{}{}", process.url(), target.path))
        .output()
        .expect("wrk runs");
    let after = CpuTime::of(process.pid());
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "wrk failed: {report}{}", String::from_utf8_lossy(&output.stderr));
    assert!(!report.contains("Non-2xx") && !report.contains("Socket errors"), "some calls failed:\n{report}");
    let number = |found: Option<&str>, what: &str| -> f64 {
        found.and_then(|n| n.trim().parse().ok()).unwrap_or_else(|| panic!("no {what} in wrk's report:\n{report}"))
    };
    let rate = number(report.lines().find_map(|line| line.trim().strip_prefix("Requests/sec:")), "Requests/sec");
    // "  123456 requests in 5.00s, 24.3MB read"
    let calls =
        number(report.lines().find_map(|line| line.trim().split_once(" requests in ")).map(|(n, _)| n), "count");
    Measured { rate, cpu_us: after.per_call_since(&before, calls) }
}

fn setting<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    if let Ok(which) = std::env::var("BENCH_SERVE") {
        let runtime = tokio::runtime::Runtime::new().expect("a runtime");
        return runtime.block_on(serve(&which));
    }
    let seconds: u64 = setting("BENCH_SECONDS", 5);
    let rounds: usize = setting("BENCH_ROUNDS", 3);
    let connections: usize = setting("BENCH_CONNECTIONS", 32);
    let threads: usize = setting("BENCH_THREADS", 1);
    require_wrk();

    let servers = [start("bare"), start("sdk"), start("sdk-router")];
    let execute = Target::new("/execute", &[("Content-Type", "application/json")], CALL);
    let mcp = Target::new("/mcp", &MCP_HEADERS, MCP_CALL);
    // Every column: a server and what it is sent; the last is the SDK module's `/mcp`.
    let columns = [(&servers[0], &execute), (&servers[1], &execute), (&servers[2], &execute), (&servers[1], &mcp)];
    for (server, target) in columns {
        target.check_answer(server, if target.path == "/mcp" { MCP_ANSWER } else { ANSWER });
        // Warm up before measuring.
        measure(server, target, threads, connections, 1);
    }

    println!(
        "/execute and MCP tools/call throughput, separate processes, wrk -t{threads} -c{connections}, \
         {rounds} alternating rounds of {seconds} s"
    );
    println!(
        "{:>6} {:>12} {:>12} {:>12} {:>12} {:>10} {:>12} {:>10}",
        "round", "bare req/s", "sdk req/s", "router req/s", "mcp req/s", "sdk/bare", "router/bare", "mcp/sdk"
    );
    let mut totals = [Measured::default(); 4];
    let mut per_round = Vec::new();
    for round in 1..=rounds {
        let mut measured = [Measured::default(); 4];
        for (slot, (server, target)) in measured.iter_mut().zip(columns) {
            *slot = measure(server, target, threads, connections, seconds);
        }
        for (total, one) in totals.iter_mut().zip(measured) {
            total.rate += one.rate / rounds as f64;
            total.cpu_us.0 += one.cpu_us.0 / rounds as f64;
            total.cpu_us.1 += one.cpu_us.1 / rounds as f64;
        }
        print_row(&round.to_string(), &measured.map(|m| m.rate));
        per_round.push(measured);
    }
    print_row("all", &totals.map(|m| m.rate));
    println!();
    println!("CPU per call of each server, µs in user space + in the kernel (from /proc/<pid>/stat);");
    println!("the ratios are of calls per CPU second");
    println!(
        "{:>6} {:>12} {:>12} {:>12} {:>12} {:>10} {:>12} {:>10}",
        "round", "bare µs", "sdk µs", "router µs", "mcp µs", "sdk/bare", "router/bare", "mcp/sdk"
    );
    // A ratio of calls per CPU second is the inverse ratio of CPU per call.
    let inverse = |measured: &[Measured; 4]| measured.map(|m| 1.0 / m.cpu_total());
    for (round, measured) in per_round.iter().enumerate() {
        print_cpu_row(&(round + 1).to_string(), measured, &inverse(measured));
    }
    print_cpu_row("all", &totals, &inverse(&totals));
}

/// One row of rates: each column, then sdk/bare, router/bare and mcp/sdk.
fn print_row(label: &str, rates: &[f64; 4]) {
    println!(
        "{label:>6} {:>12.0} {:>12.0} {:>12.0} {:>12.0} {:>10.3} {:>12.3} {:>10.3}",
        rates[0],
        rates[1],
        rates[2],
        rates[3],
        rates[1] / rates[0],
        rates[2] / rates[0],
        rates[3] / rates[1]
    );
}

/// One row of CPU per call, with the ratios of `per_cpu_second` (calls per CPU second).
fn print_cpu_row(label: &str, measured: &[Measured; 4], per_cpu_second: &[f64; 4]) {
    let [bare, sdk, router, mcp] = measured.map(|m| format!("{:.1} + {:.1}", m.cpu_us.0, m.cpu_us.1));
    println!(
        "{label:>6} {bare:>12} {sdk:>12} {router:>12} {mcp:>12} {:>10.3} {:>12.3} {:>10.3}",
        per_cpu_second[1] / per_cpu_second[0],
        per_cpu_second[2] / per_cpu_second[0],
        per_cpu_second[3] / per_cpu_second[1]
    );
}
