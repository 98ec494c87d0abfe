//! What the registry knows, frozen: every module's state and manifest at one
//! generation, shared as an `Arc` by listing, routing and conversion.
//!
//! The registry builds a new [`Snapshot`] whenever a module's manifest or
//! state (up, cached, down) changes and swaps it in atomically
//! ([`crate::registry::Registry::snapshot`]); readers keep the one they took
//! for as long as they need it, without a lock, and never see a mix of two
//! generations. [`crate::registry::Registry::subscribe`] tells when a new
//! generation is published.

use std::collections::BTreeMap;
use std::sync::Arc;

use module_sdk::contract::{ModuleManifest, ToolDefinition};
use serde::Serialize;

use crate::NameMap;
use crate::caller::Caller;
use crate::providers::names::Clash;
use crate::providers::{self, Listed};

/// Where a module stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ModuleState {
    /// The last discovery succeeded.
    Up,
    /// The module has not answered lately, but a manifest (from the cache or
    /// an earlier discovery) keeps its tools listed.
    Cached,
    /// No manifest at all: the module has no tools to offer.
    Down,
}

/// One module in a snapshot.
#[derive(Debug, Clone)]
pub struct ModuleSnapshot {
    /// The configured name.
    pub name: Arc<str>,
    /// The configured base URL.
    pub url: Arc<str>,
    /// `{url}/execute`, where its calls go.
    pub execute_url: Arc<str>,
    /// Up, cached or down.
    pub state: ModuleState,
    /// Its checked manifest; `None` when down.
    pub manifest: Option<Arc<ModuleManifest>>,
}

impl ModuleSnapshot {
    /// Whether `other` has the same state and the very same manifest (the same `Arc`).
    fn same_as(&self, other: &Self) -> bool {
        self.state == other.state
            && match (&self.manifest, &other.manifest) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            }
    }
}

/// Every configured module's state and manifest at one generation. Immutable:
/// a change makes a new snapshot with the next generation.
#[derive(Debug, Default)]
pub struct Snapshot {
    generation: u64,
    modules: BTreeMap<String, ModuleSnapshot>,
    /// Every routable tool by full name: its index in the manifest of the
    /// module its name begins with (the first, should a manifest name one
    /// twice). Built once per generation, so routing is a lookup rather
    /// than a scan of a manifest that may hold thousands of tools.
    tool_indexes: NameMap<usize>,
    /// Tools of different modules whose provider-safe names meet, over all
    /// modules: whoever may see both gets neither in a provider format.
    clashes: Vec<Clash>,
}

/// Why a tool name does not lead to a tool that can be called.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// The name is not `module.tool`.
    #[error("`{0}` is not a tool name: expected `<module>.<tool>`, e.g. `research.web_search`")]
    BadName(String),
    /// No module of that name is configured.
    #[error("there is no tool `{tool}`: no module `{module}`")]
    UnknownModule {
        /// The module part of the name.
        module: String,
        /// The full tool name.
        tool: String,
    },
    /// The module has never been discovered and nothing is cached.
    #[error("module `{module}` has not been reached yet ({reason}); try again later")]
    NotDiscovered {
        /// The module.
        module: String,
        /// Its last discovery error, which may name its internal address.
        reason: String,
    },
    /// [`RouteError::NotDiscovered`] as a caller that may not see modules'
    /// addresses and errors is told it ([`RouteError::without_internals`]).
    #[error("module `{module}` is unavailable; try again later")]
    Unavailable {
        /// The module.
        module: String,
    },
    /// The module has no tool of that name.
    #[error("module `{module}` has no tool `{tool}`")]
    UnknownTool {
        /// The module.
        module: String,
        /// The full tool name.
        tool: String,
    },
}

impl RouteError {
    /// The error without what only operators see (as
    /// [`ModuleStatus::without_internals`](crate::registry::ModuleStatus::without_internals)):
    /// why a module was not reached.
    pub fn without_internals(self) -> Self {
        match self {
            Self::NotDiscovered { module, .. } => Self::Unavailable { module },
            other => other,
        }
    }
}

/// Where a call goes: the module and the tool's definition, borrowed from
/// the snapshot's manifest (cheap to make: a few reference counts).
#[derive(Debug, Clone)]
pub struct ToolRoute {
    /// The module's name.
    pub module: Arc<str>,
    /// The module's base URL.
    pub url: Arc<str>,
    /// `{url}/execute`.
    pub execute_url: Arc<str>,
    manifest: Arc<ModuleManifest>,
    index: usize,
}

impl ToolRoute {
    /// The called tool's definition.
    pub fn tool(&self) -> &ToolDefinition {
        &self.manifest.tools[self.index]
    }

    /// The module's manifest the route was taken from, and the tool's index in it.
    pub fn manifest(&self) -> (&Arc<ModuleManifest>, usize) {
        (&self.manifest, self.index)
    }
}

/// One tool a caller may see: its module's name and its definition, borrowed
/// from the snapshot.
#[derive(Debug, Clone, Copy)]
pub struct ToolRef<'a> {
    /// The module serving it.
    pub module: &'a str,
    /// Its definition.
    pub tool: &'a ToolDefinition,
    /// The module's manifest, and the tool's index there.
    source: (&'a Arc<ModuleManifest>, usize),
}

impl<'a> ToolRef<'a> {
    /// The tool as a listing converts it: a conversion made from the same
    /// manifest (the same `Arc`, kept while the module's manifest does not
    /// change) is reused without comparing definitions.
    pub fn listed(&self) -> Listed<'a> {
        Listed { tool: self.tool, source: Some(self.source) }
    }
}

impl Snapshot {
    /// A snapshot of `modules` at `generation`.
    pub(crate) fn new(generation: u64, modules: BTreeMap<String, ModuleSnapshot>) -> Self {
        let mut tool_indexes = NameMap::default();
        for (name, module) in &modules {
            let Some(manifest) = &module.manifest else { continue };
            for (index, tool) in manifest.tools.iter().enumerate() {
                // Routing goes by the name's prefix: a tool named for another module is not this one's.
                if tool.name.split_once('.').is_some_and(|(prefix, _)| prefix == name) {
                    tool_indexes.entry(tool.name.clone()).or_insert(index);
                }
            }
        }
        let clashes = providers::names::NameMap::of_names(tool_indexes.keys().map(String::as_str)).clashes().to_vec();
        Self { generation, modules, tool_indexes, clashes }
    }

    /// The snapshot after this one when `modules` differ from this one's
    /// (a state or a manifest); `None` when nothing changed.
    pub(crate) fn successor(&self, modules: BTreeMap<String, ModuleSnapshot>) -> Option<Self> {
        let unchanged = modules.len() == self.modules.len()
            && modules.iter().zip(&self.modules).all(|((a_name, a), (b_name, b))| a_name == b_name && a.same_as(b));
        (!unchanged).then(|| Self::new(self.generation + 1, modules))
    }

    /// Its generation: 0 for the empty start, one more on every change.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Every configured module, by name.
    pub fn modules(&self) -> &BTreeMap<String, ModuleSnapshot> {
        &self.modules
    }

    /// Tools of different modules that would share a provider-safe name
    /// (`x.y__z` and `x__y.z`), which the provider formats leave out for a
    /// caller who may see both ([`providers::names::NameMap`]); each is a
    /// discovery problem of both modules.
    pub fn clashes(&self) -> &[Clash] {
        &self.clashes
    }

    /// The module called `name`, if configured.
    pub fn module(&self, name: &str) -> Option<&ModuleSnapshot> {
        self.modules.get(name)
    }

    /// The tools `caller` may see, by module name then manifest order,
    /// borrowed (nothing is cloned).
    pub fn tools_for<'a>(&'a self, caller: &'a Caller) -> impl Iterator<Item = ToolRef<'a>> + 'a {
        self.modules
            .iter()
            .filter(|(name, _)| caller.allows_module(name))
            .filter_map(|(name, module)| module.manifest.as_ref().map(|manifest| (name.as_str(), manifest)))
            .flat_map(move |(module, manifest)| {
                manifest
                    .tools
                    .iter()
                    .enumerate()
                    .filter(move |(_, tool)| caller.may_use(module, tool))
                    .map(move |(index, tool)| ToolRef { module, tool, source: (manifest, index) })
            })
    }

    /// The definition of `tool_name` (`module.tool`), whoever may use it.
    pub fn tool(&self, tool_name: &str) -> Option<&ToolDefinition> {
        let index = *self.tool_indexes.get(tool_name)?;
        let (module, _) = tool_name.split_once('.')?;
        self.modules.get(module)?.manifest.as_deref()?.tools.get(index)
    }

    /// Where `tool_name` (`module.tool`) is served. A module without a
    /// manifest is [`RouteError::NotDiscovered`] with an empty reason (the
    /// registry adds its last error).
    pub fn route(&self, tool_name: &str) -> Result<ToolRoute, RouteError> {
        let Some((module_name, _)) = tool_name.split_once('.') else {
            return Err(RouteError::BadName(tool_name.to_owned()));
        };
        let Some(module) = self.modules.get(module_name) else {
            return Err(RouteError::UnknownModule { module: module_name.to_owned(), tool: tool_name.to_owned() });
        };
        let Some(manifest) = &module.manifest else {
            return Err(RouteError::NotDiscovered { module: module_name.to_owned(), reason: String::new() });
        };
        match self.tool_indexes.get(tool_name).copied() {
            Some(index) => Ok(ToolRoute {
                module: Arc::clone(&module.name),
                url: Arc::clone(&module.url),
                execute_url: Arc::clone(&module.execute_url),
                manifest: Arc::clone(manifest),
                index,
            }),
            None => Err(RouteError::UnknownTool { module: module_name.to_owned(), tool: tool_name.to_owned() }),
        }
    }
}

#[cfg(test)]
mod tests {
    use module_sdk::Permission;

    use super::*;

    fn module(name: &str, tools: &[String]) -> ModuleSnapshot {
        let tools = tools.iter().map(|tool| ToolDefinition::new(tool, "d", Permission::Guest)).collect();
        let manifest = ModuleManifest {
            module_name: name.to_owned(),
            description: String::new(),
            tools,
            version: None,
            contract_version: None,
        };
        ModuleSnapshot {
            name: name.into(),
            url: "http://m".into(),
            execute_url: "http://m/execute".into(),
            state: ModuleState::Up,
            manifest: Some(Arc::new(manifest)),
        }
    }

    #[test]
    fn every_tool_of_a_large_manifest_routes_to_its_own_index_and_others_do_not() {
        let mut names: Vec<String> = (0..2_000).map(|i| format!("big.tool_{i}")).collect();
        names.push("small.stray".to_owned());
        names.push("big.tool_7".to_owned());
        let modules = BTreeMap::from([
            ("big".to_owned(), module("big", &names)),
            ("small".to_owned(), module("small", &["small.one".to_owned()])),
        ]);
        let snapshot = Snapshot::new(1, modules);
        for (index, name) in names.iter().enumerate().take(2_000) {
            let route = snapshot.route(name).unwrap();
            assert_eq!((route.manifest().1, route.tool().name.as_str()), (index, name.as_str()));
            assert_eq!(snapshot.tool(name).map(|tool| tool.name.as_str()), Some(name.as_str()));
        }
        assert_eq!(snapshot.route("big.tool_7").unwrap().manifest().1, 7, "the first of a duplicate name");
        // Named for `small` but listed by `big`: `small` does not serve it.
        assert!(matches!(snapshot.route("small.stray"), Err(RouteError::UnknownTool { .. })));
        assert!(snapshot.tool("small.stray").is_none());
        assert!(matches!(snapshot.route("big.nope"), Err(RouteError::UnknownTool { .. })));
        assert!(matches!(snapshot.route("nope.x"), Err(RouteError::UnknownModule { .. })));
        assert!(matches!(snapshot.route("nodot"), Err(RouteError::BadName(_))));
    }
}
