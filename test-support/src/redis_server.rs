//! A real `redis-server` for the tests that need one.

use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::services_required;

/// A `redis-server` on loopback without persistence, killed when dropped.
pub struct RedisServer {
    child: Option<Child>,
    /// The port it listens on (kept across [`RedisServer::restart`]).
    pub port: u16,
}

impl RedisServer {
    /// Starts one. When `redis-server` is missing this panics under
    /// `REQUIRE_SERVICES=1` (CI) and otherwise returns `None` after a loud
    /// message, so a developer without Redis sees what was not run.
    ///
    /// Redis cannot report a port it picked itself, so the port is one the
    /// kernel just handed out; a start that loses that race is retried on
    /// another port.
    pub fn start() -> Option<Self> {
        if Command::new("redis-server").arg("--version").stdout(Stdio::null()).status().is_err() {
            assert!(
                !services_required(),
                "redis-server is not installed and REQUIRE_SERVICES=1: install it (apt-get install -y redis-server)"
            );
            eprintln!("\n!!! SKIPPED: redis-server is not installed; install it to run this test !!!\n");
            return None;
        }
        let mut last_error = String::new();
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
            let mut server = Self { child: None, port };
            match server.try_restart() {
                Ok(()) => return Some(server),
                Err(error) => last_error = error,
            }
        }
        panic!("redis-server did not start: {last_error}");
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills the server; its data goes with it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port, empty, and waits until it answers.
    pub fn restart(&mut self) {
        self.try_restart().unwrap_or_else(|e| panic!("{e}"));
    }

    fn try_restart(&mut self) -> Result<(), String> {
        self.kill();
        let port = self.port.to_string();
        let mut child = Command::new("redis-server")
            .args(["--port", &port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot run redis-server: {e}"))?;
        let deadline = Instant::now() + Duration::from_secs(10);
        let address = SocketAddr::from(([127, 0, 0, 1], self.port));
        while std::net::TcpStream::connect_timeout(&address, Duration::from_millis(100)).is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("redis-server on port {} exited at start: {status}", self.port));
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("redis-server did not listen on port {} within 10 s", self.port));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.child = Some(child);
        Ok(())
    }

    /// A connection, for looking at what a test's server wrote.
    pub async fn connection(&self) -> redis::aio::MultiplexedConnection {
        let client = redis::Client::open(self.url()).expect("a redis URL parses");
        client.get_multiplexed_async_connection().await.expect("redis answers")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}
