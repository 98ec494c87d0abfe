//! How big a schema is, in the measures providers limit: levels of object
//! nesting, properties and enumeration values.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::walk::{MAX_NESTING, def_name, for_each_child, visit_nodes};

/// The measures of one schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Size {
    /// The deepest chain of nested objects, the root counting as 1; a
    /// recursive reference is not followed a second time; at most
    /// [`MAX_NESTING`](super::walk::MAX_NESTING).
    pub depth: usize,
    /// Properties declared anywhere in the document.
    pub properties: usize,
    /// Enumeration values anywhere in the document.
    pub enum_values: usize,
}

/// The [`Size`] of `root`, references followed within it.
pub fn measure(root: &Value) -> Size {
    let mut size = Size::default();
    visit_nodes(root, |node| {
        size.properties += node.get("properties").and_then(Value::as_object).map_or(0, Map::len);
        size.enum_values += node.get("enum").and_then(Value::as_array).map_or(0, Vec::len);
    });
    size.depth = Depth { root, stack: Vec::new(), known: HashMap::new(), level: 0 }.of(root);
    size
}

/// The state of one depth measure: the definitions being followed, the
/// depth of each definition already measured (so a graph of references is
/// measured in one pass over it, not once per path), and how deep the walk is.
struct Depth<'a> {
    root: &'a Value,
    stack: Vec<String>,
    known: HashMap<String, usize>,
    level: usize,
}

impl<'a> Depth<'a> {
    /// The object nesting below (and including) `node`; at most [`MAX_NESTING`].
    fn of(&mut self, node: &'a Value) -> usize {
        let Value::Object(map) = node else { return 0 };
        if self.level >= MAX_NESTING {
            return MAX_NESTING;
        }
        if let Some(name) = map.get("$ref").and_then(Value::as_str).and_then(def_name) {
            if self.stack.contains(&name) {
                return 0;
            }
            if let Some(known) = self.known.get(&name) {
                return *known;
            }
            let Some(target) = self.root.get("$defs").and_then(|defs| defs.get(&name)) else { return 0 };
            self.stack.push(name.clone());
            self.level += 1;
            let inner = self.of(target);
            self.level -= 1;
            self.stack.pop();
            self.known.insert(name, inner);
            return inner;
        }
        let mut children = Vec::new();
        for_each_child(map, |step, child| {
            if step.keyword() != "$defs" {
                children.push(child);
            }
        });
        self.level += 1;
        let deepest = children.into_iter().map(|child| self.of(child)).max().unwrap_or(0);
        self.level -= 1;
        (deepest + usize::from(map.contains_key("properties"))).min(MAX_NESTING)
    }
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
