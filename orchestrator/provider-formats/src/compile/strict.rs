//! The walk both strict compilers share (OpenAI structured outputs and
//! Anthropic strict tool use): every node an object schema, no blocker
//! keyword, `oneOf` read as `anyOf`, every object closed, a type on every
//! node; what each provider takes, refuses or rewrites of the other
//! keywords, and how it closes an object, are its [`StrictRules`].

use std::borrow::Cow;

use serde_json::Value;

use super::node::Node;
use super::notes;
use super::openai::{NotStrict, STRICT_BLOCKERS};
use super::prepared::{Entries, Prepared, set};

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
    fn close_object<'b>(&self, out: &mut Entries<'b>, node: Node<'b>, root: bool) -> Result<(), &'static str>;

    /// The keywords one of which gives a node its type.
    fn typed(&self) -> &'static [&'static str];
}

/// `node` (at `path`) in the strict form `rules` describe, or why it has
/// none; what it keeps as it is, it borrows from `node`.
pub(super) fn strict_node<'b>(
    rules: &impl StrictRules,
    node: Node<'b>,
    path: &Path<'_>,
) -> Result<Prepared<'b>, NotStrict> {
    let not = |why: &str| Err(NotStrict(format!("{why} at `{path}`")));
    let Some(entries) = node.entries() else {
        return not("a `true`/`false` schema");
    };
    if node.contains_key("anyOf") && node.contains_key("oneOf") {
        return not("both `anyOf` and `oneOf`");
    }
    // At most one keyword per source keyword, and the few closing adds.
    let mut out = Entries::with_capacity(node.entries().map_or(0, Iterator::count) + 3);
    let mut dropped: Vec<(&str, Cow<'b, Value>)> = Vec::new();
    for (keyword, value) in entries {
        let here = Path::Key(path, keyword);
        match keyword {
            k if STRICT_BLOCKERS.contains(&k) => return not(&format!("`{k}`")),
            "anyOf" | "oneOf" => {
                let Some(branches) = value.items() else { return not("a union that is not a list") };
                let branches = branches
                    .enumerate()
                    .map(|(i, branch)| strict_node(rules, branch, &Path::Index(&here, i)))
                    .collect::<Result<Vec<_>, _>>()?;
                set(&mut out, "anyOf", Prepared::Array(branches));
            }
            "properties" | "$defs" => {
                let Some(children) = value.entries() else { return not("properties that are not a map") };
                let mut compiled = Entries::with_capacity(value.entries().map_or(0, Iterator::count));
                for (name, child) in children {
                    // Names of a map are unique: no need to look for an earlier one.
                    compiled.push((name.into(), strict_node(rules, child, &Path::Key(&here, name))?));
                }
                set(&mut out, keyword, Prepared::Object(compiled));
            }
            "items" => set(&mut out, "items", strict_node(rules, value, &here)?),
            "additionalProperties" if value.value() == Some(&Value::Bool(false)) => {}
            "additionalProperties" => return not("a free-form map"),
            _ => {
                let value = value.to_value();
                match rules.keyword(keyword, &value) {
                    Keyword::Keep => set(&mut out, keyword, Prepared::Value(value)),
                    Keyword::Drop => dropped.push((keyword, value)),
                    Keyword::Skip => {}
                    Keyword::Rewrite(keyword, value) => set(&mut out, keyword, Prepared::Value(Cow::Owned(value))),
                    Keyword::Refuse(why) => return not(why),
                }
            }
        }
    }
    let phrases: Vec<String> = dropped.into_iter().filter_map(|(k, v)| notes::phrase(k, &v)).collect();
    if let Some(text) = notes::described(Node::Entries(&out).get("description").and_then(Node::as_str), &phrases) {
        set(&mut out, "description", Prepared::Value(Cow::Owned(Value::String(text))));
    }
    if (Node::Entries(&out).has_type("object") || Node::Entries(&out).contains_key("properties"))
        && let Err(why) = rules.close_object(&mut out, node, matches!(path, Path::Root))
    {
        return not(why);
    }
    let compiled = Node::Entries(&out);
    if compiled.has_type("array") && !compiled.contains_key("items") {
        return not("an array without `items`");
    }
    if !rules.typed().iter().any(|k| compiled.contains_key(k)) {
        return not("a schema without a type");
    }
    Ok(Prepared::Object(out))
}
