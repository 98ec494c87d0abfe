//! The tasks of `/mcp`, kept in this process's memory (like 2025-11-25
//! sessions): each visible only to the owner that started it (the identity
//! and the user it acts for), bounded in number (in all and per owner) and
//! in result bytes, and dropped `MCP_TASK_TTL_SECONDS` after it ends.
//!
//! A call of a client that declared the tasks extension takes a slot first
//! ([`TaskStore::reserve`]), invisible to `tasks/get` while the call may
//! still answer directly; [`TaskStore::publish`] makes it a task, or
//! [`TaskStore::take`] gives back a direct answer and frees the slot.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock, DetailedTask, JsonObject, Task, TaskPayload, TaskStatus};
use serde::Serialize;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::task::AbortHandle;

use crate::identity::Grant;
use crate::mcp::tasks::settings::TaskSettings;

/// How often clients are asked to poll `tasks/get`.
pub const POLL_INTERVAL_MS: u64 = 1000;

/// What a call ended with: its result, or the JSON-RPC error it failed with.
pub type Answer = Result<CallToolResult, ErrorData>;

/// Who may see and cancel a task: the identity that started it, with the
/// same grant (another JWT of the same user with other claims is not it,
/// or it could read the answers of tools outside its own grant), acting
/// for this user.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TaskOwner {
    /// The grant of the identity (named `key:<id>`, `jwt:<user>`, `service-token`, `development`).
    pub grant: Grant,
    /// The user the call was made for.
    pub user_id: Option<String>,
}

impl TaskOwner {
    /// Whether `other` counts in the same `MCP_MAX_TASKS_PER_OWNER`: the
    /// same identity name acting for the same user, whatever its grant, so
    /// a user's JWTs share one budget.
    fn shares_budget_with(&self, other: &Self) -> bool {
        self.grant.name() == other.grant.name() && self.user_id == other.user_id
    }
}

/// Why a task cannot be started or seen.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TaskError {
    /// `MCP_MAX_TASKS` tasks are kept.
    #[error(
        "this call was not run: the orchestrator already keeps MCP_MAX_TASKS ({max}) MCP tasks; try again once some \
         have ended and expired, or call without the tasks extension"
    )]
    Full {
        /// The budget.
        max: usize,
    },
    /// The owner already has `MCP_MAX_TASKS_PER_OWNER` tasks.
    #[error(
        "this call was not run: this caller already has MCP_MAX_TASKS_PER_OWNER ({max}) MCP tasks, running or \
         ended; cancel some (tasks/cancel), or wait until ended ones expire ({ttl} s after they end), or call \
         without the tasks extension"
    )]
    OwnerFull {
        /// The budget.
        max: usize,
        /// `MCP_TASK_TTL_SECONDS`.
        ttl: f64,
    },
    /// No task of this id for this owner (never was, another owner's, or expired).
    #[error("no task `{id}`: it does not exist for this caller, or it expired ({ttl} s after it ended)")]
    NotFound {
        /// The id asked for.
        id: String,
        /// `MCP_TASK_TTL_SECONDS`.
        ttl: f64,
    },
}

impl From<TaskError> for ErrorData {
    fn from(error: TaskError) -> Self {
        ErrorData::invalid_params(error.to_string(), None)
    }
}

/// Where one slot is in its life.
enum State {
    /// A call that may still answer directly: not a task (yet).
    Direct,
    /// That call answered before it became a task; its request takes the answer.
    Answered(Answer),
    /// A task whose call runs; aborting it drops the call.
    Working(AbortHandle),
    /// A task that ended at `at`, kept until `at` + TTL.
    Ended {
        /// What `tasks/get` shows.
        payload: TaskPayload,
        /// Its status message.
        message: String,
        /// The result's size as JSON, counted against `MCP_TASK_RESULTS_BYTES`.
        bytes: usize,
        /// When it ended.
        at: Instant,
    },
}

struct Entry {
    owner: TaskOwner,
    created_at: OffsetDateTime,
    updated_at: OffsetDateTime,
    created: Instant,
    state: State,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<String, Entry>,
    result_bytes: usize,
}

/// The tasks of `/mcp`; shared by every request (one per orchestrator).
pub struct TaskStore {
    settings: TaskSettings,
    max_result_bytes: usize,
    inner: Mutex<Inner>,
}

impl TaskStore {
    /// An empty store under `settings`; one result keeps at most
    /// `max_result_bytes` (`MAX_ANSWER_BYTES`) of JSON.
    pub fn new(settings: TaskSettings, max_result_bytes: usize) -> Self {
        Self { settings, max_result_bytes, inner: Mutex::default() }
    }

    /// How long a call answers directly before it becomes a task.
    pub fn after(&self) -> Duration {
        self.settings.after
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Nothing panics while holding the lock; a poisoned lock still holds consistent entries.
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        self.expire(&mut inner, Instant::now());
        inner
    }

    /// Drops the ended tasks whose TTL has passed.
    fn expire(&self, inner: &mut Inner, now: Instant) {
        let ttl = self.settings.ttl;
        let mut freed = 0;
        inner.entries.retain(|_, entry| match entry.state {
            State::Ended { bytes, at, .. } if now.saturating_duration_since(at) >= ttl => {
                freed += bytes;
                false
            }
            _ => true,
        });
        inner.result_bytes = inner.result_bytes.saturating_sub(freed);
    }

    /// Takes a slot for a call of `owner`, under both budgets; its id is
    /// the task's id if the call becomes one (a random UUID, unguessable).
    pub fn reserve(&self, owner: TaskOwner) -> Result<String, TaskError> {
        let mut inner = self.lock();
        if inner.entries.len() >= self.settings.max_tasks {
            return Err(TaskError::Full { max: self.settings.max_tasks });
        }
        let owned = inner.entries.values().filter(|entry| entry.owner.shares_budget_with(&owner)).count();
        if owned >= self.settings.max_tasks_per_owner {
            return Err(TaskError::OwnerFull { max: self.settings.max_tasks_per_owner, ttl: self.ttl_seconds() });
        }
        let id = uuid::Uuid::new_v4().to_string();
        let now = OffsetDateTime::now_utc();
        let entry = Entry { owner, created_at: now, updated_at: now, created: Instant::now(), state: State::Direct };
        inner.entries.insert(id.clone(), entry);
        Ok(id)
    }

    /// Records the answer of slot `id`'s call: kept for its request while
    /// it answers directly, or the task's end (unless it was cancelled).
    pub fn finish(&self, id: &str, answer: Answer) {
        let mut inner = self.lock();
        let Inner { entries, result_bytes } = &mut *inner;
        let Some(entry) = entries.get_mut(id) else { return };
        match entry.state {
            State::Direct => entry.state = State::Answered(answer),
            State::Working(_) => {
                let (payload, message, bytes) = self.ended(answer, *result_bytes);
                *result_bytes += bytes;
                entry.state = State::Ended { payload, message, bytes, at: Instant::now() };
                entry.updated_at = OffsetDateTime::now_utc();
            }
            State::Answered(_) | State::Ended { .. } => {}
        }
    }

    /// The direct answer of slot `id`, if its call has answered; the slot is freed.
    pub fn take(&self, id: &str) -> Option<Answer> {
        let mut inner = self.lock();
        match inner.entries.remove(id) {
            Some(Entry { state: State::Answered(answer), .. }) => Some(answer),
            Some(entry) => {
                inner.entries.insert(id.to_owned(), entry);
                None
            }
            None => None,
        }
    }

    /// Frees slot `id` if it is not a task (its request went away).
    pub fn release(&self, id: &str) {
        let mut inner = self.lock();
        if inner.entries.get(id).is_some_and(|entry| matches!(entry.state, State::Direct | State::Answered(_))) {
            inner.entries.remove(id);
        }
    }

    /// Makes slot `id` a task whose running call `abort` stops, and gives
    /// its first state; `None` if the call has answered meanwhile ([`Self::take`] gives the answer).
    pub fn publish(&self, id: &str, abort: AbortHandle) -> Option<Task> {
        let mut inner = self.lock();
        let entry = inner.entries.get_mut(id).filter(|entry| matches!(entry.state, State::Direct))?;
        entry.state = State::Working(abort);
        Some(self.detailed(id, entry).task)
    }

    /// Task `id` as `tasks/get` shows it, if `owner` started it.
    pub fn get(&self, owner: &TaskOwner, id: &str) -> Result<DetailedTask, TaskError> {
        let inner = self.lock();
        let entry = self.visible(&inner, owner, id)?;
        Ok(self.detailed(id, entry))
    }

    /// Cancels task `id` of `owner`: a running call is dropped (the module
    /// sees its caller go away) and the task ends `cancelled`; an ended
    /// task stays as it is.
    pub fn cancel(&self, owner: &TaskOwner, id: &str) -> Result<(), TaskError> {
        let mut inner = self.lock();
        self.visible(&inner, owner, id)?;
        Self::stop(&mut inner, id);
        Ok(())
    }

    /// Cancels task `id` whoever owns it (its owner asked another replica).
    pub fn cancel_running(&self, id: &str) {
        Self::stop(&mut self.lock(), id);
    }

    fn stop(inner: &mut Inner, id: &str) {
        if let Some(entry) = inner.entries.get_mut(id)
            && let State::Working(abort) = &entry.state
        {
            abort.abort();
            let message = "cancelled by the client (tasks/cancel); the call was stopped".to_owned();
            entry.state = State::Ended { payload: TaskPayload::Cancelled, message, bytes: 0, at: Instant::now() };
            entry.updated_at = OffsetDateTime::now_utc();
        }
    }

    /// Whether task `id` is running here.
    pub fn is_running(&self, id: &str) -> bool {
        self.lock().entries.get(id).is_some_and(|entry| matches!(entry.state, State::Working(_)))
    }

    /// Task `id` and its owner, if it is a task here (to share it).
    pub fn snapshot(&self, id: &str) -> Option<(TaskOwner, DetailedTask)> {
        let inner = self.lock();
        let entry =
            inner.entries.get(id).filter(|entry| matches!(entry.state, State::Working(_) | State::Ended { .. }))?;
        Some((entry.owner.clone(), self.detailed(id, entry)))
    }

    /// Task `id`, if it is one and `owner`'s; otherwise not found, alike
    /// for another owner's task and for none, so ids cannot be probed.
    fn visible<'a>(&self, inner: &'a Inner, owner: &TaskOwner, id: &str) -> Result<&'a Entry, TaskError> {
        inner
            .entries
            .get(id)
            .filter(|entry| entry.owner == *owner && matches!(entry.state, State::Working(_) | State::Ended { .. }))
            .ok_or_else(|| TaskError::NotFound { id: id.to_owned(), ttl: self.ttl_seconds() })
    }

    fn ttl_seconds(&self) -> f64 {
        self.settings.ttl.as_secs_f64()
    }

    /// The task `entry` as the specification shows it. A running task is
    /// kept as long as it runs (`ttlMs` null: its call's timeout ends it);
    /// an ended one until TTL after its end, so `ttlMs` counts from creation to then.
    fn detailed(&self, id: &str, entry: &Entry) -> DetailedTask {
        let created = entry.created_at.format(&Rfc3339).unwrap_or_default();
        let updated = entry.updated_at.format(&Rfc3339).unwrap_or_default();
        let task = Task::new(id, TaskStatus::Working, created, updated).with_poll_interval_ms(POLL_INTERVAL_MS);
        match &entry.state {
            State::Ended { payload, message, at, .. } => {
                let kept = at.saturating_duration_since(entry.created) + self.settings.ttl;
                let ttl_ms = u64::try_from(kept.as_millis()).unwrap_or(u64::MAX);
                DetailedTask::new(task.with_ttl_ms(ttl_ms).with_status_message(message.clone()), payload.clone())
            }
            _ => DetailedTask::new(task.with_status_message("the call is running"), TaskPayload::Working),
        }
    }

    /// What a task that ended with `answer` keeps, its status message and
    /// its size: a result over `MAX_ANSWER_BYTES`, or past
    /// `MCP_TASK_RESULTS_BYTES` with the `used` bytes, is replaced by an
    /// error result saying so.
    fn ended(&self, answer: Answer, used: usize) -> (TaskPayload, String, usize) {
        match answer {
            Ok(result) => {
                let (object, bytes) = json_object(&result);
                let over = if bytes > self.max_result_bytes {
                    Some(format!("MAX_ANSWER_BYTES ({})", self.max_result_bytes))
                } else if used.saturating_add(bytes) > self.settings.results_bytes {
                    Some(format!("MCP_TASK_RESULTS_BYTES ({}) for all tasks' results", self.settings.results_bytes))
                } else {
                    None
                };
                match over {
                    None => (TaskPayload::Completed { result: object }, "the call has ended".to_owned(), bytes),
                    Some(budget) => {
                        let text = format!(
                            "the call ended, but its result ({bytes} bytes as JSON) is over what MCP tasks keep, \
                             {budget}, so it was dropped; call again without the tasks extension to get it directly"
                        );
                        let (object, bytes) = json_object(&CallToolResult::error(vec![ContentBlock::text(&text)]));
                        (TaskPayload::Completed { result: object }, text, bytes)
                    }
                }
            }
            Err(error) => {
                let message = format!("the call failed: {}", error.message);
                let (object, bytes) = json_object(&error);
                (TaskPayload::Failed { error: object }, message, bytes)
            }
        }
    }
}

/// `value` as a JSON object, and its size as JSON text.
fn json_object(value: &impl Serialize) -> (JsonObject, usize) {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::Object(object)) => {
            let bytes = serde_json::to_vec(&object).map_or(0, |text| text.len());
            (object, bytes)
        }
        _ => (JsonObject::new(), 2),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::Identity;

    fn owner(name: &str) -> TaskOwner {
        TaskOwner { grant: Identity::user_key(name).grant(), user_id: Some(name.to_owned()) }
    }

    fn store(max_tasks: usize, per_owner: usize, results_bytes: usize) -> TaskStore {
        let settings = TaskSettings {
            max_tasks,
            max_tasks_per_owner: per_owner,
            ttl: Duration::from_secs(600),
            after: Duration::ZERO,
            results_bytes,
        };
        TaskStore::new(settings, 1000)
    }

    /// An abort handle of a task that never ends, and the task to check it was aborted.
    fn running() -> (AbortHandle, tokio::task::JoinHandle<()>) {
        let handle = tokio::spawn(std::future::pending());
        (handle.abort_handle(), handle)
    }

    fn text(text: &str) -> Answer {
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
    }

    #[tokio::test]
    async fn a_task_is_its_owners_only_and_ends_with_its_answer() {
        let store = store(10, 10, 10_000);
        let id = store.reserve(owner("ada")).unwrap();
        assert!(store.get(&owner("ada"), &id).is_err(), "a slot is not a task before it is published");
        let (abort, _task) = running();
        let task = store.publish(&id, abort).unwrap();
        assert_eq!((task.status, task.ttl_ms), (TaskStatus::Working, None));
        assert_eq!(store.get(&owner("ada"), &id).unwrap().status(), TaskStatus::Working);
        let stranger = store.get(&owner("bob"), &id).unwrap_err();
        assert_eq!(stranger, TaskError::NotFound { id: id.clone(), ttl: 600.0 });
        assert!(store.cancel(&owner("bob"), &id).is_err());
        let same_identity_other_user = TaskOwner { user_id: Some("eve".into()), ..owner("ada") };
        assert!(store.get(&same_identity_other_user, &id).is_err());
        let narrower = Identity { modules: Some(Vec::new()), ..Identity::user_key("ada") };
        let same_name_other_grant = TaskOwner { grant: narrower.grant(), ..owner("ada") };
        assert!(store.get(&same_name_other_grant, &id).is_err(), "the same name with another grant is not its owner");
        assert!(store.cancel(&same_name_other_grant, &id).is_err());

        store.finish(&id, text("done"));
        let ended = store.get(&owner("ada"), &id).unwrap();
        let TaskPayload::Completed { result } = &ended.payload else { panic!("{ended:?}") };
        assert_eq!(result["content"][0]["text"], "done");
        assert!(ended.task.ttl_ms.is_some_and(|ms| ms >= 600_000));
        store.cancel(&owner("ada"), &id).unwrap();
        assert_eq!(store.get(&owner("ada"), &id).unwrap().status(), TaskStatus::Completed, "an ended task stays");
    }

    #[tokio::test]
    async fn a_direct_answer_frees_its_slot_and_cancel_stops_the_call() {
        let store = store(10, 1, 10_000);
        let id = store.reserve(owner("ada")).unwrap();
        store.finish(&id, text("quick"));
        let (abort, _task) = running();
        assert!(store.publish(&id, abort).is_none(), "answered meanwhile");
        assert!(store.take(&id).is_some_and(|answer| answer.is_ok()));
        assert!(store.take(&id).is_none(), "taken once");

        let asked_elsewhere = store.reserve(owner("carol")).unwrap();
        assert!(store.snapshot(&asked_elsewhere).is_none(), "not a task yet");
        let (abort, task) = running();
        store.publish(&asked_elsewhere, abort).unwrap();
        assert!(store.is_running(&asked_elsewhere));
        assert_eq!(
            store.snapshot(&asked_elsewhere).map(|(who, task)| (who, task.status())),
            Some((owner("carol"), TaskStatus::Working))
        );
        store.cancel_running(&asked_elsewhere);
        assert!(task.await.unwrap_err().is_cancelled() && !store.is_running(&asked_elsewhere));

        let id = store.reserve(owner("ada")).unwrap();
        let (abort, task) = running();
        store.publish(&id, abort).unwrap();
        store.cancel(&owner("ada"), &id).unwrap();
        assert!(task.await.unwrap_err().is_cancelled(), "the call was dropped");
        store.finish(&id, text("too late"));
        assert_eq!(store.get(&owner("ada"), &id).unwrap().status(), TaskStatus::Cancelled);

        let failed = store.reserve(owner("bob")).unwrap();
        let (abort, _task) = running();
        store.publish(&failed, abort).unwrap();
        store.finish(&failed, Err(ErrorData::internal_error("boom", None)));
        let task = store.get(&owner("bob"), &failed).unwrap();
        assert!(matches!(&task.payload, TaskPayload::Failed { error } if error["message"] == "boom"), "{task:?}");
    }

    #[test]
    fn budgets_are_named_when_full() {
        let store = store(3, 2, 10_000);
        for _ in 0..2 {
            store.reserve(owner("ada")).unwrap();
        }
        let error = store.reserve(owner("ada")).unwrap_err();
        assert!(error.to_string().contains("MCP_MAX_TASKS_PER_OWNER (2)"), "{error}");
        let id = store.reserve(owner("bob")).unwrap();
        let error = store.reserve(owner("carol")).unwrap_err();
        assert!(error.to_string().contains("MCP_MAX_TASKS (3)"), "{error}");
        store.release(&id);
        store.reserve(owner("carol")).unwrap();
    }

    #[tokio::test]
    async fn results_over_a_budget_are_not_kept_whole_and_ended_tasks_expire() {
        let store = store(10, 10, 1500);
        let big = store.reserve(owner("ada")).unwrap();
        let (abort, _task) = running();
        store.publish(&big, abort).unwrap();
        store.finish(&big, text(&"x".repeat(2000)));
        let task = store.get(&owner("ada"), &big).unwrap();
        let TaskPayload::Completed { result } = &task.payload else { panic!("{task:?}") };
        assert_eq!(result["isError"], true);
        assert!(result["content"][0]["text"].as_str().unwrap().contains("MAX_ANSWER_BYTES (1000)"), "{result:?}");

        let ids: Vec<String> = (0..3).map(|_| store.reserve(owner("ada")).unwrap()).collect();
        for id in &ids {
            let (abort, _task) = running();
            store.publish(id, abort).unwrap();
            store.finish(id, text(&"y".repeat(600)));
        }
        let last = store.get(&owner("ada"), &ids[2]).unwrap();
        let TaskPayload::Completed { result } = &last.payload else { panic!("{last:?}") };
        assert!(result["content"][0]["text"].as_str().unwrap().contains("MCP_TASK_RESULTS_BYTES (1500)"));

        let mut inner = store.inner.lock().unwrap();
        store.expire(&mut inner, Instant::now() + Duration::from_secs(601));
        assert!(inner.entries.is_empty() && inner.result_bytes == 0);
    }
}
