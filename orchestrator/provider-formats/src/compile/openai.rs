//! OpenAI structured outputs (`strict: true`): `additionalProperties: false`
//! on every object, every property required (optional ones take `null`),
//! `anyOf` for `oneOf`, `enum` for `const`, only the formats and keywords
//! strict mode takes; the rest moves into descriptions. A schema that
//! cannot be made strict (free-form maps, "any value", `allOf`, tuples, too
//! big) is kept non-strict rather than dropped.

use serde_json::{Map, Value, json};

use super::prepare::prepare;
use super::size::measure;
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
    let prepared = prepare(schema);
    match strict_schema(&prepared) {
        Ok(strict) => Compiled { schema: strict, strict: true },
        Err(_) => Compiled { schema: prepared, strict: false },
    }
}

/// Why a schema cannot be strict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotStrict(pub String);

/// The strict form of a prepared schema, or why there is none.
pub fn strict_schema(prepared: &Value) -> Result<Value, NotStrict> {
    if prepared.get("type").and_then(Value::as_str) != Some("object") {
        return Err(NotStrict("the root is not `type: object`".into()));
    }
    let out = strict_node(&OpenAi, prepared, &Path::Root)?;
    let size = measure(&out);
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

    fn close_object(
        &self,
        out: &mut Map<String, Value>,
        node: &Map<String, Value>,
        _root: bool,
    ) -> Result<(), &'static str> {
        close_object(out, node.get("required"));
        match out.get("properties").and_then(Value::as_object).is_none_or(Map::is_empty) {
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
fn close_object(out: &mut Map<String, Value>, required: Option<&Value>) {
    let required: Vec<&str> =
        required.and_then(Value::as_array).map_or(Vec::new(), |names| names.iter().filter_map(Value::as_str).collect());
    let mut all = Vec::new();
    if let Some(Value::Object(properties)) = out.get_mut("properties") {
        for (name, property) in properties.iter_mut() {
            if !required.contains(&name.as_str()) {
                make_nullable(property);
            }
            all.push(Value::String(name.clone()));
        }
    }
    out.insert("required".into(), Value::Array(all));
    out.insert("additionalProperties".into(), Value::Bool(false));
}

/// Whether the node's `type` is or includes `name`.
pub fn has_type(node: &Map<String, Value>, name: &str) -> bool {
    match node.get("type") {
        Some(Value::String(t)) => t == name,
        Some(Value::Array(types)) => types.iter().any(|t| t == name),
        _ => false,
    }
}

/// Lets a compiled strict node also take `null`.
fn make_nullable(node: &mut Value) {
    let Value::Object(map) = node else { return };
    if let Some(Value::Array(values)) = map.get_mut("enum")
        && !values.contains(&Value::Null)
    {
        values.push(Value::Null);
    }
    match map.get_mut("type") {
        Some(Value::String(t)) if t != "null" => {
            let t = std::mem::take(t);
            map.insert("type".into(), json!([t, "null"]));
        }
        Some(Value::Array(types)) if !types.iter().any(|t| t == "null") => types.push("null".into()),
        Some(_) => {}
        None => {
            let null_branch = json!({"type": "null"});
            if let Some(Value::Array(branches)) = map.get_mut("anyOf") {
                if !branches.iter().any(|b| b.get("type").is_some_and(|t| t == "null")) {
                    branches.push(null_branch);
                }
            } else if map.contains_key("$ref") {
                let reference = std::mem::take(map);
                map.insert("anyOf".into(), json!([reference, null_branch]));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn too_deep_nesting_is_not_strict() {
        let mut schema = json!({"type": "string"});
        for _ in 0..=MAX_DEPTH {
            schema = json!({"type": "object", "properties": {"inner": schema}, "required": ["inner"]});
        }
        assert!(strict_schema(&schema).unwrap_err().0.starts_with("too big"));
    }
}
