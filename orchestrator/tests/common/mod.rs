//! Shared parts of the whole-process tests (and the routing benchmark): the
//! real orchestrator binary on a free port, module servers that can be
//! killed like a process, and a real `redis-server`.

#![allow(dead_code)] // Each test binary uses a different part of this file.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener as StdListener};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use serde_json::Value;
use tokio::runtime::Runtime;

/// The orchestrator binary under test.
pub const BINARY: &str = env!("CARGO_BIN_EXE_orchestrator");

/// A port nothing listens on (bound once, then released).
pub fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A running `orchestrator serve`, killed when dropped.
pub struct OrchestratorProcess {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    logs: Arc<Mutex<Vec<String>>>,
    client: reqwest::Client,
}

impl OrchestratorProcess {
    /// Starts the binary with `env` on a free port and waits until it listens
    /// (a `RUST_LOG` in `env` must keep `orchestrator::server` at `info`).
    pub fn start(env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(BINARY);
        command
            .arg("serve")
            .env_clear()
            .env("HOST", "127.0.0.1")
            .env("PORT", "0")
            .env("LOG_FORMAT", "json")
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("the orchestrator binary starts");
        let stdout = child.stdout.take().unwrap();
        let logs = Arc::new(Mutex::new(Vec::new()));
        let (address_tx, address_rx) = std::sync::mpsc::channel();
        let sink = Arc::clone(&logs);
        std::thread::spawn(move || {
            let mut listening = false;
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if !listening
                    && let Ok(event) = serde_json::from_str::<Value>(&line)
                    && event["message"] == "orchestrator listening"
                {
                    listening = true;
                    let _ = address_tx.send(event["address"].as_str().unwrap_or_default().to_owned());
                }
                sink.lock().unwrap().push(line);
            }
        });
        let Ok(address) = address_rx.recv_timeout(Duration::from_secs(20)) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the orchestrator did not start; its logs: {:#?}", logs.lock().unwrap());
        };
        Self { child, url: format!("http://{address}"), logs, client: reqwest::Client::new() }
    }

    /// Every log line so far.
    pub fn logs(&self) -> Vec<String> {
        self.logs.lock().unwrap().clone()
    }

    /// `GET path`, as JSON; panics unless the answer is 200.
    pub async fn get(&self, path: &str) -> Value {
        let response = self.client.get(format!("{}{path}", self.url)).send().await.unwrap();
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

    /// `POST path` with a JSON body: the status and the JSON answer.
    pub async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let response = self.client.post(format!("{}{path}", self.url)).json(body).send().await.unwrap();
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

impl Drop for OrchestratorProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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

/// A `redis-server` on a free port, without persistence, killed when dropped.
pub struct RedisServer {
    child: Option<Child>,
    /// The port it listens on.
    pub port: u16,
}

impl RedisServer {
    /// Starts one, or says why not: `None` (with a loud message) when
    /// `redis-server` is missing, a panic instead when REQUIRE_SERVICES=1.
    pub fn start() -> Option<Self> {
        let found = Command::new("redis-server").arg("--version").stdout(Stdio::null()).status().is_ok();
        if !found {
            assert!(
                std::env::var("REQUIRE_SERVICES").as_deref() != Ok("1"),
                "redis-server is not installed and REQUIRE_SERVICES=1: install it (apt-get install -y redis-server)"
            );
            eprintln!("\n!!! SKIPPED: redis-server is not installed; install it to run this test !!!\n");
            return None;
        }
        let mut server = Self { child: None, port: free_port() };
        server.restart();
        Some(server)
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills the server (its data goes with it).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port, empty, and waits until it answers.
    pub fn restart(&mut self) {
        self.kill();
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("redis-server starts");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        let address = SocketAddr::from(([127, 0, 0, 1], self.port));
        while std::net::TcpStream::connect_timeout(&address, Duration::from_millis(100)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start on port {}", self.port);
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A connection for inspecting what the orchestrator wrote.
    pub async fn connection(&self) -> redis::aio::MultiplexedConnection {
        redis::Client::open(self.url()).unwrap().get_multiplexed_async_connection().await.unwrap()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

pub mod modules;
