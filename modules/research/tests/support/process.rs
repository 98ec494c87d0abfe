//! The real module binary, started on a free loopback port and killed when
//! the test ends (even when it panics).

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A running module process.
pub struct ModuleProcess {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub base_url: String,
    http: reqwest::Client,
}

impl ModuleProcess {
    /// Starts `binary` with `env` (plus HOST and PORT) and waits until its
    /// `/health` answers.
    pub async fn start(binary: &str, env: &[(&str, &str)]) -> Self {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(binary)
            .env_clear()
            .envs(env.iter().copied())
            .env("HOST", "127.0.0.1")
            .env("PORT", port.to_string())
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("could not start {binary}: {e}"));
        let mut process = Self { child, base_url: format!("http://127.0.0.1:{port}"), http: reqwest::Client::new() };
        process.wait_until_healthy().await;
        process
    }

    async fn wait_until_healthy(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("the module exited before it was up: {status}");
            }
            let health = self.http.get(format!("{}/health", self.base_url)).send().await;
            if health.is_ok_and(|r| r.status().is_success()) {
                return;
            }
            assert!(Instant::now() < deadline, "the module did not answer /health within 20 s");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `POST /execute` for `tool` (without the module prefix); the ToolResult.
    pub async fn call(&self, tool: &str, arguments: Value) -> Value {
        let body = json!({"tool_name": format!("research.{tool}"), "arguments": arguments});
        let response = self.http.post(format!("{}/execute", self.base_url)).json(&body).send().await.unwrap();
        assert_eq!(response.status(), 200, "a tool call always gets 200");
        response.json().await.unwrap()
    }

    /// `GET path`, as JSON.
    pub async fn get(&self, path: &str) -> Value {
        self.http.get(format!("{}{path}", self.base_url)).send().await.unwrap().json().await.unwrap()
    }
}

impl Drop for ModuleProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
