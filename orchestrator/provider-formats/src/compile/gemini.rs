//! Gemini's `parameters`, an OpenAPI 3.0 subset: references inlined
//! (recursion cut), one `type` per node with `nullable` for null, `enum` of
//! strings only, `const` as a one-value `enum`, safe property names, and
//! every keyword outside the subset dropped, its meaning moved into the
//! description.

use std::borrow::Cow;
use std::collections::HashSet;

use serde_json::{Map, Value, json};

use super::keywords::{Keywords, items, members};
use super::notes;
use super::prepare::prepare;
use super::walk::{MAX_INLINED_NODES, MAX_NESTING, def_name, omitted};
use crate::names::gemini_property_names;

/// The keywords Gemini's `Schema` takes.
pub const GEMINI_KEYWORDS: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "properties",
    "required",
    "items",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "minProperties",
    "maxProperties",
    "anyOf",
];

/// The only `format`s Gemini takes (on strings).
pub const GEMINI_FORMATS: &[&str] = &["enum", "date-time"];

/// The value types a Gemini node may have.
pub const GEMINI_TYPES: &[&str] = &["string", "number", "integer", "boolean", "array", "object"];

/// `schema` as Gemini `parameters`.
pub fn gemini(schema: &Value) -> Value {
    let mut prepared = prepare(schema);
    // The definitions are taken out (the other keywords keep their order) and the rest is moved, not copied.
    let defs = match &mut prepared {
        Value::Object(root) => root.shift_remove("$defs"),
        _ => None,
    };
    let no_defs = Map::new();
    let defs = defs.as_ref().and_then(Value::as_object).unwrap_or(&no_defs);
    let inlined = Inliner { defs, stack: Vec::new(), depth: 0, nodes: 0 }.inline(Cow::Owned(prepared));
    let mut left = MAX_INLINED_NODES;
    Value::Object(convert(inlined, &mut left))
}

/// The state of one inlining: the definitions, those being inlined, how
/// deep it is and how many nodes it has made.
struct Inliner<'a> {
    defs: &'a Map<String, Value>,
    stack: Vec<String>,
    depth: usize,
    nodes: usize,
}

impl<'a> Inliner<'a> {
    /// `node` with every reference replaced by its definition; a reference
    /// to a definition already being inlined (or past [`MAX_NESTING`] levels
    /// or [`MAX_INLINED_NODES`] nodes) becomes a plain object that says so.
    /// An owned node is moved into the result, a borrowed one (a definition) copied.
    fn inline(&mut self, node: Cow<'a, Value>) -> Value {
        if self.depth >= MAX_NESTING {
            return Value::Object(omitted());
        }
        self.nodes += 1;
        let map = match Keywords::of(node) {
            Ok(map) => map,
            Err(other) => return other,
        };
        if let Some(name) = map.get("$ref").and_then(Value::as_str).and_then(def_name) {
            let Some(def) = self.defs.get(&name) else { return json!({}) };
            if self.stack.contains(&name) || self.nodes >= MAX_INLINED_NODES {
                let about = def.get("description").and_then(Value::as_str).map_or(String::new(), |d| format!("{d} "));
                return json!({"type": "object", "description": format!("{about}(a nested `{name}`; its fields as above)")});
            }
            self.stack.push(name);
            self.depth += 1;
            let out = self.inline(Cow::Borrowed(def));
            self.depth -= 1;
            self.stack.pop();
            return out;
        }
        self.depth += 1;
        let mut out = Map::new();
        for (keyword, value) in map.into_entries() {
            if keyword == "$defs" {
                continue;
            }
            let value = match &*keyword {
                "properties" => match members(value) {
                    Ok(children) => {
                        Value::Object(children.map(|(name, child)| (name.into_owned(), self.inline(child))).collect())
                    }
                    Err(other) => other.into_owned(),
                },
                "anyOf" | "oneOf" | "allOf" | "prefixItems" => match items(value) {
                    Ok(items) => Value::Array(items.map(|item| self.inline(item)).collect()),
                    Err(other) => other.into_owned(),
                },
                "items" | "additionalProperties" if value.is_object() => self.inline(value),
                _ => value.into_owned(),
            };
            out.insert(keyword.into_owned(), value);
        }
        self.depth -= 1;
        Value::Object(out)
    }
}

/// The keywords an untyped ("any value") Gemini node keeps.
pub const GEMINI_UNTYPED_KEYWORDS: &[&str] = &["title", "description", "nullable"];

/// A node Gemini reads as "any value": a schema without `type` (not
/// `type: object`, which would refuse strings and numbers), its other
/// keywords said in the description.
fn any_value(mut base: Map<String, Value>) -> Map<String, Value> {
    base.remove("type");
    notes::move_to_description(&mut base, |keyword, _| GEMINI_UNTYPED_KEYWORDS.contains(&keyword));
    notes::append(&mut base, &["any JSON value".to_owned()]);
    base
}

/// One inlined node in Gemini's subset; `left` is how many more nodes the
/// conversion may make (unions copy their other keywords into each branch),
/// past which nodes are left out, saying so.
fn convert(node: Value, left: &mut usize) -> Map<String, Value> {
    let Some(rest) = left.checked_sub(1) else { return omitted() };
    *left = rest;
    let Value::Object(mut map) = node else {
        return any_value(Map::new());
    };
    if let Some(Value::Array(parts)) = map.remove("allOf") {
        for part in parts.iter().filter_map(Value::as_object) {
            merge_all_of(&mut map, part);
        }
    }
    if let Some(value) = map.remove("const")
        && !map.contains_key("enum")
    {
        map.insert("enum".into(), json!([value]));
    }
    let mut nullable = map.remove("nullable") == Some(Value::Bool(true));
    let mut branches: Vec<Value> = ["anyOf", "oneOf"]
        .iter()
        .filter_map(|k| map.remove(*k))
        .filter_map(|v| if let Value::Array(items) = v { Some(items) } else { None })
        .flatten()
        .collect();
    let before = branches.len();
    branches.retain(|b| b.get("type").and_then(Value::as_str) != Some("null"));
    nullable |= branches.len() < before;
    match branches.len() {
        0 => {}
        1 => {
            // A `true` branch adds nothing to the node's own keywords.
            let mut only = match branches.remove(0) {
                Value::Object(only) => only,
                _ => Map::new(),
            };
            only.extend(map);
            return finish(convert(Value::Object(only), left), nullable);
        }
        _ => return finish(distribute(map, branches, left), nullable),
    }
    let types: Vec<String> = match map.remove("type") {
        Some(Value::String(t)) => vec![t],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        _ => Vec::new(),
    };
    let before = types.len();
    let types: Vec<String> = types.into_iter().filter(|t| t != "null").collect();
    nullable |= types.len() < before;
    if let Some(Value::Array(values)) = map.get_mut("enum") {
        let before = values.len();
        values.retain(|v| !v.is_null());
        nullable |= values.len() < before;
    }
    let string_enum = match map.get("enum") {
        Some(Value::Array(values)) => !values.is_empty() && values.iter().all(Value::is_string),
        _ => false,
    };
    let kind = if string_enum {
        "string".to_owned()
    } else {
        match types.as_slice() {
            [one] => one.clone(),
            [] => match inferred_type(&map) {
                Some(t) => t.to_owned(),
                None => return finish(any_value(keep_only(map)), nullable),
            },
            several => {
                let branches = several.iter().map(|t| json!({ "type": t })).collect();
                return finish(distribute(map, branches, left), nullable);
            }
        }
    };
    map.insert("type".into(), kind.clone().into());
    if kind != "string" || !string_enum {
        let values = map.remove("enum");
        let phrase = values.as_ref().and_then(|v| notes::phrase("enum", v));
        notes::append(&mut map, phrase.as_slice());
    }
    if kind == "object" {
        convert_object(&mut map, left);
    }
    if kind == "array" {
        convert_array(&mut map, left);
    }
    finish(keep_only(map), nullable)
}

/// A union of `branches`, each with the node's other keywords laid under
/// it (`A and (B or C)` is `(A and B) or (A and C)`); the description stays on the union.
fn distribute(mut map: Map<String, Value>, branches: Vec<Value>, left: &mut usize) -> Map<String, Value> {
    let mut union = Map::new();
    if let Some(description) = map.remove("description") {
        union.insert("description".into(), description);
    }
    let converted = branches
        .into_iter()
        .map(|branch| {
            let mut merged = map.clone();
            if let Value::Object(branch) = branch {
                merged.extend(branch);
            }
            Value::Object(convert(Value::Object(merged), left))
        })
        .collect();
    union.insert("anyOf".into(), Value::Array(converted));
    union
}

/// The type a node without `type` has, judged by its other keywords.
fn inferred_type(map: &Map<String, Value>) -> Option<&'static str> {
    if map.contains_key("properties") || map.contains_key("additionalProperties") {
        Some("object")
    } else if map.contains_key("items") || map.contains_key("prefixItems") {
        Some("array")
    } else if let Some(Value::Array(values)) = map.get("enum") {
        values.first().map(|first| match first {
            Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
            Value::Number(_) => "number",
            Value::Bool(_) => "boolean",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
            _ => "string",
        })
    } else {
        None
    }
}

/// Lays an `allOf` part over a node: properties and `required` are joined,
/// other keywords kept where the node has none.
fn merge_all_of(map: &mut Map<String, Value>, part: &Map<String, Value>) {
    for (keyword, value) in part {
        match (keyword.as_str(), map.get_mut(keyword), value) {
            ("properties", Some(Value::Object(mine)), Value::Object(theirs)) => {
                mine.extend(theirs.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
            ("required", Some(Value::Array(mine)), Value::Array(theirs)) => mine.extend(theirs.iter().cloned()),
            (_, None, _) => {
                map.insert(keyword.clone(), value.clone());
            }
            _ => {}
        }
    }
}

/// Properties converted under safe names, `required` renamed to match, a
/// map's value type described in words.
fn convert_object(map: &mut Map<String, Value>, left: &mut usize) {
    let mut renames = Vec::new();
    if let Some(Value::Object(properties)) = map.get_mut("properties") {
        let mut properties = std::mem::take(properties);
        let names: Vec<(String, String)> =
            gemini_property_names(&properties).into_iter().map(|(name, safe)| (name.to_owned(), safe)).collect();
        let mut converted = Map::new();
        for (name, safe) in names {
            let property = properties.get_mut(&name).map_or(Value::Null, Value::take);
            converted.insert(safe.clone(), Value::Object(convert(property, left)));
            renames.push((name, safe));
        }
        map.insert("properties".into(), Value::Object(converted));
    }
    if let Some(Value::Array(required)) = map.remove("required") {
        let present: HashSet<&str> = required.iter().filter_map(Value::as_str).collect();
        let required: Vec<Value> = renames
            .iter()
            .filter(|(name, _)| present.contains(name.as_str()))
            .map(|(_, safe)| Value::String(safe.clone()))
            .collect();
        if !required.is_empty() {
            map.insert("required".into(), Value::Array(required));
        }
    }
    if let Some(values) = map.remove("additionalProperties")
        && values != Value::Bool(false)
    {
        let of = match values.get("type").and_then(Value::as_str) {
            Some(t) => format!("{t} values"),
            None => "values of any type".to_owned(),
        };
        notes::append(map, &[format!("takes further entries with {of}")]);
    }
}

/// Items converted; a tuple's items as a union of its positions; an array
/// without items gets "any value" items.
fn convert_array(map: &mut Map<String, Value>, left: &mut usize) {
    let items = match (map.remove("prefixItems"), map.remove("items")) {
        (Some(Value::Array(positions)), _) if !positions.is_empty() => {
            notes::append(map, &[format!("exactly {} items, in order", positions.len())]);
            if positions.len() == 1 { positions[0].clone() } else { json!({"anyOf": positions}) }
        }
        (_, Some(Value::Array(positions))) if !positions.is_empty() => json!({"anyOf": positions}),
        (_, Some(item @ Value::Object(_))) => item,
        _ => json!({}),
    };
    map.insert("items".into(), Value::Object(convert(items, left)));
}

/// `map` with only Gemini's keywords left, the rest moved into the
/// description; `format` only where Gemini takes it.
fn keep_only(mut map: Map<String, Value>) -> Map<String, Value> {
    let is_string = map.get("type").and_then(Value::as_str) == Some("string");
    notes::move_to_description(&mut map, |keyword, value| match keyword {
        "format" => is_string && value.as_str().is_some_and(|f| GEMINI_FORMATS.contains(&f)),
        _ => GEMINI_KEYWORDS.contains(&keyword),
    });
    map
}

/// Marks the node nullable when a null was folded away.
fn finish(mut map: Map<String, Value>, nullable: bool) -> Map<String, Value> {
    if nullable {
        map.insert("nullable".into(), Value::Bool(true));
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_inlined_and_nulls_fold_into_nullable() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "limit": {"type": ["integer", "null"], "format": "uint32", "minimum": 0, "exclusiveMaximum": 100},
                "mode": {"anyOf": [{"$ref": "#/$defs/Mode"}, {"type": "null"}], "description": "How."},
                "kind": {"const": "circle"},
                "size": {"enum": [1, 2, 3]},
                "tags": {"type": "object", "additionalProperties": {"type": "string"}},
                "max-results": {"type": "integer", "default": 5}
            },
            "required": ["kind", "max-results"],
            "$defs": {"Mode": {"type": "string", "enum": ["car", "train"]}}
        });
        assert_eq!(
            gemini(&schema),
            json!({
                "type": "object",
                "properties": {
                    "limit": {"type": "integer", "minimum": 0, "description": "(less than 100)", "nullable": true},
                    "mode": {"type": "string", "enum": ["car", "train"], "description": "How.", "nullable": true},
                    "kind": {"enum": ["circle"], "type": "string"},
                    "size": {"type": "integer", "description": "(one of 1, 2, 3)"},
                    "tags": {"type": "object", "description": "(takes further entries with string values)"},
                    "max_results": {"type": "integer", "description": "(default: 5)"}
                },
                "required": ["kind", "max_results"]
            })
        );
    }

    #[test]
    fn recursion_is_cut_and_unions_keep_one_type_per_branch() {
        let schema = json!({
            "type": "object",
            "properties": {
                "tree": {"$ref": "#/$defs/Tree"},
                "either": {"type": ["string", "integer"]},
                "shape": {"oneOf": [
                    {"type": "object", "properties": {"r": {"type": "number"}}},
                    {"type": "object", "properties": {"side": {"type": "number"}}}
                ]},
                "anything": true
            },
            "$defs": {"Tree": {"type": "object", "description": "A tree.", "properties": {
                "kids": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}
            }}}
        });
        let out = gemini(&schema);
        let kids = &out["properties"]["tree"]["properties"]["kids"]["items"];
        assert_eq!(kids, &json!({"type": "object", "description": "A tree. (a nested `Tree`; its fields as above)"}));
        assert_eq!(out["properties"]["either"], json!({"anyOf": [{"type": "string"}, {"type": "integer"}]}));
        assert_eq!(out["properties"]["shape"]["anyOf"][1]["properties"]["side"], json!({"type": "number"}));
        assert_eq!(out["properties"]["anything"], json!({"description": "(any JSON value)"}));
        let any = gemini(&json!({"type": "object", "properties": {"v": {"description": "A value.", "minLength": 2}}}));
        assert_eq!(any["properties"]["v"], json!({"description": "A value. (at least 2 characters) (any JSON value)"}));
    }
}
