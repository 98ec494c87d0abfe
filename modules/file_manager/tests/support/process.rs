//! The real module binary, started on a free loopback port and killed when
//! the test ends (even when it panics).

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The binary under test.
const BINARY: &str = env!("CARGO_BIN_EXE_file_manager");

/// A running file_manager process.
pub struct ModuleProcess {
    child: Child,
    client: ModuleClient,
}

/// Calls a module process over HTTP; cheap to clone into concurrent tasks.
#[derive(Clone)]
pub struct ModuleClient {
    base_url: String,
    http: reqwest::Client,
}

impl ModuleProcess {
    /// Starts the module on `files_root` with extra `env`, and waits until
    /// its `/health` answers.
    pub async fn start(files_root: &Path, env: &[(&str, &str)]) -> Self {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(BINARY)
            .env_clear()
            .envs(env.iter().copied())
            .env("FILES_ROOT", files_root)
            .env("HOST", "127.0.0.1")
            .env("PORT", port.to_string())
            .env("RUST_LOG", "error")
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("could not start {BINARY}: {e}"));
        let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
        let client = ModuleClient { base_url: format!("http://127.0.0.1:{port}"), http };
        let mut process = Self { child, client };
        process.wait_until_healthy().await;
        process
    }

    async fn wait_until_healthy(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("the module exited before it was up: {status}");
            }
            let health = self.client.http.get(format!("{}/health", self.client.base_url)).send().await;
            if health.is_ok_and(|r| r.status().is_success()) {
                return;
            }
            assert!(Instant::now() < deadline, "the module did not answer /health within 20 s");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A client of this process.
    pub fn client(&self) -> ModuleClient {
        self.client.clone()
    }

    /// `POST /execute` for `tool` as `user_id`; the ToolResult.
    pub async fn call(&self, user_id: &str, tool: &str, arguments: Value) -> Value {
        self.client.call(user_id, tool, arguments).await
    }

    /// Kills the process with SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for ModuleProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl ModuleClient {
    /// `POST /execute` for `tool` as `user_id` (none: no user); the ToolResult,
    /// or the transport error when the process is gone.
    pub async fn try_call(&self, user_id: Option<&str>, tool: &str, arguments: Value) -> Result<Value, reqwest::Error> {
        let body = json!({"tool_name": format!("file_manager.{tool}"), "arguments": arguments, "user_id": user_id});
        let response = self.http.post(format!("{}/execute", self.base_url)).json(&body).send().await?;
        assert_eq!(response.status(), 200, "a tool call always gets 200");
        response.json().await
    }

    /// `POST /execute` for `tool` as `user_id`; the ToolResult.
    pub async fn call(&self, user_id: &str, tool: &str, arguments: Value) -> Value {
        self.try_call(Some(user_id), tool, arguments).await.unwrap()
    }
}
