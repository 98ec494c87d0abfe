//! A read-only view of one schema node, in a `Value` document or in a
//! [`Prepared`] tree, so that the passes that read schemas (the strict
//! walk, sizes, costs, recursion) read either without one being built from
//! the other.

use std::borrow::Cow;

use either::Either;
use module_sdk::schema::{LIST_SUBSCHEMA_KEYWORDS, MAP_SUBSCHEMA_KEYWORDS, SINGLE_SUBSCHEMA_KEYWORDS};
use serde_json::{Map, Value};

use super::prepared::Prepared;

/// A schema node, borrowed.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Node<'b> {
    /// A node of a `Value` document.
    Value(&'b Value),
    /// An object node of a prepared (or compiled) tree: its keywords.
    Entries(&'b [(Cow<'b, str>, Prepared<'b>)]),
    /// A list node of a prepared (or compiled) tree.
    Items(&'b [Prepared<'b>]),
}

impl<'b> From<&'b Value> for Node<'b> {
    fn from(value: &'b Value) -> Self {
        Self::Value(value)
    }
}

impl<'b> From<&'b Prepared<'b>> for Node<'b> {
    fn from(node: &'b Prepared<'b>) -> Self {
        match node {
            Prepared::Value(value) => Self::Value(value),
            Prepared::Object(entries) => Self::Entries(entries),
            Prepared::Array(items) => Self::Items(items),
        }
    }
}

impl<'b> Node<'b> {
    /// The node as a plain value, when it is one (not a prepared object or list).
    pub(crate) fn value(self) -> Option<&'b Value> {
        match self {
            Self::Value(value) => Some(value),
            Self::Entries(_) | Self::Items(_) => None,
        }
    }

    /// The node's string, when it is one.
    pub(crate) fn as_str(self) -> Option<&'b str> {
        self.value().and_then(Value::as_str)
    }

    /// Whether the node is an object.
    pub(crate) fn is_object(self) -> bool {
        matches!(self, Self::Value(Value::Object(_)) | Self::Entries(_))
    }

    /// The node's members in order, when it is an object.
    pub(crate) fn entries(self) -> Option<impl Iterator<Item = (&'b str, Node<'b>)>> {
        match self {
            Self::Value(Value::Object(map)) => Some(Either::Left(members(map))),
            Self::Entries(entries) => {
                Some(Either::Right(entries.iter().map(|(keyword, node)| (&**keyword, Node::from(node)))))
            }
            _ => None,
        }
    }

    /// The node's items in order, when it is a list.
    pub(crate) fn items(self) -> Option<impl Iterator<Item = Node<'b>>> {
        match self {
            Self::Value(Value::Array(items)) => Some(Either::Left(items.iter().map(Node::Value))),
            Self::Items(items) => Some(Either::Right(items.iter().map(Node::from))),
            _ => None,
        }
    }

    /// The member `keyword` of an object node.
    pub(crate) fn get(self, keyword: &str) -> Option<Node<'b>> {
        match self {
            Self::Value(Value::Object(map)) => map.get(keyword).map(Node::Value),
            Self::Entries(entries) => entries.iter().find(|(k, _)| k == keyword).map(|(_, node)| Node::from(node)),
            _ => None,
        }
    }

    /// Whether an object node has the member `keyword`.
    pub(crate) fn contains_key(self, keyword: &str) -> bool {
        self.get(keyword).is_some()
    }

    /// Whether the node's `type` is or includes `name`.
    pub(crate) fn has_type(self, name: &str) -> bool {
        match self.get("type").and_then(Node::value) {
            Some(Value::String(t)) => t == name,
            Some(Value::Array(types)) => types.iter().any(|t| t == name),
            _ => false,
        }
    }

    /// The node as a `Value`: borrowed when it is one, built otherwise.
    pub(crate) fn to_value(self) -> Cow<'b, Value> {
        if let Some(value) = self.value() {
            return Cow::Borrowed(value);
        }
        if let Some(entries) = self.entries() {
            let map: Map<String, Value> =
                entries.map(|(keyword, node)| (keyword.to_owned(), node.to_value().into_owned())).collect();
            return Cow::Owned(Value::Object(map));
        }
        let items = self.items().into_iter().flatten();
        Cow::Owned(Value::Array(items.map(|node| node.to_value().into_owned()).collect()))
    }

    /// The node as an owned tree: its values borrowed, its objects and lists copied.
    pub(crate) fn to_prepared(self) -> Prepared<'b> {
        match self {
            Self::Value(value) => Prepared::Value(Cow::Borrowed(value)),
            Self::Entries(entries) => Prepared::Object(entries.to_vec()),
            Self::Items(items) => Prepared::Array(items.to_vec()),
        }
    }

    /// Calls `f` with the keyword and value of every direct subschema of the
    /// node (as [`super::walk::for_each_child`] does for a `Value`).
    pub(crate) fn for_each_child(self, mut f: impl FnMut(&'b str, Node<'b>)) {
        for (keyword, value) in self.entries().into_iter().flatten() {
            if LIST_SUBSCHEMA_KEYWORDS.contains(&keyword)
                && let Some(items) = value.items()
            {
                items.for_each(|item| f(keyword, item));
            } else if MAP_SUBSCHEMA_KEYWORDS.contains(&keyword)
                && let Some(members) = value.entries()
            {
                members.for_each(|(_, member)| f(keyword, member));
            } else if SINGLE_SUBSCHEMA_KEYWORDS.contains(&keyword)
                && (value.is_object() || matches!(value.value(), Some(Value::Bool(_))))
            {
                f(keyword, value);
            }
        }
    }

    /// Calls `f` on the node and every node below it, in document order;
    /// iterative, so no nesting can overflow the stack.
    pub(crate) fn visit(self, mut f: impl FnMut(Node<'b>)) {
        let mut pending = vec![self];
        while let Some(node) = pending.pop() {
            f(node);
            let start = pending.len();
            node.for_each_child(|_, child| pending.push(child));
            pending[start..].reverse();
        }
    }
}

/// The members of `map`, as nodes.
fn members(map: &Map<String, Value>) -> impl Iterator<Item = (&str, Node<'_>)> {
    map.iter().map(|(keyword, value)| (keyword.as_str(), Node::Value(value)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_prepared_tree_reads_as_its_value() {
        let kept = json!({"type": ["string", "null"], "enum": ["a"]});
        let tree = Prepared::Object(vec![
            ("properties".into(), Prepared::Object(vec![("p".into(), Prepared::Value(Cow::Borrowed(&kept)))])),
            ("anyOf".into(), Prepared::Array(vec![Prepared::Value(Cow::Owned(json!({"type": "null"})))])),
            ("items".into(), Prepared::Value(Cow::Owned(json!(false)))),
        ]);
        let value = Node::from(&tree).to_value().into_owned();
        assert_eq!(value, json!({"properties": {"p": kept}, "anyOf": [{"type": "null"}], "items": false}));
        for node in [Node::from(&tree), Node::from(&value)] {
            let mut seen = Vec::new();
            node.visit(|node| seen.push(node.to_value().into_owned()));
            assert_eq!(seen, [value.clone(), kept.clone(), json!({"type": "null"}), json!(false)]);
            let property = node.get("properties").and_then(|p| p.get("p")).unwrap();
            assert!(property.has_type("null") && !property.has_type("object") && property.is_object());
            assert_eq!(node.get("anyOf").and_then(Node::items).map(Iterator::count), Some(1));
            assert!(node.contains_key("items") && node.get("missing").is_none() && node.as_str().is_none());
        }
    }
}
