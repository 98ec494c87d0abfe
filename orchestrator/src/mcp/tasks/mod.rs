//! MCP tasks at `/mcp` (the tasks extension `io.modelcontextprotocol/tasks`
//! of 2026-07-28, SEP-2663): a client that declares the extension gets a
//! call that runs longer than `MCP_TASK_AFTER_SECONDS` as a task, which it
//! polls with `tasks/get` and may stop with `tasks/cancel`.
//!
//! The extension has no per-tool marker: the server decides per call. Every
//! tool qualifies, except those that wait for a person's approval, whose
//! confirmation is asked within the call first (the specification asks to
//! resolve such exchanges before a task is created); a call that ends
//! sooner answers directly, so only calls that do run long become tasks.
//! Tasks are kept in the memory of the process that runs them ([`store`]),
//! and with `REDIS_URL` shared with the other replicas ([`shared`]); there is no
//! `notifications/tasks` (rmcp 3.11 cannot route it on
//! `subscriptions/listen` yet): clients poll, every `pollIntervalMs`.

use rmcp::RoleServer;
use rmcp::model::ProtocolVersion;
use rmcp::service::RequestContext;

pub mod front;
pub mod run;
pub mod settings;
pub mod shared;
pub mod store;

pub use front::McpTasks;
pub use run::run_as_task;
pub use settings::TaskSettings;
pub use store::{TaskOwner, TaskStore};

/// Whether the client of `context` accepts a task in answer: it speaks
/// 2026-07-28 or later (the extension's revision) and declares the extension.
pub fn client_accepts_tasks(context: &RequestContext<RoleServer>) -> bool {
    let recent = context.protocol_version().is_some_and(|version| version >= ProtocolVersion::V_2026_07_28);
    recent && context.client_capabilities().is_some_and(|capabilities| capabilities.supports_tasks())
}
