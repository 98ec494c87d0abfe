//! The settings of the orchestrator's `/mcp`: the module SDK's MCP settings
//! (`MCP_ALLOWED_ORIGINS`, `MCP_ALLOWED_HOSTS`, `MCP_PAGE_SIZE`, read by the
//! same code) and the orchestrator's own budgets.

use std::time::Duration;

use module_sdk::ServeError;
use module_sdk::mcp::McpSettings;

use crate::config::ConfigError;

/// The default `MCP_MAX_SESSIONS`.
pub const DEFAULT_MAX_SESSIONS: usize = 1000;
/// The default `MCP_PROGRESS_INTERVAL_SECONDS`.
pub const DEFAULT_PROGRESS_INTERVAL_SECONDS: f64 = 5.0;

/// How the orchestrator answers MCP clients at `/mcp`.
#[derive(Debug, Clone, PartialEq)]
pub struct McpEndpointSettings {
    /// Allowed origins and hosts, and tools per `tools/list` page, as a module reads them.
    pub transport: McpSettings,
    /// `MCP_MAX_SESSIONS`: the 2025-11-25 sessions kept at once (each holds a
    /// task and, while its client listens, a stream); `initialize` beyond it
    /// is refused with `429`. 2026-07-28 clients need none.
    pub max_sessions: usize,
    /// `MCP_PROGRESS_INTERVAL_SECONDS`: how often a call that is still
    /// running sends `notifications/progress` to a client that gave a
    /// `progressToken` (default 5 s).
    pub progress_interval: Duration,
}

impl Default for McpEndpointSettings {
    fn default() -> Self {
        Self {
            transport: McpSettings::default(),
            max_sessions: DEFAULT_MAX_SESSIONS,
            progress_interval: Duration::from_secs_f64(DEFAULT_PROGRESS_INTERVAL_SECONDS),
        }
    }
}

impl McpEndpointSettings {
    /// Reads the settings through `env` (trimmed, empty as absent).
    pub fn read(env: &impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let transport = McpSettings::from_lookup(env).map_err(|error| match error {
            ServeError::Config { name, value, reason } => invalid(name, value, reason),
            other => invalid("MCP_PAGE_SIZE", String::new(), other.to_string()),
        })?;
        let max_sessions = match env("MCP_MAX_SESSIONS") {
            None => DEFAULT_MAX_SESSIONS,
            Some(text) => text.parse::<usize>().ok().filter(|&n| n > 0).ok_or_else(|| {
                invalid("MCP_MAX_SESSIONS", text.clone(), "expected a positive number of sessions".into())
            })?,
        };
        let progress_interval = match env("MCP_PROGRESS_INTERVAL_SECONDS") {
            None => Duration::from_secs_f64(DEFAULT_PROGRESS_INTERVAL_SECONDS),
            Some(text) => text
                .parse::<f64>()
                .ok()
                .filter(|&s| s >= 0.1)
                .and_then(|s| Duration::try_from_secs_f64(s).ok())
                .ok_or_else(|| {
                    invalid(
                        "MCP_PROGRESS_INTERVAL_SECONDS",
                        text.clone(),
                        "expected a number of seconds, at least 0.1".into(),
                    )
                })?,
        };
        Ok(Self { transport, max_sessions, progress_interval })
    }
}

fn invalid(name: &'static str, value: String, reason: String) -> ConfigError {
    ConfigError::Invalid { name, key: name.to_lowercase(), value, reason }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn read(pairs: &[(&str, &str)]) -> Result<McpEndpointSettings, ConfigError> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        McpEndpointSettings::read(&|name: &str| map.get(name).cloned())
    }

    #[test]
    fn defaults_values_and_bad_values_named() {
        assert_eq!(read(&[]).unwrap(), McpEndpointSettings::default());
        let settings = read(&[
            ("MCP_ALLOWED_ORIGINS", "http://localhost:*"),
            ("MCP_MAX_SESSIONS", "3"),
            ("MCP_PROGRESS_INTERVAL_SECONDS", "0.5"),
        ])
        .unwrap();
        assert_eq!(settings.transport.allowed_origins, ["http://localhost:*"]);
        assert_eq!((settings.max_sessions, settings.progress_interval), (3, Duration::from_millis(500)));
        for (name, bad) in
            [("MCP_MAX_SESSIONS", "0"), ("MCP_PROGRESS_INTERVAL_SECONDS", "0"), ("MCP_PAGE_SIZE", "none")]
        {
            let error = read(&[(name, bad)]).unwrap_err().to_string();
            assert!(error.contains(name) && error.contains(bad), "{error}");
        }
    }
}
