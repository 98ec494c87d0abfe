//! How big a schema is, in the measures providers limit: levels of object
//! nesting, properties and enumeration values.

use serde_json::{Map, Value};

use super::walk::{def_name, for_each_child, for_each_node};

/// The measures of one schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Size {
    /// The deepest chain of nested objects, the root counting as 1; a
    /// recursive reference is not followed a second time.
    pub depth: usize,
    /// Properties declared anywhere in the document.
    pub properties: usize,
    /// Enumeration values anywhere in the document.
    pub enum_values: usize,
}

/// The [`Size`] of `root`, references followed within it.
pub fn measure(root: &Value) -> Size {
    let mut size = Size::default();
    for_each_node(root, "", &mut |_, node| {
        size.properties += node.get("properties").and_then(Value::as_object).map_or(0, Map::len);
        size.enum_values += node.get("enum").and_then(Value::as_array).map_or(0, Vec::len);
    });
    size.depth = depth(root, root, &mut Vec::new());
    size
}

/// The object nesting below (and including) `node`.
fn depth(root: &Value, node: &Value, stack: &mut Vec<String>) -> usize {
    let Value::Object(map) = node else { return 0 };
    if let Some(name) = map.get("$ref").and_then(Value::as_str).and_then(def_name) {
        if stack.contains(&name) {
            return 0;
        }
        let Some(target) = root.get("$defs").and_then(|defs| defs.get(&name)) else { return 0 };
        stack.push(name);
        let inner = depth(root, target, stack);
        stack.pop();
        return inner;
    }
    let mut deepest = 0;
    for_each_child(map, |path, child| {
        if !path.starts_with("/$defs/") {
            deepest = deepest.max(depth(root, child, stack));
        }
    });
    deepest + usize::from(map.contains_key("properties"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nesting_follows_references_once_and_counts_objects_only() {
        let schema = json!({
            "type": "object",
            "properties": {
                "a": {"type": "array", "items": {"type": "object", "properties": {"b": {"type": "string", "enum": ["x", "y"]}}}},
                "t": {"$ref": "#/$defs/T"}
            },
            "$defs": {"T": {"type": "object", "properties": {"next": {"$ref": "#/$defs/T"}, "c": {"anyOf": [{"$ref": "#/$defs/U"}]}}},
                      "U": {"type": "object", "properties": {"d": {"type": "integer"}}}}
        });
        assert_eq!(measure(&schema), Size { depth: 3, properties: 6, enum_values: 2 });
    }
}
