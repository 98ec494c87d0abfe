//! Converted definitions memoized per (format, tool), for the HTTP layer:
//! listing a caller's tools then costs a lookup and a copy of text per tool
//! instead of a schema compilation.
//!
//! A conversion stays current for as long as its tool's definition does:
//! a tool listed from the same shared manifest (the same `Arc`, which the
//! registry keeps for a module whose manifest did not change) is found
//! without comparing anything, so a change in one module converts that
//! module's changed tools again and nothing else.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use module_sdk::contract::{ModuleManifest, ToolDefinition};
use serde_json::Value;

use super::anthropic::{self, StrictLimit};
use super::compile::StrictCost;
use super::names::NameMap;
use super::threads::ConversionThreads;
use super::{ToolFormat, gemini, openai, text};

/// One tool of a listing, and where its definition comes from.
#[derive(Debug, Clone, Copy)]
pub struct Listed<'a> {
    /// The definition.
    pub tool: &'a ToolDefinition,
    /// The immutable, shared manifest holding it and its index there, when
    /// it comes from one: while that `Arc` is the same, so is the definition.
    pub source: Option<(&'a Arc<ModuleManifest>, usize)>,
}

impl<'a> From<&'a ToolDefinition> for Listed<'a> {
    fn from(tool: &'a ToolDefinition) -> Self {
        Self { tool, source: None }
    }
}

impl<'a> Listed<'a> {
    /// Tool `index` of `manifest`, `None` past its end.
    pub fn from_manifest(manifest: &'a Arc<ModuleManifest>, index: usize) -> Option<Self> {
        manifest.tools.get(index).map(|tool| Self { tool, source: Some((manifest, index)) })
    }
}

/// What a conversion was made from.
enum Origin {
    /// Tool `.1` of a shared manifest, kept alive by the entry.
    Shared(Arc<ModuleManifest>, usize),
    /// A definition of no manifest (e.g. a meta-tool), kept to compare.
    Owned(Box<ToolDefinition>),
}

impl Origin {
    fn of(listed: Listed<'_>) -> Self {
        match listed.source {
            Some((manifest, index)) => Self::Shared(Arc::clone(manifest), index),
            None => Self::Owned(Box::new(listed.tool.clone())),
        }
    }

    /// Whether `listed` is what this was made from: the very definition of
    /// the same shared manifest (nothing compared), or an equal definition of none.
    fn is(&self, listed: Listed<'_>) -> bool {
        match (self, listed.source) {
            (Self::Shared(manifest, index), Some((other, other_index))) => {
                Arc::ptr_eq(manifest, other) && *index == other_index
            }
            (Self::Owned(tool), None) => **tool == *listed.tool,
            _ => false,
        }
    }

    /// The definition this was made from.
    fn tool(&self) -> Option<&ToolDefinition> {
        match self {
            Self::Shared(manifest, index) => manifest.tools.get(*index),
            Self::Owned(tool) => Some(tool),
        }
    }
}

/// A converted definition and what it was converted from.
struct Entry {
    origin: Origin,
    /// The provider-safe name it carries (names depend on the caller's set).
    name: String,
    /// The converted definition as JSON text; for `prompt`, the section's
    /// text escaped as the inside of a JSON string.
    text: Box<str>,
    /// For `anthropic`, the strict budget it takes when it is strict.
    strict: Option<StrictCost>,
}

/// Converted tool definitions shared by every request, per format and tool
/// name ([`Listed`] says when one is current). A different provider-safe
/// name (a name collision in one caller's set) or definition is converted
/// anew, so a stale conversion is never served. Safe to share between threads.
#[derive(Default)]
pub struct ConvertedCache {
    formats: RwLock<HashMap<ToolFormat, HashMap<String, Arc<Entry>>>>,
    /// The threads a listing's new tools are converted on.
    threads: ConversionThreads,
}

impl ConvertedCache {
    /// An empty cache converting a listing's new tools on up to as many
    /// threads as the machine has cores (at most 8).
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty cache converting a listing's new tools on up to `threads`
    /// threads at once, the listing's own included (`1`: on its own only).
    pub fn with_threads(threads: usize) -> Self {
        Self { formats: RwLock::default(), threads: ConversionThreads::new(threads) }
    }

    /// What [`super::render_tools`] answers for `tools`, converting only
    /// tools not seen before.
    pub fn render_tools(&self, format: ToolFormat, tools: &[Listed<'_>]) -> Value {
        let entries = self.entries(format, tools);
        let text = match format {
            ToolFormat::Prompt => prompt(&entries),
            _ => listing(format, &entries),
        };
        serde_json::from_str(&text).expect("converted definitions are JSON text")
    }

    /// The same answer as [`Self::render_tools`], as JSON text ready to send:
    /// the cached definitions are copied as text, not rebuilt and serialized.
    pub fn render_tools_json(&self, format: ToolFormat, tools: &[Listed<'_>]) -> String {
        let entries = self.entries(format, tools);
        match format {
            ToolFormat::Prompt => prompt(&entries),
            _ => listing(format, &entries),
        }
    }
    /// The current entry of every tool `format` lists, in order, converting
    /// those without one (outside the lock, side by side) and storing them.
    fn entries(&self, format: ToolFormat, tools: &[Listed<'_>]) -> Vec<Arc<Entry>> {
        let names = NameMap::of_names(tools.iter().map(|listed| listed.tool.name.as_str()));
        let mut found: Vec<Option<Arc<Entry>>> = Vec::with_capacity(tools.len());
        let mut stale = Vec::new();
        {
            let formats = self.formats.read().unwrap_or_else(PoisonError::into_inner);
            let current = formats.get(&format);
            for (index, listed) in tools.iter().enumerate() {
                if !names.lists(format, &listed.tool.name) {
                    found.push(None);
                    continue;
                }
                let name = names.provider_name(&listed.tool.name);
                let entry = current.and_then(|entries| entries.get(&listed.tool.name));
                match entry {
                    Some(entry) if entry.name == name && entry.origin.is(*listed) => {
                        found.push(Some(Arc::clone(entry)))
                    }
                    _ => {
                        stale.push((index, entry.cloned()));
                        found.push(None);
                    }
                }
            }
        }
        if !stale.is_empty() {
            let made = self
                .threads
                .map(&stale, |(index, old)| Arc::new(refreshed(format, tools[*index], &names, old.as_deref())));
            let mut formats = self.formats.write().unwrap_or_else(PoisonError::into_inner);
            let entries = formats.entry(format).or_default();
            for ((index, _), entry) in stale.into_iter().zip(made) {
                entries.insert(tools[index].tool.name.clone(), Arc::clone(&entry));
                found[index] = Some(entry);
            }
        }
        found.into_iter().flatten().collect()
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

/// The entry of `listed` in `format`: `old`'s conversion under `listed`'s
/// origin when the definition and name are the same (a manifest that
/// changed elsewhere), else a new conversion.
fn refreshed(format: ToolFormat, listed: Listed<'_>, names: &NameMap, old: Option<&Entry>) -> Entry {
    let name = names.provider_name(&listed.tool.name);
    if let Some(old) = old
        && old.name == name
        && old.origin.tool() == Some(listed.tool)
    {
        return Entry {
            origin: Origin::of(listed),
            name: old.name.clone(),
            text: old.text.clone(),
            strict: old.strict,
        };
    }
    let (text, strict) = match format {
        // Written straight as text: no tree to build and drop.
        ToolFormat::Raw => (serde_json::to_string(listed.tool).expect("a ToolDefinition always serializes"), None),
        ToolFormat::Prompt => (text::escaped(&text::tool_section(listed.tool)), None),
        ToolFormat::Gemini => (gemini::definition_json(listed.tool, &name), None),
        ToolFormat::GeminiJsonSchema => (gemini::json_schema_definition_json(listed.tool, &name), None),
        ToolFormat::OpenAiChat => (openai::chat_definition_json(listed.tool, &name), None),
        ToolFormat::OpenAiResponses => (openai::responses_definition_json(listed.tool, &name), None),
        ToolFormat::Anthropic => anthropic::definition_json(listed.tool, &name),
    };
    Entry { origin: Origin::of(listed), name: name.into_owned(), text: text.into(), strict }
}

/// The `prompt` answer made of `entries`' sections, as JSON text.
fn prompt(entries: &[Arc<Entry>]) -> String {
    let sections: Vec<&str> = entries.iter().map(|entry| &*entry.text).collect();
    text::prompt_json(&sections)
}

/// The JSON array of `entries`' definitions in `format`, with what the whole
/// listing decides (for `anthropic`, which strict ones stay strict).
fn listing(format: ToolFormat, entries: &[Arc<Entry>]) -> String {
    let mut limit = (format == ToolFormat::Anthropic).then(StrictLimit::new);
    let mut out = String::with_capacity(2 + entries.iter().map(|entry| entry.text.len() + 1).sum::<usize>());
    out.push('[');
    for (index, entry) in entries.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        match (&mut limit, entry.strict) {
            (Some(limit), Some(cost)) => limit.push_json(cost, &entry.text, &mut out),
            _ => out.push_str(&entry.text),
        }
    }
    out.push(']');
    out
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

    fn listed(tools: &[ToolDefinition]) -> Vec<Listed<'_>> {
        tools.iter().map(Listed::from).collect()
    }

    #[test]
    fn cached_output_equals_fresh_output_and_follows_changes() {
        let cache = ConvertedCache::new();
        let mut tools = vec![tool("a.search", "Search."), tool("b.fetch", "Fetch.")];
        for format in ToolFormat::ALL {
            let fresh = render_tools(format, &tools);
            assert_eq!(cache.render_tools(format, &listed(&tools)), fresh);
            assert_eq!(cache.render_tools(format, &listed(&tools)), fresh);
            let text = cache.render_tools_json(format, &listed(&tools));
            assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), fresh, "{format}");
        }
        assert_eq!(cache.len(), 2 * ToolFormat::ALL.len());
        // A changed definition is converted anew.
        tools[0].description = "Search the web.".into();
        let fresh = render_tools(ToolFormat::Anthropic, &tools);
        assert_eq!(cache.render_tools(ToolFormat::Anthropic, &listed(&tools)), fresh);
        assert_eq!(fresh[0]["description"], "Search the web.");
        // Two newcomers that clash are left out; the cache follows.
        tools.push(tool("a__search.x", "Other."));
        tools.push(tool("a.search__x", "Other."));
        let gemini = cache.render_tools(ToolFormat::Gemini, &listed(&tools));
        assert_eq!(gemini, render_tools(ToolFormat::Gemini, &tools));
        assert_eq!(gemini.as_array().unwrap().len(), 2, "{gemini}");
        assert_eq!(cache.render_tools(ToolFormat::Raw, &listed(&tools)).as_array().unwrap().len(), 4);
        cache.retain_tools(|name| name.starts_with("b."));
        assert_eq!(cache.len(), ToolFormat::ALL.len());
        assert!(!cache.is_empty());
    }

    #[test]
    fn listings_converted_on_several_threads_are_those_of_one() {
        let tools: Vec<ToolDefinition> =
            (0..300).map(|i| tool(&format!("m{}.tool_{i}", i % 7), &format!("Tool {i}."))).collect();
        let (one, several) = (ConvertedCache::with_threads(1), ConvertedCache::with_threads(4));
        for format in ToolFormat::ALL {
            let text = one.render_tools_json(format, &listed(&tools));
            assert_eq!(several.render_tools_json(format, &listed(&tools)), text, "{format}");
            assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), render_tools(format, &tools), "{format}");
        }
        assert_eq!(several.len(), 300 * ToolFormat::ALL.len());
    }

    fn of(manifest: &Arc<ModuleManifest>) -> Vec<Listed<'_>> {
        (0..manifest.tools.len()).filter_map(|index| Listed::from_manifest(manifest, index)).collect()
    }

    #[test]
    fn tools_of_a_shared_manifest_are_current_while_it_is_the_same() {
        let manifest = |description: &str| {
            Arc::new(ModuleManifest {
                module_name: "a".into(),
                description: "A.".into(),
                tools: vec![tool("a.search", description), tool("a.fetch", "Fetch.")],
                version: None,
                contract_version: None,
            })
        };
        let cache = ConvertedCache::new();
        let first = manifest("Search.");
        let text = cache.render_tools_json(ToolFormat::OpenAiChat, &of(&first));
        // An equal manifest in a new `Arc` (a refresh elsewhere) keeps the conversions, under the new origin.
        let equal = manifest("Search.");
        assert_eq!(cache.render_tools_json(ToolFormat::OpenAiChat, &of(&equal)), text);
        let entries = cache.formats.read().unwrap();
        let entry = &entries[&ToolFormat::OpenAiChat]["a.search"];
        assert!(entry.origin.is(of(&equal)[0]) && !entry.origin.is(of(&first)[0]));
        drop(entries);
        // A changed one converts anew.
        let changed = manifest("Search the web.");
        let fresh = render_tools(ToolFormat::OpenAiChat, &changed.tools);
        assert_eq!(cache.render_tools(ToolFormat::OpenAiChat, &of(&changed)), fresh);
    }
}
