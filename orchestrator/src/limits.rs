//! The budgets of what modules and callers send the orchestrator, beyond
//! the connection budgets it shares with modules (`ServerLimits`): how large
//! a manifest, a tool's schema and a module's answer may be, how long a tool
//! may say it runs, how many calls one message may hold, how many calls
//! one module gets at once and how many requests of its own an MCP server
//! may have waiting for an answer. Each is a setting (README "Limits").

use std::time::Duration;

use module_sdk::contract::SchemaBudget;

use crate::config::{AtLeast, ConfigError, positive_count, seconds_setting};

/// The default [`Budgets::max_manifest_bytes`], 4 MiB.
pub const DEFAULT_MAX_MANIFEST_BYTES: usize = 4 * 1024 * 1024;
/// The default [`Budgets::max_manifest_schema_bytes`], 16 MiB (the SDK's,
/// so that `contract-tests` checks what an orchestrator refuses).
pub use module_sdk::contract::DEFAULT_MAX_MANIFEST_SCHEMA_BYTES;
/// The default [`Budgets::max_answer_bytes`], 8 MiB.
pub const DEFAULT_MAX_ANSWER_BYTES: usize = 8 * 1024 * 1024;
/// The default [`Budgets::max_tool_timeout`], one hour.
pub const DEFAULT_MAX_TOOL_TIMEOUT_SECONDS: f64 = 3600.0;
/// The default [`Budgets::max_calls_per_message`].
pub const DEFAULT_MAX_CALLS_PER_MESSAGE: usize = 128;
/// The default [`Budgets::max_concurrent_calls_per_module`].
pub const DEFAULT_MAX_CONCURRENT_CALLS_PER_MODULE: usize = 64;
/// The default [`Budgets::max_mcp_server_requests`].
pub const DEFAULT_MAX_MCP_SERVER_REQUESTS: usize = 32;

/// What one module or one caller may cost the orchestrator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budgets {
    /// `MAX_MANIFEST_BYTES`: the largest manifest read, whatever its framing;
    /// a larger one fails discovery.
    pub max_manifest_bytes: usize,
    /// `MAX_SCHEMA_DEPTH`, `MAX_SCHEMA_NODES`, `MAX_SCHEMA_BYTES`: what one
    /// tool's `input_schema` may cost, `MAX_SCHEMA_PATTERNS`: how many
    /// patterns all of a manifest's may hold; a manifest over it is refused.
    pub schema: SchemaBudget,
    /// `MAX_MANIFEST_SCHEMA_BYTES`: what the `input_schema`s of one
    /// manifest's tools may cost together, each counted as for
    /// `MAX_SCHEMA_BYTES` (once inlined, as provider formats write them,
    /// and as listings and their caches keep them); over it, the manifest
    /// is refused.
    pub max_manifest_schema_bytes: usize,
    /// `MAX_ANSWER_BYTES`: the largest `/execute` answer read from a module;
    /// a larger one is cut off and the call fails with `execution_failed`.
    pub max_answer_bytes: usize,
    /// `MAX_TOOL_TIMEOUT`: the longest `timeout_seconds` a tool may declare;
    /// longer ones are lowered to it at discovery.
    pub max_tool_timeout: Duration,
    /// `MAX_CALLS_PER_MESSAGE`: the most tool calls one `/v1/tool-calls`
    /// message may hold; more are refused with `422`.
    pub max_calls_per_message: usize,
    /// `MAX_CONCURRENT_CALLS_PER_MODULE`: calls in flight to one module at
    /// once; further calls wait for a free slot (within their timeout).
    pub max_concurrent_calls_per_module: usize,
    /// `MAX_MCP_SERVER_REQUESTS`: requests of its own (`ping`, `roots/list`...)
    /// one MCP server may have sent the orchestrator and not had answered;
    /// one more ends its session.
    pub max_mcp_server_requests: usize,
    /// `LISTING_CACHE_BYTES`: how much memory whole `GET /tools` answers kept
    /// ready to send may take together ([`crate::listing_cache::ListingCache`]).
    pub listing_cache_bytes: usize,
    /// `LISTING_THREADS`: the threads one listing converts its new tool
    /// definitions on, its own included; the extra threads of every
    /// listing at once are at most this minus one.
    pub listing_threads: usize,
}

impl Default for Budgets {
    fn default() -> Self {
        Self {
            max_manifest_bytes: DEFAULT_MAX_MANIFEST_BYTES,
            schema: SchemaBudget::default(),
            max_manifest_schema_bytes: DEFAULT_MAX_MANIFEST_SCHEMA_BYTES,
            max_answer_bytes: DEFAULT_MAX_ANSWER_BYTES,
            max_tool_timeout: Duration::from_secs_f64(DEFAULT_MAX_TOOL_TIMEOUT_SECONDS),
            max_calls_per_message: DEFAULT_MAX_CALLS_PER_MESSAGE,
            max_concurrent_calls_per_module: DEFAULT_MAX_CONCURRENT_CALLS_PER_MODULE,
            max_mcp_server_requests: DEFAULT_MAX_MCP_SERVER_REQUESTS,
            listing_cache_bytes: crate::listing_cache::DEFAULT_LISTING_CACHE_BYTES,
            listing_threads: provider_formats::ConversionThreads::default_count(),
        }
    }
}

/// The budget keys of the TOML configuration, as written.
#[derive(Debug, Default)]
pub struct BudgetsFile {
    /// `max_manifest_bytes`.
    pub max_manifest_bytes: Option<usize>,
    /// `max_schema_depth`.
    pub max_schema_depth: Option<usize>,
    /// `max_schema_nodes`.
    pub max_schema_nodes: Option<usize>,
    /// `max_schema_bytes`.
    pub max_schema_bytes: Option<usize>,
    /// `max_schema_patterns`.
    pub max_schema_patterns: Option<usize>,
    /// `max_manifest_schema_bytes`.
    pub max_manifest_schema_bytes: Option<usize>,
    /// `max_answer_bytes`.
    pub max_answer_bytes: Option<usize>,
    /// `max_tool_timeout`.
    pub max_tool_timeout: Option<f64>,
    /// `max_calls_per_message`.
    pub max_calls_per_message: Option<usize>,
    /// `max_concurrent_calls_per_module`.
    pub max_concurrent_calls_per_module: Option<usize>,
    /// `max_mcp_server_requests`.
    pub max_mcp_server_requests: Option<usize>,
    /// `listing_cache_bytes`.
    pub listing_cache_bytes: Option<usize>,
    /// `listing_threads`.
    pub listing_threads: Option<usize>,
}

impl Budgets {
    /// The file's values overlaid by `env`, checked: every budget a positive number.
    pub fn read(file: BudgetsFile, env: &dyn Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let defaults = Self::default();
        let count = |name, from_file, default| positive_count(env, name, from_file, default, "a positive whole number");
        let max_tool_timeout = match env("MAX_TOOL_TIMEOUT").map(|t| (t.parse::<f64>().ok(), t)) {
            Some((value, text)) => seconds_setting("MAX_TOOL_TIMEOUT", &text, value, AtLeast::Positive)?,
            None => match file.max_tool_timeout {
                Some(value) => seconds_setting("MAX_TOOL_TIMEOUT", &value.to_string(), Some(value), AtLeast::Positive)?,
                None => defaults.max_tool_timeout,
            },
        };
        Ok(Self {
            max_manifest_bytes: count("MAX_MANIFEST_BYTES", file.max_manifest_bytes, defaults.max_manifest_bytes)?,
            schema: SchemaBudget {
                max_depth: count("MAX_SCHEMA_DEPTH", file.max_schema_depth, defaults.schema.max_depth)?,
                max_nodes: count("MAX_SCHEMA_NODES", file.max_schema_nodes, defaults.schema.max_nodes)?,
                max_bytes: count("MAX_SCHEMA_BYTES", file.max_schema_bytes, defaults.schema.max_bytes)?,
                max_patterns: count("MAX_SCHEMA_PATTERNS", file.max_schema_patterns, defaults.schema.max_patterns)?,
            },
            max_manifest_schema_bytes: count(
                "MAX_MANIFEST_SCHEMA_BYTES",
                file.max_manifest_schema_bytes,
                defaults.max_manifest_schema_bytes,
            )?,
            max_answer_bytes: count("MAX_ANSWER_BYTES", file.max_answer_bytes, defaults.max_answer_bytes)?,
            max_tool_timeout,
            max_calls_per_message: count(
                "MAX_CALLS_PER_MESSAGE",
                file.max_calls_per_message,
                defaults.max_calls_per_message,
            )?,
            max_concurrent_calls_per_module: count(
                "MAX_CONCURRENT_CALLS_PER_MODULE",
                file.max_concurrent_calls_per_module,
                defaults.max_concurrent_calls_per_module,
            )?,
            max_mcp_server_requests: count(
                "MAX_MCP_SERVER_REQUESTS",
                file.max_mcp_server_requests,
                defaults.max_mcp_server_requests,
            )?,
            listing_cache_bytes: count("LISTING_CACHE_BYTES", file.listing_cache_bytes, defaults.listing_cache_bytes)?,
            listing_threads: count("LISTING_THREADS", file.listing_threads, defaults.listing_threads)?,
        })
    }

    /// A tool's declared `timeout_seconds` (already checked positive and
    /// finite by the contract) lowered to [`Self::max_tool_timeout`].
    pub fn capped_timeout(&self, seconds: f64) -> f64 {
        seconds.min(self.max_tool_timeout.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn read(file: BudgetsFile, pairs: &[(&str, &str)]) -> Result<Budgets, ConfigError> {
        let env: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Budgets::read(file, &|name| env.get(name).cloned())
    }

    #[test]
    fn defaults_file_and_environment() {
        assert_eq!(read(BudgetsFile::default(), &[]).unwrap(), Budgets::default());
        let file =
            BudgetsFile { max_calls_per_message: Some(5), max_tool_timeout: Some(60.0), ..BudgetsFile::default() };
        let pairs = [
            ("MAX_SCHEMA_NODES", "99"),
            ("MAX_SCHEMA_PATTERNS", "3"),
            ("MAX_CALLS_PER_MESSAGE", "7"),
            ("LISTING_THREADS", "1"),
        ];
        let budgets = read(file, &pairs).unwrap();
        assert_eq!((budgets.max_calls_per_message, budgets.schema.max_nodes, budgets.listing_threads), (7, 99, 1));
        assert_eq!(budgets.schema.max_patterns, 3);
        assert_eq!(budgets.max_tool_timeout, Duration::from_secs(60));
        assert_eq!(budgets.capped_timeout(1e300), 60.0);
        assert_eq!(budgets.capped_timeout(2.5), 2.5);
    }

    #[test]
    fn each_bad_budget_names_its_setting() {
        for (name, value) in [
            ("MAX_MANIFEST_BYTES", "0"),
            ("MAX_SCHEMA_DEPTH", "deep"),
            ("MAX_SCHEMA_PATTERNS", "0"),
            ("MAX_MANIFEST_SCHEMA_BYTES", "0"),
            ("MAX_ANSWER_BYTES", "-1"),
            ("MAX_TOOL_TIMEOUT", "1e300"),
            ("MAX_TOOL_TIMEOUT", "inf"),
            ("MAX_CALLS_PER_MESSAGE", "0"),
            ("MAX_CONCURRENT_CALLS_PER_MODULE", "x"),
            ("MAX_MCP_SERVER_REQUESTS", "0"),
            ("LISTING_THREADS", "0"),
        ] {
            let error = read(BudgetsFile::default(), &[(name, value)]).unwrap_err().to_string();
            assert!(error.contains(name), "{name}: {error}");
        }
    }
}
