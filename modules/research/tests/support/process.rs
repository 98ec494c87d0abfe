//! The real module binary, started through the workspace's test harness.

use std::process::Command;

use serde_json::Value;
use test_support::Process;

/// A running module process, killed when dropped.
pub struct ModuleProcess {
    process: Process,
}

impl ModuleProcess {
    /// Starts `binary` with only `env` (and the harness's HOST, PORT and
    /// logging settings; `RUST_LOG` is `warn` unless `env` sets it), once it
    /// listens.
    pub fn start(binary: &str, env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(binary);
        command.env_clear().env("RUST_LOG", "warn").envs(env.iter().copied());
        Self { process: Process::start(command) }
    }

    /// `POST /execute` for `tool` (without the module prefix); the ToolResult.
    pub async fn call(&self, tool: &str, arguments: Value) -> Value {
        self.process.client().call(&format!("research.{tool}"), arguments, None).await
    }

    /// The process itself: its logs, whether it runs, its peak memory.
    pub fn process(&mut self) -> &mut Process {
        &mut self.process
    }

    /// `GET path`, as JSON.
    pub async fn get(&self, path: &str) -> Value {
        self.process.client().get_ok(path).await
    }
}
