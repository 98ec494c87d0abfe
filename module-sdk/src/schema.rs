//! JSON Schemas derived from Rust types, and the flattened `parameters` view.
//!
//! `input_schema` is the truth; [`parameters_of`] reads the contract's lossy
//! `parameters` list out of it, so the two can never disagree.

use schemars::{JsonSchema, generate::SchemaSettings};
use serde_json::{Map, Value};

use crate::contract::{ParameterType, ToolParameter};

/// Keywords whose value is one subschema.
pub const SINGLE_SUBSCHEMA_KEYWORDS: &[&str] = &[
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "additionalItems",
];

/// Keywords whose value is a list of subschemas (`items` too, in its old tuple form).
pub const LIST_SUBSCHEMA_KEYWORDS: &[&str] = &["anyOf", "oneOf", "allOf", "prefixItems", "items"];

/// Keywords whose value maps names to subschemas.
pub const MAP_SUBSCHEMA_KEYWORDS: &[&str] =
    &["properties", "$defs", "definitions", "patternProperties", "dependentSchemas"];

/// The draft 2020-12 schema of `T`: properties in declaration order, shared
/// types under `$defs` with local references only, no root `title`.
pub fn schema_for<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12().into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    if let Some(root) = schema.as_object_mut() {
        root.remove("title");
    }
    schema
}

/// The schema of a tool's arguments: [`schema_for`], with every plain struct
/// closed (`additionalProperties: false`), so that a misspelled or invented
/// argument is reported to the model instead of silently ignored.
///
/// An object that says anything about `additionalProperties` itself (a map,
/// `#[schemars(extend("additionalProperties" = true))]`), or that combines
/// subschemas (`#[serde(flatten)]` of an enum), is left as it is.
pub fn arguments_schema_for<T: JsonSchema>() -> Value {
    let mut schema = schema_for::<T>();
    close_objects(&mut schema);
    schema
}

fn close_objects(node: &mut Value) {
    match node {
        Value::Object(map) => {
            let plain_struct = map.get("type").and_then(Value::as_str) == Some("object")
                && map.contains_key("properties")
                && ![
                    "additionalProperties",
                    "unevaluatedProperties",
                    "patternProperties",
                    "allOf",
                    "anyOf",
                    "oneOf",
                    "$ref",
                ]
                .iter()
                .any(|keyword| map.contains_key(*keyword));
            if plain_struct {
                map.insert("additionalProperties".into(), Value::Bool(false));
            }
            map.values_mut().for_each(close_objects);
        }
        Value::Array(items) => items.iter_mut().for_each(close_objects),
        _ => {}
    }
}

/// The contract's `parameters`: one entry per top-level property of `schema`.
pub fn parameters_of(schema: &Value) -> Vec<ToolParameter> {
    let Some(properties) = field(schema, "properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    properties
        .iter()
        .map(|(name, property)| {
            let resolved = resolve(schema, property);
            let allowed = enum_values(schema, resolved);
            let kind = if allowed.is_some() {
                ParameterType::String
            } else {
                value_type(schema, resolved).unwrap_or(ParameterType::Object)
            };
            ToolParameter {
                name: name.clone(),
                kind,
                description: description_of(property, resolved).unwrap_or_else(|| format!("The `{name}` argument.")),
                required: required.contains(&name.as_str()),
                allowed,
            }
        })
        .collect()
}

/// Follows a local `#/$defs/...` (or `#/definitions/...`) reference of `node`
/// within `root`; a node without one, or with one that does not resolve, is
/// returned as it is.
pub fn resolve<'a>(root: &'a Value, node: &'a Value) -> &'a Value {
    let mut current = node;
    // A bounded walk: a chain of references longer than this is a cycle.
    for _ in 0..32 {
        let Some(target) = field(current, "$ref").and_then(Value::as_str) else {
            return current;
        };
        match target.strip_prefix('#').and_then(|pointer| root.pointer(pointer)) {
            Some(next) => current = next,
            None => return current,
        }
    }
    current
}

/// The non-null branches of a node: its `anyOf`/`oneOf` alternatives (resolved)
/// without `{"type": "null"}`, or the node itself.
fn branches<'a>(root: &'a Value, node: &'a Value) -> Vec<&'a Value> {
    let union = field(node, "anyOf").or_else(|| field(node, "oneOf")).and_then(Value::as_array);
    match union {
        Some(alternatives) => alternatives
            .iter()
            .map(|branch| resolve(root, branch))
            .filter(|branch| field(branch, "type").and_then(Value::as_str) != Some("null"))
            .collect(),
        None => vec![node],
    }
}

/// The first non-null JSON type a node may take.
fn value_type(root: &Value, node: &Value) -> Option<ParameterType> {
    branches(root, node).into_iter().find_map(|branch| match field(branch, "type") {
        Some(Value::String(name)) => ParameterType::from_schema_type(name),
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).find_map(ParameterType::from_schema_type),
        _ => field(branch, "properties").map(|_| ParameterType::Object),
    })
}

/// The allowed values of a string enumeration: `enum`, `const`, or a union of
/// those (how schemars writes enums whose variants have doc comments).
fn enum_values(root: &Value, node: &Value) -> Option<Vec<String>> {
    let mut values = Vec::new();
    for branch in branches(root, node) {
        if let Some(list) = field(branch, "enum").and_then(Value::as_array) {
            for value in list.iter().filter(|v| !v.is_null()) {
                values.push(value.as_str()?.to_owned());
            }
        } else if let Some(value) = field(branch, "const") {
            values.push(value.as_str()?.to_owned());
        } else {
            return None;
        }
    }
    (!values.is_empty()).then_some(values)
}

/// A property's description: its own, else that of the type it refers to.
fn description_of(property: &Value, resolved: &Value) -> Option<String> {
    [property, resolved]
        .into_iter()
        .filter_map(|node| field(node, "description").and_then(Value::as_str))
        .map(str::trim)
        .find(|text| !text.is_empty())
        .map(str::to_owned)
}

/// The member `keyword` of an object node: `Value::get`, by a scan of the
/// members rather than a hash (a schema node holds a handful of keywords;
/// [`parameters_of`] runs for every tool of a listing).
fn field<'a>(node: &'a Value, keyword: &str) -> Option<&'a Value> {
    node.as_object()?.iter().find(|(name, _)| *name == keyword).map(|(_, value)| value)
}

/// Whether a schema's root says `"type": "object"`.
pub fn is_object_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("object")
}

/// Every `$ref` in `schema` that is not a local reference resolving inside
/// it: a self-contained schema has none.
pub fn unresolved_references(schema: &Value) -> Vec<String> {
    fn walk(root: &Value, node: &Value, out: &mut Vec<String>) {
        match node {
            Value::Object(map) => {
                if let Some(target) = map.get("$ref").and_then(Value::as_str) {
                    let local = target.strip_prefix('#').and_then(|p| root.pointer(p));
                    if local.is_none() {
                        out.push(target.to_owned());
                    }
                }
                map.values().for_each(|child| walk(root, child, out));
            }
            Value::Array(items) => items.iter().for_each(|child| walk(root, child, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(schema, schema, &mut out);
    out
}

/// The smallest `input_schema` that says what `parameters` says, for modules
/// that send only the base fields.
pub fn schema_from_parameters(parameters: &[ToolParameter]) -> Value {
    let mut properties = Map::new();
    for parameter in parameters {
        let mut property = Map::new();
        property.insert("type".into(), parameter.kind.as_str().into());
        property.insert("description".into(), parameter.description.clone().into());
        if let Some(values) = &parameter.allowed {
            property.insert("enum".into(), values.clone().into());
        }
        properties.insert(parameter.name.clone(), property.into());
    }
    let required: Vec<Value> = parameters.iter().filter(|p| p.required).map(|p| p.name.clone().into()).collect();
    serde_json::json!({"type": "object", "properties": properties, "required": required})
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    /// How urgent a thing is.
    #[derive(Deserialize, JsonSchema)]
    #[serde(rename_all = "lowercase")]
    #[allow(dead_code)]
    enum Priority {
        /// Whenever.
        Low,
        /// Now.
        High,
    }

    #[derive(Deserialize, JsonSchema)]
    #[serde(rename_all = "lowercase")]
    #[allow(dead_code)]
    enum Colour {
        Red,
        Green,
    }

    /// A place.
    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Address {
        /// Street and number.
        street: String,
    }

    /// Arguments with every shape `parameters` must flatten.
    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Everything {
        /// What to look for.
        query: String,
        /// How many.
        #[serde(default = "five")]
        max_results: u8,
        limit: Option<u32>,
        priority: Priority,
        colour: Option<Colour>,
        home: Address,
        work: Option<Address>,
        tags: Vec<String>,
        ratio: f64,
        flag: bool,
        anything: Value,
    }

    fn five() -> u8 {
        5
    }

    #[test]
    fn parameters_follow_declaration_order_types_requirement_and_enums() {
        let schema = schema_for::<Everything>();
        assert!(is_object_schema(&schema));
        assert!(schema.get("title").is_none());
        let params = parameters_of(&schema);
        let view: Vec<(&str, &str, bool)> =
            params.iter().map(|p| (p.name.as_str(), p.kind.as_str(), p.required)).collect();
        assert_eq!(
            view,
            vec![
                ("query", "string", true),
                ("max_results", "integer", false),
                ("limit", "integer", false),
                ("priority", "string", true),
                ("colour", "string", false),
                ("home", "object", true),
                ("work", "object", false),
                ("tags", "array", true),
                ("ratio", "number", true),
                ("flag", "boolean", true),
                ("anything", "object", true),
            ]
        );
        assert_eq!(params[0].description, "What to look for.");
        assert_eq!(params[2].description, "The `limit` argument.");
        assert_eq!(params[3].allowed, Some(vec!["low".into(), "high".into()]));
        assert_eq!(params[4].allowed, Some(vec!["red".into(), "green".into()]));
        assert_eq!(params[5].description, "A place.");
        assert!(params.iter().all(|p| !p.description.is_empty()));
        assert!(unresolved_references(&schema).is_empty());
    }

    #[test]
    fn argument_structs_are_closed_but_maps_and_unions_are_not() {
        #[derive(Deserialize, JsonSchema)]
        #[allow(dead_code)]
        struct Args {
            home: Address,
            labels: std::collections::HashMap<String, String>,
            anything: Value,
        }
        let schema = arguments_schema_for::<Args>();
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(schema["$defs"]["Address"]["additionalProperties"], false);
        assert_eq!(schema["properties"]["labels"]["additionalProperties"], json!({"type": "string"}));
        assert_eq!(schema["properties"]["anything"], json!(true));
        assert!(schema_for::<Args>().get("additionalProperties").is_none());
    }

    #[test]
    fn references_that_leave_the_document_are_reported() {
        let schema = json!({"type": "object", "properties": {
            "a": {"$ref": "https://example.com/x.json"},
            "b": {"$ref": "#/$defs/missing"}
        }});
        assert_eq!(unresolved_references(&schema).len(), 2);
    }

    #[test]
    fn a_schema_built_from_parameters_gives_the_same_parameters_back() {
        let params = parameters_of(&schema_for::<Everything>());
        let rebuilt = schema_from_parameters(&params);
        assert_eq!(parameters_of(&rebuilt), params);
    }
}
