//! The first pass for every target: one self-contained shape of the schema.
//!
//! `$schema` and `$id` go; `definitions` become `$defs`; every reference is
//! either a bare `#/$defs/<name>` or inlined (a `$ref` with siblings, a
//! pointer elsewhere in the document, a one-element `allOf`); a reference
//! that does not resolve becomes "any value"; `$defs` nobody uses are pruned.
//! Inlining stops at [`MAX_NESTING`] levels and [`MAX_INLINED_NODES`] nodes:
//! past them a reference stays a reference (or becomes "any value").

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::walk::{
    MAX_INLINED_NODES, MAX_NESTING, def_name, escape, for_each_child, for_each_child_mut, omitted, visit_nodes,
};

/// Keywords that identify a document rather than constrain a value.
const DOCUMENT_KEYWORDS: &[&str] = &["$schema", "$id", "$anchor", "$dynamicAnchor", "$vocabulary"];

/// `schema` with references in the one shape every target starts from.
pub fn prepare(schema: &Value) -> Value {
    let Value::Object(root) = schema else {
        return schema.clone();
    };
    let mut root = root.clone();
    root.remove("title");
    let mut defs = match root.remove("$defs") {
        Some(Value::Object(defs)) => defs,
        _ => Map::new(),
    };
    if let Some(Value::Object(old)) = root.remove("definitions") {
        for (name, def) in old {
            defs.entry(name).or_insert(def);
        }
    }
    let mut preparer = Preparer { document: schema, defs: &defs, stack: Vec::new(), depth: 0, nodes: 0 };
    let mut prepared_defs = Map::new();
    for (name, def) in &defs {
        preparer.stack = vec![name.clone()];
        prepared_defs.insert(name.clone(), preparer.node(def.clone()));
    }
    preparer.stack = vec![String::new()];
    let Value::Object(mut out) = preparer.node(Value::Object(root)) else {
        unreachable!("an object node stays an object")
    };
    let used = used_defs(&out, &prepared_defs);
    prepared_defs.retain(|name, _| used.contains(name));
    if !prepared_defs.is_empty() {
        out.insert("$defs".into(), Value::Object(prepared_defs));
    }
    Value::Object(out)
}

/// Where a `$ref` leads.
enum Target {
    /// An entry of `$defs`.
    Def(String),
    /// Some other node of the document, by JSON pointer.
    Pointer(String, Value),
    /// Nowhere we can follow.
    Unresolved,
}

/// The state of one [`prepare`] run.
struct Preparer<'a> {
    document: &'a Value,
    defs: &'a Map<String, Value>,
    /// The definitions (by name) and pointers being inlined, to stop at recursion.
    stack: Vec<String>,
    /// How deep the node being prepared is.
    depth: usize,
    /// How many nodes this run has prepared, counting inlined copies.
    nodes: usize,
}

impl Preparer<'_> {
    fn target(&self, reference: &str) -> Target {
        let normalized = match reference.contains("#/definitions/") {
            true => std::borrow::Cow::Owned(reference.replacen("#/definitions/", "#/$defs/", 1)),
            false => std::borrow::Cow::Borrowed(reference),
        };
        if let Some(name) = def_name(&normalized).filter(|name| self.defs.contains_key(name)) {
            return Target::Def(name);
        }
        match reference.strip_prefix('#').and_then(|pointer| self.document.pointer(pointer).map(|t| (pointer, t))) {
            Some((pointer, target)) => Target::Pointer(pointer.to_owned(), target.clone()),
            None => Target::Unresolved,
        }
    }

    /// `node` prepared, or "any value" when it nests too deep.
    fn node(&mut self, node: Value) -> Value {
        if self.depth >= MAX_NESTING {
            return Value::Object(omitted());
        }
        self.depth += 1;
        self.nodes += 1;
        let out = self.object(node);
        self.depth -= 1;
        out
    }

    /// Whether inlining has produced all the nodes it may.
    fn spent(&self) -> bool {
        self.nodes >= MAX_INLINED_NODES
    }

    fn object(&mut self, node: Value) -> Value {
        let Value::Object(mut map) = node else {
            return node;
        };
        DOCUMENT_KEYWORDS.iter().for_each(|k| {
            map.remove(*k);
        });
        if let Some(Value::Array(all)) = map.get("allOf")
            && let [Value::Object(_)] = all.as_slice()
            && let Some(Value::Array(mut all)) = map.remove("allOf")
            && let Some(Value::Object(only)) = all.pop()
        {
            return self.node(Value::Object(merge(only, map)));
        }
        if let Some(Value::String(reference)) = map.remove("$ref") {
            match self.target(&reference) {
                Target::Def(name) if map.is_empty() => {
                    map.insert("$ref".into(), format!("#/$defs/{}", escape(&name)).into());
                    return Value::Object(map);
                }
                Target::Def(name) if self.stack.contains(&name) || self.spent() => {
                    let bare = serde_json::json!({ "$ref": format!("#/$defs/{}", escape(&name)) });
                    if map.contains_key("anyOf") || map.contains_key("oneOf") {
                        return bare;
                    }
                    map.insert("anyOf".into(), Value::Array(vec![bare]));
                }
                Target::Def(name) => {
                    let target = self.defs[&name].clone();
                    return self.inline(name, target, map);
                }
                Target::Pointer(pointer, _) if self.stack.contains(&pointer) || self.spent() => {}
                Target::Pointer(pointer, target) => return self.inline(pointer, target, map),
                Target::Unresolved => {}
            }
        }
        for_each_child_mut(&mut map, |child| *child = self.node(std::mem::take(child)));
        Value::Object(map)
    }

    /// `target` with the referring node's other keywords laid over it.
    fn inline(&mut self, key: String, target: Value, siblings: Map<String, Value>) -> Value {
        let base = match target {
            Value::Object(mut target) => {
                // A pointer to the root brings the document's definitions along; they stay at the root.
                target.remove("$defs");
                target.remove("definitions");
                target
            }
            Value::Bool(true) => Map::new(),
            other => return other,
        };
        self.stack.push(key);
        let out = self.node(Value::Object(merge(base, siblings)));
        self.stack.pop();
        out
    }
}

/// `base` with every keyword of `over` put on top.
fn merge(mut base: Map<String, Value>, over: Map<String, Value>) -> Map<String, Value> {
    base.extend(over);
    base
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
}
