//! Provider-safe names: `module.tool` becomes `module__tool`, reversibly and
//! without collisions within one caller's tool set; property names that
//! Gemini would reject get a safe form too; descriptions fit the limits.

use std::collections::{HashMap, HashSet};

use module_sdk::contract::ToolDefinition;
use serde_json::{Map, Value};

/// The longest tool name any provider accepts.
pub const MAX_NAME_LEN: usize = 64;

/// The longest tool description OpenAI accepts, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;

/// What stands for the dot between module and tool in a provider-safe name.
const SEPARATOR: &str = "__";

/// The provider-safe names of one caller's tools, both ways.
///
/// The name of a tool is `module__tool` whenever that is valid and unique;
/// otherwise (a module outside our contract with odd characters or very long
/// names, or two tools whose `__` forms meet, such as `a__b.c` and `a.b__c`)
/// it is made valid and numbered. The mapping depends only on the set of
/// tool names, so the same caller gets the same names at listing and at
/// calling time.
#[derive(Debug, Clone, Default)]
pub struct NameMap {
    to_provider: HashMap<String, String>,
    to_tool: HashMap<String, String>,
}

impl NameMap {
    /// The names of `tools`, collision-checked against each other.
    pub fn new<T: std::borrow::Borrow<ToolDefinition>>(tools: &[T]) -> Self {
        Self::of_names(tools.iter().map(|t| t.borrow().name.as_str()))
    }

    /// The names of the tools called `names`, collision-checked against each other.
    pub fn of_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let mut full_names: Vec<&str> = names.into_iter().collect();
        full_names.sort_unstable();
        full_names.dedup();
        // Each name's candidate, in candidate order; names of one candidate stay sorted (a stable sort).
        let mut candidates: Vec<(String, &str)> =
            full_names.into_iter().map(|name| (safe_tool_name(name), name)).collect();
        candidates.sort_by(|a, b| a.0.cmp(&b.0));
        let collide = candidates.windows(2).any(|pair| pair[0].0 == pair[1].0);
        // Only collisions need to know every name taken (the usual set has none).
        let mut taken: HashSet<String> = match collide {
            true => candidates.iter().map(|(candidate, _)| candidate.clone()).collect(),
            false => HashSet::new(),
        };
        let mut map = Self {
            to_provider: HashMap::with_capacity(candidates.len()),
            to_tool: HashMap::with_capacity(candidates.len()),
        };
        let mut previous: Option<(String, usize)> = None;
        for (candidate, owner) in candidates {
            // The first (in sorted order) keeps the plain name, the others are numbered.
            let index = match &mut previous {
                Some((last, index)) if *last == candidate => {
                    *index += 1;
                    *index
                }
                _ => 0,
            };
            if index == 0 {
                map.insert(owner, candidate.clone());
                previous = Some((candidate, 0));
                continue;
            }
            let name = numbered(&candidate, index + 1, &taken);
            taken.insert(name.clone());
            map.insert(owner, name);
        }
        map
    }

    fn insert(&mut self, tool: &str, provider: String) {
        self.to_tool.insert(provider.clone(), tool.to_owned());
        self.to_provider.insert(tool.to_owned(), provider);
    }

    /// The provider-safe name of our tool `tool` (its safe form when the tool is not in the set).
    pub fn provider_name<'a>(&'a self, tool: &str) -> std::borrow::Cow<'a, str> {
        match self.to_provider.get(tool) {
            Some(name) => name.as_str().into(),
            None => safe_tool_name(tool).into(),
        }
    }

    /// Every (provider-safe name, `module.tool` name) pair of the set, in no order.
    pub fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.to_tool.iter().map(|(provider, tool)| (provider.as_str(), tool.as_str()))
    }

    /// Our `module.tool` name for a name a model used: a provider-safe name
    /// of this set, or one of the set's own names.
    pub fn tool_for(&self, provider_name: &str) -> Option<&str> {
        self.to_tool
            .get(provider_name)
            .or_else(|| self.to_provider.get_key_value(provider_name).map(|(tool, _)| tool))
            .map(String::as_str)
    }
}

/// `candidate` with `_<n>` appended (shortened to fit), or the next free number.
fn numbered(candidate: &str, first: usize, taken: &HashSet<String>) -> String {
    (first..)
        .map(|n| {
            let suffix = format!("_{n}");
            let keep = MAX_NAME_LEN - suffix.len();
            format!("{}{suffix}", truncate(candidate, keep))
        })
        .find(|name| !taken.contains(name))
        .expect("an unbounded range always has a free number")
}

/// The first `max` bytes of an ASCII name.
fn truncate(name: &str, max: usize) -> &str {
    &name[..name.len().min(max)]
}

/// The provider-safe form of a tool name: `.` becomes `__`, anything outside
/// `[A-Za-z0-9_-]` becomes `_`, a leading digit or `-` gets a `_` in front
/// (Gemini wants a letter or underscore first), and the result is cut to 64.
pub fn safe_tool_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    for c in name.chars() {
        match c {
            '.' => out.push_str(SEPARATOR),
            c if c.is_ascii_alphanumeric() || c == '_' || c == '-' => out.push(c),
            _ => out.push('_'),
        }
    }
    if !out.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        out.insert(0, '_');
    }
    out.truncate(MAX_NAME_LEN);
    out
}

/// Whether `name` is a property name Gemini accepts: a letter or underscore
/// first, then letters, digits and underscores.
pub fn is_gemini_property_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The Gemini-safe name of every property of `properties`, in order: names
/// that are already safe stay, others have each bad character replaced by
/// `_` (and a `_` in front when needed), numbered when that meets another.
/// A pure function of the property names, so calls can be mapped back.
pub fn gemini_property_names(properties: &Map<String, Value>) -> Vec<(&str, String)> {
    gemini_safe_names(properties.keys().map(String::as_str))
}

/// [`gemini_property_names`] of the property names `names` (no name twice), in order.
pub(crate) fn gemini_safe_names<'n>(names: impl Iterator<Item = &'n str> + Clone) -> Vec<(&'n str, String)> {
    // Usually every name is safe already: each keeps its own, and none can meet another.
    if names.clone().all(is_gemini_property_name) {
        return names.map(|name| (name, name.to_owned())).collect();
    }
    let mut taken: HashSet<String> =
        names.clone().filter(|name| is_gemini_property_name(name)).map(str::to_owned).collect();
    names
        .map(|name| {
            if is_gemini_property_name(name) {
                return (name, name.to_owned());
            }
            let mut safe: String = name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
            if !safe.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
                safe.insert(0, '_');
            }
            let safe = if taken.contains(&safe) {
                (2..).map(|n| format!("{safe}_{n}")).find(|s| !taken.contains(s)).expect("unbounded")
            } else {
                safe
            };
            taken.insert(safe.clone());
            (name, safe)
        })
        .collect()
}

/// `text` cut to at most `max` characters: at the end of the last sentence
/// or word that fits, with `…` to show that something was left out.
pub fn trim_description(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let budget = max.saturating_sub(1);
    let end = text.char_indices().nth(budget).map_or(text.len(), |(i, _)| i);
    let head = &text[..end];
    let cut = head
        .rfind(". ")
        .map(|i| i + 1)
        .filter(|&i| i > budget / 2)
        .or_else(|| head.rfind(char::is_whitespace).filter(|&i| i > budget / 2))
        .unwrap_or(end);
    format!("{}…", head[..cut].trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tools(names: &[&str]) -> Vec<ToolDefinition> {
        names.iter().map(|name| serde_json::from_value(json!({"name": name, "description": "d"})).unwrap()).collect()
    }

    #[test]
    fn contract_names_map_to_double_underscore_and_back() {
        let set = tools(&["research.web_search", "file_manager.read_file"]);
        let names = NameMap::new(&set);
        assert_eq!(names.provider_name("research.web_search"), "research__web_search");
        assert_eq!(names.tool_for("research__web_search"), Some("research.web_search"));
        assert_eq!(names.tool_for("research.web_search"), Some("research.web_search"));
        assert_eq!(names.tool_for("research__nothing"), None);
    }

    #[test]
    fn colliding_names_are_numbered_and_stay_reversible() {
        let set = tools(&["a.b__c", "a__b.c", "a__b__c_2.x"]);
        let names = NameMap::new(&set);
        let a = names.provider_name("a.b__c").into_owned();
        let b = names.provider_name("a__b.c").into_owned();
        assert_ne!(a, b);
        assert_eq!(names.tool_for(&a), Some("a.b__c"));
        assert_eq!(names.tool_for(&b), Some("a__b.c"));
        // The order of the tool list does not change the names.
        let reversed: Vec<_> = set.iter().rev().cloned().collect();
        assert_eq!(NameMap::new(&reversed).provider_name("a__b.c"), b);
    }

    #[test]
    fn long_and_odd_names_are_made_valid() {
        let long = format!("{}.{}", "m".repeat(40), "t".repeat(40));
        let set = tools(&[&long, "9lives.do-it!", &format!("{long}x")]);
        let names = NameMap::new(&set);
        for tool in &set {
            let name = names.provider_name(&tool.name);
            assert!(name.len() <= MAX_NAME_LEN, "{name}");
            assert!(name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'));
            assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
            assert_eq!(names.tool_for(&name), Some(tool.name.as_str()));
        }
        assert_eq!(names.provider_name("9lives.do-it!"), "_9lives__do-it_");
    }

    #[test]
    fn property_names_become_gemini_safe_without_meeting() {
        let props = json!({"ok_name": {}, "max-results": {}, "max_results": {}, "2fa": {}, "$type": {}});
        let names = gemini_property_names(props.as_object().unwrap());
        let safe: Vec<&str> = names.iter().map(|(_, s)| s.as_str()).collect();
        assert_eq!(safe, ["ok_name", "max_results_2", "max_results", "_2fa", "_type"]);
    }

    #[test]
    fn descriptions_are_cut_at_a_sentence_or_word() {
        assert_eq!(trim_description("  short  ", 10), "short");
        let text = format!("{} Second sentence goes on.", "First sentence is here.".repeat(3));
        let cut = trim_description(&text, 80);
        assert!(cut.chars().count() <= 80);
        assert!(cut.ends_with(".…"), "{cut}");
        let cut = trim_description(&"word ".repeat(300), MAX_DESCRIPTION_CHARS);
        assert!(cut.chars().count() <= MAX_DESCRIPTION_CHARS && cut.ends_with("word…"));
        let unbroken = "é".repeat(50);
        assert_eq!(trim_description(&unbroken, 10).chars().count(), 10);
    }
}
