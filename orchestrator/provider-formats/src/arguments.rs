//! Arguments from a model, mapped back to what the tool's own schema says:
//! Gemini-safe property names renamed to the real ones, and the `null`s that
//! strict mode makes a model send for optional fields left out again (a
//! field that was optional but not nullable would reject them).
//!
//! The mapping reads the same prepared schema the compilers start from
//! ([`crate::compile::prepare`]): references with siblings and one-item `allOf`s
//! are already combined there, so every property the model saw is found.

use std::cmp::Reverse;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use module_sdk::schema::resolve;
use serde_json::{Map, Value};

use super::names::{gemini_property_names, is_gemini_property_name};

/// How deep into nested arguments (and `allOf` lists) the mapping goes.
const MAX_DEPTH: usize = 64;

/// The most steps one call's mapping takes: schema nodes visited, sent
/// names looked up and declared names read (once per node and call),
/// each one step. Each walk visits a schema node
/// once (a schema may refer to itself through `allOf`, `D: {allOf: [D, D]}`,
/// which would otherwise take 2^64 steps), so this only bounds a hostile
/// module's huge schemas met by a model's many objects; a model's whole
/// output (at most ~100 000 names) maps against ordinary schemas well
/// within it. Past it the rest of the call is left as sent (the module
/// still checks it), and the call says so ([`crate::RequestedCall::arguments_cut_short`]).
pub const MAX_MAPPING_STEPS: usize = 2_000_000;

/// Maps `arguments` back in place, following `prepared` (the tool's
/// original input schema as [`crate::compile::prepare`] makes it); `renamed` when
/// the provider saw Gemini-safe property names. False when the mapping
/// stopped at [`MAX_MAPPING_STEPS`], the rest of `arguments` left as sent.
pub fn restore(prepared: &Value, arguments: &mut Map<String, Value>, renamed: bool) -> bool {
    let mut mapping = Mapping::new(prepared, renamed, MAX_MAPPING_STEPS);
    mapping.restore_object(&[prepared], arguments, 0);
    mapping.whole()
}

/// One call's mapping: the prepared schema it follows (`root`), whether the
/// model saw Gemini-safe names, the steps it has left ([`MAX_MAPPING_STEPS`]), and
/// what it learnt of the prepared schema's nodes, each by its address and
/// worked out once per call: which take `null`, what names the nodes that
/// describe one object declare together.
struct Mapping<'s> {
    root: &'s Value,
    renamed: bool,
    left: usize,
    nullable: HashMap<*const Value, bool>,
    declared: HashMap<Vec<*const Value>, Rc<Declared<'s>>>,
    /// How many sets of nodes' names were worked out, for the tests to count.
    #[cfg(test)]
    computed: usize,
}

/// The names that the schema nodes with `properties` describing one object
/// declare together, as a call's mapping reads them (see [`Mapping::declared`]).
struct Declared<'s> {
    /// The schemas of each real name, one per node that declares it (all hold).
    schemas: HashMap<&'s str, Vec<&'s Value>>,
    /// The real name of each Gemini-safe name that differs from it (none unless renamed).
    real: HashMap<String, &'s str>,
    /// The `required` names.
    required: HashSet<&'s str>,
    /// The `required` names as the model sends them (Gemini-safe when renamed).
    required_sent: HashSet<String>,
}

impl<'s> Declared<'s> {
    /// Whether the model, sending `key`, names one of these properties.
    fn declares(&self, key: &str, renamed: bool) -> bool {
        match renamed {
            // A safe name is its own, or one made for a real name that is not.
            true => self.real.contains_key(key) || (is_gemini_property_name(key) && self.schemas.contains_key(key)),
            false => self.schemas.contains_key(key),
        }
    }

    /// Whether `map` holds every required name, as sent.
    fn all_required(&self, map: &Map<String, Value>) -> bool {
        map.keys().filter(|key| self.required_sent.contains(key.as_str())).count() == self.required_sent.len()
    }

    /// The schemas of the property `name` (none when no node declares it).
    fn schemas(&self, name: &str) -> &[&'s Value] {
        self.schemas.get(name).map_or(&[], Vec::as_slice)
    }
}

impl<'s> Mapping<'s> {
    /// A mapping of a call against `root` that may take `steps` steps.
    fn new(root: &'s Value, renamed: bool, steps: usize) -> Self {
        Self {
            root,
            renamed,
            left: steps,
            nullable: HashMap::new(),
            declared: HashMap::new(),
            #[cfg(test)]
            computed: 0,
        }
    }

    /// The names the resolved schema nodes `nodes`, each with `properties`,
    /// declare together: Gemini-safe names worked out over the joined set
    /// ([`gemini_property_names`]), as the conversion, which merges the
    /// nodes into one, works them out. Worked out the first time the call
    /// meets these nodes (a step a name read) and kept, so a model's many
    /// objects, or a branch tried for each, read them again for free.
    /// `None` when the steps ran out.
    fn declared(&mut self, nodes: &[&'s Value]) -> Option<Rc<Declared<'s>>> {
        let key: Vec<*const Value> = nodes.iter().map(|node| std::ptr::from_ref(*node)).collect();
        if let Some(known) = self.declared.get(&key) {
            return Some(Rc::clone(known));
        }
        let parts: Vec<&'s Map<String, Value>> =
            nodes.iter().filter_map(|node| node.get("properties").and_then(Value::as_object)).collect();
        let required: Vec<&'s str> = nodes.iter().flat_map(|node| required_names(node)).collect();
        if !self.take(parts.iter().map(|properties| properties.len()).sum::<usize>() + required.len()) {
            return None;
        }
        #[cfg(test)]
        {
            self.computed += 1;
        }
        let safe: Vec<(&str, String)> = match self.renamed {
            true => gemini_property_names(&parts),
            false => Vec::new(),
        };
        let safe_of: HashMap<&str, &str> = safe.iter().map(|(name, safe)| (*name, safe.as_str())).collect();
        let required_sent =
            required.iter().map(|name| safe_of.get(name).map_or(*name, |safe| *safe).to_owned()).collect();
        let real = safe.iter().filter(|(name, safe)| name != safe).map(|(name, safe)| (safe.clone(), *name)).collect();
        let mut schemas: HashMap<&'s str, Vec<&'s Value>> = HashMap::new();
        for (name, schema) in parts.iter().flat_map(|properties| properties.iter()) {
            schemas.entry(name.as_str()).or_default().push(schema);
        }
        let declared = Rc::new(Declared { schemas, real, required: required.into_iter().collect(), required_sent });
        self.declared.insert(key, Rc::clone(&declared));
        Some(declared)
    }

    /// Whether the mapping went where it had to within its steps.
    fn whole(&self) -> bool {
        self.left > 0
    }

    /// Takes `count` steps; false (and none left) when fewer remain.
    fn take(&mut self, count: usize) -> bool {
        match self.left.checked_sub(count) {
            Some(left) => self.left = left,
            None => self.left = 0,
        }
        self.left > 0
    }

    /// Maps back the object `map` that the schema nodes `nodes` all describe.
    fn restore_object(&mut self, nodes: &[&'s Value], map: &mut Map<String, Value>, depth: usize) {
        let schemas = self.object_schemas(nodes, map, depth);
        if schemas.is_empty() {
            return;
        }
        let Some(declared) = self.declared(&schemas) else { return };
        if !self.take(map.len()) {
            return;
        }
        // Safe names that differ never meet a real name, so each is renamed on its own.
        let renames: Vec<(String, &str)> = map
            .keys()
            .filter_map(|key| declared.real.get(key).map(|real| (key.clone(), *real)))
            .filter(|(_, real)| !map.contains_key(*real))
            .collect();
        for (safe, real) in renames {
            if let Some(value) = map.remove(&safe) {
                map.insert(real.to_owned(), value);
            }
        }
        map.retain(|key, value| {
            !(value.is_null()
                && !declared.required.contains(key.as_str())
                && declared.schemas(key).iter().any(|p| !self.accepts_null(p, 0)))
        });
        for (key, value) in map.iter_mut() {
            let schemas = declared.schemas(key);
            if !schemas.is_empty() {
                self.restore_value(schemas, value, depth + 1);
            }
        }
    }

    /// Maps back `value`, which the schema nodes `nodes` all describe.
    fn restore_value(&mut self, nodes: &[&'s Value], value: &mut Value, depth: usize) {
        match value {
            Value::Object(map) => self.restore_object(nodes, map, depth),
            Value::Array(items) if depth <= MAX_DEPTH && self.take(1) => {
                let mut closure = Vec::new();
                let mut visited = HashSet::new();
                for node in nodes {
                    self.all_of_closure(node, depth, &mut visited, &mut closure);
                }
                // The conversion keeps the first `items` of those it merges.
                let item = closure
                    .iter()
                    .find_map(|node| node.get("items"))
                    .or_else(|| self.union(&closure).into_iter().find_map(|(_, branch)| branch.get("items")));
                if let Some(item) = item.filter(|item| item.is_object()) {
                    items.iter_mut().for_each(|value| self.restore_value(&[item], value, depth + 1));
                }
            }
            _ => {}
        }
    }

    /// The schema nodes with `properties` that describe the object `map`
    /// that `nodes` describe, in the order Gemini's conversion joins their
    /// properties: each node and its `allOf` parts, depth first
    /// ([`Self::all_of_closure`]); then of their union the branch that best
    /// matches the names the model sent ([`Self::matching`]) with its own
    /// parts, then of the branch's union, and so on. Each node once,
    /// however often the schema refers to it.
    fn object_schemas(&mut self, nodes: &[&'s Value], map: &Map<String, Value>, depth: usize) -> Vec<&'s Value> {
        let mut visited = HashSet::new();
        let mut closure = Vec::new();
        let mut next = nodes.to_vec();
        for depth in depth.. {
            let start = closure.len();
            for node in next {
                self.all_of_closure(node, depth, &mut visited, &mut closure);
            }
            let base: Vec<&'s Value> =
                closure.iter().copied().filter(|node| node.get("properties").is_some()).collect();
            let branches = self.union(&closure[start..]);
            let scored: Vec<_> = branches
                .into_iter()
                .filter_map(|branch| self.matching(branch, &base, &visited, map, depth + 1))
                .collect();
            let best = scored.into_iter().max_by_key(
                // The first of equally good branches wins: `max_by_key` keeps the last, so earlier ones rank higher.
                |&(score, index, _)| (score, Reverse(index)),
            );
            match best {
                Some((_, _, branch)) => next = vec![branch],
                None => break,
            }
        }
        closure.retain(|node| node.get("properties").is_some());
        closure
    }

    /// Adds to `out` the resolved `node` and its `allOf` parts, depth
    /// first (the order the conversion merges them in), each not `visited` before.
    fn all_of_closure(
        &mut self,
        node: &'s Value,
        depth: usize,
        visited: &mut HashSet<*const Value>,
        out: &mut Vec<&'s Value>,
    ) {
        if depth > MAX_DEPTH || !self.take(1) {
            return;
        }
        let node = resolve(self.root, node);
        if !visited.insert(node) {
            return;
        }
        out.push(node);
        for part in node.get("allOf").and_then(Value::as_array).into_iter().flatten() {
            self.all_of_closure(part, depth + 1, visited, out);
        }
    }

    /// How well the union branch `branch` matches the names of `map`, as the
    /// model sent them (Gemini-safe when renamed), beside the nodes `base`
    /// already found (the conversion merges them into each branch; `visited`
    /// those and their parts): whether all required names are there, how
    /// many sent names are declared, how few are not, how few declared names
    /// were not sent ([`Score`]); `None` for a branch that declares no properties.
    fn matching(
        &mut self,
        branch: (usize, &'s Value),
        base: &[&'s Value],
        visited: &HashSet<*const Value>,
        map: &Map<String, Value>,
        depth: usize,
    ) -> Option<(Score, usize, &'s Value)> {
        let (index, node) = branch;
        let mut closure = Vec::new();
        self.all_of_closure(node, depth, &mut HashSet::new(), &mut closure);
        let own: Vec<&'s Value> = closure
            .into_iter()
            .filter(|part| part.get("properties").is_some() && !visited.contains(&std::ptr::from_ref(*part)))
            .collect();
        if own.is_empty() {
            return None;
        }
        let nodes: Vec<&'s Value> = base.iter().chain(&own).copied().collect();
        let declared = self.declared(&nodes)?;
        if !self.take(map.len()) {
            return None;
        }
        let known = map.keys().filter(|key| declared.declares(key, self.renamed)).count();
        let unsent = declared.schemas.len().saturating_sub(known);
        Some(((declared.all_required(map), known, Reverse(map.len() - known), Reverse(unsent)), index, node))
    }

    /// The resolved alternatives of the union that the nodes `nodes` make
    /// when merged, with their positions: the first `anyOf` among them and
    /// the first `oneOf` (the conversion keeps those, saying the others in words).
    fn union(&self, nodes: &[&'s Value]) -> Vec<(usize, &'s Value)> {
        ["anyOf", "oneOf"]
            .iter()
            .filter_map(|k| nodes.iter().find_map(|node| node.get(*k).and_then(Value::as_array)))
            .flatten()
            .map(|branch| resolve(self.root, branch))
            .enumerate()
            .collect()
    }

    /// Whether `node` lets a value be `null` (yes, when the steps run out or the
    /// node refers back to itself: the `null` is then left for the module to
    /// judge). Each node is judged once per call ([`Mapping::nullable`]).
    fn accepts_null(&mut self, node: &'s Value, depth: usize) -> bool {
        if depth > MAX_DEPTH || !self.take(1) {
            return true;
        }
        let node = resolve(self.root, node);
        if let Some(&known) = self.nullable.get(&std::ptr::from_ref(node)) {
            return known;
        }
        self.nullable.insert(node, true);
        let judged = self.judge_null(node, depth);
        self.nullable.insert(node, judged);
        judged
    }

    /// [`Self::accepts_null`] of a resolved node not judged before.
    fn judge_null(&mut self, node: &'s Value, depth: usize) -> bool {
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
            || self.union(&[node]).into_iter().any(|(_, b)| self.accepts_null(b, depth + 1))
            || !constrained;
        own && parts.into_iter().all(|part| self.accepts_null(part, depth + 1))
    }
}

/// How well a union branch matches sent names: all its required names sent,
/// how many sent names it declares, how few it does not, how few it
/// declares that were not sent (a model fills in the branch it chose, so
/// of two branches that declare every sent name the narrower is meant;
/// higher is better).
type Score = (bool, usize, Reverse<usize>, Reverse<usize>);

/// The `required` names of an object schema.
fn required_names(node: &Value) -> Vec<&str> {
    node.get("required")
        .and_then(Value::as_array)
        .map_or(Vec::new(), |names| names.iter().filter_map(Value::as_str).collect())
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
    fn a_union_nodes_own_properties_are_renamed_back_beside_the_branch_found() {
        // Gemini sees the node's `kind-of` and `max-results` in every branch; the model sends them with one branch's.
        let schema = json!({"type": "object", "properties": {"v": {
            "type": "object",
            "properties": {"kind-of": {"type": "string"}, "max-results": {"type": ["integer", "null"]}},
            "required": ["kind-of"],
            "oneOf": [
                {"properties": {"page-size": {"type": "integer"}, "max-results": {"minimum": 1}}, "required": ["page-size"]},
                {"properties": {"sort-by": {"type": "string"}, "order": {"type": "string"}}, "required": ["sort-by"]}
            ]
        }}});
        let prepared = compile::prepare(&schema);
        let sent = json!({"kind_of": "a", "max_results": null, "sort_by": "x", "order": null});
        let mut args = json!({"v": sent});
        assert!(restore(&prepared, args.as_object_mut().unwrap(), true));
        assert_eq!(args, json!({"v": {"kind-of": "a", "max-results": null, "sort-by": "x"}}));
        let mut args = json!({"v": {"kind_of": "a", "page_size": 2, "max_results": 3}});
        assert!(restore(&prepared, args.as_object_mut().unwrap(), true));
        assert_eq!(args, json!({"v": {"kind-of": "a", "page-size": 2, "max-results": 3}}));
    }

    /// Arguments for the object at `converted` (a Gemini-converted schema
    /// node) as a model shapes them: every property under its converted
    /// name, its value the property's `description` (nested objects filled
    /// the same way), so that mapped back each shows whose name it got.
    fn sent_by(converted: &Value) -> Value {
        let properties = converted["properties"].as_object().expect("an object node");
        let sent = properties.iter().map(|(name, property)| {
            let value = match property.get("properties") {
                Some(_) => sent_by(property),
                None => property["description"].clone(),
            };
            (name.clone(), value)
        });
        Value::Object(sent.collect())
    }

    #[test]
    fn names_made_safe_over_an_all_of_or_a_branchs_joined_properties_map_back() {
        // Gemini sees one object with the parts' properties joined; `max-results` and `max_results` meet there.
        let parent = json!({"max-results": {"type": "string", "description": "parent"}});
        let part = json!({"max_results": {"type": "string", "description": "part"}});
        let expected = json!({"max-results": "parent", "max_results": "part"});
        let all_of = json!({"type": "object", "properties": {"v": {"allOf": [
            {"type": "object", "properties": parent}, {"type": "object", "properties": part}
        ]}}});
        let all_of_backwards = json!({"type": "object", "properties": {"v": {"allOf": [
            {"type": "object", "properties": part}, {"type": "object", "properties": parent}
        ]}}});
        let branch = json!({"type": "object", "properties": {"v": {"type": "object", "properties": parent, "oneOf": [
            {"properties": part, "required": ["max_results"]},
            {"properties": {"other": {"type": "string", "description": "other"}}, "required": ["other"]}
        ]}}});
        let one_branch = json!({"type": "object", "properties": {"v": {"type": "object", "properties": part,
            "anyOf": [{"properties": parent}, {"type": "null"}]}}});
        for schema in [all_of, all_of_backwards, branch, one_branch] {
            let converted = compile::gemini(&schema);
            let v = &converted["properties"]["v"];
            let v = v.get("anyOf").map_or(v, |branches| &branches[0]);
            let mut args = json!({"v": sent_by(v)});
            assert!(restore(&compile::prepare(&schema), args.as_object_mut().unwrap(), true));
            assert_eq!(args["v"], expected, "{schema}: converted {v}");
        }
    }

    /// Property names that meet once made Gemini-safe.
    const MEETING_NAMES: &[&str] = &["a-b", "a_b", "a.b", "a_b_2", "x", "1x", "_1x"];

    /// Object schemas whose properties (named from [`MEETING_NAMES`], each
    /// described by its own name) sit in the node, its `allOf` parts and its
    /// `oneOf` branches (each with a required name of its own), nested.
    fn meeting_objects() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        fn with_properties(child: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
            proptest::sample::subsequence(MEETING_NAMES, 0..=3)
                .prop_flat_map(move |names| {
                    let children = proptest::collection::vec(
                        prop_oneof![Just(json!({"type": "string"})), child.clone()],
                        names.len(),
                    );
                    children.prop_map(move |children| {
                        let properties: Map<String, Value> = names
                            .iter()
                            .zip(children)
                            .map(|(name, mut child)| {
                                child["description"] = json!(name);
                                (name.to_string(), child)
                            })
                            .collect();
                        json!({"type": "object", "properties": properties})
                    })
                })
                .boxed()
        }
        with_properties(Just(json!({"type": "string"})).boxed()).prop_recursive(3, 40, 3, |inner| {
            let parts = proptest::collection::vec(inner.clone(), 0..=2);
            let branches = proptest::collection::vec(inner.clone(), 0..=3);
            (with_properties(inner), parts, branches).prop_map(|(mut node, parts, branches)| {
                if !parts.is_empty() {
                    node["allOf"] = json!(parts);
                }
                if branches.len() > 1 {
                    // Each branch required a name of its own: branches whose names all meet are one to a model.
                    let branches: Vec<Value> = branches
                        .into_iter()
                        .enumerate()
                        .map(|(i, mut branch)| {
                            let own = format!("only{i}");
                            branch["properties"][&own] = json!({"type": "string", "description": own});
                            branch["required"] = json!([own]);
                            branch
                        })
                        .collect();
                    node["oneOf"] = json!(branches);
                }
                node
            })
        })
    }

    /// What a model sends for the Gemini-converted object node `converted`
    /// (of a union, branch `pick`): every property under its converted name,
    /// and what that should map back to, each under the real name its
    /// description starts with; `None` for a node that is not an object.
    fn model_sends(converted: &Value, pick: usize) -> Option<(Value, Value)> {
        let node = match converted.get("anyOf").and_then(Value::as_array) {
            Some(branches) => &branches[pick % branches.len()],
            None => converted,
        };
        let properties = node.get("properties")?.as_object()?;
        let (mut sent, mut expected) = (Map::new(), Map::new());
        for (safe, property) in properties {
            let real = property["description"].as_str().unwrap().split(' ').next().unwrap();
            let (value, back) = model_sends(property, pick).unwrap_or_else(|| (json!(real), json!(real)));
            sent.insert(safe.clone(), value);
            expected.insert(real.to_owned(), back);
        }
        Some((Value::Object(sent), Value::Object(expected)))
    }

    proptest::proptest! {
        #[test]
        fn every_property_gemini_shows_maps_back_to_its_own_name(mut node in meeting_objects(), pick in 0..3usize) {
            node["description"] = json!("v");
            let schema = json!({"type": "object", "properties": {"v": node}, "required": ["v"]});
            let converted = compile::gemini(&schema);
            let (mut sent, expected) = model_sends(&converted, pick).unwrap();
            let before = sent.clone();
            restore(&compile::prepare(&schema), sent.as_object_mut().unwrap(), true);
            proptest::prop_assert_eq!(&sent, &expected, "sent {} for {}", before, converted);
        }
    }

    #[test]
    fn of_branches_that_declare_every_sent_name_the_narrowest_is_taken() {
        // Gemini shows the first branch's `a.b` and `a_b_2` and the second's `a-b` and `a.b` under the same names.
        let schema = json!({"type": "object", "properties": {"v": {"type": "object", "oneOf": [
            {"properties": {"a.b": {"type": "string"}, "a_b_2": {"type": "string"}, "x": {"type": "string"}}},
            {"properties": {"a-b": {"type": "string"}}, "allOf": [{"properties": {"a.b": {"type": "string"}}}]}
        ]}}});
        let converted = compile::gemini(&schema);
        assert_eq!(
            converted["properties"]["v"]["anyOf"][1]["properties"],
            json!({"a_b_2": {"type": "string"}, "a_b": {"type": "string"}})
        );
        let mut args = json!({"v": {"a_b_2": "1", "a_b": "2"}});
        assert!(restore(&compile::prepare(&schema), args.as_object_mut().unwrap(), true));
        assert_eq!(args, json!({"v": {"a-b": "1", "a.b": "2"}}));
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
            let mut mapping = Mapping::new(&prepared, true, MAX_MAPPING_STEPS);
            mapping.restore_object(&[&prepared], args.as_object_mut().unwrap(), 0);
            assert_eq!(args.get("x"), sent.get("x"), "left as sent");
            // Visiting a node more than once per walk, this takes 2^64 steps.
            assert!(MAX_MAPPING_STEPS - mapping.left < 100, "{} steps", MAX_MAPPING_STEPS - mapping.left);
        }
    }

    #[test]
    fn a_long_list_of_objects_is_mapped_back_whole() {
        let names: Vec<String> = (0..20).map(|i| format!("field-{i}")).collect();
        let properties: Map<String, Value> =
            names.iter().map(|name| (name.clone(), json!({"type": "string"}))).collect();
        let schema = json!({
            "type": "object",
            "properties": {"rows": {"type": "array", "items": {"type": "object", "properties": properties}}}
        });
        let row: Map<String, Value> = names.iter().map(|name| (name.replace('-', "_"), json!("v"))).collect();
        let mut args = json!({"rows": vec![Value::Object(row); 5000]});
        assert!(restore(&compile::prepare(&schema), args.as_object_mut().unwrap(), true), "mapped whole");
        let rows = args["rows"].as_array().unwrap();
        assert!(rows.iter().all(|row| row.get("field-19") == Some(&json!("v"))), "every row renamed back");
    }

    #[test]
    fn properties_behind_a_reference_in_a_one_item_all_of_are_found() {
        let schema = json!({"type": "object", "properties": {"p": {"allOf": [{"$ref": "#/$defs/P"}]}},
            "$defs": {"P": {"type": "object", "properties": {"opt": {"type": "integer"}, "a-b": {"type": "string"}}}}});
        let mut args = json!({"p": {"opt": null, "a_b": "x"}});
        restore(&compile::prepare(&schema), args.as_object_mut().unwrap(), true);
        assert_eq!(args, json!({"p": {"a-b": "x"}}));
    }

    #[test]
    fn each_nodes_names_are_worked_out_once_per_call_however_many_objects_meet_it() {
        // A hostile module's 3,000 properties (each renamed) in each branch of a union, met by a model's 50,000 objects.
        let properties = |prefix: &str| -> Map<String, Value> {
            (0..3000).map(|i| (format!("{prefix}-{i}"), json!({"type": "integer"}))).collect()
        };
        let schema = json!({"type": "object", "properties": {"rows": {"type": "array", "items": {"anyOf": [
            {"type": "object", "properties": properties("q")},
            {"type": "object", "properties": properties("p")}
        ]}}}});
        let prepared = compile::prepare(&schema);
        let mut args = json!({"rows": vec![json!({"p_7": 1, "p_2999": null}); 50_000]});
        let mut mapping = Mapping::new(&prepared, true, MAX_MAPPING_STEPS);
        mapping.restore_object(&[&prepared], args.as_object_mut().unwrap(), 0);
        assert!(mapping.whole());
        // The root's and each branch's: once, not once per object (nor per branch tried).
        assert_eq!(mapping.computed, 3);
        let rows = args["rows"].as_array().unwrap();
        assert!(rows.iter().all(|row| row == &json!({"p-7": 1})), "every row mapped back within the steps");
    }

    #[test]
    fn a_mapping_past_its_steps_leaves_the_rest_as_sent_and_says_so() {
        let schema = json!({"type": "object", "properties": {"rows": {"type": "array", "items": {
            "type": "object", "properties": {"a-b": {"type": "string"}}
        }}}});
        let prepared = compile::prepare(&schema);
        let mut args = json!({"rows": vec![json!({"a_b": "x"}); 100]});
        let mut mapping = Mapping::new(&prepared, true, 50);
        mapping.restore_object(&[&prepared], args.as_object_mut().unwrap(), 0);
        assert!(!mapping.whole());
        let rows = args["rows"].as_array().unwrap();
        assert_eq!(rows[0], json!({"a-b": "x"}), "mapped within the steps");
        assert_eq!(rows[99], json!({"a_b": "x"}), "left as sent past them");
    }
}
