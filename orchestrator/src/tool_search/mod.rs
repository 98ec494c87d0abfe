//! Tool search: `GET /tools?query=...` ranks the caller's tools by
//! relevance (BM25F over names, descriptions and parameter descriptions,
//! [`index`]), and the meta-tool `tools__search` (our name `tools.search`)
//! lets a model load the definitions it needs on demand: a listing can
//! carry it (`search_tool=true`), and a call of it through `/execute` or
//! `/v1/tool-calls` is answered here with the matching tools' definitions
//! in the caller's format.
//!
//! The index is built once per registry snapshot generation over every
//! tool; a search scores only the tools the caller may see (permission and
//! module set, as listing), so nothing of other tools is ever revealed.

pub mod index;
pub mod settings;
mod terms;

use std::sync::{Arc, PoisonError, RwLock};

use module_sdk::contract::{ToolAnnotations, ToolDefinition, ToolResult};
use module_sdk::{ErrorKind, Permission};
use serde_json::{Map, Value, json};

use crate::caller::Caller;
use crate::providers::{CallFormat, ToolFormat, render_chosen};
use crate::snapshot::Snapshot;
use index::ToolIndex;
use settings::ToolSearchSettings;

/// The module name the orchestrator keeps for its own tools (no configured module may take it).
pub const META_MODULE: &str = "tools";
/// The meta-tool's name in our `module.tool` form.
pub const META_TOOL: &str = "tools.search";
/// The meta-tool's provider-safe name, as models see it.
pub const META_PROVIDER_NAME: &str = "tools__search";

/// Why a search was refused; each names the budget or argument to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SearchError {
    /// The query has no text.
    #[error("the search query is empty: say in a few words what the tool should do")]
    EmptyQuery,
    /// The query is over `MAX_SEARCH_QUERY_CHARS`.
    #[error("the search query is {chars} characters, over MAX_SEARCH_QUERY_CHARS ({max})")]
    QueryTooLong {
        /// The query's length.
        chars: usize,
        /// The budget.
        max: usize,
    },
    /// The `limit` is 0 or over `MAX_SEARCH_RESULTS`.
    #[error("limit must be from 1 to MAX_SEARCH_RESULTS ({max}); got {limit}")]
    BadLimit {
        /// The limit asked for.
        limit: String,
        /// The budget.
        max: usize,
    },
    /// A meta-tool argument is missing or of the wrong type, or unknown.
    #[error("{0}")]
    Arguments(String),
}

/// The caller's tools (with the meta-tool last, so names map as at calling
/// time) and the positions among them of a search's matches, best first.
#[derive(Debug)]
pub struct Found<'s> {
    /// The caller's tools in listing order, then the meta-tool.
    pub tools: Vec<&'s ToolDefinition>,
    /// Positions in `tools` of the matches, best first.
    pub ranked: Vec<usize>,
}

impl Found<'_> {
    /// The matches in `format`, under the names they have in the caller's
    /// whole listing; with the meta-tool after them when `with_meta_tool`.
    pub fn render(&self, format: ToolFormat, with_meta_tool: bool) -> Value {
        let mut chosen = self.ranked.clone();
        if with_meta_tool {
            chosen.push(self.tools.len() - 1);
        }
        render_chosen(format, &self.tools, &chosen)
    }
}

/// The search index of the current registry generation, and the budgets.
pub struct ToolSearch {
    settings: ToolSearchSettings,
    meta_tool: ToolDefinition,
    index: RwLock<Option<(u64, Arc<ToolIndex>)>>,
}

impl ToolSearch {
    /// Tool search within `settings`.
    pub fn new(settings: ToolSearchSettings) -> Self {
        Self { meta_tool: meta_tool(&settings), settings, index: RwLock::new(None) }
    }

    /// The definition of `tools.search` (`tools__search`), as listings carry it.
    pub fn meta_tool(&self) -> &ToolDefinition {
        &self.meta_tool
    }

    /// The `limit` of a `GET /tools` query as written: a whole number, or
    /// [`SearchError::BadLimit`] naming the budget (`abc`, `-1`, past `usize`).
    pub fn limit_from_query(&self, text: &str) -> Result<usize, SearchError> {
        text.parse().map_err(|_| SearchError::BadLimit { limit: text.to_owned(), max: self.settings.max_results })
    }

    /// The index of every tool of `snapshot`, built once per generation.
    fn index(&self, snapshot: &Snapshot) -> Arc<ToolIndex> {
        let generation = snapshot.generation();
        if let Some((built, index)) = &*self.index.read().unwrap_or_else(PoisonError::into_inner)
            && *built == generation
        {
            return Arc::clone(index);
        }
        let index = Arc::new(ToolIndex::new(all_tools(snapshot).map(|(_, tool)| tool)));
        let mut slot = self.index.write().unwrap_or_else(PoisonError::into_inner);
        // A slower builder of an older generation never replaces a newer index.
        if slot.as_ref().is_none_or(|(built, _)| *built <= generation) {
            *slot = Some((generation, Arc::clone(&index)));
        }
        index
    }

    /// The tools of `snapshot` that `caller` may see matching `query`, best
    /// first, at most `limit` (the default when `None`), within the budgets.
    pub fn search<'s>(
        &'s self,
        snapshot: &'s Snapshot,
        caller: &Caller,
        query: &str,
        limit: Option<usize>,
    ) -> Result<Found<'s>, SearchError> {
        let chars = query.chars().count();
        if chars > self.settings.max_query_chars {
            return Err(SearchError::QueryTooLong { chars, max: self.settings.max_query_chars });
        }
        if query.trim().is_empty() {
            return Err(SearchError::EmptyQuery);
        }
        let limit = match limit {
            None => self.settings.default_limit(),
            Some(limit) if (1..=self.settings.max_results).contains(&limit) => limit,
            Some(limit) => {
                return Err(SearchError::BadLimit { limit: limit.to_string(), max: self.settings.max_results });
            }
        };
        let index = self.index(snapshot);
        let mut visible = Vec::with_capacity(index.len());
        let mut tools = Vec::new();
        let mut positions = Vec::with_capacity(index.len());
        for (module, tool) in all_tools(snapshot) {
            let shown = caller.may_use(module, tool);
            visible.push(shown);
            positions.push(tools.len());
            if shown {
                tools.push(tool);
            }
        }
        let ranked =
            index.search(&terms::terms(query), &visible, limit).into_iter().map(|doc| positions[doc]).collect();
        tools.push(&self.meta_tool);
        Ok(Found { tools, ranked })
    }

    /// The answer to a call of the meta-tool by `caller` with `arguments`
    /// (`query`, optional `limit`; through `/execute` also an optional
    /// `format`): the matching tools' definitions in `format`, as
    /// `{"query", "tools"}`, or a failed result saying what to fix.
    /// The result names the tool as the call did (`tool_name`).
    pub fn call(
        &self,
        snapshot: &Snapshot,
        caller: &Caller,
        tool_name: String,
        arguments: &Map<String, Value>,
        format: ToolFormat,
    ) -> ToolResult {
        match self.answer(snapshot, caller, arguments, format) {
            Ok(result) => ToolResult::success(tool_name, result),
            Err(error) => ToolResult::failure(tool_name, ErrorKind::InvalidArguments, error.to_string()),
        }
    }

    fn answer(
        &self,
        snapshot: &Snapshot,
        caller: &Caller,
        arguments: &Map<String, Value>,
        format: ToolFormat,
    ) -> Result<Value, SearchError> {
        if let Some(unknown) = arguments.keys().find(|k| !matches!(k.as_str(), "query" | "limit" | "format")) {
            return Err(SearchError::Arguments(format!(
                "unknown argument `{unknown}`: give `query` and, if you like, `limit`"
            )));
        }
        let query = match arguments.get("query") {
            Some(Value::String(query)) => query,
            Some(_) => return Err(SearchError::Arguments("`query` must be a string".into())),
            None => {
                return Err(SearchError::Arguments(
                    "`query` is missing: say in a few words what the tool should do".into(),
                ));
            }
        };
        let limit = match arguments.get("limit") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) => match n.as_u64().and_then(|n| usize::try_from(n).ok()) {
                Some(limit) => Some(limit),
                None => return Err(SearchError::BadLimit { limit: n.to_string(), max: self.settings.max_results }),
            },
            Some(other) => {
                return Err(SearchError::BadLimit { limit: other.to_string(), max: self.settings.max_results });
            }
        };
        let format = match arguments.get("format") {
            None | Some(Value::Null) => format,
            Some(Value::String(name)) => {
                name.parse::<ToolFormat>().map_err(|e| SearchError::Arguments(e.to_string()))?
            }
            Some(_) => return Err(SearchError::Arguments("`format` must be a string".into())),
        };
        let found = self.search(snapshot, caller, query, limit)?;
        Ok(json!({"query": query, "tools": found.render(format, false)}))
    }
}

/// Whether `tool_name` names the meta-tool (`tools.search`, or as models call it, `tools__search`).
pub fn is_meta_tool(tool_name: &str) -> bool {
    tool_name == META_TOOL || tool_name == META_PROVIDER_NAME
}

/// The tool format whose definitions answer a meta-tool call made in a
/// model's message of `format` (`text` models read the `prompt` form).
pub fn format_for_calls(format: CallFormat) -> ToolFormat {
    match format {
        CallFormat::OpenAi => ToolFormat::OpenAiChat,
        CallFormat::OpenAiResponses => ToolFormat::OpenAiResponses,
        CallFormat::Anthropic => ToolFormat::Anthropic,
        CallFormat::Gemini => ToolFormat::Gemini,
        CallFormat::Text => ToolFormat::Prompt,
    }
}

/// Every tool of `snapshot` with its module, in listing order (module name, then manifest order).
fn all_tools(snapshot: &Snapshot) -> impl Iterator<Item = (&str, &ToolDefinition)> {
    snapshot
        .modules()
        .iter()
        .filter_map(|(name, module)| module.manifest.as_deref().map(|manifest| (name.as_str(), manifest)))
        .flat_map(|(name, manifest)| manifest.tools.iter().map(move |tool| (name, tool)))
}

/// The meta-tool's definition: open to every caller, reads only.
fn meta_tool(settings: &ToolSearchSettings) -> ToolDefinition {
    let default = settings.default_limit();
    ToolDefinition {
        name: META_TOOL.into(),
        description: "Find tools by what they do. Answers the definitions of the tools that best match the query, \
                      best first; call the ones you need next. Use it when none of the tools you have fits."
            .into(),
        parameters: Vec::new(),
        required_permission: Permission::Guest,
        input_schema: Some(json!({
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "What the tool should do, in a few words, e.g. \"search the web\" or \"send an email\".",
                    "maxLength": settings.max_query_chars
                },
                "limit": {
                    "type": "integer",
                    "description": format!("How many tools to answer at most (default {default})."),
                    "minimum": 1,
                    "maximum": settings.max_results
                }
            },
            "required": ["query"],
            "additionalProperties": false
        })),
        output_schema: None,
        annotations: Some(ToolAnnotations { read_only: true, destructive: false, idempotent: true, open_world: false }),
        requires_approval: None,
        timeout_seconds: None,
        risk_level: None,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use module_sdk::contract::ModuleManifest;

    use super::*;
    use crate::providers::{PROVIDERS, render_tools, rules};
    use crate::snapshot::{ModuleSnapshot, ModuleState};

    fn snapshot(generation: u64) -> Snapshot {
        let manifest: ModuleManifest = serde_json::from_value(json!({
            "module_name": "mail", "description": "Mail.",
            "tools": [
                {"name": "mail.send_email", "description": "Send an email.", "parameters": []},
                {"name": "mail.purge", "description": "Delete all email.", "parameters": [], "required_permission": "admin"}
            ]
        }))
        .unwrap();
        let module = ModuleSnapshot {
            name: "mail".into(),
            url: "http://127.0.0.1:1".into(),
            execute_url: "http://127.0.0.1:1/execute".into(),
            state: ModuleState::Up,
            manifest: Some(Arc::new(manifest)),
        };
        Snapshot::new(generation, BTreeMap::from([("mail".to_owned(), module)]))
    }

    #[test]
    fn the_index_is_built_once_per_generation() {
        let search = ToolSearch::new(ToolSearchSettings::default());
        let first = search.index(&snapshot(1));
        assert!(Arc::ptr_eq(&first, &search.index(&snapshot(1))));
        assert!(!Arc::ptr_eq(&first, &search.index(&snapshot(2))));
        // An older generation built late does not replace the newer index.
        search.index(&snapshot(1));
        let newest = search.index(&snapshot(2));
        assert!(Arc::ptr_eq(&newest, &search.index(&snapshot(2))));
    }

    #[test]
    fn searches_see_the_callers_tools_and_keep_their_budgets() {
        let settings = ToolSearchSettings { max_query_chars: 20, max_results: 3 };
        let search = ToolSearch::new(settings);
        let snapshot = snapshot(1);
        let guest = Caller::new(None, None);
        let found = search.search(&snapshot, &guest, "email", None).unwrap();
        let names: Vec<&str> = found.ranked.iter().map(|&i| found.tools[i].name.as_str()).collect();
        assert_eq!(names, ["mail.send_email"]);
        let admin = Caller::new(Some("admin"), None);
        assert_eq!(search.search(&snapshot, &admin, "email", None).unwrap().ranked.len(), 2);
        let errors = [
            search.search(&snapshot, &guest, &"e".repeat(21), None).unwrap_err(),
            search.search(&snapshot, &guest, " ", None).unwrap_err(),
            search.search(&snapshot, &guest, "email", Some(0)).unwrap_err(),
            search.search(&snapshot, &guest, "email", Some(4)).unwrap_err(),
        ];
        assert_eq!(errors[0], SearchError::QueryTooLong { chars: 21, max: 20 });
        assert_eq!(errors[1], SearchError::EmptyQuery);
        assert!(errors[2..].iter().all(|e| e.to_string().contains("MAX_SEARCH_RESULTS (3)")));
        let result = search.call(&snapshot, &guest, "tools__search".into(), &Map::new(), ToolFormat::Raw);
        assert_eq!(result.error_kind, Some(ErrorKind::InvalidArguments));
    }

    #[test]
    fn the_meta_tool_passes_every_providers_rules() {
        let search = ToolSearch::new(ToolSearchSettings::default());
        let tools = [search.meta_tool().clone()];
        for provider in PROVIDERS {
            let listed = render_tools(provider.format(), &tools);
            assert_eq!(rules::check_all(provider, &listed), [], "{provider:?}");
        }
        assert_eq!(render_tools(ToolFormat::Anthropic, &tools)[0]["strict"], true);
        assert!(is_meta_tool("tools.search") && is_meta_tool(META_PROVIDER_NAME) && !is_meta_tool("tools.other"));
    }
}
