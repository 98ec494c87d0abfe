//! Anthropic strict tool use (`strict: true`): `additionalProperties: false`
//! on every object, `anyOf` for `oneOf`, no recursion, none of the numeric,
//! length and pattern keywords (their meaning moves into descriptions),
//! `minItems` only 0 or 1, only the string formats strict mode takes.
//! Unlike OpenAI, optional properties stay optional. A schema that cannot
//! be made strict (free-form maps, "any value", `allOf`, tuples, recursion,
//! enums of objects) is kept non-strict.
//!
//! Strict schemas also cost from a per-request budget ([`StrictCost`],
//! [`MAX_STRICT_TOOLS`]): the listing decides which tools stay strict.

use std::collections::HashSet;

use std::borrow::Cow;

use serde_json::Value;

use super::node::Node;
use super::openai::Compiled;
use super::prepare::prepared;
use super::prepared::{Entries, Prepared, set};
use super::strict::{Keyword, Path, StrictRules, strict_node};
use super::walk::def_name;

/// Keywords Anthropic's strict mode takes as they are (`format` when in
/// [`ANTHROPIC_STRICT_FORMATS`], `minItems` when 0 or 1).
pub const ANTHROPIC_STRICT_KEYWORDS: &[&str] = &[
    "type",
    "description",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "$ref",
    "$defs",
    "format",
    "minItems",
];

/// String formats Anthropic's strict mode takes.
pub const ANTHROPIC_STRICT_FORMATS: &[&str] =
    &["date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"];

/// At most this many tools of one request may be strict.
pub const MAX_STRICT_TOOLS: usize = 20;
/// At most this many optional parameters (properties not in `required`, at
/// any depth) in all strict tools of one request together.
pub const MAX_STRICT_OPTIONAL: usize = 24;
/// At most this many union-typed parameters (nodes with `anyOf` or a type
/// array) in all strict tools of one request together.
pub const MAX_STRICT_UNIONS: usize = 16;

/// `schema` for Anthropic: strict when it can be, otherwise the prepared schema.
pub fn anthropic(schema: &Value) -> Compiled {
    with_anthropic(schema, |tree, strict| Compiled { schema: Node::from(tree).to_value().into_owned(), strict })
}

/// [`anthropic`]'s schema as a tree that borrows from `schema` (to be
/// written out as text), given to `f` with whether it is strict.
pub(crate) fn with_anthropic<R>(schema: &Value, f: impl FnOnce(&Prepared<'_>, bool) -> R) -> R {
    let prepared = prepared(schema);
    match anthropic_strict(Node::from(&prepared)) {
        Some(strict) => f(&strict, true),
        None => f(&prepared, false),
    }
}

/// The strict form of a prepared schema, if it has one.
fn anthropic_strict(prepared: Node<'_>) -> Option<Prepared<'_>> {
    if prepared.get("type").and_then(Node::as_str) != Some("object") || recursive(prepared) {
        return None;
    }
    strict_node(&Anthropic, prepared, &Path::Root).ok()
}

/// Whether a prepared schema's `$defs` refer to themselves, directly or through others.
pub fn is_recursive(schema: &Value) -> bool {
    recursive(Node::Value(schema))
}

/// [`is_recursive`] of a document or a prepared tree.
fn recursive(schema: Node<'_>) -> bool {
    let Some(defs) = schema.get("$defs") else { return false };
    let Some(entries) = defs.entries() else { return false };
    let refs = |def: Node<'_>| {
        let mut names = Vec::new();
        def.visit(|node| {
            if let Some(name) = node.get("$ref").and_then(Node::as_str).and_then(def_name) {
                names.push(name);
            }
        });
        names
    };
    entries.into_iter().any(|(start, def)| {
        let mut seen = HashSet::new();
        let mut pending = refs(def);
        while let Some(name) = pending.pop() {
            if name == start {
                return true;
            }
            if seen.insert(name.clone())
                && let Some(next) = defs.get(&name)
            {
                pending.extend(refs(next));
            }
        }
        false
    })
}

/// Anthropic's [`StrictRules`]: only [`ANTHROPIC_STRICT_KEYWORDS`] and
/// [`ANTHROPIC_STRICT_FORMATS`], `minItems` 0 or 1, enumerations of plain
/// values; optional properties stay optional.
struct Anthropic;

impl StrictRules for Anthropic {
    fn keyword(&self, keyword: &str, value: &Value) -> Keyword {
        match keyword {
            "enum" | "const" if !simple_values(value) => Keyword::Refuse("an enumeration of lists or objects"),
            "format" if !value.as_str().is_some_and(|f| ANTHROPIC_STRICT_FORMATS.contains(&f)) => Keyword::Drop,
            "minItems" if !matches!(value.as_u64(), Some(0 | 1)) => Keyword::Drop,
            k if ANTHROPIC_STRICT_KEYWORDS.contains(&k) => Keyword::Keep,
            _ => Keyword::Drop,
        }
    }

    fn close_object<'b>(&self, out: &mut Entries<'b>, node: Node<'b>, root: bool) -> Result<(), &'static str> {
        // An object that names no properties takes any entries: closing it would change its meaning.
        let closed = node.get("additionalProperties").and_then(Node::value) == Some(&Value::Bool(false));
        let named = Node::Entries(out).contains_key("properties");
        if !(named || root || closed) {
            return Err("an object without properties");
        }
        if !named {
            out.push(("properties".into(), Prepared::Object(Entries::new())));
        }
        set(out, "additionalProperties", Prepared::Value(Cow::Owned(Value::Bool(false))));
        Ok(())
    }

    fn typed(&self) -> &'static [&'static str] {
        &["type", "enum", "const", "anyOf", "$ref"]
    }
}

/// Whether an `enum` list (or a `const` value) holds only strings, numbers, booleans and nulls.
fn simple_values(value: &Value) -> bool {
    let simple = |v: &Value| !matches!(v, Value::Array(_) | Value::Object(_));
    match value {
        Value::Array(values) => values.iter().all(simple),
        other => simple(other),
    }
}

/// What one strict schema spends of a request's budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StrictCost {
    /// Properties not listed in their object's `required`, at any depth.
    pub optional: usize,
    /// Nodes that use `anyOf` or a type array.
    pub unions: usize,
}

impl StrictCost {
    /// The cost of `schema`, counted as written (a definition once, however often it is referred to).
    pub fn of(schema: &Value) -> Self {
        Self::of_node(Node::Value(schema))
    }

    /// [`Self::of`] a document or a compiled tree.
    pub(crate) fn of_node(schema: Node<'_>) -> Self {
        let mut cost = Self::default();
        schema.visit(|node| {
            if !node.is_object() {
                return;
            }
            if node.contains_key("anyOf")
                || matches!(node.get("type"), Some(Node::Value(Value::Array(_)) | Node::Items(_)))
            {
                cost.unions += 1;
            }
            if let Some(properties) = node.get("properties").and_then(Node::entries) {
                let required: Vec<&str> = node
                    .get("required")
                    .and_then(Node::items)
                    .map_or(Vec::new(), |r| r.filter_map(Node::as_str).collect());
                cost.optional += properties.filter(|(name, _)| !required.contains(name)).count();
            }
        });
        cost
    }
}

/// The strict budget of one request: tools, optional and union parameters left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StrictBudget {
    tools: usize,
    spent: StrictCost,
}

impl Default for StrictBudget {
    fn default() -> Self {
        Self::new()
    }
}

impl StrictBudget {
    /// A whole request's budget, nothing spent.
    pub fn new() -> Self {
        Self { tools: 0, spent: StrictCost::default() }
    }

    /// Whether no further strict tool fits, whatever its cost.
    pub fn is_full(&self) -> bool {
        self.tools >= MAX_STRICT_TOOLS
    }

    /// Whether one more strict tool of `cost` fits; if it does, it is spent.
    pub fn admit(&mut self, cost: StrictCost) -> bool {
        let optional = self.spent.optional + cost.optional;
        let unions = self.spent.unions + cost.unions;
        let fits = self.tools < MAX_STRICT_TOOLS && optional <= MAX_STRICT_OPTIONAL && unions <= MAX_STRICT_UNIONS;
        if fits {
            self.tools += 1;
            self.spent = StrictCost { optional, unions };
        }
        fits
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::prepare;
    use serde_json::json;

    #[test]
    fn optional_fields_stay_optional_and_limits_move_into_descriptions() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "query": {"type": "string", "format": "uri", "maxLength": 100, "pattern": "^h"},
                "max_results": {"type": ["integer", "null"], "format": "uint8", "minimum": 1, "default": 5},
                "mode": {"oneOf": [{"const": "car"}, {"const": "train"}]},
                "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2}
            },
            "required": ["query"]
        });
        let compiled = anthropic(&schema);
        assert!(compiled.strict);
        assert_eq!(
            compiled.schema,
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "format": "uri",
                              "description": "(at most 100 characters; matching the regular expression \"^h\")"},
                    "max_results": {"type": ["integer", "null"], "description": "(at least 1; default: 5)"},
                    "mode": {"anyOf": [{"const": "car"}, {"const": "train"}]},
                    "tags": {"type": "array", "items": {"type": "string"}, "description": "(at least 2 items)"}
                },
                "required": ["query"],
                "additionalProperties": false
            })
        );
        assert_eq!(StrictCost::of(&compiled.schema), StrictCost { optional: 3, unions: 2 });
    }

    #[test]
    fn what_cannot_be_strict_stays_as_prepared() {
        for property in [
            json!({"type": "object", "additionalProperties": {"type": "integer"}}),
            json!({"type": "object"}),
            json!(true),
            json!({"description": "anything"}),
            json!({"allOf": [{"type": "string"}, {"minLength": 1}]}),
            json!({"type": "array"}),
            json!({"enum": [{"a": 1}]}),
            json!({"$ref": "#/$defs/Tree"}),
        ] {
            let schema = json!({"type": "object", "properties": {"p": property},
                "$defs": {"Tree": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}}}}});
            let compiled = anthropic(&schema);
            assert!(!compiled.strict, "{property}");
            assert_eq!(compiled.schema, prepare(&schema));
        }
        let no_arguments = anthropic(&json!({"type": "object"}));
        assert_eq!(no_arguments.schema, json!({"type": "object", "properties": {}, "additionalProperties": false}));
    }

    #[test]
    fn the_budget_admits_tools_in_order_while_everything_fits() {
        let mut budget = StrictBudget::new();
        assert!(budget.admit(StrictCost { optional: 20, unions: 0 }));
        assert!(!budget.admit(StrictCost { optional: 5, unions: 0 }));
        assert!(budget.admit(StrictCost { optional: 4, unions: 16 }));
        assert!(!budget.admit(StrictCost { optional: 0, unions: 1 }));
        for _ in 2..MAX_STRICT_TOOLS {
            assert!(!budget.is_full());
            assert!(budget.admit(StrictCost::default()));
        }
        assert!(budget.is_full());
        assert!(!budget.admit(StrictCost::default()));
    }
}
