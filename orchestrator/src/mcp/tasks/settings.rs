//! The budgets of `/mcp`'s tasks: how many are kept (in all and per
//! owner), for how long after they end, how many result bytes in all, and
//! how long a call answers directly before it becomes a task.

use std::time::Duration;

use crate::config::{ConfigError, positive_count, seconds_at_least};

/// The default `MCP_MAX_TASKS`.
pub const DEFAULT_MAX_TASKS: usize = 1000;
/// The default `MCP_MAX_TASKS_PER_OWNER`.
pub const DEFAULT_MAX_TASKS_PER_OWNER: usize = 100;
/// The default `MCP_TASK_TTL_SECONDS`.
pub const DEFAULT_TTL_SECONDS: f64 = 600.0;
/// The default `MCP_TASK_AFTER_SECONDS`.
pub const DEFAULT_AFTER_SECONDS: f64 = 5.0;
/// The default `MCP_TASK_RESULTS_BYTES`.
pub const DEFAULT_RESULTS_BYTES: usize = 64 * 1024 * 1024;

/// How `/mcp` keeps the tasks of clients that declare the tasks extension.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskSettings {
    /// `MCP_MAX_TASKS`: tasks kept at once, running or ended, all owners together.
    pub max_tasks: usize,
    /// `MCP_MAX_TASKS_PER_OWNER`: tasks kept at once for one identity (and user).
    pub max_tasks_per_owner: usize,
    /// `MCP_TASK_TTL_SECONDS`: how long an ended task's result is kept.
    pub ttl: Duration,
    /// `MCP_TASK_AFTER_SECONDS`: how long a call answers directly before it
    /// becomes a task (0: every call of such a client is a task).
    pub after: Duration,
    /// `MCP_TASK_RESULTS_BYTES`: the results kept in all, as JSON.
    pub results_bytes: usize,
}

impl Default for TaskSettings {
    fn default() -> Self {
        Self {
            max_tasks: DEFAULT_MAX_TASKS,
            max_tasks_per_owner: DEFAULT_MAX_TASKS_PER_OWNER,
            ttl: Duration::from_secs_f64(DEFAULT_TTL_SECONDS),
            after: Duration::from_secs_f64(DEFAULT_AFTER_SECONDS),
            results_bytes: DEFAULT_RESULTS_BYTES,
        }
    }
}

impl TaskSettings {
    /// Reads the settings through `env` (the environment, then the file).
    pub fn read(env: &dyn Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Ok(Self {
            max_tasks: positive_count(env, "MCP_MAX_TASKS", None, DEFAULT_MAX_TASKS, "a positive number of tasks")?,
            max_tasks_per_owner: positive_count(
                env,
                "MCP_MAX_TASKS_PER_OWNER",
                None,
                DEFAULT_MAX_TASKS_PER_OWNER,
                "a positive number of tasks",
            )?,
            ttl: seconds_at_least(env, "MCP_TASK_TTL_SECONDS", DEFAULT_TTL_SECONDS, 0.1)?,
            after: seconds_at_least(env, "MCP_TASK_AFTER_SECONDS", DEFAULT_AFTER_SECONDS, 0.0)?,
            results_bytes: positive_count(
                env,
                "MCP_TASK_RESULTS_BYTES",
                None,
                DEFAULT_RESULTS_BYTES,
                "a positive number of bytes",
            )?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(pairs: &[(&str, &str)]) -> Result<TaskSettings, ConfigError> {
        let pairs: Vec<(String, String)> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        TaskSettings::read(&|name: &str| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
    }

    #[test]
    fn defaults_values_and_bad_values_named() {
        assert_eq!(read(&[]).unwrap(), TaskSettings::default());
        let settings = read(&[
            ("MCP_MAX_TASKS", "5"),
            ("MCP_MAX_TASKS_PER_OWNER", "2"),
            ("MCP_TASK_TTL_SECONDS", "0.5"),
            ("MCP_TASK_AFTER_SECONDS", "0"),
            ("MCP_TASK_RESULTS_BYTES", "4096"),
        ])
        .unwrap();
        assert_eq!(
            settings,
            TaskSettings {
                max_tasks: 5,
                max_tasks_per_owner: 2,
                ttl: Duration::from_millis(500),
                after: Duration::ZERO,
                results_bytes: 4096
            }
        );
        for (name, bad) in [
            ("MCP_MAX_TASKS", "0"),
            ("MCP_MAX_TASKS_PER_OWNER", "many"),
            ("MCP_TASK_TTL_SECONDS", "0"),
            ("MCP_TASK_AFTER_SECONDS", "-1"),
            ("MCP_TASK_RESULTS_BYTES", "1e9"),
        ] {
            let error = read(&[(name, bad)]).unwrap_err().to_string();
            assert!(error.contains(name) && error.contains(bad), "{error}");
        }
    }
}
