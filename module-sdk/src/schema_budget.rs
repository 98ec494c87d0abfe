//! What a tool's `input_schema` may cost: its JSON text, how deep its
//! subschemas nest and how many there are once every local reference is
//! inlined (what provider conversions do). A handful of definitions that
//! each refer twice to the next is small as text and a million nodes when
//! inlined; a long chain of definitions nests as deep as it is long; a long
//! description in a definition used a thousand times is a thousand
//! descriptions; the other keywords of a union may be copied into each
//! branch, and those of a node with a type array into one branch per type.
//! All are measured here without recursion, and the walk stops as soon as a
//! budget is exceeded, so checking costs at most the budget.

use std::collections::HashSet;
use std::io;

use crate::schema::{LIST_SUBSCHEMA_KEYWORDS, MAP_SUBSCHEMA_KEYWORDS, SINGLE_SUBSCHEMA_KEYWORDS};
use serde_json::Value;

/// The default [`SchemaBudget::max_depth`].
pub const DEFAULT_MAX_SCHEMA_DEPTH: usize = 32;
/// The default [`SchemaBudget::max_nodes`].
pub const DEFAULT_MAX_SCHEMA_NODES: usize = 10_000;
/// The default [`SchemaBudget::max_bytes`], 1 MiB.
pub const DEFAULT_MAX_SCHEMA_BYTES: usize = 1024 * 1024;
/// The default [`SchemaBudget::max_patterns`].
pub const DEFAULT_MAX_SCHEMA_PATTERNS: usize = 64;

/// The default of an orchestrator's `MAX_MANIFEST_SCHEMA_BYTES`, 16 MiB:
/// what the `input_schema`s of one manifest may cost together, each counted
/// as for [`SchemaBudget::max_bytes`]; a 1,000-tool manifest may average
/// 16 KiB of schema per tool once inlined.
pub const DEFAULT_MAX_MANIFEST_SCHEMA_BYTES: usize = 16 * 1024 * 1024;

/// The most one `input_schema` may cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaBudget {
    /// `MAX_SCHEMA_DEPTH`: levels of nested subschemas, the root being 1 and
    /// every followed reference counting as a level.
    pub max_depth: usize,
    /// `MAX_SCHEMA_NODES`: subschemas once every local reference is inlined
    /// (a recursive reference is followed once) and a union's other keywords
    /// are copied into each of its branches.
    pub max_nodes: usize,
    /// `MAX_SCHEMA_BYTES`: the schema's JSON text, counted the same way, and
    /// a node's text once per type of its type array (`null` aside).
    pub max_bytes: usize,
    /// `MAX_SCHEMA_PATTERNS`: regular expressions (`pattern` values and
    /// `patternProperties` names) of one manifest, each schema's distinct
    /// ones counted and the counts added up ([`SchemaBudget::check_sharing`]):
    /// each tool's validator compiles its own, each to at most
    /// `MAX_PATTERN_COMPILED_BYTES` (a fixed size).
    pub max_patterns: usize,
}

impl Default for SchemaBudget {
    fn default() -> Self {
        Self {
            max_depth: DEFAULT_MAX_SCHEMA_DEPTH,
            max_nodes: DEFAULT_MAX_SCHEMA_NODES,
            max_bytes: DEFAULT_MAX_SCHEMA_BYTES,
            max_patterns: DEFAULT_MAX_SCHEMA_PATTERNS,
        }
    }
}

/// Which budget a schema exceeds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaBudgetError {
    /// Its subschemas nest too deep once references are followed.
    #[error("its subschemas nest deeper than {max} levels once references are followed (budget MAX_SCHEMA_DEPTH)")]
    TooDeep {
        /// The budget.
        max: usize,
    },
    /// It has too many subschemas once references are inlined.
    #[error("it has more than {max} subschemas once references are inlined (budget MAX_SCHEMA_NODES)")]
    TooManyNodes {
        /// The budget.
        max: usize,
    },
    /// Its JSON text is too long once references are inlined.
    #[error("its JSON text is longer than {max} bytes once references are inlined (budget MAX_SCHEMA_BYTES)")]
    TooLarge {
        /// The budget.
        max: usize,
    },
    /// It brings the schemas it is counted with to too many patterns.
    #[error(
        "it brings its manifest's schemas to more than {max} patterns (pattern, patternProperties; each \
         schema's distinct ones, added up) (budget MAX_SCHEMA_PATTERNS)"
    )]
    TooManyPatterns {
        /// The budget.
        max: usize,
    },
}

impl SchemaBudget {
    /// What `schema` costs when it stays within this budget: its text once
    /// inlined, counted as for [`Self::max_bytes`]; the first budget it
    /// exceeds otherwise.
    pub fn check(&self, schema: &Value) -> Result<usize, SchemaBudgetError> {
        self.walk(schema).run(&mut ManifestPatterns::default())
    }

    /// [`Self::check`], its distinct patterns counted with `patterns` (those
    /// of a manifest's other schemas), to which they are added; returns
    /// those no schema had before, to be compiled once.
    pub fn check_sharing<'a>(
        &self,
        schema: &'a Value,
        patterns: &mut ManifestPatterns,
    ) -> Result<Vec<&'a str>, SchemaBudgetError> {
        let mut walk = self.walk(schema);
        walk.run(patterns)?;
        Ok(walk.new)
    }

    fn walk<'a>(&self, schema: &'a Value) -> Walk<'a> {
        Walk {
            budget: *self,
            root: schema,
            chains: Vec::new(),
            nodes: 0,
            bytes: 0,
            own: HashSet::new(),
            new: Vec::new(),
            resources: None,
        }
    }
}

/// The patterns of a manifest's schemas counted so far
/// ([`SchemaBudget::check_sharing`]).
#[derive(Debug, Default)]
pub struct ManifestPatterns {
    /// Every distinct pattern once.
    distinct: HashSet<String>,
    /// Each schema's distinct patterns, added up: what the tools'
    /// validators compile between them.
    compiled: usize,
}

/// One node waiting to be measured: how deep it is, the references being
/// followed above it, how many copies of it a conversion may make, and the
/// resource its references resolve in (the nearest `$id` above it).
struct Pending<'a> {
    node: &'a Value,
    depth: usize,
    chain: Option<usize>,
    copies: usize,
    base: &'a Value,
}

/// The state of one [`SchemaBudget::check`]: the schema walked as if every
/// local reference were inlined, counting levels, nodes and text, stopping
/// at the first budget exceeded.
struct Walk<'a> {
    budget: SchemaBudget,
    root: &'a Value,
    /// The references followed: (target, the link above it).
    chains: Vec<(&'a Value, Option<usize>)>,
    nodes: usize,
    bytes: usize,
    /// This schema's distinct patterns.
    own: HashSet<&'a str>,
    /// The patterns not among those counted before this schema.
    new: Vec<&'a str>,
    /// Every subschema with an `$id`, found once a reference names another
    /// resource (`other#/x`).
    resources: Option<Vec<&'a Value>>,
}

impl<'a> Walk<'a> {
    fn run(&mut self, patterns: &mut ManifestPatterns) -> Result<usize, SchemaBudgetError> {
        let root = self.root;
        let mut pending = vec![Pending { node: root, depth: 1, chain: None, copies: 1, base: root }];
        while let Some(Pending { node, depth, chain, copies, base }) = pending.pop() {
            if depth > self.budget.max_depth {
                return Err(SchemaBudgetError::TooDeep { max: self.budget.max_depth });
            }
            self.add_nodes(copies)?;
            let Value::Object(map) = node else { continue };
            let base = if is_resource(map) { node } else { base };
            self.count_patterns(map, patterns)?;
            // A union's other keywords may be copied into each of its
            // branches (how Gemini's subset expresses `A and (B or C)`), and
            // a node's own keywords into one branch per type of its type
            // array (`null` aside: it becomes `nullable`); its subschemas go
            // to the branch of their kind only, save the union's branches and
            // `allOf`'s parts, which are laid over the node before it splits.
            let branches: usize = ["anyOf", "oneOf"].iter().filter_map(|k| map.get(*k)?.as_array()).map(Vec::len).sum();
            let types = map
                .get("type")
                .and_then(Value::as_array)
                .map_or(1, |types| types.iter().filter(|t| t.as_str() != Some("null")).count());
            let shared = copies.saturating_mul(branches.max(1));
            self.count_text(map, shared.saturating_mul(types.max(1)))?;
            for (target, base) in self.targets(map, base)? {
                if !self.on_chain(chain, target) {
                    self.chains.push((target, chain));
                    let chain = Some(self.chains.len() - 1);
                    pending.push(Pending { node: target, depth: depth + 1, chain, copies: shared, base });
                }
            }
            for (keyword, value) in map {
                let keyword = keyword.as_str();
                let copies = match keyword {
                    "anyOf" | "oneOf" => copies.saturating_mul(types.max(1)),
                    "allOf" => shared.saturating_mul(types.max(1)),
                    _ => shared,
                };
                let child = |node| Pending { node, depth: depth + 1, chain, copies, base };
                match held(keyword, value) {
                    Held::List(items) => pending.extend(items.iter().map(child)),
                    Held::Map(children) => pending.extend(children.values().filter(|v| !v.is_array()).map(child)),
                    Held::One(value) => pending.push(child(value)),
                    Held::Text => {}
                }
            }
        }
        Ok(self.bytes)
    }

    /// Counts `more` nodes against [`SchemaBudget::max_nodes`].
    fn add_nodes(&mut self, more: usize) -> Result<(), SchemaBudgetError> {
        self.nodes = self.nodes.saturating_add(more);
        if self.nodes > self.budget.max_nodes {
            return Err(SchemaBudgetError::TooManyNodes { max: self.budget.max_nodes });
        }
        Ok(())
    }

    /// The subschemas the references of `map` (in the resource `base`) may
    /// lead to, each with its resource: where the validator resolves a
    /// pointer (percent-decoded, in `base`; in every resource when the
    /// reference names another one) and where a provider conversion does
    /// (as written, from the root). A reference to an anchor leads to a
    /// subschema the walk reaches where it stands, as does a dynamic one
    /// sent elsewhere by a dynamic anchor.
    fn targets(
        &mut self,
        map: &'a serde_json::Map<String, Value>,
        base: &'a Value,
    ) -> Result<Vec<(&'a Value, &'a Value)>, SchemaBudgetError> {
        let mut targets: Vec<(&'a Value, &'a Value)> = Vec::new();
        for reference in REFERENCE_KEYWORDS.iter().filter_map(|k| map.get(*k)?.as_str()) {
            let Some((uri, fragment)) = reference.split_once('#') else { continue };
            if !(fragment.is_empty() || fragment.starts_with('/')) {
                continue;
            }
            let resources = if uri.is_empty() { vec![base] } else { self.resources()? };
            let decoded = percent_decoded(fragment);
            let found = resources.into_iter().filter_map(|resource| resolve(resource, decoded.as_deref()?));
            let written = uri.is_empty().then(|| self.root.pointer(fragment).map(|t| (t, self.root))).flatten();
            for (target, resource) in found.chain(written) {
                if !targets.iter().any(|(known, _)| std::ptr::eq(*known, target)) {
                    targets.push((target, resource));
                }
            }
        }
        Ok(targets)
    }

    /// The root and every subschema with an `$id`, found once; each costs
    /// a node, as each is tried for every reference to another resource.
    fn resources(&mut self) -> Result<Vec<&'a Value>, SchemaBudgetError> {
        if let Some(found) = self.resources.clone() {
            self.add_nodes(found.len())?;
            return Ok(found);
        }
        let mut found = vec![self.root];
        let mut pending = vec![self.root];
        let mut visited = 0usize;
        while let Some(node) = pending.pop() {
            visited += 1;
            if visited > self.budget.max_nodes {
                return Err(SchemaBudgetError::TooManyNodes { max: self.budget.max_nodes });
            }
            let Value::Object(map) = node else { continue };
            if is_resource(map) && !std::ptr::eq(node, self.root) {
                found.push(node);
            }
            for (keyword, value) in map {
                match held(keyword, value) {
                    Held::List(items) => pending.extend(items),
                    Held::Map(children) => pending.extend(children.values()),
                    Held::One(value) => pending.push(value),
                    Held::Text => {}
                }
            }
        }
        self.add_nodes(found.len())?;
        self.resources = Some(found.clone());
        Ok(found)
    }

    /// Adds `copies` times the text of `map` that is not a subschema
    /// (keywords, property names, values such as `description` or `enum`).
    fn count_text(&mut self, map: &serde_json::Map<String, Value>, copies: usize) -> Result<(), SchemaBudgetError> {
        let too_large = SchemaBudgetError::TooLarge { max: self.budget.max_bytes };
        let mut counter = Counter { left: self.budget.max_bytes };
        for (keyword, value) in map {
            counter.left = counter.left.checked_sub(keyword.len()).ok_or_else(|| too_large.clone())?;
            match held(keyword, value) {
                Held::List(_) | Held::One(_) => {}
                Held::Map(children) => {
                    let names = children.keys().map(String::len).sum::<usize>();
                    counter.left = counter.left.checked_sub(names).ok_or_else(|| too_large.clone())?;
                    // `dependencies`' lists of names are text, not subschemas.
                    for list in children.values().filter(|v| v.is_array()) {
                        serde_json::to_writer(&mut counter, list).map_err(|_| too_large.clone())?;
                    }
                }
                Held::Text => serde_json::to_writer(&mut counter, value).map_err(|_| too_large.clone())?,
            }
        }
        let own = self.budget.max_bytes - counter.left;
        self.bytes = self.bytes.saturating_add(own.saturating_mul(copies));
        if self.bytes > self.budget.max_bytes { Err(too_large) } else { Ok(()) }
    }

    /// Adds the patterns of `map`, a subschema, to `patterns`: `pattern`
    /// and the names of `patternProperties`.
    fn count_patterns(
        &mut self,
        map: &'a serde_json::Map<String, Value>,
        patterns: &mut ManifestPatterns,
    ) -> Result<(), SchemaBudgetError> {
        let named = map.get("patternProperties").and_then(Value::as_object).into_iter().flat_map(|m| m.keys());
        let own = map.get("pattern").and_then(Value::as_str).into_iter();
        for pattern in own.chain(named.map(String::as_str)) {
            if self.own.insert(pattern) {
                if patterns.compiled >= self.budget.max_patterns {
                    return Err(SchemaBudgetError::TooManyPatterns { max: self.budget.max_patterns });
                }
                patterns.compiled += 1;
                if patterns.distinct.insert(pattern.to_owned()) {
                    self.new.push(pattern);
                }
            }
        }
        Ok(())
    }

    /// Whether `target` is already being followed in the chain that ends at `link`.
    fn on_chain(&self, mut link: Option<usize>, target: &Value) -> bool {
        while let Some(index) = link {
            let (followed, parent) = self.chains[index];
            if std::ptr::eq(followed, target) {
                return true;
            }
            link = parent;
        }
        false
    }
}

/// Keywords whose object value maps names to subschemas for the validator,
/// which compiles them in every draft, but not for provider conversions,
/// which keep them as text: `dependencies` (its lists of names are not
/// subschemas).
const VALIDATOR_MAP_KEYWORDS: &[&str] = &["dependencies"];

/// Keywords whose value is a subschema the validator does not compile in
/// place but finds `$anchor`s and `$id`s in, and compiles when referred to;
/// provider conversions keep it as text.
const VALIDATOR_SINGLE_KEYWORDS: &[&str] = &["contentSchema"];

/// Keywords whose value refers to a subschema the validator compiles there:
/// `$dynamicRef` and `$recursiveRef` resolve as `$ref` does, unless a dynamic
/// anchor sends them to a subschema holding one, which the walk reaches
/// where it stands.
const REFERENCE_KEYWORDS: &[&str] = &["$ref", "$dynamicRef", "$recursiveRef"];

/// What the value of a keyword is to the validator.
enum Held<'a> {
    /// A list of subschemas.
    List(&'a [Value]),
    /// Names mapped to subschemas (a list among them is text).
    Map(&'a serde_json::Map<String, Value>),
    /// One subschema.
    One(&'a Value),
    /// Not a subschema.
    Text,
}

/// What `value` under `keyword` is to the validator: every position the
/// schema crate compiles a subschema at, or finds an `$anchor` or `$id` in.
fn held<'a>(keyword: &str, value: &'a Value) -> Held<'a> {
    let single = |k: &str| SINGLE_SUBSCHEMA_KEYWORDS.contains(&k) || VALIDATOR_SINGLE_KEYWORDS.contains(&k);
    let map = |k: &str| MAP_SUBSCHEMA_KEYWORDS.contains(&k) || VALIDATOR_MAP_KEYWORDS.contains(&k);
    match value {
        Value::Array(items) if LIST_SUBSCHEMA_KEYWORDS.contains(&keyword) => Held::List(items),
        Value::Object(children) if map(keyword) => Held::Map(children),
        Value::Object(_) | Value::Bool(_) if single(keyword) => Held::One(value),
        _ => Held::Text,
    }
}

/// Whether the subschema `map` starts a resource its references resolve
/// in: it has an `$id` (or draft 4's `id`).
fn is_resource(map: &serde_json::Map<String, Value>) -> bool {
    ["$id", "id"].iter().any(|k| map.get(*k).is_some_and(Value::is_string))
}

/// `fragment` with its `%XX` escapes decoded, as the validator reads a
/// reference's fragment; `None` when that is not UTF-8.
fn percent_decoded(fragment: &str) -> Option<String> {
    let bytes = fragment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%').then(|| fragment.get(i + 1..i + 3)).flatten();
        match escaped.and_then(|hex| u8::from_str_radix(hex, 16).ok()) {
            Some(byte) => {
                out.push(byte);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// The value at the JSON pointer `pointer` in `resource`, and the resource
/// it stands in: the last subschema with an `$id` passed on the way.
fn resolve<'a>(resource: &'a Value, pointer: &str) -> Option<(&'a Value, &'a Value)> {
    let (mut node, mut base) = (resource, resource);
    for token in pointer.split('/').skip(1) {
        if let Value::Object(map) = node
            && is_resource(map)
        {
            base = node;
        }
        let token = token.replace("~1", "/").replace("~0", "~");
        node = match node {
            Value::Object(map) => map.get(&token)?,
            Value::Array(items) => items.get(token.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some((node, base))
}

/// A writer that only counts, and fails once more than `left` bytes come.
struct Counter {
    left: usize,
}

impl io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.left = self.left.checked_sub(buf.len()).ok_or_else(|| io::Error::other("over the byte budget"))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `$defs` `D0`..`D{n-1}`, each an object whose property refers to the
    /// next (`fan_out` times), the root referring to `D0`.
    pub(crate) fn chain(length: usize, fan_out: usize) -> Value {
        let mut defs = serde_json::Map::new();
        for i in 0..length {
            let properties: serde_json::Map<String, Value> = (0..fan_out)
                .map(|k| {
                    let next = if i + 1 < length {
                        json!({"$ref": format!("#/$defs/D{}", i + 1)})
                    } else {
                        json!({"type": "string"})
                    };
                    (format!("p{k}"), next)
                })
                .collect();
            defs.insert(format!("D{i}"), json!({"type": "object", "properties": properties}));
        }
        json!({"type": "object", "properties": {"start": {"$ref": "#/$defs/D0"}}, "$defs": defs})
    }

    #[test]
    fn ordinary_and_recursive_schemas_pass() {
        let tree = json!({
            "type": "object",
            "properties": {"tree": {"$ref": "#/$defs/Tree"}, "self": {"$ref": "#"}},
            "$defs": {"Tree": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}}}}
        });
        assert!(SchemaBudget::default().check(&tree).is_ok());
        assert!(SchemaBudget::default().check(&chain(5, 2)).is_ok());
    }

    #[test]
    fn the_cost_is_the_text_counted_once_inlined() {
        // `type` and `"string"`: keywords and values, without the punctuation.
        assert_eq!(SchemaBudget::default().check(&json!({"type": "string"})), Ok(12));
        let referred = json!({"a": {"$ref": "#/$defs/S"}, "b": {"$ref": "#/$defs/S"}});
        let schema = json!({"properties": referred, "$defs": {"S": {"type": "string"}}});
        // `properties` `a` `b` `$defs` `S`, each `$ref` and its target, then the definition once more per use.
        let own = "properties".len() + 2 + "$defs".len() + 1 + 2 * ("$ref".len() + "\"#/$defs/S\"".len());
        assert_eq!(SchemaBudget::default().check(&schema), Ok(own + 3 * 12));
    }

    #[test]
    fn long_chains_doubling_graphs_and_long_texts_are_over_budget() {
        let budget = SchemaBudget::default();
        assert_eq!(budget.check(&chain(2_000, 1)), Err(SchemaBudgetError::TooDeep { max: DEFAULT_MAX_SCHEMA_DEPTH }));
        assert_eq!(budget.check(&chain(20_000, 1)), Err(SchemaBudgetError::TooDeep { max: DEFAULT_MAX_SCHEMA_DEPTH }));
        let wide = SchemaBudget { max_depth: 1_000, ..budget };
        assert_eq!(wide.check(&chain(20, 2)), Err(SchemaBudgetError::TooManyNodes { max: DEFAULT_MAX_SCHEMA_NODES }));
        let long = json!({"type": "object", "description": "x".repeat(DEFAULT_MAX_SCHEMA_BYTES)});
        assert_eq!(budget.check(&long), Err(SchemaBudgetError::TooLarge { max: DEFAULT_MAX_SCHEMA_BYTES }));
        let mut shared_text = chain(10, 2);
        shared_text["$defs"]["D9"]["description"] = json!("x".repeat(2_000));
        assert!(shared_text.to_string().len() < 10_000);
        assert_eq!(budget.check(&shared_text), Err(SchemaBudgetError::TooLarge { max: DEFAULT_MAX_SCHEMA_BYTES }));
        let properties: serde_json::Map<String, Value> =
            (0..600).map(|i| (format!("p{i}"), json!({"type": "string"}))).collect();
        let union = json!({"type": "object", "properties": properties, "anyOf": vec![json!({"required": ["p0"]}); 20]});
        assert_eq!(budget.check(&union), Err(SchemaBudgetError::TooManyNodes { max: DEFAULT_MAX_SCHEMA_NODES }));
    }

    #[test]
    fn a_type_arrays_text_counts_once_per_type_but_null() {
        let budget = SchemaBudget::default();
        // Each level's title goes into six branches (Gemini's one type per node).
        let mut chain = json!({"type": "string"});
        for _ in 0..31 {
            let types = ["string", "number", "integer", "boolean", "array", "object"];
            chain = json!({"type": types, "title": "t".repeat(30 * 1024), "items": chain});
        }
        assert!(chain.to_string().len() < DEFAULT_MAX_SCHEMA_BYTES);
        assert_eq!(budget.check(&chain), Err(SchemaBudgetError::TooLarge { max: DEFAULT_MAX_SCHEMA_BYTES }));
        // `null` becomes `nullable`, not a branch: an optional field costs what it is.
        let long = "d".repeat(DEFAULT_MAX_SCHEMA_BYTES * 2 / 3);
        let optional =
            json!({"type": "object", "properties": {"v": {"type": ["string", "null"], "description": long}}});
        assert!(budget.check(&optional).is_ok());
        // The parts of an `allOf` are laid over the node before it splits.
        let parts = json!({"type": ["string", "integer"], "allOf": [{"description": long}]});
        assert_eq!(budget.check(&parts), Err(SchemaBudgetError::TooLarge { max: DEFAULT_MAX_SCHEMA_BYTES }));
    }

    #[test]
    fn each_schemas_distinct_patterns_are_counted_across_the_manifest() {
        let budget = SchemaBudget { max_patterns: 3, ..SchemaBudget::default() };
        let first = json!({"type": "object", "properties": {"a": {"pattern": "^a$"}, "b": {"pattern": "^a$"}},
            "patternProperties": {"^x": {"pattern": "^b$"}}});
        let mut patterns = ManifestPatterns::default();
        let mut new = budget.check_sharing(&first, &mut patterns).unwrap();
        new.sort_unstable();
        assert_eq!(new, ["^a$", "^b$", "^x"], "one schema's patterns, each once");
        // Another tool's validator compiles its own copy of a pattern another tool has: it counts again.
        let again =
            json!({"type": "object", "properties": {"c": {"$ref": "#/$defs/C"}}, "$defs": {"C": {"pattern": "^b$"}}});
        assert_eq!(budget.check_sharing(&again, &mut patterns), Err(SchemaBudgetError::TooManyPatterns { max: 3 }));
        assert!(budget.check(&again).is_ok());
    }

    /// A schema with `(?=a)` (which the validator's engine refuses to
    /// compile) at each place the validator compiles a subschema from.
    fn hidden_patterns() -> Vec<(&'static str, Value)> {
        let p = json!({"pattern": "(?=a)"});
        let uri = "http://e.example";
        vec![
            ("properties", json!({"properties": {"a": p}})),
            ("patternProperties", json!({"patternProperties": {"(?=a)": true}})),
            ("additionalProperties", json!({"additionalProperties": p})),
            ("propertyNames", json!({"propertyNames": p})),
            ("dependentSchemas", json!({"dependentSchemas": {"a": p}})),
            ("dependencies", json!({"dependencies": {"a": p, "b": ["a"]}})),
            ("contains", json!({"contains": p})),
            ("prefixItems", json!({"prefixItems": [p]})),
            ("items", json!({"items": p})),
            ("if", json!({"if": p, "then": true})),
            ("then", json!({"if": true, "then": p})),
            ("else", json!({"if": true, "else": p})),
            ("not", json!({"not": p})),
            ("allOf", json!({"allOf": [p]})),
            ("unevaluatedProperties", json!({"unevaluatedProperties": p})),
            ("unevaluatedItems", json!({"unevaluatedItems": p})),
            ("$defs", json!({"$ref": "#/$defs/a", "$defs": {"a": p}})),
            ("definitions", json!({"$ref": "#/definitions/a", "definitions": {"a": p}})),
            ("$ref to an unknown keyword", json!({"$ref": "#/x", "x": p})),
            ("$ref percent-encoded", json!({"$ref": "#/x%79", "x%79": {}, "xy": p})),
            ("$ref to an $anchor", json!({"$ref": "#h", "contentSchema": {"$anchor": "h", "pattern": "(?=a)"}})),
            ("$dynamicRef", json!({"$dynamicRef": "#/x", "x": p})),
            (
                "$dynamicRef to a $dynamicAnchor",
                json!({"$dynamicRef": "#h", "$defs": {"h": {"$dynamicAnchor": "h", "pattern": "(?=a)"}}}),
            ),
            (
                "$ref in a nested $id",
                json!({"x": {}, "properties": {"a": {"$id": format!("{uri}/a"), "$ref": "#/x", "x": p}}}),
            ),
            (
                "$ref to another resource",
                json!({"$id": format!("{uri}/r"), "$ref": format!("{uri}/b#/x"),
                "$defs": {"b": {"$id": format!("{uri}/b"), "x": p}}}),
            ),
        ]
    }

    #[test]
    fn every_pattern_the_validator_compiles_is_counted() {
        let none = SchemaBudget { max_patterns: 0, ..SchemaBudget::default() };
        for (place, schema) in hidden_patterns() {
            // The validator compiles it: its engine refuses the pattern.
            let compiled = crate::validate::linear_time_options().build(&schema);
            assert!(compiled.is_err_and(|e| e.to_string().contains("(?=a)")), "{place}: {schema}");
            assert_eq!(none.check(&schema), Err(SchemaBudgetError::TooManyPatterns { max: 0 }), "{place}: {schema}");
        }
    }
}
