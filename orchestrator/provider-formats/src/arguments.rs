//! Arguments from a model, mapped back to what the tool's own schema says:
//! Gemini-safe property names renamed to the real ones, and the `null`s that
//! strict mode makes a model send for optional fields left out again (a
//! field that was optional but not nullable would reject them).

use module_sdk::schema::resolve;
use serde_json::{Map, Value};

use super::names::gemini_property_names;

/// How deep into nested arguments the mapping goes.
const MAX_DEPTH: usize = 64;

/// Maps `arguments` back in place, following `schema` (the tool's original
/// input schema); `renamed` when the provider saw Gemini-safe property names.
pub fn restore(schema: &Value, arguments: &mut Map<String, Value>, renamed: bool) {
    restore_object(schema, schema, arguments, renamed, 0);
}

fn restore_object(root: &Value, node: &Value, map: &mut Map<String, Value>, renamed: bool, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    let Some(node) = object_schema(root, node, map) else { return };
    let Some(properties) = node.get("properties").and_then(Value::as_object) else { return };
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
            && properties.get(key).is_some_and(|p| !accepts_null(root, p, 0)))
    });
    for (key, value) in map.iter_mut() {
        if let Some(property) = properties.get(key) {
            restore_value(root, property, value, renamed, depth + 1);
        }
    }
}

fn restore_value(root: &Value, node: &Value, value: &mut Value, renamed: bool, depth: usize) {
    match value {
        Value::Object(map) => restore_object(root, node, map, renamed, depth),
        Value::Array(items) => {
            let node = resolve(root, node);
            let item =
                node.get("items").or_else(|| branches(root, node).into_iter().find_map(|branch| branch.get("items")));
            if let Some(item) = item.filter(|item| item.is_object()) {
                items.iter_mut().for_each(|value| restore_value(root, item, value, renamed, depth + 1));
            }
        }
        _ => {}
    }
}

/// The schema (`node` or one of its union branches) that describes the
/// object `map`: the first with properties whose required names are all there.
fn object_schema<'a>(root: &'a Value, node: &'a Value, map: &Map<String, Value>) -> Option<&'a Value> {
    let node = resolve(root, node);
    if node.get("properties").is_some() {
        return Some(node);
    }
    branches(root, node)
        .into_iter()
        .filter(|branch| branch.get("properties").is_some())
        .find(|branch| required_names(branch).iter().all(|name| map.contains_key(*name)))
}

/// The resolved alternatives of a union node.
fn branches<'a>(root: &'a Value, node: &'a Value) -> Vec<&'a Value> {
    ["anyOf", "oneOf"]
        .iter()
        .filter_map(|k| node.get(*k).and_then(Value::as_array))
        .flatten()
        .map(|branch| resolve(root, branch))
        .collect()
}

/// The `required` names of an object schema.
fn required_names(node: &Value) -> Vec<&str> {
    node.get("required")
        .and_then(Value::as_array)
        .map_or(Vec::new(), |names| names.iter().filter_map(Value::as_str).collect())
}

/// Whether `node` lets a value be `null`.
fn accepts_null(root: &Value, node: &Value, depth: usize) -> bool {
    if depth > MAX_DEPTH {
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
    typed
        || enumerated
        || map.get("const") == Some(&Value::Null)
        || branches(root, node).into_iter().any(|b| accepts_null(root, b, depth + 1))
        || !constrained
}

#[cfg(test)]
mod tests {
    use super::*;
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
        restore(&schema(), args.as_object_mut().unwrap(), false);
        assert_eq!(args, json!({"note": null, "query": "x", "stops": [{"name": "a"}], "origin": {"name": "b"}}));
    }

    #[test]
    fn gemini_safe_names_are_renamed_back_at_every_level() {
        let mut args = json!({"max_results": 3, "query": "x", "stops": [{"name": "a", "zip_code": "1"}],
            "origin": {"name": "b", "zip_code": "2"}});
        restore(&schema(), args.as_object_mut().unwrap(), true);
        assert_eq!(args["max-results"], 3);
        assert_eq!(args["stops"][0]["zip-code"], "1");
        assert_eq!(args["origin"]["zip-code"], "2");
        assert!(args.get("max_results").is_none());
    }

    #[test]
    fn without_renaming_the_names_stay_as_sent() {
        let mut args = json!({"max_results": 3, "query": "x"});
        restore(&schema(), args.as_object_mut().unwrap(), false);
        assert_eq!(args, json!({"max_results": 3, "query": "x"}));
    }
}
