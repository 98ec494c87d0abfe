//! A real `prometheus` server that scrapes the servers under test, for the
//! tests of `/metrics`.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::services_required;

/// One scrape target: a job name, the address whose `/metrics` is read,
/// and the bearer token it needs, if any.
pub struct ScrapeTarget<'a> {
    /// The `job` label Prometheus gives its series.
    pub job: &'a str,
    /// Where the server listens.
    pub address: SocketAddr,
    /// Sent as `Authorization: Bearer <token>`.
    pub bearer_token: Option<&'a str>,
}

/// A `prometheus` scraping its targets every second, with its data in a
/// temporary directory; killed when dropped.
pub struct PrometheusServer {
    child: Child,
    address: SocketAddr,
    _dir: tempfile::TempDir,
}

impl PrometheusServer {
    /// Starts one on a port it picks itself (read back from its
    /// "Listening on" log line). When `prometheus` is missing this panics
    /// under `REQUIRE_SERVICES=1` (CI) and otherwise returns `None` after a
    /// loud message.
    pub fn start(targets: &[ScrapeTarget<'_>]) -> Option<Self> {
        if Command::new("prometheus").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_err() {
            assert!(
                !services_required(),
                "prometheus is not installed and REQUIRE_SERVICES=1: install it (apt-get install -y prometheus)"
            );
            eprintln!("\n!!! SKIPPED: prometheus is not installed; install it to run this test !!!\n");
            return None;
        }
        let dir = tempfile::tempdir().expect("a temporary directory");
        let config = dir.path().join("prometheus.yml");
        std::fs::write(&config, scrape_config(targets)).expect("the configuration is written");
        let mut child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg("--web.listen-address=127.0.0.1:0")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("prometheus starts");
        let stderr = child.stderr.take().expect("stderr is piped");
        let (found, address) = mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            // Read to the end, so prometheus never blocks on a full pipe.
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !sent && line.contains("msg=\"Listening on\"") {
                    let bound = line.rsplit("address=").next().and_then(|a| a.trim().parse::<SocketAddr>().ok());
                    sent = found.send(bound).is_ok();
                }
            }
        });
        match address.recv_timeout(Duration::from_secs(30)) {
            Ok(Some(address)) => Some(Self { child, address, _dir: dir }),
            outcome => {
                let _ = child.kill();
                panic!("prometheus did not say where it listens within 30 s: {outcome:?}")
            }
        }
    }

    /// The value of the instant `query` once it has a sample `>= at_least`,
    /// polling until `within` has passed; panics with the last answer then.
    pub async fn wait_for_value(&self, query: &str, at_least: f64, within: Duration) -> f64 {
        let url = format!("http://{}/api/v1/query", self.address);
        let client = reqwest::Client::new();
        let deadline = Instant::now() + within;
        loop {
            let answer: Value = match client.get(&url).query(&[("query", query)]).send().await {
                Ok(response) => response.json().await.unwrap_or(Value::Null),
                Err(error) => Value::String(error.to_string()),
            };
            let value = answer["data"]["result"][0]["value"][1].as_str().and_then(|v| v.parse::<f64>().ok());
            match value {
                Some(value) if value >= at_least => return value,
                _ if Instant::now() >= deadline => {
                    panic!("prometheus: `{query}` did not reach {at_least} within {within:?}; last answer: {answer}")
                }
                _ => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
    }
}

impl Drop for PrometheusServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The YAML configuration scraping `targets` every second.
fn scrape_config(targets: &[ScrapeTarget<'_>]) -> String {
    let mut yaml = String::from("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n");
    for target in targets {
        yaml.push_str(&format!("  - job_name: {:?}\n", target.job));
        if let Some(token) = target.bearer_token {
            yaml.push_str(&format!("    authorization:\n      credentials: {token:?}\n"));
        }
        yaml.push_str(&format!("    static_configs:\n      - targets: [\"{}\"]\n", target.address));
    }
    yaml
}
