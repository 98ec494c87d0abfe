//! The first pass for every target: one self-contained shape of the schema.
//!
//! `$schema` and `$id` go; `definitions` become `$defs`; every reference is
//! either a bare `#/$defs/<name>` or inlined (a `$ref` with siblings, a
//! pointer elsewhere in the document, a one-element `allOf`); a reference
//! that does not resolve becomes "any value", as does one that repeats a
//! pointer outside `$defs` (saying so); `$defs` nobody uses are pruned.
//! Inlining stops at [`MAX_NESTING`] levels and [`MAX_INLINED_NODES`] nodes:
//! past them a reference stays a reference (or becomes "any value").

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use module_sdk::schema::{LIST_SUBSCHEMA_KEYWORDS, MAP_SUBSCHEMA_KEYWORDS, SINGLE_SUBSCHEMA_KEYWORDS};
use serde_json::Value;

use super::combine::combined;
use super::keywords::{Keywords, items, members};
use super::notes::described;
use super::prepared::Prepared;
use super::walk::{MAX_INLINED_NODES, MAX_NESTING, OMITTED, def_name, escape, omitted};

/// Keywords that identify a document rather than constrain a value.
const DOCUMENT_KEYWORDS: &[&str] = &["$schema", "$id", "$anchor", "$dynamicAnchor", "$vocabulary"];

/// `schema` with references in the one shape every target starts from.
pub fn prepare(schema: &Value) -> Value {
    prepared(schema).into_value()
}

/// [`prepare`]'s schema as JSON text, appended to `out`, written from the
/// borrowed document without a `Value` tree in between.
pub(crate) fn prepare_json(schema: &Value, out: &mut Vec<u8>) {
    prepared(schema).write(out);
}

/// [`prepare`]'s schema, borrowing from `schema` what it keeps as it is:
/// each node's keywords are rewritten as a borrowed [`Keywords`] list.
pub(crate) fn prepared(schema: &Value) -> Prepared<'_> {
    let Value::Object(source) = schema else {
        return Prepared::Value(Cow::Borrowed(schema));
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
    let mut preparer = Preparer {
        document: schema,
        defs: &defs,
        stack: Vec::new(),
        depth: 0,
        nodes: 0,
        refs: Vec::new(),
        root: false,
    };
    let mut prepared_defs = Vec::new();
    for (name, def) in order {
        preparer.stack = vec![name.to_owned()];
        let node = preparer.node(Cow::Borrowed(def));
        prepared_defs.push((name, node, std::mem::take(&mut preparer.refs)));
    }
    preparer.stack = vec![String::new()];
    preparer.root = true;
    let root = preparer.merged(root);
    let used = used_defs(preparer.refs, &prepared_defs);
    let mut out = match root.into_object() {
        Ok(out) => out,
        // Only a reference to a `false` (or non-schema) definition leaves the root no object.
        Err(other) => return other,
    };
    let kept: Vec<(Cow<'_, str>, Prepared<'_>)> = prepared_defs
        .into_iter()
        .filter(|(name, _, _)| used.contains(*name))
        .map(|(name, node, _)| (Cow::Borrowed(name), node))
        .collect();
    if !kept.is_empty() {
        let defs = Prepared::Object(kept);
        match out.iter_mut().find(|(keyword, _)| keyword == "$defs") {
            Some((_, old)) => *old = defs,
            None => out.push(("$defs".into(), defs)),
        }
    }
    Prepared::Object(out)
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
    /// The definitions the nodes prepared since last taken refer to.
    refs: Vec<String>,
    /// Whether the next object prepared is the document's root, whose own
    /// reference and `$defs` keyword do not count as uses of a definition.
    root: bool,
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
    fn node(&mut self, node: Cow<'a, Value>) -> Prepared<'a> {
        self.within(|preparer| match node {
            // Nothing to rewrite in the node itself (the common case): its keywords stay as they are, in order.
            Cow::Borrowed(Value::Object(map)) if !preparer.root && !map.keys().any(|keyword| rewritten(keyword)) => {
                Prepared::Object(
                    map.iter()
                        .map(|(keyword, value)| {
                            (Cow::Borrowed(keyword.as_str()), preparer.children(keyword, Cow::Borrowed(value)))
                        })
                        .collect(),
                )
            }
            Cow::Borrowed(other) if !other.is_object() => Prepared::Value(Cow::Borrowed(other)),
            node => match Keywords::of(node) {
                Ok(map) => preparer.object(map),
                Err(other) => Prepared::Value(Cow::Owned(other)),
            },
        })
    }

    /// The node of the keywords `map` prepared, as [`Self::node`].
    fn merged(&mut self, map: Keywords<'a>) -> Prepared<'a> {
        self.within(|preparer| preparer.object(map))
    }

    /// What `prepare` makes one level deeper, or "any value" past [`MAX_NESTING`].
    fn within(&mut self, prepare: impl FnOnce(&mut Self) -> Prepared<'a>) -> Prepared<'a> {
        if self.depth >= MAX_NESTING {
            return Prepared::Value(Cow::Owned(Value::Object(omitted())));
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

    /// `{"$ref": "#/$defs/<name>"}`, counted as a use of `name` unless it is the root.
    fn reference(&mut self, name: String, root: bool) -> Prepared<'a> {
        let pointer = Value::String(format!("#/$defs/{}", escape(&name)));
        if !root {
            self.refs.push(name);
        }
        Prepared::Object(vec![("$ref".into(), Prepared::Value(Cow::Owned(pointer)))])
    }

    fn object(&mut self, mut map: Keywords<'a>) -> Prepared<'a> {
        let root = std::mem::replace(&mut self.root, false);
        for keyword in DOCUMENT_KEYWORDS {
            map.remove(keyword);
        }
        if let Some(Value::Array(all)) = map.get("allOf")
            && let [Value::Object(_)] = all.as_slice()
            && let Some(only) = map.remove("allOf").and_then(only_item)
            && let Ok(only) = Keywords::of(only)
        {
            self.root = root;
            return self.merged(combined(only, map));
        }
        if let Some(reference) = map.remove("$ref")
            && let Value::String(reference) = &*reference
        {
            match self.target(reference) {
                Target::Def(name) if map.is_empty() => return self.reference(name, root),
                Target::Def(name) if self.stack.contains(&name) || self.spent() => {
                    // The siblings stay: the reference joins them as a one-branch union, or in an `allOf`.
                    let bare = serde_json::json!({ "$ref": format!("#/$defs/{}", escape(&name)) });
                    if map.contains_key("anyOf") || map.contains_key("oneOf") {
                        let mut all = match map.remove("allOf").map(Cow::into_owned) {
                            Some(Value::Array(all)) => all,
                            Some(other) => vec![serde_json::json!({ "allOf": other })],
                            None => Vec::new(),
                        };
                        all.push(bare);
                        map.insert("allOf".into(), Cow::Owned(Value::Array(all)));
                    } else {
                        map.insert("anyOf".into(), Cow::Owned(Value::Array(vec![bare])));
                    }
                }
                Target::Def(name) => {
                    let target = self.defs[name.as_str()];
                    self.root = root;
                    return self.inline(name, target, map);
                }
                // Only `$defs` can be referred to: the repeated or over-budget node becomes any value, saying so.
                Target::Pointer(pointer, _) if self.stack.contains(&pointer) || self.spent() => {
                    let note = described(map.get("description").and_then(Value::as_str), &[OMITTED.to_owned()]);
                    map.insert("description".into(), Cow::Owned(Value::String(note.unwrap_or_default())));
                }
                Target::Pointer(pointer, target) => {
                    self.root = root;
                    return self.inline(pointer, target, map);
                }
                Target::Unresolved => {}
            }
        }
        let mut out = Vec::new();
        for (keyword, value) in map.into_entries() {
            let node = match root && keyword == "$defs" {
                // The root's own `$defs` (merged in from an `allOf`) are replaced by the used definitions, if any.
                true => {
                    let refs = std::mem::take(&mut self.refs);
                    let node = self.children(&keyword, value);
                    self.refs = refs;
                    node
                }
                false => self.children(&keyword, value),
            };
            out.push((keyword, node));
        }
        Prepared::Object(out)
    }

    /// `keyword: value` with the subschemas in `value` prepared.
    fn children(&mut self, keyword: &str, value: Cow<'a, Value>) -> Prepared<'a> {
        let value = if LIST_SUBSCHEMA_KEYWORDS.contains(&keyword) {
            match items(value) {
                Ok(items) => return Prepared::Array(items.map(|item| self.node(item)).collect()),
                Err(other) => other,
            }
        } else if MAP_SUBSCHEMA_KEYWORDS.contains(&keyword) {
            match members(value) {
                Ok(members) => {
                    return Prepared::Object(members.map(|(name, child)| (name, self.node(child))).collect());
                }
                Err(other) => other,
            }
        } else {
            value
        };
        match value {
            value if SINGLE_SUBSCHEMA_KEYWORDS.contains(&keyword) && (value.is_object() || value.is_boolean()) => {
                self.node(value)
            }
            other => Prepared::Value(other),
        }
    }

    /// `target` and the referring node's other keywords, combined (both hold).
    fn inline(&mut self, key: String, target: &'a Value, siblings: Keywords<'a>) -> Prepared<'a> {
        let base = match target {
            Value::Object(target) => {
                // A pointer to the root brings the document's definitions along; they stay at the root.
                let mut target = Keywords::borrowed(target);
                target.remove("$defs");
                target.remove("definitions");
                target
            }
            Value::Bool(true) => Keywords::default(),
            other => {
                self.root = false;
                return Prepared::Value(Cow::Borrowed(other));
            }
        };
        self.stack.push(key);
        let out = self.merged(combined(base, siblings));
        self.stack.pop();
        out
    }
}

/// Whether [`Preparer::object`] drops or rewrites `keyword` of a node.
fn rewritten(keyword: &str) -> bool {
    keyword == "$ref" || keyword == "allOf" || DOCUMENT_KEYWORDS.contains(&keyword)
}

/// The one item of a one-item list.
fn only_item(list: Cow<'_, Value>) -> Option<Cow<'_, Value>> {
    items(list).ok()?.next()
}

/// The definitions in use: those `root_refs` names, and those they refer to, transitively.
fn used_defs<'a>(root_refs: Vec<String>, defs: &[(&'a str, Prepared<'_>, Vec<String>)]) -> HashSet<&'a str> {
    let mut used = HashSet::new();
    let mut pending = root_refs;
    while let Some(name) = pending.pop() {
        if let Some((name, _, refs)) = defs.iter().find(|(def, _, _)| *def == name)
            && used.insert(*name)
        {
            pending.extend(refs.iter().cloned());
        }
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
    fn a_reference_or_one_item_all_of_and_its_siblings_are_combined_not_replaced() {
        let place = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
        let schema = json!({"type": "object", "properties": {
            "home": {"$ref": "#/$defs/Place", "properties": {"note": {"type": "string"}}},
            "p": {"type": "object", "properties": {"a": {"type": "string"}}, "allOf": [{"properties": {"b": {"type": "string"}}, "required": ["b"]}]}
        }, "$defs": {"Place": place}});
        let out = prepare(&schema);
        assert_eq!(
            out["properties"]["home"],
            json!({"type": "object", "properties": {"name": {"type": "string"}, "note": {"type": "string"}},
                "required": ["name"]})
        );
        assert_eq!(
            out["properties"]["p"],
            json!({"properties": {"b": {"type": "string"}, "a": {"type": "string"}}, "required": ["b"], "type": "object"})
        );
        // OpenAI strict: `name` stays a property the model can send, and must.
        let strict = super::super::openai(&schema);
        assert!(strict.strict);
        assert_eq!(strict.schema["properties"]["home"]["required"], json!(["name", "note"]));
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
    fn a_repeated_reference_keeps_its_siblings_and_a_repeated_pointer_says_it_is_cut() {
        let schema = json!({"type": "object", "properties": {
            "tree": {"$ref": "#/$defs/T"},
            "t": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/properties/t"}}}}
        }, "$defs": {"T": {"type": "object", "properties": {"next": {
            "$ref": "#/$defs/T", "description": "N.", "properties": {"x": {}}, "anyOf": [{"required": ["x"]}]
        }}}}});
        let out = prepare(&schema);
        assert_eq!(
            out["$defs"]["T"]["properties"]["next"],
            json!({"description": "N.", "properties": {"x": {}}, "anyOf": [{"required": ["x"]}],
                "allOf": [{"$ref": "#/$defs/T"}]})
        );
        let kids = &out["properties"]["t"]["properties"]["kids"]["items"]["properties"]["kids"];
        assert_eq!(kids["items"], json!({"description": format!("({OMITTED})")}));
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
        assert_eq!(out["properties"]["a"], json!({"description": format!("A. ({OMITTED})")}));
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
