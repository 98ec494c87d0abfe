//! What routing through the orchestrator costs, and what hung modules cost
//! discovery, measured side by side in one run:
//!
//! 1. the same tool called directly at the module's `/execute`, through the
//!    orchestrator binary's `/execute` (as shipped, at `RUST_LOG=info`, where
//!    the per-call event, a debug one, is not written; and with
//!    `RUST_LOG=warn`), through the least proxy built on the same
//!    HTTP stack (the floor: hyper and the orchestrator's module client,
//!    no routing work) and through nginx as a plain reverse proxy of
//!    the module, all driven by the independent load generator `wrk`: its
//!    throughput with 32 connections (`wrk -t1 -c32`) and its p50 latency at
//!    one connection, against the goals (routed at least 0.9 of nginx's
//!    throughput, at most 60 µs added at p50), and the CPU time the serving
//!    process (module, orchestrator, nginx worker) spent per call in user
//!    space and in the kernel, from `/proc/<pid>/stat`, which says where a
//!    gap comes from (the host's load moves it too); and
//!    the whole path's CPU per call at 32 connections (the module, the proxy
//!    and wrk together), which the throughput follows while the two cores
//!    are saturated. Every
//!    target is measured in turn, `BENCH_ROUNDS` times (default 3), and the
//!    table gives each figure's median, the goal lines each round's too;
//! 2. one full discovery (`POST /refresh-tools`) of 50 modules of which 10
//!    hang, as a multiple of the discovery timeout.
//!
//! Needs `wrk` and, for the nginx column, `nginx` (`apt-get install -y wrk nginx`;
//! without nginx its column says so and the others are printed).
//! Run with `cargo bench -p orchestrator --bench routing`.
//!
//! Run with `BENCH_SERVE=module` the benchmark only serves the module it
//! routes to (printing its URL) until killed, to profile an orchestrator
//! started by hand in front of it (e.g. under callgrind; see benches/README.md).
//! Run with `BENCH_SERVE=floor` and `FLOOR_MODULE_URL` it serves the floor
//! proxy (`support/floor_proxy.rs`), the row "hyper floor, no routing":
//! what a proxy on the orchestrator's HTTP stack costs without its work.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/floor_proxy.rs"]
mod floor_proxy;
#[path = "support/nginx.rs"]
mod nginx;
#[path = "support/wrk.rs"]
mod wrk;

use std::time::{Duration, Instant};

use common::modules::sdk_module;
use common::{HungServer, ModuleServer, OrchestratorProcess, free_port, module_services};
use nginx::Nginx;
use serde_json::{Value, json};
use test_support::cpu::{self, CpuTime};
use wrk::WrkRun;

/// How long each measured `wrk` run lasts.
const PHASE: Duration = Duration::from_secs(5);
/// How long each target is warmed up first.
const WARM_UP: Duration = Duration::from_secs(1);
/// Connections of the throughput runs.
const CONNECTIONS: usize = 32;
/// The discovery timeout of the discovery phase.
const DISCOVERY_TIMEOUT: Duration = Duration::from_millis(500);

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn us(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

/// One way to the module and what `wrk` measured on it, round by round.
struct Target {
    name: &'static str,
    url: String,
    body: String,
    /// The process that serves the call: the module (this benchmark's own
    /// process), the orchestrator, or nginx's worker.
    server_pid: Option<u32>,
    rounds: Vec<Round>,
}

/// One round's measures of one target.
struct Round {
    throughput: WrkRun,
    one_connection: WrkRun,
    /// The server's CPU per call (user, system), in µs, at 32 connections and at one.
    cpu_c32: (f64, f64),
    cpu_c1: (f64, f64),
    /// The whole path's CPU per call at 32 connections, in µs: the module's
    /// (this process's), the proxy's and wrk's.
    path_cpu_c32: f64,
}

impl Target {
    /// `name`, posting `body` to `url`/execute, served by `server_pid`; not measured yet.
    fn new(name: &'static str, url: String, body: String, server_pid: Option<u32>) -> Self {
        Self { name, url, body, server_pid, rounds: Vec::new() }
    }

    /// The median over the rounds of `figure`.
    fn median(&self, figure: impl Fn(&Round) -> f64) -> f64 {
        median(self.rounds.iter().map(figure).collect())
    }

    /// The median throughput (calls per second at 32 connections).
    fn rps(&self) -> f64 {
        self.median(|round| round.throughput.requests_per_second)
    }

    /// The median p50 at one connection, in µs.
    fn p50(&self) -> f64 {
        self.median(|round| us(round.one_connection.p50))
    }
}

/// The median of `values` (the mean of the middle two of an even count); NaN for none.
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// The added p50s of `figures` (throughput ratio, added p50), in µs.
fn show_added(figures: &[(f64, f64)]) -> String {
    figures.iter().map(|(_, added)| format!("{added:.0}")).collect::<Vec<_>>().join("  ")
}

/// `BENCH_ROUNDS`: how many times every target is measured, in turn (default 3).
fn rounds() -> usize {
    std::env::var("BENCH_ROUNDS").ok().and_then(|text| text.parse().ok()).filter(|n| *n > 0).unwrap_or(3)
}

/// What one `wrk` run on a target measured.
struct Measured {
    run: WrkRun,
    /// The server's CPU per call (user, system), in µs.
    server_cpu: (f64, f64),
    /// The whole path's CPU per call, in µs (see [`Round::path_cpu_c32`]).
    path_cpu: f64,
}

/// Runs `wrk` on `target` with `connections` for [`PHASE`]; its figures and
/// the CPU per call meanwhile.
fn measure(target: &Target, connections: usize) -> Measured {
    let url = format!("{}/execute", target.url);
    let module = std::process::id();
    let cpu_now = || (target.server_pid.map(CpuTime::of), CpuTime::of(module), CpuTime::of_ended_children());
    // The ended children are wrk: no other child of this process ends meanwhile.
    let (server_before, module_before, wrk_before) = cpu_now();
    let run = wrk::run(&url, &target.body, connections, PHASE);
    let (server_after, module_after, wrk_after) = cpu_now();
    let calls = run.requests_per_second * PHASE.as_secs_f64();
    let total = |(user, system): (f64, f64)| user + system;
    let server_cpu = match (server_before, server_after) {
        (Some(before), Some(after)) => after.per_call_since(&before, calls),
        _ => (f64::NAN, f64::NAN),
    };
    // The direct target's server is the module: counted once.
    let proxy_cpu = if target.server_pid == Some(module) { 0.0 } else { total(server_cpu) };
    let path_cpu = total(module_after.per_call_since(&module_before, calls))
        + proxy_cpu
        + total(wrk_after.per_call_since(&wrk_before, calls));
    Measured { run, server_cpu, path_cpu }
}

async fn routing() {
    let module = ModuleServer::sdk(sdk_module("bench").0);
    let services = module_services(&[("bench", module.url())]);
    // As shipped (RUST_LOG=info: the per-call event is at debug, so not written;
    // the row keeps its old name), and at warn.
    let logged = OrchestratorProcess::start(&[("MODULE_SERVICES", &services)]);
    let quiet =
        OrchestratorProcess::start(&[("MODULE_SERVICES", &services), ("RUST_LOG", "warn,orchestrator::server=info")]);
    for orchestrator in [&logged, &quiet] {
        orchestrator.wait_for_module("bench", "up", Duration::from_secs(10)).await;
    }
    let proxy = Nginx::start(&format!("127.0.0.1:{}", module.port), free_port());
    let call = json!({"tool_name": "bench.echo", "arguments": {"text": "ping"}, "user_id": "u1"});
    let mut request = call.clone();
    request["user_permission"] = json!("user");
    let (call, request) = (call.to_string(), request.to_string());
    let floor = start_floor_proxy(&module.url());
    let mut targets = vec![
        Target::new("direct to the module", module.url(), call.clone(), Some(std::process::id())),
        Target::new("routed, logging each call", logged.url.clone(), request.clone(), Some(logged.pid())),
        Target::new("routed, RUST_LOG=warn", quiet.url.clone(), request, Some(quiet.pid())),
        Target::new("hyper floor, no routing", floor.url(), call.clone(), Some(floor.pid())),
    ];
    if let Some(proxy) = &proxy {
        targets.push(Target::new("nginx proxy", proxy.url.clone(), call, cpu::first_child(proxy.master_pid())));
    }
    let client = reqwest::Client::new();
    for target in &targets {
        let url = format!("{}/execute", target.url);
        let answer: Value = client
            .post(&url)
            .header("content-type", "application/json")
            .body(target.body.clone())
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(answer["success"], true, "{} answers a successful ToolResult: {answer}", target.name);
    }
    // Every target in turn, round after round, so that the host's changing
    // load reaches them alike; the table gives each figure's median.
    let rounds = rounds();
    for _ in 0..rounds {
        for target in &mut targets {
            wrk::run(&format!("{}/execute", target.url), &target.body, CONNECTIONS, WARM_UP);
            let c32 = measure(target, CONNECTIONS);
            let c1 = measure(target, 1);
            target.rounds.push(Round {
                throughput: c32.run,
                one_connection: c1.run,
                cpu_c32: c32.server_cpu,
                cpu_c1: c1.server_cpu,
                path_cpu_c32: c32.path_cpu,
            });
        }
    }

    println!(
        "routing: the same SDK tool (echo) directly, through the orchestrator binary, the hyper floor proxy and nginx;"
    );
    println!(
        "load by wrk -t1 -c{CONNECTIONS} for throughput and -c1 for latency, {PHASE:?} per run; every target in turn, \
         {rounds} rounds (BENCH_ROUNDS), medians"
    );
    println!(
        "(cpu: the serving process's CPU per call, user + kernel µs, at c32 and at c1; path: the module's, \
         the proxy's and wrk's together at c32)"
    );
    println!(
        "{:<26}  {:>9}  {:>7}  {:>10}  {:>10}  {:>10}  {:>13}  {:>13}  {:>12}",
        "path", "rps c32", "ratio", "p50 c1 µs", "p99 c1 µs", "+p50 µs", "cpu c32 µs", "cpu c1 µs", "path c32 µs"
    );
    let (direct_rps, direct_p50) = (targets[0].rps(), targets[0].p50());
    for target in &targets {
        let cpu = |at: fn(&Round) -> (f64, f64)| {
            format!("{:.1} + {:.1}", target.median(|round| at(round).0), target.median(|round| at(round).1))
        };
        println!(
            "{:<26}  {:>9.0}  {:>6.2}x  {:>10.1}  {:>10.1}  {:>10.1}  {:>13}  {:>13}  {:>12.1}",
            target.name,
            target.rps(),
            target.rps() / direct_rps,
            target.p50(),
            target.median(|round| us(round.one_connection.p99)),
            target.p50() - direct_p50,
            cpu(|round| round.cpu_c32),
            cpu(|round| round.cpu_c1),
            target.median(|round| round.path_cpu_c32),
        );
    }
    if proxy.is_none() {
        println!("nginx proxy: not measured, nginx is not installed (apt-get install -y nginx)");
    }
    let find = |name: &str| targets.iter().find(|target| target.name == name);
    let (direct, routed, proxied) = (&targets[0], find("routed, RUST_LOG=warn"), find("nginx proxy"));
    if let (Some(routed), Some(proxied)) = (routed, proxied) {
        println!(
            "routed/nginx throughput: {:.2} (goal >= 0.9); added p50 at one connection: routed {:.1} µs (goal <= 60), nginx {:.1} µs",
            routed.rps() / proxied.rps(),
            routed.p50() - direct_p50,
            proxied.p50() - direct_p50,
        );
        // Each round's own figures, against the same round's direct call and nginx:
        // (throughput / nginx's, added p50 in µs).
        let by_round = |target: &Target| -> Vec<(f64, f64)> {
            let rounds = target.rounds.iter().zip(&direct.rounds).zip(&proxied.rounds);
            rounds
                .map(|((round, direct), nginx)| {
                    let ratio = round.throughput.requests_per_second / nginx.throughput.requests_per_second;
                    (ratio, us(round.one_connection.p50) - us(direct.one_connection.p50))
                })
                .collect()
        };
        let show = |figures: Vec<(f64, f64)>| {
            figures.iter().map(|(ratio, added)| format!("{ratio:.2}/{added:.0}")).collect::<Vec<_>>().join("  ")
        };
        println!("  by round (throughput/nginx's / +p50 µs): routed {}", show(by_round(routed)));
        println!("  by round (+p50 µs): nginx {}", show_added(&by_round(proxied)));
        if let Some(floor) = find("hyper floor, no routing") {
            println!(
                "hyper floor/nginx throughput: {:.2}; added p50 at one connection: {:.1} µs (the stack alone, without the orchestrator's work)",
                floor.rps() / proxied.rps(),
                floor.p50() - direct_p50,
            );
            println!("  by round (throughput/nginx's / +p50 µs): floor {}", show(by_round(floor)));
        }
        // While wrk, the module and the proxy saturate the cores, throughput
        // follows the whole path's CPU per call: nginx's path over another's
        // is the throughput ratio that path allows when CPU is all that limits it.
        let path = |target: &Target| target.median(|round| round.path_cpu_c32);
        let ratio = |target: &Target| path(proxied) / path(target);
        let mut allowed = format!("routed {:.2}", ratio(routed));
        if let Some(floor) = find("hyper floor, no routing") {
            allowed.push_str(&format!(", floor {:.2}", ratio(floor)));
        }
        println!(
            "whole-path CPU per call at c32: nginx's {:.1} µs over each path's, the throughput ratio it allows: {} \
             (0.9 allows the routed path {:.1} µs)",
            path(proxied),
            allowed,
            path(proxied) / 0.9
        );
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

/// This benchmark's binary started as the floor proxy (`BENCH_SERVE=floor`)
/// in front of `module_url`, in a process of its own as the orchestrator and
/// nginx are.
fn start_floor_proxy(module_url: &str) -> test_support::Process {
    let mut command = std::process::Command::new(std::env::current_exe().expect("the benchmark's own path"));
    command.env("BENCH_SERVE", "floor").env("FLOOR_MODULE_URL", module_url);
    test_support::Process::start(command)
}

/// Serves the benchmark's module until killed, printing its URL.
fn serve_module() {
    let module = ModuleServer::sdk(sdk_module("bench").0);
    println!("bench module listening on {}", module.url());
    loop {
        std::thread::park();
    }
}

fn main() {
    match std::env::var("BENCH_SERVE").as_deref() {
        Ok("module") => return serve_module(),
        Ok("floor") => return floor_proxy::serve(&std::env::var("FLOOR_MODULE_URL").expect("FLOOR_MODULE_URL is set")),
        _ => {}
    }
    // `cargo bench` passes `--bench`; a filter argument selects nothing here.
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    runtime.block_on(async {
        routing().await;
        discovery().await;
    });
}
