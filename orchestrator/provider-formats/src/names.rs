//! Provider-safe names: `module.tool` becomes `module__tool`, reversibly and
//! without collisions within one caller's tool set; property names that
//! Gemini would reject get a safe form too; descriptions fit the limits.

use std::collections::{HashMap, HashSet};
use std::fmt;

use module_sdk::contract::ToolDefinition;
use serde_json::{Map, Value};

use super::ToolFormat;

/// The longest tool name any provider accepts.
pub const MAX_NAME_LEN: usize = 64;

/// The longest tool description OpenAI accepts, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;

/// What stands for the dot between module and tool in a provider-safe name.
const SEPARATOR: &str = "__";

/// The provider-safe names of one caller's tools, both ways.
///
/// The name of a tool is `module__tool` whenever that is valid and unique;
/// otherwise (a module outside our contract with odd characters, or names
/// cut to 64 characters) it is made valid, and tools of one module that meet
/// are numbered. Tools of different modules never are: module names may
/// hold `__`, so `x.y__z` and `x__y.z` both become `x__y__z`, and no rule
/// over names could tell which one a model means, nor stop a module from
/// naming a tool so that it takes another module's name. A name that tools
/// of two modules would have goes to neither: they are left out of the
/// provider formats ([`Self::clashes`] says which) and stay callable by their
/// own `module.tool` names. The mapping depends only on the set of tool
/// names, so the same caller gets the same names at listing and at calling time.
#[derive(Debug, Clone, Default)]
pub struct NameMap {
    to_provider: HashMap<String, String>,
    to_tool: HashMap<String, String>,
    clashes: Vec<Clash>,
}

/// Tools of different modules that would have the same provider-safe name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clash {
    /// The name they would share.
    pub provider_name: String,
    /// Their `module.tool` names, sorted.
    pub tools: Vec<String>,
}

impl fmt::Display for Clash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut tools: Vec<String> = self.tools.iter().map(|tool| format!("`{tool}`")).collect();
        let last = tools.pop().unwrap_or_default();
        let (tools, all) = match tools.len() {
            1 => (format!("{} and {last}", tools[0]), "both"),
            _ => (format!("{} and {last}", tools.join(", ")), "all"),
        };
        write!(
            f,
            "tools {tools} would {all} be `{}` to model providers, so the provider formats offer none of them (each can still be called by its own name); one of them must be renamed",
            self.provider_name
        )
    }
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
        let mut map = Self {
            to_provider: HashMap::with_capacity(candidates.len()),
            to_tool: HashMap::with_capacity(candidates.len()),
            clashes: Vec::new(),
        };
        // The usual set: no two candidates meet, each tool keeps its own.
        if candidates.windows(2).all(|pair| pair[0].0 != pair[1].0) {
            for (candidate, owner) in candidates {
                map.insert(owner, candidate);
            }
            return map;
        }
        let mut named = numbered_within_modules(&candidates);
        named.sort_by(|a, b| a.0.cmp(&b.0));
        // Numbers made each module's names unique: a name still held twice is held by two modules.
        for group in named.chunk_by(|a, b| a.0 == b.0) {
            match group {
                [(name, owner)] => map.insert(owner, name.clone()),
                _ => {
                    let mut tools: Vec<String> = group.iter().map(|(_, owner)| (*owner).to_owned()).collect();
                    tools.sort_unstable();
                    map.clashes.push(Clash { provider_name: group[0].0.clone(), tools });
                }
            }
        }
        map
    }

    fn insert(&mut self, tool: &str, provider: String) {
        self.to_tool.insert(provider.clone(), tool.to_owned());
        self.to_provider.insert(tool.to_owned(), provider);
    }

    /// The provider-safe name of our tool `tool` (its safe form when the
    /// tool is not in the set, or has no name of its own: [`Self::clashes`]).
    pub fn provider_name<'a>(&'a self, tool: &str) -> std::borrow::Cow<'a, str> {
        match self.to_provider.get(tool) {
            Some(name) => name.as_str().into(),
            None => safe_tool_name(tool).into(),
        }
    }

    /// Whether a listing in `format` holds `tool`, a tool of the set: `raw`
    /// and `prompt` name every tool by its own name; the provider formats
    /// leave out the tools of a [`Clash`], which have no name there.
    pub fn lists(&self, format: ToolFormat, tool: &str) -> bool {
        format.provider().is_none() || self.to_provider.contains_key(tool)
    }

    /// Every (provider-safe name, `module.tool` name) pair of the set, in no
    /// order; the tools of a [`Clash`] have none.
    pub fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.to_tool.iter().map(|(provider, tool)| (provider.as_str(), tool.as_str()))
    }

    /// Tools of different modules whose provider-safe names meet, which
    /// therefore have none, sorted by that name.
    pub fn clashes(&self) -> &[Clash] {
        &self.clashes
    }

    /// Our `module.tool` name for a name a model used: a provider-safe name
    /// of this set, or one of the set's own names.
    pub fn tool_for(&self, provider_name: &str) -> Option<&str> {
        self.to_tool
            .get(provider_name)
            .or_else(|| self.to_provider.get_key_value(provider_name).map(|(tool, _)| tool))
            .or_else(|| self.clashes.iter().flat_map(|clash| &clash.tools).find(|tool| *tool == provider_name))
            .map(String::as_str)
    }
}

/// The part of a tool name before its first dot.
fn module_of(tool: &str) -> &str {
    tool.split_once('.').map_or(tool, |(module, _)| module)
}

/// Each tool of `candidates` (in candidate order) with its name: its
/// candidate, numbered for every tool of the same module and candidate
/// after the first (in name order), skipping the module's other names.
/// Only a module's own names decide its numbers, so no other module can
/// move them.
fn numbered_within_modules<'a>(candidates: &[(String, &'a str)]) -> Vec<(String, &'a str)> {
    let mut taken: HashMap<&str, HashSet<String>> = HashMap::new();
    for (candidate, owner) in candidates {
        taken.entry(module_of(owner)).or_default().insert(candidate.clone());
    }
    let mut named = Vec::with_capacity(candidates.len());
    for group in candidates.chunk_by(|a, b| a.0 == b.0) {
        // How many tools of each module this candidate has had so far.
        let mut seen: Vec<(&str, usize)> = Vec::new();
        for (candidate, owner) in group {
            let module = module_of(owner);
            let count = match seen.iter_mut().find(|(seen_module, _)| *seen_module == module) {
                Some((_, count)) => {
                    *count += 1;
                    *count
                }
                None => {
                    seen.push((module, 1));
                    1
                }
            };
            let name = match count {
                1 => candidate.clone(),
                _ => {
                    let taken = taken.entry(module).or_default();
                    let name = numbered(candidate, count, taken);
                    taken.insert(name.clone());
                    name
                }
            };
            named.push((name, *owner));
        }
    }
    named
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

/// The Gemini-safe name of every property that the object schemas with
/// `properties` declare together (Gemini sees an `allOf`'s parts, or a
/// union branch and its node, as one object), in the order they are joined:
/// each name once, where it first appears. Names that are already safe
/// stay, others have each bad character replaced by `_` (and a `_` in
/// front when needed), numbered when that meets another name of the whole
/// set. A pure function of the names, so calls can be mapped back.
pub fn gemini_property_names<'n>(properties: &[&'n Map<String, Value>]) -> Vec<(&'n str, String)> {
    let mut seen = HashSet::new();
    let joined: Vec<&str> =
        properties.iter().flat_map(|map| map.keys()).map(String::as_str).filter(|name| seen.insert(*name)).collect();
    gemini_safe_names(joined.iter().copied())
}

/// The Gemini-safe names of the property names `names` (no name twice), in
/// order, as [`gemini_property_names`] says; the conversion calls it on the
/// properties it has joined.
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
    fn a_name_two_modules_would_share_goes_to_neither_whatever_their_order() {
        // Module `x__y`'s tool `z` and module `x`'s tool `y__z` both become `x__y__z`;
        // `.` sorts before `_`, so the first in name order was `x`'s.
        let set = tools(&["x.y__z", "x__y.z", "x.other"]);
        for set in [set.clone(), set.into_iter().rev().collect()] {
            let names = NameMap::new(&set);
            assert_eq!(names.tool_for("x__y__z"), None);
            assert_eq!(names.tool_for("x__y__z_2"), None);
            assert_eq!(names.tool_for("x__y.z"), Some("x__y.z"), "still callable by its own name");
            assert_eq!(names.tool_for("x.y__z"), Some("x.y__z"));
            assert_eq!(names.tool_for("x__other"), Some("x.other"));
            let clash = Clash { provider_name: "x__y__z".into(), tools: vec!["x.y__z".into(), "x__y.z".into()] };
            assert_eq!(names.clashes(), std::slice::from_ref(&clash));
            assert!(clash.to_string().starts_with("tools `x.y__z` and `x__y.z` would both be `x__y__z`"), "{clash}");
            let mut pairs: Vec<_> = names.pairs().collect();
            pairs.sort_unstable();
            assert_eq!(pairs, [("x__other", "x.other")]);
            assert!(!names.lists(ToolFormat::OpenAiChat, "x__y.z") && names.lists(ToolFormat::Prompt, "x__y.z"));
            assert!(names.lists(ToolFormat::Gemini, "x.other"));
        }
        // Alone in a caller's set, either keeps the name.
        assert_eq!(NameMap::new(&tools(&["x__y.z", "x.other"])).tool_for("x__y__z"), Some("x__y.z"));
    }

    #[test]
    fn only_tools_of_one_module_are_numbered_and_no_other_module_moves_their_numbers() {
        // Two tools of one module (whose name holds `__`) cut to the same 64 characters.
        let module = format!("{}__{}", "p".repeat(22), "q".repeat(16));
        let (first, second) = (format!("{module}.{}a", "t".repeat(30)), format!("{module}.{}b", "t".repeat(30)));
        let cut = safe_tool_name(&first);
        assert_eq!(cut, safe_tool_name(&second));
        let names = NameMap::new(&tools(&[&first, &second]));
        let numbered = format!("{}_2", &cut[..62]);
        assert_eq!((names.tool_for(&cut), names.tool_for(&numbered)), (Some(first.as_str()), Some(second.as_str())));
        // Module `ppp…` names a tool so that it becomes that number: the second is not pushed
        // to `_3` to make room, the name goes to neither.
        let intruder = format!("{}.{}", &numbered[..22], &numbered[24..]);
        assert_eq!(safe_tool_name(&intruder), numbered);
        let names = NameMap::new(&tools(&[&first, &second, &intruder]));
        assert_eq!(names.tool_for(&cut), Some(first.as_str()));
        assert_eq!(names.tool_for(&numbered), None);
        assert_eq!(names.clashes().len(), 1);
        assert_eq!(names.clashes()[0].tools, [intruder.clone(), second.clone()]);
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
        let names = gemini_property_names(&[props.as_object().unwrap()]);
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
