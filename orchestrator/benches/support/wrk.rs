//! `wrk`, the independent HTTP load generator, run against one URL with a
//! JSON `POST` body (through a Lua script), its figures read back.

use std::io::Write;
use std::process::Command;
use std::time::Duration;

/// What one `wrk` run measured.
pub struct WrkRun {
    /// Requests per second over the run.
    pub requests_per_second: f64,
    /// The median latency (from `--latency`).
    pub p50: Duration,
    /// The 99th percentile latency.
    pub p99: Duration,
}

/// Runs `wrk -t1 -c{connections} -d{duration} --latency` posting `body` to `url`.
pub fn run(url: &str, body: &str, connections: usize, duration: Duration) -> WrkRun {
    let mut script = tempfile::Builder::new().suffix(".lua").tempfile().unwrap();
    let body = body.replace('\\', "\\\\").replace('"', "\\\"");
    writeln!(
        script,
        "wrk.method = \"POST\"\nwrk.body = \"{body}\"\nwrk.headers[\"Content-Type\"] = \"application/json\""
    )
    .unwrap();
    let output = Command::new("wrk")
        .args(["-t1", &format!("-c{connections}"), &format!("-d{}s", duration.as_secs()), "--latency", "-s"])
        .arg(script.path())
        .arg(url)
        .output()
        .expect("wrk runs (apt-get install -y wrk)");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success() && !text.contains("Non-2xx"), "wrk against {url} failed: {text}");
    let field = |prefix: &str| {
        text.lines()
            .find_map(|line| line.trim().strip_prefix(prefix).map(|rest| rest.trim().to_owned()))
            .unwrap_or_else(|| panic!("no `{prefix}` in wrk's output: {text}"))
    };
    WrkRun {
        requests_per_second: field("Requests/sec:").parse().unwrap(),
        p50: latency(&field("50%")),
        p99: latency(&field("99%")),
    }
}

/// `wrk`'s `123.45us`, `1.20ms` or `2.00s`.
fn latency(text: &str) -> Duration {
    let split = text.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().unwrap_or_else(|_| panic!("not a latency: {text}"));
    let seconds = match unit {
        "us" => number / 1e6,
        "ms" => number / 1e3,
        "s" => number,
        _ => panic!("unknown latency unit in {text}"),
    };
    Duration::from_secs_f64(seconds)
}
