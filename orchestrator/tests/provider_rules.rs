//! Property tests: for many random argument schemas (nested objects,
//! arrays, enums, optionals, recursion, maps, `$defs` references with and
//! without siblings, unions, `const`, formats, defaults, tuples, `allOf`),
//! every provider format's output passes the rule checker and is valid JSON
//! Schema, and the prompt format lists every tool.

use module_sdk::contract::ToolDefinition;
use orchestrator::providers::{ConvertedCache, Listed, PROVIDERS, Provider, ToolFormat, render_tools, rules};
use proptest::collection::{btree_set, vec};
use proptest::option;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Property names, including ones Gemini refuses and ones that meet once made safe.
const NAMES: &[&str] = &["q", "max_results", "max-results", "2fa", "$type", "a.b", "with space", "name", "ünï", "x"];

fn string_leaf() -> impl Strategy<Value = Value> {
    let formats = prop::sample::select(vec!["uri", "email", "date-time", "uuid", "hostname", "ipv4", "date", "regex"]);
    (option::of(formats), option::of(1u32..40), any::<bool>()).prop_map(|(format, max, pattern)| {
        let mut node = json!({"type": "string"});
        if let Some(format) = format {
            node["format"] = json!(format);
        }
        if let Some(max) = max {
            node["maxLength"] = json!(max);
            node["minLength"] = json!(1);
        }
        if pattern {
            node["pattern"] = json!("^[a-z]+$");
        }
        node
    })
}

fn number_leaf() -> impl Strategy<Value = Value> {
    let formats = prop::sample::select(vec!["int32", "uint8", "int64", "double", "float"]);
    (any::<bool>(), option::of(formats), option::of(-5i64..5), option::of(5i64..100), any::<bool>()).prop_map(
        |(integer, format, min, max, exclusive)| {
            let mut node = json!({"type": if integer { "integer" } else { "number" }});
            if let Some(format) = format {
                node["format"] = json!(format);
            }
            if let Some(min) = min {
                node[if exclusive { "exclusiveMinimum" } else { "minimum" }] = json!(min);
            }
            if let Some(max) = max {
                node["maximum"] = json!(max);
                node["multipleOf"] = json!(1);
            }
            node
        },
    )
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        string_leaf(),
        number_leaf(),
        Just(json!({"type": "boolean"})),
        vec("[a-z]{1,6}", 1..5).prop_map(|values| json!({"type": "string", "enum": values})),
        vec(0i64..50, 1..4).prop_map(|values| json!({"enum": values})),
        Just(json!({"enum": ["a", 1, null]})),
        "[a-z]{1,6}".prop_map(|value| json!({"type": "string", "const": value})),
        (0i64..9).prop_map(|value| json!({"const": value})),
        Just(json!({})),
        Just(json!(true)),
        Just(json!({"type": ["string", "integer"]})),
        Just(json!({"type": ["string", "null"]})),
        Just(json!({"type": "object"})),
        Just(json!({"type": "array"})),
        prop::sample::select(vec!["D0", "D1", "D2"]).prop_map(|name| json!({"$ref": format!("#/$defs/{name}")})),
        prop::sample::select(vec!["D0", "D1", "D2"]).prop_map(
            |name| json!({"$ref": format!("#/$defs/{name}"), "description": "A referenced thing.", "default": null})
        ),
    ]
}

/// An object schema over `inner` property schemas.
fn object(inner: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
    let property = (prop::sample::select(NAMES), inner, any::<bool>(), option::of("[A-Za-z ]{0,30}"));
    (vec(property, 1..6), any::<bool>())
        .prop_map(|(properties, closed)| {
            let mut map = Map::new();
            let mut required = Vec::new();
            for (name, mut schema, is_required, description) in properties {
                if let (Some(text), Value::Object(node)) = (description, &mut schema) {
                    node.insert("description".into(), text.into());
                }
                if is_required && !required.contains(&json!(name)) {
                    required.push(json!(name));
                }
                map.insert(name.to_owned(), schema);
            }
            let mut node = json!({"type": "object", "properties": map, "required": required});
            if closed {
                node["additionalProperties"] = json!(false);
            }
            node
        })
        .boxed()
}

/// Any schema: leaves combined up to a few levels deep.
fn schema() -> BoxedStrategy<Value> {
    leaf()
        .prop_recursive(4, 48, 5, |inner| {
            prop_oneof![
                object(inner.clone()),
                (inner.clone(), option::of(0u32..3), any::<bool>()).prop_map(|(items, min, unique)| {
                    let mut node = json!({"type": "array", "items": items});
                    if let Some(min) = min {
                        node["minItems"] = json!(min);
                        node["maxItems"] = json!(min + 20);
                    }
                    if unique {
                        node["uniqueItems"] = json!(true);
                    }
                    node
                }),
                inner.clone().prop_map(|values| json!({"type": "object", "additionalProperties": values})),
                inner.clone().prop_map(|some| json!({"anyOf": [some, {"type": "null"}], "description": "Optional."})),
                vec(inner.clone(), 2..4).prop_map(|branches| json!({"oneOf": branches})),
                vec(inner.clone(), 1..3).prop_map(|branches| json!({"anyOf": branches})),
                inner.clone().prop_map(|only| json!({"allOf": [only], "description": "All of one."})),
                (object(inner.clone()), object(inner.clone())).prop_map(|(a, b)| json!({"allOf": [a, b]})),
                vec(inner.clone(), 1..3)
                    .prop_map(|positions| json!({"type": "array", "prefixItems": positions, "items": false})),
                inner.prop_map(
                    |value| json!({"type": "integer", "default": value.get("type").cloned().unwrap_or(json!(5))})
                ),
            ]
        })
        .boxed()
}

/// A whole argument schema: an object root and three definitions, `D0`
/// recursive through itself, `D1` and `D2` random (they may refer to each other).
fn root_schema() -> impl Strategy<Value = Value> {
    (object(schema()), schema(), schema(), object(schema()), any::<bool>()).prop_map(
        |(mut root, d1, d2, d0_extra, header)| {
            let mut d0 = json!({
                "type": "object",
                "description": "A node of a tree.",
                "properties": {
                    "label": {"type": "string"},
                    "next": {"anyOf": [{"$ref": "#/$defs/D0"}, {"type": "null"}]},
                    "kids": {"type": "array", "items": {"$ref": "#/$defs/D0"}}
                },
                "required": ["label"]
            });
            if let Some(extra) = d0_extra["properties"].as_object() {
                for (name, schema) in extra {
                    d0["properties"][name] = schema.clone();
                }
            }
            root["$defs"] = json!({"D0": d0, "D1": d1, "D2": d2});
            if header {
                root["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
                root["title"] = json!("Arguments");
            }
            root
        },
    )
}

fn tool(name: &str, description: String, schema: Value) -> ToolDefinition {
    serde_json::from_value(json!({"name": name, "description": description, "input_schema": schema})).unwrap()
}

/// A description of about `length` characters, in words.
fn description(length: usize) -> String {
    "Does a thing with care. ".repeat(length / 24 + 1)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn every_provider_accepts_every_converted_schema(
        schemas in vec(root_schema(), 1..4),
        length in 1usize..1500,
        modules in btree_set("[a-z]{1,3}(__[a-z]{1,3})?", 1..3),
    ) {
        let modules: Vec<String> = modules.into_iter().collect();
        let tools: Vec<ToolDefinition> = schemas
            .into_iter()
            .enumerate()
            .map(|(i, schema)| {
                let module = &modules[i % modules.len()];
                // `a.b__c` and `a__b.c` meet as `a__b__c`: names must still come out unique.
                let name = if i % 2 == 0 { format!("{module}.t__{i}") } else { format!("{module}__t.{i}") };
                tool(&name, description(length), schema)
            })
            .collect();
        for provider in PROVIDERS {
            let rendered = render_tools(provider.format(), &tools);
            let violations = rules::check_all(provider, &rendered);
            prop_assert!(violations.is_empty(), "{provider:?}: {violations:#?}\n{rendered:#}");
            for definition in rendered.as_array().unwrap() {
                let schema = definition
                    .pointer("/function/parameters")
                    .or_else(|| ["parameters", "input_schema", "parametersJsonSchema"].iter().find_map(|k| definition.get(*k)))
                    .unwrap();
                let meta = jsonschema::meta::validate(schema);
                prop_assert!(meta.is_ok(), "{provider:?}: not valid JSON Schema: {meta:?}\n{schema:#}");
            }
        }
        let prompt = render_tools(ToolFormat::Prompt, &tools);
        let prompt = prompt["prompt"].as_str().unwrap();
        for tool in &tools {
            let heading = format!("### {}\n", tool.name);
            prop_assert!(prompt.contains(&heading));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// A request's worth of tools (more than Anthropic's 20 strict ones):
    /// the whole listing keeps the per-request strict budget, whether
    /// rendered fresh or from cached text.
    #[test]
    fn long_listings_keep_anthropics_per_request_strict_budget(schemas in vec(object(schema()), 21..36)) {
        let tools: Vec<ToolDefinition> =
            schemas.into_iter().enumerate().map(|(i, schema)| tool(&format!("m.t{i}"), description(40), schema)).collect();
        let fresh = render_tools(ToolFormat::Anthropic, &tools);
        let violations = rules::check_all(Provider::Anthropic, &fresh);
        prop_assert!(violations.is_empty(), "{violations:#?}");
        let cached: Value = serde_json::from_str(&ConvertedCache::new().render_tools_json(ToolFormat::Anthropic, &tools.iter().map(Listed::from).collect::<Vec<_>>())).unwrap();
        prop_assert_eq!(cached, fresh);
    }
}

#[test]
fn the_checker_catches_raw_schemas_that_the_converters_fix() {
    // The property above is only worth something if the checker refuses
    // what providers refuse: raw schemars-style input fails every provider.
    let raw = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "n": {"type": ["integer", "null"], "format": "uint8", "default": 5},
            "home": {"$ref": "#/$defs/Place", "description": "Where."}
        },
        "$defs": {"Place": {"type": "object", "properties": {"x": {"const": 1}}}}
    });
    let definitions = [
        (PROVIDERS[0], json!({"type": "function", "function": {"name": "m.t", "parameters": raw, "strict": true}})),
        (PROVIDERS[1], json!({"type": "function", "name": "m.t", "parameters": raw, "strict": true})),
        (PROVIDERS[2], json!({"name": "m.t", "input_schema": raw})),
        (PROVIDERS[3], json!({"name": "m.t", "parameters": raw})),
        (PROVIDERS[4], json!({"name": "m.t", "parametersJsonSchema": raw})),
    ];
    for (provider, definition) in definitions {
        assert!(!rules::check(provider, &definition).is_empty(), "{provider:?}");
        let converted = &render_tools(provider.format(), &[tool("m.t", "d".into(), raw.clone())])[0];
        assert_eq!(rules::check(provider, converted), [], "{provider:?}: {converted:#}");
    }
}
