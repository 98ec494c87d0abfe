//! Gemini: `functionDeclarations` entries with OpenAPI-subset `parameters`
//! or with `parametersJsonSchema`, `functionCall` parts in, and
//! `functionResponse` parts out.

use module_sdk::contract::{ToolDefinition, ToolResult};
use serde_json::{Map, Value, json};

use super::calls::{arguments_from_value, generated_id, is_generated_id, not_shape};
use super::compile;
use super::json_object::object_text;
use super::{CallItems, ProviderError, RequestedCall};

/// A function declaration with OpenAPI-subset `parameters`.
pub fn definition(tool: &ToolDefinition, name: &str) -> Value {
    declaration(tool, name, "parameters", compile::gemini(&compile::input_schema(tool)))
}

/// A function declaration with `parametersJsonSchema`.
pub fn json_schema_definition(tool: &ToolDefinition, name: &str) -> Value {
    declaration(tool, name, "parametersJsonSchema", compile::prepare(&compile::input_schema(tool)))
}

/// [`definition`] as JSON text, written without building the declaration
/// as a `Value` (the schema straight from its converted tree).
pub fn definition_json(tool: &ToolDefinition, name: &str) -> String {
    compile::with_gemini(&compile::input_schema(tool), |schema| {
        declaration_json(tool, name, "parameters", |out| schema.write(out))
    })
}

/// [`json_schema_definition`] as JSON text, the schema written straight
/// from the tool's (no `Value` tree built in between).
pub fn json_schema_definition_json(tool: &ToolDefinition, name: &str) -> String {
    let schema = compile::input_schema(tool);
    declaration_json(tool, name, "parametersJsonSchema", |out| compile::prepare_json(&schema, out))
}

/// The text of [`declaration`], the schema written by `schema`.
fn declaration_json(tool: &ToolDefinition, name: &str, field: &str, schema: impl FnOnce(&mut Vec<u8>)) -> String {
    object_text(|object| {
        object.string("name", name).string("description", tool.description.trim()).field(field, schema)
    })
}

/// A function declaration with `schema` under `field`, built in place
/// (`json!` would copy the whole schema once more).
fn declaration(tool: &ToolDefinition, name: &str, field: &str, schema: Value) -> Value {
    let mut declaration = Map::new();
    declaration.insert("name".into(), name.into());
    declaration.insert("description".into(), tool.description.trim().into());
    declaration.insert(field.into(), schema);
    Value::Object(declaration)
}

/// The `functionCall`s in the parts of a `generateContent` response (first
/// candidate), a content, or a bare part list, not yet read.
pub fn function_calls(body: &Value) -> Result<CallItems<'_>, ProviderError> {
    let content = body.pointer("/candidates/0/content").unwrap_or(body);
    let parts = match content.get("parts").unwrap_or(content) {
        Value::Array(parts) => parts,
        _ => return Err(not_shape("gemini", "expected a content with a `parts` list")),
    };
    Ok(parts
        .iter()
        .enumerate()
        .filter_map(|(index, part)| part.get("functionCall").map(|call| (index, call)))
        .collect())
}

/// The `functionCall` of part `index` of [`function_calls`].
pub fn read_function_call(index: usize, call: &Value) -> Result<RequestedCall, ProviderError> {
    let name = call
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| not_shape("gemini", format!("functionCall in part {index} has no `name`")))?;
    Ok(RequestedCall {
        call_id: call.get("id").and_then(Value::as_str).map_or_else(|| generated_id(index), str::to_owned),
        provider_name: name.to_owned(),
        tool_name: None,
        arguments: arguments_from_value(call.get("args").unwrap_or(&Value::Null)),
        arguments_cut_short: false,
    })
}

/// One user content with a `functionResponse` part per result: the output
/// under `output`, a failure under `error`; the call's id when Gemini sent one.
pub fn results(results: &[(RequestedCall, ToolResult)]) -> Value {
    let parts: Vec<Value> = results
        .iter()
        .map(|(call, result)| {
            let response = if result.success {
                json!({"output": result.result})
            } else {
                json!({"error": {
                    "message": result.error.as_deref().unwrap_or("the tool failed without saying why"),
                    "kind": result.error_kind,
                }})
            };
            let mut function_response = Map::new();
            if !is_generated_id(&call.call_id) {
                function_response.insert("id".into(), call.call_id.clone().into());
            }
            function_response.insert("name".into(), call.provider_name.clone().into());
            function_response.insert("response".into(), response);
            json!({"functionResponse": function_response})
        })
        .collect();
    json!({"role": "user", "parts": parts})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CallFormat, parse_any};

    #[test]
    fn declarations_as_text_are_the_values_text() {
        let tool: ToolDefinition = serde_json::from_value(json!({
            "name": "m.t", "description": "  Say \"hi\"\n ",
            "input_schema": {"type": "object", "title": "T", "properties": {"a\u{1}": {"$ref": "#/$defs/A"}},
                "$defs": {"A": {"type": ["string", "null"], "maxLength": 3}}}
        }))
        .unwrap();
        assert_eq!(definition_json(&tool, "m__t"), serde_json::to_string(&definition(&tool, "m__t")).unwrap());
        let text = json_schema_definition_json(&tool, "m__t");
        assert_eq!(text, serde_json::to_string(&json_schema_definition(&tool, "m__t")).unwrap());
    }

    #[test]
    fn text_parts_are_skipped_and_bad_shapes_refused() {
        let calls = parse_any(
            CallFormat::Gemini,
            &json!({"role": "model", "parts": [{"text": "thinking"}, {"functionCall": {"name": "m__t"}}]}),
        )
        .unwrap();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].call_id, generated_id(1));
        assert_eq!(calls[0].arguments, Ok(Map::new()));
        assert!(parse_any(CallFormat::Gemini, &json!({"parts": {}})).is_err());
        assert!(parse_any(CallFormat::Gemini, &json!([{"functionCall": {"args": {}}}])).is_err());
    }
}
