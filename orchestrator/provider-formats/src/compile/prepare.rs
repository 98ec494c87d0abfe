//! The first pass for every target: one self-contained shape of the schema.
//!
//! `$schema` and `$id` go; `definitions` become `$defs`; every reference is
//! either a bare `#/$defs/<name>` or inlined (a `$ref` with siblings, a
//! pointer elsewhere in the document, a one-element `allOf`); a reference
//! that does not resolve becomes "any value"; `$defs` nobody uses are pruned.
//! Inlining stops at [`MAX_NESTING`] levels and [`MAX_INLINED_NODES`] nodes:
//! past them a reference stays a reference (or becomes "any value").

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};

use module_sdk::schema::{LIST_SUBSCHEMA_KEYWORDS, MAP_SUBSCHEMA_KEYWORDS, SINGLE_SUBSCHEMA_KEYWORDS};
use serde_json::{Map, Value};

use super::keywords::Keywords;
use super::walk::{MAX_INLINED_NODES, MAX_NESTING, def_name, escape, for_each_child, omitted, visit_nodes};

/// Keywords that identify a document rather than constrain a value.
const DOCUMENT_KEYWORDS: &[&str] = &["$schema", "$id", "$anchor", "$dynamicAnchor", "$vocabulary"];

/// `schema` with references in the one shape every target starts from.
///
/// Written from the borrowed document: each node's keywords are rewritten
/// as a borrowed [`Keywords`] list and only what is kept is copied, once.
pub fn prepare(schema: &Value) -> Value {
    let Value::Object(source) = schema else {
        return schema.clone();
    };
    let mut root = Keywords::borrowed(source);
    root.remove("title");
    root.remove("$defs");
    root.remove("definitions");
    let mut order: Vec<(&str, &Value)> = Vec::new();
    let mut defs: HashMap<&str, &Value> = HashMap::new();
    for keyword in ["$defs", "definitions"] {
        for (name, def) in source.get(keyword).and_then(Value::as_object).into_iter().flatten() {
            if !defs.contains_key(name.as_str()) {
                defs.insert(name, def);
                order.push((name, def));
            }
        }
    }
    let mut preparer = Preparer { document: schema, defs: &defs, stack: Vec::new(), depth: 0, nodes: 0 };
    let mut prepared_defs = Map::new();
    for (name, def) in order {
        preparer.stack = vec![name.to_owned()];
        prepared_defs.insert(name.to_owned(), preparer.node(Cow::Borrowed(def)));
    }
    preparer.stack = vec![String::new()];
    let Value::Object(mut out) = preparer.merged(root) else { unreachable!("an object node stays an object") };
    let used = used_defs(&out, &prepared_defs);
    prepared_defs.retain(|name, _| used.contains(name));
    if !prepared_defs.is_empty() {
        out.insert("$defs".into(), Value::Object(prepared_defs));
    }
    Value::Object(out)
}

/// Where a `$ref` leads.
enum Target<'a> {
    /// An entry of `$defs`.
    Def(String),
    /// Some other node of the document, by JSON pointer.
    Pointer(String, &'a Value),
    /// Nowhere we can follow.
    Unresolved,
}

/// The state of one [`prepare`] run.
struct Preparer<'a, 'd> {
    document: &'a Value,
    /// The document's definitions by name (`$defs`, then `definitions`).
    defs: &'d HashMap<&'a str, &'a Value>,
    /// The definitions (by name) and pointers being inlined, to stop at recursion.
    stack: Vec<String>,
    /// How deep the node being prepared is.
    depth: usize,
    /// How many nodes this run has prepared, counting inlined copies.
    nodes: usize,
}

impl<'a> Preparer<'a, '_> {
    fn target(&self, reference: &str) -> Target<'a> {
        let normalized = match reference.contains("#/definitions/") {
            true => Cow::Owned(reference.replacen("#/definitions/", "#/$defs/", 1)),
            false => Cow::Borrowed(reference),
        };
        if let Some(name) = def_name(&normalized).filter(|name| self.defs.contains_key(name.as_str())) {
            return Target::Def(name);
        }
        match reference.strip_prefix('#').and_then(|pointer| self.document.pointer(pointer).map(|t| (pointer, t))) {
            Some((pointer, target)) => Target::Pointer(pointer.to_owned(), target),
            None => Target::Unresolved,
        }
    }

    /// `node` prepared, or "any value" when it nests too deep.
    fn node(&mut self, node: Cow<'a, Value>) -> Value {
        self.within(|preparer| match Keywords::of(node) {
            Ok(map) => preparer.object(map),
            Err(other) => other,
        })
    }

    /// The node of the keywords `map` prepared, as [`Self::node`].
    fn merged(&mut self, map: Keywords<'a>) -> Value {
        self.within(|preparer| preparer.object(map))
    }

    /// What `prepare` makes one level deeper, or "any value" past [`MAX_NESTING`].
    fn within(&mut self, prepare: impl FnOnce(&mut Self) -> Value) -> Value {
        if self.depth >= MAX_NESTING {
            return Value::Object(omitted());
        }
        self.depth += 1;
        self.nodes += 1;
        let out = prepare(self);
        self.depth -= 1;
        out
    }

    /// Whether inlining has produced all the nodes it may.
    fn spent(&self) -> bool {
        self.nodes >= MAX_INLINED_NODES
    }

    fn object(&mut self, mut map: Keywords<'a>) -> Value {
        for keyword in DOCUMENT_KEYWORDS {
            map.remove(keyword);
        }
        if let Some(Value::Array(all)) = map.get("allOf")
            && let [Value::Object(_)] = all.as_slice()
            && let Some(only) = map.remove("allOf").and_then(only_item)
            && let Ok(only) = Keywords::of(only)
        {
            return self.merged(only.merged(map));
        }
        if let Some(reference) = map.remove("$ref")
            && let Value::String(reference) = &*reference
        {
            match self.target(reference) {
                Target::Def(name) if map.is_empty() => {
                    map.insert("$ref".into(), Cow::Owned(format!("#/$defs/{}", escape(&name)).into()));
                    return written(map);
                }
                Target::Def(name) if self.stack.contains(&name) || self.spent() => {
                    let bare = serde_json::json!({ "$ref": format!("#/$defs/{}", escape(&name)) });
                    if map.contains_key("anyOf") || map.contains_key("oneOf") {
                        return bare;
                    }
                    map.insert("anyOf".into(), Cow::Owned(Value::Array(vec![bare])));
                }
                Target::Def(name) => {
                    let target = self.defs[name.as_str()];
                    return self.inline(name, target, map);
                }
                Target::Pointer(pointer, _) if self.stack.contains(&pointer) || self.spent() => {}
                Target::Pointer(pointer, target) => return self.inline(pointer, target, map),
                Target::Unresolved => {}
            }
        }
        let mut out = Map::new();
        for (keyword, value) in map.into_entries() {
            let value = self.children(&keyword, value);
            out.insert(keyword.into_owned(), value);
        }
        Value::Object(out)
    }

    /// `keyword: value` with the subschemas in `value` prepared.
    fn children(&mut self, keyword: &str, value: Cow<'a, Value>) -> Value {
        match value {
            Cow::Borrowed(Value::Array(items)) if LIST_SUBSCHEMA_KEYWORDS.contains(&keyword) => {
                Value::Array(items.iter().map(|item| self.node(Cow::Borrowed(item))).collect())
            }
            Cow::Owned(Value::Array(items)) if LIST_SUBSCHEMA_KEYWORDS.contains(&keyword) => {
                Value::Array(items.into_iter().map(|item| self.node(Cow::Owned(item))).collect())
            }
            Cow::Borrowed(Value::Object(map)) if MAP_SUBSCHEMA_KEYWORDS.contains(&keyword) => {
                Value::Object(map.iter().map(|(name, child)| (name.clone(), self.node(Cow::Borrowed(child)))).collect())
            }
            Cow::Owned(Value::Object(map)) if MAP_SUBSCHEMA_KEYWORDS.contains(&keyword) => {
                Value::Object(map.into_iter().map(|(name, child)| (name, self.node(Cow::Owned(child)))).collect())
            }
            value @ (Cow::Borrowed(Value::Object(_) | Value::Bool(_))
            | Cow::Owned(Value::Object(_) | Value::Bool(_)))
                if SINGLE_SUBSCHEMA_KEYWORDS.contains(&keyword) =>
            {
                self.node(value)
            }
            other => other.into_owned(),
        }
    }

    /// `target` with the referring node's other keywords laid over it.
    fn inline(&mut self, key: String, target: &'a Value, siblings: Keywords<'a>) -> Value {
        let base = match target {
            Value::Object(target) => {
                // A pointer to the root brings the document's definitions along; they stay at the root.
                let mut target = Keywords::borrowed(target);
                target.remove("$defs");
                target.remove("definitions");
                target
            }
            Value::Bool(true) => Keywords::default(),
            other => return other.clone(),
        };
        self.stack.push(key);
        let out = self.merged(base.merged(siblings));
        self.stack.pop();
        out
    }
}

/// The one item of a one-item list.
fn only_item(list: Cow<'_, Value>) -> Option<Cow<'_, Value>> {
    match list {
        Cow::Borrowed(Value::Array(items)) => items.first().map(Cow::Borrowed),
        Cow::Owned(Value::Array(mut items)) => items.pop().map(Cow::Owned),
        _ => None,
    }
}

/// The keywords written out as they are (nothing left to prepare in them).
fn written(map: Keywords<'_>) -> Value {
    Value::Object(map.into_entries().map(|(keyword, value)| (keyword.into_owned(), value.into_owned())).collect())
}

/// The `$defs` entries reachable from `root`'s references.
fn used_defs(root: &Map<String, Value>, defs: &Map<String, Value>) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    let mut pending: Vec<&Value> = Vec::new();
    for_each_child(root, |step, child| {
        if step.keyword() != "$defs" {
            pending.push(child);
        }
    });
    while let Some(node) = pending.pop() {
        visit_nodes(node, |inner| {
            let name = inner.get("$ref").and_then(Value::as_str).and_then(def_name);
            if let Some(name) = name
                && let Some(def) = defs.get(&name)
                && used.insert(name)
            {
                pending.push(def);
            }
        });
    }
    used
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_reference_with_siblings_is_inlined_and_unused_defs_are_pruned() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema", "title": "Args", "type": "object",
            "properties": {"home": {"$ref": "#/$defs/Place", "description": "Where I live."}},
            "$defs": {"Place": {"type": "object", "description": "A place.", "properties": {"name": {"type": "string"}}}}
        });
        assert_eq!(
            prepare(&schema),
            json!({"type": "object", "properties": {"home": {
                "type": "object", "description": "Where I live.", "properties": {"name": {"type": "string"}}
            }}})
        );
    }

    #[test]
    fn recursion_stays_a_reference_and_old_definitions_move_to_defs() {
        let schema = json!({
            "type": "object",
            "properties": {"tree": {"$ref": "#/definitions/Tree"}},
            "definitions": {"Tree": {"type": "object", "properties": {
                "kids": {"type": "array", "items": {"$ref": "#/definitions/Tree"}},
                "parent": {"$ref": "#/definitions/Tree", "description": "Up."}
            }}}
        });
        let out = prepare(&schema);
        assert_eq!(out["properties"]["tree"], json!({"$ref": "#/$defs/Tree"}));
        let tree = &out["$defs"]["Tree"]["properties"];
        assert_eq!(tree["kids"]["items"], json!({"$ref": "#/$defs/Tree"}));
        assert_eq!(tree["parent"], json!({"description": "Up.", "anyOf": [{"$ref": "#/$defs/Tree"}]}));
    }

    #[test]
    fn pointers_single_all_of_and_dangling_references_are_resolved_or_opened() {
        let schema = json!({
            "type": "object",
            "properties": {
                "a": {"type": "integer", "minimum": 1},
                "b": {"$ref": "#/properties/a"},
                "c": {"allOf": [{"type": "string"}], "description": "C."},
                "d": {"$ref": "https://example.com/elsewhere.json", "description": "D."}
            }
        });
        let out = prepare(&schema);
        assert_eq!(out["properties"]["b"], json!({"type": "integer", "minimum": 1}));
        assert_eq!(out["properties"]["c"], json!({"type": "string", "description": "C."}));
        assert_eq!(out["properties"]["d"], json!({"description": "D."}));
    }

    #[test]
    fn hostile_schemas_stay_bounded_and_keep_their_order() {
        // Nesting past the bound becomes "any value", saying so.
        let mut deep = json!({"type": "string"});
        for _ in 0..(MAX_NESTING + 10) {
            deep = json!({"type": "array", "items": deep});
        }
        let out = prepare(&json!({"type": "object", "properties": {"deep": deep}}));
        let mut node = &out["properties"]["deep"];
        let mut levels = 0;
        while let Some(items) = node.get("items") {
            node = items;
            levels += 1;
        }
        assert_eq!(levels, MAX_NESTING - 1);
        assert_eq!(node, &Value::Object(omitted()));
        // Pointers that lead to each other, and a definition that is its own allOf, end.
        let cycle = json!({"type": "object", "properties": {
            "a": {"$ref": "#/properties/b", "description": "A."},
            "b": {"$ref": "#/properties/a", "description": "B."},
            "c": {"$ref": "#/$defs/C"}
        }, "$defs": {"C": {"allOf": [{"$ref": "#/$defs/C"}], "title": "C"}}});
        let out = prepare(&cycle);
        assert_eq!(out["properties"]["a"], json!({"description": "A."}));
        assert_eq!(out["$defs"]["C"], json!({"title": "C", "anyOf": [{"$ref": "#/$defs/C"}]}));
        // Names that need escaping in pointers, quotes and control characters in text.
        let named = json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/a~1b\"c"}},
            "$defs": {"a/b\"c": {"type": "string", "description": "Say \"hi\"\n\u{1}"}}});
        let out = prepare(&named);
        assert_eq!(out["properties"]["x"], json!({"$ref": "#/$defs/a~1b\"c"}));
        assert_eq!(out["$defs"]["a/b\"c"]["description"], "Say \"hi\"\n\u{1}");
        // Dropped and merged keywords leave the order a `Map` edited in place would.
        let ordered = json!({"$schema": "s", "z": 1, "allOf": [{"b": 2, "z": 3}], "a": 4, "$id": "i"});
        let text = serde_json::to_string(&prepare(&json!({"type": "object", "properties": {"p": ordered}}))).unwrap();
        assert_eq!(text, r#"{"type":"object","properties":{"p":{"b":2,"z":1,"a":4}}}"#);
    }
}
