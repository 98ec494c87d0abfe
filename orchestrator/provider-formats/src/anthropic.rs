//! Anthropic Messages: `{name, description, input_schema}` definitions,
//! `tool_use` content blocks in, `tool_result` blocks (with `is_error`) out.

use module_sdk::contract::{ToolDefinition, ToolResult};
use serde_json::{Value, json};

use super::calls::{arguments_from_value, generated_id, not_shape, result_text};
use super::compile;
use super::{ProviderError, RequestedCall};

/// An Anthropic tool definition (non-strict; the schema in JSON Schema 2020-12).
pub fn definition(tool: &ToolDefinition, name: &str) -> Value {
    json!({
        "name": name,
        "description": tool.description.trim(),
        "input_schema": compile::prepare(&compile::input_schema(tool)),
    })
}

/// The `tool_use` blocks of a message or Messages API response (its
/// `content`), or of a bare content list.
pub fn parse(body: &Value) -> Result<Vec<RequestedCall>, ProviderError> {
    let blocks = match body.get("content").unwrap_or(body) {
        Value::Array(blocks) => blocks,
        Value::String(_) => return Ok(Vec::new()),
        _ => return Err(not_shape("anthropic", "expected a message with a `content` list of blocks")),
    };
    blocks
        .iter()
        .enumerate()
        .filter(|(_, block)| block.get("type").and_then(Value::as_str) == Some("tool_use"))
        .map(|(index, block)| {
            let name = block
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| not_shape("anthropic", format!("tool_use block {index} has no `name`")))?;
            Ok(RequestedCall {
                call_id: block.get("id").and_then(Value::as_str).map_or_else(|| generated_id(index), str::to_owned),
                provider_name: name.to_owned(),
                tool_name: None,
                arguments: arguments_from_value(block.get("input").unwrap_or(&Value::Null)),
            })
        })
        .collect()
}

/// One user message with a `tool_result` block per result.
pub fn results(results: &[(RequestedCall, ToolResult)]) -> Value {
    let blocks: Vec<Value> = results
        .iter()
        .map(|(call, result)| {
            json!({
                "type": "tool_result",
                "tool_use_id": call.call_id,
                "content": result_text(result),
                "is_error": !result.success,
            })
        })
        .collect();
    json!({"role": "user", "content": blocks})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_only_messages_have_no_calls_and_bad_shapes_are_refused() {
        assert_eq!(parse(&json!({"role": "assistant", "content": "just text"})).unwrap(), []);
        assert_eq!(parse(&json!([{"type": "text", "text": "hi"}])).unwrap(), []);
        assert!(parse(&json!({"content": 5})).is_err());
        assert!(parse(&json!([{"type": "tool_use", "id": "t"}])).is_err());
    }

    #[test]
    fn input_that_is_not_an_object_is_reported_to_the_model() {
        let calls = parse(&json!([{"type": "tool_use", "id": "t1", "name": "m__t", "input": [1]}])).unwrap();
        assert!(calls[0].arguments.as_ref().unwrap_err().contains("not an array"));
    }
}
