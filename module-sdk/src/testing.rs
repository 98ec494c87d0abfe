//! Calling a module's tools from its own tests, in-process and without a
//! port, through the same lookup, validation, timeout and panic handling as
//! `POST /execute`.

use std::sync::Arc;

use serde_json::Value;

use crate::contract::{ModuleManifest, ToolCall, ToolResult};
use crate::error::ModuleError;
use crate::module::{Module, ModuleService};

/// An in-process client of one module.
#[derive(Clone)]
pub struct TestClient {
    service: Arc<ModuleService>,
}

impl Module {
    /// Builds the module (reporting any definition error) for in-process calls.
    pub fn test_client(self) -> Result<TestClient, ModuleError> {
        Ok(TestClient { service: Arc::new(self.build()?) })
    }
}

impl TestClient {
    /// The manifest the module would serve.
    pub fn manifest(&self) -> &ModuleManifest {
        self.service.manifest()
    }

    /// Calls `tool` (`"greet"` or `"demo.greet"`) with no `user_id`.
    pub async fn call(&self, tool: &str, arguments: Value) -> ToolResult {
        self.send(tool, arguments, None).await
    }

    /// Calls `tool` as the orchestrator would for the user `user_id`.
    pub async fn call_as(&self, user_id: &str, tool: &str, arguments: Value) -> ToolResult {
        self.send(tool, arguments, Some(user_id.to_owned())).await
    }

    /// Sends a whole ToolCall, exactly as `POST /execute` would run it.
    pub async fn execute(&self, call: ToolCall) -> ToolResult {
        self.service.execute(call).await
    }

    async fn send(&self, tool: &str, arguments: Value, user_id: Option<String>) -> ToolResult {
        let prefix = format!("{}.", self.manifest().module_name);
        let tool_name = if tool.starts_with(&prefix) { tool.to_owned() } else { format!("{prefix}{tool}") };
        let arguments = match arguments {
            Value::Object(map) => map,
            // Over HTTP this is a 400; in-process a test asked for it on purpose.
            other => panic!("TestClient: arguments must be a JSON object, got {other}"),
        };
        self.execute(ToolCall { tool_name, arguments, user_id }).await
    }
}
