//! The workspace's shared harness for whole-process tests (dev-only, never
//! published).
//!
//! - [`Process`]: a real binary started with `PORT=0`; the address it bound
//!   is read back from its "listening" log line, so there is no port race.
//!   Its output is captured, and it is killed when dropped.
//! - [`ModuleClient`]: calls a module (or the orchestrator) over HTTP.
//! - [`RedisServer`]: a real `redis-server` for the tests that need one.
//! - [`PrometheusServer`]: a real `prometheus` scraping the servers under test.
//! - [`OtlpReceiver`]: an OTLP/HTTP receiver keeping the spans exporters send.
//! - [`built_binary`]: another package's binary or example of this workspace.
//! - [`raw_tcp`]: raw TCP clients that send requests slowly, or not at all.
//! - [`openapi_checks`]: an OpenAPI document validated and fuzzed by
//!   independent tools.
//! - [`mcp_checks`]: MCP tool results checked against their tool's
//!   `outputSchema`.
//! - [`mcp_client`]: rmcp's streamable HTTP client transport, usable in
//!   this workspace.
//! - [`connection_budgets`]: the checks of the connection budgets every
//!   server gets from `module_sdk::service::serve_router`, written once.
//! - [`samples`]: the sample tool types, for the demo module and the
//!   provider conversion tests.
//! - [`cpu`]: a server process's CPU time, for benchmarks that print what
//!   one call costs it.
//!
//! ```no_run
//! # async fn example() {
//! // In a module's tests/: `Command::new(env!("CARGO_BIN_EXE_research"))`.
//! let mut command = std::process::Command::new("target/debug/research");
//! command.env("RUST_LOG", "warn"); // the "listening" line is kept anyway
//! let module = test_support::Process::start(command);
//! let summary = serde_json::json!({"text": "One. Two.", "max_sentences": 1});
//! let result = module.client().call("research.summarize_text", summary, None).await;
//! assert_eq!(result["success"], true);
//! # }
//! ```

mod client;
pub mod connection_budgets;
pub mod cpu;
pub mod mcp_checks;
pub mod mcp_client;
pub mod openapi_checks;
mod otlp_receiver;
mod process;
pub mod process_tree;
mod prometheus_server;
pub mod raw_tcp;
mod redis_server;
pub mod samples;

pub use client::{ModuleClient, error_kind};
pub use otlp_receiver::{OtlpReceiver, ReceivedSpan};
pub use process::{Process, START_TIMEOUT};
pub use prometheus_server::{PrometheusServer, ScrapeTarget};
pub use redis_server::RedisServer;

/// Whether missing services must fail the tests (`REQUIRE_SERVICES=1`, set
/// by `scripts/test.sh`) instead of skipping them loudly.
pub fn services_required() -> bool {
    std::env::var("REQUIRE_SERVICES").as_deref() == Ok("1")
}

/// The binary `name` (`"research"`, or `"examples/demo"`) that
/// `cargo build --workspace --bins --examples` put next to the running test's
/// own binary, for tests that start another package's binary (`cargo test`
/// gives a test only its own package's through `CARGO_BIN_EXE_*`).
pub fn built_binary(name: &str) -> std::path::PathBuf {
    let test_binary = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/<test> -> target/<profile>/<name>
    let profile_dir = test_binary.parent().and_then(std::path::Path::parent).expect("target/<profile>/deps/<test>");
    let binary = profile_dir.join(name);
    assert!(
        binary.exists(),
        "{} is not built: run `cargo build --workspace --bins --examples` first (scripts/test.sh does)",
        binary.display()
    );
    binary
}
