//! The orchestrator's settings: a TOML file (`--config`) overlaid by the
//! environment (the environment wins), checked once at start-up.
//!
//! Every setting has one name: the environment variable (`MODULE_SERVICES`)
//! and, lower-cased, the TOML key (`module_services`). An empty environment
//! variable counts as unset.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::approvals::settings::{ApprovalFile, ApprovalSettings};
use crate::gateway_validation::{GatewayValidationFile, GatewayValidationSettings};
use crate::identity::keys::{ApiKeyEntry, MIN_KEY_LENGTH};
use crate::identity::settings::{IdentityFile, IdentitySettings};
use crate::limits::{Budgets, BudgetsFile};
use crate::mcp::settings::{McpEndpointFile, McpEndpointSettings};
use crate::mcp_modules::settings::{McpServerSettings, read_modules};
use crate::tls::read_extra_roots;
use crate::tool_search::settings::{ToolSearchFile, ToolSearchSettings};
use module_sdk::contract::is_valid_name;
use module_sdk::service::HEADER_BYTES_RANGE;
use module_sdk::{LogFormat, ServerLimits};
use rustls::pki_types::CertificateDer;
use serde::Deserialize;

/// Tool timeout for modules not in `SLOW_MODULES` whose tools name none.
pub const DEFAULT_TOOL_TIMEOUT_SECONDS: f64 = 30.0;
/// Tool timeout for modules in `SLOW_MODULES` whose tools name none.
pub const DEFAULT_SLOW_TOOL_TIMEOUT_SECONDS: f64 = 120.0;
/// How long one module's `GET /manifest` may take.
pub const DEFAULT_DISCOVERY_TIMEOUT_SECONDS: f64 = 10.0;
/// How often every module is discovered again.
pub const DEFAULT_REFRESH_INTERVAL_SECONDS: f64 = 300.0;
/// The port the orchestrator listens on by default.
pub const DEFAULT_PORT: u16 = 8080;

/// Why the configuration cannot be used; each names the setting to fix.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The `--config` file could not be read.
    #[error("cannot read the config file {path}: {source}")]
    Read {
        /// The file given with `--config`.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The `--config` file is not valid TOML, or has an unknown or mistyped key.
    #[error("the config file {path} is not valid: {reason}")]
    File {
        /// The file given with `--config`.
        path: PathBuf,
        /// The TOML parser's message, naming the key and line.
        reason: String,
    },
    /// An `[[api_keys]]` entry, of the config file or of `API_KEYS_FILE`,
    /// cannot be used.
    #[error("invalid [[api_keys]] entry in {place}: {reason}")]
    ApiKey {
        /// Where the entry is written: the config file, or `API_KEYS_FILE` and its path.
        place: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A setting has a value that cannot be used.
    #[error("invalid {name} (TOML key `{key}`): {reason}; got `{value}`")]
    Invalid {
        /// The environment variable's name.
        name: &'static str,
        /// The TOML key.
        key: String,
        /// The offending value as given.
        value: String,
        /// What is expected instead.
        reason: String,
    },
}

/// The most [`Config::serving_threads`] accepted.
pub const MAX_SERVING_THREADS: usize = 256;

/// The most [`Config::serving_threads`] by default, whatever the cores.
const MAX_DEFAULT_SERVING_THREADS: usize = 64;

/// The default [`Config::serving_threads`]: one per core, at most
/// [`MAX_DEFAULT_SERVING_THREADS`].
fn default_serving_threads() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get).min(MAX_DEFAULT_SERVING_THREADS)
}

/// The checked settings of an orchestrator.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `MODULE_SERVICES`: module name -> base URL (no trailing slash); for an
    /// MCP server, its URL as shown (`mcp+…`, without credentials).
    pub module_services: BTreeMap<String, String>,
    /// The modules of `MODULE_SERVICES` that are MCP servers, and how to reach them.
    pub mcp_servers: BTreeMap<String, McpServerSettings>,
    /// `SLOW_MODULES`: modules whose tools get `TOOL_EXECUTION_TIMEOUT`.
    pub slow_modules: Vec<String>,
    /// `TOOL_EXECUTION_TIMEOUT`: default tool timeout of slow modules.
    pub slow_tool_timeout: Duration,
    /// `DEFAULT_TOOL_TIMEOUT`: default tool timeout of the other modules.
    pub default_tool_timeout: Duration,
    /// `DISCOVERY_TIMEOUT`: the most one module's `GET /manifest` may take.
    pub discovery_timeout: Duration,
    /// `REFRESH_INTERVAL`: how often every module is discovered again.
    pub refresh_interval: Duration,
    /// `REDIS_URL`: the shared manifest cache; `None` keeps manifests in memory.
    pub redis_url: Option<String>,
    /// `SERVICE_AUTH_TOKEN`: sent to modules as `Authorization: Bearer`.
    pub service_auth_token: Option<String>,
    /// `TLS_EXTRA_ROOTS`: the root certificates of its PEM file, trusted
    /// over TLS besides Mozilla's (see [`crate::tls`]); empty when unset.
    pub tls_extra_roots: Vec<CertificateDer<'static>>,
    /// `ORCHESTRATOR_API_TOKEN`: what callers must present; `None` is development mode.
    pub api_token: Option<String>,
    /// `HOST`: the address to listen on.
    pub host: IpAddr,
    /// `PORT`: the port to listen on; 0 picks a free one.
    pub port: u16,
    /// `LOG_FORMAT`: `text` or `json`.
    pub log_format: LogFormat,
    /// `MAX_BODY_BYTES`, `HEADER_READ_TIMEOUT_SECONDS`, `BODY_READ_TIMEOUT_SECONDS`,
    /// `MAX_CONNECTIONS` and `MAX_HEADER_BYTES`: the budgets of callers'
    /// connections and requests.
    pub limits: ServerLimits,
    /// `SERVING_THREADS`: the threads that serve callers' connections, each
    /// with its own event loop and its own connections to modules.
    pub serving_threads: usize,
    /// `MAX_MANIFEST_BYTES`, `MAX_SCHEMA_*`, `MAX_ANSWER_BYTES`, `MAX_TOOL_TIMEOUT`,
    /// `MAX_CALLS_PER_MESSAGE`, `MAX_CONCURRENT_CALLS_PER_MODULE` and
    /// `MAX_MCP_SERVER_REQUESTS`: what modules and callers may cost.
    pub budgets: Budgets,
    /// `[[api_keys]]`, `API_KEYS_FILE` and `JWT_*`: the identities callers prove.
    pub identities: IdentitySettings,
    /// `APPROVAL_*` and `MAX_PENDING_APPROVALS`: which calls wait for a person, and how long.
    pub approvals: ApprovalSettings,
    /// `GATEWAY_VALIDATION` and `SELF_VALIDATING_MODULES`: whose arguments are checked before forwarding.
    pub gateway_validation: GatewayValidationSettings,
    /// `MAX_SEARCH_QUERY_CHARS` and `MAX_SEARCH_RESULTS`: what one tool search may cost.
    pub tool_search: ToolSearchSettings,
    /// `MCP_ALLOWED_ORIGINS`, `MCP_ALLOWED_HOSTS`, `MCP_PAGE_SIZE`, `MCP_MAX_SESSIONS`,
    /// `MCP_MAX_SESSIONS_PER_IDENTITY`, the `MCP_MAX_STREAMS*` settings,
    /// `MCP_PROGRESS_INTERVAL_SECONDS` and the `MCP_*TASK*` settings: how `/mcp` answers MCP clients.
    pub mcp: McpEndpointSettings,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            module_services: BTreeMap::new(),
            mcp_servers: BTreeMap::new(),
            slow_modules: Vec::new(),
            slow_tool_timeout: Duration::from_secs_f64(DEFAULT_SLOW_TOOL_TIMEOUT_SECONDS),
            default_tool_timeout: Duration::from_secs_f64(DEFAULT_TOOL_TIMEOUT_SECONDS),
            discovery_timeout: Duration::from_secs_f64(DEFAULT_DISCOVERY_TIMEOUT_SECONDS),
            refresh_interval: Duration::from_secs_f64(DEFAULT_REFRESH_INTERVAL_SECONDS),
            redis_url: None,
            service_auth_token: None,
            tls_extra_roots: Vec::new(),
            api_token: None,
            host: IpAddr::from([0, 0, 0, 0]),
            port: DEFAULT_PORT,
            log_format: LogFormat::Text,
            limits: ServerLimits::default(),
            serving_threads: default_serving_threads(),
            budgets: Budgets::default(),
            identities: IdentitySettings::default(),
            approvals: ApprovalSettings::default(),
            gateway_validation: GatewayValidationSettings::default(),
            tool_search: ToolSearchSettings::default(),
            mcp: McpEndpointSettings::default(),
        }
    }
}

/// The settings as written in the TOML file, every one optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    module_services: Option<BTreeMap<String, serde_json::Value>>,
    slow_modules: Option<Vec<String>>,
    tool_execution_timeout: Option<f64>,
    default_tool_timeout: Option<f64>,
    discovery_timeout: Option<f64>,
    refresh_interval: Option<f64>,
    redis_url: Option<String>,
    service_auth_token: Option<String>,
    tls_extra_roots: Option<PathBuf>,
    orchestrator_api_token: Option<String>,
    host: Option<String>,
    port: Option<u16>,
    log_format: Option<String>,
    max_body_bytes: Option<usize>,
    header_read_timeout_seconds: Option<f64>,
    body_read_timeout_seconds: Option<f64>,
    max_connections: Option<usize>,
    max_header_bytes: Option<usize>,
    serving_threads: Option<usize>,
    max_manifest_bytes: Option<usize>,
    max_schema_depth: Option<usize>,
    max_schema_nodes: Option<usize>,
    max_schema_bytes: Option<usize>,
    max_schema_patterns: Option<usize>,
    max_manifest_schema_bytes: Option<usize>,
    max_answer_bytes: Option<usize>,
    listing_cache_bytes: Option<usize>,
    listing_threads: Option<usize>,
    max_tool_timeout: Option<f64>,
    max_calls_per_message: Option<usize>,
    max_concurrent_calls_per_module: Option<usize>,
    max_mcp_server_requests: Option<usize>,
    api_keys: Option<Vec<ApiKeyEntry>>,
    api_keys_file: Option<PathBuf>,
    revocation_refresh_seconds: Option<f64>,
    jwt_jwks: Option<String>,
    jwt_issuer: Option<String>,
    jwt_audience: Option<String>,
    jwt_algorithms: Option<String>,
    jwt_user_claim: Option<String>,
    jwt_permission_claim: Option<String>,
    jwt_modules_claim: Option<String>,
    jwt_jwks_refresh_seconds: Option<f64>,
    jwt_unknown_kid_refetch_seconds: Option<f64>,
    jwt_jwks_max_stale_seconds: Option<f64>,
    jwt_jwks_max_bytes: Option<usize>,
    approval_expiry_seconds: Option<f64>,
    approval_risk_level: Option<String>,
    approval_for_destructive: Option<bool>,
    approval_separate_decider: Option<bool>,
    max_pending_approvals: Option<usize>,
    max_approvals: Option<usize>,
    max_approvals_per_user: Option<usize>,
    max_approval_argument_bytes: Option<usize>,
    max_approval_bytes: Option<usize>,
    max_approval_bytes_per_user: Option<usize>,
    max_approval_reason_bytes: Option<usize>,
    gateway_validation: Option<bool>,
    self_validating_modules: Option<Vec<String>>,
    max_search_query_chars: Option<usize>,
    max_search_results: Option<usize>,
    mcp_allowed_origins: Option<Vec<String>>,
    mcp_allowed_hosts: Option<Vec<String>>,
    mcp_page_size: Option<usize>,
    mcp_max_sessions: Option<usize>,
    mcp_max_sessions_per_identity: Option<usize>,
    mcp_max_streams: Option<usize>,
    mcp_max_streams_per_identity: Option<usize>,
    mcp_progress_interval_seconds: Option<f64>,
    mcp_session_idle_seconds: Option<f64>,
    mcp_max_tasks: Option<usize>,
    mcp_max_tasks_per_owner: Option<usize>,
    mcp_task_ttl_seconds: Option<f64>,
    mcp_task_after_seconds: Option<f64>,
    mcp_task_results_bytes: Option<usize>,
}

impl Config {
    /// Reads `file` (when given) and the process environment.
    pub fn load(file: Option<&Path>) -> Result<Self, ConfigError> {
        Self::from_sources(file, |name| std::env::var(name).ok())
    }

    /// Reads `file` (when given) and then `lookup` (the environment, or a map in tests).
    pub fn from_sources(file: Option<&Path>, lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let from_file = match file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|source| ConfigError::Read { path: path.to_owned(), source })?;
                toml::from_str(&text).map_err(|e| ConfigError::File { path: path.to_owned(), reason: e.to_string() })?
            }
            None => FileConfig::default(),
        };
        Self::merge(from_file, lookup)
    }

    /// Overlays the environment on the file's values, then checks the result.
    fn merge(file: FileConfig, lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let env = |name: &str| lookup(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let defaults = Self::default();

        let module_services = match env("MODULE_SERVICES") {
            Some(text) => serde_json::from_str::<BTreeMap<String, serde_json::Value>>(&text).map_err(|e| {
                let reason = format!("expected a JSON object of module name to base URL or MCP server ({e})");
                invalid("MODULE_SERVICES", &text, reason)
            })?,
            None => file.module_services.unwrap_or_default(),
        };
        let (module_services, mcp_servers) = read_modules(module_services)?;

        let slow_modules = match env("SLOW_MODULES") {
            Some(text) => text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect(),
            None => file.slow_modules.unwrap_or_default(),
        };
        if let Some(unknown) = slow_modules.iter().find(|name| !module_services.contains_key(*name)) {
            return Err(invalid(
                "SLOW_MODULES",
                &slow_modules.join(","),
                format!("`{unknown}` is not a module of MODULE_SERVICES"),
            ));
        }

        let seconds =
            |name: &'static str, from_file: Option<f64>, default: Duration| -> Result<Duration, ConfigError> {
                let (text, value) = match env(name) {
                    Some(text) => {
                        let value = text.parse::<f64>().ok();
                        (text, value)
                    }
                    None => match from_file {
                        Some(value) => (value.to_string(), Some(value)),
                        None => return Ok(default),
                    },
                };
                seconds_setting(name, &text, value, AtLeast::Positive)
            };

        let count = |name, what: &str, from_file, default| {
            positive_count(&env, name, from_file, default, &format!("a positive number of {what}"))
        };
        let limits = ServerLimits {
            max_body_bytes: count("MAX_BODY_BYTES", "bytes", file.max_body_bytes, defaults.limits.max_body_bytes)?,
            header_read_timeout: seconds(
                "HEADER_READ_TIMEOUT_SECONDS",
                file.header_read_timeout_seconds,
                defaults.limits.header_read_timeout,
            )?,
            body_read_timeout: seconds(
                "BODY_READ_TIMEOUT_SECONDS",
                file.body_read_timeout_seconds,
                defaults.limits.body_read_timeout,
            )?,
            max_connections: count(
                "MAX_CONNECTIONS",
                "connections",
                file.max_connections,
                defaults.limits.max_connections,
            )?,
            max_header_bytes: count(
                "MAX_HEADER_BYTES",
                "bytes",
                file.max_header_bytes,
                defaults.limits.max_header_bytes,
            )?,
        };
        if !HEADER_BYTES_RANGE.contains(&limits.max_header_bytes) {
            let (least, most) = HEADER_BYTES_RANGE.into_inner();
            let expected = format!("expected a number of bytes from {least} to {most}");
            return Err(invalid("MAX_HEADER_BYTES", &limits.max_header_bytes.to_string(), expected));
        }

        let serving_threads = count("SERVING_THREADS", "threads", file.serving_threads, defaults.serving_threads)?;
        if serving_threads > MAX_SERVING_THREADS {
            let expected = format!("at most {MAX_SERVING_THREADS} threads");
            return Err(invalid("SERVING_THREADS", &serving_threads.to_string(), expected));
        }

        let redis_url = env("REDIS_URL").or(file.redis_url.filter(|s| !s.is_empty()));
        if let Some(url) = &redis_url {
            redis::Client::open(url.as_str())
                .map_err(|e| invalid("REDIS_URL", url, format!("expected redis://host:port[/db] ({e})")))?;
        }
        let tls_extra_roots = match env("TLS_EXTRA_ROOTS").map(PathBuf::from).or(file.tls_extra_roots) {
            Some(path) => read_extra_roots(&path)
                .map_err(|e| invalid("TLS_EXTRA_ROOTS", &path.display().to_string(), e.to_string()))?,
            None => Vec::new(),
        };
        let host = match env("HOST").or(file.host) {
            Some(text) => text
                .parse()
                .map_err(|_| invalid("HOST", &text, "expected an IP address such as 0.0.0.0 or 127.0.0.1".into()))?,
            None => defaults.host,
        };
        let port = match env("PORT") {
            Some(text) => {
                text.parse().map_err(|_| invalid("PORT", &text, "expected a port number from 0 to 65535".into()))?
            }
            None => file.port.unwrap_or(defaults.port),
        };
        let log_format = match env("LOG_FORMAT").or(file.log_format).as_deref() {
            None | Some("text") => LogFormat::Text,
            Some("json") => LogFormat::Json,
            Some(other) => return Err(invalid("LOG_FORMAT", other, "expected `text` or `json`".into())),
        };

        let identities = IdentitySettings::read(
            IdentityFile {
                api_keys: file.api_keys,
                api_keys_file: file.api_keys_file,
                revocation_refresh_seconds: file.revocation_refresh_seconds,
                jwt_jwks: file.jwt_jwks,
                jwt_issuer: file.jwt_issuer,
                jwt_audience: file.jwt_audience,
                jwt_algorithms: file.jwt_algorithms,
                jwt_user_claim: file.jwt_user_claim,
                jwt_permission_claim: file.jwt_permission_claim,
                jwt_modules_claim: file.jwt_modules_claim,
                jwt_jwks_refresh_seconds: file.jwt_jwks_refresh_seconds,
                jwt_unknown_kid_refetch_seconds: file.jwt_unknown_kid_refetch_seconds,
                jwt_jwks_max_stale_seconds: file.jwt_jwks_max_stale_seconds,
                jwt_jwks_max_bytes: file.jwt_jwks_max_bytes,
            },
            &env,
        )?;
        let approvals = ApprovalSettings::read(
            ApprovalFile {
                approval_expiry_seconds: file.approval_expiry_seconds,
                approval_risk_level: file.approval_risk_level,
                approval_for_destructive: file.approval_for_destructive,
                approval_separate_decider: file.approval_separate_decider,
                max_pending_approvals: file.max_pending_approvals,
                max_approvals: file.max_approvals,
                max_approvals_per_user: file.max_approvals_per_user,
                max_approval_argument_bytes: file.max_approval_argument_bytes,
                max_approval_bytes: file.max_approval_bytes,
                max_approval_bytes_per_user: file.max_approval_bytes_per_user,
                max_approval_reason_bytes: file.max_approval_reason_bytes,
            },
            &env,
        )?;

        let gateway_validation = GatewayValidationSettings::read(
            GatewayValidationFile {
                gateway_validation: file.gateway_validation,
                self_validating_modules: file.self_validating_modules,
            },
            &env,
            &module_services,
        )?;

        let budgets = Budgets::read(
            BudgetsFile {
                max_manifest_bytes: file.max_manifest_bytes,
                max_schema_depth: file.max_schema_depth,
                max_schema_nodes: file.max_schema_nodes,
                max_schema_bytes: file.max_schema_bytes,
                max_schema_patterns: file.max_schema_patterns,
                max_manifest_schema_bytes: file.max_manifest_schema_bytes,
                max_answer_bytes: file.max_answer_bytes,
                listing_cache_bytes: file.listing_cache_bytes,
                listing_threads: file.listing_threads,
                max_tool_timeout: file.max_tool_timeout,
                max_calls_per_message: file.max_calls_per_message,
                max_concurrent_calls_per_module: file.max_concurrent_calls_per_module,
                max_mcp_server_requests: file.max_mcp_server_requests,
            },
            &env,
        )?;

        let api_token = env("ORCHESTRATOR_API_TOKEN").or(file.orchestrator_api_token.filter(|s| !s.is_empty()));
        // The strongest credential (any user, `"approved": true`) and 401s are
        // not rate limited: as long as an API key must be. Never echoed.
        if api_token.as_ref().is_some_and(|token| token.len() < MIN_KEY_LENGTH) {
            let reason = format!(
                "expected at least {MIN_KEY_LENGTH} characters of random data, as an API key (`openssl rand -hex 32` makes one)"
            );
            return Err(invalid("ORCHESTRATOR_API_TOKEN", "(not shown)", reason));
        }
        // Development mode (no identity configured) is one identity for every request.
        let development = api_token.is_none() && identities.api_keys.is_empty() && identities.jwt.is_none();
        if approvals.separate_decider && development {
            let reason = "it needs identities (ORCHESTRATOR_API_TOKEN, API keys or JWT_JWKS): in development mode \
                          every request is the one identity `development`, so no approval could be decided"
                .to_owned();
            return Err(invalid("APPROVAL_SEPARATE_DECIDER", "true", reason));
        }

        Ok(Self {
            budgets,
            identities,
            approvals,
            gateway_validation,
            tool_search: ToolSearchSettings::read(
                ToolSearchFile {
                    max_search_query_chars: file.max_search_query_chars,
                    max_search_results: file.max_search_results,
                },
                &env,
            )?,
            mcp: McpEndpointSettings::read(
                McpEndpointFile {
                    mcp_allowed_origins: file.mcp_allowed_origins,
                    mcp_allowed_hosts: file.mcp_allowed_hosts,
                    mcp_page_size: file.mcp_page_size,
                    mcp_max_sessions: file.mcp_max_sessions,
                    mcp_max_sessions_per_identity: file.mcp_max_sessions_per_identity,
                    mcp_max_streams: file.mcp_max_streams,
                    mcp_max_streams_per_identity: file.mcp_max_streams_per_identity,
                    mcp_progress_interval_seconds: file.mcp_progress_interval_seconds,
                    mcp_session_idle_seconds: file.mcp_session_idle_seconds,
                    mcp_max_tasks: file.mcp_max_tasks,
                    mcp_max_tasks_per_owner: file.mcp_max_tasks_per_owner,
                    mcp_task_ttl_seconds: file.mcp_task_ttl_seconds,
                    mcp_task_after_seconds: file.mcp_task_after_seconds,
                    mcp_task_results_bytes: file.mcp_task_results_bytes,
                },
                limits.max_connections,
                &env,
            )?,
            slow_tool_timeout: seconds(
                "TOOL_EXECUTION_TIMEOUT",
                file.tool_execution_timeout,
                defaults.slow_tool_timeout,
            )?,
            default_tool_timeout: seconds(
                "DEFAULT_TOOL_TIMEOUT",
                file.default_tool_timeout,
                defaults.default_tool_timeout,
            )?,
            discovery_timeout: seconds("DISCOVERY_TIMEOUT", file.discovery_timeout, defaults.discovery_timeout)?,
            refresh_interval: seconds("REFRESH_INTERVAL", file.refresh_interval, defaults.refresh_interval)?,
            module_services,
            mcp_servers,
            slow_modules,
            redis_url,
            service_auth_token: env("SERVICE_AUTH_TOKEN").or(file.service_auth_token.filter(|s| !s.is_empty())),
            tls_extra_roots,
            api_token,
            host,
            port,
            log_format,
            limits,
            serving_threads,
        })
    }

    /// The timeout of a tool that does not name its own.
    pub fn fallback_timeout(&self, module: &str) -> Duration {
        if self.slow_modules.iter().any(|slow| slow == module) {
            self.slow_tool_timeout
        } else {
            self.default_tool_timeout
        }
    }
}

/// A `MODULE_SERVICES` entry: a contract-valid name and an http(s) base URL,
/// returned without its trailing slash.
pub(crate) fn check_module(name: &str, url: &str) -> Result<String, ConfigError> {
    let entry = format!("{name}={url}");
    check_module_name(name, &entry)?;
    match url::Url::parse(url) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") && parsed.host().is_some() => {
            Ok(url.trim_end_matches('/').to_owned())
        }
        _ => Err(invalid(
            "MODULE_SERVICES",
            &entry,
            format!("the URL of `{name}` must be an http:// or https:// base URL such as http://127.0.0.1:8001"),
        )),
    }
}

/// A `MODULE_SERVICES` name: contract-valid; `entry` is the entry as shown in the error.
pub(crate) fn check_module_name(name: &str, entry: &str) -> Result<(), ConfigError> {
    if name == crate::tool_search::META_MODULE {
        let reason = format!("the module name `{name}` is kept for the orchestrator's own `tools__search`");
        return Err(invalid("MODULE_SERVICES", entry, reason));
    }
    if is_valid_name(name) {
        return Ok(());
    }
    Err(invalid(
        "MODULE_SERVICES",
        entry,
        format!("module name `{name}` must match ^[a-z][a-z0-9_]{{0,39}}$ (the module's own module_name)"),
    ))
}

/// Setting `name` as a positive whole number: the environment's value, else the
/// file's, else `default`; zero or unreadable text is refused as not `expected`.
pub(crate) fn positive_count(
    env: &dyn Fn(&str) -> Option<String>,
    name: &'static str,
    from_file: Option<usize>,
    default: usize,
    expected: &str,
) -> Result<usize, ConfigError> {
    let (text, value) = match env(name) {
        Some(text) => {
            let value = text.parse::<usize>().ok();
            (text, value)
        }
        None => match from_file {
            Some(value) => (value.to_string(), Some(value)),
            None => return Ok(default),
        },
    };
    value.filter(|n| *n > 0).ok_or_else(|| invalid(name, &text, format!("expected {expected}")))
}

/// Setting `name` in seconds, at least `min`: the value `env` gives (the
/// environment, then the file), else `default`.
pub(crate) fn seconds_at_least(
    env: &dyn Fn(&str) -> Option<String>,
    name: &'static str,
    default: f64,
    min: f64,
) -> Result<Duration, ConfigError> {
    let Some(text) = env(name) else { return Ok(Duration::from_secs_f64(default)) };
    seconds_setting(name, &text, text.parse::<f64>().ok(), AtLeast::Seconds(min))
}

/// The least a setting in seconds may be.
#[derive(Debug, Clone, Copy)]
pub(crate) enum AtLeast {
    /// More than zero.
    Positive,
    /// This many seconds.
    Seconds(f64),
}

/// The most any setting in seconds may be: 30 days (an approval may wait
/// over a long weekend). Far past it, adding it to a clock panics.
pub const MAX_SETTING_SECONDS: Duration = Duration::from_secs(30 * 86_400);

/// Setting `name` in seconds, `value` as read from `text`: finite, at least
/// `min` and at most [`MAX_SETTING_SECONDS`].
pub(crate) fn seconds_setting(
    name: &'static str,
    text: &str,
    value: Option<f64>,
    min: AtLeast,
) -> Result<Duration, ConfigError> {
    let enough = |seconds: f64| match min {
        AtLeast::Positive => seconds > 0.0,
        AtLeast::Seconds(least) => seconds >= least,
    };
    value
        .filter(|seconds| seconds.is_finite() && enough(*seconds))
        .and_then(|seconds| Duration::try_from_secs_f64(seconds).ok())
        .filter(|duration| *duration <= MAX_SETTING_SECONDS)
        .ok_or_else(|| {
            let least = match min {
                AtLeast::Positive => "a positive number of seconds".to_owned(),
                AtLeast::Seconds(least) => format!("a number of seconds, at least {least}"),
            };
            invalid(name, text, format!("expected {least}, at most {}", MAX_SETTING_SECONDS.as_secs()))
        })
}

/// The error of setting `name` with `value`, saying what is expected instead.
pub(crate) fn invalid(name: &'static str, value: &str, reason: String) -> ConfigError {
    ConfigError::Invalid { name, key: name.to_lowercase(), value: value.to_owned(), reason }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::io::Write;

    fn read(file: Option<&str>, pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let env: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let mut temp = tempfile::NamedTempFile::new().unwrap();
        let path = file.map(|text| {
            temp.write_all(text.as_bytes()).unwrap();
            temp.path().to_owned()
        });
        Config::from_sources(path.as_deref(), |name| env.get(name).cloned())
    }

    #[test]
    fn defaults_need_nothing() {
        assert_eq!(read(None, &[]).unwrap(), Config::default());
    }

    #[test]
    fn the_environment_wins_over_the_file() {
        let file = r#"
            slow_modules = ["research"]
            discovery_timeout = 4
            port = 9000
            orchestrator_api_token = "from-file-a-token-of-32-characters"
            [module_services]
            research = "http://127.0.0.1:8001/"
            file_manager = "http://127.0.0.1:8002"
        "#;
        let config =
            read(Some(file), &[("PORT", "9100"), ("DISCOVERY_TIMEOUT", "0.5"), ("ORCHESTRATOR_API_TOKEN", "")])
                .unwrap();
        assert_eq!(config.port, 9100);
        assert_eq!(config.discovery_timeout, Duration::from_millis(500));
        assert_eq!(config.module_services["research"], "http://127.0.0.1:8001");
        assert_eq!(
            config.api_token.as_deref(),
            Some("from-file-a-token-of-32-characters"),
            "an empty variable counts as unset"
        );
        assert_eq!(config.fallback_timeout("research"), Duration::from_secs(120));
        assert_eq!(config.fallback_timeout("file_manager"), Duration::from_secs(30));

        let env = read(Some(file), &[("MODULE_SERVICES", r#"{"other": "http://localhost:1"}"#), ("SLOW_MODULES", "")]);
        let error = env.unwrap_err().to_string();
        assert!(error.contains("SLOW_MODULES") && error.contains("research"), "{error}");
    }

    #[test]
    fn each_bad_value_names_its_setting() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[("MODULE_SERVICES", "research=http://x")], "MODULE_SERVICES"),
            (&[("MODULE_SERVICES", r#"{"Research": "http://x"}"#)], "MODULE_SERVICES"),
            (&[("MODULE_SERVICES", r#"{"research": "ftp://x"}"#)], "MODULE_SERVICES"),
            (&[("TOOL_EXECUTION_TIMEOUT", "-1")], "TOOL_EXECUTION_TIMEOUT"),
            (&[("DEFAULT_TOOL_TIMEOUT", "soon")], "DEFAULT_TOOL_TIMEOUT"),
            (&[("DISCOVERY_TIMEOUT", "0")], "DISCOVERY_TIMEOUT"),
            (&[("REDIS_URL", "localhost:6379")], "REDIS_URL"),
            (&[("HOST", "example")], "HOST"),
            (&[("PORT", "70000")], "PORT"),
            (&[("LOG_FORMAT", "xml")], "LOG_FORMAT"),
            (&[("MAX_BODY_BYTES", "0")], "MAX_BODY_BYTES"),
            (&[("HEADER_READ_TIMEOUT_SECONDS", "never")], "HEADER_READ_TIMEOUT_SECONDS"),
            (&[("BODY_READ_TIMEOUT_SECONDS", "1e300")], "BODY_READ_TIMEOUT_SECONDS"),
            (&[("HEADER_READ_TIMEOUT_SECONDS", "1e19")], "HEADER_READ_TIMEOUT_SECONDS"),
            (&[("REFRESH_INTERVAL", "2592000.5")], "REFRESH_INTERVAL"),
            (&[("MAX_TOOL_TIMEOUT", "1e19")], "MAX_TOOL_TIMEOUT"),
            (&[("APPROVAL_EXPIRY_SECONDS", "1e12")], "APPROVAL_EXPIRY_SECONDS"),
            (&[("MCP_TASK_TTL_SECONDS", "1e19")], "MCP_TASK_TTL_SECONDS"),
            (&[("REVOCATION_REFRESH_SECONDS", "1e19")], "REVOCATION_REFRESH_SECONDS"),
            (&[("MAX_CONNECTIONS", "-5")], "MAX_CONNECTIONS"),
            (&[("TLS_EXTRA_ROOTS", "/nonexistent/roots.pem")], "TLS_EXTRA_ROOTS"),
        ];
        for (env, name) in cases {
            let error = read(None, env).unwrap_err().to_string();
            assert!(error.contains(name), "{name}: {error}");
        }
    }

    #[test]
    fn limits_come_from_the_file_or_the_environment() {
        let file =
            "max_body_bytes = 4096\nheader_read_timeout_seconds = 2.5\nmax_connections = 9\nmax_header_bytes = 8192";
        let config = read(Some(file), &[("BODY_READ_TIMEOUT_SECONDS", "7"), ("MAX_CONNECTIONS", "11")]).unwrap();
        let expected = ServerLimits {
            max_body_bytes: 4096,
            header_read_timeout: Duration::from_millis(2500),
            body_read_timeout: Duration::from_secs(7),
            max_connections: 11,
            max_header_bytes: 8192,
        };
        assert_eq!(config.limits, expected);
        for refused in ["4095", "262145"] {
            let error = read(None, &[("MAX_HEADER_BYTES", refused)]).unwrap_err().to_string();
            assert!(error.contains("MAX_HEADER_BYTES") && error.contains("from 4096 to 262144"), "{error}");
        }
        let error = read(Some("max_connections = 0"), &[]).unwrap_err().to_string();
        assert!(error.contains("MAX_CONNECTIONS") && error.contains("max_connections"), "{error}");
    }

    #[test]
    fn serving_threads_are_one_per_core_unless_set() {
        assert_eq!(read(None, &[]).unwrap().serving_threads, super::default_serving_threads());
        assert_eq!(read(Some("serving_threads = 3"), &[]).unwrap().serving_threads, 3);
        assert_eq!(read(Some("serving_threads = 3"), &[("SERVING_THREADS", "1")]).unwrap().serving_threads, 1);
        for refused in ["0", "-1", "two", "257"] {
            let error = read(None, &[("SERVING_THREADS", refused)]).unwrap_err().to_string();
            assert!(error.contains("SERVING_THREADS") && error.contains(refused), "{refused}: {error}");
        }
    }

    #[test]
    fn unknown_or_mistyped_file_keys_are_refused() {
        let error = read(Some("discovery_timeot = 3"), &[]).unwrap_err().to_string();
        assert!(error.contains("discovery_timeot"), "{error}");
        let error = read(Some("port = \"eighty\""), &[]).unwrap_err().to_string();
        assert!(error.contains("port"), "{error}");
    }

    #[test]
    fn a_short_service_token_is_refused_and_not_shown() {
        let error = read(None, &[("ORCHESTRATOR_API_TOKEN", "let-me-in")]).unwrap_err().to_string();
        assert!(error.contains("ORCHESTRATOR_API_TOKEN") && error.contains("at least 32"), "{error}");
        assert!(!error.contains("let-me-in"), "{error}");
        let file = "orchestrator_api_token = \"short\"";
        let error = read(Some(file), &[]).unwrap_err().to_string();
        assert!(error.contains("at least 32") && !error.contains("short\""), "{error}");
    }

    #[test]
    fn a_separate_decider_needs_identities() {
        let error = read(None, &[("APPROVAL_SEPARATE_DECIDER", "true")]).unwrap_err().to_string();
        assert!(error.contains("APPROVAL_SEPARATE_DECIDER") && error.contains("development mode"), "{error}");
        let token = ("ORCHESTRATOR_API_TOKEN", "a-service-token-of-more-than-32-characters");
        let config = read(None, &[("APPROVAL_SEPARATE_DECIDER", "true"), token]).unwrap();
        assert!(config.approvals.separate_decider);
    }
}
