//! How big a schema is, in the measures providers limit: levels of object
//! nesting, properties and enumeration values.

use std::collections::HashMap;

use serde_json::Value;

use super::node::Node;
use super::walk::{MAX_NESTING, def_name};

/// The measures of one schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Size {
    /// The deepest chain of nested objects, the root counting as 1; a
    /// recursive reference is not followed a second time; at most
    /// `MAX_NESTING`.
    pub depth: usize,
    /// Properties declared anywhere in the document.
    pub properties: usize,
    /// Enumeration values anywhere in the document.
    pub enum_values: usize,
}

/// The [`Size`] of `root`, references followed within it.
pub fn measure(root: &Value) -> Size {
    Size::of(Node::Value(root))
}

impl Size {
    /// The [`Size`] of `root` (a document or a compiled tree), references followed within it.
    pub(super) fn of(root: Node<'_>) -> Self {
        let mut size = Self::default();
        root.visit(|node| {
            size.properties += node.get("properties").and_then(Node::entries).map_or(0, Iterator::count);
            size.enum_values += node.get("enum").and_then(Node::items).map_or(0, Iterator::count);
        });
        size.depth = Depth { root, stack: Vec::new(), known: HashMap::new(), level: 0 }.of(root);
        size
    }
}

/// The state of one depth measure: the definitions being followed, the
/// depth of each definition already measured (so a graph of references is
/// measured in one pass over it, not once per path), and how deep the walk is.
struct Depth<'a> {
    root: Node<'a>,
    stack: Vec<String>,
    known: HashMap<String, usize>,
    level: usize,
}

impl<'a> Depth<'a> {
    /// The object nesting below (and including) `node`; at most [`MAX_NESTING`].
    fn of(&mut self, node: Node<'a>) -> usize {
        if !node.is_object() {
            return 0;
        }
        if self.level >= MAX_NESTING {
            return MAX_NESTING;
        }
        if let Some(name) = node.get("$ref").and_then(Node::as_str).and_then(def_name) {
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
        node.for_each_child(|keyword, child| {
            if keyword != "$defs" {
                children.push(child);
            }
        });
        self.level += 1;
        let deepest = children.into_iter().map(|child| self.of(child)).max().unwrap_or(0);
        self.level -= 1;
        (deepest + usize::from(node.contains_key("properties"))).min(MAX_NESTING)
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
