//! The orchestrator's Prometheus metrics, served at `GET /metrics` in the
//! OpenMetrics text format with the SDK's plumbing ([`CallMetrics`]):
//! routed calls by tool and outcome, their durations and the calls in
//! flight, module states, discovery failures, manifest cache hits and
//! misses, cache (Redis) errors and the approvals asked for and decided.
//!
//! Label values come only from the configuration and the modules'
//! manifests, never from what a caller sends: a call to a tool no manifest
//! has is counted under `tool="unknown"`.

use crate::NameMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use module_sdk::service::{
    CallInFlight, CallMetrics, METRICS_CONTENT_TYPE, ToolMetrics, UNKNOWN_TOOL_LABEL, error_response,
};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use crate::auth::Authorized;
use crate::http::AppState;
use crate::registry::{ModuleState, ModuleStatus, Registry};

/// How often the series of gone tools are removed besides at each new
/// generation: a call still holding a gone tool's route may make them again.
pub const RETAIN_EVERY: Duration = Duration::from_secs(60);

/// The label of a per-module series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModuleLabel {
    module: String,
}

/// The labels of the module state gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModuleStateLabels {
    module: String,
    /// `up`, `cached` or `down`.
    state: &'static str,
}

/// A label naming an outcome (`hit`/`miss`, `pending`/`refused`, ...).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

/// A label naming the manifest cache's backend (`memory` or `redis`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CacheLabel {
    cache: &'static str,
}

/// The counters the registry moves: discovery failures, manifest cache
/// lookups and cache errors. Cheap to clone (the clones count together).
#[derive(Clone, Debug, Default)]
pub struct RegistryMetrics {
    discovery_failures: Family<ModuleLabel, Counter>,
    cache_lookups: Family<OutcomeLabel, Counter>,
    cache_errors: Family<CacheLabel, Counter>,
}

impl RegistryMetrics {
    /// Counts a failed discovery of the configured module `module`.
    pub fn discovery_failed(&self, module: &str) {
        self.discovery_failures.get_or_create(&ModuleLabel { module: module.to_owned() }).inc();
    }

    /// Counts a manifest looked up in the cache: found (`hit`) or not.
    pub fn cache_lookup(&self, hit: bool) {
        let outcome = if hit { "hit" } else { "miss" };
        self.cache_lookups.get_or_create(&OutcomeLabel { outcome }).inc();
    }

    /// Counts an operation of the `cache` backend (`memory`, `redis`) that failed.
    pub fn cache_error(&self, cache: &'static str) {
        self.cache_errors.get_or_create(&CacheLabel { cache }).inc();
    }
}

/// Every metric of one orchestrator.
pub struct Metrics {
    calls: CallMetrics,
    /// The call metrics of each tool a manifest has had, by full name.
    tools: RwLock<NameMap<ToolMetrics>>,
    unknown_tool: ToolMetrics,
    module_states: Family<ModuleStateLabels, Gauge>,
    approvals_requested: Family<OutcomeLabel, Counter>,
    approvals_decided: Family<OutcomeLabel, Counter>,
}

impl Metrics {
    /// The metrics of an orchestrator whose registry counts into `registry`.
    pub fn new(registry: &RegistryMetrics) -> Self {
        let mut calls = CallMetrics::new();
        let unknown_tool = calls.tool(UNKNOWN_TOOL_LABEL);
        let module_states = Family::<ModuleStateLabels, Gauge>::default();
        let approvals_requested = Family::<OutcomeLabel, Counter>::default();
        let approvals_decided = Family::<OutcomeLabel, Counter>::default();
        let prometheus = calls.registry_mut();
        prometheus.register(
            "orchestrator_module_state",
            "1 for each configured module's current state (up, cached or down), 0 for the others",
            module_states.clone(),
        );
        prometheus.register(
            "orchestrator_discovery_failures",
            "Failed discoveries of each module",
            registry.discovery_failures.clone(),
        );
        prometheus.register(
            "orchestrator_manifest_cache_lookups",
            "Manifests looked up in the manifest cache, by outcome (hit or miss)",
            registry.cache_lookups.clone(),
        );
        prometheus.register(
            "orchestrator_cache_errors",
            "Failed operations of the manifest cache, by backend (redis or memory)",
            registry.cache_errors.clone(),
        );
        prometheus.register(
            "orchestrator_approvals_requested",
            "Calls that asked for a person's approval, by outcome (pending, refused or error)",
            approvals_requested.clone(),
        );
        prometheus.register(
            "orchestrator_approvals_decided",
            "Decisions on approvals, by outcome (approved, denied, refused or error)",
            approvals_decided.clone(),
        );
        Self { calls, tools: RwLock::default(), unknown_tool, module_states, approvals_requested, approvals_decided }
    }

    /// Starts counting a call of `tool`, a name taken from a module's
    /// manifest (its series are made on its first call), or of a tool that
    /// does not exist (`None`, counted as `tool="unknown"`).
    pub fn start_call(&self, tool: Option<&str>) -> CallInFlight {
        let Some(tool) = tool else { return self.unknown_tool.start() };
        if let Some(metrics) = self.tools.read().unwrap_or_else(|poisoned| poisoned.into_inner()).get(tool) {
            return metrics.start();
        }
        let mut tools = self.tools.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        tools.entry(tool.to_owned()).or_insert_with(|| self.calls.tool(tool)).start()
    }

    /// Removes the series of every tool for which `exists` (given the
    /// `module.tool` name) says false, but the `tools.search` meta-tool's, so
    /// that tools that come and go (a module redeployed without some, an MCP
    /// server renaming its tools) do not grow `/metrics` and memory for ever.
    /// A tool has a bounded set of series, one per outcome ([`CallMetrics::tool`]).
    pub fn retain_tools(&self, exists: impl Fn(&str) -> bool) {
        let mut tools = self.tools.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        tools.retain(|name, _| {
            let kept = exists(name) || crate::tool_search::is_meta_tool(name);
            if !kept {
                self.calls.remove_tool(name);
            }
            kept
        });
    }

    /// Follows `registry`'s generations for as long as it publishes them,
    /// and [removes](Self::retain_tools) the series of the tools each new
    /// snapshot no longer has, also those a call of a just-gone tool made
    /// again meanwhile. It runs in a task of its own, once per generation and
    /// `every` ([`RETAIN_EVERY`]; a call that held a gone tool's route across
    /// the change, waiting for its validator or an approval store, can make
    /// its series again after the pass): a call's cost is unchanged, but for
    /// a wait on its short pass over the tools called so far.
    pub fn spawn_retaining(self: &Arc<Self>, registry: &Arc<Registry>, every: Duration) {
        let (metrics, registry) = (Arc::clone(self), Arc::clone(registry));
        let mut generations = registry.subscribe();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(every);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    changed = generations.changed() => if changed.is_err() { break },
                    _ = every.tick() => {}
                }
                let snapshot = registry.snapshot();
                metrics.retain_tools(|name| snapshot.tool(name).is_some());
            }
        });
    }

    /// Counts a call that asked for approval: `pending`, `refused` (a
    /// budget or access refusal) or `error` (the store failed).
    pub fn approval_requested(&self, outcome: &'static str) {
        self.approvals_requested.get_or_create(&OutcomeLabel { outcome }).inc();
    }

    /// Counts a decision: `approved`, `denied`, `refused` (not pending,
    /// not the caller's, not found) or `error` (the store failed).
    pub fn approval_decided(&self, outcome: &'static str) {
        self.approvals_decided.get_or_create(&OutcomeLabel { outcome }).inc();
    }

    /// Every metric in the OpenMetrics text format, with the module states
    /// of `statuses` (every configured module).
    pub fn encode(&self, statuses: &[ModuleStatus]) -> String {
        const STATES: [(ModuleState, &str); 3] =
            [(ModuleState::Up, "up"), (ModuleState::Cached, "cached"), (ModuleState::Down, "down")];
        for status in statuses {
            for (state, label) in STATES {
                let labels = ModuleStateLabels { module: status.name.clone(), state: label };
                self.module_states.get_or_create(&labels).set(i64::from(status.state == state));
            }
        }
        self.calls.encode()
    }
}

/// `GET /metrics`: for service identities only (the service token, an API
/// key with `user_id = "any"`, or development mode), as the series name
/// every module and tool; `403` for other identities.
#[utoipa::path(get, path = "/metrics", security((), ("bearer" = [])), responses(
    (status = 200, content_type = "application/openmetrics-text", body = String),
    (status = 401, body = module_sdk::contract::ErrorBody, description = "No valid identity"),
    (status = 403, body = module_sdk::contract::ErrorBody, description = "Not a service identity")
))]
pub async fn serve_metrics(Authorized(identity): Authorized, State(state): State<AppState>) -> Response {
    if !identity.is_service() {
        return error_response(
            StatusCode::FORBIDDEN,
            "GET /metrics is for the service token (ORCHESTRATOR_API_TOKEN) or a service API key",
        );
    }
    let orchestrator = &state.orchestrator;
    let text = orchestrator.metrics.encode(&orchestrator.registry.statuses());
    ([(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)], text).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use module_sdk::ErrorKind;

    #[test]
    fn calls_states_and_registry_counters_are_encoded() {
        let registry = RegistryMetrics::default();
        let metrics = Metrics::new(&registry);
        metrics.start_call(Some("files.read")).finish(None);
        metrics.start_call(Some("files.read")).finish(Some(ErrorKind::Timeout));
        metrics.start_call(None).finish(Some(ErrorKind::UnknownTool));
        registry.discovery_failed("files");
        registry.cache_lookup(true);
        registry.cache_lookup(false);
        registry.cache_error("redis");
        metrics.approval_requested("pending");
        metrics.approval_decided("approved");
        let status = ModuleStatus {
            name: "files".into(),
            url: Some("http://127.0.0.1:1".into()),
            state: ModuleState::Cached,
            tool_count: 1,
            last_success: None,
            last_error: None,
        };
        let text = metrics.encode(&[status]);
        for line in [
            r#"tool_calls_total{tool="files.read",outcome="success"} 1"#,
            r#"tool_calls_total{tool="files.read",outcome="timeout"} 1"#,
            r#"tool_calls_total{tool="unknown",outcome="unknown_tool"} 1"#,
            r#"orchestrator_module_state{module="files",state="cached"} 1"#,
            r#"orchestrator_module_state{module="files",state="up"} 0"#,
            r#"orchestrator_discovery_failures_total{module="files"} 1"#,
            r#"orchestrator_manifest_cache_lookups_total{outcome="hit"} 1"#,
            r#"orchestrator_manifest_cache_lookups_total{outcome="miss"} 1"#,
            r#"orchestrator_cache_errors_total{cache="redis"} 1"#,
            r#"orchestrator_approvals_requested_total{outcome="pending"} 1"#,
            r#"orchestrator_approvals_decided_total{outcome="approved"} 1"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing from\n{text}");
        }
    }

    #[test]
    fn the_series_of_tools_gone_are_removed_and_come_back_with_their_tool() {
        let metrics = Metrics::new(&RegistryMetrics::default());
        for tool in ["files.read", "files.old", crate::tool_search::META_TOOL] {
            metrics.start_call(Some(tool)).finish(None);
        }
        metrics.start_call(None).finish(Some(ErrorKind::UnknownTool));
        metrics.retain_tools(|name| name == "files.read");
        let text = metrics.encode(&[]);
        assert!(!text.contains("files.old"), "{text}");
        for kept in ["files.read", crate::tool_search::META_TOOL, UNKNOWN_TOOL_LABEL] {
            assert!(
                text.contains(&format!(r#"tool_calls_total{{tool="{kept}",outcome="success"}}"#)),
                "{kept}: {text}"
            );
        }
        // The tool is back (its module returned): counted from zero again.
        metrics.start_call(Some("files.old")).finish(None);
        assert!(metrics.encode(&[]).contains(r#"tool_calls_total{tool="files.old",outcome="success"} 1"#));
    }

    #[tokio::test]
    async fn series_a_call_made_again_after_its_tool_went_are_removed_without_a_new_generation() {
        use crate::cache::MemoryCache;
        use crate::limits::Budgets;
        let registry = Arc::new(Registry::new(
            &Default::default(),
            Arc::new(MemoryCache::default()),
            reqwest::Client::new(),
            None,
            Duration::from_millis(200),
            Budgets::default(),
        ));
        let metrics = Arc::new(Metrics::new(&RegistryMetrics::default()));
        metrics.spawn_retaining(&registry, Duration::from_millis(20));
        // A call that routed before its tool went, answered after the pass of the change.
        metrics.start_call(Some("files.gone")).finish(None);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while metrics.encode(&[]).contains("files.gone") {
            assert!(std::time::Instant::now() < deadline, "the gone tool's series stayed");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
