//! The orchestrator assembled from its configuration: one HTTP client, the
//! manifest cache, the registry of modules, the executor, the identities
//! and the approvals, shared by the HTTP API and the command line.

use std::sync::Arc;

use axum::body::Bytes;
use module_sdk::ErrorKind;
use module_sdk::contract::ToolResult;
use serde_json::{Map, Value};

use crate::approvals::store::StoreError;
use crate::approvals::{Approval, ApprovalError, Approvals, ProviderCall, pending_result};
use crate::cache::{CacheError, ManifestCache, MemoryCache};
use crate::call_answer::CallAnswer;
use crate::caller::Caller;
use crate::config::Config;
use crate::execute::{CallArguments, ExecuteRequest, Executor};
use crate::identity::{AccessError, Identities, Identity};
use crate::listing_cache::{ListingCache, ListingKey, ListingVariant};
use crate::mcp_modules::McpServers;
use crate::mcp_modules::http_client::{ClientBuildError, shared_client};
use crate::metrics::Metrics;
use crate::module_client::{InvalidToken, MODULE_IDLE_TIMEOUT, ModuleClient};
use crate::providers::{ConvertedCache, Listed, ToolFormat};
use crate::redis_cache::RedisCache;
use crate::registry::{Registry, RouteError, ToolRoute};
use crate::tls::TlsSetupError;
use crate::tool_search::ToolSearch;

/// Why the orchestrator could not be put together.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The TLS client configuration could not be made.
    #[error(transparent)]
    Tls(#[from] TlsSetupError),
    /// The HTTP client could not be created (TLS set-up).
    #[error("cannot create the HTTP client: {0}")]
    Client(#[from] reqwest::Error),
    /// The HTTP client of MCP servers could not be created.
    #[error(transparent)]
    McpClient(#[from] ClientBuildError),
    /// `SERVICE_AUTH_TOKEN` cannot be sent to modules.
    #[error(transparent)]
    ServiceToken(#[from] InvalidToken),
    /// `REDIS_URL` could not be used.
    #[error("cannot use REDIS_URL: {0}")]
    Cache(#[from] CacheError),
    /// The approval store could not be created from `REDIS_URL`.
    #[error("cannot keep approvals in REDIS_URL: {0}")]
    Approvals(#[from] StoreError),
    /// The revoked API keys could not be read from `REDIS_URL`.
    #[error(transparent)]
    Revocations(#[from] crate::identity::revocations::RevocationError),
}

/// What became of one call: its result, and the approval it waits for.
#[derive(Debug, Clone)]
pub struct CallOutcome {
    /// The ToolResult (for a pending call, the one telling the model to wait).
    pub result: ToolResult,
    /// The pending approval the call became, if it needs one.
    pub pending: Option<Approval>,
}

/// Everything a running orchestrator holds.
pub struct Orchestrator {
    /// The settings it was built from.
    pub config: Arc<Config>,
    /// The modules and their manifests.
    pub registry: Arc<Registry>,
    /// Routes calls to modules.
    pub executor: Executor,
    /// Who may call: the service token, API keys and JWTs.
    pub identities: Identities,
    /// Pending and decided approvals.
    pub approvals: Approvals,
    /// What `GET /metrics` serves.
    pub metrics: Arc<Metrics>,
    /// Tool definitions already converted to provider formats.
    converted: ConvertedCache,
    /// Whole listing answers, ready to send.
    listings: ListingCache,
    /// The search index of the tools and the `tools__search` meta-tool.
    pub tool_search: ToolSearch,
}

impl Orchestrator {
    /// Builds an orchestrator from `config`; nothing is contacted yet.
    pub fn new(config: Config) -> Result<Self, BuildError> {
        let config = Arc::new(config);
        // A pooled client for discovery; routed calls go through
        // the lighter `ModuleClient`, MCP servers over HTTP through rmcp's own
        // reqwest (`mcp_modules::http_client`). Modules are internal services:
        // none of these sends their traffic through a proxy. Idle connections
        // are dropped sooner than any module drops them (see MODULE_IDLE_TIMEOUT).
        // All of them trust the same roots: Mozilla's and TLS_EXTRA_ROOTS.
        // Discovery follows no redirect: a module's /manifest answering 302
        // would otherwise make the orchestrator fetch any address it names.
        let tls = crate::tls::client_config(&config.tls_extra_roots)?;
        let client = reqwest::Client::builder()
            .use_preconfigured_tls(tls.clone())
            .no_proxy()
            .pool_idle_timeout(MODULE_IDLE_TIMEOUT)
            .pool_max_idle_per_host(config.budgets.max_concurrent_calls_per_module)
            .redirect(reqwest::redirect::Policy::none())
            .tcp_nodelay(true)
            .http1_only()
            .build()?;
        let jwks = (crate::identity::jwt::jwks_client(tls.clone())?, config.discovery_timeout);
        let cache: Arc<dyn ManifestCache> = match &config.redis_url {
            Some(url) => Arc::new(RedisCache::new(url, config.budgets.max_manifest_bytes)?),
            None => Arc::new(MemoryCache::default()),
        };
        let registry = Arc::new(
            Registry::new(
                &config.module_services,
                cache,
                client,
                config.service_auth_token.clone(),
                config.discovery_timeout,
                config.budgets,
            )
            .with_mcp_servers(McpServers::new(
                &config.mcp_servers,
                &config.budgets,
                config.discovery_timeout,
                &shared_client(tls.clone())?,
            )),
        );
        let metrics = Arc::new(Metrics::new(registry.metrics()));
        let module_client = ModuleClient::new(
            config.budgets.max_concurrent_calls_per_module,
            config.service_auth_token.as_deref(),
            config.serving_threads,
            tls,
        )?;
        let executor = Executor::new(Arc::clone(&registry), module_client, Arc::clone(&config), Arc::clone(&metrics));
        let identities =
            Identities::new(config.api_token.clone(), &config.identities, config.redis_url.as_deref(), jwks)?;
        let approvals = Approvals::new(config.redis_url.as_deref(), config.approvals.clone())?;
        let listings = ListingCache::new(config.budgets.listing_cache_bytes);
        let converted = ConvertedCache::with_threads(config.budgets.listing_threads);
        let tool_search = ToolSearch::new(config.tool_search);
        Ok(Self { config, registry, executor, identities, approvals, metrics, converted, listings, tool_search })
    }

    /// Loads what identities need before requests arrive (the JWKS, fetched
    /// within `DISCOVERY_TIMEOUT`).
    pub async fn start_identities(&self) -> Result<(), crate::identity::jwt::JwtError> {
        self.identities.start().await
    }

    /// The tools `caller` may use, in `format` (`raw`: the manifest form, each
    /// tool with its `input_schema`).
    pub fn render_tools(&self, caller: &Caller, format: ToolFormat) -> Value {
        let snapshot = self.registry.snapshot();
        let tools: Vec<Listed> = snapshot.tools_for(caller).map(|found| found.listed()).collect();
        self.converted.render_tools(format, &tools)
    }

    /// [`Self::render_tools`] as JSON text, ready to send: made once per
    /// registry generation, caller (permission, modules) and format, then
    /// served from the listing cache (`LISTING_CACHE_BYTES`).
    pub fn render_tools_json(&self, caller: &Caller, format: ToolFormat) -> Bytes {
        self.render_listing(caller, format, ListingVariant::default())
    }

    /// [`Self::render_tools_json`] in a `variant` (e.g. with the `tools__search` meta-tool last).
    pub fn render_listing(&self, caller: &Caller, format: ToolFormat, variant: ListingVariant) -> Bytes {
        let snapshot = self.registry.snapshot();
        let key = ListingKey::new(snapshot.generation(), caller, format, variant);
        if let Some(answer) = self.listings.get(&key) {
            return answer;
        }
        let mut tools: Vec<Listed> = snapshot.tools_for(caller).map(|found| found.listed()).collect();
        if variant.with_search_tool {
            tools.push(self.tool_search.meta_tool().into());
        }
        let answer = Bytes::from(self.converted.render_tools_json(format, &tools));
        if self.listings.insert(key, answer.clone()) {
            // A new generation: conversions of tools gone from the registry go too.
            self.converted.retain_tools(|name| snapshot.tool(name).is_some());
        }
        answer
    }

    /// Runs one `POST /execute` request of `identity`.
    pub async fn execute(&self, identity: &Identity, request: ExecuteRequest<'_>) -> Result<ToolResult, AccessError> {
        Ok(self.execute_answer(identity, request).await?.into_result())
    }

    /// [`Self::execute`], a module's valid answer kept as the bytes it sent,
    /// to be passed on as they are.
    pub async fn execute_answer(
        &self,
        identity: &Identity,
        request: ExecuteRequest<'_>,
    ) -> Result<CallAnswer, AccessError> {
        let caller = identity.caller(request.caller)?;
        if !crate::tool_search::is_meta_tool(&request.tool_name) {
            let route = self.route_for(identity, &request.tool_name);
            if let Some(approved) = self.straight_to_module(identity, &caller, &route, request.approved) {
                let (name, arguments) = (request.tool_name, request.arguments);
                return Ok(self.executor.execute_answer(&caller, route, name, arguments, approved).await);
            }
        }
        // Boxed: this path's future (approvals, the store) is large, and the direct path's would carry its size.
        let arguments = request.arguments.into_tree();
        let outcome =
            Box::pin(self.call(identity, &caller, request.tool_name, arguments, request.approved, None)).await;
        Ok(outcome.result.into())
    }

    /// Where `identity`'s call of `tool_name` goes; why a module was not
    /// reached (its discovery error, which may name its internal address)
    /// only for those who may see that at `GET /modules`.
    fn route_for(&self, identity: &Identity, tool_name: &str) -> Result<ToolRoute, RouteError> {
        let route = self.executor.route(tool_name);
        if identity.is_operator() { route } else { route.map_err(RouteError::without_internals) }
    }

    /// Whether a call routed by `route` goes straight to its module (it needs
    /// no approval, or is approved by a service identity), and then whether
    /// it counts as approved.
    fn straight_to_module(
        &self,
        identity: &Identity,
        caller: &Caller,
        route: &Result<ToolRoute, RouteError>,
        approved: bool,
    ) -> Option<bool> {
        let approved = approved && identity.is_service();
        let awaits = route.as_ref().is_ok_and(|route| self.executor.route_awaits_approval(caller, route));
        (approved || !awaits).then_some(approved)
    }

    /// Runs one call of `caller`, or stores it as a pending approval when
    /// its tool needs one. `approved` counts only from a service identity
    /// (development mode, the service token, `user_id = "any"` keys);
    /// `provider_call` is the model's call it came from, if any.
    pub async fn call(
        &self,
        identity: &Identity,
        caller: &Caller,
        tool_name: String,
        mut arguments: Map<String, Value>,
        approved: bool,
        provider_call: Option<ProviderCall>,
    ) -> CallOutcome {
        if crate::tool_search::is_meta_tool(&tool_name) {
            // Answered here: the caller's own tools, in the format of the model's message (raw for /execute).
            let format = provider_call.as_ref().and_then(|call| call.format.parse().ok());
            let format = format.map_or(ToolFormat::Raw, crate::tool_search::format_for_calls);
            let in_flight = self.metrics.start_call(Some(crate::tool_search::META_TOOL));
            let result = self.tool_search.call(&self.registry.snapshot(), caller, tool_name, &arguments, format);
            in_flight.finish(result.error_kind);
            return CallOutcome { result, pending: None };
        }
        let route = self.route_for(identity, &tool_name);
        if let Some(approved) = self.straight_to_module(identity, caller, &route, approved) {
            let arguments = CallArguments::Tree(arguments);
            let answer = self.executor.execute_answer(caller, route, tool_name, arguments, approved).await;
            return CallOutcome { result: answer.into_result(), pending: None };
        }
        // Arguments that would fail anyway are refused now, not after a person approved them.
        if let Some(result) = self.executor.argument_refusal(&tool_name, &mut arguments).await {
            // Counted as the executor counts a call it refuses for its arguments.
            self.metrics.start_call(Some(&tool_name)).finish(result.error_kind);
            return CallOutcome { result, pending: None };
        }
        match self.approvals.request(identity, caller, &tool_name, arguments, provider_call).await {
            Ok(approval) => {
                self.metrics.approval_requested("pending");
                CallOutcome { result: pending_result(&approval), pending: Some(approval) }
            }
            Err(error) => {
                let (kind, outcome) = match error {
                    ApprovalError::Store(_) => (ErrorKind::Unavailable, "error"),
                    _ => (ErrorKind::PermissionDenied, "refused"),
                };
                self.metrics.approval_requested(outcome);
                CallOutcome { result: ToolResult::failure(tool_name, kind, error.to_string()), pending: None }
            }
        }
    }
}
