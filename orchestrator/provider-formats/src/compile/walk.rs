//! Where the subschemas of a JSON Schema node are, so that passes can visit
//! or rewrite every node without knowing every keyword.

use std::borrow::Cow;

use module_sdk::schema::{LIST_SUBSCHEMA_KEYWORDS, MAP_SUBSCHEMA_KEYWORDS, SINGLE_SUBSCHEMA_KEYWORDS};
use serde_json::{Map, Value};

/// How deep the compilers nest subschemas at most, whatever a schema holds:
/// deeper parts become "any value" with a note, so that no schema can
/// overflow a stack. Above the default `MAX_SCHEMA_DEPTH` an orchestrator
/// checks at discovery, so a schema that passed is never cut.
pub const MAX_NESTING: usize = 64;

/// How many subschemas inlining references may produce for one schema;
/// past it references stay references (or, for Gemini, become a note).
/// Twice the default `MAX_SCHEMA_NODES` an orchestrator checks at discovery.
pub const MAX_INLINED_NODES: usize = 20_000;

/// What stands in for a subschema nested deeper than [`MAX_NESTING`], or
/// past [`MAX_INLINED_NODES`]: any value, saying so.
pub fn omitted() -> Map<String, Value> {
    let mut node = Map::new();
    node.insert("description".into(), format!("({OMITTED})").into());
    node
}

/// What [`omitted`] says, in its description's parentheses.
pub const OMITTED: &str = "omitted: nested too deep or too large to show";

/// Where a direct subschema sits in its parent node: written with `{}` it
/// is the JSON pointer suffix (e.g. `/properties/name`), made only when asked.
#[derive(Debug, Clone, Copy)]
pub enum Step<'a> {
    /// A keyword whose value is one subschema (`/items`).
    Keyword(&'a str),
    /// An entry of a keyword's list of subschemas (`/anyOf/0`).
    Index(&'a str, usize),
    /// An entry of a keyword's map of subschemas (`/properties/name`).
    Name(&'a str, &'a str),
}

impl std::fmt::Display for Step<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Keyword(keyword) => write!(f, "/{keyword}"),
            Self::Index(keyword, index) => write!(f, "/{keyword}/{index}"),
            Self::Name(keyword, name) => write!(f, "/{keyword}/{}", escape(name)),
        }
    }
}

/// Calls `f` with the [`Step`] to and the value of every direct subschema of `node`.
pub fn for_each_child<'a>(node: &'a Map<String, Value>, mut f: impl FnMut(Step<'a>, &'a Value)) {
    for (keyword, value) in node {
        let keyword = keyword.as_str();
        match value {
            Value::Array(items) if LIST_SUBSCHEMA_KEYWORDS.contains(&keyword) => {
                for (index, item) in items.iter().enumerate() {
                    f(Step::Index(keyword, index), item);
                }
            }
            Value::Object(map) if MAP_SUBSCHEMA_KEYWORDS.contains(&keyword) => {
                for (name, item) in map {
                    f(Step::Name(keyword, name), item);
                }
            }
            Value::Object(_) | Value::Bool(_) if SINGLE_SUBSCHEMA_KEYWORDS.contains(&keyword) => {
                f(Step::Keyword(keyword), value)
            }
            _ => {}
        }
    }
}

/// Calls `f` on `root` and every node below it, with its JSON pointer, in
/// document order; iterative, so no nesting can overflow the stack.
pub fn for_each_node<'a>(root: &'a Value, path: &str, f: &mut impl FnMut(&str, &'a Value)) {
    let mut pending = vec![(path.to_owned(), root)];
    while let Some((path, node)) = pending.pop() {
        f(&path, node);
        if let Value::Object(map) = node {
            let start = pending.len();
            for_each_child(map, |step, child| pending.push((format!("{path}{step}"), child)));
            pending[start..].reverse();
        }
    }
}

/// A name escaped for use in a JSON pointer.
pub fn escape(name: &str) -> Cow<'_, str> {
    match name.contains(['~', '/']) {
        true => Cow::Owned(name.replace('~', "~0").replace('/', "~1")),
        false => Cow::Borrowed(name),
    }
}

/// The `$defs` entry a reference names, for references of the form `#/$defs/<name>`.
pub fn def_name(reference: &str) -> Option<String> {
    let name = reference.strip_prefix("#/$defs/")?;
    (!name.contains('/')).then(|| name.replace("~1", "/").replace("~0", "~"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_subschema_is_visited_with_its_pointer() {
        let schema = json!({
            "properties": {"a/b": {"items": {"type": "string"}}},
            "anyOf": [true, {"not": {}}],
            "enum": [{"type": "not a schema"}],
            "$defs": {"X": {"additionalProperties": false}}
        });
        let mut paths = Vec::new();
        for_each_node(&schema, "", &mut |path, _| paths.push(path.to_owned()));
        assert_eq!(
            paths,
            [
                "",
                "/properties/a~1b",
                "/properties/a~1b/items",
                "/anyOf/0",
                "/anyOf/1",
                "/anyOf/1/not",
                "/$defs/X",
                "/$defs/X/additionalProperties"
            ]
        );
    }

    #[test]
    fn def_names_are_read_from_local_references_only() {
        assert_eq!(def_name("#/$defs/Tree").as_deref(), Some("Tree"));
        assert_eq!(def_name("#/$defs/a~1b").as_deref(), Some("a/b"));
        assert_eq!(def_name("#/$defs/Tree/properties/x"), None);
        assert_eq!(def_name("https://x/y.json"), None);
    }
}
