//! Schemas whose references carry sibling keywords, or whose unions need
//! the right branch, converted for every provider: each definition obeys
//! the provider's rules ([`rules::check_all`]), and arguments a model shapes
//! by the converted schema map back to arguments the tool's original schema
//! accepts.

use module_sdk::contract::ToolDefinition;
use provider_formats::rules::check_all;
use provider_formats::{CallFormat, PROVIDERS, RequestedCall, ToolFormat, parse_calls, render_tools};
use serde_json::{Value, json};

fn tool(schema: &Value) -> ToolDefinition {
    serde_json::from_value(json!({
        "name": "trip.plan", "description": "Plans a trip.", "parameters": [],
        "required_permission": "guest", "input_schema": schema
    }))
    .unwrap()
}

/// Arguments a model could send for `node` of the converted schema `root`:
/// every property filled in, `null` where the type allows it, the last
/// branch of a union (of a node without properties of its own), the first
/// value of an `enum`.
fn shaped(root: &Value, node: &Value, depth: usize) -> Value {
    let node = match node.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix('#')) {
        Some(pointer) => root.pointer(pointer).unwrap_or(&Value::Null),
        None => node,
    };
    if let Some(first) = node.get("enum").and_then(|values| values.get(0)) {
        return first.clone();
    }
    if let Some(branches) = node.get("anyOf").and_then(Value::as_array).filter(|_| node.get("properties").is_none()) {
        let branch = branches.iter().rev().find(|b| b.get("type") != Some(&json!("null"))).unwrap();
        return shaped(root, branch, depth);
    }
    let types: Vec<&str> = match node.get("type") {
        Some(Value::String(name)) => vec![name],
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
        _ if node.get("properties").is_some() => vec!["object"],
        _ => vec![],
    };
    if types.contains(&"null") {
        return Value::Null;
    }
    match types.first().copied() {
        Some("object") if depth < 8 => {
            let properties = node.get("properties").and_then(Value::as_object).into_iter().flatten();
            Value::Object(properties.map(|(name, p)| (name.clone(), shaped(root, p, depth + 1))).collect())
        }
        Some("array") => json!([]),
        Some("integer" | "number") => json!(1),
        Some("boolean") => json!(true),
        _ => json!("x"),
    }
}

/// The call message of `format` asking for `trip__plan` with `arguments`.
fn message(format: CallFormat, arguments: &Value) -> Value {
    match format {
        CallFormat::Gemini => json!({"parts": [{"functionCall": {"name": "trip__plan", "args": arguments}}]}),
        CallFormat::Anthropic => json!([{"type": "tool_use", "id": "t", "name": "trip__plan", "input": arguments}]),
        _ => {
            json!({"tool_calls": [{"id": "c", "function": {"name": "trip__plan", "arguments": arguments.to_string()}}]})
        }
    }
}

/// `schema` converted for every provider, by format, each definition
/// checked against the provider's rules.
fn converted(schema: &Value) -> Vec<(ToolFormat, Value)> {
    let tools = [tool(schema)];
    let mut converted = Vec::new();
    for provider in PROVIDERS {
        let format = provider.format();
        let definitions = render_tools(format, &tools);
        assert_eq!(check_all(provider, &definitions), [], "{format:?}: {definitions:#}");
        converted.push((format, definitions[0].clone()));
    }
    converted
}

/// [`converted`], and a model's shaped arguments mapped back for each call
/// format: the original schema accepts them.
fn round_trip(schema: &Value) -> Vec<(ToolFormat, Value)> {
    let tools = [tool(schema)];
    let original = jsonschema::validator_for(schema).unwrap();
    let converted = converted(schema);
    for (format, definition) in &converted {
        let (parameters, calls) = match format {
            ToolFormat::OpenAiChat => {
                (&definition["function"]["parameters"], [CallFormat::OpenAi, CallFormat::OpenAiResponses].as_slice())
            }
            ToolFormat::Anthropic => (&definition["input_schema"], &[CallFormat::Anthropic][..]),
            ToolFormat::Gemini => (&definition["parameters"], &[CallFormat::Gemini][..]),
            _ => continue,
        };
        let arguments = shaped(parameters, parameters, 0);
        for &call in calls {
            let body = match call {
                CallFormat::OpenAiResponses => json!([{"type": "function_call", "call_id": "c", "name": "trip__plan",
                    "arguments": arguments.to_string()}]),
                call => message(call, &arguments),
            };
            let [RequestedCall { arguments: Ok(back), .. }] = &parse_calls(call, &body, &tools, 8).unwrap()[..] else {
                panic!("{call:?}: no arguments read from {body}");
            };
            let back = Value::Object(back.clone());
            let errors: Vec<String> = original.iter_errors(&back).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "{call:?}: {arguments} came back as {back}, refused: {errors:?}");
        }
    }
    converted
}

/// The OpenAI Chat definition's `function` among `converted`.
fn openai(converted: &[(ToolFormat, Value)]) -> &Value {
    &converted.iter().find(|(format, _)| *format == ToolFormat::OpenAiChat).unwrap().1["function"]
}

fn string() -> Value {
    json!({"type": "string"})
}

#[test]
fn a_one_item_all_of_keeps_both_sides_properties() {
    let schema = json!({
        "type": "object", "required": ["p"],
        "properties": {"p": {"type": "object", "properties": {"a": string()},
            "allOf": [{"properties": {"b": string()}, "required": ["b"]}]}}
    });
    let converted = round_trip(&schema);
    let p = &openai(&converted)["parameters"]["properties"]["p"];
    assert_eq!(p["properties"], json!({"a": {"type": ["string", "null"]}, "b": string()}), "{p}");
}

#[test]
fn siblings_that_cannot_be_combined_leave_the_tool_non_strict() {
    let schema = json!({
        "type": "object",
        "properties": {"home": {"$ref": "#/$defs/Place", "properties": {"note": string()}}},
        "$defs": {"Place": {"type": "object", "properties": {"name": string()}, "additionalProperties": false}}
    });
    // A `note` beside what `additionalProperties: false` closes is refused by the original: no round trip.
    let converted = converted(&schema);
    assert_eq!(openai(&converted)["strict"], json!(false), "{:?}", openai(&converted));
}
#[test]
fn a_reference_with_sibling_properties_keeps_the_target_properties() {
    let schema = json!({
        "type": "object", "required": ["home"],
        "properties": {"home": {"$ref": "#/$defs/Place", "properties": {"note": string()}}},
        "$defs": {"Place": {"type": "object", "properties": {"name": string()}, "required": ["name"]}}
    });
    let converted = round_trip(&schema);
    let home = &openai(&converted)["parameters"]["properties"]["home"];
    assert_eq!(home["required"], json!(["name", "note"]), "{home}");
    assert_eq!(home["properties"]["name"], string());
}

#[test]
fn a_union_branch_is_chosen_by_the_names_the_model_sent() {
    let closed = |name: &str, required: bool| {
        let mut branch =
            json!({"type": "object", "properties": {name: {"type": "integer"}}, "additionalProperties": false});
        if required {
            branch["required"] = json!([name]);
        }
        branch
    };
    // The branch the model fills in is the last one (see `shaped`), its name renamed for Gemini.
    let schema = json!({
        "type": "object", "required": ["place", "pick"],
        "properties": {
            "place": {"anyOf": [closed("city", true), closed("zip-code", true)]},
            "pick": {"anyOf": [closed("a", false), closed("b-c", false)]}
        }
    });
    round_trip(&schema);
}

#[test]
fn a_reference_inside_a_one_item_all_of_maps_back() {
    let schema = json!({
        "type": "object", "required": ["p"],
        "properties": {"p": {"allOf": [{"$ref": "#/$defs/P"}]}},
        "$defs": {"P": {"type": "object", "properties": {"opt": {"type": "integer"}, "the-name": string()},
            "required": ["the-name"], "additionalProperties": false}}
    });
    round_trip(&schema);
}

#[test]
fn a_union_at_the_root_is_not_sent_strict_to_openai() {
    let schema = json!({
        "type": "object", "properties": {"c": string()},
        "anyOf": [{"type": "object", "properties": {"a": string()}, "required": ["a"]},
            {"type": "object", "properties": {"b": string()}, "required": ["b"]}]
    });
    let definitions = render_tools(ToolFormat::OpenAiChat, &[tool(&schema)]);
    assert_eq!(check_all(PROVIDERS[0], &definitions), [], "{definitions}");
    assert_eq!(definitions[0]["function"]["strict"], json!(false), "{definitions}");
}

#[test]
fn repeated_references_with_siblings_convert_within_every_provider_rules() {
    let schema = json!({"type": "object", "properties": {
        "tree": {"$ref": "#/$defs/T"},
        "t": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/properties/t"}}}}
    }, "$defs": {"T": {"type": "object", "properties": {"next": {
        "$ref": "#/$defs/T", "description": "N.", "properties": {"x": string()}, "anyOf": [{"required": ["x"]}]
    }}}}});
    round_trip(&schema);
}
