//! The orchestrator assembled from its configuration: one HTTP client, the
//! manifest cache, the registry of modules and the executor, shared by the
//! HTTP API and the command line.

use std::sync::Arc;
use std::time::Duration;

use module_sdk::contract::{ToolDefinition, ToolResult};
use serde_json::Value;

use crate::cache::{CacheError, ManifestCache, MemoryCache};
use crate::caller::Caller;
use crate::config::Config;
use crate::execute::{ExecuteRequest, Executor};
use crate::providers::{ConvertedCache, ToolFormat};
use crate::redis_cache::RedisCache;

/// How long an idle pooled connection to a module is kept: under the
/// modules' default idle close (`HEADER_READ_TIMEOUT_SECONDS`, 10 s).
const MODULE_IDLE_TIMEOUT: Duration = Duration::from_secs(5);
use crate::registry::Registry;

/// Why the orchestrator could not be put together.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The HTTP client could not be created (TLS set-up).
    #[error("cannot create the HTTP client: {0}")]
    Client(#[from] reqwest::Error),
    /// `REDIS_URL` could not be used.
    #[error("cannot use REDIS_URL: {0}")]
    Cache(#[from] CacheError),
}

/// Everything a running orchestrator holds.
pub struct Orchestrator {
    /// The settings it was built from.
    pub config: Arc<Config>,
    /// The modules and their manifests.
    pub registry: Arc<Registry>,
    /// Routes calls to modules.
    pub executor: Executor,
    /// Tool definitions already converted to provider formats.
    converted: ConvertedCache,
}

impl Orchestrator {
    /// Builds an orchestrator from `config`; nothing is contacted yet.
    pub fn new(config: Config) -> Result<Self, BuildError> {
        let config = Arc::new(config);
        // One pooled client for discovery and every call. Modules are
        // internal services: never send their traffic through a proxy.
        // Modules close a kept-alive connection after HEADER_READ_TIMEOUT_SECONDS
        // (10 s by default) of idleness; a pooled connection reused just as the
        // module closes it fails a call that may not be retried. Dropping idle
        // connections sooner than any module does avoids that race.
        let client = reqwest::Client::builder().no_proxy().pool_idle_timeout(MODULE_IDLE_TIMEOUT).build()?;
        let cache: Arc<dyn ManifestCache> = match &config.redis_url {
            Some(url) => Arc::new(RedisCache::new(url)?),
            None => Arc::new(MemoryCache::default()),
        };
        let registry = Arc::new(Registry::new(
            &config.module_services,
            cache,
            client.clone(),
            config.service_auth_token.clone(),
            config.discovery_timeout,
        ));
        let executor = Executor::new(Arc::clone(&registry), client, Arc::clone(&config));
        Ok(Self { config, registry, executor, converted: ConvertedCache::new() })
    }

    /// The tools `caller` may use, in `format` (`raw`: the manifest form, each
    /// tool with its `input_schema`).
    pub fn render_tools(&self, caller: &Caller, format: ToolFormat) -> Value {
        let tools = self.registry.tools_for(caller);
        match format {
            ToolFormat::Raw => serde_json::to_value(&tools).expect("tool definitions always serialize"),
            other => self.converted.render_tools(other, &tools),
        }
    }

    /// [`Self::render_tools`] as JSON text, ready to send.
    pub fn render_tools_json(&self, caller: &Caller, format: ToolFormat) -> String {
        let tools = self.registry.tools_for(caller);
        match format {
            ToolFormat::Raw => serde_json::to_string(&tools).expect("tool definitions always serialize"),
            other => self.converted.render_tools_json(other, &tools),
        }
    }

    /// The tools `caller` may use, in our own form.
    pub fn tools(&self, caller: &Caller) -> Vec<ToolDefinition> {
        self.registry.tools_for(caller)
    }

    /// Runs one `POST /execute` request.
    pub async fn execute(&self, request: ExecuteRequest) -> ToolResult {
        let caller = request.caller.into_caller();
        self.executor.execute(&caller, request.tool_name, request.arguments, request.approved).await
    }
}
