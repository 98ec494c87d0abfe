//! What the sandbox and the module add to running `pass`, side by side in
//! one run: a bare `python3 -c pass`, the same in bubblewrap with the
//! module's isolation flags, and a whole `execute_code` call over HTTP to
//! the module binary; then runs per second with N calls in parallel.
//! Prints figures; asserts nothing about time.
//!
//! `cargo bench -p code_runner --bench overhead`; `CODE_BENCH_RUNS` sets
//! the runs per line (default 200), `CODE_BENCH_PARALLEL` the parallel
//! levels (default `1,2,4,8`).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use code_runner::Sandbox;
use code_runner::settings::Settings;
use serde_json::json;
use test_support::Process;

fn setting(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

/// bubblewrap with the module's own isolation flags (`Sandbox::isolation_arguments`,
/// from the default settings), running Python directly (no shell, no file
/// listing, no limits), as the module's first run slot's user when root.
fn bwrap_pass() -> Command {
    let settings = Settings::parse_from(["code_runner"]);
    let sandbox = Sandbox::new(&settings).expect("the default settings make a sandbox");
    let mut command = Command::new(sandbox.bwrap());
    command.args(sandbox.isolation_arguments()).arg("--").arg(sandbox.python()).args(["-c", "pass"]);
    if nix::unistd::Uid::effective().is_root() {
        std::os::unix::process::CommandExt::uid(&mut command, settings.sandbox_uid_base);
        std::os::unix::process::CommandExt::gid(&mut command, settings.sandbox_gid);
    }
    command
}

fn bare_pass() -> Command {
    let mut command = Command::new("/usr/bin/python3");
    command.args(["-c", "pass"]);
    command
}

/// Wall-clock times of `runs` runs of `command`, which must succeed.
fn time_process(mut command: Command, runs: usize) -> Vec<Duration> {
    command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    (0..runs)
        .map(|_| {
            let started = Instant::now();
            let status = command.status().expect("the command starts");
            assert!(status.success(), "{command:?}: {status}");
            started.elapsed()
        })
        .collect()
}

fn percentile(samples: &mut [Duration], fraction: f64) -> f64 {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * fraction).round() as usize;
    samples[index].as_secs_f64() * 1000.0
}

async fn call(client: &reqwest::Client, url: &str, user: &str) -> Duration {
    let body = json!({"tool_name": "code_runner.execute_code", "arguments": {"code": "pass"}, "user_id": user});
    let started = Instant::now();
    let answer: serde_json::Value = client.post(url).json(&body).send().await.unwrap().json().await.unwrap();
    let elapsed = started.elapsed();
    assert_eq!(answer["success"], true, "{answer}");
    assert_eq!(answer["result"]["exit_code"], 0, "{answer}");
    elapsed
}

#[tokio::main]
async fn main() {
    let runs: usize = setting("CODE_BENCH_RUNS", "200").parse().expect("CODE_BENCH_RUNS is a number");
    let levels: Vec<usize> = setting("CODE_BENCH_PARALLEL", "1,2,4,8")
        .split(',')
        .map(|level| level.trim().parse().expect("CODE_BENCH_PARALLEL is numbers"))
        .collect();
    let most = levels.iter().copied().max().unwrap_or(1).to_string();

    let mut module = Command::new(env!("CARGO_BIN_EXE_code_runner"));
    module.env("RUST_LOG", "warn").env("CODE_MAX_CONCURRENT_RUNS", &most).env("CODE_MAX_RUNS_PER_USER", &most);
    let module = Process::start(module);
    let url = format!("{}/execute", module.url());
    let client = reqwest::Client::new();
    // Warm-up: page cache, connection, the module's first run.
    time_process(bare_pass(), 5);
    time_process(bwrap_pass(), 5);
    for _ in 0..5 {
        call(&client, &url, "warm").await;
    }

    // Interleaved, so a change in the machine's load touches the three alike.
    let (mut bare, mut sandboxed, mut whole) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        bare.extend(time_process(bare_pass(), 1));
        sandboxed.extend(time_process(bwrap_pass(), 1));
        whole.push(call(&client, &url, "bench").await);
    }
    let (bare_p50, bwrap_p50, whole_p50) =
        (percentile(&mut bare, 0.5), percentile(&mut sandboxed, 0.5), percentile(&mut whole, 0.5));
    println!("`pass`, {runs} runs each, one at a time, interleaved (ms)");
    println!("{:<42} {:>8} {:>8} {:>14}", "", "p50", "p90", "added at p50");
    println!("{:<42} {bare_p50:>8.2} {:>8.2} {:>14}", "python3 -c pass", percentile(&mut bare, 0.9), "");
    println!(
        "{:<42} {bwrap_p50:>8.2} {:>8.2} {:>+14.2}",
        "bwrap (module's flags) python3 -c pass",
        percentile(&mut sandboxed, 0.9),
        bwrap_p50 - bare_p50
    );
    println!(
        "{:<42} {whole_p50:>8.2} {:>8.2} {:>+14.2}   (over bwrap alone)",
        "execute_code over HTTP (whole call)",
        percentile(&mut whole, 0.9),
        whole_p50 - bwrap_p50
    );

    println!(
        "\nexecute_code of `pass` over HTTP, N calls at a time ({} cores)",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!("{:>4} {:>10} {:>10}", "N", "runs/s", "p50 ms");
    for &level in &levels {
        let total = runs.max(level);
        let started = Instant::now();
        let per_worker = total / level;
        let workers = (0..level).map(|worker| {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move {
                let mut times = Vec::with_capacity(per_worker);
                for _ in 0..per_worker {
                    times.push(call(&client, &url, &format!("user-{worker}")).await);
                }
                times
            })
        });
        let mut times: Vec<Duration> =
            futures::future::join_all(workers).await.into_iter().flat_map(Result::unwrap).collect();
        let rate = times.len() as f64 / started.elapsed().as_secs_f64();
        println!("{level:>4} {rate:>10.1} {:>10.2}", percentile(&mut times, 0.5));
    }
}
