//! OpenAI: Chat Completions (`{"type":"function","function":{...}}`,
//! `tool_calls` with arguments as JSON text, `role: tool` answers) and the
//! Responses API (the same fields flat, `function_call` output items,
//! `function_call_output` answers).

use module_sdk::contract::{ToolDefinition, ToolResult};
use serde_json::{Map, Value, json};

use super::calls::{arguments_from_text, arguments_from_value, generated_id, not_shape, result_text};
use super::compile::{self, Compiled};
use super::json_object::{ObjectText, object_text};
use super::names::{MAX_DESCRIPTION_CHARS, trim_description};
use super::{CallItems, ProviderError, RequestedCall};

/// The function fields both OpenAI APIs share.
fn function_fields(tool: &ToolDefinition, name: &str) -> Map<String, Value> {
    let Compiled { schema, strict } = compile::openai(&compile::input_schema(tool));
    let mut fields = Map::new();
    fields.insert("name".into(), name.into());
    fields.insert("description".into(), trim_description(&tool.description, MAX_DESCRIPTION_CHARS).into());
    fields.insert("parameters".into(), schema);
    fields.insert("strict".into(), strict.into());
    fields
}

/// The function fields both OpenAI APIs share, written into `object`
/// (the schema straight from its compiled tree).
fn function_fields_json<'o>(tool: &ToolDefinition, name: &str, object: ObjectText<'o>) -> ObjectText<'o> {
    compile::with_openai(&compile::input_schema(tool), |schema, strict| {
        object
            .string("name", name)
            .string("description", &trim_description(&tool.description, MAX_DESCRIPTION_CHARS))
            .field("parameters", |out| schema.write(out))
            .boolean("strict", strict)
    })
}

/// [`chat_definition`] as JSON text, written without building it as a `Value`.
pub fn chat_definition_json(tool: &ToolDefinition, name: &str) -> String {
    object_text(|object| {
        object
            .string("type", "function")
            .field("function", |out| function_fields_json(tool, name, ObjectText::start(out)).end())
    })
}

/// [`responses_definition`] as JSON text, written without building it as a `Value`.
pub fn responses_definition_json(tool: &ToolDefinition, name: &str) -> String {
    object_text(|object| function_fields_json(tool, name, object.string("type", "function")))
}

/// A Chat Completions tool definition.
pub fn chat_definition(tool: &ToolDefinition, name: &str) -> Value {
    // Built in place: `json!` would copy the whole compiled schema once more.
    let mut definition = Map::new();
    definition.insert("type".into(), "function".into());
    definition.insert("function".into(), Value::Object(function_fields(tool, name)));
    Value::Object(definition)
}

/// A Responses API tool definition.
pub fn responses_definition(tool: &ToolDefinition, name: &str) -> Value {
    let mut fields = Map::new();
    fields.insert("type".into(), "function".into());
    fields.extend(function_fields(tool, name));
    Value::Object(fields)
}

/// The `tool_calls` of a Chat Completions response (first choice), an
/// assistant message, or a bare `tool_calls` list, not yet read.
pub fn chat_calls(body: &Value) -> Result<CallItems<'_>, ProviderError> {
    let message = body.pointer("/choices/0/message").unwrap_or(body);
    let calls = match message {
        Value::Array(calls) => calls,
        Value::Object(map) => match map.get("tool_calls") {
            Some(Value::Array(calls)) => calls,
            Some(Value::Null) | None if map.contains_key("role") || map.contains_key("content") => {
                return Ok(Vec::new());
            }
            _ => return Err(not_shape("openai", "expected an assistant message with `tool_calls`")),
        },
        _ => return Err(not_shape("openai", "expected a JSON object or a list of tool calls")),
    };
    Ok(calls.iter().enumerate().collect())
}

/// The `index`-th of [`chat_calls`].
pub fn read_chat_call(index: usize, call: &Value) -> Result<RequestedCall, ProviderError> {
    let function =
        call.get("function").ok_or_else(|| not_shape("openai", format!("tool call {index} has no `function`")))?;
    let name = function
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| not_shape("openai", format!("tool call {index} has no function name")))?;
    let call_id = call.get("id").and_then(Value::as_str).map_or_else(|| generated_id(index), str::to_owned);
    Ok(requested(call_id, name, function.get("arguments")))
}

/// The `function_call` items of a Responses API response (its `output`) or
/// of a bare item list, not yet read.
pub fn responses_calls(body: &Value) -> Result<CallItems<'_>, ProviderError> {
    let items = match body.get("output").unwrap_or(body) {
        Value::Array(items) => items,
        _ => return Err(not_shape("openai-responses", "expected a response with `output` or a list of output items")),
    };
    Ok(items
        .iter()
        .enumerate()
        .filter(|(_, item)| item.get("type").and_then(Value::as_str) == Some("function_call"))
        .collect())
}

/// The output item `index` of [`responses_calls`].
pub fn read_responses_call(index: usize, item: &Value) -> Result<RequestedCall, ProviderError> {
    let name = item
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| not_shape("openai-responses", format!("output item {index} has no `name`")))?;
    let call_id = item
        .get("call_id")
        .or_else(|| item.get("id"))
        .and_then(Value::as_str)
        .map_or_else(|| generated_id(index), str::to_owned);
    Ok(requested(call_id, name, item.get("arguments")))
}

/// A call whose arguments came as JSON text (or, from lenient proxies, as an object).
fn requested(call_id: String, name: &str, arguments: Option<&Value>) -> RequestedCall {
    let arguments = match arguments {
        Some(Value::String(text)) => arguments_from_text(text),
        Some(value) => arguments_from_value(value),
        None => Ok(Map::new()),
    };
    RequestedCall { call_id, provider_name: name.to_owned(), tool_name: None, arguments, arguments_cut_short: false }
}

/// One `role: tool` message per result, for Chat Completions.
pub fn chat_results(results: &[(RequestedCall, ToolResult)]) -> Value {
    results
        .iter()
        .map(|(call, result)| json!({"role": "tool", "tool_call_id": call.call_id, "content": result_text(result)}))
        .collect()
}

/// One `function_call_output` item per result, for the Responses API.
pub fn responses_results(results: &[(RequestedCall, ToolResult)]) -> Value {
    results
        .iter()
        .map(|(call, result)| {
            json!({"type": "function_call_output", "call_id": call.call_id, "output": result_text(result)})
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CallFormat, parse_any};

    #[test]
    fn a_message_without_tool_calls_has_none_and_other_shapes_are_refused() {
        assert_eq!(
            parse_any(CallFormat::OpenAi, &json!({"role": "assistant", "content": "hi", "tool_calls": null})).unwrap(),
            []
        );
        assert!(parse_any(CallFormat::OpenAi, &json!({"text": "hi"})).is_err());
        assert!(parse_any(CallFormat::OpenAi, &json!([{"id": "x"}])).is_err());
        assert!(parse_any(CallFormat::OpenAiResponses, &json!({"output": "x"})).is_err());
    }

    #[test]
    fn responses_items_other_than_function_calls_are_skipped() {
        let calls = parse_any(
            CallFormat::OpenAiResponses,
            &json!({"output": [
                {"type": "reasoning", "id": "r1"},
                {"type": "function_call", "call_id": "c1", "name": "m__t", "arguments": "{\"a\": 1}"}
            ]}),
        )
        .unwrap();
        assert_eq!(calls.len(), 1);
        assert_eq!((calls[0].call_id.as_str(), calls[0].arguments.as_ref().unwrap()["a"].clone()), ("c1", json!(1)));
    }
}
