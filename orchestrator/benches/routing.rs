//! What routing through the orchestrator costs, and what hung modules cost
//! discovery, measured side by side in one run:
//!
//! 1. the same tool called directly at the module's `/execute` and through
//!    the orchestrator binary's `/execute` (as shipped, logging every call,
//!    and with `RUST_LOG=warn`): throughput ratio and added p50/p99 latency,
//!    at one caller and at 16;
//! 2. one full discovery (`POST /refresh-tools`) of 50 modules of which 10
//!    hang, as a multiple of the discovery timeout.
//!
//! Run with `cargo bench -p orchestrator --bench routing`.

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::modules::sdk_module;
use common::{HungServer, ModuleServer, OrchestratorProcess, module_services};
use serde_json::{Value, json};

/// How long each measured phase runs.
const PHASE: Duration = Duration::from_secs(3);
/// How long each phase is warmed up first.
const WARM_UP: Duration = Duration::from_millis(500);
/// Concurrent callers for the throughput phases.
const CALLERS: usize = 16;
/// The discovery timeout of the discovery phase.
const DISCOVERY_TIMEOUT: Duration = Duration::from_millis(500);

/// Requests per second and latencies of one phase.
struct Phase {
    throughput: f64,
    latencies: Vec<Duration>,
}

impl Phase {
    fn percentile(&self, p: f64) -> Duration {
        let index = ((self.latencies.len() as f64 - 1.0) * p).round() as usize;
        self.latencies[index]
    }
}

/// Sends `body` to `url` from `callers` tasks for `duration`, every answer
/// checked to be a successful ToolResult.
async fn load(client: &reqwest::Client, url: &str, body: &Value, callers: usize, duration: Duration) -> Phase {
    let body = Arc::new(serde_json::to_vec(body).unwrap());
    let started = Instant::now();
    let tasks: Vec<_> = (0..callers)
        .map(|_| {
            let (client, url, body) = (client.clone(), url.to_owned(), Arc::clone(&body));
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                while started.elapsed() < duration {
                    let sent = Instant::now();
                    let response = client
                        .post(&url)
                        .header("content-type", "application/json")
                        .body(body.as_ref().clone())
                        .send()
                        .await
                        .unwrap();
                    let result: Value = response.json().await.unwrap();
                    assert_eq!(result["success"], true, "{result}");
                    latencies.push(sent.elapsed());
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.unwrap());
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort();
    Phase { throughput: latencies.len() as f64 / elapsed, latencies }
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

async fn routing() {
    let module = ModuleServer::sdk(sdk_module("bench").0);
    let services = module_services(&[("bench", module.url())]);
    // As shipped (one info event per call), and with per-call logging off.
    let logged = OrchestratorProcess::start(&[("MODULE_SERVICES", &services)]);
    let quiet =
        OrchestratorProcess::start(&[("MODULE_SERVICES", &services), ("RUST_LOG", "warn,orchestrator::server=info")]);
    for orchestrator in [&logged, &quiet] {
        orchestrator.wait_for_module("bench", "up", Duration::from_secs(10)).await;
    }
    let client = reqwest::Client::new();
    let call = json!({"tool_name": "bench.echo", "arguments": {"text": "ping"}, "user_id": "u1"});
    let mut request = call.clone();
    request["user_permission"] = json!("user");
    let targets = [
        ("direct to the module", format!("{}/execute", module.url()), &call),
        ("routed, logging each call", format!("{}/execute", logged.url), &request),
        ("routed, RUST_LOG=warn", format!("{}/execute", quiet.url), &request),
    ];

    println!(
        "routing: the same SDK tool (echo) called directly and through the orchestrator binary, {PHASE:?} per phase"
    );
    println!(
        "{:>7}  {:<26}  {:>8}  {:>6}  {:>8}  {:>8}  {:>10}  {:>10}",
        "callers", "path", "rps", "ratio", "p50 ms", "p99 ms", "+p50 ms", "+p99 ms"
    );
    for callers in [1, CALLERS] {
        for (_, url, body) in &targets {
            load(&client, url, body, callers, WARM_UP).await;
        }
        let mut direct: Option<Phase> = None;
        for (name, url, body) in &targets {
            let phase = load(&client, url, body, callers, PHASE).await;
            let base = direct.as_ref().unwrap_or(&phase);
            println!(
                "{:>7}  {:<26}  {:>8.0}  {:>5.2}x  {:>8.3}  {:>8.3}  {:>10.3}  {:>10.3}",
                callers,
                name,
                phase.throughput,
                phase.throughput / base.throughput,
                ms(phase.percentile(0.5)),
                ms(phase.percentile(0.99)),
                ms(phase.percentile(0.5)) - ms(base.percentile(0.5)),
                ms(phase.percentile(0.99)) - ms(base.percentile(0.99)),
            );
            direct.get_or_insert(phase);
        }
    }
}

async fn discovery() {
    let answering: Vec<ModuleServer> = (0..40).map(|i| ModuleServer::sdk(sdk_module(&format!("m{i:02}")).0)).collect();
    let hung: Vec<HungServer> = (0..10).map(|_| HungServer::start()).collect();
    let mut modules: Vec<(String, String)> =
        answering.iter().enumerate().map(|(i, m)| (format!("m{i:02}"), m.url())).collect();
    modules.extend(hung.iter().enumerate().map(|(i, h)| (format!("hung{i:02}"), h.url())));
    let named: Vec<(&str, String)> = modules.iter().map(|(n, u)| (n.as_str(), u.clone())).collect();
    let timeout = format!("{}", DISCOVERY_TIMEOUT.as_secs_f64());
    let orchestrator = OrchestratorProcess::start(&[
        ("MODULE_SERVICES", &module_services(&named)),
        ("DISCOVERY_TIMEOUT", &timeout),
        ("REFRESH_INTERVAL", "3600"),
        ("RUST_LOG", "error,orchestrator::server=info"),
    ]);
    orchestrator.wait_for_module("m39", "up", Duration::from_secs(10)).await;

    let mut rounds = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let (status, refreshed) = orchestrator.post("/refresh-tools", &Value::Null).await;
        let elapsed = started.elapsed();
        assert_eq!(status, 200);
        let up = refreshed["modules"].as_array().unwrap().iter().filter(|m| m["state"] == "up").count();
        assert_eq!(up, 40, "every answering module is found");
        rounds.push(elapsed);
    }
    rounds.sort();
    let median = rounds[rounds.len() / 2];
    println!();
    println!(
        "discovery: 50 modules, 10 of them hung, DISCOVERY_TIMEOUT {} ms, median of {} refreshes",
        ms(DISCOVERY_TIMEOUT),
        rounds.len()
    );
    println!(
        "one full discovery took {:.0} ms = {:.2}x the discovery timeout (one module after another would take at least 10x)",
        ms(median),
        median.as_secs_f64() / DISCOVERY_TIMEOUT.as_secs_f64()
    );
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument selects nothing here.
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    runtime.block_on(async {
        routing().await;
        discovery().await;
    });
}
