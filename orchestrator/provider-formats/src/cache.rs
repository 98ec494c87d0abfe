//! Converted definitions memoized per (format, tool), for the HTTP layer:
//! listing a caller's tools then costs a lookup and a copy per tool instead
//! of a schema compilation.

use std::collections::HashMap;
use std::sync::{PoisonError, RwLock};

use module_sdk::contract::ToolDefinition;
use serde_json::Value;

use super::names::NameMap;
use super::{ToolFormat, assemble, convert_tool};

/// A converted definition and what it was converted from.
struct Entry {
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
/// name. An entry is used only while the tool's definition and its
/// provider-safe name are the ones it was made from, so a refreshed
/// manifest or a name collision in one caller's set can never serve a stale
/// conversion; a stale entry is replaced. Safe to share between threads.
#[derive(Default)]
pub struct ConvertedCache {
    formats: RwLock<HashMap<ToolFormat, HashMap<String, Entry>>>,
}

impl ConvertedCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// What [`super::render_tools`] answers, converting only tools not seen before.
    pub fn render_tools(&self, format: ToolFormat, tools: &[ToolDefinition]) -> Value {
        let names = NameMap::new(tools);
        assemble(format, tools, |tool| {
            self.with_entry(format, tool, &names.provider_name(&tool.name), |entry| entry.converted.clone())
        })
    }

    /// The same answer as [`Self::render_tools`], as JSON text ready to send:
    /// the cached definitions are copied as text, not rebuilt and serialized.
    pub fn render_tools_json(&self, format: ToolFormat, tools: &[ToolDefinition]) -> String {
        if format == ToolFormat::Prompt {
            return self.render_tools(format, tools).to_string();
        }
        let names = NameMap::new(tools);
        let mut out = String::from("[");
        for (index, tool) in tools.iter().enumerate() {
            if index > 0 {
                out.push(',');
            }
            self.with_entry(format, tool, &names.provider_name(&tool.name), |entry| out.push_str(&entry.json));
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
        read: impl FnOnce(&Entry) -> R,
    ) -> R {
        {
            let formats = self.formats.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(entry) = formats.get(&format).and_then(|entries| entries.get(&tool.name))
                && entry.name == name
                && entry.tool == *tool
            {
                return read(entry);
            }
        }
        let converted = convert_tool(format, tool, name);
        let entry = Entry { tool: tool.clone(), name: name.to_owned(), json: converted.to_string(), converted };
        let out = read(&entry);
        let mut formats = self.formats.write().unwrap_or_else(PoisonError::into_inner);
        formats.entry(format).or_default().insert(tool.name.clone(), entry);
        out
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
    /// name) says false, e.g. those of a module that went away.
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
            assert_eq!(cache.render_tools(format, &tools), fresh);
            assert_eq!(cache.render_tools(format, &tools), fresh);
            let text = cache.render_tools_json(format, &tools);
            assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), fresh, "{format}");
        }
        assert_eq!(cache.len(), 2 * ToolFormat::ALL.len());
        tools[0].description = "Search the web.".into();
        let fresh = render_tools(ToolFormat::Anthropic, &tools);
        assert_eq!(cache.render_tools(ToolFormat::Anthropic, &tools), fresh);
        assert_eq!(fresh[0]["description"], "Search the web.");
        // A colliding newcomer renames a cached tool; the cache follows.
        tools.push(tool("a__search.x", "Other."));
        tools.push(tool("a.search__x", "Other."));
        assert_eq!(cache.render_tools(ToolFormat::Gemini, &tools), render_tools(ToolFormat::Gemini, &tools));
        cache.retain_tools(|name| name.starts_with("b."));
        assert_eq!(cache.len(), ToolFormat::ALL.len());
        assert!(!cache.is_empty());
    }
}
