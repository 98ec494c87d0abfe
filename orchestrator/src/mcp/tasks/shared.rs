//! MCP tasks shared by replicas through Redis (`REDIS_URL`): the replica
//! that runs a task's call writes the task's state to `mcp_task:{id}`
//! (with its owner) whenever it changes, so `tasks/get` on any replica
//! answers; `tasks/cancel` on another replica sets `mcp_task:{id}:cancel`,
//! which the running replica looks for every poll interval and honours.
//! A record expires with the task: TTL after its end, or, while the call
//! runs, `MAX_TOOL_TIMEOUT` plus TTL (a replica that dies leaves nothing
//! for longer).

use std::time::Duration;

use redis::AsyncCommands;
use redis::aio::ConnectionManager;
use rmcp::ErrorData;
use rmcp::model::DetailedTask;
use serde::{Deserialize, Serialize};

use crate::mcp::tasks::store::TaskOwner;
use crate::redis_cache::connection_manager;

/// A task as Redis keeps it.
#[derive(Serialize, Deserialize)]
struct Record {
    owner: TaskOwner,
    task: DetailedTask,
}

fn record_key(id: &str) -> String {
    format!("mcp_task:{id}")
}

fn cancel_key(id: &str) -> String {
    format!("mcp_task:{id}:cancel")
}

fn unavailable(error: &redis::RedisError) -> ErrorData {
    ErrorData::internal_error(format!("the shared task store (Redis) is unavailable: {error}"), None)
}

/// Milliseconds of `duration`, at least one (Redis refuses an expiry of 0).
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// The tasks of every replica on the same Redis.
pub struct SharedTasks {
    connection: ConnectionManager,
    /// How long an ended task is kept.
    ttl: Duration,
    /// How long a running task's record is kept at most.
    running_ttl: Duration,
}

impl SharedTasks {
    /// Tasks at `url` (connecting lazily), kept `ttl` after their end and
    /// at most `max_run` + `ttl` while they run.
    pub fn new(url: &str, ttl: Duration, max_run: Duration) -> Result<Self, redis::RedisError> {
        Ok(Self { connection: connection_manager(url)?, ttl, running_ttl: max_run.saturating_add(ttl) })
    }

    /// Writes `task` of `owner`: an ended task replaces the record, a
    /// running one is only written if none is there (so a late write
    /// never hides the end). A failure is logged (the task still answers
    /// on the replica that runs it).
    pub async fn put(&self, owner: &TaskOwner, task: &DetailedTask) {
        let record = Record { owner: owner.clone(), task: task.clone() };
        let Ok(text) = serde_json::to_string(&record) else { return };
        let ended = task.status().is_terminal();
        let keep = if ended { self.ttl } else { self.running_ttl };
        let mut options = redis::SetOptions::default().with_expiration(redis::SetExpiry::PX(millis(keep)));
        if !ended {
            options = options.conditional_set(redis::ExistenceCheck::NX);
        }
        let mut connection = self.connection.clone();
        let written: Result<Option<String>, _> =
            connection.set_options(record_key(&task.task.task_id), text, options).await;
        if let Err(error) = written {
            tracing::warn!(task = %task.task.task_id, error = %error, "an MCP task's state was not shared");
        }
    }

    /// Task `id`, if kept and `owner`'s.
    pub async fn get(&self, owner: &TaskOwner, id: &str) -> Result<Option<DetailedTask>, ErrorData> {
        let mut connection = self.connection.clone();
        let text: Option<String> = connection.get(record_key(id)).await.map_err(|e| unavailable(&e))?;
        let record = text.and_then(|text| serde_json::from_str::<Record>(&text).ok());
        Ok(record.filter(|record| record.owner == *owner).map(|record| record.task))
    }

    /// Asks the replica running task `id` to cancel it.
    pub async fn request_cancel(&self, id: &str) -> Result<(), ErrorData> {
        let mut connection = self.connection.clone();
        connection.pset_ex(cancel_key(id), "1", millis(self.running_ttl)).await.map_err(|e| unavailable(&e))
    }

    /// Whether another replica asked to cancel task `id`.
    pub async fn cancel_requested(&self, id: &str) -> bool {
        let mut connection = self.connection.clone();
        connection.exists(cancel_key(id)).await.unwrap_or(false)
    }
}
