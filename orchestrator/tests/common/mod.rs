//! Shared parts of the whole-process tests (and the routing benchmark): the
//! real orchestrator binary (started through `test-support`), module servers
//! that can be killed like a process, and hung ports.

#![allow(dead_code)] // Each test binary uses a different part of this file.

use std::net::TcpListener as StdListener;
use std::process::Command;
use std::time::{Duration, Instant};

use axum::Router;
use serde_json::Value;
use test_support::Process;
use tokio::runtime::Runtime;

/// The orchestrator binary under test.
pub const BINARY: &str = env!("CARGO_BIN_EXE_orchestrator");

/// A port nothing listens on (bound once, then released): for addresses
/// that must refuse connections, or a module server started later.
pub fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A running `orchestrator serve`, killed when dropped.
pub struct OrchestratorProcess {
    process: Process,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    client: reqwest::Client,
    /// The bearer token sent with every request of the helpers below.
    token: Option<String>,
}

impl OrchestratorProcess {
    /// Starts the binary with only `env` on a port the kernel picks, once it
    /// listens (logs in JSON at `info` unless `env` sets `RUST_LOG`).
    pub fn start(env: &[(&str, &str)]) -> Self {
        Self::start_under(&[], env)
    }

    /// [`Self::start`], run by the command line `wrapper` (`unshare ...`),
    /// which passes the orchestrator's output through.
    pub fn start_under(wrapper: &[&str], env: &[(&str, &str)]) -> Self {
        let mut line = wrapper.to_vec();
        line.extend([BINARY, "serve"]);
        let mut command = Command::new(line[0]);
        command.args(&line[1..]).env_clear().envs(env.iter().copied());
        let process = Process::start(command);
        Self { url: process.url(), process, client: reqwest::Client::new(), token: None }
    }

    /// The same process, its helpers sending `Authorization: Bearer token`.
    pub fn with_token(mut self, token: &str) -> Self {
        self.token = Some(token.to_owned());
        self
    }

    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// Every log line so far.
    pub fn logs(&self) -> Vec<String> {
        self.process.logs()
    }

    /// Whether a log line that `matches` arrives within 10 s.
    pub fn logged(&self, matches: impl Fn(&str) -> bool) -> bool {
        self.process.wait_for_log_line(matches, Duration::from_secs(10))
    }

    /// The address it listens on.
    pub fn address(&self) -> std::net::SocketAddr {
        self.process.address()
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Sends SIGTERM and waits for it to exit (see `Process::terminate`).
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        self.process.terminate()
    }

    /// Its peak resident memory so far, in bytes.
    pub fn peak_rss_bytes(&self) -> u64 {
        self.process.peak_rss_bytes()
    }

    /// `GET path`, as JSON; panics unless the answer is 200.
    pub async fn get(&self, path: &str) -> Value {
        let response = self.authorized(self.client.get(format!("{}{path}", self.url))).send().await.unwrap();
        assert_eq!(response.status(), 200, "GET {path}");
        response.json().await.unwrap()
    }

    /// `GET path` with a bearer token: the status and the JSON body.
    pub async fn get_with(&self, path: &str, token: Option<&str>) -> (u16, Value) {
        let mut request = self.client.get(format!("{}{path}", self.url));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
    }

    /// `POST path` with a JSON body and a bearer token (`None`: none at all).
    pub async fn post_with(&self, path: &str, token: Option<&str>, body: &Value) -> (u16, Value) {
        let mut request = self.client.post(format!("{}{path}", self.url)).json(body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
    }

    /// `GET /metrics` (with the helpers' token), as text; panics unless the answer is 200.
    pub async fn metrics(&self) -> String {
        let response = self.authorized(self.client.get(format!("{}/metrics", self.url))).send().await.unwrap();
        assert_eq!(response.status(), 200, "GET /metrics");
        response.text().await.unwrap()
    }

    /// `POST path` with a JSON body: the status and the JSON answer.
    pub async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let response =
            self.authorized(self.client.post(format!("{}{path}", self.url))).json(body).send().await.unwrap();
        (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
    }

    /// `POST /execute`, expecting a 200 ToolResult.
    pub async fn execute(&self, body: Value) -> Value {
        let (status, result) = self.post("/execute", &body).await;
        assert_eq!(status, 200, "{result}");
        result
    }

    /// The state of module `name` at `GET /modules`.
    pub async fn module(&self, name: &str) -> Value {
        let modules = self.get("/modules").await;
        modules["modules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("no module {name} in {modules}"))
            .clone()
    }

    /// Waits until module `name` is in `state` (up, cached, down) with a
    /// recorded outcome, and returns it.
    pub async fn wait_for_module(&self, name: &str, state: &str, within: Duration) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let module = self.module(name).await;
            let settled = module["last_success"].is_string() || module["last_error"].is_string();
            if module["state"] == state && settled {
                return module;
            }
            assert!(Instant::now() < deadline, "module {name} never became {state}: {module}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The tool names listed at `GET /tools?{query}`.
    pub async fn tool_names(&self, query: &str) -> Vec<String> {
        let tools = self.get(&format!("/tools?{query}")).await;
        tools.as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
    }
}

/// A module server on its own runtime: killing it drops every socket at
/// once, as the death of a process would.
pub struct ModuleServer {
    runtime: Option<Runtime>,
    /// The port it listens on.
    pub port: u16,
}

impl ModuleServer {
    /// Serves `router` on a free port.
    pub fn start(router: Router) -> Self {
        Self::start_on(0, router)
    }

    /// Serves `router` on `port` (0: a free one).
    pub fn start_on(port: u16, router: Router) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let listener = StdListener::bind(("127.0.0.1", port)).unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, router).await
        });
        Self { runtime: Some(runtime), port }
    }

    /// Serves an SDK module (its real `/manifest` and `/execute`).
    pub fn sdk(module: module_sdk::Module) -> Self {
        Self::start(module.router(&module_sdk::ServeConfig::default()).expect("the test module is valid"))
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Stops at once, dropping the listener and every open connection.
    pub fn kill(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Drop for ModuleServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A port that accepts connections but never answers (a hung module).
pub struct HungServer {
    _listener: StdListener,
    /// The port.
    pub port: u16,
}

impl HungServer {
    /// Listens on a free port and never accepts: the kernel completes the
    /// handshake, the request is sent, no answer ever comes.
    pub fn start() -> Self {
        let listener = StdListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        Self { _listener: listener, port }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// `MODULE_SERVICES` for `(name, url)` pairs.
pub fn module_services(modules: &[(&str, String)]) -> String {
    let map: serde_json::Map<String, Value> =
        modules.iter().map(|(n, u)| ((*n).to_owned(), Value::from(u.as_str()))).collect();
    Value::Object(map).to_string()
}

pub mod identities;
pub mod modules;
pub mod tls;

/// The `research` sample module's binary, built next to the test binaries
/// by `cargo build --workspace`; `None` (said loudly) when it is not built,
/// a failure under `REQUIRE_SERVICES=1` (CI).
pub fn research_binary() -> Option<std::path::PathBuf> {
    let test_binary = std::env::current_exe().unwrap();
    let build_dir = test_binary.parent().and_then(|deps| deps.parent()).unwrap();
    let binary = build_dir.join("research");
    if binary.exists() {
        return Some(binary);
    }
    let message = format!("{} is not built (`cargo build --workspace` builds it)", binary.display());
    assert!(!test_support::services_required(), "{message}");
    eprintln!("\n!!! SKIPPED: {message} !!!\n");
    None
}

pub mod browser;
