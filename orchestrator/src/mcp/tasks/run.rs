//! A call of a client that declared the tasks extension. It runs in a
//! tokio task of its own from the start, holding a slot of the
//! [`TaskStore`]: if it ends within `MCP_TASK_AFTER_SECONDS` its answer is
//! sent directly (the slot freed); otherwise the slot becomes a task, the
//! client gets `CreateTaskResult` and polls `tasks/get`, and the call goes
//! on without the request. Until then the request's cancellation, or the
//! request going away, stops the call as for any other.

use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use rmcp::ErrorData;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock, CreateTaskResult};
use tokio::sync::oneshot;
use tokio::task::AbortHandle;

use crate::mcp::progress::{ProgressTarget, with_progress};
use crate::mcp::tasks::front::McpTasks;
use crate::mcp::tasks::store::{Answer, TaskOwner, TaskStore};

/// Runs `call` for `owner`, directly or as a task (see the module's
/// documentation); progress goes to `progress` while the request waits,
/// and `cancelled` ending first stops the call. A full store refuses the
/// call (an error result naming the budget), which then never runs.
pub async fn run_as_task(
    tasks: &McpTasks,
    owner: TaskOwner,
    call: impl Future<Output = Answer> + Send + 'static,
    progress: Option<ProgressTarget>,
    cancelled: impl Future<Output = ()>,
) -> Result<CallToolResponse, ErrorData> {
    let store = &*tasks.store;
    let id = match store.reserve(owner) {
        Ok(id) => id,
        Err(full) => return Ok(CallToolResult::error(vec![ContentBlock::text(full.to_string())]).into()),
    };
    let (done, finished) = oneshot::channel::<()>();
    let running = tokio::spawn({
        let tasks = tasks.clone();
        let id = id.clone();
        async move {
            let answer = AssertUnwindSafe(call).catch_unwind().await.unwrap_or_else(|_| {
                Err(ErrorData::internal_error("the call failed inside the orchestrator (see its log)", None))
            });
            tasks.store.finish(&id, answer);
            let _ = done.send(());
            tasks.share(&id).await;
        }
    });
    let mut slot = Slot { store, id, running: running.abort_handle(), published: false };
    let after = store.after();
    let answered = async {
        if !after.is_zero() {
            // An error means the call was dropped, which only this request does.
            let _ = tokio::time::timeout(after, finished).await;
        }
    };
    tokio::select! {
        () = with_progress(answered, progress) => {}
        () = cancelled => {
            return Ok(CallToolResult::error(vec![ContentBlock::text("the call was cancelled")]).into());
        }
    }
    if let Some(task) = store.publish(&slot.id, slot.running.clone()) {
        slot.published = true;
        tracing::debug!(task = %slot.id, "an MCP call became a task");
        tasks.share(&slot.id).await;
        tasks.watch_cancels(slot.id.clone());
        return Ok(CreateTaskResult::new(task).into());
    }
    match store.take(&slot.id) {
        Some(answer) => answer.map(Into::into),
        None => Err(ErrorData::internal_error("the call's task slot was lost", None)),
    }
}

/// A call's slot while its request waits: if the request goes away before
/// the slot became a task, the call is stopped and the slot freed.
struct Slot<'a> {
    store: &'a TaskStore,
    id: String,
    running: AbortHandle,
    published: bool,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        if !self.published {
            self.running.abort();
            self.store.release(&self.id);
        }
    }
}
