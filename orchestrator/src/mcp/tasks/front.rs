//! The tasks as `/mcp` requests see them: this process's [`TaskStore`],
//! and with `REDIS_URL` the tasks of the other replicas ([`SharedTasks`]).

use std::sync::Arc;
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::DetailedTask;

use crate::config::Config;
use crate::mcp::tasks::shared::SharedTasks;
use crate::mcp::tasks::store::{POLL_INTERVAL_MS, TaskOwner, TaskStore};

/// The tasks of `/mcp`; cheap to clone (shared parts).
#[derive(Clone)]
pub struct McpTasks {
    /// The tasks this process runs or ran.
    pub store: Arc<TaskStore>,
    shared: Option<Arc<SharedTasks>>,
}

impl McpTasks {
    /// The tasks under `config`'s settings, shared through its `REDIS_URL` if any.
    pub fn new(config: &Config) -> Self {
        let settings = &config.mcp.tasks;
        let store = Arc::new(TaskStore::new(settings.clone(), config.budgets.max_answer_bytes));
        let shared = config.redis_url.as_deref().and_then(|url| {
            SharedTasks::new(url, settings.ttl, config.budgets.max_tool_timeout)
                .inspect_err(|error| tracing::error!(error = %error, "MCP tasks are not shared: REDIS_URL is unusable"))
                .ok()
        });
        Self { store, shared: shared.map(Arc::new) }
    }

    /// Task `id`, if `owner`'s: this process's, else another replica's.
    pub async fn get(&self, owner: &TaskOwner, id: &str) -> Result<DetailedTask, ErrorData> {
        let not_found = match self.store.get(owner, id) {
            Ok(task) => return Ok(task),
            Err(not_found) => not_found,
        };
        match &self.shared {
            Some(shared) => shared.get(owner, id).await?.ok_or_else(|| not_found.into()),
            None => Err(not_found.into()),
        }
    }

    /// Cancels task `id` of `owner`: here, or by asking the replica that runs it.
    pub async fn cancel(&self, owner: &TaskOwner, id: &str) -> Result<(), ErrorData> {
        let not_found = match self.store.cancel(owner, id) {
            Ok(()) => {
                self.share(id).await;
                return Ok(());
            }
            Err(not_found) => not_found,
        };
        let Some(shared) = &self.shared else { return Err(not_found.into()) };
        match shared.get(owner, id).await? {
            Some(task) if !task.status().is_terminal() => shared.request_cancel(id).await,
            Some(_) => Ok(()),
            None => Err(not_found.into()),
        }
    }

    /// Writes task `id`'s state for the other replicas (with `REDIS_URL`).
    pub async fn share(&self, id: &str) {
        if let Some(shared) = &self.shared
            && let Some((owner, task)) = self.store.snapshot(id)
        {
            shared.put(&owner, &task).await;
        }
    }

    /// While task `id` runs here, looks every poll interval whether another
    /// replica was asked to cancel it (with `REDIS_URL`).
    pub fn watch_cancels(&self, id: String) {
        let Some(shared) = self.shared.clone() else { return };
        let tasks = self.clone();
        tokio::spawn(async move {
            let mut looks = tokio::time::interval(Duration::from_millis(POLL_INTERVAL_MS));
            looks.tick().await;
            loop {
                looks.tick().await;
                if !tasks.store.is_running(&id) {
                    break;
                }
                if shared.cancel_requested(&id).await {
                    tasks.store.cancel_running(&id);
                    tasks.share(&id).await;
                    break;
                }
            }
        });
    }
}
