//! The walk both strict compilers share (OpenAI structured outputs and
//! Anthropic strict tool use): every node an object schema, no blocker
//! keyword, `oneOf` read as `anyOf`, every object closed, a type on every
//! node; what each provider takes, refuses or rewrites of the other
//! keywords, and how it closes an object, are its [`StrictRules`].

use serde_json::{Map, Value};

use super::notes;
use super::openai::{NotStrict, STRICT_BLOCKERS, has_type};

/// Where a node is in the schema, written out as a JSON pointer only when a
/// [`NotStrict`] names it (not once per keyword of every schema compiled).
#[derive(Clone, Copy)]
pub(super) enum Path<'a> {
    /// The root.
    Root,
    /// A keyword or name below a node.
    Key(&'a Path<'a>, &'a str),
    /// A list entry below a node.
    Index(&'a Path<'a>, usize),
}

impl std::fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Root => Ok(()),
            Self::Key(parent, key) => write!(f, "{parent}/{key}"),
            Self::Index(parent, index) => write!(f, "{parent}/{index}"),
        }
    }
}

/// What a provider does with a keyword the shared walk leaves to it.
pub(super) enum Keyword {
    /// Sent as it is.
    Keep,
    /// Left out, its meaning written into the description.
    Drop,
    /// Left out silently (the provider's closing writes it anew).
    Skip,
    /// Sent as this keyword and value instead.
    Rewrite(&'static str, Value),
    /// The schema cannot be strict, for this reason.
    Refuse(&'static str),
}

/// One provider's strict rules, for [`strict_node`].
pub(super) trait StrictRules {
    /// What becomes of `keyword: value` (not a blocker, union, map of
    /// subschemas, `items` or `additionalProperties`).
    fn keyword(&self, keyword: &str, value: &Value) -> Keyword;

    /// Closes the compiled object node `out` (made from `node`, the root when
    /// `root`), or says why it cannot be closed.
    fn close_object(
        &self,
        out: &mut Map<String, Value>,
        node: &Map<String, Value>,
        root: bool,
    ) -> Result<(), &'static str>;

    /// The keywords one of which gives a node its type.
    fn typed(&self) -> &'static [&'static str];
}

/// `node` (at `path`) in the strict form `rules` describe, or why it has none.
pub(super) fn strict_node(rules: &impl StrictRules, node: &Value, path: &Path<'_>) -> Result<Value, NotStrict> {
    let not = |why: &str| Err(NotStrict(format!("{why} at `{path}`")));
    let Value::Object(map) = node else {
        return not("a `true`/`false` schema");
    };
    if map.contains_key("anyOf") && map.contains_key("oneOf") {
        return not("both `anyOf` and `oneOf`");
    }
    let mut out = Map::new();
    let mut dropped: Vec<(&str, &Value)> = Vec::new();
    for (keyword, value) in map {
        let here = Path::Key(path, keyword);
        match keyword.as_str() {
            k if STRICT_BLOCKERS.contains(&k) => return not(&format!("`{k}`")),
            "anyOf" | "oneOf" => {
                let Value::Array(branches) = value else { return not("a union that is not a list") };
                let branches = branches
                    .iter()
                    .enumerate()
                    .map(|(i, branch)| strict_node(rules, branch, &Path::Index(&here, i)))
                    .collect::<Result<Vec<_>, _>>()?;
                out.insert("anyOf".into(), Value::Array(branches));
            }
            "properties" | "$defs" => {
                let Value::Object(children) = value else { return not("properties that are not a map") };
                let mut compiled = Map::new();
                for (name, child) in children {
                    compiled.insert(name.clone(), strict_node(rules, child, &Path::Key(&here, name))?);
                }
                out.insert(keyword.clone(), Value::Object(compiled));
            }
            "items" => {
                out.insert("items".into(), strict_node(rules, value, &here)?);
            }
            "additionalProperties" if value == &Value::Bool(false) => {}
            "additionalProperties" => return not("a free-form map"),
            _ => match rules.keyword(keyword, value) {
                Keyword::Keep => {
                    out.insert(keyword.clone(), value.clone());
                }
                Keyword::Drop => dropped.push((keyword, value)),
                Keyword::Skip => {}
                Keyword::Rewrite(keyword, value) => {
                    out.insert(keyword.into(), value);
                }
                Keyword::Refuse(why) => return not(why),
            },
        }
    }
    let phrases: Vec<String> = dropped.into_iter().filter_map(|(k, v)| notes::phrase(k, v)).collect();
    notes::append(&mut out, &phrases);
    if (has_type(&out, "object") || out.contains_key("properties"))
        && let Err(why) = rules.close_object(&mut out, map, matches!(path, Path::Root))
    {
        return not(why);
    }
    if has_type(&out, "array") && !out.contains_key("items") {
        return not("an array without `items`");
    }
    if !rules.typed().iter().any(|k| out.contains_key(*k)) {
        return not("a schema without a type");
    }
    Ok(Value::Object(out))
}
