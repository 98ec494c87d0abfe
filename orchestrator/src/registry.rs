//! What the orchestrator knows about its modules: each one's checked
//! manifest and health, the permission-filtered tool list, and the route of
//! a tool name to its module.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use module_sdk::contract::ModuleManifest;
use serde::Serialize;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::sync::watch;

use crate::cache::ManifestCache;
use crate::discovery::{DiscoveryError, fetch_manifest, keep_discovered};
use crate::limits::Budgets;
use crate::manifest::{ManifestError, validate};
use crate::mcp_modules::McpServers;
use crate::metrics::RegistryMetrics;

pub use crate::snapshot::{ModuleSnapshot, ModuleState, RouteError, Snapshot, ToolRef, ToolRoute};

/// One module as `GET /modules` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ModuleStatus {
    /// The configured name.
    pub name: String,
    /// The configured base URL (shown to admins, owners and services only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Up, cached or down.
    pub state: ModuleState,
    /// How many tools its manifest lists (0 when down).
    pub tool_count: usize,
    /// When its manifest was last fetched successfully by this process (RFC 3339).
    pub last_success: Option<String>,
    /// Why the last discovery failed, when it did; and which of its tools
    /// the provider formats leave out because another module's tool would
    /// have the same provider-safe name (shown to admins, owners and
    /// services only: it may name internal addresses).
    pub last_error: Option<String>,
}

impl ModuleStatus {
    /// The status without what only operators see: the URL and the last error.
    pub fn without_internals(self) -> Self {
        Self { url: None, last_error: None, ..self }
    }
}

/// What is known of one configured module.
#[derive(Debug, Default)]
struct Record {
    manifest: Option<Arc<ModuleManifest>>,
    answered: bool,
    last_success: Option<OffsetDateTime>,
    last_error: Option<String>,
}

impl Record {
    fn state(&self) -> ModuleState {
        match (&self.manifest, self.answered) {
            (Some(_), true) => ModuleState::Up,
            (Some(_), false) => ModuleState::Cached,
            (None, _) => ModuleState::Down,
        }
    }

    /// Takes `manifest` as the module's, keeping the `Arc` it has when the
    /// two are equal, so an unchanged refresh publishes no new generation.
    fn set_manifest(&mut self, manifest: ModuleManifest) {
        if self.manifest.as_deref() != Some(&manifest) {
            self.manifest = Some(Arc::new(manifest));
        }
    }
}

#[derive(Debug)]
struct Slot {
    name: Arc<str>,
    url: Arc<str>,
    execute_url: Arc<str>,
    record: RwLock<Record>,
    /// How many discoveries of this module have started: each one's number.
    fetches_started: AtomicU64,
    /// The numbers of the newest discoveries whose outcomes were taken; held
    /// while an outcome is taken (cached and recorded) or a cached manifest
    /// adopted, so an older fetch that ends after a newer one cannot put its
    /// manifest back.
    taken: tokio::sync::Mutex<Taken>,
}

/// The numbers of the newest discoveries of one module whose outcomes were taken.
#[derive(Debug, Default)]
struct Taken {
    /// The newest outcome, a success or a failure.
    outcome: u64,
    /// The newest success.
    success: u64,
}

impl Taken {
    /// Whether discovery `number`'s outcome is news: a success newer than
    /// the newest success (a newer failure only says the module did not
    /// answer that time), a failure newer than every outcome. Records it when it is.
    fn take(&mut self, number: u64, succeeded: bool) -> bool {
        let newest = if succeeded { self.success } else { self.outcome };
        if number < newest {
            return false;
        }
        self.outcome = self.outcome.max(number);
        if succeeded {
            self.success = number;
        }
        true
    }
}

impl Slot {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Record> {
        self.record.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Record> {
        self.record.write().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The configured modules and what discovery has learnt about them,
/// published as an immutable [`Snapshot`] per change ([`Self::snapshot`],
/// [`Self::subscribe`]).
pub struct Registry {
    modules: BTreeMap<String, Slot>,
    /// The current snapshot; replaced whole, never changed in place.
    snapshot: ArcSwap<Snapshot>,
    /// Serializes publishing, so generations follow the order of changes.
    publishing: Mutex<()>,
    /// Held while [`Self::discover_all`] runs a round.
    discovering_all: tokio::sync::Mutex<()>,
    /// How many rounds of [`Self::discover_all`] have started.
    rounds_started: AtomicU64,
    /// The number of the last round of [`Self::discover_all`] that ended
    /// (one cut short, its caller gone, is not counted).
    last_round_ended: AtomicU64,
    /// The current generation, for subscribers.
    generation: watch::Sender<u64>,
    cache: Arc<dyn ManifestCache>,
    client: reqwest::Client,
    service_token: Option<String>,
    discovery_timeout: Duration,
    budgets: Budgets,
    metrics: RegistryMetrics,
    /// The modules that are MCP servers, discovered and called over MCP.
    mcp: McpServers,
}

impl Registry {
    /// A registry of `modules` (name -> base URL), none discovered yet,
    /// whose manifests must stay within `budgets`.
    pub fn new(
        modules: &BTreeMap<String, String>,
        cache: Arc<dyn ManifestCache>,
        client: reqwest::Client,
        service_token: Option<String>,
        discovery_timeout: Duration,
        budgets: Budgets,
    ) -> Self {
        let modules = modules
            .iter()
            .map(|(name, url)| {
                let slot = Slot {
                    name: Arc::from(name.as_str()),
                    url: Arc::from(url.as_str()),
                    execute_url: Arc::from(format!("{url}/execute")),
                    record: RwLock::default(),
                    fetches_started: AtomicU64::new(0),
                    taken: tokio::sync::Mutex::default(),
                };
                (name.clone(), slot)
            })
            .collect();
        let registry = Self {
            modules,
            snapshot: ArcSwap::from_pointee(Snapshot::default()),
            publishing: Mutex::new(()),
            discovering_all: tokio::sync::Mutex::new(()),
            rounds_started: AtomicU64::new(0),
            last_round_ended: AtomicU64::new(0),
            generation: watch::Sender::new(0),
            cache,
            client,
            service_token,
            discovery_timeout,
            budgets,
            metrics: RegistryMetrics::default(),
            mcp: McpServers::default(),
        };
        registry.publish();
        registry
    }

    /// The current snapshot of every module's state and manifest: cheap (a
    /// reference count), lock-free, and never changed afterwards, so one
    /// request that reads it sees one generation throughout.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.load_full()
    }

    /// The generation of every snapshot published from now on (a manifest
    /// changed, a module went down or came back); e.g. to tell MCP clients
    /// `notifications/tools/list_changed`, or to rebuild an index.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// Publishes a snapshot of the records as they are, with the next
    /// generation, when a manifest or a state differs from the current one.
    fn publish(&self) {
        let _publishing = self.publishing.lock().unwrap_or_else(PoisonError::into_inner);
        let modules = self
            .modules
            .iter()
            .map(|(name, slot)| {
                let record = slot.read();
                let module = ModuleSnapshot {
                    name: Arc::clone(&slot.name),
                    url: Arc::clone(&slot.url),
                    execute_url: Arc::clone(&slot.execute_url),
                    state: record.state(),
                    manifest: record.manifest.clone(),
                };
                (name.clone(), module)
            })
            .collect();
        let current = self.snapshot.load();
        let Some(next) = current.successor(modules) else { return };
        for clash in next.clashes().iter().filter(|clash| !current.clashes().contains(clash)) {
            tracing::warn!(tools = ?clash.tools, "{clash}");
        }
        let generation = next.generation();
        self.snapshot.store(Arc::new(next));
        self.generation.send_replace(generation);
        tracing::debug!(generation, "registry snapshot published");
    }

    /// The counters of discoveries and manifest cache use (served by `GET /metrics`).
    pub fn metrics(&self) -> &RegistryMetrics {
        &self.metrics
    }

    /// `manifest`, sent or cached for module `name`, checked within this
    /// registry's budgets on a blocking thread: walking a large manifest's
    /// schemas (up to their budgets) may take a while, which no thread
    /// serving requests should wait for.
    async fn check(&self, name: &str, manifest: ModuleManifest) -> Result<ModuleManifest, ManifestError> {
        let (name, budgets) = (name.to_owned(), self.budgets);
        tokio::task::spawn_blocking(move || validate(&name, manifest, &budgets))
            .await
            .unwrap_or_else(|error| std::panic::resume_unwind(error.into_panic()))
    }

    /// `memory` or `redis`.
    pub fn cache_kind(&self) -> &'static str {
        self.cache.kind()
    }

    /// Fills every module that has no manifest yet from the cache, so its
    /// tools are listed before it answers.
    pub async fn load_cached(&self) {
        futures::future::join_all(self.modules.keys().map(|name| self.load_from_cache(name))).await;
    }

    async fn load_from_cache(&self, name: &str) {
        let slot = &self.modules[name];
        if slot.read().manifest.is_some() {
            return;
        }
        let loaded = self.cache.load(name).await;
        self.count_lookup(&loaded);
        match loaded {
            Ok(Some(manifest)) => match self.check(name, manifest).await {
                Ok(manifest) => {
                    tracing::info!(
                        module = name,
                        tools = manifest.tools.len(),
                        cache = self.cache.kind(),
                        "manifest loaded from cache"
                    );
                    slot.write().manifest.get_or_insert_with(|| Arc::new(manifest));
                    self.publish();
                }
                Err(error) => tracing::warn!(module = name, %error, "cached manifest rejected"),
            },
            Ok(None) => {}
            Err(error) => tracing::warn!(module = name, %error, "cannot read the manifest cache"),
        }
    }

    /// Fetches, checks and caches `name`'s manifest; when it cannot be
    /// fetched the module keeps the manifest it had (or gets one from the
    /// cache), when the module answers with one that is refused it has none
    /// (it is down until it sends one that passes); the error is recorded. Of discoveries of one module that overlap (the periodic
    /// one, `POST /refresh-tools`, an MCP server's change notice), the
    /// outcome of the one started last wins whichever ends last.
    pub async fn discover(&self, name: &str) -> Result<(), DiscoveryError> {
        let Some(slot) = self.modules.get(name) else {
            return Err(DiscoveryError::NotConfigured(name.to_owned()));
        };
        let number = slot.fetches_started.fetch_add(1, Ordering::Relaxed) + 1;
        let started = Instant::now();
        // An MCP server's names of its tools, used only with the manifest they came with.
        let mut listed = None;
        let fetched = match self.mcp.get(name) {
            Some(server) => server.fetch_manifest(&slot.url, self.discovery_timeout).await.map(|(manifest, names)| {
                listed = Some((server, names));
                manifest
            }),
            None => {
                let token = self.service_token.as_deref();
                fetch_manifest(&self.client, &slot.url, token, self.discovery_timeout, self.budgets.max_manifest_bytes)
                    .await
            }
        };
        let checked = match fetched {
            Ok(manifest) => self.check(name, manifest).await.map_err(DiscoveryError::from),
            Err(error) => Err(error),
        };
        let mut taken = slot.taken.lock().await;
        if !taken.take(number, checked.is_ok()) {
            tracing::debug!(module = name, "a discovery started later has ended first; this one's outcome is dropped");
            return checked.map(drop);
        }
        match checked {
            Ok(manifest) => {
                tracing::info!(
                    module = name,
                    tools = manifest.tools.len(),
                    duration_ms = started.elapsed().as_secs_f64() * 1000.0,
                    "module discovered"
                );
                if let Err(error) = self.cache.store(&manifest).await {
                    self.metrics.cache_error(self.cache.kind());
                    tracing::warn!(module = name, %error, "manifest not cached; serving it from memory");
                }
                if let Some((server, names)) = listed {
                    server.use_names(names);
                }
                {
                    let mut record = slot.write();
                    record.set_manifest(manifest);
                    record.answered = true;
                    record.last_success = Some(OffsetDateTime::now_utc());
                    record.last_error = None;
                }
                self.publish();
                Ok(())
            }
            Err(error) => {
                self.metrics.discovery_failed(name);
                tracing::warn!(module = name, url = %slot.url, %error, "module discovery failed; will retry");
                let refused = error.is_refusal();
                {
                    let mut record = slot.write();
                    record.answered = false;
                    record.last_error = Some(error.to_string());
                    if refused {
                        record.manifest = None;
                    }
                }
                self.publish();
                drop(taken);
                // Another replica may have reached it and cached its manifest;
                // not when it answered with a refused one (the cache holds its
                // previous manifest).
                if !refused {
                    self.load_from_cache(name).await;
                }
                Err(error)
            }
        }
    }

    /// A periodic refresh of `name` on a cache shared by replicas: only the
    /// replica whose claim on the module succeeds fetches its manifest,
    /// once per `lease`; the others take the manifest it cached. Fetches
    /// itself when the claim cannot be checked or nothing is cached, and
    /// releases its claim when its own discovery fails, so the others do
    /// not go on trusting the cache (README "Replicas").
    pub async fn refresh_shared(&self, name: &str, lease: Duration) -> Result<(), DiscoveryError> {
        match self.cache.claim_discovery(name, lease).await {
            Ok(true) => {}
            Ok(false) => {
                if self.adopt_cached(name).await {
                    return Ok(());
                }
            }
            Err(error) => {
                self.metrics.cache_error(self.cache.kind());
                tracing::warn!(module = name, %error, "cannot claim the discovery; discovering anyway");
            }
        }
        let outcome = self.discover(name).await;
        if outcome.is_err()
            && let Err(error) = self.cache.release_discovery(name).await
        {
            self.metrics.cache_error(self.cache.kind());
            tracing::warn!(module = name, %error, "cannot release the discovery claim");
        }
        outcome
    }

    /// Replaces `name`'s manifest with the cached one, which another replica
    /// fetched within its claim; `false` when there is none to take.
    async fn adopt_cached(&self, name: &str) -> bool {
        let Some(slot) = self.modules.get(name) else { return false };
        // Not while a discovery of this process is taking its outcome.
        let _taken = slot.taken.lock().await;
        let loaded = self.cache.load(name).await;
        self.count_lookup(&loaded);
        let cached = match loaded {
            Ok(Some(manifest)) => self.check(name, manifest).await,
            Ok(None) => return false,
            Err(error) => {
                tracing::warn!(module = name, %error, "cannot read the manifest cache");
                return false;
            }
        };
        match cached {
            Ok(manifest) => {
                tracing::debug!(module = name, tools = manifest.tools.len(), "manifest taken from another replica");
                slot.write().set_manifest(manifest);
                self.publish();
                true
            }
            Err(error) => {
                tracing::warn!(module = name, %error, "cached manifest rejected");
                false
            }
        }
    }

    /// Counts a manifest cache lookup's outcome: a hit, a miss or an error.
    fn count_lookup<T, E>(&self, loaded: &Result<Option<T>, E>) {
        match loaded {
            Ok(found) => self.metrics.cache_lookup(found.is_some()),
            Err(_) => self.metrics.cache_error(self.cache.kind()),
        }
    }

    /// Discovers every module at once, each within the discovery timeout.
    /// Its answer always comes from a round started after it was called (a
    /// module deployed just before sees its new manifest); calls made while
    /// a round runs wait for it and then share one round of their own, so a
    /// burst of refreshes costs each module at most two manifest fetches.
    /// (A round cut short, its caller gone, counts as none: the next waiting
    /// call runs its own.)
    pub async fn discover_all(&self) {
        let started_before = self.rounds_started.load(Ordering::Acquire);
        let _round = self.discovering_all.lock().await;
        if self.last_round_ended.load(Ordering::Acquire) > started_before {
            return;
        }
        let round = self.rounds_started.fetch_add(1, Ordering::AcqRel) + 1;
        futures::future::join_all(self.modules.keys().map(|name| self.discover(name))).await;
        self.last_round_ended.store(round, Ordering::Release);
    }

    /// Starts one background task per module that keeps it discovered
    /// (see [`keep_discovered`]); they stop with the runtime.
    pub fn spawn_discovery(self: &Arc<Self>, refresh: Duration) {
        for name in self.modules.keys() {
            tokio::spawn(keep_discovered(Arc::clone(self), name.clone(), refresh));
        }
        McpServers::follow_list_changes(self);
    }

    /// The registry with `servers`, the modules of it that are MCP servers.
    pub fn with_mcp_servers(mut self, servers: McpServers) -> Self {
        self.mcp = servers;
        self
    }

    /// The modules that are MCP servers.
    pub fn mcp_servers(&self) -> &McpServers {
        &self.mcp
    }

    /// Every module's state, by name.
    pub fn statuses(&self) -> Vec<ModuleStatus> {
        let snapshot = self.snapshot();
        self.modules
            .iter()
            .map(|(name, slot)| {
                let record = slot.read();
                // A clash of its tools' provider-safe names is a discovery problem too.
                let clashes = snapshot.clashes().iter().filter(|clash| {
                    clash.tools.iter().any(|tool| tool.split_once('.').is_some_and(|(module, _)| module == name))
                });
                let problems: Vec<String> =
                    record.last_error.iter().cloned().chain(clashes.map(ToString::to_string)).collect();
                ModuleStatus {
                    name: name.clone(),
                    url: Some(slot.url.to_string()),
                    state: record.state(),
                    tool_count: record.manifest.as_ref().map_or(0, |m| m.tools.len()),
                    last_success: record.last_success.and_then(|t| t.replace_nanosecond(0).ok()?.format(&Rfc3339).ok()),
                    last_error: (!problems.is_empty()).then(|| problems.join("; ")),
                }
            })
            .collect()
    }

    /// Where `tool_name` (`module.tool`) is served, in the current snapshot.
    pub fn route(&self, tool_name: &str) -> Result<ToolRoute, RouteError> {
        self.snapshot().route(tool_name).map_err(|error| match error {
            RouteError::NotDiscovered { module, .. } => {
                let reason = self.modules.get(&module).and_then(|slot| slot.read().last_error.clone());
                RouteError::NotDiscovered {
                    module,
                    reason: reason.unwrap_or_else(|| "discovery has not finished".into()),
                }
            }
            other => other,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::MemoryCache;
    use crate::caller::Caller;
    use module_sdk::Permission;
    use serde_json::json;

    fn manifest(module: &str, tools: &[(&str, &str)]) -> ModuleManifest {
        serde_json::from_value(json!({
            "module_name": module,
            "description": "A module.",
            "tools": tools.iter().map(|(name, permission)| json!({
                "name": format!("{module}.{name}"),
                "description": "A tool.",
                "parameters": [],
                "required_permission": permission
            })).collect::<Vec<_>>()
        }))
        .unwrap()
    }

    /// A registry whose modules are unreachable, filled from a warm cache.
    async fn warm_registry() -> Registry {
        let cached = [
            manifest("files", &[("read", "guest"), ("delete", "admin")]),
            manifest("notes", &[("add", "user")]),
            manifest("stray", &[("x", "guest")]),
        ];
        registry_from_cache(&cached, &[("files", 1), ("notes", 2), ("empty", 3)]).await
    }

    /// A registry of `modules` (each at an unreachable port of loopback),
    /// filled from a warm cache of the `cached` manifests.
    async fn registry_from_cache(cached: &[ModuleManifest], modules: &[(&str, u16)]) -> Registry {
        let cache = Arc::new(MemoryCache::default());
        for manifest in cached {
            cache.store(manifest).await.unwrap();
        }
        let modules: BTreeMap<String, String> =
            modules.iter().map(|(name, port)| ((*name).to_owned(), format!("http://127.0.0.1:{port}"))).collect();
        let registry = Registry::new(
            &modules,
            cache,
            reqwest::Client::new(),
            None,
            Duration::from_millis(200),
            Budgets::default(),
        );
        registry.load_cached().await;
        registry
    }

    #[tokio::test]
    async fn a_warm_cache_lists_tools_filtered_by_permission_and_module() {
        let registry = warm_registry().await;
        let snapshot = registry.snapshot();
        let names = |caller: Caller| snapshot.tools_for(&caller).map(|t| t.tool.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(Caller::new(None, None)), ["files.read"]);
        assert_eq!(names(Caller::new(Some("user"), None)), ["files.read", "notes.add"]);
        assert_eq!(names(Caller::new(Some("owner"), Some(vec!["files".into()]))), ["files.read", "files.delete"]);
        let states: Vec<_> = registry.statuses().into_iter().map(|s| (s.name, s.state, s.tool_count)).collect();
        assert_eq!(
            states,
            [
                ("empty".into(), ModuleState::Down, 0),
                ("files".into(), ModuleState::Cached, 2),
                ("notes".into(), ModuleState::Cached, 1)
            ]
        );
    }

    #[tokio::test]
    async fn routes_name_what_is_wrong() {
        let registry = warm_registry().await;
        let route = registry.route("files.delete").unwrap();
        assert_eq!((&*route.module, route.tool().required_permission), ("files", Permission::Admin));
        assert!(matches!(registry.route("files"), Err(RouteError::BadName(_))));
        assert!(matches!(registry.route("stray.x"), Err(RouteError::UnknownModule { .. })));
        assert!(matches!(registry.route("empty.x"), Err(RouteError::NotDiscovered { .. })));
        // The tools a caller may use instead are the refusal's to name (execute.rs).
        let error = registry.route("files.write").unwrap_err().to_string();
        assert_eq!(error, "module `files` has no tool `files.write`");
    }

    #[tokio::test]
    async fn a_failed_discovery_keeps_the_cached_manifest_and_records_why() {
        let registry = warm_registry().await;
        assert!(registry.discover("files").await.is_err());
        let files = registry.statuses().into_iter().find(|s| s.name == "files").unwrap();
        assert_eq!(files.state, ModuleState::Cached);
        assert!(files.last_error.unwrap().contains("127.0.0.1:1"));
    }

    #[tokio::test]
    async fn tools_of_two_modules_that_meet_as_one_provider_name_are_a_problem_of_both() {
        let cached = [manifest("x__y", &[("z", "guest")]), manifest("x", &[("y__z", "guest"), ("other", "guest")])];
        let registry = registry_from_cache(&cached, &[("x", 1), ("x__y", 1)]).await;
        let snapshot = registry.snapshot();
        assert_eq!(snapshot.clashes().len(), 1);
        assert_eq!(snapshot.clashes()[0].tools, ["x.y__z", "x__y.z"]);
        for status in registry.statuses() {
            let error = status.last_error.unwrap_or_default();
            assert!(error.contains("`x.y__z` and `x__y.z` would both be `x__y__z`"), "{}: {error}", status.name);
        }
        // Both stay callable by their own names.
        assert_eq!(&*registry.route("x__y.z").unwrap().module, "x__y");
        assert_eq!(&*registry.route("x.y__z").unwrap().module, "x");
    }

    #[tokio::test]
    async fn every_change_publishes_a_new_generation_and_nothing_else_does() {
        let registry = warm_registry().await;
        let mut generations = registry.subscribe();
        let warm = registry.snapshot();
        assert!(warm.generation() > 0);
        assert_eq!(*generations.borrow_and_update(), warm.generation());
        // Failing again, with the same cached manifest, changes nothing.
        assert!(registry.discover("files").await.is_err());
        assert_eq!(registry.snapshot().generation(), warm.generation());
        assert!(!generations.has_changed().unwrap());
        // The cache's manifest changes and is adopted: a new generation, the old snapshot untouched.
        registry.cache.store(&manifest("files", &[("read", "guest")])).await.unwrap();
        assert!(registry.adopt_cached("files").await);
        let changed = registry.snapshot();
        assert_eq!(changed.generation(), warm.generation() + 1);
        assert!(generations.has_changed().unwrap());
        let names = |snapshot: &Snapshot| {
            snapshot.tools_for(&Caller::new(Some("owner"), None)).map(|t| t.tool.name.clone()).collect::<Vec<_>>()
        };
        assert_eq!(names(&warm), ["files.read", "files.delete", "notes.add"]);
        assert_eq!(names(&changed), ["files.read", "notes.add"]);
        // Adopting an equal manifest keeps the generation.
        assert!(registry.adopt_cached("files").await);
        assert_eq!(registry.snapshot().generation(), changed.generation());
    }

    #[tokio::test]
    async fn of_two_overlapping_discoveries_the_one_started_last_wins() {
        use std::sync::atomic::AtomicUsize;
        // The first fetch of /manifest is answered late with the old tools,
        // the second at once with the new ones.
        let fetches = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&fetches);
        let app = axum::Router::new().route(
            "/manifest",
            axum::routing::get(move || {
                let counted = Arc::clone(&counted);
                async move {
                    if counted.fetch_add(1, Ordering::SeqCst) == 0 {
                        tokio::time::sleep(Duration::from_millis(400)).await;
                        return axum::Json(manifest("files", &[("read", "guest"), ("delete", "admin")]));
                    }
                    axum::Json(manifest("files", &[("read", "guest")]))
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        let cache = Arc::new(MemoryCache::default());
        let modules = BTreeMap::from([("files".to_owned(), url)]);
        let registry = Arc::new(Registry::new(
            &modules,
            cache.clone(),
            reqwest::Client::new(),
            None,
            Duration::from_secs(5),
            Budgets::default(),
        ));
        let older = tokio::spawn({
            let registry = Arc::clone(&registry);
            async move { registry.discover("files").await }
        });
        while fetches.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        registry.discover("files").await.unwrap();
        older.await.unwrap().unwrap();
        let names: Vec<_> =
            registry.snapshot().tools_for(&Caller::new(Some("owner"), None)).map(|t| t.tool.name.clone()).collect();
        assert_eq!(names, ["files.read"]);
        assert_eq!(cache.load("files").await.unwrap().unwrap().tools.len(), 1);
    }

    /// An MCP server over HTTP on loopback (2025-11-25, with a session)
    /// whose `tools/list` lists the tools named in `lists[version]`;
    /// `tools/call` answers the name it was called by. Its URL.
    async fn listing_server(lists: Vec<Vec<&'static str>>, version: Arc<AtomicU64>) -> String {
        use axum::http::StatusCode;
        use axum::response::IntoResponse;
        let post = move |axum::Json(request): axum::Json<serde_json::Value>| {
            let listed = &lists[usize::try_from(version.load(Ordering::SeqCst)).unwrap()];
            let tools: Vec<_> =
                listed.iter().map(|name| json!({"name": name, "inputSchema": {"type": "object"}})).collect();
            let result = match request["method"].as_str() {
                Some("initialize") => json!({
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "listing", "version": "1.0.0"}
                }),
                Some("tools/list") => json!({"tools": tools}),
                Some("tools/call") => json!({"content": [{"type": "text", "text": request["params"]["name"]}]}),
                _ => return std::future::ready(StatusCode::ACCEPTED.into_response()),
            };
            let answer = json!({"jsonrpc": "2.0", "id": request["id"], "result": result});
            std::future::ready(([("mcp-session-id", "session-1")], axum::Json(answer)).into_response())
        };
        let app = axum::Router::new().route(
            "/mcp",
            axum::routing::post(post)
                .get(|| std::future::ready(StatusCode::METHOD_NOT_ALLOWED))
                .delete(|| std::future::ready(StatusCode::OK)),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        url
    }

    #[tokio::test]
    async fn an_mcp_servers_tool_names_are_taken_only_with_its_manifest() {
        // The server's `remove_item` is the fleet's `remove` (configured);
        // once listed with a tool the contract refuses, it must not take
        // over `remove` from the server's own `remove` of the manifest in force.
        let version = Arc::new(AtomicU64::new(0));
        let lists = vec![vec!["remove"], vec!["remove_item", "Bad Name"]];
        let url = listing_server(lists, Arc::clone(&version)).await;
        let entry = json!({"url": format!("mcp+{url}"), "tools": {"remove_item": {"name": "remove"}}});
        let (modules, servers) =
            crate::mcp_modules::settings::read_modules(BTreeMap::from([("m".to_owned(), entry)])).unwrap();
        let budgets = Budgets::default();
        let http = crate::mcp_modules::http_client::shared_client(crate::tls::client_config(&[]).unwrap()).unwrap();
        let timeout = Duration::from_secs(5);
        let cache = Arc::new(MemoryCache::default());
        let registry = Registry::new(&modules, cache, reqwest::Client::new(), None, timeout, budgets)
            .with_mcp_servers(McpServers::new(&servers, &budgets, timeout, &http));
        let call = || async {
            let call = module_sdk::contract::ToolCall {
                tool_name: "m.remove".into(),
                arguments: serde_json::Map::new(),
                user_id: None,
            };
            let trace = module_sdk::service::TraceParent::new([1; 16], [1; 8], 0).unwrap();
            let deadline = tokio::time::Instant::now() + timeout;
            registry.mcp_servers().get("m").unwrap().call(&call, &trace, deadline).await.result
        };
        registry.discover("m").await.unwrap();
        assert_eq!(call().await, json!("remove"));

        version.store(1, Ordering::SeqCst);
        let refused = registry.discover("m").await.unwrap_err();
        assert!(refused.is_refusal() && refused.to_string().contains("Bad Name"), "{refused}");
        // Another replica holds the claim: the cached manifest (the first listing's) is taken again.
        assert!(registry.adopt_cached("m").await);
        assert_eq!(call().await, json!("remove"), "the call goes to the tool of the manifest in force");
    }

    #[test]
    fn a_newer_failure_does_not_hide_an_older_success_but_an_older_failure_is_dropped() {
        let mut taken = Taken::default();
        assert!(taken.take(2, false), "the newest outcome");
        assert!(taken.take(1, true), "a success started before a failure still says the module answered");
        assert!(!taken.take(1, false) && !taken.take(0, true), "older than what was taken");
        assert!(taken.take(3, true) && !taken.take(2, true));
    }
}
