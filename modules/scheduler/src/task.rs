//! What a task does when it fires (`execution_data`), and how tasks and
//! times are shown to the model.

use std::collections::BTreeMap;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::store::Task;

/// What a task does when it fires; `task_type` says which kind it is.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(tag = "task_type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ExecutionData {
    /// Remind the user: the message is delivered to the agent as it is.
    Reminder {
        /// The reminder's text, e.g. "call mom".
        #[schemars(length(min = 1, max = 4000))]
        message: String,
    },
    /// Have the agent do something: it runs the prompt when the task fires.
    AgentTask {
        /// What the agent should do, e.g. "search the news and give me the top 3 stories".
        #[schemars(length(min = 1, max = 8000))]
        prompt: String,
    },
    /// Make an HTTP request when the task fires; the response (status and
    /// the start of the body) is delivered to the agent. Public addresses only.
    ApiCall {
        /// The absolute http(s) URL to request.
        #[schemars(url, length(max = 2000))]
        url: String,
        /// The HTTP method (default GET).
        #[serde(default)]
        method: HttpMethod,
        /// Request headers, name to value.
        #[serde(default)]
        #[schemars(extend("propertyNames" = {"pattern": "^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$"}, "additionalProperties" = {"type": "string", "pattern": "^[\\t\\x20-\\x7e]{0,2000}$"}, "maxProperties" = 30))]
        headers: BTreeMap<String, String>,
        /// The request body, as text (e.g. JSON).
        #[serde(default)]
        #[schemars(length(max = 65536))]
        body: Option<String>,
    },
}

impl ExecutionData {
    /// The task type's name: `reminder`, `agent_task` or `api_call`.
    pub fn task_type(&self) -> &'static str {
        match self {
            Self::Reminder { .. } => "reminder",
            Self::AgentTask { .. } => "agent_task",
            Self::ApiCall { .. } => "api_call",
        }
    }
}

/// The methods an `api_call` may use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum HttpMethod {
    /// GET (the default).
    #[default]
    Get,
    /// POST.
    Post,
    /// PUT.
    Put,
    /// PATCH.
    Patch,
    /// DELETE.
    Delete,
}

impl HttpMethod {
    /// The method for the HTTP client.
    pub fn as_method(self) -> guarded_http::Method {
        match self {
            Self::Get => guarded_http::Method::GET,
            Self::Post => guarded_http::Method::POST,
            Self::Put => guarded_http::Method::PUT,
            Self::Patch => guarded_http::Method::PATCH,
            Self::Delete => guarded_http::Method::DELETE,
        }
    }
}

/// A task as `list_tasks` and `cancel_task` show it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TaskView {
    /// The task's id (for `cancel_task`).
    pub task_id: String,
    /// `reminder`, `agent_task` or `api_call`.
    pub task_type: String,
    /// What the task is for.
    pub description: String,
    /// The normalized cron schedule; absent for a one-time reminder.
    pub schedule: Option<String>,
    /// The schedule's time zone.
    pub timezone: String,
    /// `active`, `done`, `cancelled` or `failed`.
    pub status: String,
    /// The next run (RFC 3339, in the task's zone), while active.
    pub next_run: Option<String>,
    /// The last run's scheduled time.
    pub last_run: Option<String>,
    /// Runs so far.
    pub runs: u32,
    /// The most runs, when limited.
    pub max_runs: Option<u32>,
    /// No run after this time, when limited.
    pub until: Option<String>,
    /// How the last run went: `delivered`, or `failed: <why>`.
    pub last_outcome: Option<String>,
    /// What the task does when it fires.
    pub execution_data: serde_json::Value,
    /// When the task was created.
    pub created_at: String,
}

impl TaskView {
    /// The view of `task`, its times in its own zone.
    pub fn of(task: Task) -> Self {
        let status = task.shown_status().to_owned();
        let spec = task.spec;
        let zone = TimeZone::get(&spec.timezone).unwrap_or(TimeZone::UTC);
        let show = |ms: Option<i64>| ms.map(|ms| rfc3339(ms, &zone));
        Self {
            task_id: task.stored_id,
            task_type: spec.task_type,
            description: spec.description,
            schedule: spec.schedule,
            status,
            next_run: show(task.next_run),
            last_run: show(task.last_run),
            runs: task.runs,
            max_runs: spec.max_runs,
            until: show(spec.until),
            last_outcome: task.unreadable.as_deref().map(Task::unreadable_outcome).or(task.last_outcome),
            execution_data: spec.execution_data,
            created_at: rfc3339(task.created_at, &zone),
            timezone: spec.timezone,
        }
    }
}

/// Milliseconds since 1970 as RFC 3339 in `zone`, with its offset
/// (`2026-05-17T09:00:00+02:00`); fractions of a second are shown when present.
pub fn rfc3339(ms: i64, zone: &TimeZone) -> String {
    let Ok(timestamp) = Timestamp::from_millisecond(ms) else { return ms.to_string() };
    let format = if ms % 1000 == 0 { "%Y-%m-%dT%H:%M:%S%:z" } else { "%Y-%m-%dT%H:%M:%S%.3f%:z" };
    timestamp.to_zoned(zone.clone()).strftime(format).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn execution_data_is_tagged_by_task_type() {
        let data: ExecutionData = serde_json::from_value(json!({"task_type": "agent_task", "prompt": "news"})).unwrap();
        assert_eq!(data, ExecutionData::AgentTask { prompt: "news".into() });
        let call: ExecutionData =
            serde_json::from_value(json!({"task_type": "api_call", "url": "https://example.com/"})).unwrap();
        assert_eq!(call.task_type(), "api_call");
        assert!(serde_json::from_value::<ExecutionData>(json!({"task_type": "reminder", "prompt": "x"})).is_err());
    }

    #[test]
    fn an_unreadable_task_is_shown_failed_with_the_reason_before_it_comes_due() {
        let spec = crate::store::TaskSpec {
            user_id: "u".into(),
            task_type: "reminder".into(),
            description: "d".into(),
            execution_data: json!("{not json"),
            schedule: Some("every other tuesday".into()),
            timezone: "UTC".into(),
            max_runs: None,
            until: None,
        };
        let task = Task {
            id: uuid::Uuid::nil(),
            stored_id: "abc".into(),
            spec,
            status: "active".into(),
            next_run: Some(1_000),
            last_run: None,
            runs: 0,
            last_outcome: Some("delivered".into()),
            created_at: 0,
            unreadable: Some("schedule: cannot read it".into()),
        };
        let view = TaskView::of(task);
        assert_eq!(view.status, "failed");
        let outcome = view.last_outcome.unwrap_or_default();
        assert!(outcome.contains("cannot be read (schedule: cannot read it)"), "{outcome}");
    }

    #[test]
    fn times_are_shown_with_the_zone_offset() {
        let berlin = TimeZone::get("Europe/Berlin").unwrap();
        assert_eq!(rfc3339(1_779_001_200_000, &berlin), "2026-05-17T09:00:00+02:00");
        assert_eq!(rfc3339(1_779_001_200_250, &TimeZone::UTC), "2026-05-17T07:00:00.250+00:00");
    }
}
