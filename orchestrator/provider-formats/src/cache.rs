//! Converted definitions memoized per (format, tool, generation), for the
//! HTTP layer: listing a caller's tools then costs a lookup and a copy of
//! text per tool instead of a schema compilation.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::sync::{PoisonError, RwLock};

use module_sdk::contract::ToolDefinition;
use serde_json::Value;

use super::names::NameMap;
use super::{ListingLimits, ToolFormat, assemble, convert_tool};

/// A converted definition and what it was converted from.
struct Entry {
    /// The registry generation it was last found current in: within that
    /// generation it is used without comparing definitions.
    generation: u64,
    /// The definition it was made from; a different one (a refreshed
    /// manifest) makes it stale.
    tool: ToolDefinition,
    /// The provider-safe name it carries (names depend on the caller's set).
    name: String,
    /// The converted definition (or prompt section).
    converted: Value,
    /// `converted` as JSON text, for answers written straight to the wire.
    json: String,
}

/// Converted tool definitions shared by every request, per format and tool
/// name, each marked with the registry generation (the caller's snapshot,
/// `orchestrator::snapshot::Snapshot::generation`) it was last found
/// current in. Within its generation an entry is used at once; in a later
/// one it is used again once its definition compares equal (a manifest that
/// did not change keeps its conversions), else converted anew. A different
/// provider-safe name (a name collision in one caller's set) is converted
/// anew too, so a stale conversion is never served. Safe to share between
/// threads.
#[derive(Default)]
pub struct ConvertedCache {
    formats: RwLock<HashMap<ToolFormat, HashMap<String, Entry>>>,
}

impl ConvertedCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// What [`super::render_tools`] answers for `tools` of registry
    /// `generation`, converting only tools not seen before.
    pub fn render_tools<T: Borrow<ToolDefinition>>(&self, format: ToolFormat, tools: &[T], generation: u64) -> Value {
        let names = NameMap::new(tools);
        assemble(format, tools.iter().map(Borrow::borrow), |tool: &ToolDefinition| {
            self.with_entry(format, tool, &names.provider_name(&tool.name), generation, |entry| entry.converted.clone())
        })
    }

    /// The same answer as [`Self::render_tools`], as JSON text ready to send:
    /// the cached definitions are copied as text, not rebuilt and serialized.
    pub fn render_tools_json<T: Borrow<ToolDefinition>>(
        &self,
        format: ToolFormat,
        tools: &[T],
        generation: u64,
    ) -> String {
        if format == ToolFormat::Prompt {
            return self.render_tools(format, tools, generation).to_string();
        }
        let names = NameMap::new(tools);
        let mut out = String::with_capacity(2 + tools.len() * 512);
        let mut limits = ListingLimits::new(format);
        out.push('[');
        for (index, tool) in tools.iter().enumerate() {
            let tool = tool.borrow();
            if index > 0 {
                out.push(',');
            }
            self.with_entry(format, tool, &names.provider_name(&tool.name), generation, |entry| {
                out.push_str(&limits.json(&entry.converted, &entry.json))
            });
        }
        out.push(']');
        out
    }

    /// Runs `read` on the current entry of `tool` in `format` under `name`,
    /// converting it first when there is none or it is stale.
    fn with_entry<R>(
        &self,
        format: ToolFormat,
        tool: &ToolDefinition,
        name: &str,
        generation: u64,
        read: impl FnOnce(&Entry) -> R,
    ) -> R {
        {
            let formats = self.formats.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(entry) = formats.get(&format).and_then(|entries| entries.get(&tool.name))
                && entry.name == name
                && entry.generation == generation
            {
                return read(entry);
            }
        }
        let mut formats = self.formats.write().unwrap_or_else(PoisonError::into_inner);
        let entries = formats.entry(format).or_default();
        match entries.get_mut(&tool.name) {
            // Converted in an earlier generation from the same definition: still good.
            Some(entry) if entry.name == name && entry.tool == *tool => {
                entry.generation = entry.generation.max(generation);
                read(entry)
            }
            _ => {
                let converted = convert_tool(format, tool, name);
                let entry = Entry {
                    generation,
                    tool: tool.clone(),
                    name: name.to_owned(),
                    json: converted.to_string(),
                    converted,
                };
                let out = read(&entry);
                entries.insert(tool.name.clone(), entry);
                out
            }
        }
    }

    /// How many converted definitions are held.
    pub fn len(&self) -> usize {
        self.formats.read().unwrap_or_else(PoisonError::into_inner).values().map(HashMap::len).sum()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops the entries of tools for which `keep` (given the `module.tool`
    /// name) says false, e.g. those no longer in the registry's snapshot.
    pub fn retain_tools(&self, keep: impl Fn(&str) -> bool) {
        let mut formats = self.formats.write().unwrap_or_else(PoisonError::into_inner);
        for entries in formats.values_mut() {
            entries.retain(|name, _| keep(name));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render_tools;
    use serde_json::json;

    fn tool(name: &str, description: &str) -> ToolDefinition {
        serde_json::from_value(json!({
            "name": name, "description": description,
            "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
        }))
        .unwrap()
    }

    #[test]
    fn cached_output_equals_fresh_output_and_follows_changes() {
        let cache = ConvertedCache::new();
        let mut tools = vec![tool("a.search", "Search."), tool("b.fetch", "Fetch.")];
        for format in ToolFormat::ALL {
            let fresh = render_tools(format, &tools);
            assert_eq!(cache.render_tools(format, &tools, 1), fresh);
            assert_eq!(cache.render_tools(format, &tools, 1), fresh);
            let text = cache.render_tools_json(format, &tools, 1);
            assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), fresh, "{format}");
        }
        assert_eq!(cache.len(), 2 * ToolFormat::ALL.len());
        // A new generation with a changed definition converts it anew; borrowed lists work alike.
        tools[0].description = "Search the web.".into();
        let borrowed: Vec<&ToolDefinition> = tools.iter().collect();
        let fresh = render_tools(ToolFormat::Anthropic, &tools);
        assert_eq!(cache.render_tools(ToolFormat::Anthropic, &borrowed, 2), fresh);
        assert_eq!(fresh[0]["description"], "Search the web.");
        // A colliding newcomer renames a cached tool; the cache follows.
        tools.push(tool("a__search.x", "Other."));
        tools.push(tool("a.search__x", "Other."));
        assert_eq!(cache.render_tools(ToolFormat::Gemini, &tools, 3), render_tools(ToolFormat::Gemini, &tools));
        cache.retain_tools(|name| name.starts_with("b."));
        assert_eq!(cache.len(), ToolFormat::ALL.len());
        assert!(!cache.is_empty());
    }
}
