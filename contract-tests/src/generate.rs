//! Deterministic arguments that satisfy a tool's `input_schema`: several
//! per tool, with optional fields left out and put in, every enum and union
//! branch reachable, references followed, bounds and formats respected.
//! Every sample is checked against the schema before it is used, and
//! built within budgets ([`MAX_SAMPLE_VALUES`], [`MAX_SAMPLE_CHARS`]): a
//! schema that asks for more (`minLength: 100000000`, `minItems` in the
//! billions, required references to itself) gets [`OverBudget`], not a
//! sample.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use jsonschema::Validator;
use module_sdk::schema::resolve;
use module_sdk::service::linear_time_options;
use serde_json::{Map, Value, json};

/// How one sample is built.
#[derive(Debug, Clone, Copy)]
struct Variant {
    /// Whether optional object properties are filled in.
    optional: bool,
    /// Which enum value, union branch or plain value to pick.
    choice: usize,
}

/// The samples built for each tool (duplicates are dropped).
const VARIANTS: [Variant; 4] = [
    Variant { optional: false, choice: 0 },
    Variant { optional: true, choice: 0 },
    Variant { optional: true, choice: 1 },
    Variant { optional: false, choice: 1 },
];

/// Deeper than this, optional properties are left out (recursive types end).
const OPTIONAL_DEPTH: usize = 4;

/// Deeper than this, generation gives up on the branch (a cycle of required fields).
const MAX_DEPTH: usize = 24;

/// The most JSON values (objects, arrays, their members, each counted once)
/// one generated sample may hold.
pub const MAX_SAMPLE_VALUES: usize = 100_000;

/// The most characters the strings of one generated sample may hold together.
pub const MAX_SAMPLE_CHARS: usize = 1024 * 1024;

/// Why no sample could be built within the generator's budgets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OverBudget {
    /// An array's `minItems` alone is over [`MAX_SAMPLE_VALUES`].
    #[error(
        "a valid sample needs an array of at least {0} items, more than the {MAX_SAMPLE_VALUES} values a generated sample may hold (MAX_SAMPLE_VALUES)"
    )]
    Items(usize),
    /// A string's `minLength` alone is over [`MAX_SAMPLE_CHARS`].
    #[error(
        "a valid sample needs a string of at least {0} characters, more than the {MAX_SAMPLE_CHARS} a generated sample may hold (MAX_SAMPLE_CHARS)"
    )]
    Chars(usize),
    /// The values together are (required references to the schema itself, nested arrays).
    #[error(
        "a valid sample holds more than {MAX_SAMPLE_VALUES} values (MAX_SAMPLE_VALUES): required fields or items nest or refer back too often"
    )]
    Values,
}

/// Plain strings, by choice.
const TEXTS: [&str; 2] = ["example", "another example"];

/// The UUID given to `format: uuid` and to properties named like an id.
const SAMPLE_UUID: &str = "6f1c2a3e-8d4b-4c7e-9a0f-1b2c3d4e5f60";

/// Strings tried, in order, against a `pattern`.
const PATTERN_CANDIDATES: [&str; 15] = [
    "example",
    "a",
    "A",
    "1",
    "abc",
    "ABC",
    "abc123",
    "a1",
    "example-1",
    "example_1",
    "x@example.com",
    "2024-05-17",
    "5m",
    "daily 9am",
    "0 9 * * *",
];

/// The URL given to `uri`-format strings and to properties named like a
/// URL, unless the caller has a better one (a fixture page).
pub const DEFAULT_SAMPLE_URL: &str = "https://example.com/";

/// Argument objects that `validator` (compiled from `schema`) accepts: at
/// most one per variant, without duplicates; empty when none could be built.
/// URLs in them are `sample_url`. A variant that cannot be built within the
/// budgets (say, only with its optional fields in) is left out; `Err` when
/// one was and no sample could be built.
pub fn valid_arguments(schema: &Value, validator: &Validator, sample_url: &str) -> Result<Vec<Value>, OverBudget> {
    let mut samples: Vec<Value> = Vec::new();
    let mut over = None;
    let patterns = PatternMatches::default();
    for variant in VARIANTS {
        let generator =
            Generator { root: schema, sample_url, values: Cell::new(0), chars: Cell::new(0), patterns: &patterns };
        match generator.value(schema, None, variant, 0) {
            Ok(sample) if sample.is_object() && validator.is_valid(&sample) && !samples.contains(&sample) => {
                samples.push(sample);
            }
            Ok(_) => {}
            Err(error) => over = over.or(Some(error)),
        }
    }
    match over {
        Some(over) if samples.is_empty() => Err(over),
        _ => Ok(samples),
    }
}

/// For each distinct `pattern` met, the first of [`PATTERN_CANDIDATES`] it
/// matches, if any: a schema's thousands of strings may share one pattern,
/// compiled once.
type PatternMatches = RefCell<HashMap<String, Option<&'static str>>>;

/// Builds one sample, counting what it holds.
struct Generator<'a> {
    root: &'a Value,
    sample_url: &'a str,
    /// Values built so far, against [`MAX_SAMPLE_VALUES`].
    values: Cell<usize>,
    /// Characters of sized strings built so far, against [`MAX_SAMPLE_CHARS`].
    chars: Cell<usize>,
    /// Shared by the variants of one schema.
    patterns: &'a PatternMatches,
}

impl Generator<'_> {
    /// A value for `node`; `name` is the property it fills, used as a hint
    /// for strings (`url`, `email`).
    fn value(&self, node: &Value, name: Option<&str>, variant: Variant, depth: usize) -> Result<Value, OverBudget> {
        self.spend_values(1)?;
        let node = resolve(self.root, node);
        if depth > MAX_DEPTH {
            return Ok(Value::Null);
        }
        let Value::Object(map) = node else {
            return Ok(self.text(name, variant));
        };
        if let Some(value) = map.get("const") {
            return Ok(value.clone());
        }
        if let Some(values) = map.get("enum").and_then(Value::as_array) {
            return Ok(pick_non_null(values, variant.choice).cloned().unwrap_or(Value::Null));
        }
        for union in ["anyOf", "oneOf"] {
            let Some(branches) = map.get(union).and_then(Value::as_array) else { continue };
            let branches: Vec<&Value> = branches.iter().filter(|b| !is_null_schema(resolve(self.root, b))).collect();
            if !branches.is_empty() {
                // The node's own keywords (a root `type`, `properties`) apply with the branch.
                let branch = branches[variant.choice % branches.len()].clone();
                let merged = self.merge(map, union, &[branch]);
                return self.value(&merged, name, variant, depth + 1);
            }
        }
        if let Some(branches) = map.get("allOf").and_then(Value::as_array) {
            let merged = self.merge(map, "allOf", branches);
            return self.value(&merged, name, variant, depth + 1);
        }
        Ok(match type_of(map, variant.choice) {
            Some("object") => self.object(map, variant, depth)?,
            Some("array") => self.array(map, name, variant, depth)?,
            Some("string") => self.string(map, name, variant)?,
            Some("integer") => integer(map, variant),
            Some("number") => number(map, variant),
            Some("boolean") => Value::Bool(variant.choice.is_multiple_of(2)),
            Some("null") => Value::Null,
            _ => self.text(name, variant),
        })
    }

    /// Counts `count` more values of the sample; `Err` past [`MAX_SAMPLE_VALUES`].
    fn spend_values(&self, count: usize) -> Result<(), OverBudget> {
        let total = self.values.get().saturating_add(count);
        self.values.set(total);
        if total > MAX_SAMPLE_VALUES { Err(OverBudget::Values) } else { Ok(()) }
    }

    fn object(&self, node: &Map<String, Value>, variant: Variant, depth: usize) -> Result<Value, OverBudget> {
        let required: Vec<&str> = node
            .get("required")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let optional = variant.optional && depth < OPTIONAL_DEPTH;
        let mut out = Map::new();
        let properties = node.get("properties").and_then(Value::as_object);
        for (key, property) in properties.into_iter().flatten() {
            if optional || required.contains(&key.as_str()) {
                out.insert(key.clone(), self.value(property, Some(key), variant, depth + 1)?);
            }
        }
        for key in required {
            if !out.contains_key(key) {
                out.insert(key.to_owned(), self.text(Some(key), variant));
            }
        }
        if properties.is_none()
            && optional
            && let Some(extra) = node.get("additionalProperties").filter(|schema| schema.is_object())
        {
            out.insert("key".to_owned(), self.value(extra, Some("key"), variant, depth + 1)?);
        }
        Ok(Value::Object(out))
    }

    fn array(
        &self,
        node: &Map<String, Value>,
        name: Option<&str>,
        variant: Variant,
        depth: usize,
    ) -> Result<Value, OverBudget> {
        let mut items: Vec<Value> = node
            .get("prefixItems")
            .and_then(Value::as_array)
            .map(|prefix| {
                prefix.iter().map(|item| self.value(item, name, variant, depth + 1)).collect::<Result<Vec<_>, _>>()
            })
            .transpose()?
            .unwrap_or_default();
        let rest = node.get("items").cloned().unwrap_or(Value::Bool(true));
        let wanted = if variant.optional { 2 } else { 1 };
        let low = bound(node, "minItems").unwrap_or(0.0) as usize;
        let high = bound(node, "maxItems").map_or(usize::MAX, |n| n as usize);
        let length = wanted.max(low).min(high).max(items.len());
        if length > MAX_SAMPLE_VALUES {
            return Err(OverBudget::Items(length));
        }
        if rest != Value::Bool(false) {
            while items.len() < length {
                let each = Variant { choice: variant.choice + items.len(), ..variant };
                items.push(self.value(&rest, name, each, depth + 1)?);
            }
        }
        Ok(Value::Array(items))
    }

    /// A plain string, or what the property's name asks for: a URL, an
    /// address, base64 data, an id (a UUID, the most common kind).
    fn text(&self, name: Option<&str>, variant: Variant) -> Value {
        let name = name.unwrap_or_default().to_ascii_lowercase();
        let plain = TEXTS[variant.choice % TEXTS.len()];
        if name.contains("url") || name.contains("uri") || name == "link" || name == "href" {
            json!(self.sample_url)
        } else if name.contains("email") {
            json!("user@example.com")
        } else if name.contains("base64") {
            json!(BASE64.encode(plain))
        } else if name == "id" || name.ends_with("_id") {
            json!(SAMPLE_UUID)
        } else {
            json!(plain)
        }
    }

    /// A string: a format's sample, a `pattern` match, or text cut to length.
    fn string(&self, node: &Map<String, Value>, name: Option<&str>, variant: Variant) -> Result<Value, OverBudget> {
        let format = node.get("format").and_then(Value::as_str);
        if matches!(format, Some("uri" | "iri" | "url")) {
            return Ok(json!(self.sample_url));
        }
        if let Some(value) = format.and_then(formatted) {
            return Ok(json!(value));
        }
        if node.get("contentEncoding").and_then(Value::as_str) == Some("base64") {
            return Ok(json!(BASE64.encode(TEXTS[variant.choice % TEXTS.len()])));
        }
        if let Some(found) = node.get("pattern").and_then(Value::as_str).and_then(|p| self.pattern_match(p)) {
            return Ok(json!(found));
        }
        let mut value = self.text(name, variant).as_str().unwrap_or_default().to_owned();
        let min = bound(node, "minLength").unwrap_or(0.0) as usize;
        let max = bound(node, "maxLength").map_or(usize::MAX, |n| n as usize);
        let chars = self.chars.get().saturating_add(min);
        if chars > MAX_SAMPLE_CHARS {
            return Err(OverBudget::Chars(min));
        }
        self.chars.set(chars);
        let count = value.chars().count();
        value.extend(std::iter::repeat_n('x', min.saturating_sub(count)));
        Ok(json!(value.chars().take(max).collect::<String>()))
    }

    /// The first of [`PATTERN_CANDIDATES`] that `pattern` matches, compiled
    /// once per schema for the linear-time engine an orchestrator uses
    /// (within its size; a pattern it cannot compile matches none).
    fn pattern_match(&self, pattern: &str) -> Option<&'static str> {
        if let Some(found) = self.patterns.borrow().get(pattern) {
            return *found;
        }
        let found = linear_time_options()
            .build(&json!({ "pattern": pattern }))
            .ok()
            .and_then(|check| PATTERN_CANDIDATES.iter().copied().find(|c| check.is_valid(&json!(c))));
        self.patterns.borrow_mut().insert(pattern.to_owned(), found);
        found
    }

    /// One schema holding `node` (without its `keyword`) and every branch.
    fn merge(&self, node: &Map<String, Value>, keyword: &str, branches: &[Value]) -> Value {
        let mut merged = node.clone();
        merged.remove(keyword);
        for branch in branches {
            let Some(branch) = resolve(self.root, branch).as_object() else { continue };
            for (key, value) in branch {
                match (key.as_str(), merged.get_mut(key), value) {
                    ("properties", Some(Value::Object(into)), Value::Object(from)) => {
                        into.extend(from.iter().map(|(k, v)| (k.clone(), v.clone())));
                    }
                    ("required", Some(Value::Array(into)), Value::Array(from)) => into.extend(from.iter().cloned()),
                    _ => {
                        merged.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        Value::Object(merged)
    }
}

fn is_null_schema(node: &Value) -> bool {
    node.get("type").and_then(Value::as_str) == Some("null")
}

/// The `choice`-th non-null value (wrapping), or null when all are null.
fn pick_non_null(values: &[Value], choice: usize) -> Option<&Value> {
    let non_null: Vec<&Value> = values.iter().filter(|v| !v.is_null()).collect();
    if non_null.is_empty() { values.first() } else { Some(non_null[choice % non_null.len()]) }
}

/// The JSON type to build: the declared one (a non-null pick from a list),
/// or the one the keywords imply.
fn type_of(node: &Map<String, Value>, choice: usize) -> Option<&str> {
    match node.get("type") {
        Some(Value::String(name)) => Some(name),
        Some(Value::Array(names)) => {
            let names: Vec<&str> = names.iter().filter_map(Value::as_str).collect();
            let non_null: Vec<&str> = names.iter().copied().filter(|n| *n != "null").collect();
            let pool = if non_null.is_empty() { names } else { non_null };
            (!pool.is_empty()).then(|| pool[choice % pool.len()])
        }
        _ if node.contains_key("properties") => Some("object"),
        _ if node.contains_key("items") || node.contains_key("prefixItems") => Some("array"),
        _ => None,
    }
}

fn bound(node: &Map<String, Value>, key: &str) -> Option<f64> {
    node.get(key).and_then(Value::as_f64)
}

/// A plausible value for a string `format`.
fn formatted(format: &str) -> Option<&'static str> {
    Some(match format {
        "date-time" => "2024-05-17T10:30:00Z",
        "date" => "2024-05-17",
        "time" => "10:30:00Z",
        "duration" => "P1DT2H",
        "email" | "idn-email" => "user@example.com",
        "hostname" | "idn-hostname" => "example.com",
        "ipv4" => "127.0.0.1",
        "ipv6" => "::1",
        "uri-reference" | "iri-reference" => "https://example.com/",
        "uri-template" => "https://example.com/{id}",
        "uuid" => SAMPLE_UUID,
        "json-pointer" => "/example",
        "relative-json-pointer" => "0",
        "regex" => "^example$",
        _ => return None,
    })
}

/// The inclusive range an integer may take.
fn integer_range(node: &Map<String, Value>) -> (f64, f64) {
    let low = bound(node, "minimum")
        .map(f64::ceil)
        .into_iter()
        .chain(bound(node, "exclusiveMinimum").map(|x| x.floor() + 1.0));
    let high = bound(node, "maximum")
        .map(f64::floor)
        .into_iter()
        .chain(bound(node, "exclusiveMaximum").map(|x| x.ceil() - 1.0));
    (low.fold(f64::NEG_INFINITY, f64::max), high.fold(f64::INFINITY, f64::min))
}

fn integer(node: &Map<String, Value>, variant: Variant) -> Value {
    let (low, high) = integer_range(node);
    let mut value = (1 + variant.choice % 2) as f64;
    value = value.max(low).min(high);
    if let Some(step) = bound(node, "multipleOf").filter(|s| *s > 0.0) {
        value = (value / step).ceil() * step;
        if value > high {
            value -= step;
        }
    }
    json!(value as i64)
}

fn number(node: &Map<String, Value>, variant: Variant) -> Value {
    let low = bound(node, "minimum").or_else(|| bound(node, "exclusiveMinimum").map(|x| x + 0.5));
    let high = bound(node, "maximum").or_else(|| bound(node, "exclusiveMaximum").map(|x| x - 0.5));
    let mut value = 1.5 + variant.choice as f64 % 2.0;
    if let Some(low) = low {
        value = value.max(low);
    }
    if let Some(high) = high {
        value = value.min(high);
    }
    if let Some(step) = bound(node, "multipleOf").filter(|s| *s > 0.0) {
        value = (value / step).ceil() * step;
    }
    json!(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(schema: Value) -> Vec<Value> {
        let validator = jsonschema::draft202012::new(&schema).unwrap();
        valid_arguments(&schema, &validator, DEFAULT_SAMPLE_URL).unwrap()
    }

    #[test]
    fn optional_fields_are_left_out_and_put_in() {
        let found = samples(json!({"type": "object", "properties": {
            "query": {"type": "string"}, "max_results": {"type": "integer", "minimum": 1, "maximum": 20}
        }, "required": ["query"]}));
        assert_eq!(found[0], json!({"query": "example"}));
        assert_eq!(found[1], json!({"query": "example", "max_results": 1}));
        assert_eq!(found[2], json!({"query": "another example", "max_results": 2}));
        assert_eq!(found.len(), 4);
    }

    #[test]
    fn references_enums_nested_objects_and_arrays_are_followed() {
        let schema = json!({"type": "object", "properties": {
            "origin": {"$ref": "#/$defs/Place"},
            "stops": {"type": "array", "items": {"$ref": "#/$defs/Place"}, "minItems": 1},
            "mode": {"anyOf": [{"$ref": "#/$defs/Mode"}, {"type": "null"}]},
            "style": {"oneOf": [{"const": "plain"}, {"const": "formal"}]}
        }, "required": ["origin", "stops", "style"], "$defs": {
            "Place": {"type": "object", "properties": {"name": {"type": "string"},
                "coordinates": {"type": ["object", "null"], "properties": {"lat": {"type": "number"}}, "required": ["lat"]}},
                "required": ["name"]},
            "Mode": {"type": "string", "enum": ["car", "train"]}
        }});
        let found = samples(schema);
        assert_eq!(found.len(), 4, "{found:#?}");
        assert_eq!(found[0], json!({"origin": {"name": "example"}, "stops": [{"name": "example"}], "style": "plain"}));
        assert_eq!(found[2]["mode"], "train");
        assert_eq!(found[2]["style"], "formal");
        assert_eq!(found[1]["stops"].as_array().unwrap().len(), 2);
        assert_eq!(found[1]["origin"]["coordinates"]["lat"], 1.5);
    }

    #[test]
    fn formats_bounds_and_patterns_get_plausible_values() {
        let found = samples(json!({"type": "object", "properties": {
            "when": {"type": "string", "format": "date-time"},
            "page": {"type": "string", "format": "uri"},
            "source_url": {"type": "string"},
            "code": {"type": "string", "pattern": "^[A-Z]+$"},
            "word": {"type": "string", "minLength": 10, "maxLength": 12},
            "even": {"type": "integer", "minimum": 5, "multipleOf": 2},
            "ratio": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 1, "uniqueItems": true}
        }, "required": ["when", "page", "source_url", "code", "word", "even", "ratio", "tags"]}));
        assert_eq!(found[0]["when"], "2024-05-17T10:30:00Z");
        assert_eq!(found[0]["source_url"], "https://example.com/");
        assert_eq!(found[0]["code"], "A");
        assert_eq!(found[0]["word"], "examplexxx");
        assert_eq!(found[0]["even"], 6);
        assert_eq!(found[0]["ratio"], 1.0);
        let named = samples(json!({"type": "object", "properties": {
            "file_id": {"type": "string"}, "data_base64": {"type": "string"},
            "blob": {"type": "string", "contentEncoding": "base64"}, "key": {"type": "string", "format": "uuid"}
        }, "required": ["file_id", "data_base64", "blob", "key"]}));
        assert_eq!(
            named[0],
            json!({"file_id": SAMPLE_UUID, "data_base64": "ZXhhbXBsZQ==", "blob": "ZXhhbXBsZQ==", "key": SAMPLE_UUID})
        );
    }

    #[test]
    fn union_branches_keep_the_keywords_beside_them() {
        let found =
            samples(json!({"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "integer"}},
            "anyOf": [{"required": ["q"]}, {"required": ["n"]}]}));
        assert_eq!(found[0], json!({"q": "example"}));
        assert_eq!(found[2], json!({"q": "another example", "n": 2}));
        let all_of = samples(
            json!({"allOf": [{"$ref": "#/$defs/A"}, {"properties": {"b": {"type": "boolean"}}, "required": ["b"]}],
            "$defs": {"A": {"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"]}}}),
        );
        assert_eq!(all_of[0], json!({"a": 1.5, "b": true}));
    }

    #[test]
    fn recursive_types_end_and_impossible_schemas_give_nothing() {
        let tree = json!({"type": "object", "properties": {"root": {"$ref": "#/$defs/Node"}}, "required": ["root"],
            "$defs": {"Node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}}});
        assert!(!samples(tree).is_empty());
        assert!(samples(json!({"type": "object", "properties": {"x": false}, "required": ["x"]})).is_empty());
    }

    #[test]
    fn schemas_asking_for_more_than_the_budgets_get_over_budget() {
        let over = |property: Value| {
            let schema = json!({"type": "object", "properties": {"a": property}, "required": ["a"],
                "$defs": {"n": {"type": "object", "required": ["a", "b", "c"], "properties": {
                    "a": {"$ref": "#/$defs/n"}, "b": {"$ref": "#/$defs/n"}, "c": {"$ref": "#/$defs/n"}}}}});
            let validator = jsonschema::draft202012::new(&schema).unwrap();
            valid_arguments(&schema, &validator, DEFAULT_SAMPLE_URL).unwrap_err()
        };
        assert_eq!(over(json!({"type": "string", "minLength": 100_000_000})), OverBudget::Chars(100_000_000));
        assert_eq!(over(json!({"type": "array", "minItems": 4_000_000_000u64})), OverBudget::Items(4_000_000_000));
        assert_eq!(over(json!({"$ref": "#/$defs/n"})), OverBudget::Values);
        let long = samples(json!({"type": "object", "properties": {"a": {"type": "string", "minLength": 5000}},
            "required": ["a"]}));
        assert_eq!(long[0]["a"].as_str().map(str::len), Some(5000));
    }

    #[test]
    fn each_pattern_is_compiled_once_for_the_linear_time_engine() {
        let properties: Map<String, Value> =
            (0..50).map(|i| (format!("p{i}"), json!({"type": "string", "pattern": "^[a-c]+$"}))).collect();
        let schema = json!({"type": "object", "properties": properties,
            "required": (0..50).map(|i| format!("p{i}")).collect::<Vec<_>>()});
        let patterns = PatternMatches::default();
        let generator =
            Generator { root: &schema, sample_url: "", values: Cell::new(0), chars: Cell::new(0), patterns: &patterns };
        let sample = generator.value(&schema, None, VARIANTS[0], 0).unwrap();
        assert_eq!(sample["p49"], "a");
        assert_eq!(patterns.borrow().len(), 1);
        // The backtracking engine would match "a" with the lookaround; the linear-time one refuses it.
        assert_eq!(generator.pattern_match("^(?=a)a$"), None);
        // Small as text, over the compiled size once repeated.
        assert_eq!(generator.pattern_match("^[^x]{20000}y|a$"), None);
        assert_eq!(generator.pattern_match("^(a|b)$"), Some("a"));
    }

    #[test]
    fn a_variant_over_the_budgets_is_left_out_and_the_others_kept() {
        let found = samples(json!({"type": "object", "properties": {
            "q": {"type": "string"}, "huge": {"type": "string", "minLength": 100_000_000}
        }, "required": ["q"]}));
        assert_eq!(found, [json!({"q": "example"}), json!({"q": "another example"})]);
    }
}
