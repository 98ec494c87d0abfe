//! Child processes that are killed when the test ends, even when it panics,
//! and a wait until a started module answers `/health`.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a started module may take to answer `/health`.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A child process, killed and reaped on drop.
pub struct Running {
    child: Child,
    /// The base URL it serves.
    pub url: String,
    log: std::path::PathBuf,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Running {
    /// Everything the process wrote so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// A port nothing listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Starts `command` with `PORT` and `HOST` set, its output in `log_dir`,
/// and waits until it answers `GET /health`; retries with another port
/// when the process dies at once (the port was taken meanwhile).
pub async fn start(mut command: impl FnMut() -> Command, log_dir: &Path, label: &str) -> Running {
    let mut last_log = String::new();
    for attempt in 0..3 {
        let port = free_port();
        let log = log_dir.join(format!("{label}-{attempt}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let child = command()
            .env("HOST", "127.0.0.1")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {label}: {e}"));
        let mut running = Running { child, url: format!("http://127.0.0.1:{port}"), log };
        if wait_for_health(&mut running).await {
            return running;
        }
        last_log = running.log();
    }
    panic!("{label} never answered GET /health; its output:\n{last_log}");
}

/// Whether the process answers `/health` before it exits or times out.
async fn wait_for_health(running: &mut Running) -> bool {
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let deadline = Instant::now() + START_TIMEOUT;
    while Instant::now() < deadline {
        if matches!(running.child.try_wait(), Ok(Some(_))) {
            return false;
        }
        if let Ok(reply) = client.get(format!("{}/health", running.url)).send().await
            && reply.status().is_success()
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}
