//! What every provider shares on the way back: call ids, reading a model's
//! arguments, the text of a result, and the answer for a call that cannot run.

use module_sdk::ErrorKind;
use module_sdk::contract::ToolResult;
use serde_json::{Map, Value};

use super::{ProviderError, RequestedCall};

/// The start of every call id we make up for a provider that sends none.
pub const GENERATED_ID_PREFIX: &str = "generated_call_";

/// The id of the `index`-th call of a message whose provider sends no ids.
pub fn generated_id(index: usize) -> String {
    format!("{GENERATED_ID_PREFIX}{}", index + 1)
}

/// Whether `id` is one we made up rather than one the provider sent.
pub fn is_generated_id(id: &str) -> bool {
    id.starts_with(GENERATED_ID_PREFIX)
}

/// The error for a body that is not `format`'s shape.
pub fn not_shape(format: &'static str, reason: impl Into<String>) -> ProviderError {
    ProviderError::NotProviderShape { format, reason: reason.into() }
}

/// Arguments a model sent as JSON text (OpenAI's form): an object, or a
/// message that tells the model what is wrong with the text.
pub fn arguments_from_text(text: &str) -> Result<Map<String, Value>, String> {
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(text) {
        Ok(value) => arguments_from_value(&value),
        Err(e) => Err(format!(
            "the arguments are not valid JSON ({e}); send them again as one JSON object, e.g. {{\"name\": \"value\"}}"
        )),
    }
}

/// Arguments a model sent as a JSON value: an object, or a message saying
/// what was sent instead.
pub fn arguments_from_value(value: &Value) -> Result<Map<String, Value>, String> {
    match value {
        Value::Object(map) => Ok(map.clone()),
        Value::Null => Ok(Map::new()),
        other => Err(format!("the arguments must be a JSON object of named arguments, not {}", json_kind(other))),
    }
}

/// "a string", "an array"... for messages.
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A result as the text a model reads: the result itself (a string as it
/// is, anything else as JSON), or `Error (kind): message`.
pub fn result_text(result: &ToolResult) -> String {
    if result.success {
        return match &result.result {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
    }
    let message = result.error.as_deref().unwrap_or("the tool failed without saying why");
    match result.error_kind {
        Some(kind) => format!("Error ({kind}): {message}"),
        None => format!("Error: {message}"),
    }
}

/// What a call runs with, its tool name and arguments; or, when it cannot
/// run (the name maps to no tool, the arguments could not be read), the
/// failed result to answer instead, telling the model what to fix.
pub fn executable(call: &RequestedCall) -> Result<(&str, &Map<String, Value>), Box<ToolResult>> {
    let Some(tool) = &call.tool_name else {
        let message = format!(
            "there is no tool named `{}`; call one of the tools you were given, by its exact name",
            call.provider_name
        );
        return Err(Box::new(ToolResult::failure(call.provider_name.clone(), ErrorKind::UnknownTool, message)));
    };
    match &call.arguments {
        Ok(arguments) => Ok((tool, arguments)),
        Err(why) => Err(Box::new(ToolResult::failure(tool.clone(), ErrorKind::InvalidArguments, why.clone()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn malformed_argument_text_explains_itself() {
        let err = arguments_from_text("{\"query\": \"rust\"").unwrap_err();
        assert!(err.starts_with("the arguments are not valid JSON (EOF while parsing an object"), "{err}");
        assert!(arguments_from_text("[1]").unwrap_err().contains("not an array"));
        assert_eq!(arguments_from_text(" ").unwrap(), Map::new());
        assert_eq!(arguments_from_text("{\"a\": 1}").unwrap()["a"], 1);
    }

    #[test]
    fn results_read_as_text() {
        assert_eq!(result_text(&ToolResult::success("m.t", json!("plain"))), "plain");
        assert_eq!(result_text(&ToolResult::success("m.t", json!({"a": 1}))), "{\"a\":1}");
        let failed = ToolResult::failure("m.t", ErrorKind::Timeout, "too slow");
        assert_eq!(result_text(&failed), "Error (timeout): too slow");
    }

    #[test]
    fn unknown_tools_and_unreadable_arguments_are_not_executed() {
        let mut call = RequestedCall {
            call_id: generated_id(0),
            provider_name: "m__t".into(),
            tool_name: None,
            arguments: Ok(Map::new()),
            arguments_cut_short: false,
        };
        assert!(is_generated_id(&call.call_id));
        assert_eq!(executable(&call).unwrap_err().error_kind, Some(ErrorKind::UnknownTool));
        call.tool_name = Some("m.t".into());
        assert_eq!(executable(&call), Ok(("m.t", &Map::new())));
        call.arguments = Err("bad".into());
        let result = executable(&call).unwrap_err();
        assert_eq!((result.tool_name.as_str(), result.error.as_deref()), ("m.t", Some("bad")));
    }
}
