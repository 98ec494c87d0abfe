//! The real module binary, started through the workspace's test harness.

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use test_support::Process;

/// The binary under test.
const BINARY: &str = env!("CARGO_BIN_EXE_file_manager");

/// A running file_manager process, killed when dropped.
pub struct ModuleProcess {
    process: Process,
}

/// Calls a file_manager process's tools by their short names; cheap to
/// clone into concurrent tasks.
#[derive(Clone)]
pub struct ModuleClient(test_support::ModuleClient);

impl ModuleProcess {
    /// Starts the module on `files_root` with extra `env`, once it listens.
    pub fn start(files_root: &Path, env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(BINARY);
        command.env_clear().envs(env.iter().copied()).env("FILES_ROOT", files_root).env("RUST_LOG", "error");
        Self { process: Process::start(command) }
    }

    /// A client of this process.
    pub fn client(&self) -> ModuleClient {
        ModuleClient(self.process.client())
    }

    /// `POST /execute` for `tool` as `user_id`; the ToolResult.
    pub async fn call(&self, user_id: &str, tool: &str, arguments: Value) -> Value {
        self.client().call(user_id, tool, arguments).await
    }

    /// Its peak resident memory so far, in bytes.
    pub fn peak_rss_bytes(&self) -> u64 {
        self.process.peak_rss_bytes()
    }

    /// Whether it still runs.
    pub fn is_running(&mut self) -> bool {
        self.process.is_running()
    }

    /// Kills the process with SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        self.process.kill();
    }
}

impl ModuleClient {
    /// `POST /execute` for `file_manager.<tool>` as `user_id` (none: no
    /// user); the ToolResult, or the transport error when the process is gone.
    pub async fn try_call(&self, user_id: Option<&str>, tool: &str, arguments: Value) -> Result<Value, reqwest::Error> {
        self.0.try_call(&format!("file_manager.{tool}"), arguments, user_id).await
    }

    /// `POST /execute` for `file_manager.<tool>` as `user_id`; the ToolResult.
    pub async fn call(&self, user_id: &str, tool: &str, arguments: Value) -> Value {
        self.0.call(&format!("file_manager.{tool}"), arguments, Some(user_id)).await
    }
}
