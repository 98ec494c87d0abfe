//! What each provider accepts in a tool definition (`shared/PROVIDERS.md`),
//! as a checker: [`check`] one definition, [`check_all`] a whole list. Each
//! [`Violation`] names its [`Rule`] and the JSON pointer of the offending
//! node, so the contract tests and the converters' own tests share one
//! reading of the rules.

use std::collections::HashSet;
use std::fmt;

use serde_json::{Map, Value};

use super::Provider;
use super::compile::walk::{def_name, escape, for_each_node};
use super::compile::{
    ANTHROPIC_STRICT_FORMATS, ANTHROPIC_STRICT_KEYWORDS, GEMINI_FORMATS, GEMINI_KEYWORDS, GEMINI_TYPES,
    GEMINI_UNTYPED_KEYWORDS, MAX_DEPTH, MAX_ENUM_VALUES, MAX_PROPERTIES, MAX_STRICT_OPTIONAL, MAX_STRICT_TOOLS,
    MAX_STRICT_UNIONS, STRICT_FORMATS, STRICT_KEYWORDS, StrictCost, is_recursive, measure,
};
use super::names::{MAX_DESCRIPTION_CHARS, MAX_NAME_LEN, is_gemini_property_name};

/// A rule a definition can break.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rule {
    /// The definition lacks a field of the provider's shape, has one it does not know, or one of the wrong JSON type.
    Shape,
    /// The tool name breaks the provider's pattern or length.
    Name,
    /// Two definitions of one list share a name.
    DuplicateName,
    /// The description is longer than the provider takes.
    DescriptionLength,
    /// The schema's root is not `type: "object"` (or, for OpenAI strict, is a union).
    RootObject,
    /// A keyword the provider does not take at this node.
    Keyword,
    /// Gemini: a node without one known `type` (and no `anyOf`).
    SingleType,
    /// Gemini: an `enum` whose values are not all strings, or on a non-string node.
    EnumStrings,
    /// A `format` the provider does not take here.
    Format,
    /// Gemini: a property name that is not a letter or underscore followed by `[A-Za-z0-9_]`.
    PropertyName,
    /// `required` names a property that is not declared.
    RequiredUndeclared,
    /// Gemini: an array without `items`.
    ArrayItems,
    /// A `$ref` that is not a local `#/$defs/...` reference that resolves, or (where banned) one with siblings.
    Reference,
    /// Strict mode (OpenAI, Anthropic): an object without `additionalProperties: false`.
    StrictClosedObject,
    /// OpenAI strict: a property missing from `required`.
    StrictAllRequired,
    /// Strict mode (OpenAI, Anthropic): a node that says nothing of its type (`{}`, `true`).
    StrictUntyped,
    /// OpenAI strict: too deep, too many properties or too many enum values.
    StrictSize,
    /// Anthropic strict: definitions that refer to themselves.
    StrictRecursion,
    /// Anthropic strict: one request's strict tools over 20 tools, 24
    /// optional or 16 union-typed parameters in total.
    StrictBudget,
}

/// One broken rule, where, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The rule.
    pub rule: Rule,
    /// JSON pointer into the checked definition (or list).
    pub path: String,
    /// What is wrong, for a person.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} at `{}`: {}", self.rule, self.path, self.detail)
    }
}

/// Collects violations under a path prefix.
struct Report {
    violations: Vec<Violation>,
}

impl Report {
    fn add(&mut self, rule: Rule, path: &str, detail: impl Into<String>) {
        self.violations.push(Violation { rule, path: path.to_owned(), detail: detail.into() });
    }
}

/// Every rule `definition` (one tool in `provider`'s form) breaks.
pub fn check(provider: Provider, definition: &Value) -> Vec<Violation> {
    let mut report = Report { violations: Vec::new() };
    check_definition(provider, definition, "", &mut report);
    report.violations
}

/// Every rule a list of definitions (one request's tools) breaks, each
/// one's and the list's own (names unique; Anthropic's per-request strict
/// budget); paths start with the index.
pub fn check_all(provider: Provider, definitions: &Value) -> Vec<Violation> {
    let mut report = Report { violations: Vec::new() };
    let Some(list) = definitions.as_array() else {
        report.add(Rule::Shape, "", "expected a JSON array of tool definitions");
        return report.violations;
    };
    let mut seen = HashSet::new();
    for (index, definition) in list.iter().enumerate() {
        let path = format!("/{index}");
        check_definition(provider, definition, &path, &mut report);
        if let Some(name) = fields_of(provider, definition).and_then(|(_, f)| f.get("name")).and_then(Value::as_str)
            && !seen.insert(name)
        {
            report.add(Rule::DuplicateName, &path, format!("`{name}` is used by an earlier definition"));
        }
    }
    if provider == Provider::Anthropic {
        check_strict_budget(list, &mut report);
    }
    report.violations
}

/// Anthropic's per-request limits over the strict definitions of `list`.
fn check_strict_budget(list: &[Value], report: &mut Report) {
    let strict: Vec<&Value> = list.iter().filter(|d| d.get("strict") == Some(&Value::Bool(true))).collect();
    let (optional, unions) = strict.iter().fold((0, 0), |(optional, unions), definition| {
        let cost = StrictCost::of(definition.get("input_schema").unwrap_or(&Value::Null));
        (optional + cost.optional, unions + cost.unions)
    });
    if strict.len() > MAX_STRICT_TOOLS || optional > MAX_STRICT_OPTIONAL || unions > MAX_STRICT_UNIONS {
        report.add(
            Rule::StrictBudget,
            "",
            format!(
                "{} strict tools with {optional} optional and {unions} union-typed parameters; Anthropic takes at \
                 most {MAX_STRICT_TOOLS}, {MAX_STRICT_OPTIONAL} and {MAX_STRICT_UNIONS} per request",
                strict.len()
            ),
        );
    }
}

/// The keyword under which each provider puts the schema.
fn schema_key(provider: Provider) -> &'static str {
    match provider {
        Provider::OpenAiChat | Provider::OpenAiResponses | Provider::Gemini => "parameters",
        Provider::Anthropic => "input_schema",
        Provider::GeminiJsonSchema => "parametersJsonSchema",
    }
}

/// The path and map of the function fields of a definition.
fn fields_of(provider: Provider, definition: &Value) -> Option<(&'static str, &Map<String, Value>)> {
    match provider {
        Provider::OpenAiChat => definition.get("function").and_then(Value::as_object).map(|f| ("/function", f)),
        _ => definition.as_object().map(|f| ("", f)),
    }
}

fn check_definition(provider: Provider, definition: &Value, at: &str, report: &mut Report) {
    let openai = matches!(provider, Provider::OpenAiChat | Provider::OpenAiResponses);
    if openai && definition.get("type").and_then(Value::as_str) != Some("function") {
        report.add(Rule::Shape, at, "OpenAI tools need `\"type\": \"function\"`");
    }
    let Some((inner, fields)) = fields_of(provider, definition) else {
        report.add(Rule::Shape, at, "expected a JSON object with the function's fields");
        return;
    };
    let base = format!("{at}{inner}");
    let key = schema_key(provider);
    let mut known = vec!["name", "description", key];
    if openai || provider == Provider::Anthropic {
        known.push("strict");
    }
    if provider == Provider::OpenAiResponses {
        known.push("type");
    }
    if provider == Provider::OpenAiChat {
        let outer: Vec<&String> = definition.as_object().map_or(Vec::new(), |d| d.keys().collect());
        for extra in outer.into_iter().filter(|k| !matches!(k.as_str(), "type" | "function")) {
            report.add(Rule::Shape, &format!("{at}/{}", escape(extra)), "a field Chat Completions tools do not have");
        }
    }
    for extra in fields.keys().filter(|k| !known.contains(&k.as_str())) {
        report.add(Rule::Shape, &format!("{base}/{}", escape(extra)), "a field this provider's tools do not have");
    }
    match fields.get("name").and_then(Value::as_str) {
        Some(name) => check_name(provider, name, &format!("{base}/name"), report),
        None => report.add(Rule::Shape, &format!("{base}/name"), "the name is missing or not a string"),
    }
    match fields.get("description") {
        None => {}
        Some(Value::String(text)) if openai && text.chars().count() > MAX_DESCRIPTION_CHARS => report.add(
            Rule::DescriptionLength,
            &format!("{base}/description"),
            format!("{} characters, over OpenAI's {MAX_DESCRIPTION_CHARS}", text.chars().count()),
        ),
        Some(Value::String(_)) => {}
        Some(_) => report.add(Rule::Shape, &format!("{base}/description"), "the description is not a string"),
    }
    let strict = match fields.get("strict") {
        None => false,
        Some(Value::Bool(strict)) => *strict,
        Some(_) => {
            report.add(Rule::Shape, &format!("{base}/strict"), "`strict` is not a boolean");
            false
        }
    };
    let path = format!("{base}/{key}");
    let Some(schema) = fields.get(key).filter(|s| s.is_object()) else {
        report.add(Rule::Shape, &path, "the schema is missing or not a JSON object");
        return;
    };
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        report.add(Rule::RootObject, &path, "the root must be `\"type\": \"object\"`");
    }
    match provider {
        Provider::OpenAiChat | Provider::OpenAiResponses if strict => check_strict(schema, &path, report),
        Provider::Anthropic if strict => check_anthropic_strict(schema, &path, report),
        Provider::OpenAiChat | Provider::OpenAiResponses | Provider::Anthropic => {
            check_references(schema, &path, false, report);
        }
        Provider::GeminiJsonSchema => {
            check_references(schema, &path, true, report);
            for_each_node(schema, &path, &mut |node_path, node| {
                if node.get("$schema").is_some() {
                    report.add(Rule::Keyword, node_path, "Gemini does not take `$schema`");
                }
            });
        }
        Provider::Gemini => check_gemini(schema, &path, report),
    }
}

fn check_name(provider: Provider, name: &str, path: &str, report: &mut Report) {
    let ok = match provider {
        Provider::Gemini | Provider::GeminiJsonSchema => {
            name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        }
        _ => !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-')),
    };
    if !ok || name.len() > MAX_NAME_LEN {
        report.add(
            Rule::Name,
            path,
            format!("`{name}` does not match this provider's name pattern (at most {MAX_NAME_LEN})"),
        );
    }
}

/// Every `$ref` is a local `#/$defs/<name>` that resolves (and, when
/// `no_siblings`, stands alone).
fn check_references(schema: &Value, path: &str, no_siblings: bool, report: &mut Report) {
    for_each_node(schema, path, &mut |node_path, node| {
        let Some(reference) = node.get("$ref") else { return };
        let resolves = reference
            .as_str()
            .and_then(def_name)
            .is_some_and(|name| schema.get("$defs").and_then(|defs| defs.get(&name)).is_some());
        if !resolves {
            report.add(Rule::Reference, node_path, format!("{reference} is not a `#/$defs/...` entry of this schema"));
        }
        if no_siblings && node.as_object().is_some_and(|m| m.len() > 1) {
            report.add(Rule::Reference, node_path, "a `$ref` with sibling keywords");
        }
    });
}

/// Whether a node is an object schema.
fn is_object_node(map: &Map<String, Value>) -> bool {
    let typed = match map.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => false,
    };
    typed || map.contains_key("properties")
}

/// The names a node declares in `properties`.
fn declared(map: &Map<String, Value>) -> Vec<&str> {
    map.get("properties").and_then(Value::as_object).map_or(Vec::new(), |p| p.keys().map(String::as_str).collect())
}

/// The names a node lists in `required`.
fn required(map: &Map<String, Value>) -> Vec<&str> {
    map.get("required").and_then(Value::as_array).map_or(Vec::new(), |r| r.iter().filter_map(Value::as_str).collect())
}

fn check_required(map: &Map<String, Value>, path: &str, report: &mut Report) {
    let declared = declared(map);
    for name in required(map).into_iter().filter(|n| !declared.contains(n)) {
        report.add(Rule::RequiredUndeclared, &format!("{path}/required"), format!("`{name}` is not a property"));
    }
}

/// OpenAI strict mode's invariants.
fn check_strict(schema: &Value, path: &str, report: &mut Report) {
    if schema.get("anyOf").is_some() {
        report.add(Rule::RootObject, path, "the root may not be `anyOf` in strict mode");
    }
    check_references(schema, path, true, report);
    for_each_node(schema, path, &mut |node_path, node| {
        let Some(map) = strict_object(node_path, node, report) else { return };
        for (keyword, value) in map {
            let here = format!("{node_path}/{}", escape(keyword));
            strict_keyword_refused(keyword, value, &here, node_path == path, STRICT_KEYWORDS, STRICT_FORMATS, report);
        }
        if !["type", "enum", "anyOf", "$ref"].iter().any(|k| map.contains_key(*k)) {
            report.add(Rule::StrictUntyped, node_path, "a node without `type`, `enum`, `anyOf` or `$ref`");
        }
        if is_object_node(map) {
            if map.get("additionalProperties") != Some(&Value::Bool(false)) {
                report.add(Rule::StrictClosedObject, node_path, "an object without `additionalProperties: false`");
            }
            let required = required(map);
            for name in declared(map).into_iter().filter(|n| !required.contains(n)) {
                report.add(Rule::StrictAllRequired, node_path, format!("`{name}` is not in `required`"));
            }
            check_required(map, node_path, report);
        }
    });
    let size = measure(schema);
    if size.depth > MAX_DEPTH || size.properties > MAX_PROPERTIES || size.enum_values > MAX_ENUM_VALUES {
        report.add(
            Rule::StrictSize,
            path,
            format!(
                "{size:?} is over {MAX_DEPTH} levels, {MAX_PROPERTIES} properties or {MAX_ENUM_VALUES} enum values"
            ),
        );
    }
}

/// Anthropic strict mode's invariants.
fn check_anthropic_strict(schema: &Value, path: &str, report: &mut Report) {
    check_references(schema, path, false, report);
    if is_recursive(schema) {
        report.add(Rule::StrictRecursion, &format!("{path}/$defs"), "strict mode takes no recursive definitions");
    }
    for_each_node(schema, path, &mut |node_path, node| {
        let Some(map) = strict_object(node_path, node, report) else { return };
        for (keyword, value) in map {
            let here = format!("{node_path}/{}", escape(keyword));
            let (keywords, formats) = (ANTHROPIC_STRICT_KEYWORDS, ANTHROPIC_STRICT_FORMATS);
            if strict_keyword_refused(keyword, value, &here, node_path == path, keywords, formats, report) {
                continue;
            }
            if keyword == "minItems" && !matches!(value.as_u64(), Some(0 | 1)) {
                report.add(Rule::Keyword, &here, "strict mode takes `minItems` of 0 or 1 only");
            } else if complex_values(keyword, value) {
                report.add(Rule::Keyword, &here, "strict mode takes only strings, numbers, booleans and null here");
            }
        }
        if !["type", "enum", "const", "anyOf", "$ref"].iter().any(|k| map.contains_key(*k)) {
            report.add(Rule::StrictUntyped, node_path, "a node without `type`, `enum`, `const`, `anyOf` or `$ref`");
        }
        if is_object_node(map) {
            if map.get("additionalProperties") != Some(&Value::Bool(false)) {
                report.add(Rule::StrictClosedObject, node_path, "an object without `additionalProperties: false`");
            }
            check_required(map, node_path, report);
        }
    });
}

/// A strict-mode node as an object; a boolean schema other than
/// `additionalProperties: false` is reported and gives `None`.
fn strict_object<'a>(node_path: &str, node: &'a Value, report: &mut Report) -> Option<&'a Map<String, Value>> {
    let Value::Object(map) = node else {
        if !(node == &Value::Bool(false) && node_path.ends_with("/additionalProperties")) {
            report.add(Rule::StrictUntyped, node_path, "a boolean schema");
        }
        return None;
    };
    Some(map)
}

/// Whether a strict mode taking `keywords` (`$defs` only at the root) and
/// `formats` refuses `keyword: value` at `here`; a refusal is reported.
fn strict_keyword_refused(
    keyword: &str,
    value: &Value,
    here: &str,
    at_root: bool,
    keywords: &[&str],
    formats: &[&str],
    report: &mut Report,
) -> bool {
    if !keywords.contains(&keyword) || (keyword == "$defs" && !at_root) {
        report.add(Rule::Keyword, here, format!("strict mode does not take `{keyword}` here"));
    } else if keyword == "format" && !value.as_str().is_some_and(|f| formats.contains(&f)) {
        report.add(Rule::Format, here, format!("strict mode does not take the format {value}"));
    } else {
        return false;
    }
    true
}

/// Whether `keyword: value` is an `enum` or `const` with objects or arrays in it.
fn complex_values(keyword: &str, value: &Value) -> bool {
    let complex = |v: &Value| v.is_object() || v.is_array();
    match (keyword, value) {
        ("enum", Value::Array(values)) => values.iter().any(complex),
        ("const", value) => complex(value),
        _ => false,
    }
}

/// Gemini's OpenAPI subset.
fn check_gemini(schema: &Value, path: &str, report: &mut Report) {
    for_each_node(schema, path, &mut |node_path, node| {
        let Value::Object(map) = node else {
            report.add(Rule::SingleType, node_path, "a boolean schema has no type");
            return;
        };
        for keyword in map.keys().filter(|k| !GEMINI_KEYWORDS.contains(&k.as_str())) {
            let detail = format!("Gemini's `parameters` do not take `{keyword}`");
            report.add(Rule::Keyword, &format!("{node_path}/{}", escape(keyword)), detail);
        }
        let kind = map.get("type").and_then(Value::as_str);
        match map.get("type") {
            None if map.contains_key("anyOf") => {}
            // "Any value": a node that says nothing but words.
            None if map.keys().all(|k| GEMINI_UNTYPED_KEYWORDS.contains(&k.as_str())) => {}
            Some(Value::String(t)) if GEMINI_TYPES.contains(&t.as_str()) => {}
            other => {
                report.add(Rule::SingleType, node_path, format!("needs one type of {GEMINI_TYPES:?}, has {other:?}"))
            }
        }
        if let Some(values) = map.get("enum") {
            let strings = values.as_array().is_some_and(|v| v.iter().all(Value::is_string));
            if !strings || kind != Some("string") {
                report.add(
                    Rule::EnumStrings,
                    &format!("{node_path}/enum"),
                    "an enum must list strings on a string node",
                );
            }
        }
        if let Some(format) = map.get("format") {
            let ok = kind == Some("string") && format.as_str().is_some_and(|f| GEMINI_FORMATS.contains(&f));
            if !ok {
                report.add(
                    Rule::Format,
                    &format!("{node_path}/format"),
                    format!("Gemini does not take the format {format} here"),
                );
            }
        }
        for name in declared(map).into_iter().filter(|n| !is_gemini_property_name(n)) {
            report.add(
                Rule::PropertyName,
                &format!("{node_path}/properties/{}", escape(name)),
                "not a name Gemini takes",
            );
        }
        check_required(map, node_path, report);
        if kind == Some("array") && !map.get("items").is_some_and(Value::is_object) {
            report.add(Rule::ArrayItems, node_path, "an array needs `items`");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(provider: Provider, definition: Value) -> Vec<(Rule, String)> {
        check(provider, &definition).into_iter().map(|v| (v.rule, v.path)).collect()
    }

    #[test]
    fn names_with_dots_are_refused_where_the_provider_refuses_them() {
        let tool = |name: &str| json!({"name": name, "description": "d", "input_schema": {"type": "object"}});
        assert_eq!(rules(Provider::Anthropic, tool("research.web_search")), [(Rule::Name, "/name".into())]);
        assert_eq!(rules(Provider::Anthropic, tool("research__web_search")), []);
        let gemini =
            json!({"name": "research.web_search", "description": "d", "parametersJsonSchema": {"type": "object"}});
        assert_eq!(rules(Provider::GeminiJsonSchema, gemini), []);
        let long = "a".repeat(65);
        assert_eq!(rules(Provider::Anthropic, tool(&long)), [(Rule::Name, "/name".into())]);
    }

    #[test]
    fn raw_schemars_output_breaks_strict_mode_where_providers_say() {
        let definition = json!({"type": "function", "function": {
            "name": "m__t", "description": "x".repeat(1025), "strict": true,
            "parameters": {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "properties": {
                    "n": {"type": "integer", "format": "uint8", "default": 5},
                    "p": {"$ref": "#/$defs/P", "description": "sibling"},
                    "m": {"type": "object", "additionalProperties": {"type": "string"}},
                    "u": {"oneOf": [{"type": "string"}, {}]}
                },
                "required": ["p", "m", "u", "ghost"],
                "$defs": {"P": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"], "additionalProperties": false}}
            }
        }});
        let found = rules(Provider::OpenAiChat, definition);
        let p = "/function/parameters";
        for expected in [
            (Rule::DescriptionLength, "/function/description".to_owned()),
            (Rule::Keyword, format!("{p}/$schema")),
            (Rule::Keyword, format!("{p}/properties/n/default")),
            (Rule::Format, format!("{p}/properties/n/format")),
            (Rule::Reference, format!("{p}/properties/p")),
            (Rule::StrictClosedObject, p.to_owned()),
            (Rule::StrictAllRequired, p.to_owned()),
            (Rule::RequiredUndeclared, format!("{p}/required")),
            (Rule::StrictClosedObject, format!("{p}/properties/m")),
            (Rule::Keyword, format!("{p}/properties/u/oneOf")),
            (Rule::StrictUntyped, format!("{p}/properties/u/oneOf/1")),
        ] {
            assert!(found.contains(&expected), "{expected:?} not in {found:#?}");
        }
    }

    #[test]
    fn gemini_subset_rules_name_each_node() {
        let definition = json!({"name": "m__t", "description": "d", "parameters": {
            "type": "object",
            "properties": {
                "a": {"type": ["string", "null"]},
                "b": {"type": "integer", "enum": [1, 2]},
                "c": {"$ref": "#/$defs/C"},
                "d-e": {"type": "string", "format": "uri"},
                "f": {"type": "array"}
            },
            "$defs": {"C": {"type": "string"}}
        }});
        let found = rules(Provider::Gemini, definition);
        let p = "/parameters";
        for expected in [
            (Rule::SingleType, format!("{p}/properties/a")),
            (Rule::EnumStrings, format!("{p}/properties/b/enum")),
            (Rule::Keyword, format!("{p}/properties/c/$ref")),
            (Rule::SingleType, format!("{p}/properties/c")),
            (Rule::Keyword, format!("{p}/$defs")),
            (Rule::PropertyName, format!("{p}/properties/d-e")),
            (Rule::Format, format!("{p}/properties/d-e/format")),
            (Rule::ArrayItems, format!("{p}/properties/f")),
        ] {
            assert!(found.contains(&expected), "{expected:?} not in {found:#?}");
        }
    }

    #[test]
    fn anthropic_strict_rules_and_the_per_request_budget() {
        let definition = json!({"name": "m__t", "strict": true, "input_schema": {
            "type": "object",
            "properties": {
                "n": {"type": "integer", "minimum": 1},
                "s": {"type": "string", "format": "regex"},
                "a": {"type": "array", "items": {"type": "string"}, "minItems": 2},
                "e": {"enum": [{"x": 1}]},
                "m": {"type": "object", "additionalProperties": {"type": "string"}},
                "any": {},
                "t": {"$ref": "#/$defs/T"}
            },
            "additionalProperties": false,
            "$defs": {"T": {"type": "object", "properties": {"up": {"$ref": "#/$defs/T"}}, "additionalProperties": false}}
        }});
        let found = rules(Provider::Anthropic, definition);
        let p = "/input_schema";
        for expected in [
            (Rule::Keyword, format!("{p}/properties/n/minimum")),
            (Rule::Format, format!("{p}/properties/s/format")),
            (Rule::Keyword, format!("{p}/properties/a/minItems")),
            (Rule::Keyword, format!("{p}/properties/e/enum")),
            (Rule::StrictClosedObject, format!("{p}/properties/m")),
            (Rule::StrictUntyped, format!("{p}/properties/any")),
            (Rule::StrictRecursion, format!("{p}/$defs")),
        ] {
            assert!(found.contains(&expected), "{expected:?} not in {found:#?}");
        }
        // Without `strict` the same schema is fine.
        let loose = json!({"name": "m__t", "input_schema": {"type": "object", "properties": {"n": {"minimum": 1}}}});
        assert_eq!(rules(Provider::Anthropic, loose), []);
        let tool = |optional: usize| {
            let properties: Map<String, Value> =
                (0..optional).map(|i| (format!("p{i}"), json!({"type": ["string", "null"]}))).collect();
            json!({"name": format!("t{optional}"), "strict": true,
                   "input_schema": {"type": "object", "properties": properties, "additionalProperties": false}})
        };
        let budget =
            |list: Value| -> Vec<Rule> { check_all(Provider::Anthropic, &list).into_iter().map(|v| v.rule).collect() };
        assert_eq!(budget(json!([tool(12), tool(4)])), []);
        assert_eq!(budget(json!([tool(12), tool(5)])), [Rule::StrictBudget]);
        let many: Vec<Value> = (0..21)
            .map(|i| {
                let mut t = tool(0);
                t["name"] = json!(format!("t{i}"));
                t
            })
            .collect();
        assert_eq!(budget(Value::Array(many)), [Rule::StrictBudget]);
    }

    #[test]
    fn gemini_takes_an_untyped_any_value_node_but_not_untyped_constraints() {
        let definition =
            |node: Value| json!({"name": "m__t", "parameters": {"type": "object", "properties": {"v": node}}});
        assert_eq!(
            rules(Provider::Gemini, definition(json!({"description": "(any JSON value)", "nullable": true}))),
            []
        );
        let found = rules(Provider::Gemini, definition(json!({"description": "x", "minLength": 1})));
        assert_eq!(found, [(Rule::SingleType, "/parameters/properties/v".into())]);
    }

    #[test]
    fn shapes_and_lists_are_checked() {
        assert_eq!(rules(Provider::OpenAiChat, json!({"function": {}}))[0].0, Rule::Shape);
        let extra =
            json!({"type": "function", "name": "a", "parameters": {"type": "object"}, "strict": false, "extra": 1});
        assert_eq!(rules(Provider::OpenAiResponses, extra), [(Rule::Shape, "/extra".into())]);
        let root = json!({"name": "a", "parametersJsonSchema": {"type": "array", "$schema": "x"}});
        assert_eq!(
            rules(Provider::GeminiJsonSchema, root),
            [(Rule::RootObject, "/parametersJsonSchema".into()), (Rule::Keyword, "/parametersJsonSchema".into())]
        );
        let one =
            json!({"name": "a", "input_schema": {"type": "object", "properties": {"x": {"$ref": "#/$defs/Nope"}}}});
        let list = json!([one, one]);
        let found: Vec<(Rule, String)> =
            check_all(Provider::Anthropic, &list).into_iter().map(|v| (v.rule, v.path)).collect();
        assert!(found.contains(&(Rule::DuplicateName, "/1".into())));
        assert!(found.contains(&(Rule::Reference, "/0/input_schema/properties/x".into())));
    }
}
