//! The settings of the orchestrator's `/mcp`: the module SDK's MCP settings
//! (`MCP_ALLOWED_ORIGINS`, `MCP_ALLOWED_HOSTS`, `MCP_PAGE_SIZE`, read by the
//! same code) and the orchestrator's own budgets, tasks' included.
//!
//! `MCP_MAX_STREAMS` is kept below `MAX_CONNECTIONS` (by default a quarter
//! of it): each open event stream holds a connection, so streams can never
//! take them all.

use std::time::Duration;

use module_sdk::ServeError;
use module_sdk::mcp::McpSettings;
use module_sdk::service::DEFAULT_MAX_CONNECTIONS;

use crate::config::{ConfigError, invalid, positive_count, seconds_at_least};
use crate::mcp::tasks::TaskSettings;

/// The default `MCP_MAX_SESSIONS`.
pub const DEFAULT_MAX_SESSIONS: usize = 1000;
/// The default `MCP_MAX_SESSIONS_PER_IDENTITY`: as many as the event
/// streams one identity may keep open, one for each session's `GET /mcp`.
pub const DEFAULT_MAX_SESSIONS_PER_IDENTITY: usize = DEFAULT_MAX_STREAMS_PER_IDENTITY;
/// The default `MCP_MAX_STREAMS`: this share of `MAX_CONNECTIONS`.
pub const DEFAULT_STREAMS_SHARE_OF_CONNECTIONS: usize = 4;
/// The default `MCP_MAX_STREAMS_PER_IDENTITY`.
pub const DEFAULT_MAX_STREAMS_PER_IDENTITY: usize = 16;
/// The default `MCP_PROGRESS_INTERVAL_SECONDS`.
pub const DEFAULT_PROGRESS_INTERVAL_SECONDS: f64 = 5.0;
/// The default `MCP_SESSION_IDLE_SECONDS`: rmcp's own, 5 minutes.
pub const DEFAULT_SESSION_IDLE_SECONDS: f64 = 300.0;

/// How the orchestrator answers MCP clients at `/mcp`.
#[derive(Debug, Clone, PartialEq)]
pub struct McpEndpointSettings {
    /// Allowed origins and hosts, and tools per `tools/list` page, as a module reads them.
    pub transport: McpSettings,
    /// `MCP_MAX_SESSIONS`: the 2025-11-25 sessions kept at once (each holds a
    /// task and, while its client listens, a stream); `initialize` beyond it
    /// is refused with `429`. 2026-07-28 clients need none.
    pub max_sessions: usize,
    /// `MCP_MAX_SESSIONS_PER_IDENTITY`: the sessions one identity may keep,
    /// so that no one key takes every session (development mode, where
    /// every caller is the one identity, has only `MCP_MAX_SESSIONS`).
    pub max_sessions_per_identity: usize,
    /// `MCP_MAX_STREAMS`: the event streams (`GET /mcp`,
    /// `subscriptions/listen`) open at once, each holding a connection;
    /// below `MAX_CONNECTIONS`, by default a quarter of it.
    pub max_streams: usize,
    /// `MCP_MAX_STREAMS_PER_IDENTITY`: the event streams one identity may keep open.
    pub max_streams_per_identity: usize,
    /// `MCP_PROGRESS_INTERVAL_SECONDS`: how often a call that is still
    /// running sends `notifications/progress` to a client that gave a
    /// `progressToken` (default 5 s).
    pub progress_interval: Duration,
    /// `MCP_SESSION_IDLE_SECONDS`: how long a 2025-11-25 session is kept
    /// without a message either way and with no call running (default 5 minutes).
    pub session_idle: Duration,
    /// `MCP_MAX_TASKS`, `MCP_MAX_TASKS_PER_OWNER`, `MCP_TASK_TTL_SECONDS`,
    /// `MCP_TASK_AFTER_SECONDS`, `MCP_TASK_RESULTS_BYTES`: MCP tasks.
    pub tasks: TaskSettings,
}

impl Default for McpEndpointSettings {
    fn default() -> Self {
        Self {
            transport: McpSettings::default(),
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_sessions_per_identity: DEFAULT_MAX_SESSIONS_PER_IDENTITY,
            max_streams: DEFAULT_MAX_CONNECTIONS / DEFAULT_STREAMS_SHARE_OF_CONNECTIONS,
            max_streams_per_identity: DEFAULT_MAX_STREAMS_PER_IDENTITY,
            progress_interval: Duration::from_secs_f64(DEFAULT_PROGRESS_INTERVAL_SECONDS),
            session_idle: Duration::from_secs_f64(DEFAULT_SESSION_IDLE_SECONDS),
            tasks: TaskSettings::default(),
        }
    }
}

/// The MCP settings of the configuration file (the variables' names in lower case).
#[derive(Debug, Default)]
pub struct McpEndpointFile {
    /// `mcp_allowed_origins`.
    pub mcp_allowed_origins: Option<Vec<String>>,
    /// `mcp_allowed_hosts`.
    pub mcp_allowed_hosts: Option<Vec<String>>,
    /// `mcp_page_size`.
    pub mcp_page_size: Option<usize>,
    /// `mcp_max_sessions`.
    pub mcp_max_sessions: Option<usize>,
    /// `mcp_max_sessions_per_identity`.
    pub mcp_max_sessions_per_identity: Option<usize>,
    /// `mcp_max_streams`.
    pub mcp_max_streams: Option<usize>,
    /// `mcp_max_streams_per_identity`.
    pub mcp_max_streams_per_identity: Option<usize>,
    /// `mcp_progress_interval_seconds`.
    pub mcp_progress_interval_seconds: Option<f64>,
    /// `mcp_session_idle_seconds`.
    pub mcp_session_idle_seconds: Option<f64>,
    /// `mcp_max_tasks`.
    pub mcp_max_tasks: Option<usize>,
    /// `mcp_max_tasks_per_owner`.
    pub mcp_max_tasks_per_owner: Option<usize>,
    /// `mcp_task_ttl_seconds`.
    pub mcp_task_ttl_seconds: Option<f64>,
    /// `mcp_task_after_seconds`.
    pub mcp_task_after_seconds: Option<f64>,
    /// `mcp_task_results_bytes`.
    pub mcp_task_results_bytes: Option<usize>,
}

impl McpEndpointFile {
    /// The file's value of the variable `name`, as the environment would give it.
    fn value(&self, name: &str) -> Option<String> {
        match name {
            "MCP_ALLOWED_ORIGINS" => self.mcp_allowed_origins.as_ref().map(|list| list.join(",")),
            "MCP_ALLOWED_HOSTS" => self.mcp_allowed_hosts.as_ref().map(|list| list.join(",")),
            "MCP_PAGE_SIZE" => self.mcp_page_size.map(|n| n.to_string()),
            "MCP_MAX_SESSIONS" => self.mcp_max_sessions.map(|n| n.to_string()),
            "MCP_MAX_SESSIONS_PER_IDENTITY" => self.mcp_max_sessions_per_identity.map(|n| n.to_string()),
            "MCP_MAX_STREAMS" => self.mcp_max_streams.map(|n| n.to_string()),
            "MCP_MAX_STREAMS_PER_IDENTITY" => self.mcp_max_streams_per_identity.map(|n| n.to_string()),
            "MCP_PROGRESS_INTERVAL_SECONDS" => self.mcp_progress_interval_seconds.map(|s| s.to_string()),
            "MCP_SESSION_IDLE_SECONDS" => self.mcp_session_idle_seconds.map(|s| s.to_string()),
            "MCP_MAX_TASKS" => self.mcp_max_tasks.map(|n| n.to_string()),
            "MCP_MAX_TASKS_PER_OWNER" => self.mcp_max_tasks_per_owner.map(|n| n.to_string()),
            "MCP_TASK_TTL_SECONDS" => self.mcp_task_ttl_seconds.map(|s| s.to_string()),
            "MCP_TASK_AFTER_SECONDS" => self.mcp_task_after_seconds.map(|s| s.to_string()),
            "MCP_TASK_RESULTS_BYTES" => self.mcp_task_results_bytes.map(|n| n.to_string()),
            _ => None,
        }
    }
}

impl McpEndpointSettings {
    /// Reads the settings from `env` (trimmed, empty as absent), then `file`;
    /// `max_connections` is `MAX_CONNECTIONS`, which streams stay below.
    pub fn read(
        file: McpEndpointFile,
        max_connections: usize,
        env: &impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let env = |name: &str| env(name).or_else(|| file.value(name));
        let transport = McpSettings::from_lookup(env).map_err(|error| match error {
            ServeError::Config { name, value, reason } => invalid(name, &value, reason),
            other => invalid("MCP_PAGE_SIZE", "", other.to_string()),
        })?;
        let max_sessions =
            positive_count(&env, "MCP_MAX_SESSIONS", None, DEFAULT_MAX_SESSIONS, "a positive number of sessions")?;
        let max_sessions_per_identity = positive_count(
            &env,
            "MCP_MAX_SESSIONS_PER_IDENTITY",
            None,
            DEFAULT_MAX_SESSIONS_PER_IDENTITY,
            "a positive number of sessions",
        )?;
        // At least one, so a small MAX_CONNECTIONS does not start up
        // refusing every stream (with MAX_CONNECTIONS below 2 no number of
        // streams fits, and start-up says so below).
        let default_streams = (max_connections / DEFAULT_STREAMS_SHARE_OF_CONNECTIONS).max(1);
        let max_streams =
            positive_count(&env, "MCP_MAX_STREAMS", None, default_streams, "a positive number of streams")?;
        if max_streams >= max_connections {
            let reason = format!(
                "expected fewer streams than MAX_CONNECTIONS ({max_connections}): each open stream holds a connection"
            );
            return Err(invalid("MCP_MAX_STREAMS", &max_streams.to_string(), reason));
        }
        let max_streams_per_identity = positive_count(
            &env,
            "MCP_MAX_STREAMS_PER_IDENTITY",
            None,
            DEFAULT_MAX_STREAMS_PER_IDENTITY,
            "a positive number of streams",
        )?;
        let progress_interval =
            seconds_at_least(&env, "MCP_PROGRESS_INTERVAL_SECONDS", DEFAULT_PROGRESS_INTERVAL_SECONDS, 0.1)?;
        let session_idle = seconds_at_least(&env, "MCP_SESSION_IDLE_SECONDS", DEFAULT_SESSION_IDLE_SECONDS, 1.0)?;
        let tasks = TaskSettings::read(&env)?;
        Ok(Self {
            transport,
            max_sessions,
            max_sessions_per_identity,
            max_streams,
            max_streams_per_identity,
            progress_interval,
            session_idle,
            tasks,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn read(pairs: &[(&str, &str)]) -> Result<McpEndpointSettings, ConfigError> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        McpEndpointSettings::read(McpEndpointFile::default(), DEFAULT_MAX_CONNECTIONS, &|name: &str| {
            map.get(name).cloned()
        })
    }

    #[test]
    fn the_file_gives_what_the_environment_does_not() {
        let file = McpEndpointFile {
            mcp_allowed_origins: Some(vec!["https://a.example".into(), "http://localhost:*".into()]),
            mcp_max_sessions: Some(7),
            mcp_max_streams: Some(5),
            mcp_progress_interval_seconds: Some(2.5),
            mcp_task_after_seconds: Some(0.0),
            ..McpEndpointFile::default()
        };
        let env = |name: &str| (name == "MCP_MAX_SESSIONS").then(|| "9".to_owned());
        let settings = McpEndpointSettings::read(file, 40, &env).unwrap();
        assert_eq!(settings.transport.allowed_origins, ["https://a.example", "http://localhost:*"]);
        assert_eq!((settings.max_sessions, settings.progress_interval), (9, Duration::from_millis(2500)));
        assert_eq!(settings.tasks.after, Duration::ZERO);
        assert_eq!((settings.max_streams, settings.max_streams_per_identity), (5, DEFAULT_MAX_STREAMS_PER_IDENTITY));
    }

    #[test]
    fn streams_stay_below_the_connections() {
        let read_with = |max_connections, value: Option<&str>| {
            let env = |name: &str| (name == "MCP_MAX_STREAMS").then(|| value.map(str::to_owned)).flatten();
            McpEndpointSettings::read(McpEndpointFile::default(), max_connections, &env)
        };
        assert_eq!(read_with(1024, None).unwrap().max_streams, 256, "a quarter by default");
        assert_eq!(read_with(8, None).unwrap().max_streams, 2);
        assert_eq!(read_with(3, None).unwrap().max_streams, 1, "at least one");
        let error = read_with(1, None).unwrap_err().to_string();
        assert!(error.contains("MCP_MAX_STREAMS") && error.contains("MAX_CONNECTIONS (1)"), "{error}");
        assert_eq!(read_with(8, Some("7")).unwrap().max_streams, 7);
        let error = read_with(8, Some("8")).unwrap_err().to_string();
        assert!(error.contains("MCP_MAX_STREAMS") && error.contains("MAX_CONNECTIONS (8)"), "{error}");
    }

    #[test]
    fn defaults_values_and_bad_values_named() {
        assert_eq!(read(&[]).unwrap(), McpEndpointSettings::default());
        let settings = read(&[
            ("MCP_ALLOWED_ORIGINS", "http://localhost:*"),
            ("MCP_MAX_SESSIONS", "3"),
            ("MCP_MAX_SESSIONS_PER_IDENTITY", "1"),
            ("MCP_MAX_STREAMS_PER_IDENTITY", "2"),
            ("MCP_PROGRESS_INTERVAL_SECONDS", "0.5"),
            ("MCP_SESSION_IDLE_SECONDS", "60"),
        ])
        .unwrap();
        assert_eq!(settings.transport.allowed_origins, ["http://localhost:*"]);
        assert_eq!((settings.max_sessions, settings.progress_interval), (3, Duration::from_millis(500)));
        assert_eq!((settings.max_sessions_per_identity, settings.max_streams_per_identity), (1, 2));
        assert_eq!(settings.session_idle, Duration::from_secs(60));
        for (name, bad) in [
            ("MCP_MAX_SESSIONS", "0"),
            ("MCP_MAX_SESSIONS_PER_IDENTITY", "0"),
            ("MCP_MAX_STREAMS", "0"),
            ("MCP_MAX_STREAMS_PER_IDENTITY", "none"),
            ("MCP_PROGRESS_INTERVAL_SECONDS", "0"),
            ("MCP_SESSION_IDLE_SECONDS", "0.5"),
            ("MCP_PAGE_SIZE", "none"),
        ] {
            let error = read(&[(name, bad)]).unwrap_err().to_string();
            assert!(error.contains(name) && error.contains(bad), "{error}");
        }
    }
}
