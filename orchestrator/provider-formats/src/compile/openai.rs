//! OpenAI structured outputs (`strict: true`): `additionalProperties: false`
//! on every object, every property required (optional ones take `null`),
//! `anyOf` for `oneOf`, `enum` for `const`, only the formats and keywords
//! strict mode takes; the rest moves into descriptions. A schema that
//! cannot be made strict (free-form maps, "any value", `allOf`, tuples, too
//! big) is kept non-strict rather than dropped.

use std::borrow::Cow;

use serde_json::{Value, json};

use super::node::Node;
use super::prepare::prepared;
use super::prepared::{Entries, Prepared, entry_mut, set};
use super::size::Size;
use super::strict::{Keyword, Path, StrictRules, strict_node};

/// String formats strict mode accepts.
pub const STRICT_FORMATS: &[&str] =
    &["date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"];

/// Keywords strict mode takes as they are (`format` when in [`STRICT_FORMATS`]).
pub const STRICT_KEYWORDS: &[&str] = &[
    "type",
    "description",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "anyOf",
    "$ref",
    "$defs",
    "format",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
];

/// Keywords whose meaning strict mode cannot express at all.
pub const STRICT_BLOCKERS: &[&str] = &[
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "$dynamicRef",
    "$recursiveRef",
    "patternProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "propertyNames",
    "prefixItems",
    "contains",
    "additionalItems",
];

/// Strict mode's limits: object nesting, properties and enumeration values.
pub const MAX_DEPTH: usize = 10;
/// See [`MAX_DEPTH`].
pub const MAX_PROPERTIES: usize = 5000;
/// See [`MAX_DEPTH`].
pub const MAX_ENUM_VALUES: usize = 1000;

/// A schema compiled for OpenAI, and whether it is strict.
#[derive(Debug, Clone, PartialEq)]
pub struct Compiled {
    /// The `parameters` to send.
    pub schema: Value,
    /// Whether to send `strict: true`.
    pub strict: bool,
}

/// `schema` for OpenAI: strict when it can be, otherwise the prepared schema with `strict: false`.
pub fn openai(schema: &Value) -> Compiled {
    with_openai(schema, |tree, strict| Compiled { schema: Node::from(tree).to_value().into_owned(), strict })
}

/// [`openai`]'s schema as a tree that borrows from `schema` (to be written
/// out as text), given to `f` with whether it is strict.
pub(crate) fn with_openai<R>(schema: &Value, f: impl FnOnce(&Prepared<'_>, bool) -> R) -> R {
    let prepared = prepared(schema);
    match strict_tree(Node::from(&prepared)) {
        Ok(strict) => f(&strict, true),
        Err(_) => f(&prepared, false),
    }
}

/// Why a schema cannot be strict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotStrict(pub String);

/// The strict form of a prepared schema, or why there is none.
pub fn strict_schema(prepared: &Value) -> Result<Value, NotStrict> {
    strict_tree(Node::Value(prepared)).map(|strict| Node::from(&strict).to_value().into_owned())
}

/// [`strict_schema`] as a tree that borrows from `prepared`.
fn strict_tree(prepared: Node<'_>) -> Result<Prepared<'_>, NotStrict> {
    if prepared.get("type").and_then(Node::as_str) != Some("object") {
        return Err(NotStrict("the root is not `type: object`".into()));
    }
    if prepared.contains_key("anyOf") || prepared.contains_key("oneOf") {
        return Err(NotStrict("the root is a union".into()));
    }
    let out = strict_node(&OpenAi, prepared, &Path::Root)?;
    let size = Size::of(Node::from(&out));
    if size.depth > MAX_DEPTH || size.properties > MAX_PROPERTIES || size.enum_values > MAX_ENUM_VALUES {
        return Err(NotStrict(format!("too big for strict mode: {size:?}")));
    }
    Ok(out)
}

/// OpenAI's [`StrictRules`]: `const` becomes a one-value `enum`, `required`
/// is written anew (every property, the optional ones nullable), only
/// [`STRICT_KEYWORDS`] and [`STRICT_FORMATS`] are sent.
struct OpenAi;

impl StrictRules for OpenAi {
    fn keyword(&self, keyword: &str, value: &Value) -> Keyword {
        match keyword {
            "const" => Keyword::Rewrite("enum", json!([value])),
            "required" => Keyword::Skip,
            "format" if !value.as_str().is_some_and(|f| STRICT_FORMATS.contains(&f)) => Keyword::Drop,
            k if STRICT_KEYWORDS.contains(&k) => Keyword::Keep,
            _ => Keyword::Drop,
        }
    }

    fn close_object<'b>(&self, out: &mut Entries<'b>, node: Node<'b>, _root: bool) -> Result<(), &'static str> {
        close_object(out, node.get("required"));
        match Node::Entries(out)
            .get("properties")
            .and_then(Node::entries)
            .is_none_or(|mut names| names.next().is_none())
        {
            true => Err("an object without properties"),
            false => Ok(()),
        }
    }

    fn typed(&self) -> &'static [&'static str] {
        &["type", "enum", "anyOf", "$ref"]
    }
}

/// `additionalProperties: false` and every property required, the
/// optional ones made nullable.
fn close_object<'b>(out: &mut Entries<'b>, required: Option<Node<'b>>) {
    let required: Vec<&str> =
        required.and_then(Node::items).map_or(Vec::new(), |names| names.filter_map(Node::as_str).collect());
    let mut all = Vec::new();
    if let Some(Prepared::Object(properties)) = entry_mut(out, "properties") {
        for (name, property) in properties.iter_mut() {
            if !required.contains(&&**name) {
                make_nullable(property);
            }
            all.push(Value::String(name.clone().into_owned()));
        }
    }
    set(out, "required", Prepared::Value(Cow::Owned(Value::Array(all))));
    set(out, "additionalProperties", Prepared::Value(Cow::Owned(Value::Bool(false))));
}

/// Lets a compiled strict node also take `null`.
fn make_nullable(node: &mut Prepared<'_>) {
    let Prepared::Object(map) = node else { return };
    if let Some(Prepared::Value(values)) = entry_mut(map, "enum")
        && values.as_array().is_some_and(|values| !values.contains(&Value::Null))
        && let Value::Array(values) = values.to_mut()
    {
        values.push(Value::Null);
    }
    match entry_mut(map, "type") {
        Some(Prepared::Value(t)) => {
            let nullable = match &**t {
                Value::String(name) if name != "null" => Some(json!([name, "null"])),
                Value::Array(types) if !types.iter().any(|t| t == "null") => {
                    Some(Value::Array(types.iter().cloned().chain([Value::from("null")]).collect()))
                }
                _ => None,
            };
            if let Some(nullable) = nullable {
                *t = Cow::Owned(nullable);
            }
        }
        Some(_) => {}
        None => {
            let null_branch = || Prepared::Value(Cow::Owned(json!({"type": "null"})));
            if let Some(Prepared::Array(branches)) = entry_mut(map, "anyOf") {
                let is_null =
                    |branch: &Prepared<'_>| Node::from(branch).get("type").and_then(Node::as_str) == Some("null");
                if !branches.iter().any(is_null) {
                    branches.push(null_branch());
                }
            } else if Node::Entries(map).contains_key("$ref") {
                let reference = std::mem::take(map);
                map.push(("anyOf".into(), Prepared::Array(vec![Prepared::Object(reference), null_branch()])));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::prepare;

    #[test]
    fn optional_fields_become_required_nullable_and_objects_close() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "query": {"type": "string", "format": "uri", "maxLength": 100},
                "max_results": {"type": "integer", "format": "uint8", "minimum": 1, "maximum": 20, "default": 5},
                "mode": {"oneOf": [{"const": "car"}, {"const": "train"}]},
                "home": {"$ref": "#/$defs/Place"},
                "style": {"type": "string", "enum": ["plain", "formal"]}
            },
            "required": ["query", "home"],
            "$defs": {"Place": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}
        });
        let compiled = openai(&schema);
        assert!(compiled.strict);
        assert_eq!(
            compiled.schema,
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "(format: uri; at most 100 characters)"},
                    "max_results": {"type": ["integer", "null"], "minimum": 1, "maximum": 20, "description": "(default: 5)"},
                    "mode": {"anyOf": [{"enum": ["car"]}, {"enum": ["train"]}, {"type": "null"}]},
                    "home": {"$ref": "#/$defs/Place"},
                    "style": {"type": ["string", "null"], "enum": ["plain", "formal", null]}
                },
                "required": ["query", "max_results", "mode", "home", "style"],
                "additionalProperties": false,
                "$defs": {"Place": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"], "additionalProperties": false}}
            })
        );
    }

    #[test]
    fn an_optional_reference_becomes_a_union_with_null() {
        let schema = json!({"type": "object", "properties": {"p": {"$ref": "#/$defs/P"}},
            "$defs": {"P": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}}});
        let compiled = openai(&schema);
        assert!(compiled.strict);
        assert_eq!(compiled.schema["properties"]["p"], json!({"anyOf": [{"$ref": "#/$defs/P"}, {"type": "null"}]}));
    }

    #[test]
    fn what_cannot_be_strict_stays_non_strict_and_says_where() {
        for (property, why) in [
            (
                json!({"type": "object", "additionalProperties": {"type": "integer"}}),
                "a free-form map at `/properties/p`",
            ),
            (json!(true), "a `true`/`false` schema at `/properties/p`"),
            (json!({"allOf": [{"type": "string"}, {"minLength": 1}]}), "`allOf` at `/properties/p`"),
            (json!({"type": "array"}), "an array without `items` at `/properties/p`"),
            (json!({"description": "anything"}), "a schema without a type at `/properties/p`"),
        ] {
            let schema = prepare(&json!({"type": "object", "properties": {"p": property}}));
            assert_eq!(strict_schema(&schema), Err(NotStrict(why.into())));
            let compiled = openai(&schema);
            assert!(!compiled.strict);
            assert_eq!(compiled.schema, schema);
        }
    }

    #[test]
    fn older_drafts_dependencies_and_dynamic_references_keep_the_schema_non_strict() {
        let schema = json!({"type": "object", "properties": {"card": {"type": "string"}, "cvv": {"type": "string"}},
            "dependencies": {"card": ["cvv"]}});
        assert_eq!(strict_schema(&prepare(&schema)), Err(NotStrict("`dependencies` at ``".into())));
        let compiled = openai(&schema);
        assert!(!compiled.strict);
        assert_eq!(compiled.schema["dependencies"], json!({"card": ["cvv"]}));
        // The 2019-09 and 2020-12 dynamic references say which schema a value
        // follows: dropping them would leave it unchecked.
        for keyword in ["$recursiveRef", "$dynamicRef"] {
            let node = json!({"type": "object", "properties": {"up": {keyword: "#"}}, "required": ["up"]});
            assert_eq!(strict_schema(&node), Err(NotStrict(format!("`{keyword}` at `/properties/up`"))));
        }
    }

    #[test]
    fn too_deep_nesting_is_not_strict() {
        let mut schema = json!({"type": "string"});
        for _ in 0..=MAX_DEPTH {
            schema = json!({"type": "object", "properties": {"inner": schema}, "required": ["inner"]});
        }
        assert!(strict_schema(&schema).unwrap_err().0.starts_with("too big"));
    }
}
