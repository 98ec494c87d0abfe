//! Arguments from a model, mapped back to what the tool's own schema says:
//! Gemini-safe property names renamed to the real ones, and the `null`s that
//! strict mode makes a model send for optional fields left out again (a
//! field that was optional but not nullable would reject them).
//!
//! The mapping reads the same prepared schema the compilers start from
//! ([`crate::compile::prepare`]): references with siblings and one-item `allOf`s
//! are already combined there, so every property the model saw is found.

use std::cmp::Reverse;
use std::collections::HashSet;

use module_sdk::schema::resolve;
use serde_json::{Map, Value};

use super::names::gemini_property_names;

/// How deep into nested arguments (and `allOf` lists) the mapping goes.
const MAX_DEPTH: usize = 64;

/// The most steps one call's mapping takes: schema nodes visited, and sent
/// names looked up, each one step. A module's schema may refer to itself
/// through `allOf` (`D: {allOf: [D, D]}`), which the depth alone would let
/// grow to 2^64 steps; past this the rest of the call is left as sent
/// (the module still checks it).
const MAX_STEPS: usize = 100_000;

/// Maps `arguments` back in place, following `prepared` (the tool's
/// original input schema as [`crate::compile::prepare`] makes it); `renamed` when
/// the provider saw Gemini-safe property names.
pub fn restore(prepared: &Value, arguments: &mut Map<String, Value>, renamed: bool) {
    let mut steps = Steps(MAX_STEPS);
    restore_object(prepared, prepared, arguments, renamed, 0, &mut steps);
}

/// The steps a mapping has left ([`MAX_STEPS`]).
struct Steps(usize);

impl Steps {
    /// Takes `count` steps; false (and none left) when fewer remain.
    fn take(&mut self, count: usize) -> bool {
        match self.0.checked_sub(count) {
            Some(left) => self.0 = left,
            None => self.0 = 0,
        }
        self.0 > 0
    }
}

fn restore_object(
    root: &Value,
    node: &Value,
    map: &mut Map<String, Value>,
    renamed: bool,
    depth: usize,
    steps: &mut Steps,
) {
    let mut schemas = Vec::new();
    object_schemas(root, node, map, renamed, depth, steps, &mut schemas);
    for node in schemas {
        let Some(properties) = node.get("properties").and_then(Value::as_object) else { continue };
        if !steps.take(map.len()) {
            return;
        }
        if renamed {
            for (name, safe) in gemini_property_names(properties) {
                if name != safe
                    && !map.contains_key(name)
                    && let Some(value) = map.remove(&safe)
                {
                    map.insert(name.to_owned(), value);
                }
            }
        }
        let required = required_names(node);
        map.retain(|key, value| {
            !(value.is_null()
                && !required.contains(&key.as_str())
                && properties.get(key).is_some_and(|p| !accepts_null(root, p, 0, steps)))
        });
        for (key, value) in map.iter_mut() {
            if let Some(property) = properties.get(key) {
                restore_value(root, property, value, renamed, depth + 1, steps);
            }
        }
    }
}

fn restore_value(root: &Value, node: &Value, value: &mut Value, renamed: bool, depth: usize, steps: &mut Steps) {
    match value {
        Value::Object(map) => restore_object(root, node, map, renamed, depth, steps),
        Value::Array(items) if depth <= MAX_DEPTH && steps.take(1) => {
            let node = resolve(root, node);
            let item = node
                .get("items")
                .or_else(|| branches(root, node).into_iter().find_map(|(_, branch)| branch.get("items")));
            if let Some(item) = item.filter(|item| item.is_object()) {
                items.iter_mut().for_each(|value| restore_value(root, item, value, renamed, depth + 1, steps));
            }
        }
        _ => {}
    }
}

/// The schemas with `properties` that describe the object `map` at `node`:
/// the node itself, every part of its `allOf`, and of a union the branch
/// that best matches the names the model sent ([`matching`]).
fn object_schemas<'a>(
    root: &'a Value,
    node: &'a Value,
    map: &Map<String, Value>,
    renamed: bool,
    depth: usize,
    steps: &mut Steps,
    out: &mut Vec<&'a Value>,
) {
    if depth > MAX_DEPTH || !steps.take(1) {
        return;
    }
    let node = resolve(root, node);
    if node.get("properties").is_some() {
        out.push(node);
    }
    for part in node.get("allOf").and_then(Value::as_array).into_iter().flatten() {
        object_schemas(root, part, map, renamed, depth + 1, steps, out);
    }
    let scored: Vec<_> =
        branches(root, node).into_iter().filter_map(|branch| matching(root, branch, map, renamed, steps)).collect();
    let best = scored.into_iter().max_by_key(
        // The first of equally good branches wins: `max_by_key` keeps the last, so earlier ones rank higher.
        |&(score, index, _)| (score, Reverse(index)),
    );
    if let Some((_, _, branch)) = best {
        object_schemas(root, branch, map, renamed, depth + 1, steps, out);
    }
}

/// How well the union branch `branch` matches the names of `map`, as the
/// model sent them (Gemini-safe when `renamed`): whether all its required
/// names are there, how many sent names it declares, how few it does not;
/// `None` for a branch that declares no properties.
fn matching<'a>(
    root: &'a Value,
    branch: (usize, &'a Value),
    map: &Map<String, Value>,
    renamed: bool,
    steps: &mut Steps,
) -> Option<(Score, usize, &'a Value)> {
    let (index, node) = branch;
    if !steps.take(map.len()) {
        return None;
    }
    // The branch's own properties and those of its `allOf` parts (one level: a score, not a mapping).
    let parts = std::iter::once(node).chain(node.get("allOf").and_then(Value::as_array).into_iter().flatten());
    let mut declared = HashSet::new();
    let mut required = Vec::new();
    for part in parts.map(|part| resolve(root, part)) {
        let Some(properties) = part.get("properties").and_then(Value::as_object) else { continue };
        let names = gemini_property_names(properties);
        let sent = |name: &str| match renamed {
            true => names.iter().find(|(n, _)| *n == name).map_or(name.to_owned(), |(_, safe)| safe.clone()),
            false => name.to_owned(),
        };
        required.extend(required_names(part).into_iter().map(sent));
        declared.extend(names.iter().map(|(name, safe)| if renamed { safe.clone() } else { (*name).to_owned() }));
    }
    if declared.is_empty() {
        return None;
    }
    let known = map.keys().filter(|key| declared.contains(*key)).count();
    let all_required = required.iter().all(|name| map.contains_key(name));
    Some(((all_required, known, Reverse(map.len() - known)), index, node))
}

/// How well a union branch matches sent names: all its required names sent,
/// how many sent names it declares, how few it does not (higher is better).
type Score = (bool, usize, Reverse<usize>);

/// The resolved alternatives of a union node, with their positions.
fn branches<'a>(root: &'a Value, node: &'a Value) -> Vec<(usize, &'a Value)> {
    ["anyOf", "oneOf"]
        .iter()
        .filter_map(|k| node.get(*k).and_then(Value::as_array))
        .flatten()
        .map(|branch| resolve(root, branch))
        .enumerate()
        .collect()
}

/// The `required` names of an object schema.
fn required_names(node: &Value) -> Vec<&str> {
    node.get("required")
        .and_then(Value::as_array)
        .map_or(Vec::new(), |names| names.iter().filter_map(Value::as_str).collect())
}

/// Whether `node` lets a value be `null` (yes, when the steps run out: the
/// `null` is then left for the module to judge).
fn accepts_null(root: &Value, node: &Value, depth: usize, steps: &mut Steps) -> bool {
    if depth > MAX_DEPTH || !steps.take(1) {
        return true;
    }
    let node = resolve(root, node);
    let Value::Object(map) = node else { return node != &Value::Bool(false) };
    let typed = match map.get("type") {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(types)) => types.iter().any(|t| t == "null"),
        _ => false,
    };
    let enumerated = map.get("enum").and_then(Value::as_array).is_some_and(|v| v.contains(&Value::Null));
    let constrained = ["type", "enum", "const", "anyOf", "oneOf", "$ref"].iter().any(|k| map.contains_key(*k));
    let parts = map.get("allOf").and_then(Value::as_array).into_iter().flatten();
    let own = typed
        || enumerated
        || map.get("const") == Some(&Value::Null)
        || branches(root, node).into_iter().any(|(_, b)| accepts_null(root, b, depth + 1, steps))
        || !constrained;
    own && parts.into_iter().all(|part| accepts_null(root, part, depth + 1, steps))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "max-results": {"type": "integer", "default": 5},
                "note": {"type": ["string", "null"]},
                "query": {"type": "string"},
                "stops": {"type": "array", "items": {"$ref": "#/$defs/Place"}},
                "origin": {"anyOf": [{"$ref": "#/$defs/Place"}, {"type": "null"}]}
            },
            "required": ["query"],
            "$defs": {"Place": {"type": "object", "properties": {
                "name": {"type": "string"}, "zip-code": {"type": "string"}
            }, "required": ["name"]}}
        })
    }

    #[test]
    fn strict_mode_nulls_for_optional_fields_are_left_out_unless_null_is_allowed() {
        let mut args = json!({"max-results": null, "note": null, "query": "x",
            "stops": [{"name": "a", "zip-code": null}], "origin": {"name": "b", "zip-code": null}});
        restore(&compile::prepare(&schema()), args.as_object_mut().unwrap(), false);
        assert_eq!(args, json!({"note": null, "query": "x", "stops": [{"name": "a"}], "origin": {"name": "b"}}));
    }

    #[test]
    fn gemini_safe_names_are_renamed_back_at_every_level() {
        let mut args = json!({"max_results": 3, "query": "x", "stops": [{"name": "a", "zip_code": "1"}],
            "origin": {"name": "b", "zip_code": "2"}});
        restore(&compile::prepare(&schema()), args.as_object_mut().unwrap(), true);
        assert_eq!(args["max-results"], 3);
        assert_eq!(args["stops"][0]["zip-code"], "1");
        assert_eq!(args["origin"]["zip-code"], "2");
        assert!(args.get("max_results").is_none());
    }

    #[test]
    fn without_renaming_the_names_stay_as_sent() {
        let mut args = json!({"max_results": 3, "query": "x"});
        restore(&compile::prepare(&schema()), args.as_object_mut().unwrap(), false);
        assert_eq!(args, json!({"max_results": 3, "query": "x"}));
    }

    #[test]
    fn a_union_branch_is_found_by_the_names_sent_renamed_or_not() {
        let schema = json!({"type": "object", "properties": {"place": {"anyOf": [
            {"type": "object", "properties": {"zip-code": {"type": "string"}}, "required": ["zip-code"]},
            {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
        ]}, "pick": {"anyOf": [
            {"type": "object", "properties": {"a": {"type": "integer"}}},
            {"type": "object", "properties": {"b": {"type": "integer"}}}
        ]}}});
        let mut args = json!({"place": {"zip_code": "1"}, "pick": {"b": null}});
        restore(&compile::prepare(&schema), args.as_object_mut().unwrap(), true);
        assert_eq!(args, json!({"place": {"zip-code": "1"}, "pick": {}}));
    }

    #[test]
    fn a_schema_that_refers_to_itself_through_all_of_is_mapped_within_its_steps() {
        let schema = json!({
            "type": "object",
            "properties": {"x": {"$ref": "#/$defs/D"}, "y": {"type": "integer"}},
            "$defs": {"D": {"allOf": [{"$ref": "#/$defs/D"}, {"$ref": "#/$defs/D"}]}}
        });
        let prepared = compile::prepare(&schema);
        for sent in [json!({"x": null, "y": null}), json!({"x": {"a": {"b": null}}, "y": 1})] {
            let mut args = sent.clone();
            // Without a step budget this walks 2^64 nodes.
            restore(&prepared, args.as_object_mut().unwrap(), true);
            assert_eq!(args.get("x"), sent.get("x"), "left as sent");
        }
    }

    #[test]
    fn properties_behind_a_reference_in_a_one_item_all_of_are_found() {
        let schema = json!({"type": "object", "properties": {"p": {"allOf": [{"$ref": "#/$defs/P"}]}},
            "$defs": {"P": {"type": "object", "properties": {"opt": {"type": "integer"}, "a-b": {"type": "string"}}}}});
        let mut args = json!({"p": {"opt": null, "a_b": "x"}});
        restore(&compile::prepare(&schema), args.as_object_mut().unwrap(), true);
        assert_eq!(args, json!({"p": {"a-b": "x"}}));
    }
}
