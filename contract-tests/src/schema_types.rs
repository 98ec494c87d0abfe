//! Which JSON types a schema node lets a value have, through references,
//! unions, enums and constants.

use std::collections::BTreeSet;

use module_sdk::schema::resolve;
use serde_json::Value;

use crate::checks::json_type;

/// The set of JSON type names (`null` left out) a value valid against `node`
/// may have; `None` when the node does not restrict the type.
pub fn value_types(root: &Value, node: &Value) -> Option<BTreeSet<&'static str>> {
    types_at(root, node, 0)
}

/// Whether a value of JSON type `kind` fits `types` (an integer is a number).
pub fn accepts(types: &BTreeSet<&'static str>, kind: &str) -> bool {
    types.contains(kind) || (kind == "integer" && types.contains("number"))
}

fn types_at(root: &Value, node: &Value, depth: usize) -> Option<BTreeSet<&'static str>> {
    const MAX_DEPTH: usize = 16;
    let node = resolve(root, node);
    if depth > MAX_DEPTH {
        return None;
    }
    if let Some(declared) = node.get("type") {
        let names: Vec<&str> = match declared {
            Value::String(name) => vec![name.as_str()],
            Value::Array(names) => names.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        return Some(names.into_iter().filter_map(static_name).filter(|name| *name != "null").collect());
    }
    if let Some(values) = node.get("enum").and_then(Value::as_array) {
        return Some(values.iter().filter(|v| !v.is_null()).map(json_type).collect());
    }
    if let Some(value) = node.get("const") {
        return Some(std::iter::once(json_type(value)).filter(|t| *t != "null").collect());
    }
    if let Some(branches) = node.get("anyOf").or_else(|| node.get("oneOf")).and_then(Value::as_array) {
        let mut union = BTreeSet::new();
        for branch in branches {
            union.extend(types_at(root, branch, depth + 1)?);
        }
        return Some(union);
    }
    if let Some(branches) = node.get("allOf").and_then(Value::as_array) {
        return branches
            .iter()
            .filter_map(|branch| types_at(root, branch, depth + 1))
            .reduce(|all, next| all.intersection(&next).copied().collect());
    }
    if node.get("properties").is_some() {
        return Some(BTreeSet::from(["object"]));
    }
    if node.get("items").is_some() || node.get("prefixItems").is_some() {
        return Some(BTreeSet::from(["array"]));
    }
    None
}

/// The JSON Schema type names, as `'static` strings.
fn static_name(name: &str) -> Option<&'static str> {
    ["null", "boolean", "integer", "number", "string", "array", "object"].into_iter().find(|known| *known == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn types_come_through_references_unions_and_enums() {
        let root = json!({"$defs": {"Mode": {"type": "string", "enum": ["a", "b"]}}});
        let set = |node: Value| value_types(&root, &node).map(|s| s.into_iter().collect::<Vec<_>>());
        assert_eq!(set(json!({"type": ["integer", "null"]})), Some(vec!["integer"]));
        assert_eq!(set(json!({"anyOf": [{"$ref": "#/$defs/Mode"}, {"type": "null"}]})), Some(vec!["string"]));
        assert_eq!(set(json!({"enum": [1, "x", null]})), Some(vec!["integer", "string"]));
        assert_eq!(set(json!({"properties": {}})), Some(vec!["object"]));
        assert_eq!(set(json!({"description": "anything"})), None);
        assert_eq!(set(json!(true)), None);
        assert!(accepts(&BTreeSet::from(["number"]), "integer"));
        assert!(!accepts(&BTreeSet::from(["integer"]), "number"));
    }
}
