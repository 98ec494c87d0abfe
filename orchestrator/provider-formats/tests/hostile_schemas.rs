//! Schemas built to explode when inlined (long `$defs` chains, a doubling
//! `$ref` graph) converted to every format on a thread with the 2 MiB stack
//! of a request thread: each conversion finishes, with an answer of bounded
//! size, and reading a call back against such a schema does too.

use module_sdk::contract::ToolDefinition;
use provider_formats::{CallFormat, ToolFormat, parse_calls, render_tools};
use serde_json::{Map, Value, json};

/// A request thread's stack (tokio's default for its workers).
const STACK: usize = 2 * 1024 * 1024;

/// `$defs` `D0`..`D{length-1}`, each an object whose `fan_out` properties
/// refer to the next; `described` puts a description beside each reference,
/// which makes the shared first pass inline it rather than keep it.
fn chain(length: usize, fan_out: usize, described: bool) -> Value {
    let mut defs = Map::new();
    for i in 0..length {
        let properties: Map<String, Value> = (0..fan_out)
            .map(|k| {
                let mut next = json!({"$ref": format!("#/$defs/D{}", (i + 1) % length)});
                if described {
                    next["description"] = json!(format!("Field {k} of D{i}."));
                }
                (format!("p{k}"), next)
            })
            .collect();
        defs.insert(format!("D{i}"), json!({"type": "object", "properties": properties}));
    }
    json!({"type": "object", "properties": {"start": {"$ref": "#/$defs/D0"}}, "required": ["start"], "$defs": defs})
}

/// An object with 600 properties and a union of 20 branches of 20 branches:
/// Gemini's form copies the properties into each of the 400 branches.
fn nested_unions() -> Value {
    let properties: Map<String, Value> = (0..600).map(|i| (format!("p{i}"), json!({"type": "string"}))).collect();
    let inner = json!({"anyOf": vec![json!({"required": ["p1"]}); 20]});
    json!({"type": "object", "properties": {"x": {"type": "object", "properties": properties, "anyOf": vec![inner; 20]}}})
}

fn tool(schema: Value) -> ToolDefinition {
    serde_json::from_value(json!({
        "name": "evil.tool",
        "description": "A tool with a hostile schema.",
        "parameters": [],
        "required_permission": "guest",
        "input_schema": schema
    }))
    .unwrap()
}

/// Runs `f` on a thread with a request thread's stack, and returns its answer.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(f)
        .unwrap()
        .join()
        .expect("the conversion overflowed or panicked")
}

#[test]
fn hostile_schemas_convert_in_every_format_within_a_bounded_size() {
    let schemas = [
        ("2,000-long chain", chain(2_000, 1, false)),
        ("2,000-long described chain", chain(2_000, 1, true)),
        ("20,000-long chain", chain(20_000, 1, false)),
        ("20,000-long described chain", chain(20_000, 1, true)),
        ("doubling graph, 20 levels", chain(20, 2, false)),
        ("described doubling graph, 20 levels", chain(20, 2, true)),
        ("nested unions beside 600 properties", nested_unions()),
    ];
    for (what, schema) in schemas {
        let tools = vec![tool(schema)];
        for format in ToolFormat::ALL {
            let shared = tools.clone();
            let size = on_small_stack(move || render_tools(format, &shared).to_string().len());
            assert!(size < 64 * 1024 * 1024, "{what} in {format}: {size} bytes");
        }
        for format in [CallFormat::OpenAi, CallFormat::Gemini, CallFormat::Anthropic] {
            let shared = tools.clone();
            let message = match format {
                CallFormat::Gemini => {
                    json!({"parts": [{"functionCall": {"name": "evil__tool", "args": {"start": {"p0": {}}}}}]})
                }
                CallFormat::Anthropic => {
                    json!([{"type": "tool_use", "id": "t", "name": "evil__tool", "input": {"start": {}}}])
                }
                _ => {
                    json!({"tool_calls": [{"id": "c", "function": {"name": "evil__tool", "arguments": "{\"start\": {}}"}}]})
                }
            };
            let calls =
                on_small_stack(move || parse_calls(format, &message, &shared, usize::MAX).map(|calls| calls.len()));
            assert_eq!(calls, Ok(1), "{what} in {format}");
        }
    }
}
